package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
)

// The test binary is also the weft command: with WEFT_CLI_TEST=main it
// runs main's entry function on its arguments (so that commands which
// start their own ranks re-execute it as weft), and with
// WEFT_CLI_TEST=lostpeer or badarg it is one rank of a job started by
// `weft run` (cliChild).
func TestMain(m *testing.M) {
	switch os.Getenv("WEFT_CLI_TEST") {
	case "main":
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	case "lostpeer", "badarg":
		os.Exit(cliChild(os.Getenv("WEFT_CLI_TEST")))
	}
	os.Exit(m.Run())
}

// cliChild is one rank: "lostpeer": rank 1 kills itself with SIGKILL once
// connected, rank 0 then waits for it in a barrier; "badarg": every rank
// fails with the same invalid argument. It returns the exit status and
// prints errors as main does.
func cliChild(mode string) int {
	launch, ok, err := bootstrap.FromEnv()
	if err != nil || !ok {
		fmt.Fprintln(os.Stderr, "weft: not a rank of a job:", err)
		return 3
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	boot, err := launch.Connect(ctx)
	if err == nil {
		defer boot.Close()
		switch {
		case mode == "badarg":
			err = fmt.Errorf("bench: -d %q: unknown data type: %w", "float7", hal.ErrInvalidArgument)
		case launch.Rank == 1:
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		default:
			err = boot.Barrier(ctx)
			if err == nil {
				err = boot.Barrier(ctx)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "weft:", err)
	}
	return exitCode(err)
}

// weftCmd runs the test binary as weft with args and extra environment,
// and returns its exit status, standard error and run time.
func weftCmd(t *testing.T, extraEnv []string, args ...string) (int, string, time.Duration) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(append(os.Environ(), "WEFT_CLI_TEST=main"), extraEnv...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	start := time.Now()
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String(), time.Since(start)
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode(), stderr.String(), time.Since(start)
	}
	t.Fatalf("weft %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	return 0, "", 0
}

// TestExitStatus checks README's exit-status table row by row on the
// command itself: usage errors are 5 and come at once, before any process
// starts; a lost peer is 7; success is 0.
func TestExitStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	quick := []string{"-b", "8", "-e", "64", "-w", "1", "-n", "1", "--hal", "host"}
	for _, tc := range []struct {
		name   string
		env    []string
		args   []string
		want   int
		within time.Duration // 0: no bound
		says   string
	}{
		{name: "unknown flag", args: []string{"bench", "alltoall", "--bogus"}, want: 5, within: 5 * time.Second, says: "unknown flag: --bogus"},
		{name: "unknown command", args: []string{"frobnicate"}, want: 5, within: 5 * time.Second, says: `unknown command "frobnicate"`},
		{name: "bad --hal with --nproc 2", args: []string{"bench", "alltoall", "--hal", "nope", "--nproc", "2"}, want: 5, within: 5 * time.Second, says: `unknown HAL backend "nope"`},
		{name: "--nproc -2", args: append([]string{"bench", "alltoall", "--nproc", "-2"}, quick...), want: 5, within: 5 * time.Second, says: "--nproc -2: want at least 1"},
		{name: "soak --nproc -1", args: []string{"soak", "--nproc", "-1", "--hal", "host"}, want: 5, within: 5 * time.Second, says: "--nproc -1: want -n ≥ 0 and --nproc ≥ 1"},
		{name: "bad WEFT_TIMEOUT", env: []string{"WEFT_TIMEOUT=abc"}, args: append([]string{"bench", "alltoall", "--nproc", "2"}, quick...), want: 5, within: 5 * time.Second, says: `WEFT_TIMEOUT="abc": want a positive Go duration`},
		{name: "bad WEFT_DEBUG", env: []string{"WEFT_DEBUG=LOUD"}, args: []string{"topo"}, want: 5, within: 5 * time.Second, says: "WEFT_DEBUG"},
		{name: "weft env marks a bad value", env: []string{"WEFT_NVLS=maybe"}, args: []string{"env"}, want: 5, says: "maybe (INVALID: want one of 0, 1)"},
		{name: "lost peer", args: []string{"run", "--nproc", "2", "--", "env", "WEFT_CLI_TEST=lostpeer", os.Args[0]}, want: 7, says: "rank 1 killed by signal"},
		{name: "every rank rejects the same argument", args: []string{"run", "--nproc", "3", "--", "env", "WEFT_CLI_TEST=badarg", os.Args[0]}, want: 5, says: `weft: ranks 0-2: bench: -d "float7": unknown data type: invalid argument`},
		{name: "success: bench alltoall on 24 ranks (peer windows)", args: append([]string{"bench", "alltoall", "--nproc", "24"}, quick...), want: 0, within: 30 * time.Second, says: "Out of bounds values : 0 OK"},
		{name: "success: bench alltoall on the default ranks", args: append([]string{"bench", "alltoall"}, quick...), want: 0, says: "Out of bounds values : 0 OK"},
		{name: "success: env", args: []string{"env"}, want: 0, says: "WEFT_TIMEOUT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, took := weftCmd(t, tc.env, tc.args...)
			if code != tc.want {
				t.Errorf("exit status %d, want %d\n%s", code, tc.want, out)
			}
			if tc.within > 0 && took > tc.within {
				t.Errorf("took %v, want under %v (usage errors come before any process starts)", took, tc.within)
			}
			if !strings.Contains(out, tc.says) {
				t.Errorf("output does not say %q:\n%s", tc.says, out)
			}
			if tc.name == "every rank rejects the same argument" && strings.Count(out, "unknown data type") != 1 {
				t.Errorf("the ranks' identical error is not printed once:\n%s", out)
			}
		})
	}
}

