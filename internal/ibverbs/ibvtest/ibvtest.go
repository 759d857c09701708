// Package ibvtest builds weft's in-memory verbs provider
// (internal/ibverbs/testdata/fakeverbs.c) with the system C compiler, so
// that tests of internal/ibverbs and hal/ib exercise every verbs path on
// machines without RDMA hardware. Tests skip only where no C compiler
// exists.
//
// The provider reads its configuration from the environment when called
// (FAKEVERBS_DEVICES, FAKEVERBS_PORT_DOWN, FAKEVERBS_MAX_MSG,
// FAKEVERBS_CQ_CAP, FAKEVERBS_DEFER; see fakeverbs.c), so tests set it
// with t.Setenv.
package ibvtest

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Build compiles the provider into a fresh directory of the test and
// returns the library's path. Each build is a separate library with its
// own devices, regions and queue pairs. It skips the test when no C
// compiler exists.
func Build(t testing.TB) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skipf("no C compiler to build weft's verbs provider: %v", err)
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("ibvtest: cannot locate the provider's source")
	}
	pkg := filepath.Join(filepath.Dir(file), "..")
	out := filepath.Join(t.TempDir(), "libfakeverbs.so")
	args := []string{"-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-I", pkg, "-o", out,
		filepath.Join(pkg, "testdata", "fakeverbs.c"), "-lpthread"}
	if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("build the verbs provider: %v\n%s", err, b)
	}
	return out
}
