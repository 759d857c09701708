//go:build cgo

package xgmi_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/hal/xgmi"
	"github.com/weftccl/weft/internal/cudadev/porttest"
	"github.com/weftccl/weft/internal/hip"
	"github.com/weftccl/weft/internal/hip/hiptest"
	"github.com/weftccl/weft/internal/hipdev"
)

// These tests run the backend against the fake HIP runtime and hipRTC of
// internal/hip/testdata (built with the system C compiler): everything but
// the GPU itself — probe, identity, link policy, memory, IPC handles,
// engines, plan compilation and launch parameters — is exercised here.

// openFakeGPU loads fresh fakes (two GPUs with peer access unless the
// environment says otherwise), gives the test a private kernel cache and
// opens GPU ordinal with job "job", closing it at the end of the test.
func openFakeGPU(t *testing.T, ordinal int) (*xgmi.Device, hiptest.Libs) {
	t.Helper()
	libs := hiptest.Load(t, hiptest.ROCm6)
	t.Setenv("WEFT_CACHE_DIR", t.TempDir())
	return openOn(t, ordinal, "job"), libs
}

func openOn(t *testing.T, ordinal int, job string) *xgmi.Device {
	t.Helper()
	d, err := xgmi.Open(hal.Config{Ordinal: ordinal, Rank: ordinal, JobID: job})
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

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, what string, err, sentinel error, words ...string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Errorf("%s: %v, want an error wrapping %v", what, err, sentinel)
		return
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not mention %q", what, err, w)
		}
	}
}

func TestProbe(t *testing.T) {
	libs := hiptest.Build(t, hiptest.ROCm6)
	missing := filepath.Join(t.TempDir(), "libamdhip64.so")
	cases := []struct {
		name       string
		env        map[string]string
		hip, rtc   string
		available  bool
		reasonPart string
	}{
		{"no ROCm", nil, missing, libs.RTC, false, "no ROCm: libamdhip64.so not found (tried " + missing + ")"},
		{"hipInit finds no GPU", map[string]string{"FAKEHIP_FAIL": "hipInit=100"}, libs.HIP, libs.RTC, false, "no AMD GPU"},
		{"no GPU", map[string]string{"FAKEHIP_DEVICES": "0"}, libs.HIP, libs.RTC, false, "no AMD GPU"},
		{"no hipRTC", nil, libs.HIP, missing, false, "hipRTC not found (tried " + missing + "); hipRTC compiles the kernels"},
		{"available", nil, libs.HIP, libs.RTC, true, "2 AMD GPU(s), HIP driver 6.3.42134, HIP 6.3.42134, hipRTC 6.3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			hip.LoadFrom(c.hip)
			hip.LoadRTCFrom(c.rtc)
			a, err := hal.Probe(xgmi.Name)
			must(t, err)
			if a.Available != c.available || !strings.Contains(a.Reason, c.reasonPart) {
				t.Errorf("Probe() = %+v, want available=%v with %q", a, c.available, c.reasonPart)
			}
			if !c.available && c.hip == missing {
				_, err := hal.Open(xgmi.Name, hal.Config{})
				wantErr(t, "Open without ROCm", err, hal.ErrNotSupported, "no ROCm")
			}
		})
	}
}