// TestBenchDefaultRanks: `weft bench` without --nproc runs 2 ranks on
// hal/host (a default that measures a collective: busbw of 1 rank is 0),
// and alltoall reports in-place figures, not N/A.
func TestBenchDefaultRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	code, out, _ := weftCmd(t, nil, "bench", "alltoall", "--hal", "host", "-b", "1K", "-e", "4K", "-f", "4", "-w", "1", "-n", "2")
	if code != 0 {
		t.Fatalf("exit status %d\n%s", code, out)
	}
	if !strings.Contains(out, "# nRanks 2 ") {
		t.Errorf("not 2 ranks:\n%s", out)
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if m := rowRE.FindStringSubmatch(line); m != nil {
			rows++
			if m[6] != "0" || m[7] != "0" {
				t.Errorf("row %q: #wrong out of place %s, in place %s; want 0 and 0", line, m[6], m[7])
			}
		}
	}
	if rows != 2 {
		t.Errorf("%d rows, want 2 (1K, 4K):\n%s", rows, out)
	}
}

// TestRankErrors: identical final errors of ranks are printed once with
// the ranks ("ranks 0-3,5"); other lines pass through in order.
func TestRankErrors(t *testing.T) {
	var b bytes.Buffer
	w := newRankErrors(&b)
	for _, l := range []string{"# header\n", "weft: bench: rank 0: boom\n", "[rank 1] weft: bench: rank 1: boom\n", "[rank 2] progress\n",
		"[rank 3] weft: bench: rank 3: boom\n", "[rank 2] weft: other\n", "[rank 5] weft: bench: rank 5: bo", "om\n"} {
		w.Write([]byte(l))
	}
	w.Flush()
	want := "# header\n[rank 2] progress\nweft: ranks 0-1,3,5: bench: rank N: boom\nweft: rank 2: other\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestBenchDefaultsInREADME: the defaults README's CLI table gives for
// `weft bench` are the flags' defaults.
func TestBenchDefaultsInREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`weft bench <[^>]*> \\[([^\\]]*)\\]").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README has no `weft bench <…> [defaults]` line")
	}
	fields := strings.Fields(string(m[1]))
	if len(fields)%2 != 0 || len(fields) < 20 {
		t.Fatalf("README's bench defaults %q: want flag/value pairs", m[1])
	}
	for i := 0; i < len(fields); i += 2 {
		name, val := fields[i], fields[i+1]
		var f *pflag.Flag
		if strings.HasPrefix(name, "--") {
			f = benchCmd.Flags().Lookup(strings.TrimPrefix(name, "--"))
		} else {
			f = benchCmd.Flags().ShorthandLookup(strings.TrimPrefix(name, "-"))
		}
		if f == nil {
			t.Errorf("README names %s, which bench does not have", name)
			continue
		}
		if f.DefValue != val {
			t.Errorf("README says %s %s, the default is %s", name, val, f.DefValue)
		}
	}
	if f := benchCmd.Flags().Lookup("nproc"); f.DefValue != "0" || !strings.Contains(f.Usage, "at least 2") {
		t.Errorf("--nproc default %s (%q): want 0, one per device and at least 2", f.DefValue, f.Usage)
	}
}
