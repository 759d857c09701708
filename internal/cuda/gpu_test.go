package cuda

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/errkind"
)

// requireOrSkip skips the test, or fails it when WEFT_REQUIRE names nvlink:
// a run on GPU hardware must not pass by skipping.
func requireOrSkip(t *testing.T, reason string) {
	t.Helper()
	if env.Required("nvlink") {
		t.Fatalf("WEFT_REQUIRE=nvlink but: %s", reason)
	}
	t.Skip(reason)
}

// gpu loads the driver and NVRTC and returns device 0's primary context.
func gpu(t *testing.T) (Device, Context) {
	t.Helper()
	if err := Load(); err != nil {
		requireOrSkip(t, "no CUDA driver: "+err.Error())
	}
	n, err := DeviceCount()
	if err != nil || n == 0 {
		requireOrSkip(t, "no CUDA devices")
	}
	d, err := DeviceGet(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := d.PrimaryCtxRetain()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.PrimaryCtxRelease() })
	return d, ctx
}

func TestLoadWithoutDriver(t *testing.T) {
	err := Load()
	if err == nil {
		t.Skip("a CUDA driver is installed")
	}
	if !errors.Is(err, errkind.ErrNotSupported) {
		t.Errorf("Load() = %v, want an error wrapping errkind.ErrNotSupported", err)
	}
	var le *LoadError
	if !errors.As(err, &le) {
		t.Fatalf("Load() = %T, want *LoadError", err)
	}
	// The common case on a machine with no driver: dlopen's own words plus
	// what they mean.
	if strings.Contains(err.Error(), "cannot open shared object file") && !strings.HasSuffix(err.Error(), ": no NVIDIA driver") {
		t.Errorf("Load() = %q, want it to end in \": no NVIDIA driver\"", err)
	}
	if _, err := DeviceCount(); !errors.Is(err, errkind.ErrNotSupported) {
		t.Errorf("DeviceCount() without driver = %v", err)
	}
	if _, err := Device(0).Name(); !errors.Is(err, errkind.ErrNotSupported) {
		t.Errorf("Device(0).Name() without driver = %v", err)
	}
}

func TestDriverSmoke(t *testing.T) {
	d, ctx := gpu(t)
	name, err := d.Name()
	if err != nil || name == "" {
		t.Fatalf("Name() = %q, %v", name, err)
	}
	major, minor, err := d.ComputeCapability()
	if err != nil || major < 3 {
		t.Fatalf("ComputeCapability() = %d.%d, %v", major, minor, err)
	}
	ver, _ := DriverVersion()
	bus, _ := d.PCIBusID()
	uuid, _ := d.UUID()
	mem, _ := d.TotalMem()
	t.Logf("%s sm_%d%d driver %d bus %s %s %d MiB", name, major, minor, ver, bus, uuid, mem>>20)
	if mem <= 0 || !strings.HasPrefix(uuid.String(), "GPU-") || bus == "" {
		t.Errorf("bad device properties: mem %d uuid %s bus %q", mem, uuid, bus)
	}

	const n = 1 << 20
	p, err := ctx.MemAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.MemFree(p)
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i * 7)
	}
	if err := ctx.MemcpyHtoD(p, src); err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, n)
	if err := ctx.MemcpyDtoH(dst, p); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src, dst) {
		t.Fatal("HtoD/DtoH round trip differs")
	}
	base, size, err := ctx.MemGetAddressRange(p + 100)
	if err != nil || base != p || size < n {
		t.Errorf("MemGetAddressRange(p+100) = %#x, %d, %v; want %#x, >= %d", base, size, err, p, n)
	}
	if ord, err := ctx.PointerDeviceOrdinal(p); err != nil || ord != 0 {
		t.Errorf("PointerDeviceOrdinal = %d, %v", ord, err)
	}
	// An invalid free is a CUDA error wrapping ErrDevice.
	if err := ctx.MemFree(DevicePtr(0x10)); !errors.Is(err, errkind.ErrDevice) {
		t.Errorf("MemFree(bogus) = %v, want ErrDevice", err)
	}
}

const addKernel = `
struct Params { unsigned int* out; unsigned int n; unsigned int add; };
extern "C" __global__ void add(Params p) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) p.out[i] += p.add + i;
}
`