func TestOpen(t *testing.T) {
	d, _ := openFakeGPU(t, 1)
	info := d.Info()
	want := hal.DeviceInfo{Backend: "xgmi", Ordinal: 1, Name: "AMD Instinct MI300X (fake 1)", Arch: "gfx942",
		UUID: "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f", PCIBusID: "0000:1c:00.0", MemoryBytes: 192 << 30,
		Multiprocessors: 304, Driver: "HIP driver 6.3.42134", Runtime: "HIP 6.3.42134, hipRTC 6.3"}
	if diff := cmp.Diff(want, info); diff != "" {
		t.Errorf("Info() (-want +got):\n%s", diff)
	}
	ep := d.Endpoint()
	if ep.Backend != "xgmi" || ep.PCIBusID != "0000:1c:00.0" || ep.PID != os.Getpid() || ep.HostID == "" || ep.UUID != want.UUID {
		t.Errorf("Endpoint() = %+v", ep)
	}
	if d.Target() != "gfx942:sramecc+:xnack-" {
		t.Errorf("Target() = %q", d.Target())
	}
	_, err := xgmi.Open(hal.Config{Ordinal: 2})
	wantErr(t, "Open(2) of 2 GPUs", err, hal.ErrInvalidArgument, "xgmi GPU 2", "2 AMD GPUs visible")
	t.Setenv("FAKEHIP_FAIL", "hipGetDevicePropertiesR0600=4242")
	_, err = xgmi.Open(hal.Config{Ordinal: 0})
	wantErr(t, "Open with the properties failing", err, hal.ErrDevice, "xgmi GPU 0", "hipGetDevicePropertiesR0600", "hipErrorFake4242")
	t.Setenv("FAKEHIP_FAIL", "")

	closed, err := xgmi.Open(hal.Config{Ordinal: 0})
	must(t, err)
	must(t, closed.Close())
	wantErr(t, "second Close", closed.Close(), hal.ErrInvalidUsage, "already closed")
	_, err = closed.Alloc(8)
	wantErr(t, "Alloc after Close", err, hal.ErrInvalidUsage, "closed")
}

// TestROCm5 opens a GPU of a ROCm 5 runtime: the target is found in the
// older properties layout and the endpoint has no UUID.
func TestROCm5(t *testing.T) {
	hiptest.Load(t, hiptest.ROCm5)
	t.Setenv("FAKEHIP_ARCH", "gfx90a:sramecc+:xnack-")
	d, err := xgmi.Open(hal.Config{Ordinal: 0})
	must(t, err)
	defer d.Close()
	if d.Info().Arch != "gfx90a" || d.Target() != "gfx90a:sramecc+:xnack-" || d.Endpoint().UUID != "" {
		t.Errorf("ROCm 5 device: arch %q, target %q, uuid %q", d.Info().Arch, d.Target(), d.Endpoint().UUID)
	}
	b, err := d.AllocHost(64) // hipHostAlloc
	must(t, err)
	must(t, b.Free())
}

func TestLink(t *testing.T) {
	d0, _ := openFakeGPU(t, 0)
	d1 := openOn(t, 1, "job")
	ep1 := d1.Endpoint()
	const both = hal.CapMemoryMapped | hal.CapPortMapped
	mod := func(f func(*hal.Endpoint)) hal.Endpoint { e := ep1; f(&e); return e }
	cases := []struct {
		name   string
		peer   hal.Endpoint
		noPeer bool
		caps   hal.Capability
		reason string
	}{
		{"same GPU", d0.Endpoint(), false, both, "same GPU"},
		{"same GPU, other process", mod(func(e *hal.Endpoint) { *e = d0.Endpoint(); e.PID++ }), false, both, "same GPU"},
		{"peer GPU", ep1, false, both, "peer access to GPU 1"},
		{"no peer access", ep1, true, 0, "GPU 0 cannot access GPU 1 (hipDeviceCanAccessPeer=0)"},
		{"other backend", mod(func(e *hal.Endpoint) { e.Backend = "nvlink" }), false, 0, `peer uses backend "nvlink"`},
		{"other host", mod(func(e *hal.Endpoint) { e.HostID = "elsewhere"; e.Hostname = "b" }), false, 0, "different hosts"},
		{"invisible GPU", mod(func(e *hal.Endpoint) { e.PCIBusID = "0000:99:00.0" }), false, 0, "not visible to this process"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.noPeer {
				t.Setenv("FAKEHIP_NO_PEER", "1")
			}
			l := d0.Link(c.peer)
			if l.Caps != c.caps || !strings.Contains(l.Reason, c.reason) {
				t.Errorf("Link = %+v, want caps %v with %q", l, c.caps, c.reason)
			}
			if c.caps == 0 {
				_, err := d0.NewEngine(c.peer)
				wantErr(t, "NewEngine on an unlinked peer", err, hal.ErrNotSupported, c.reason)
			}
		})
	}
}

