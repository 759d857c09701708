//go:build cgo

package hip_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/internal/errkind"
	"github.com/weftccl/weft/internal/hip"
	"github.com/weftccl/weft/internal/hip/hiptest"
)

func TestCandidates(t *testing.T) {
	t.Setenv("ROCM_PATH", "/opt/rocm-6.3.1")
	got := hip.Candidates()
	for _, want := range []string{"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so", "/opt/rocm-6.3.1/lib/libamdhip64.so.6", "/opt/rocm/lib/libamdhip64.so"} {
		if !slices.Contains(got, want) {
			t.Errorf("Candidates() = %v, missing %s", got, want)
		}
	}
	if got[0] != "libamdhip64.so.7" || !strings.HasPrefix(hip.RTCCandidates()[1], "libhiprtc.so.6") {
		t.Errorf("Candidates()[0] = %s, RTCCandidates() = %v: the newest soname comes first", got[0], hip.RTCCandidates())
	}
}

func TestLoadMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libamdhip64.so")
	err := hip.LoadFrom(missing, missing+".6")
	var le *hip.LoadError
	if !errors.As(err, &le) || !le.NotFound || !errors.Is(err, errkind.ErrNotSupported) {
		t.Fatalf("LoadFrom(missing) = %v, want a *LoadError with NotFound wrapping ErrNotSupported", err)
	}
	if !strings.Contains(err.Error(), "no ROCm: libamdhip64.so not found") || !strings.Contains(err.Error(), missing+".6") {
		t.Errorf("error %q does not say what was missing and what was tried", err)
	}
	if err2 := hip.Load(); err2 != err {
		t.Errorf("Load after a failed LoadFrom = %v, want the same error", err2)
	}
	if _, err := hip.DeviceCount(); !errors.Is(err, errkind.ErrNotSupported) || !strings.Contains(err.Error(), "hipGetDeviceCount") {
		t.Errorf("DeviceCount without a runtime = %v, want an error naming the call, wrapping ErrNotSupported", err)
	}
	if hip.LibraryPath() != "" {
		t.Errorf("LibraryPath() = %q after a failed load", hip.LibraryPath())
	}
}

func TestLoadMissingSymbol(t *testing.T) {
	libs := hiptest.Build(t, hiptest.ROCm6)
	err := hip.LoadFrom(libs.RTC) // a library, but not the HIP runtime
	var le *hip.LoadError
	if !errors.As(err, &le) || le.NotFound || !strings.Contains(err.Error(), "symbol hipInit not found") {
		t.Fatalf("LoadFrom(hipRTC) = %v, want a missing-entry-point error", err)
	}
	if err := hip.LoadRTCFrom(libs.HIP); err == nil || !strings.Contains(err.Error(), "symbol hiprtcVersion not found") {
		t.Fatalf("LoadRTCFrom(HIP runtime) = %v, want a missing-entry-point error", err)
	}
	t.Setenv("FAKEHIP_FAIL", "hiprtcVersion=11")
	if err := hip.LoadRTCFrom(libs.RTC); !errors.Is(err, errkind.ErrNotSupported) || !strings.Contains(err.Error(), "hiprtcVersion: HIPRTC_ERROR_INTERNAL_ERROR") {
		t.Fatalf("LoadRTCFrom with hiprtcVersion failing = %v", err)
	}
}

func TestLoadInitFails(t *testing.T) {
	libs := hiptest.Build(t, hiptest.ROCm6)
	t.Setenv("FAKEHIP_FAIL", "hipInit=100")
	err := hip.LoadFrom(libs.HIP)
	var le *hip.LoadError
	if !errors.As(err, &le) || le.Hint != "no AMD GPU" || !hip.IsResult(err, hip.ErrorNoDevice) || !errors.Is(err, errkind.ErrNotSupported) {
		t.Fatalf("LoadFrom with hipInit failing = %v, want a LoadError saying no AMD GPU", err)
	}
	t.Setenv("FAKEHIP_FAIL", "")
	if err := hip.LoadFrom("/nonexistent/libamdhip64.so", libs.HIP); err != nil {
		t.Fatalf("LoadFrom(missing, fake) = %v, want the second path loaded", err)
	}
	if hip.LibraryPath() != libs.HIP {
		t.Errorf("LibraryPath() = %q, want %q", hip.LibraryPath(), libs.HIP)
	}
}