func TestCompileAndLaunch(t *testing.T) {
	d, ctx := gpu(t)
	if err := LoadNVRTC(); err != nil {
		requireOrSkip(t, "NVRTC not found: "+err.Error())
	}
	major, minor, _ := d.ComputeCapability()
	cv, _ := CompilerVersion()
	cache := &KernelCache{Dir: t.TempDir(), CompilerVersion: cv, Compile: Compile}
	src := Source{Name: "add.cu", Source: addKernel, Arch: Arch(major, minor)}
	bin, hit, err := cache.Get(src)
	if err != nil || hit {
		t.Fatalf("compile: hit=%v err=%v", hit, err)
	}
	if _, hit, _ := cache.Get(src); !hit {
		t.Error("second compile missed the cache")
	}
	mod, err := ctx.ModuleLoadData(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Unload()
	f, err := mod.Function("add")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mod.Function("nope"); !IsResult(err, ErrorNotFound) {
		t.Errorf("Function(nope) = %v, want CUDA_ERROR_NOT_FOUND", err)
	}
	s, err := ctx.StreamCreate(StreamNonBlocking)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	const n = 1000
	p, err := ctx.MemAlloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.MemFree(p)
	if err := ctx.MemsetD8(p, 0, 4*n); err != nil {
		t.Fatal(err)
	}
	params := make([]byte, 16)
	binary.LittleEndian.PutUint64(params[0:], uint64(p))
	binary.LittleEndian.PutUint32(params[8:], n)
	binary.LittleEndian.PutUint32(params[12:], 5)
	start, _ := ctx.EventCreate(EventDefault)
	end, _ := ctx.EventCreate(EventDefault)
	defer start.Destroy()
	defer end.Destroy()
	start.Record(s)
	for i := 0; i < 2; i++ {
		if err := f.Launch(Dim3{X: (n + 255) / 256}, Dim3{X: 256}, 0, s, params); err != nil {
			t.Fatal(err)
		}
	}
	end.Record(s)
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if ms, err := end.ElapsedMillis(start); err != nil || ms < 0 {
		t.Errorf("ElapsedMillis = %v, %v", ms, err)
	}
	out := make([]byte, 4*n)
	ctx.MemcpyDtoH(out, p)
	for i := 0; i < n; i++ {
		if got, want := binary.LittleEndian.Uint32(out[4*i:]), uint32(2*(5+i)); got != want {
			t.Fatalf("out[%d] = %d, want %d", i, got, want)
		}
	}
}

func TestCompileErrorCarriesLog(t *testing.T) {
	d, _ := gpu(t)
	if err := LoadNVRTC(); err != nil {
		requireOrSkip(t, "NVRTC not found: "+err.Error())
	}
	major, minor, _ := d.ComputeCapability()
	_, err := Compile(Source{Name: "bad.cu", Source: "extern \"C\" __global__ void k() { undefined_thing(); }", Arch: Arch(major, minor)})
	var ne *NVRTCError
	if !errors.As(err, &ne) || ne.Code != NVRTCErrorCompilation || !strings.Contains(ne.Log, "undefined_thing") {
		t.Fatalf("Compile(bad) = %v, want NVRTC_ERROR_COMPILATION with the log", err)
	}
	if !errors.Is(err, errkind.ErrInvalidArgument) {
		t.Error("compile error does not wrap ErrInvalidArgument")
	}
}

// TestVirtualMemory maps a cuMemCreate allocation, exports it as a POSIX
// file descriptor, imports that descriptor and maps it a second time: both
// mappings see the same memory.
func TestVirtualMemory(t *testing.T) {
	d, ctx := gpu(t)
	if v, _ := d.Attribute(AttrVirtualMemoryManagement); v == 0 {
		t.Skip("device lacks virtual memory management")
	}
	if v, _ := d.Attribute(AttrHandleTypePosixFD); v == 0 {
		t.Skip("device lacks POSIX fd handles")
	}
	gran, err := ctx.MemGetAllocationGranularity(0, HandleTypePosixFD, GranularityRecommended)
	if err != nil || gran <= 0 {
		t.Fatalf("granularity %d, %v", gran, err)
	}
	size := 2 * gran
	h, err := ctx.MemCreate(size, 0, HandleTypePosixFD)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := ctx.MemExportToFD(h)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := ctx.MemImportFromFD(fd)
	if err != nil {
		t.Fatal(err)
	}
	var ptrs []DevicePtr
	for _, hh := range []MemGenericAllocationHandle{h, h2} {
		p, err := ctx.MemAddressReserve(size, gran)
		if err != nil {
			t.Fatal(err)
		}
		if err := ctx.MemMap(p, size, hh); err != nil {
			t.Fatal(err)
		}
		if err := ctx.MemSetAccess(p, size, []int{0}); err != nil {
			t.Fatal(err)
		}
		ptrs = append(ptrs, p)
	}
	want := []byte("weft virtual memory")
	if err := ctx.MemcpyHtoD(ptrs[0]+100, want); err != nil {
		t.Fatal(err)
	}
	ctx.Synchronize()
	got := make([]byte, len(want))
	if err := ctx.MemcpyDtoH(got, ptrs[1]+100); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("second mapping reads %q, want %q", got, want)
	}
	for i, hh := range []MemGenericAllocationHandle{h, h2} {
		if err := ctx.MemUnmap(ptrs[i], size); err != nil {
			t.Error(err)
		}
		if err := ctx.MemAddressFree(ptrs[i], size); err != nil {
			t.Error(err)
		}
		if err := ctx.MemRelease(hh); err != nil {
			t.Error(err)
		}
	}
	syscall.Close(fd)
}