func TestMemory(t *testing.T) {
	d, _ := openFakeGPU(t, 0)
	other := openOn(t, 1, "job")
	b, err := d.Alloc(4096)
	must(t, err)
	got := make([]byte, 4096)
	must(t, d.Read(got, b, 0))
	if !bytes.Equal(got, make([]byte, 4096)) {
		t.Fatal("Alloc did not zero the memory (the fake fills new memory with 0xa5)")
	}
	data := []byte("fine-grained device memory")
	must(t, d.Write(b, 1000, data))
	must(t, d.Read(got[:len(data)], b, 1000))
	if !bytes.Equal(got[:len(data)], data) {
		t.Errorf("Read = %q, want %q", got[:len(data)], data)
	}
	h, err := d.AllocHost(256)
	must(t, err)
	if !bytes.Equal(h.Host(), make([]byte, 256)) || h.Addr() == 0 {
		t.Fatal("AllocHost did not zero the memory or has no device address")
	}
	must(t, d.Write(h, 8, data))
	if !bytes.HasPrefix(h.Host()[8:], data) {
		t.Error("a write to host memory is not in its host view")
	}

	wantErr(t, "Alloc(0)", func() error { _, err := d.Alloc(0); return err }(), hal.ErrInvalidArgument)
	wantErr(t, "Write out of range", d.Write(b, 4090, data), hal.ErrInvalidArgument, "out of range")
	wantErr(t, "Read of another device's buffer", d.Read(got, mustAlloc(t, other, 64), 0), hal.ErrInvalidArgument, "another device")
	t.Setenv("FAKEHIP_FAIL", "hipExtMallocWithFlags=2")
	_, err = d.Alloc(64)
	wantErr(t, "Alloc with the runtime out of memory", err, hal.ErrDevice, "xgmi GPU 0 (rank 0)", "hipExtMallocWithFlags", "hipErrorOutOfMemory")
	t.Setenv("FAKEHIP_FAIL", "hipMemcpy=4242")
	wantErr(t, "Write with hipMemcpy failing", d.Write(b, 0, data), hal.ErrDevice, "hipMemcpy", "device buffer")
	t.Setenv("FAKEHIP_FAIL", "")

	must(t, b.Free())
	must(t, h.Free())
	wantErr(t, "second Free", b.Free(), hal.ErrInvalidUsage, "already freed")
	wantErr(t, "Read after Free", d.Read(got, b, 0), hal.ErrInvalidUsage, "used after Free")
	if h.Host() != nil {
		t.Error("Host() of a freed buffer is not nil")
	}
}

func mustAlloc(t *testing.T, d hal.Device, n int64) hal.Buffer {
	t.Helper()
	b, err := d.Alloc(n)
	must(t, err)
	t.Cleanup(func() { b.Free() })
	return b
}

