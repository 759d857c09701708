package bootstrap

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRunForwardsSignals sends SIGINT to this process while Run waits: the
// ranks get it and die of it; Run itself survives.
func TestRunForwardsSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	out := &notifyWriter{want: "ready", n: 2, ready: make(chan struct{})}
	go func() {
		<-out.ready
		syscall.Kill(os.Getpid(), syscall.SIGINT)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := runner{grace: time.Minute}.run(ctx, 2, helperArgv(), []string{helperVar + "=sleep"}, out, os.Stderr)
	var re *RunError
	if !errors.As(err, &re) {
		t.Fatalf("Run error = %v, want *RunError", err)
	}
	want := &RunError{First: re.First, Size: 2, Failed: []RankExit{{Rank: 0, Code: -1, Signal: "interrupt"}, {Rank: 1, Code: -1, Signal: "interrupt"}}}
	if diff := cmp.Diff(want, re); diff != "" {
		t.Errorf("RunError (-want +got):\n%s", diff)
	}
}
