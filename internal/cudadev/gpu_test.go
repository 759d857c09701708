package cudadev

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/devcore"
	"github.com/weftccl/weft/internal/env"
)

// Flags of the child process that TestExportImportAcrossProcesses starts
// (the test binary re-executed).
var (
	childRole    = flag.String("cudadev.child", "", "run as the child of a cross-process test (role: produce)")
	childHandle  = flag.String("cudadev.handle", "", "hex handle the child imports")
	childOrdinal = flag.Int("cudadev.ordinal", 0, "GPU the child opens")
	childSeed    = flag.Uint("cudadev.seed", 0, "pattern seed the child writes")
)

func TestMain(m *testing.M) {
	flag.Parse()
	if *childRole != "" {
		if err := runChild(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		fmt.Println("child ok")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testBackend is the backend name the tests open devices for: the core's
// behaviour does not depend on it beyond names in messages.
const testBackend = "nvlink"

// requireOrSkip skips the test, or fails it when WEFT_REQUIRE names a CUDA
// backend (nvlink or pcie, both built on this core): a run on GPU hardware
// must not pass by skipping.
func requireOrSkip(t testing.TB, reason string) {
	t.Helper()
	for _, b := range []string{"nvlink", "pcie"} {
		if env.Required(b) {
			t.Fatalf("WEFT_REQUIRE=%s but: %s", b, reason)
		}
	}
	t.Skip(reason)
}

// openDev opens a device for the tests' backend with peer access.
func openDev(cfg hal.Config) (*Device, error) {
	return Open(cfg, Options{Backend: testBackend, PeerAccess: true})
}

// openTest opens GPU ordinal with a private kernel cache, skipping (with
// the probe's reason) where the backend is unavailable, and closes it at
// the end of the test. Tests that need more GPUs than the host has skip
// even under WEFT_REQUIRE: hosts with one GPU are legitimate.
func openTest(t *testing.T, ordinal int) *Device {
	t.Helper()
	if a := Probe(); !a.Available {
		requireOrSkip(t, "CUDA unavailable: "+a.Reason)
	}
	if n, _ := cuda.DeviceCount(); ordinal >= n {
		t.Skipf("needs %d GPUs, host has %d", ordinal+1, n)
	}
	if os.Getenv("WEFT_CACHE_DIR") == "" {
		t.Setenv("WEFT_CACHE_DIR", t.TempDir())
	}
	d, err := openDev(hal.Config{Ordinal: ordinal, Rank: ordinal})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	return d
}

func gpuCount(t *testing.T) int {
	n, err := cuda.DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// testKernels exercise weft_hal.h: a fill, a producer that stores into a
// (peer) buffer and release-stores a flag at system scope, a consumer that
// acquires the flag with a deadline, a counter for graph replay, and a
// kernel that spins on a host-mapped flag.
const testKernels = `
#include "weft_hal.h"
using namespace weft::hal;

struct FillParams { weft_u32* p; weft_u32 n; weft_u32 seed; };
extern "C" __global__ void fill(FillParams a) {
  for (weft_u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += gridDim.x * blockDim.x)
    a.p[i] = a.seed + 3u * i;
}

struct ProduceParams { weft_u32* data; weft_u64* flag; weft_u32 n; weft_u32 seed; weft_u64 value; };
extern "C" __global__ void produce(ProduceParams a) {
  for (weft_u32 i = threadIdx.x; i < a.n; i += blockDim.x) a.data[i] = a.seed + 3u * i;
  __syncthreads();
  if (threadIdx.x == 0) st_release_sys(a.flag, a.value);
}

struct ConsumeParams {
  const weft_u32* data; const weft_u64* flag; weft_u32* out; weft_u32* status;
  weft_u32 n; weft_u64 value; weft_u64 timeout_ns;
};
extern "C" __global__ void consume(ConsumeParams a) {
  __shared__ int ok;
  if (threadIdx.x == 0) {
    ok = 1;
    weft_u64 start = globaltimer_ns();
    while (ld_acquire_sys(a.flag) != a.value) {
      if (globaltimer_ns() - start > a.timeout_ns) { ok = 0; break; }
      backoff();
    }
  }
  __syncthreads();
  if (!ok) { if (threadIdx.x == 0) *a.status = 2; return; }
  for (weft_u32 i = threadIdx.x; i < a.n; i += blockDim.x) a.out[i] = a.data[i];
  __syncthreads();
  if (threadIdx.x == 0) { fence_sys(); *a.status = 1; }
}

struct IncrParams { weft_u64* counter; };
extern "C" __global__ void incr(IncrParams a) { red_add_relaxed_sys(a.counter, 1); }

// incr with a parameter block the size of the plans' weft_params (1,800
// bytes): BenchmarkDriverCallCost compares the launch costs.
struct BigIncrParams { weft_u64* counter; weft_u64 pad[224]; };
extern "C" __global__ void incr_big(const __grid_constant__ BigIncrParams a) { red_add_relaxed_sys(a.counter, 1); }

// bellpong: one side of a ping-pong whose hops are rung doorbells. Round
// i (1 … rounds): the starting side stores i into its bell and waits until
// its semaphore reads i; the other side waits for i, then rings. What
// carries a bell to the peer's semaphore is outside the kernel (a stream
// chain queued beforehand, BenchmarkDoorbellPut). *elapsed gets the
// globaltimer span of the rounds, or ~0 on a timeout.
struct BellParams { weft_u64* bell; const weft_u64* sem; weft_u64* elapsed; weft_u32 rounds; weft_u32 starts; weft_u64 timeout_ns; };
extern "C" __global__ void bellpong(BellParams a) {
  weft_u64 start = globaltimer_ns();
  for (weft_u32 i = 1; i <= a.rounds; i++) {
    if (a.starts) { fence_sys(); st_release_sys(a.bell, i); }
    while (ld_acquire_sys(a.sem) < i) {
      if (globaltimer_ns() - start > a.timeout_ns) { *a.elapsed = ~0ull; return; }
    }
    if (!a.starts) { fence_sys(); st_release_sys(a.bell, i); }
  }
  *a.elapsed = globaltimer_ns() - start;
}

struct SpinParams { const weft_u32* flag; weft_u32* done; weft_u64 timeout_ns; };
extern "C" __global__ void spin(SpinParams a) {
  weft_u64 start = globaltimer_ns();
  while (ld_relaxed_sys32(a.flag) == 0 && globaltimer_ns() - start < a.timeout_ns) backoff();
  st_relaxed_sys32(a.done, ld_relaxed_sys32(a.flag) ? 1u : 2u);
}
`

func compileTestKernels(t testing.TB, d *Device) *Module {
	t.Helper()
	m, err := d.CompileModule(hal.KernelSource{
		Name:    "cudadev_test.cu",
		Source:  testKernels,
		Headers: map[string]string{DeviceHeaderName: d.DeviceHeader()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if tt, ok := t.(*testing.T); ok {
		tt.Cleanup(func() { m.Close() })
	}
	return m
}

// params builds a kernel parameter struct: natural alignment, 8-byte tail.
type params struct{ b []byte }

func (p *params) align(n int) {
	for len(p.b)%n != 0 {
		p.b = append(p.b, 0)
	}
}
func (p *params) u32(v uint32) *params {
	p.align(4)
	p.b = binary.LittleEndian.AppendUint32(p.b, v)
	return p
}
func (p *params) u64(v uint64) *params {
	p.align(8)
	p.b = binary.LittleEndian.AppendUint64(p.b, v)
	return p
}
func (p *params) bytes() []byte { p.align(8); return p.b }

func pattern(n int, seed uint32) []byte {
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], seed+3*uint32(i))
	}
	return b
}

func launch(t testing.TB, m *Module, name string, s *Stream, grid, block int, p *params) {
	t.Helper()
	f, err := m.Kernel(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Launch(s, grid, block, 0, p.bytes()); err != nil {
		t.Fatal(err)
	}
}

func newStream(t *testing.T, d *Device) *Stream {
	t.Helper()
	s, err := d.NewCUDAStream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func waitStream(t testing.TB, s *Stream) {
	t.Helper()
	if err := s.Synchronize(time.Now().Add(60 * time.Second)); err != nil {
		t.Fatal(err)
	}
}

func TestProbeWithoutGPU(t *testing.T) {
	a := Probe()
	t.Logf("probe: %+v", a)
	if a.Available {
		return
	}
	ok := false
	for _, p := range []string{"no NVIDIA driver: ", "no CUDA devices", "NVRTC not found", "no usable NVIDIA driver"} {
		ok = ok || strings.HasPrefix(a.Reason, p)
	}
	if !ok {
		t.Errorf("unexpected probe reason %q", a.Reason)
	}
	if _, err := openDev(hal.Config{}); !errors.Is(err, hal.ErrNotSupported) && !strings.Contains(a.Reason, "NVRTC") {
		t.Errorf("Open without driver = %v, want ErrNotSupported", err)
	}
	requireOrSkip(t, "CUDA unavailable: "+a.Reason)
}

func TestDeviceInfo(t *testing.T) {
	d := openTest(t, 0)
	info, ep := d.Info(), d.Endpoint()
	t.Logf("info %+v endpoint %+v", info, ep)
	if info.Backend != testBackend || !strings.HasPrefix(info.Arch, "sm_") || info.Multiprocessors <= 0 || info.MemoryBytes <= 0 ||
		!strings.HasPrefix(info.UUID, "GPU-") || info.PCIBusID == "" || info.Name == "" {
		t.Errorf("incomplete info %+v", info)
	}
	if ep.HostID != devcore.HostID() || ep.PID != os.Getpid() || ep.UUID != info.UUID {
		t.Errorf("bad endpoint %+v", ep)
	}
	if d.Context() == 0 || d.MaxThreadsPerBlock() < 256 {
		t.Errorf("Context %#x MaxThreadsPerBlock %d", d.Context(), d.MaxThreadsPerBlock())
	}
	if p := d.Peer(ep); !p.SameGPU || !p.PeerAccess {
		t.Errorf("Peer(self) = %+v", p)
	}
	if gpuCount(t) >= 2 {
		d1 := openTest(t, 1)
		p := d.Peer(d1.Endpoint())
		can, _ := cuda.CanAccessPeer(d.dev, d1.dev)
		if !p.Visible || p.Ordinal != 1 || p.SameGPU || p.PeerAccess != can {
			t.Errorf("Peer(GPU 1) = %+v, cuDeviceCanAccessPeer = %v", p, can)
		}
	}
	if _, err := openDev(hal.Config{Ordinal: 99}); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("Open(99) = %v, want ErrInvalidArgument", err)
	}
}

func TestAllocWriteRead(t *testing.T) {
	d := openTest(t, 0)
	for _, size := range []int64{1, 4097, 3 << 20} {
		b, err := d.Alloc(size)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, size)
		got[0] = 0xff
		if err := d.Read(got, b, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, make([]byte, size)) {
			t.Errorf("Alloc(%d) not zeroed", size)
		}
		src := make([]byte, size/2+1)
		for i := range src {
			src[i] = byte(i*31 + 7)
		}
		off := size - int64(len(src))
		if err := d.Write(b, off, src); err != nil {
			t.Fatal(err)
		}
		back := make([]byte, len(src))
		if err := d.Read(back, b, off); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back, src) {
			t.Errorf("size %d: round trip at offset %d differs", size, off)
		}
		if err := d.Write(b, off+1, src); !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), fmt.Sprintf("at offset %d", off+1)) {
			t.Errorf("Write past end = %v, want ErrInvalidArgument naming the offset", err)
		}
		if err := d.Read(back, b, -1); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Errorf("Read at -1 = %v, want ErrInvalidArgument", err)
		}
		if err := b.Free(); err != nil {
			t.Fatal(err)
		}
		if err := d.Read(back, b, 0); !errors.Is(err, hal.ErrInvalidUsage) {
			t.Errorf("Read after Free = %v, want ErrInvalidUsage", err)
		}
		if err := b.Free(); !errors.Is(err, hal.ErrInvalidUsage) {
			t.Errorf("second Free = %v, want ErrInvalidUsage", err)
		}
	}
	for _, bad := range []int64{0, -5} {
		if _, err := d.Alloc(bad); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Errorf("Alloc(%d) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

func TestAllocHostVisibleFromDevice(t *testing.T) {
	d := openTest(t, 0)
	m := compileTestKernels(t, d)
	s := newStream(t, d)
	const n = 10000
	hb, err := d.AllocHostPinned(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Free()
	if !bytes.Equal(hb.Host(), make([]byte, 4*n)) {
		t.Fatal("AllocHost not zeroed")
	}
	launch(t, m, "fill", s, 8, 256, new(params).u64(hb.Addr()).u32(n).u32(11))
	waitStream(t, s)
	if want := pattern(n, 11); !bytes.Equal(hb.Host(), want) {
		t.Error("device writes not visible in Host()")
	}
	// Host writes are visible to the device: copy them with a kernel.
	copy(hb.Host(), pattern(n, 500))
	db, _ := d.AllocDevice(4 * n)
	defer db.Free()
	// consume with an already-set flag copies data -> out.
	ctrl, _ := d.AllocHostPinned(16)
	defer ctrl.Free()
	binary.LittleEndian.PutUint64(ctrl.Host()[0:], 9)
	launch(t, m, "consume", s, 1, 256, new(params).u64(hb.Addr()).u64(ctrl.Addr()).u64(db.Addr()).u64(ctrl.Addr()+8).
		u32(n).u64(9).u64(uint64(5*time.Second)))
	waitStream(t, s)
	got := make([]byte, 4*n)
	d.Read(got, db, 0)
	if !bytes.Equal(got, pattern(n, 500)) || binary.LittleEndian.Uint32(ctrl.Host()[8:]) != 1 {
		t.Error("host writes not visible to the device")
	}
}

func TestGraphCaptureReplay(t *testing.T) {
	d := openTest(t, 0)
	m := compileTestKernels(t, d)
	s := newStream(t, d)
	counter, _ := d.AllocDevice(8)
	defer counter.Free()
	var gc hal.GraphCapturer = d
	if err := gc.BeginCapture(s); err != nil {
		t.Fatal(err)
	}
	launch(t, m, "incr", s, 1, 1, new(params).u64(counter.Addr()))
	g, err := gc.EndCapture(s)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	read := func() uint64 {
		b := make([]byte, 8)
		if err := d.Read(b, counter, 0); err != nil {
			t.Fatal(err)
		}
		return binary.LittleEndian.Uint64(b)
	}
	waitStream(t, s)
	if v := read(); v != 0 {
		t.Fatalf("counter = %d after capture, want 0 (capture must not execute)", v)
	}
	for i := 0; i < 3; i++ {
		if err := g.Launch(s); err != nil {
			t.Fatal(err)
		}
	}
	waitStream(t, s)
	if v := read(); v != 3 {
		t.Fatalf("counter = %d after 3 replays, want 3", v)
	}
}

func TestSynchronizeDeadline(t *testing.T) {
	d := openTest(t, 0)
	m := compileTestKernels(t, d)
	s := newStream(t, d)
	ctrl, _ := d.AllocHostPinned(8)
	defer ctrl.Free()
	flagp := (*uint32)(unsafe.Pointer(&ctrl.Host()[0]))
	donep := (*uint32)(unsafe.Pointer(&ctrl.Host()[4]))
	launch(t, m, "spin", s, 1, 1, new(params).u64(ctrl.Addr()).u64(ctrl.Addr()+4).u64(uint64(30*time.Second)))
	start := time.Now()
	err := s.Synchronize(start.Add(300 * time.Millisecond))
	waited := time.Since(start)
	if !errors.Is(err, hal.ErrTimeout) || !strings.Contains(err.Error(), "nvlink GPU 0") {
		t.Errorf("Synchronize on a spinning kernel = %v, want ErrTimeout naming the device", err)
	}
	if waited < 300*time.Millisecond || waited > 5*time.Second {
		t.Errorf("deadline of 300ms fired after %v", waited)
	}
	atomic.StoreUint32(flagp, 1)
	if err := s.Synchronize(time.Time{}); err != nil {
		t.Fatalf("Synchronize after releasing the kernel: %v", err)
	}
	if v := atomic.LoadUint32(donep); v != 1 {
		t.Errorf("spin kernel ended with %d, want 1 (released by the host)", v)
	}
}

func TestEventsElapsed(t *testing.T) {
	d := openTest(t, 0)
	m := compileTestKernels(t, d)
	s := newStream(t, d)
	b, _ := d.AllocDevice(4 << 20)
	defer b.Free()
	e0, err := s.Record()
	if err != nil {
		t.Fatal(err)
	}
	defer e0.Close()
	for i := 0; i < 10; i++ {
		launch(t, m, "fill", s, 132, 256, new(params).u64(b.Addr()).u32(1<<20).u32(uint32(i)))
	}
	e1, _ := s.Record()
	defer e1.Close()
	if err := e1.Synchronize(time.Time{}); err != nil {
		t.Fatal(err)
	}
	el, err := e1.Elapsed(e0)
	if err != nil || el <= 0 || el > 10*time.Second {
		t.Errorf("Elapsed = %v, %v", el, err)
	}
}

func TestLaunchErrors(t *testing.T) {
	d := openTest(t, 0)
	m := compileTestKernels(t, d)
	s := newStream(t, d)
	f, err := m.Function("fill")
	if err != nil {
		t.Fatal(err)
	}
	p := new(params).u64(0).u32(0).u32(0).bytes()
	for _, c := range []struct{ grid, block int }{{0, 1}, {1, 0}, {1, d.MaxThreadsPerBlock() + 1}, {-1, 32}} {
		if err := f.Launch(s, c.grid, c.block, 0, p); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Errorf("Launch(grid %d, block %d) = %v, want ErrInvalidArgument", c.grid, c.block, err)
		}
	}
	if _, err := m.Function("no_such_kernel"); !errors.Is(err, hal.ErrDevice) || !strings.Contains(err.Error(), "no_such_kernel") {
		t.Errorf("Function(no_such_kernel) = %v", err)
	}
	_, err = d.Compile(hal.KernelSource{Name: "broken.cu", Source: `extern "C" __global__ void k() { this_is_not_defined(); }`})
	if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "this_is_not_defined") {
		t.Errorf("Compile(broken) = %v, want ErrInvalidArgument with the compiler log", err)
	}
	// The cache directory holds the compiled test kernels.
	ents, _ := os.ReadDir(os.Getenv("WEFT_CACHE_DIR"))
	if len(ents) == 0 {
		t.Error("kernel cache directory is empty after a compile")
	}
}

func TestWrongHandles(t *testing.T) {
	d := openTest(t, 0)
	b, _ := d.AllocDevice(4096)
	defer b.Free()
	h, err := d.Export(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Import(h[:100]); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("Import(short) = %v", err)
	}
	bad := append(hal.Handle(nil), h...)
	copy(bad, "WEFTHOST")
	if _, err := d.Import(bad); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("Import(bad magic) = %v", err)
	}
	other := append(hal.Handle(nil), h...)
	binary.LittleEndian.PutUint64(other[16:], HostHash("another host"))
	if _, err := d.Import(other); !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "another host") {
		t.Errorf("Import(other host) = %v, want ErrInvalidUsage", err)
	}
	hb, _ := d.AllocHostPinned(64)
	defer hb.Free()
	if _, err := d.Export(hb); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("Export(host buffer) = %v, want ErrInvalidArgument", err)
	}
	f, _ := d.AllocDevice(64)
	f.Free()
	if _, err := d.Export(f); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("Export(freed) = %v, want ErrInvalidUsage", err)
	}
	if gpuCount(t) >= 2 {
		d1 := openTest(t, 1)
		if _, err := d1.Export(b); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Errorf("Export(buffer of GPU 0) on GPU 1 = %v, want ErrInvalidArgument", err)
		}
	}
}