func TestExportImport(t *testing.T) {
	d0, _ := openFakeGPU(t, 0)
	d1 := openOn(t, 1, "job")
	b := mustAlloc(t, d0, 1<<16)
	data := bytes.Repeat([]byte("xgmi"), 1<<14)
	must(t, d0.Write(b, 0, data))
	h, err := d0.Export(b)
	must(t, err)
	if len(h) != hipdev.ExportHandleSize {
		t.Fatalf("handle of %d bytes", len(h))
	}
	r, err := d1.Import(h)
	must(t, err)
	got := make([]byte, len(data))
	must(t, d1.Read(got, r, 0))
	if !bytes.Equal(got, data) || r.Size() != b.Size() || r.Addr() != b.Addr() {
		t.Errorf("imported buffer: size %d, addr %#x (exporter %#x), data equal %v", r.Size(), r.Addr(), b.Addr(), bytes.Equal(got, data))
	}
	must(t, r.Free())

	forge := func(off int, f func([]byte)) hal.Handle {
		c := slices.Clone(h)
		f(c[off:])
		return c
	}
	other := openOn(t, 1, "another job")
	host, err := d0.AllocHost(64)
	must(t, err)
	defer host.Free()
	_, err = d0.Export(host)
	wantErr(t, "Export of host memory", err, hal.ErrInvalidArgument, "only device memory")
	for _, c := range []struct {
		name     string
		dev      *xgmi.Device
		h        hal.Handle
		sentinel error
		words    []string
	}{
		{"truncated", d1, h[:100], hal.ErrInvalidArgument, []string{"100 bytes, want 136"}},
		{"another backend", d1, forge(0, func(b []byte) { copy(b, "WEFTNVL1") }), hal.ErrInvalidArgument, []string{"not a HIP IPC handle"}},
		{"inconsistent", d1, forge(64, func(b []byte) { b[7] = 0x40 }), hal.ErrInvalidArgument, []string{"inconsistent"}},
		{"another host", d1, forge(16, func(b []byte) { b[0] ^= 1 }), hal.ErrInvalidUsage, []string{"another host"}},
		{"another job", other, h, hal.ErrInvalidUsage, []string{"another job", `"another job"`}},
	} {
		_, err := c.dev.Import(c.h)
		wantErr(t, "Import of a handle: "+c.name, err, c.sentinel, c.words...)
	}
	must(t, b.Free())
	_, err = d1.Import(h)
	wantErr(t, "Import of a freed buffer", err, hal.ErrInvalidUsage, "no longer allocated")
}

// TestImportFromAnotherProcess imports a buffer that a child process (this
// test binary, running TestIPCExporterChild) exported: the handle takes
// the hipIpcOpenMemHandle path, which the fake serves by mapping the
// child's memfd through /proc.
func TestImportFromAnotherProcess(t *testing.T) {
	d, libs := openFakeGPU(t, 1)
	cmd := exec.Command(os.Args[0], "-test.run=^TestIPCExporterChild$")
	cmd.Env = append(os.Environ(), "XGMI_TEST_CHILD_LIBS="+libs.HIP+string(os.PathListSeparator)+libs.RTC)
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	defer cmd.Process.Kill()
	out := bufio.NewReader(stdout)
	var line string
	for !strings.HasPrefix(line, "handle=") {
		if line, err = out.ReadString('\n'); err != nil {
			t.Fatalf("no handle from the child: %v", err)
		}
	}
	h, err := hex.DecodeString(strings.TrimSpace(strings.TrimPrefix(line, "handle=")))
	must(t, err)
	b, err := d.Import(h)
	must(t, err)
	got := make([]byte, 4096)
	must(t, d.Read(got, b, 0))
	if !bytes.Equal(got, childPattern()) {
		t.Error("the imported buffer does not hold what the child wrote")
	}
	must(t, d.Write(b, 0, []byte("from the parent")))
	must(t, b.Free())
	stdin.Close()
	rest, _ := io.ReadAll(out)
	if err := cmd.Wait(); err != nil {
		t.Errorf("child: %v\n%s", err, rest)
	}
}

func childPattern() []byte { return bytes.Repeat([]byte("child of xgmi\n"), 4096/14+1)[:4096] }

// TestIPCExporterChild is the exporting process of
// TestImportFromAnotherProcess; it does nothing in a normal run.
func TestIPCExporterChild(t *testing.T) {
	libs, ok := os.LookupEnv("XGMI_TEST_CHILD_LIBS")
	if !ok {
		t.Skip("runs as the child of TestImportFromAnotherProcess")
	}
	paths := filepath.SplitList(libs)
	must(t, hip.LoadFrom(paths[0]))
	must(t, hip.LoadRTCFrom(paths[1]))
	d := openOn(t, 0, "job")
	b := mustAlloc(t, d, 4096)
	must(t, d.Write(b, 0, childPattern()))
	h, err := d.Export(b)
	must(t, err)
	fmt.Printf("handle=%x\n", []byte(h))
	io.ReadAll(os.Stdin) // until the parent is done
	got := make([]byte, 15)
	must(t, d.Read(got, b, 0))
	if string(got) != "from the parent" {
		t.Errorf("the parent's write through the mapping is not here: %q", got)
	}
}