func TestDeviceQueries(t *testing.T) {
	hiptest.Load(t, hiptest.ROCm6)
	n, err := hip.DeviceCount()
	if err != nil || n != 2 {
		t.Fatalf("DeviceCount() = %d, %v; want 2", n, err)
	}
	d := hip.Device(1)
	name, err := d.Name()
	check(t, err)
	bus, err := d.PCIBusID()
	check(t, err)
	mem, err := d.TotalMem()
	check(t, err)
	cus, err := d.Attribute(hip.AttrMultiprocessorCount)
	check(t, err)
	wave, err := d.Attribute(hip.AttrWarpSize)
	check(t, err)
	uuid, ok, err := d.UUID()
	check(t, err)
	arch, err := d.ArchName()
	check(t, err)
	dv, err := hip.DriverVersion()
	check(t, err)
	rv, err := hip.RuntimeVersion()
	check(t, err)
	got := []any{name, bus, mem, cus, wave, ok, uuid.String(), arch, hip.FormatVersion(dv), hip.FormatVersion(rv)}
	want := []any{"AMD Instinct MI300X (fake 1)", "0000:1c:00.0", int64(192 << 30), 304, 64, true,
		"GPU-10111213-1415-1617-1819-1a1b1c1d1e1f", "gfx942:sramecc+:xnack-", "6.3.42134", "6.3.42134"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("device 1 (-want +got):\n%s", diff)
	}
	if _, err := d.Attribute(12345); !errors.Is(err, errkind.ErrInvalidArgument) {
		t.Errorf("Attribute(unknown) = %v, want hipErrorInvalidValue wrapping ErrInvalidArgument", err)
	}
	if _, err := hip.Device(7).Name(); !hip.IsResult(err, hip.ErrorInvalidDevice) {
		t.Errorf("Device(7).Name() = %v, want hipErrorInvalidDevice", err)
	}

	for _, c := range []struct {
		d, peer hip.Device
		noPeer  bool
		want    bool
	}{{0, 1, false, true}, {1, 0, false, true}, {0, 0, false, false}, {0, 1, true, false}} {
		if c.noPeer {
			t.Setenv("FAKEHIP_NO_PEER", "1")
		}
		can, err := hip.CanAccessPeer(c.d, c.peer)
		if err != nil || can != c.want {
			t.Errorf("CanAccessPeer(%d, %d) no_peer=%v = %v, %v; want %v", c.d, c.peer, c.noPeer, can, err, c.want)
		}
	}
	if err := hip.Device(0).EnablePeerAccess(1); !errors.Is(err, errkind.ErrNotSupported) {
		t.Errorf("EnablePeerAccess without peer access = %v, want hipErrorPeerAccessUnsupported wrapping ErrNotSupported", err)
	}
	os.Unsetenv("FAKEHIP_NO_PEER")
	for i := 0; i < 2; i++ { // the second time is hipErrorPeerAccessAlreadyEnabled: not an error
		if err := hip.Device(0).EnablePeerAccess(1); err != nil {
			t.Errorf("EnablePeerAccess #%d = %v", i+1, err)
		}
	}
}

// TestROCm5 loads a runtime of ROCm 5's shape: the arch name is found in
// the older properties layout, the UUID is absent, and pinned host memory
// comes from hipHostAlloc.
func TestROCm5(t *testing.T) {
	hiptest.Load(t, hiptest.ROCm5)
	t.Setenv("FAKEHIP_ARCH", "gfx90a:sramecc+:xnack-")
	arch, err := hip.Device(0).ArchName()
	if err != nil || arch != "gfx90a:sramecc+:xnack-" {
		t.Errorf("ArchName() = %q, %v; want gfx90a:sramecc+:xnack-", arch, err)
	}
	if _, ok, err := hip.Device(0).UUID(); ok || err != nil {
		t.Errorf("UUID() ok=%v err=%v, want not available", ok, err)
	}
	p, err := hip.Device(0).HostMalloc(64, hip.HostMallocMapped)
	check(t, err)
	check(t, hip.Device(0).HostFree(p))
}

