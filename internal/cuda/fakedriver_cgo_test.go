//go:build cgo && linux

package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFakeDriverMulticast loads a stand-in driver (testdata/fakecuda.c)
// that has the multicast entry points at CUDA version 12010 only, or not at
// all: weft resolves them at 12010, reports them available, and calls
// them; without them it reports them missing and every call fails naming
// the call and the CUDA 12.1 it needs, instead of calling a null pointer.
func TestFakeDriverMulticast(t *testing.T) {
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
