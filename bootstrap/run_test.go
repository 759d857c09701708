package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weftccl/weft/hal"
)

// helperVar marks a re-executed test binary as a rank of TestRun; its
// value selects what the rank does.
const helperVar = "BOOTSTRAP_TEST_HELPER"

// TestHelperProcess is not a test: it is the body of the ranks that TestRun
// starts, by running this test binary again.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperVar)
	if mode == "" {
		t.Skip("helper process for TestRun")
	}
	os.Exit(helperMain(mode))
}

func helperMain(mode string) int {
	l, ok, err := FromEnv()
	if !ok || err != nil {
		fmt.Fprintln(os.Stderr, "FromEnv:", ok, err)
		return 10
	}
	ctx := context.Background()
	b, err := l.Connect(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "Connect:", err)
		return 11
	}
	switch mode {
	case "ok":
		all, err := b.AllGather(ctx, []byte(fmt.Sprint(l.Rank)))
		if err != nil {
			fmt.Fprintln(os.Stderr, "AllGather:", err)
			return 12
		}
		fmt.Printf("rank %d of %d local %d saw %s nvls=%s extra=%s\n", l.Rank, l.Size, l.LocalRank,
			bytes.Join(all, []byte(",")), os.Getenv("NCCL_NVLS_ENABLE"), os.Getenv("HELPER_EXTRA"))
		fmt.Fprintf(os.Stderr, "no newline from %d", l.Rank)
		b.Close()
		return 0
	case "sleep":
		fmt.Println("ready")
		time.Sleep(time.Minute) // until Run signals it
		return 0
	case "fail", "hang":
		if l.Rank == 1 {
			os.Exit(3)
		}
		if mode == "hang" {
			time.Sleep(time.Minute) // ignores the failure: Run must kill it
		}
		_, err := b.Recv(ctx, 1, 0)
		fmt.Fprintln(os.Stderr, "Recv:", err)
		if errors.Is(err, hal.ErrRemote) {
			return 7
		}
		return 8
	}
	return 9
}

func helperArgv() []string { return []string{os.Args[0], "-test.run=^TestHelperProcess$"} }

func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	tests := []struct {
		name      string
		mode      string
		grace     time.Duration
		want      []RankExit // nil: success
		first     int        // -1: either order
		maxTime   time.Duration
		minTime   time.Duration
		wantLines []string
	}{
		{name: "success", mode: "ok", grace: time.Minute, maxTime: 10 * time.Second, wantLines: []string{
			"rank 0 of 3 local 0 saw 0,1,2 nvls=0 extra=yes",
			"[rank 1] rank 1 of 3 local 1 saw 0,1,2 nvls=0 extra=yes",
			"[rank 2] rank 2 of 3 local 2 saw 0,1,2 nvls=0 extra=yes",
		}},
		{name: "rank 1 exits 3, others notice", mode: "fail", grace: time.Minute, first: -1, maxTime: 10 * time.Second,
			want: []RankExit{{Rank: 0, Code: 7}, {Rank: 1, Code: 3}, {Rank: 2, Code: 7}}},
		{name: "survivors killed after the grace period", mode: "hang", grace: time.Second, first: 1,
			minTime: time.Second, maxTime: 10 * time.Second,
			want: []RankExit{{Rank: 0, Code: -1, Signal: "killed", Killed: true}, {Rank: 1, Code: 3}, {Rank: 2, Code: -1, Signal: "killed", Killed: true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			extra := []string{helperVar + "=" + tc.mode, "HELPER_EXTRA=yes", "NCCL_NVLS_ENABLE=1", "WEFT_RANK=99"}
			err := runner{grace: tc.grace}.run(ctx, 3, helperArgv(), extra, &stdout, &stderr)
			elapsed := time.Since(start)
			if elapsed > tc.maxTime || elapsed < tc.minTime {
				t.Errorf("Run took %v, want %v to %v", elapsed, tc.minTime, tc.maxTime)
			}
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Run: %v\nstderr:\n%s", err, stderr.String())
				}
				lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
				slices.Sort(lines)
				want := slices.Sorted(slices.Values(tc.wantLines))
				if diff := cmp.Diff(want, lines); diff != "" {
					t.Errorf("stdout (-want +got):\n%s", diff)
				}
				// Rank 0's stderr is unprefixed; others' partial last
				// lines are flushed with their prefix.
				for _, s := range []string{"no newline from 0", "[rank 1] no newline from 1\n", "[rank 2] no newline from 2\n"} {
					if !strings.Contains(stderr.String(), s) {
						t.Errorf("stderr lacks %q:\n%s", s, stderr.String())
					}
				}
				return
			}
			var re *RunError
			if !errors.As(err, &re) || !errors.Is(err, hal.ErrRemote) {
				t.Fatalf("Run error = %v, want *RunError wrapping ErrRemote\nstderr:\n%s", err, stderr.String())
			}
			want := &RunError{First: tc.first, Failed: tc.want, Size: 3}
			if tc.first < 0 {
				want.First = re.First
			}
			if diff := cmp.Diff(want, re); diff != "" {
				t.Errorf("RunError (-want +got):\n%s\nstderr:\n%s", diff, stderr.String())
			}
			if !strings.Contains(err.Error(), "run: 3 of 3 ranks failed: ") || !strings.Contains(err.Error(), "rank 1 exited with status 3") {
				t.Errorf("error %q does not name rank 1's failure", err)
			}
			if tc.mode == "fail" && !strings.Contains(stderr.String(), "rank 1 disconnected") {
				t.Errorf("survivors did not report rank 1's loss:\n%s", stderr.String())
			}
		})
	}
}