func TestMemory(t *testing.T) {
	hiptest.Load(t, hiptest.ROCm6)
	d := hip.Device(1)
	p, err := d.Malloc(4096, hip.MallocFinegrained)
	check(t, err)
	buf := make([]byte, 4096)
	check(t, d.MemcpyDtoH(buf, p))
	if buf[0] != 0xa5 {
		t.Fatalf("fresh fake memory reads %#x, want 0xa5 (the fake's fill)", buf[0])
	}
	check(t, d.Memset(p, 0, 4096))
	data := pattern(1000, 7)
	check(t, d.MemcpyHtoD(p+100, data))
	check(t, d.MemcpyDtoH(buf, p))
	want := make([]byte, 4096)
	copy(want[100:], data)
	if !bytes.Equal(buf, want) {
		t.Error("device memory does not hold what was written")
	}
	base, size, err := d.MemGetAddressRange(p + 1234)
	if err != nil || base != p || size != 4096 {
		t.Errorf("MemGetAddressRange(p+1234) = %#x, %d, %v; want %#x, 4096", base, size, err, p)
	}
	if err := d.MemcpyHtoD(p+4000, data); !errors.Is(err, errkind.ErrInvalidArgument) || !strings.Contains(err.Error(), "hipMemcpy") {
		t.Errorf("out-of-range MemcpyHtoD = %v, want hipMemcpy failing with an invalid value", err)
	}

	h, err := d.HostMalloc(256, hip.HostMallocMapped|hip.HostMallocCoherent|hip.HostMallocPortable)
	check(t, err)
	hd, err := d.HostGetDevicePointer(h)
	check(t, err)
	host := unsafe.Slice((*byte)(h), 256)
	copy(host, data[:256])
	got := make([]byte, 256)
	check(t, d.MemcpyDtoH(got, hd))
	if !bytes.Equal(got, data[:256]) {
		t.Error("mapped host memory read through its device address differs")
	}
	check(t, d.HostFree(h))
	check(t, d.Free(p))
	if err := d.Free(p); !errors.Is(err, errkind.ErrDevice) || !strings.Contains(err.Error(), "hipFree") {
		t.Errorf("second Free = %v, want hipFree failing", err)
	}
}

func TestIPC(t *testing.T) {
	hiptest.Load(t, hiptest.ROCm6)
	d := hip.Device(0)
	p, err := d.Malloc(1<<16, hip.MallocFinegrained)
	check(t, err)
	h, err := d.IPCGetMemHandle(p)
	check(t, err)
	q, err := hip.Device(1).IPCOpenMemHandle(h)
	check(t, err)
	if q == p {
		t.Fatal("IPCOpenMemHandle returned the exporter's address: the fake maps a second view")
	}
	data := pattern(1<<16, 3)
	check(t, d.MemcpyHtoD(p, data))
	got := make([]byte, len(data))
	check(t, hip.Device(1).MemcpyDtoH(got, q))
	if !bytes.Equal(got, data) {
		t.Error("the IPC mapping does not show the exporter's memory")
	}
	check(t, hip.Device(1).IPCCloseMemHandle(q))
	if err := hip.Device(1).IPCCloseMemHandle(q); err == nil {
		t.Error("second IPCCloseMemHandle succeeded")
	}
	if _, err := d.IPCGetMemHandle(p + 8); !hip.IsResult(err, hip.ErrorInvalidHandle) {
		t.Errorf("IPCGetMemHandle(not a base) = %v, want hipErrorInvalidHandle", err)
	}
	check(t, d.Free(p))
}