// TestImportSameProcess imports a buffer in the process that exported it:
// on the second GPU when there is one (peer access), else on the same one.
// A producer on the importer stores into the buffer and releases a flag; a
// consumer on the owner acquires it and copies the data.
func TestImportSameProcess(t *testing.T) {
	owner := openTest(t, 0)
	importer := owner
	if gpuCount(t) >= 2 {
		importer = openTest(t, 1)
	}
	const n = 1 << 16
	big, _ := owner.AllocDevice(8192 + 4*n + 64)
	defer big.Free()
	inbox, err := big.Slice(8192, 4*n+64)
	if err != nil {
		t.Fatal(err)
	}
	h, err := owner.Export(inbox)
	if err != nil {
		t.Fatal(err)
	}
	imp, err := importer.Import(h)
	if err != nil {
		t.Fatal(err)
	}
	if imp.Addr() != inbox.Addr() || imp.Size() != inbox.Size() {
		t.Fatalf("same-process import: %#x+%d, want the exporter's %#x+%d", imp.Addr(), imp.Size(), inbox.Addr(), inbox.Size())
	}
	mo, mi := compileTestKernels(t, owner), compileTestKernels(t, importer)
	so, si := newStream(t, owner), newStream(t, importer)
	out, _ := owner.AllocDevice(4 * n)
	defer out.Free()
	status, _ := owner.AllocHostPinned(8)
	defer status.Free()
	flagAddr := inbox.Addr() + 4*n
	launch(t, mo, "consume", so, 1, 512, new(params).u64(inbox.Addr()).u64(flagAddr).u64(out.Addr()).u64(status.Addr()).
		u32(n).u64(5).u64(uint64(20*time.Second)))
	launch(t, mi, "produce", si, 1, 512, new(params).u64(imp.Addr()).u64(imp.Addr()+4*n).u32(n).u32(77).u64(5))
	waitStream(t, si)
	waitStream(t, so)
	if st := binary.LittleEndian.Uint32(status.Host()); st != 1 {
		t.Fatalf("consumer status %d, want 1 (2: flag never seen)", st)
	}
	got := make([]byte, 4*n)
	owner.Read(got, out, 0)
	if !bytes.Equal(got, pattern(n, 77)) {
		t.Error("consumer copied wrong data")
	}
	if err := imp.Free(); err != nil {
		t.Fatal(err)
	}
	if err := owner.Read(got[:4], inbox, 0); err != nil {
		t.Errorf("exporter's buffer unusable after the import was freed: %v", err)
	}
	imp2, err := importer.Import(h)
	if err != nil {
		t.Fatal(err)
	}
	big.Free()
	if err := importer.Read(got[:4], imp2, 0); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("Read of an import whose exporter freed it = %v, want ErrInvalidUsage", err)
	}
	if _, err := importer.Import(h); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("Import after the exporter freed the buffer = %v, want ErrInvalidUsage", err)
	}
}

