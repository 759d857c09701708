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
	"strconv"
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
// PreMulSum; split; bad inputs and their last-error texts. Then as 16
// processes in ctest.c's scale mode (inputs exact at any rank count: every
// type and operator of AllReduce, ReduceScatter and Reduce, the other
// collectives, grouped send/recv), checking from the NCCL_DEBUG=INFO logs
// that weft served every call and forwarded none (servedByWeft). Without a
// C compiler it skips, unless WEFT_REQUIRE names nccl-ctest.
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
	// The three jobs run side by side (each its own processes and unique
	// id), so the 16-rank one adds little to the package's wall time.
	// ranks=2 registers collectively (the zero-copy receives of
	// testRegistered); the others with NCCL's local ncclCommRegister.
	t.Run("ranks=2,register=collective", func(t *testing.T) {
		t.Parallel()
		// WEFT_CE_ALLREDUCE_MIN_BYTES=64K: testWindows' AllReduces of 280
		// and 512 KB into its symmetric window run zero-copy through it
		// (2 types × 2 operators × 2 sizes × in and out of place), the
		// 4 KB ones through the kernel plans; its AllGather and
		// ReduceScatter through the direct plans: the destroy line counts
		// 18.
		outs := runCTest(t, bin, 2, false, "WEFT_NCCL_REGISTER=collective", "WEFT_CE_ALLREDUCE_MIN_BYTES=64K", "NCCL_DEBUG=INFO")
		for r, out := range outs {
			total := 0 // over the rank's communicators (its splits run no window calls)
			for _, m := range windowCallsRE.FindAllStringSubmatch(out, -1) {
				k, _ := strconv.Atoi(m[1])
				total += k
			}
			if total != 18 {
				t.Errorf("rank %d: destroy lines' window_calls add up to %d, want 18 (testWindows' zero-copy AllReduces, AllGather and ReduceScatter)\n%s", r, total, tail(out))
			}
		}
	})
	t.Run("ranks=3,maxCTAs=5", func(t *testing.T) {
		t.Parallel()
		// ncclConfig_t.maxCTAs = 5 (the point-to-point plan's minimum on
		// 3 ranks: 5 groups): the whole suite under a block budget that
		// binds (hal/host's default plans hold up to 10 blocks on 3 ranks).
		const budget = 5
		// WEFT_PROXY_PROFILE=1 also times the host-side stages of every call
		// (this layer's and weft.Comm.Launch's), logged at destroy.
		outs := runCTest(t, bin, 3, false, fmt.Sprintf("WEFT_CTEST_MAX_CTAS=%d", budget), "NCCL_DEBUG=INFO", "WEFT_PROXY_PROFILE=1")
		for r, out := range outs {
			for _, want := range []string{`of="NCCL-layer calls of rank`, `stage="weft Launch"`, `of="launch path of rank`, `stage="enqueue (pack + launch)"`,
				`stage="weft LaunchP2P"`, `of="point-to-point launch path of rank`, `stage="arguments of a launch"`} {
				if !strings.Contains(out, want) {
					t.Errorf("rank %d: no profile line with %s under WEFT_PROXY_PROFILE=1\n%s", r, want, tail(out))
				}
			}
		}
		for r, out := range outs {
			lines := peakBlocks.FindAllStringSubmatch(out, -1)
			if len(lines) == 0 {
				t.Errorf("rank %d: no 3-rank \"communicator destroyed\" line with peak_blocks\n%s", r, tail(out))
			}
			for _, m := range lines {
				peak, _ := strconv.Atoi(m[1])
				if peak < 1 || peak > budget {
					t.Errorf("rank %d: a launch held %d blocks under ncclConfig_t.maxCTAs = %d (%s)", r, peak, budget, m[0])
				} else {
					t.Logf("rank %d: at most %d blocks per launch (budget %d)", r, peak, budget)
				}
			}
		}
	})
	t.Run("ranks=16,scale", func(t *testing.T) {
		t.Parallel()
		runCTest(t, bin, 16, true)
	})
	t.Run("ranks=3,WEFT_ALGO=ce", func(t *testing.T) {
		t.Parallel()
		// The host-issued copy-engine AllGather (ce.go) under the C ABI:
		// every AllGather of the suite (in place too) through it.
		runCTest(t, bin, 3, false, "WEFT_ALGO=ce")
	})
	t.Run("ranks=2,WEFT_CE_MIN_BYTES=16K", func(t *testing.T) {
		t.Parallel()
		// The default selection with a small bound (on GPUs 32M): the
		// suite's larger AllGathers through the copy-engine executor, the
		// smaller ones through kernel plans, in one job.
		runCTest(t, bin, 2, false, "WEFT_CE_MIN_BYTES=16K")
	})
	t.Run("ranks=3,WEFT_CE_P2P_MIN_BYTES=16K", func(t *testing.T) {
		t.Parallel()
		// The copy-engine point-to-point path (p2pce.go) under the C ABI
		// with a small bound (on GPUs 64M): the suite's sends and
		// receives of 16 KB and more (its rings, all-to-all-v, the
		// registered and window tests) by copy engines into the
		// receivers' exported buffers, the smaller ones by kernels.
		outs := runCTest(t, bin, 3, false, "WEFT_CE_P2P_MIN_BYTES=16K", "NCCL_DEBUG=INFO")
		for r, out := range outs {
			total := 0
			for _, m := range ceP2POpsRE.FindAllStringSubmatch(out, -1) {
				k, _ := strconv.Atoi(m[1])
				total += k
			}
			if total == 0 {
				t.Errorf("rank %d: destroy lines count no point-to-point operation on copy engines under WEFT_CE_P2P_MIN_BYTES=16K\n%s", r, tail(out))
			} else {
				t.Logf("rank %d: %d point-to-point operations on copy engines", r, total)
			}
		}
	})
	t.Run("ranks=2,exported outputs", func(t *testing.T) {
		t.Parallel()
		// The copy-engine Reduce into the root's output (cereduce.go) and
		// AllReduce into the peers' outputs (cear.go) under the C ABI with
		// small bounds (on GPUs 64M / 512M and 512M): the suite's Reduces
		// and AllReduces of 16 KB and more by copy engines into buffers
		// exported at the call, across processes.
		outs := runCTest(t, bin, 2, false, "WEFT_CE_REDUCE_MIN_BYTES=16K", "WEFT_CE_REDUCE_DIRECT_MIN_BYTES=16K",
			"WEFT_CE_ALLREDUCE_MIN_BYTES=16K", "NCCL_DEBUG=INFO")
		for r, out := range outs {
			total := 0
			for _, m := range exportedCallsRE.FindAllStringSubmatch(out, -1) {
				k, _ := strconv.Atoi(m[1])
				total += k
			}
			if total == 0 {
				t.Errorf("rank %d: destroy lines count no call into exported outputs\n%s", r, tail(out))
			} else {
				t.Logf("rank %d: %d calls into exported outputs", r, total)
			}
		}
	})
	t.Run("forward under LD_PRELOAD", func(t *testing.T) {
		t.Parallel()
		forwardUnderPreload(t, cc, lib, dir)
	})
}