func TestStreamsAndEvents(t *testing.T) {
	hiptest.Load(t, hiptest.ROCm6)
	d := hip.Device(0)
	s, err := d.StreamCreate(hip.StreamNonBlocking)
	check(t, err)
	src, err := d.Malloc(64, 0)
	check(t, err)
	dst, err := d.Malloc(64, 0)
	check(t, err)
	check(t, d.MemcpyHtoD(src, pattern(64, 9)))
	check(t, s.MemcpyAsync(dst, src, 64))
	check(t, s.Signal64(dst+8, 77, dst+16, 5))
	check(t, s.Signal64(0, 0, dst+24, 6))
	check(t, s.WriteValue64(dst+32, 1<<40))
	done, err := s.Query()
	if err != nil || !done {
		t.Fatalf("Query() = %v, %v", done, err)
	}
	got := make([]byte, 64)
	check(t, d.MemcpyDtoH(got, dst))
	want := pattern(64, 9)
	binary.LittleEndian.PutUint64(want[8:], 77)
	binary.LittleEndian.PutUint64(want[16:], 5)
	binary.LittleEndian.PutUint64(want[24:], 6)
	binary.LittleEndian.PutUint64(want[32:], 1<<40)
	if !bytes.Equal(got, want) {
		t.Errorf("after copy and stream writes:\n got %x\nwant %x", got, want)
	}
	if err := s.WriteValue64(dst+4, 1); !errors.Is(err, errkind.ErrInvalidArgument) {
		t.Errorf("misaligned WriteValue64 = %v, want an invalid value", err)
	}

	start, err := d.EventCreate(hip.EventDefault)
	check(t, err)
	end, err := d.EventCreate(hip.EventDefault)
	check(t, err)
	check(t, start.Record(s))
	check(t, end.Record(s))
	if done, err := end.Query(); !done || err != nil {
		t.Errorf("event Query() = %v, %v", done, err)
	}
	if ms, err := end.ElapsedMillis(start); err != nil || ms < 0 {
		t.Errorf("ElapsedMillis = %v, %v", ms, err)
	}
	check(t, start.Destroy())
	check(t, end.Destroy())
	check(t, s.Destroy())
	if _, err := s.Query(); !hip.IsResult(err, hip.ErrorInvalidHandle) {
		t.Errorf("Query of a destroyed stream = %v, want hipErrorInvalidHandle", err)
	}
	t.Setenv("FAKEHIP_FAIL", "hipStreamQuery=600,hipEventQuery=600")
	if done, err := s.Query(); done || err != nil {
		t.Errorf("Query with hipErrorNotReady = %v, %v; want not done, no error", done, err)
	}
	if done, err := end.Query(); done || err != nil {
		t.Errorf("event Query with hipErrorNotReady = %v, %v; want not done, no error", done, err)
	}
}

const kernelSource = `#include "weft_test.h"
struct Params { unsigned long long a, b; };
extern "C" __global__ void __launch_bounds__(256) fill(Params p) { store(p.a, p.b); }
extern "C" __global__ void other() {}
`

var kernelHeaders = map[string]string{"weft_test.h": "#pragma once\n"}

func TestCompileAndLaunch(t *testing.T) {
	libs := hiptest.Load(t, hiptest.ROCm6)
	d := hip.Device(0)
	arch, err := d.ArchName()
	check(t, err)
	code, err := hip.Compile(hip.Source{Name: "fill.hip", Source: kernelSource, Headers: kernelHeaders, Options: []string{"-DX=1"}, Arch: arch})
	check(t, err)
	for _, want := range []string{"arch=gfx942:sramecc+:xnack-", "opt=--offload-arch=gfx942:sramecc+:xnack-", "opt=-O3", "opt=-std=c++17", "opt=-DX=1", "kernel=fill", "kernel=other"} {
		if !bytes.Contains(code, []byte(want+"\n")) {
			t.Errorf("code object lacks %q:\n%s", want, code)
		}
	}
	m, err := d.ModuleLoadData(code)
	check(t, err)
	f, err := m.Function("fill")
	check(t, err)
	if _, err := m.Function("missing"); !hip.IsResult(err, hip.ErrorNotFound) || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf(`Function("missing") = %v, want hipErrorNotFound naming the kernel`, err)
	}
	s, err := d.StreamCreate(hip.StreamNonBlocking)
	check(t, err)
	params := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 0x1122334455667788), 42)
	check(t, f.Launch(hip.Dim3{X: 3}, hip.Dim3{X: 256}, 128, s, params))
	launches := libs.Lines(t, "launch ")
	if len(launches) != 1 {
		t.Fatalf("log has %d launches, want 1: %v", len(launches), launches)
	}
	got := hiptest.Fields(launches[0])
	want := map[string]string{"kernel": "fill", "grid": "3,1,1", "block": "256,1,1", "shared": "128", "bytes": "16", "graph": "0",
		"params": fmt.Sprintf("%x", params)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("launch (-want +got):\n%s", diff)
	}

	// A graph captured from the stream replays the launch.
	check(t, s.BeginCapture(hip.StreamCaptureModeRelaxed))
	check(t, f.Launch(hip.Dim3{X: 1}, hip.Dim3{X: 64}, 0, s, params))
	g, err := s.EndCapture()
	check(t, err)
	e, err := g.Instantiate()
	check(t, err)
	check(t, e.Launch(s))
	check(t, e.Launch(s))
	launches = libs.Lines(t, "launch ")
	if len(launches) != 3 || hiptest.Fields(launches[2])["graph"] != "1" || hiptest.Fields(launches[2])["block"] != "64,1,1" {
		t.Errorf("after two graph launches the log has %v, want two more launches from the graph", launches)
	}
	check(t, e.Destroy())
	check(t, g.Destroy())
	check(t, m.Unload())
	check(t, s.Destroy())

	// A code object for another GPU is refused by the loader.
	other, err := hip.Compile(hip.Source{Name: "fill.hip", Source: kernelSource, Headers: kernelHeaders, Arch: "gfx90a"})
	check(t, err)
	if _, err := d.ModuleLoadData(other); !hip.IsResult(err, 209) {
		t.Errorf("ModuleLoadData(gfx90a code on gfx942) = %v, want hipErrorNoBinaryForGpu", err)
	}
}