// TestExportImportAcrossProcesses exports a part of an allocation to a
// child process (this test binary re-executed) that imports it with CUDA
// IPC, stores a pattern into it from a kernel and releases a flag; a
// consumer kernel here acquires the flag and copies the data out.
func TestExportImportAcrossProcesses(t *testing.T) {
	d := openTest(t, 0)
	const n = 1 << 16
	big, _ := d.AllocDevice(4096 + 4*n + 64)
	defer big.Free()
	inbox, _ := big.Slice(4096, 4*n+64)
	h, err := d.Export(inbox)
	if err != nil {
		t.Fatal(err)
	}
	m := compileTestKernels(t, d)
	s := newStream(t, d)
	out, _ := d.AllocDevice(4 * n)
	defer out.Free()
	status, _ := d.AllocHostPinned(8)
	defer status.Free()
	launch(t, m, "consume", s, 1, 512, new(params).u64(inbox.Addr()).u64(inbox.Addr()+4*n).u64(out.Addr()).u64(status.Addr()).
		u32(n).u64(1).u64(uint64(60*time.Second)))

	childGPU := 0
	if gpuCount(t) >= 2 {
		childGPU = 1
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-cudadev.child=produce", "-cudadev.handle="+hex.EncodeToString(h),
		fmt.Sprintf("-cudadev.ordinal=%d", childGPU), "-cudadev.seed=1234")
	outb, err := cmd.CombinedOutput()
	t.Logf("child on GPU %d: %s", childGPU, strings.TrimSpace(string(outb)))
	if err != nil {
		t.Fatalf("child failed: %v", err)
	}
	waitStream(t, s)
	if st := binary.LittleEndian.Uint32(status.Host()); st != 1 {
		t.Fatalf("consumer status %d, want 1 (2: flag never seen)", st)
	}
	got := make([]byte, 4*n)
	d.Read(got, out, 0)
	if !bytes.Equal(got, pattern(n, 1234)) {
		t.Error("data stored by the child process differs")
	}
	d.Read(got, inbox, 0)
	if !bytes.Equal(got, pattern(n, 1234)) {
		t.Error("exporter's buffer does not hold the child's data")
	}
}