// forwardUnderPreload runs testdata/fwdtest.c, linked against a stand-in
// for NVIDIA's libnccl.so.2 (testdata/fakenccl.c), with weft preloaded and
// WEFT_NCCL_FALLBACK=all, as PyTorch runs: the process loaded NCCL before
// weft was asked to forward, so NCCL's calls to its own exported
// ncclCommGetAsyncError (every collective's first check in NCCL 2.28)
// resolve to weft's. Every forwarded call must succeed, and the stand-in
// must see its own calls come back (2026-11-26: forwarded collectives
// failed with ncclInvalidArgument under PyTorch and NCCL 2.28.9).
func forwardUnderPreload(t *testing.T, cc, lib, dir string) {
	fake := filepath.Join(dir, "fake")
	if err := os.MkdirAll(fake, 0o755); err != nil {
		t.Fatal(err)
	}
	so := filepath.Join(fake, "libnccl.so.2")
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-O0", "-Iinclude", "-Wl,-soname,libnccl.so.2", "-o", so,
		"testdata/fakenccl.c").CombinedOutput(); err != nil {
		t.Fatalf("cc testdata/fakenccl.c: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "fwdtest")
	if out, err := exec.Command(cc, "-std=c11", "-Wall", "-Werror", "-Iinclude", "-o", bin, "testdata/fwdtest.c", so,
		"-Wl,-rpath,"+fake).CombinedOutput(); err != nil {
		t.Fatalf("cc testdata/fwdtest.c: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib, "WEFT_HAL=host", "WEFT_NCCL_FALLBACK=all", "WEFT_NCCL_LIB="+so,
		"WEFT_TIMEOUT=30s")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "fwdtest: 0 failed") {
		t.Fatalf("fwdtest: %v\n%s", err, tail(string(out)))
	}
	t.Log(strings.TrimSpace(string(out)))
}

var summary = regexp.MustCompile(`rank (\d+): (\d+) passed, (\d+) failed`)

// peakBlocks matches the destroy-time log line of a 3-rank communicator
// (the split ones have fewer ranks and their own config) and the most
// thread blocks one of its launches held (nccl comm.go, destroy).
var peakBlocks = regexp.MustCompile(`msg="weft: communicator destroyed".*nranks=3 .*peak_blocks=(\d+)`)

// callCounts matches the destroy-time log line of a communicator (nccl
// comm.go, summary): "calls=\"all_reduce=12/0 … (served by weft/forwarded
// to NCCL)\"", one served/forwarded pair per kind of call.
var (
	destroyed  = regexp.MustCompile(`msg="weft: communicator destroyed".*calls="([^"]*)"`)
	callCounts = regexp.MustCompile(`(\w+)=(\d+)/(\d+)`)
	intAvg     = regexp.MustCompile(`rank \d+: (\d+) integer Avg calls served`)
)

// windowCallsRE finds the destroy line's count of collectives run
// zero-copy through symmetric windows (comm.go, destroy).
var windowCallsRE = regexp.MustCompile(`window_calls=(\d+)`)

// ceP2POpsRE finds the destroy line's count of point-to-point operations
// moved by copy engines.
var ceP2POpsRE = regexp.MustCompile(`ce_p2p_ops=(\d+)`)

// exportedCallsRE finds the destroy line's count of Reduces and
// AllReduces run on copy engines into outputs exported at the call.
var exportedCallsRE = regexp.MustCompile(`exported_calls=(\d+)`)

// servedByWeft checks, from a rank's NCCL_DEBUG=INFO log, that its
// communicators were served by weft (not NCCL) and that no call of any
// kind was forwarded; it returns the calls weft served.
func servedByWeft(t *testing.T, r int, out string) int64 {
	t.Helper()
	if strings.Contains(out, `served_by="NCCL`) {
		t.Errorf("rank %d: a communicator was handed to NCCL\n%s", r, tail(out))
	}
	var served int64
	lines := destroyed.FindAllStringSubmatch(out, -1)
	if len(lines) == 0 {
		t.Errorf("rank %d: no \"communicator destroyed\" line to count calls from\n%s", r, tail(out))
	}
	for _, m := range lines {
		for _, kv := range callCounts.FindAllStringSubmatch(m[1], -1) {
			s, _ := strconv.ParseInt(kv[2], 10, 64)
			f, _ := strconv.ParseInt(kv[3], 10, 64)
			served += s
			if f != 0 {
				t.Errorf("rank %d: %d %s calls forwarded to NCCL (%s)", r, f, kv[1], m[1])
			}
		}
	}
	return served
}

// runCTest runs bin as n processes of one job on hal/host and checks every
// rank's summary line. scale runs ctest.c's scale mode (WEFT_CTEST_SCALE=1:
// inputs exact at any rank count) and checks, from NCCL_DEBUG=INFO logs,
// that weft served every call of every communicator and forwarded none.
// extra are more NAME=VALUE variables for every rank; it returns each
// rank's output.
func runCTest(t *testing.T, bin string, n int, scale bool, extra ...string) []string {
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
		if scale {
			cmd.Env = append(cmd.Env, "WEFT_CTEST_SCALE=1", "NCCL_DEBUG=INFO")
		}
		cmd.Env = append(cmd.Env, extra...)
		cmd.Stdout = &outs[r]
		cmd.Stderr = &outs[r]
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = cmd.Run()
		}()
	}
	wg.Wait()
	texts := make([]string, n)
	for r := 0; r < n; r++ {
		out := outs[r].String()
		texts[r] = out
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
		if scale {
			served := servedByWeft(t, r, out)
			// Integer Avg is served at any rank count (the plans with
			// bounded peers divide at their final step): ctest.c fails a
			// refused call, and counts the served ones.
			avg := "no"
			if m := intAvg.FindStringSubmatch(out); m != nil {
				avg = m[1]
			}
			if avg == "no" || avg == "0" {
				t.Errorf("rank %d: %s integer Avg calls served and checked, want some\n%s", r, avg, tail(out))
			}
			t.Logf("rank %d: %d calls served by weft, none forwarded, none refused (%s of them integer Avg)", r, served, avg)
		}
	}
	return texts
}

func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 40 {
		lines = append([]string{"…"}, lines[len(lines)-40:]...)
	}
	return strings.Join(lines, "\n")
}
