//go:build cgo && linux

package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFakeDriverMulticast loads a stand-in driver (testdata/fakecuda.c)
// that has the multicast entry points at CUDA version 12010 only, or not at
// all: weft resolves them at 12010, reports them available, and calls
// them; without them it reports them missing and every call fails naming
// the call and the CUDA 12.1 it needs, instead of calling a null pointer.
func TestFakeDriverMulticast(t *testing.T) {
	lib := buildFakeDriver(t)
	run := func(multicast string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fakeDriverEnv+"=1", "WEFT_CUDA_LIB="+lib, "FAKECUDA_MULTICAST="+multicast)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child (FAKECUDA_MULTICAST=%s): %v\n%s", multicast, err, out)
		}
		return string(out)
	}
	with := run("1")
	for _, want := range []string{"available: true", "granularity: 536870912 <nil>", "create: <nil>"} {
		if !strings.Contains(with, want) {
			t.Errorf("driver with multicast: output lacks %q:\n%s", want, with)
		}
	}
	without := run("0")
	for _, want := range []string{
		"available: false",
		"granularity: 0 cuMulticastGetGranularity: CUDA_ERROR_NOT_SUPPORTED (the driver has no cuMulticastGetGranularity (multicast objects need a CUDA 12.1 or newer driver))",
		"create: cuMulticastCreate: CUDA_ERROR_NOT_SUPPORTED (the driver has no cuMulticastCreate",
	} {
		if !strings.Contains(without, want) {
			t.Errorf("driver without multicast: output lacks %q:\n%s", want, without)
		}
	}
}

// buildFakeDriver compiles testdata/fakecuda.c into a libcuda.so.1.
func buildFakeDriver(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		if cc, err = exec.LookPath("cc"); err != nil {
			t.Skip("no C compiler to build the fake driver")
		}
	}
	src, err := filepath.Abs(filepath.Join("testdata", "fakecuda.c"))
	if _, serr := os.Stat(src); err != nil || serr != nil {
		t.Skip("testdata/fakecuda.c not present (test binary run outside its package directory)")
	}
	lib := filepath.Join(t.TempDir(), "libcuda.so.1")
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("build fake driver: %v\n%s", err, out)
	}
	return lib
}

// TestFakeDriverStreamOps: QueueOps (weft_queue_ops, the copy-engine
// AllGather's one cgo call per batch) issues every operation in list
// order on its lane's stream, skips empty copies and reductions, launches
// a kernel with its four-word parameter, waits for equality, and
// with batching merges consecutive waits and writes of one lane into one
// cuStreamBatchMemOp with the 64-bit wait (4, flag EQ) and write (5)
// operations; a lane past the streams is refused before any call.
func TestFakeDriverStreamOps(t *testing.T) {
	lib := buildFakeDriver(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fakeDriverEnv+"=1", "WEFT_CUDA_LIB="+lib, "FAKECUDA_MULTICAST=0", "FAKECUDA_STREAMOPS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var plain, batched []string
	cur := &plain
	for _, l := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(l, "queue batch=true"):
			cur = &batched
		case strings.HasPrefix(l, "op "):
			*cur = append(*cur, l)
		}
	}
	wantPlain := []string{
		"op wait stream=0x10 addr=0x1000 value=1 flags=1",
		"op write stream=0x10 addr=0x1000 value=0 flags=0",
		"op memcpy stream=0x10 dst=0x2000 src=0x3000 bytes=4096",
		"op write stream=0x10 addr=0x4000 value=1 flags=0",
		"op kernel stream=0x10 fn=0xf0 grid=32 block=512 shared=0 params=0x9000,0xa000,0xb000,256",
		"op write stream=0x10 addr=0x4008 value=2 flags=0",
		"op wait stream=0x20 addr=0x5000 value=1 flags=1",
		"op write stream=0x20 addr=0x5000 value=0 flags=0",
		"op write stream=0x20 addr=0x8000 value=1 flags=0",
	}
	wantBatched := []string{
		"op batch stream=0x10 count=2 flags=0: [wait addr=0x1000 value=1 flags=1] [write addr=0x1000 value=0 flags=0]",
		"op memcpy stream=0x10 dst=0x2000 src=0x3000 bytes=4096",
		"op batch stream=0x10 count=1 flags=0: [write addr=0x4000 value=1 flags=0]",
		"op kernel stream=0x10 fn=0xf0 grid=32 block=512 shared=0 params=0x9000,0xa000,0xb000,256",
		"op batch stream=0x10 count=1 flags=0: [write addr=0x4008 value=2 flags=0]",
		"op batch stream=0x20 count=2 flags=0: [wait addr=0x5000 value=1 flags=1] [write addr=0x5000 value=0 flags=0]",
		"op batch stream=0x20 count=1 flags=0: [write addr=0x8000 value=1 flags=0]",
	}
	if d := cmp.Diff(wantPlain, plain); d != "" {
		t.Errorf("calls without batching (-want +got):\n%s\n%s", d, out)
	}
	if d := cmp.Diff(wantBatched, batched); d != "" {
		t.Errorf("calls with batching (-want +got):\n%s\n%s", d, out)
	}
	for _, want := range []string{"queued batch=false: failed -1, <nil>", "queued batch=true: failed -1, <nil>", "bad lane: stream operation 0: kind 3 on lane 1 of 1 streams", "no function: stream operation 0: kernel launch without a function"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