func TestCompileErrors(t *testing.T) {
	hiptest.Load(t, hiptest.ROCm6)
	_, err := hip.Compile(hip.Source{Name: "bad.hip", Source: kernelSource, Arch: "gfx942"}) // header missing
	var re *hip.RTCError
	if !errors.As(err, &re) || re.Code != hip.RTCErrorCompilation || re.Call != "hiprtcCompileProgram" ||
		!strings.Contains(re.Log, "'weft_test.h' file not found") || !errors.Is(err, errkind.ErrInvalidArgument) {
		t.Errorf("Compile without the header = %v, want a compilation error with the log", err)
	}
	if _, err := hip.Compile(hip.Source{Name: "k", Source: kernelSource}); !errors.Is(err, errkind.ErrInvalidArgument) {
		t.Errorf("Compile without a target = %v, want ErrInvalidArgument", err)
	}
	for _, c := range []struct{ fail, call string }{
		{"hiprtcCreateProgram=3", "hiprtcCreateProgram"},
		{"hiprtcCompileProgram=5", "hiprtcCompileProgram"},
		{"hiprtcGetCodeSize=11", "hiprtcGetCode"},
		{"hiprtcGetCode=11", "hiprtcGetCode"},
	} {
		t.Setenv("FAKEHIP_FAIL", c.fail)
		_, err := hip.Compile(hip.Source{Name: "k.hip", Source: kernelSource, Headers: kernelHeaders, Arch: "gfx942"})
		if !errors.As(err, &re) || re.Call != c.call || !strings.HasPrefix(re.Text, "fake hipRTC error") || !errors.Is(err, errkind.ErrDevice) {
			t.Errorf("FAKEHIP_FAIL=%s: Compile = %v, want an RTCError of %s with the library's text", c.fail, err, c.call)
		}
	}
}

func TestKernelCache(t *testing.T) {
	libs := hiptest.Load(t, hiptest.ROCm6)
	t.Setenv("WEFT_CACHE_DIR", t.TempDir())
	cv, err := hip.CompilerVersion()
	if err != nil || cv != "hiprtc-6.3/hip-6.3.42134" {
		t.Fatalf("CompilerVersion() = %q, %v", cv, err)
	}
	c, err := hip.NewKernelCache()
	check(t, err)
	src := hip.Source{Name: "k.hip", Source: kernelSource, Headers: kernelHeaders, Arch: "gfx942:sramecc+:xnack-"}
	a, hit1, err := c.Get(src)
	check(t, err)
	b, hit2, err := c.Get(src)
	check(t, err)
	if hit1 || !hit2 || !bytes.Equal(a, b) || len(libs.Lines(t, "compile ")) != 1 {
		t.Errorf("two Gets: hits %v, %v, compiles %d; want a miss, then a hit of the same code object", hit1, hit2, len(libs.Lines(t, "compile ")))
	}
	src.Arch = "gfx90a"
	if _, hit, _ := c.Get(src); hit {
		t.Error("another target hit the cache")
	}
}