func TestEngines(t *testing.T) {
	d0, _ := openFakeGPU(t, 0)
	d1 := openOn(t, 1, "job")
	t.Run("peer", func(t *testing.T) { porttest.Run(t, d0, d1) })

	e, err := d0.NewEngine(d1.Endpoint())
	must(t, err)
	src := mustAlloc(t, d0, 64)
	dst := mustAlloc(t, d1, 64)
	wantErr(t, "Signal of a misaligned semaphore", e.Signal(dst.Addr()+4, 0, 0), hal.ErrInvalidArgument, "8-byte aligned")
	t.Setenv("FAKEHIP_FAIL", "hipEventQuery=600")
	must(t, e.Put(dst.Addr(), src.Addr(), 64))
	tk, err := e.Mark()
	must(t, err)
	if c, err := e.Completed(); err != nil || c >= tk {
		t.Errorf("Completed() = %d, %v while the event is not reached; want < %d", c, err, tk)
	}
	t.Setenv("FAKEHIP_FAIL", "hipMemcpyAsync=4242")
	wantErr(t, "Put with hipMemcpyAsync failing", e.Put(dst.Addr(), src.Addr(), 64), hal.ErrDevice, "put of 64 bytes", "engine of xgmi GPU 0 (rank 0) to GPU 1", "hipMemcpyAsync")
	t.Setenv("FAKEHIP_FAIL", "")
	_, err = e.Mark()
	wantErr(t, "Mark after a failed put (the failure is sticky)", err, hal.ErrDevice, "hipMemcpyAsync")
	must(t, e.Close())
	wantErr(t, "second Close", e.Close(), hal.ErrInvalidUsage, "already closed")
	wantErr(t, "Put after Close", e.Put(dst.Addr(), src.Addr(), 8), hal.ErrInvalidUsage, "closed")

	slow, err := d0.NewEngine(d0.Endpoint())
	must(t, err)
	t.Setenv("WEFT_TIMEOUT", "20ms")
	t.Setenv("FAKEHIP_FAIL", "hipStreamQuery=600")
	wantErr(t, "Close of a stalled engine", slow.Close(), hal.ErrTimeout, "engine of xgmi GPU 0 (rank 0) to itself")
}

func TestStreams(t *testing.T) {
	d, _ := openFakeGPU(t, 0)
	other := openOn(t, 1, "job")
	s, err := d.NewStream()
	must(t, err)
	start, err := s.Record()
	must(t, err)
	end, err := s.Record()
	must(t, err)
	must(t, end.Synchronize(time.Time{}))
	if dt, err := end.Elapsed(start); err != nil || dt < 0 {
		t.Errorf("Elapsed = %v, %v", dt, err)
	}
	must(t, s.Synchronize(time.Now().Add(time.Second)))
	t.Setenv("FAKEHIP_FAIL", "hipStreamQuery=600")
	wantErr(t, "Synchronize of a stream that never drains", s.Synchronize(time.Now().Add(10*time.Millisecond)), hal.ErrTimeout, "synchronize stream of xgmi GPU 0 (rank 0)")
	t.Setenv("FAKEHIP_FAIL", "hipStreamQuery=700")
	wantErr(t, "Synchronize with a faulted stream", s.Synchronize(time.Time{}), hal.ErrDevice, "hipStreamQuery")
	t.Setenv("FAKEHIP_FAIL", "")
	wantErr(t, "capture of another device's stream", other.BeginCapture(s), hal.ErrInvalidArgument, "not a stream of this GPU")
	must(t, start.Close())
	must(t, end.Close())
	must(t, s.Close())
	wantErr(t, "Synchronize after Close", s.Synchronize(time.Time{}), hal.ErrInvalidUsage, "after Close")
}

