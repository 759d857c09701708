//go:build cgo

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftccl/weft/internal/env"
)

// TestCProgram builds libweft_nccl.so and testdata/ctest.c, a C program
// written against include/nccl.h as any NCCL client is, and runs it as 2
// and 3 processes on hal/host: every collective for several types, ops,
// sizes, in and out of place; grouped send/recv (ring, all-to-all-v);
// PreMulSum; split; bad inputs and their last-error texts. Without a C
// compiler it skips, unless WEFT_REQUIRE names nccl-ctest.
func TestCProgram(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the shared library and runs processes")
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		if env.Required("nccl-ctest") {
			t.Fatalf("WEFT_REQUIRE=nccl-ctest but no C compiler: %v", err)
		}
		t.Skipf("no C compiler (cc) to build testdata/ctest.c: %v", err)
	}
	dir := t.TempDir()
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	lib := filepath.Join(dir, "libweft_nccl.so")
	build := exec.Command(goTool, "build", "-buildmode=c-shared", "-o", lib, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildmode=c-shared: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "ctest")
	compile := exec.Command(cc, "-std=c11", "-D_DEFAULT_SOURCE", "-Wall", "-Wextra", "-Werror", "-Iinclude",
		"-o", bin, "testdata/ctest.c", "-L"+dir, "-lweft_nccl", "-Wl,-rpath,"+dir, "-lm")
	if out, err := compile.CombinedOutput(); err != nil {
		t.Fatalf("cc testdata/ctest.c: %v\n%s", err, out)
	}
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) { runCTest(t, bin, n) })
	}
}

var summary = regexp.MustCompile(`rank (\d+): (\d+) passed, (\d+) failed`)

func runCTest(t *testing.T, bin string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	idFile := filepath.Join(t.TempDir(), "id")
	outs := make([]bytes.Buffer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		cmd := exec.CommandContext(ctx, bin)
		cmd.Env = append(os.Environ(), "WEFT_HAL=host", "WEFT_NCCL_FALLBACK=0", "WEFT_TIMEOUT=60s",
			fmt.Sprintf("RANK=%d", r), fmt.Sprintf("WORLD_SIZE=%d", n), "WEFT_ID_FILE="+idFile)
		cmd.Stdout = &outs[r]
		cmd.Stderr = &outs[r]
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = cmd.Run()
		}()
	}
	wg.Wait()
	for r := 0; r < n; r++ {
		out := outs[r].String()
		m := summary.FindStringSubmatch(out)
		switch {
		case ctx.Err() != nil:
			t.Errorf("rank %d: timed out\n%s", r, tail(out))
		case m == nil:
			t.Errorf("rank %d: no summary line (exit %v)\n%s", r, errs[r], tail(out))
		case errs[r] != nil || m[3] != "0":
			t.Errorf("rank %d: exit %v, %s passed, %s failed\n%s", r, errs[r], m[2], m[3], tail(out))
		case m[2] == "0":
			t.Errorf("rank %d: nothing passed\n%s", r, tail(out))
		default:
			t.Logf("rank %d: %s passed", r, m[2])
		}
	}
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 40 {
		lines = append([]string{"…"}, lines[len(lines)-40:]...)
	}
	return strings.Join(lines, "\n")
}
