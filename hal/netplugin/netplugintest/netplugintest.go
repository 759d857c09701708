// Package netplugintest builds weft's test NCCL net plugin
// (hal/netplugin/testdata/weftest.c: ncclNet v8 over loopback TCP) with
// the system C compiler, so that tests of hal/netplugin, the conformance
// suite and the root package run the plugin transport on machines
// without a cluster network. Tests skip only where no C compiler exists.
package netplugintest

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// LibName is the file Build writes: the name NCCL_NET_PLUGIN=weftest
// resolves to (libnccl-net-weftest.so).
const LibName = "libnccl-net-weftest.so"

// Build compiles the plugin into a fresh directory of the test and
// returns the library's path. It skips the test when no C compiler
// exists.
func Build(t testing.TB) string {
	t.Helper()
	return BuildIn(t, t.TempDir())
}

// BuildIn is Build into directory dir, which the caller removes (for a
// library shared by several tests of one binary).
func BuildIn(t testing.TB, dir string) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skipf("no C compiler to build weft's test net plugin: %v", err)
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("netplugintest: cannot locate the plugin's source")
	}
	pkg := filepath.Join(filepath.Dir(file), "..")
	include := filepath.Join(pkg, "..", "..", "internal", "ncclnet")
	out := filepath.Join(dir, LibName)
	args := []string{"-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-I", include, "-o", out,
		filepath.Join(pkg, "testdata", "weftest.c")}
	if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("build the test net plugin: %v\n%s", err, b)
	}
	return out
}