// fakePlan builds the AllReduce plans of rank 0 of 4 for an MI300X and
// returns the first (the LL plan).
func fakePlan(t *testing.T) *plan.Plan {
	t.Helper()
	choices, err := algorithms.Plans(algorithms.DefaultConfig(0, 4, 304, true), algorithms.AllReduce, 0)
	must(t, err)
	return choices[0].Plan
}

func TestPrepareAndLaunch(t *testing.T) {
	t.Setenv("FAKEHIP_WALLCLOCK_KHZ", "25000") // a device clock of 25 MHz, read at Open
	d, libs := openFakeGPU(t, 0)
	p := fakePlan(t)
	bind := plan.Bindings{Scratch: 0x1000, ScratchBytes: 1 << 20, Semaphores: 0x2000, Expected: 0x3000, State: 0x4000, Control: 0x5000,
		Peers: make([]plan.PeerBinding, len(p.Channels))}
	for i := range bind.Peers {
		bind.Peers[i] = plan.PeerBinding{Scratch: uint64(0x10000 * (i + 1)), Semaphores: uint64(0x10000*(i+1) + 0x800)}
	}
	spec := hal.PlanSpec{Plan: p, Bindings: bind, DataType: plan.Float32, RedOp: plan.Sum, Library: channels.DeviceLibrary()}
	prog, err := d.Prepare(spec)
	must(t, err)
	compiles := libs.Lines(t, "compile ")
	if len(compiles) != 1 {
		t.Fatalf("%d compilations, want 1: %v", len(compiles), compiles)
	}
	opts := strings.Split(hiptest.Fields(compiles[0])["opts"], "|")
	if diff := cmp.Diff([]string{"--offload-arch=gfx942:sramecc+:xnack-", "-O3", "-std=c++17", "-DWEFT_HIP_WALLCLOCK_MHZ=25"}, opts); diff != "" {
		t.Errorf("hipRTC options (-want +got):\n%s", diff)
	}

	s, err := d.NewStream()
	must(t, err)
	defer s.Close()
	args := &plan.Args{Count: 1 << 10, Input: 0x100000, Output: 0x200000, Timeout: time.Second}
	must(t, prog.Launch(s, args))
	want, err := plan.PackParams(p, &bind, args)
	must(t, err)
	launches := libs.Lines(t, "launch ")
	if len(launches) != 1 {
		t.Fatalf("%d launches, want 1", len(launches))
	}
	got := hiptest.Fields(launches[0])
	wantLaunch := map[string]string{"kernel": plan.KernelName, "grid": fmt.Sprintf("%d,1,1", p.Blocks()), "block": fmt.Sprintf("%d,1,1", p.Threads),
		"shared": "0", "bytes": fmt.Sprint(plan.ParamsBytes), "graph": "0", "params": hex.EncodeToString(want)}
	if diff := cmp.Diff(wantLaunch, got); diff != "" {
		t.Errorf("launch (-want +got):\n%s", diff)
	}

	// Captured into a graph, the launch replays.
	must(t, d.BeginCapture(s))
	must(t, prog.Launch(s, args))
	g, err := d.EndCapture(s)
	must(t, err)
	must(t, g.Launch(s))
	must(t, g.Launch(s))
	must(t, g.Close())
	if n := len(libs.Lines(t, "launch ")); n != 3 {
		t.Errorf("%d launches after two graph replays, want 3", n)
	}

	// The same plan again comes from the kernel cache.
	prog2, err := d.Prepare(spec)
	must(t, err)
	if n := len(libs.Lines(t, "compile ")); n != 1 {
		t.Errorf("%d compilations after preparing the plan twice, want 1 (a cache hit)", n)
	}
	must(t, prog2.Close())
	must(t, prog.Close())

	_, err = d.Prepare(hal.PlanSpec{Plan: p, Bindings: plan.Bindings{}, DataType: plan.Float32, Library: channels.DeviceLibrary()})
	wantErr(t, "Prepare with missing peer bindings", err, hal.ErrInvalidArgument, "peer bindings")
	odd := *p
	odd.Threads = 96
	_, err = d.Prepare(hal.PlanSpec{Plan: &odd, Bindings: bind, DataType: plan.Float32, Library: channels.DeviceLibrary()})
	wantErr(t, "Prepare of 96-thread blocks", err, hal.ErrInvalidArgument, "96 threads per block", "64-lane wavefronts")
	// One block per compute unit (304 of them): a plan of more blocks
	// than that cannot be resident at once and is refused; as many fit.
	t.Setenv("FAKEHIP_OCCUPANCY", "1")
	wide := *p
	wide.Groups = slices.Clone(p.Groups)
	wide.Groups[0].Blocks += 304 - p.Blocks()
	fit, err := d.Prepare(hal.PlanSpec{Plan: &wide, Bindings: bind, DataType: plan.Float32, RedOp: plan.Sum, Library: channels.DeviceLibrary()})
	must(t, err)
	must(t, fit.Close())
	wide.Groups[0].Blocks++
	_, err = d.Prepare(hal.PlanSpec{Plan: &wide, Bindings: bind, DataType: plan.Float32, RedOp: plan.Sum, Library: channels.DeviceLibrary()})
	wantErr(t, "Prepare of 305 blocks on 304 compute units, one each", err, hal.ErrInvalidArgument, "305 blocks of", "cannot all be resident", "1 per multiprocessor × 304 multiprocessors")
	wantErr(t, "Launch with a null buffer", prog.Launch(s, &plan.Args{Count: 8}), hal.ErrInvalidArgument, "count 8")
	_, err = d.Prepare(hal.PlanSpec{Plan: p, Bindings: bind, DataType: plan.Float32})
	wantErr(t, "Prepare without the channel library", err, hal.ErrInvalidArgument, "weft_channels.h", "file not found")
}

