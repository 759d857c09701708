// Package hiptest builds the fake HIP runtime and hipRTC of
// internal/hip/testdata (fakehip.c, fakertc.c) with the system C compiler
// and loads them, so that tests of internal/hip and hal/xgmi run on
// machines without ROCm. Tests skip only where no C compiler exists.
//
// The fakes read their configuration from the environment when called
// (FAKEHIP_FAIL, FAKEHIP_DEVICES, FAKEHIP_NO_PEER, FAKEHIP_ARCH,
// FAKEHIP_LOG; see fakehip.c), so tests set it with t.Setenv.
package hiptest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/weftccl/weft/internal/hip"
)

// Libs are the built fake libraries and the log they append to.
type Libs struct {
	HIP, RTC string
	// Log is the file FAKEHIP_LOG names: one line per kernel launch and
	// per compilation.
	Log string
}

// Variant selects the shape of the fake runtime.
type Variant string

const (
	// ROCm6 exports hipGetDevicePropertiesR0600, hipDeviceGetUuid and
	// hipHostMalloc.
	ROCm6 Variant = ""
	// ROCm5 exports hipGetDeviceProperties (another layout) and
	// hipHostAlloc instead, and no hipDeviceGetUuid.
	ROCm5 Variant = "rocm5"
)

// testdata is internal/hip/testdata, found from this file's path: the
// tests run inside the module.
func testdata(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("hiptest: cannot locate the fake sources")
	}
	return filepath.Join(filepath.Dir(file), "..", "testdata")
}

// Build compiles the fakes into a fresh directory of the test (so that
// each test loads its own copy, with its own allocation tables). It skips
// the test when no C compiler exists.
func Build(t testing.TB, v Variant) Libs {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skipf("no C compiler to build the fake HIP runtime: %v", err)
	}
	src := testdata(t)
	dir := t.TempDir()
	l := Libs{HIP: filepath.Join(dir, "libamdhip64.so"), RTC: filepath.Join(dir, "libhiprtc.so"), Log: filepath.Join(dir, "fakehip.log")}
	build := func(out, file string, defs ...string) {
		args := append([]string{"-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", out, filepath.Join(src, file)}, defs...)
		if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", file, err, b)
		}
	}
	var defs []string
	if v == ROCm5 {
		defs = append(defs, "-DFAKE_ROCM5")
	}
	build(l.HIP, "fakehip.c", defs...)
	build(l.RTC, "fakertc.c")
	return l
}

// Load builds the fakes, sets FAKEHIP_LOG for the test and loads both
// with hip.LoadFrom and hip.LoadRTCFrom.
func Load(t testing.TB, v Variant) Libs {
	t.Helper()
	l := Build(t, v)
	t.Setenv("FAKEHIP_LOG", l.Log)
	if err := hip.LoadFrom(l.HIP); err != nil {
		t.Fatalf("load fake HIP runtime: %v", err)
	}
	if err := hip.LoadRTCFrom(l.RTC); err != nil {
		t.Fatalf("load fake hipRTC: %v", err)
	}
	return l
}

// Lines returns the lines of the log that start with prefix ("launch ",
// "compile ").
func (l Libs) Lines(t testing.TB, prefix string) []string {
	t.Helper()
	f, err := os.Open(l.Log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			out = append(out, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Fields parses a log line's key=value fields.
func Fields(line string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}