// TestErrorPaths makes every binding's call fail in the fake and checks the
// error names the call and carries the runtime's name and text for the
// code: a binding wired to the wrong entry point, or one that drops the
// result, fails here.
func TestErrorPaths(t *testing.T) {
	hiptest.Load(t, hiptest.ROCm6)
	d := hip.Device(0)
	p, err := d.Malloc(4096, 0)
	check(t, err)
	h, err := d.HostMalloc(64, hip.HostMallocMapped)
	check(t, err)
	ipc, err := d.IPCGetMemHandle(p)
	check(t, err)
	s, err := d.StreamCreate(0)
	check(t, err)
	ev, err := d.EventCreate(0)
	check(t, err)
	check(t, ev.Record(s))
	code, err := hip.Compile(hip.Source{Name: "k.hip", Source: kernelSource, Headers: kernelHeaders, Arch: "gfx942"})
	check(t, err)
	m, err := d.ModuleLoadData(code)
	check(t, err)
	f, err := m.Function("fill")
	check(t, err)
	check(t, s.BeginCapture(hip.StreamCaptureModeRelaxed))
	g, err := s.EndCapture()
	check(t, err)
	ge, err := g.Instantiate()
	check(t, err)
	buf := make([]byte, 16)

	cases := []struct {
		call string
		run  func() error
	}{
		{"hipDriverGetVersion", func() error { _, err := hip.DriverVersion(); return err }},
		{"hipRuntimeGetVersion", func() error { _, err := hip.RuntimeVersion(); return err }},
		{"hipGetDeviceCount", func() error { _, err := hip.DeviceCount(); return err }},
		{"hipDeviceGetName", func() error { _, err := d.Name(); return err }},
		{"hipDeviceGetAttribute", func() error { _, err := d.Attribute(hip.AttrWarpSize); return err }},
		{"hipDeviceGetPCIBusId", func() error { _, err := d.PCIBusID(); return err }},
		{"hipDeviceTotalMem", func() error { _, err := d.TotalMem(); return err }},
		{"hipDeviceGetUuid", func() error { _, _, err := d.UUID(); return err }},
		{"hipGetDevicePropertiesR0600", func() error { _, err := d.ArchName(); return err }},
		{"hipDeviceCanAccessPeer", func() error { _, err := hip.CanAccessPeer(0, 1); return err }},
		{"hipDeviceEnablePeerAccess", func() error { return d.EnablePeerAccess(1) }},
		{"hipExtMallocWithFlags", func() error { _, err := d.Malloc(64, 0); return err }},
		{"hipFree", func() error { return d.Free(p) }},
		{"hipHostMalloc", func() error { _, err := d.HostMalloc(64, 0); return err }},
		{"hipHostGetDevicePointer", func() error { _, err := d.HostGetDevicePointer(h); return err }},
		{"hipHostFree", func() error { return d.HostFree(h) }},
		{"hipMemcpy", func() error { return d.MemcpyHtoD(p, buf) }},
		{"hipMemcpy", func() error { return d.MemcpyDtoH(buf, p) }},
		{"hipMemset", func() error { return d.Memset(p, 0, 16) }},
		{"hipMemGetAddressRange", func() error { _, _, err := d.MemGetAddressRange(p); return err }},
		{"hipIpcGetMemHandle", func() error { _, err := d.IPCGetMemHandle(p); return err }},
		{"hipIpcOpenMemHandle", func() error { _, err := d.IPCOpenMemHandle(ipc); return err }},
		{"hipIpcCloseMemHandle", func() error { return d.IPCCloseMemHandle(p) }},
		{"hipStreamCreateWithFlags", func() error { _, err := d.StreamCreate(0); return err }},
		{"hipStreamQuery", func() error { _, err := s.Query(); return err }},
		{"hipStreamDestroy", func() error { return s.Destroy() }},
		{"hipMemcpyAsync", func() error { return s.MemcpyAsync(p, p+64, 64) }},
		{"hipStreamWriteValue64", func() error { return s.WriteValue64(p, 1) }},
		{"hipStreamWriteValue64", func() error { return s.Signal64(p, 1, p+8, 2) }},
		{"hipStreamWaitEvent", func() error { _, err := s.After(s); return err }},
		{"hipStreamBeginCapture", func() error { return s.BeginCapture(hip.StreamCaptureModeRelaxed) }},
		{"hipStreamEndCapture", func() error { _, err := s.EndCapture(); return err }},
		{"hipGraphInstantiate", func() error { _, err := g.Instantiate(); return err }},
		{"hipGraphLaunch", func() error { return ge.Launch(s) }},
		{"hipGraphExecDestroy", func() error { return ge.Destroy() }},
		{"hipGraphDestroy", func() error { return g.Destroy() }},
		{"hipEventCreateWithFlags", func() error { _, err := d.EventCreate(0); return err }},
		{"hipEventRecord", func() error { return ev.Record(s) }},
		{"hipEventQuery", func() error { _, err := ev.Query(); return err }},
		{"hipEventElapsedTime", func() error { _, err := ev.ElapsedMillis(ev); return err }},
		{"hipEventDestroy", func() error { return ev.Destroy() }},
		{"hipModuleLoadData", func() error { _, err := d.ModuleLoadData(code); return err }},
		{"hipModuleGetFunction", func() error { _, err := m.Function("fill"); return err }},
		{"hipModuleUnload", func() error { return m.Unload() }},
		{"hipModuleLaunchKernel", func() error { return f.Launch(hip.Dim3{X: 1}, hip.Dim3{X: 64}, 0, s, buf) }},
		{"hipModuleOccupancyMaxActiveBlocksPerMultiprocessor", func() error { _, err := f.MaxActiveBlocksPerMultiprocessor(256, 0); return err }},
	}
	for _, c := range cases {
		t.Run(c.call, func(t *testing.T) {
			t.Setenv("FAKEHIP_FAIL", c.call+"=4242")
			err := c.run()
			var he *hip.Error
			if !errors.As(err, &he) {
				t.Fatalf("%s failing: got %v, want a *hip.Error", c.call, err)
			}
			want := hip.Error{Call: c.call, Code: 4242, Name: "hipErrorFake4242", Description: "fake HIP error 4242"}
			if diff := cmp.Diff(want, *he); diff != "" || !errors.Is(err, errkind.ErrDevice) {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}

	// A failed hipSetDevice is reported as such, not as the call after it.
	t.Setenv("FAKEHIP_FAIL", "hipSetDevice=101")
	_, err = d.Malloc(64, 0)
	var he *hip.Error
	if !errors.As(err, &he) || he.Call != "hipSetDevice (before hipExtMallocWithFlags)" || he.Code != hip.ErrorInvalidDevice {
		t.Errorf("Malloc with hipSetDevice failing = %v, want hipSetDevice named", err)
	}
	// The synchronisation after a synchronous copy is checked too.
	t.Setenv("FAKEHIP_FAIL", "hipStreamSynchronize=4242")
	if err := d.MemcpyHtoD(p, buf); !errors.As(err, &he) || he.Call != "hipStreamSynchronize (after hipMemcpy)" {
		t.Errorf("MemcpyHtoD with the synchronisation failing = %v", err)
	}
	if err := d.Memset(p, 0, 16); !errors.As(err, &he) || he.Call != "hipStreamSynchronize (after hipMemset)" {
		t.Errorf("Memset with the synchronisation failing = %v", err)
	}
}

func TestFormats(t *testing.T) {
	got := []string{hip.FormatVersion(60342134), hip.FormatVersion(50731921), hip.BaseArch("gfx942:sramecc+:xnack-"), hip.BaseArch("gfx90a"),
		hip.Result(400).Name(), hip.RTCResult(6).String(), hip.RTCResult(100).String(), hip.RTCResult(77).String()}
	want := []string{"6.3.42134", "5.7.31921", "gfx942", "gfx90a", "hipErrorInvalidHandle", "HIPRTC_ERROR_COMPILATION", "HIPRTC_ERROR_LINKING", "hiprtcResult(77)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func pattern(n int, seed uint32) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(uint32(i)*2654435761>>24 ^ seed)
	}
	return b
}