func TestCompileAndLaunchKernel(t *testing.T) {
	d, libs := openFakeGPU(t, 0)
	mod, err := d.Compile(hal.KernelSource{
		Name:    "ready.hip",
		Source:  "#include \"weft_hal.h\"\nstruct P { weft_u64* flag; };\nextern \"C\" __global__ void ready(P p) { weft::hal::st_release_sys(p.flag, 1); }\n",
		Headers: map[string]string{xgmi.DeviceHeaderName: d.DeviceHeader()},
	})
	must(t, err)
	defer mod.Close()
	f, err := mod.Function("ready")
	must(t, err)
	s, err := d.NewStream()
	must(t, err)
	defer s.Close()
	must(t, f.Launch(s, 2, 64, 1024, []byte{1, 2, 3, 4, 5, 6, 7, 8}))
	if l := hiptest.Fields(libs.Lines(t, "launch ")[0]); l["kernel"] != "ready" || l["params"] != "0102030405060708" || l["shared"] != "1024" {
		t.Errorf("launch = %v", l)
	}
	wantErr(t, "Launch of 2048 threads", f.Launch(s, 1, 2048, 0, nil), hal.ErrInvalidArgument, "block 2048 (at most 1024)")
	wantErr(t, "Launch with 1 MiB of LDS", f.Launch(s, 1, 64, 1<<20, nil), hal.ErrInvalidArgument, "at most 65536")
	_, err = mod.Function("missing")
	wantErr(t, "Function(missing)", err, hal.ErrDevice, "hipErrorNotFound", "ready.hip")
	if !strings.Contains(d.DeviceHeader(), "namespace hal") {
		t.Error("DeviceHeader() is not the embedded device/weft_hal.h")
	}
}