// TestRunCancel: cancelling ctx sends SIGTERM to every rank.
func TestRunCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &notifyWriter{want: "ready", n: 2, ready: make(chan struct{})}
	go func() {
		<-out.ready
		cancel()
	}()
	start := time.Now()
	err := runner{grace: time.Minute}.run(ctx, 2, helperArgv(), []string{helperVar + "=sleep"}, out, os.Stderr)
	var re *RunError
	if !errors.As(err, &re) {
		t.Fatalf("Run error = %v, want *RunError", err)
	}
	want := &RunError{First: re.First, Size: 2, Failed: []RankExit{{Rank: 0, Code: -1, Signal: "terminated"}, {Rank: 1, Code: -1, Signal: "terminated"}}}
	if diff := cmp.Diff(want, re); diff != "" {
		t.Errorf("RunError (-want +got):\n%s", diff)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Run took %v after cancel", d)
	}
}

// notifyWriter closes ready once want has been written n times.
type notifyWriter struct {
	want  string
	n     int
	ready chan struct{}
	buf   bytes.Buffer
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	if w.n > 0 && strings.Count(w.buf.String(), w.want) >= w.n {
		w.n = 0
		close(w.ready)
	}
	return len(p), nil
}

func TestRunArguments(t *testing.T) {
	tests := []struct {
		name  string
		nproc int
		argv  []string
		msg   string
	}{
		{"zero processes", 0, []string{"true"}, "nproc 0: want at least 1"},
		{"no program", 2, nil, "no program"},
		{"missing program", 1, []string{"/nonexistent/weft-test-program"}, "/nonexistent/weft-test-program"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Run(context.Background(), tc.nproc, tc.argv, nil, &bytes.Buffer{}, &bytes.Buffer{})
			if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Run error = %v, want ErrInvalidArgument with %q", err, tc.msg)
			}
		})
	}
}

func TestRunErrorText(t *testing.T) {
	e := &RunError{First: 4, Size: 8, Failed: []RankExit{
		{Rank: 0, Code: 7}, {Rank: 2, Code: 7}, {Rank: 3, Code: 7}, {Rank: 4, Code: -1, Signal: "segmentation fault"},
		{Rank: 5, Code: 7}, {Rank: 7, Code: -1, Signal: "killed", Killed: true},
	}}
	want := "run: 6 of 8 ranks failed: ranks 0, 2-3, 5 exited with status 7; rank 4 killed by signal segmentation fault; " +
		"rank 7 did not exit and was killed by the launcher"
	if diff := cmp.Diff(want, e.Error()); diff != "" {
		t.Errorf("Error() (-want +got):\n%s", diff)
	}
}

func TestChildEnv(t *testing.T) {
	id := UniqueID{Magic: 5, Addr: "127.0.0.1:7"}
	got := childEnv([]string{"PATH=/bin", "WEFT_RANK=9", "NCCL_NVLS_ENABLE=1", "A=1"}, []string{"A=2", "WEFT_UNIQUE_ID=x"}, 1, 2, id)
	want := []string{"PATH=/bin", "A=1", "A=2",
		"WEFT_RANK=1", "WEFT_NRANKS=2", "WEFT_LOCAL_RANK=1", "WEFT_UNIQUE_ID=" + id.String(), "NCCL_NVLS_ENABLE=0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("childEnv (-want +got):\n%s", diff)
	}
}

func TestPrefixWriter(t *testing.T) {
	var out bytes.Buffer
	w := &prefixWriter{w: &out, prefix: []byte("[rank 1] ")}
	for _, s := range []string{"hel", "lo\nwor", "ld\n\npart"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	w.flush()
	want := "[rank 1] hello\n[rank 1] world\n[rank 1] \n[rank 1] part\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}