// runChild is the child side of TestExportImportAcrossProcesses.
func runChild() error {
	raw, err := hex.DecodeString(*childHandle)
	if err != nil {
		return err
	}
	d, err := openDev(hal.Config{Ordinal: *childOrdinal, Rank: 1})
	if err != nil {
		return err
	}
	defer d.Close()
	// Two imports of one allocation share one IPC mapping.
	b1, err := d.Import(raw)
	if err != nil {
		return err
	}
	b2, err := d.Import(raw)
	if err != nil {
		return fmt.Errorf("second import: %w", err)
	}
	if b1.Addr() != b2.Addr() {
		return fmt.Errorf("two imports mapped at %#x and %#x", b1.Addr(), b2.Addr())
	}
	if err := b2.Free(); err != nil {
		return err
	}
	n := int((b1.Size() - 64) / 4)
	m, err := d.CompileModule(hal.KernelSource{Name: "cudadev_test.cu", Source: testKernels,
		Headers: map[string]string{DeviceHeaderName: d.DeviceHeader()}})
	if err != nil {
		return err
	}
	defer m.Close()
	s, err := d.NewCUDAStream()
	if err != nil {
		return err
	}
	defer s.Close()
	f, err := m.Kernel("produce")
	if err != nil {
		return err
	}
	p := new(params).u64(b1.Addr()).u64(b1.Addr() + uint64(4*n)).u32(uint32(n)).u32(uint32(*childSeed)).u64(1)
	if err := f.Launch(s, 1, 512, 0, p.bytes()); err != nil {
		return err
	}
	if err := s.Synchronize(time.Now().Add(60 * time.Second)); err != nil {
		return err
	}
	got := make([]byte, 4*n)
	if err := d.Read(got, b1, 0); err != nil {
		return err
	}
	if !bytes.Equal(got, pattern(n, uint32(*childSeed))) {
		return errors.New("read back of the imported buffer differs")
	}
	// Another GPU of this process imports the same handle too, and a
	// kernel there copies the data out of it.
	if cnt, _ := cuda.DeviceCount(); cnt >= 2 {
		// With three GPUs or more, one that neither the exporter (GPU 0)
		// nor the first import uses: the mapping then needs peer access
		// from this second context.
		ord := 1 - *childOrdinal%2
		if cnt >= 3 {
			ord = 2
		}
		other, err := openDev(hal.Config{Ordinal: ord, Rank: 2})
		if err != nil {
			return err
		}
		defer other.Close()
		b3, err := other.Import(raw)
		if err != nil {
			return fmt.Errorf("import on a second GPU of the child: %w", err)
		}
		defer b3.Free()
		m3, err := other.CompileModule(hal.KernelSource{Name: "cudadev_test.cu", Source: testKernels,
			Headers: map[string]string{DeviceHeaderName: other.DeviceHeader()}})
		if err != nil {
			return err
		}
		defer m3.Close()
		s3, err := other.NewCUDAStream()
		if err != nil {
			return err
		}
		defer s3.Close()
		out, err := other.AllocDevice(int64(4 * n))
		if err != nil {
			return err
		}
		defer out.Free()
		ctrl, err := other.AllocHostPinned(8)
		if err != nil {
			return err
		}
		defer ctrl.Free()
		consume, err := m3.Kernel("consume")
		if err != nil {
			return err
		}
		cp := new(params).u64(b3.Addr()).u64(b3.Addr() + uint64(4*n)).u64(out.Addr()).u64(ctrl.Addr()).
			u32(uint32(n)).u64(1).u64(uint64(10 * time.Second))
		if err := consume.Launch(s3, 1, 512, 0, cp.bytes()); err != nil {
			return err
		}
		if err := s3.Synchronize(time.Now().Add(30 * time.Second)); err != nil {
			return err
		}
		if err := other.Read(got, out, 0); err != nil {
			return err
		}
		if st := binary.LittleEndian.Uint32(ctrl.Host()); st != 1 || !bytes.Equal(got, pattern(n, uint32(*childSeed))) {
			return fmt.Errorf("kernel on the child's second GPU read wrong data (status %d)", st)
		}
		fmt.Printf("also imported on %s at %#x (first import at %#x)\n", other, b3.Addr(), b1.Addr())
	}
	if err := b1.Free(); err != nil {
		return err
	}
	if err := b1.Free(); !errors.Is(err, hal.ErrInvalidUsage) {
		return fmt.Errorf("second Free of an import = %v", err)
	}
	fmt.Printf("imported %d bytes on %s\n", b1.Size(), d)
	return nil
}

// TestCheckResident: a grid that fits the device at once passes; one block
// more than the occupancy allows is refused with ErrInvalidArgument naming
// the figures, as Prepare refuses such a plan.
func TestCheckResident(t *testing.T) {
	d := openTest(t, 0)
	m := compileTestKernels(t, d)
	fn, err := m.Kernel("fill")
	if err != nil {
		t.Fatal(err)
	}
	per, err := fn.fn.MaxActiveBlocksPerMultiprocessor(1024, 0)
	if err != nil || per <= 0 {
		t.Fatalf("occupancy of fill at 1024 threads: %d, %v", per, err)
	}
	sms := d.Multiprocessors()
	if err := fn.CheckResident(per*sms, 1024, 0); err != nil {
		t.Errorf("%d blocks (%d per multiprocessor × %d): %v", per*sms, per, sms, err)
	}
	err = fn.CheckResident(per*sms+1, 1024, 0)
	if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), fmt.Sprintf("%d blocks of 1024 threads cannot all be resident", per*sms+1)) {
		t.Errorf("%d blocks: %v; want ErrInvalidArgument naming the blocks", per*sms+1, err)
	}
}
