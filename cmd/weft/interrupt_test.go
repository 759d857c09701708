package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weftccl/weft/internal/shm"
)

// TestRunInterruptLeavesNoFiles is Ctrl-C of `weft run`: a two-rank
// AllReduce benchmark on hal/host is interrupted with SIGINT once its ranks
// have mapped their shared memory; `weft run` forwards the signal, waits
// for the ranks and removes what they left. Afterwards no shared-memory
// file of those ranks may remain (before the fix, the whole job's files
// stayed in /dev/shm).
func TestRunInterruptLeavesNoFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a two-rank job (-short)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The ranks run long enough to be interrupted: many iterations and a
	// time budget far beyond the test's.
	cmd := exec.CommandContext(ctx, exe, "run", "--nproc", "2", "--", exe,
		"bench", "all_reduce", "--hal", "host", "-b", "64K", "-e", "64K", "-w", "2", "-n", "100000000", "--time-budget", "10m")
	cmd.Env = append(os.Environ(), "WEFT_CLI_TEST=main", "WEFT_TIMEOUT=20s")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	launcher := cmd.Process.Pid

	// Wait until both ranks (children of the launcher) have files, and
	// remember every file of theirs.
	files := map[string]bool{}
	ranks := map[int]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for len(ranks) < 2 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the ranks made no shared-memory files in 60 s (%d seen); output:\n%s", len(ranks), out.String())
		}
		time.Sleep(50 * time.Millisecond)
		for _, f := range weftFiles(t) {
			if pid, ok := creatorPID(f); ok && parentPID(pid) == launcher {
				files[f], ranks[pid] = true, true
			}
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if err == nil {
		t.Fatalf("weft run ended with status 0 after SIGINT; output:\n%s", out.String())
	}
	var left []string
	for _, f := range weftFiles(t) {
		if pid, ok := creatorPID(f); ok && ranks[pid] {
			left = append(left, f)
		}
	}
	if len(left) > 0 {
		t.Fatalf("after Ctrl-C of weft run, %d of the ranks' %d shared-memory files remain: %s",
			len(left), len(files), strings.Join(left, ", "))
	}
	t.Logf("ranks %v made %d files; none left after SIGINT (%v)", keys(ranks), len(files), err)
}

// weftFiles lists weft's files in the shared-memory directory.
func weftFiles(t *testing.T) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(shm.Dir(), "weft-*"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// creatorPID reads the creator's pid from a file name (internal/shm: a
// prefix, then PID-START-NS-…).
func creatorPID(path string) (int, bool) {
	rest := strings.TrimPrefix(filepath.Base(path), "weft-")
	rest = strings.TrimPrefix(rest, "pcie-")
	f := strings.SplitN(rest, "-", 2)
	pid, err := strconv.Atoi(f[0])
	return pid, err == nil && pid > 0
}

// parentPID is the parent of process pid (field 4 of /proc/PID/stat), or 0.
func parentPID(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func keys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	return out
}