// TestAsyncCopiesAndStreamWrites moves bytes host → device → device → host
// on a stream with the asynchronous copies, through host memory that Go
// did not allocate and that MemHostRegister pins, and orders a 64-bit
// stream write after them.
func TestAsyncCopiesAndStreamWrites(t *testing.T) {
	d, ctx := gpu(t)
	const n = 1 << 20
	mem, err := syscall.Mmap(-1, 0, 2*n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	hp := unsafe.Pointer(&mem[0])
	if err := ctx.MemHostRegister(hp, 2*n, MemHostRegisterPortable|MemHostRegisterDeviceMap); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := ctx.MemHostUnregister(hp); err != nil {
			t.Error(err)
		}
	}()
	for i := 0; i < n; i++ {
		mem[i] = byte(i*13 + 1)
	}
	a, _ := ctx.MemAlloc(n)
	defer ctx.MemFree(a)
	b, _ := ctx.MemAlloc(n + 8)
	defer ctx.MemFree(b)
	s, err := ctx.StreamCreate(StreamNonBlocking)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	if err := s.MemcpyHtoDAsync(a, hp, n); err != nil {
		t.Fatal(err)
	}
	if err := s.MemcpyAsync(b, a, n); err != nil {
		t.Fatal(err)
	}
	if err := s.MemcpyDtoHAsync(unsafe.Add(hp, n), b, n); err != nil {
		t.Fatal(err)
	}
	ops, err := d.Attribute(AttrCanUse64BitStreamMemOps)
	t.Logf("CAN_USE_64_BIT_STREAM_MEM_OPS = %d (%v)", ops, err)
	if ops != 0 {
		if err := s.Signal64(b+n, 0x1122334455667788, b+n, 0x99); err != nil {
			t.Fatal(err)
		}
	}
	ev, _ := ctx.EventCreate(EventDisableTiming)
	defer ev.Destroy()
	ev.Record(s)
	s2, _ := ctx.StreamCreate(StreamNonBlocking)
	defer s2.Destroy()
	if err := s2.WaitEvent(ev); err != nil {
		t.Fatal(err)
	}
	if err := s2.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if done, err := ev.Query(); !done || err != nil {
		t.Errorf("event after a stream that waited for it: done %v, %v", done, err)
	}
	if !bytes.Equal(mem[:n], mem[n:]) {
		t.Error("host → device → device → host round trip differs")
	}
	if ops != 0 {
		w := make([]byte, 8)
		ctx.MemcpyDtoH(w, b+n)
		if v := binary.LittleEndian.Uint64(w); v != 0x99 {
			t.Errorf("stream writes left %#x, want 0x99 (the second write)", v)
		}
	}
}
