package weft_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// stopTimeout is WEFT_TIMEOUT of the stopped-rank tests.
const stopTimeout = 2 * time.Second

// stopChild is one rank of a job in which the rank named by
// WEFT_TEST_STOP stops itself with SIGSTOP right after queueing an
// AllReduce, so that its peers are inside the collective. The others run
// AllReduce until it fails and return an error that says when they
// detected the failure (at=, Unix nanoseconds) and which ranks the error
// blames (blamed=). Mode "stop" runs on hal/host shared memory, "netstop"
// across emulated nodes (Launch, port channels over the socket transport).
func stopChild(mode string, rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
	victim, _ := strconv.Atoi(os.Getenv("WEFT_TEST_STOP"))
	fmt.Fprintf(os.Stderr, "rank %d pid=%d\n", rank, os.Getpid())
	count := int64(1 << 18)
	if mode == "netstop" {
		count = 1 << 16
	}
	buf, err := dev.Alloc(count * 4)
	if err != nil {
		return err
	}
	defer buf.Free()
	for i := 0; ; i++ {
		if mode == "netstop" {
			err = c.Launch(weft.Call{Coll: algorithms.AllReduce, Send: buf.Addr(), Recv: buf.Addr(), Count: count, Type: plan.Float32, Op: plan.Sum}, s)
		} else {
			err = c.AllReduce(buf, buf, count, plan.Float32, plan.Sum, s)
		}
		if err == nil && rank == victim && i == 10 {
			fmt.Fprintf(os.Stderr, "stopping pid=%d at=%d\n", os.Getpid(), time.Now().UnixNano())
			syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		}
		if err == nil {
			err = c.Synchronize(s)
		}
		if err != nil {
			return fmt.Errorf("rank %d detected at=%d blamed=%s: %w", rank, time.Now().UnixNano(), blamedText(err), err)
		}
	}
}

// blamedText lists the ranks that err blames for a failure: those of a
// *weft.StallError, or the peer of a *hal.TimeoutError; "none" if neither.
func blamedText(err error) string {
	var ranks []int
	var se *weft.StallError
	var te *hal.TimeoutError
	switch {
	case errors.As(err, &se):
		ranks = se.Ranks
	case errors.As(err, &te) && te.Peer >= 0:
		ranks = []int{te.Peer}
	}
	if len(ranks) == 0 {
		return "none"
	}
	parts := make([]string, len(ranks))
	for i, r := range ranks {
		parts[i] = strconv.Itoa(r)
	}
	return strings.Join(parts, ",")
}

// stopWatch reads the output of a stopped-rank job line by line: the
// victim's pid and the time it stopped, and each survivor's report. Once
// every survivor has reported, it continues the victim (SIGCONT) so that
// it can find its peers gone and exit, and kills it if it has not exited a
// few seconds later.
type stopWatch struct {
	mu        sync.Mutex
	all       strings.Builder // every line, for failure messages
	bufs      map[*stopStream][]byte
	pids      map[int]int // rank → pid
	victimPID int
	stoppedAt time.Time
	reports   map[int]string    // survivor rank → "child:" line
	printed   map[int]time.Time // survivor rank → when its report arrived
	survivors int
	done      chan struct{} // closed when every survivor has reported
	closeOnce sync.Once
}

type stopStream struct{ w *stopWatch }

func (s *stopStream) Write(b []byte) (int, error) { s.w.write(s, b); return len(b), nil }

var (
	pidLine    = regexp.MustCompile(`^(?:\[rank (\d+)\] )?rank (\d+) pid=(\d+)$`)
	stopLine   = regexp.MustCompile(`stopping pid=(\d+) at=(\d+)`)
	reportLine = regexp.MustCompile(`child: rank (\d+) detected at=(\d+) blamed=([0-9,]+|none): `)
)

func (w *stopWatch) write(s *stopStream, b []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bufs[s] = append(w.bufs[s], b...)
	for {
		i := bytes.IndexByte(w.bufs[s], '\n')
		if i < 0 {
			return
		}
		line := string(w.bufs[s][:i])
		w.bufs[s] = w.bufs[s][i+1:]
		w.all.WriteString(line + "\n")
		if m := pidLine.FindStringSubmatch(line); m != nil {
			r, _ := strconv.Atoi(m[2])
			w.pids[r], _ = strconv.Atoi(m[3])
		}
		if m := stopLine.FindStringSubmatch(line); m != nil {
			w.victimPID, _ = strconv.Atoi(m[1])
			ns, _ := strconv.ParseInt(m[2], 10, 64)
			w.stoppedAt = time.Unix(0, ns)
		}
		if m := reportLine.FindStringSubmatch(line); m != nil {
			r, _ := strconv.Atoi(m[1])
			w.reports[r] = line
			w.printed[r] = time.Now()
			if len(w.reports) == w.survivors {
				w.closeOnce.Do(func() { close(w.done) })
			}
		}
	}
}

// runStopped runs 3 ranks (on nodes emulated nodes when nodes > 1, over
// sockets) of which rank victim stops itself mid-AllReduce, and checks
// that every survivor reports within 2 × WEFT_TIMEOUT an error that blames
// the victim and no other rank.
func runStopped(t *testing.T, nodes, victim int) {
	if testing.Short() {
		t.Skip("spawns processes and waits for a failure: not in -short")
	}
	const nproc = 3
	w := &stopWatch{bufs: map[*stopStream][]byte{}, pids: map[int]int{}, reports: map[int]string{}, printed: map[int]time.Time{}, survivors: nproc - 1, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	mode := "stop"
	env := []string{"WEFT_TIMEOUT=" + stopTimeout.String(), "WEFT_TEST_STOP=" + strconv.Itoa(victim)}
	if nodes > 1 {
		mode = "netstop"
		// WARN: the survivor whose wait times out logs the port channels'
		// state (checked below).
		env = append(env, "WEFT_NET=socket", "WEFT_DEBUG=WARN")
	}
	env = append(env, "WEFT_TEST_CHILD="+mode)

	// Release the victim once the survivors have reported, or after a
	// bound that only a hang of the code under test reaches, so that Run
	// always returns and nothing is left behind.
	released := make(chan struct{})
	runDone := make(chan struct{}) // Run returned: every rank process has ended
	go func() {
		defer close(released)
		select {
		case <-w.done:
		case <-time.After(90 * time.Second):
		}
		w.mu.Lock()
		pid := w.victimPID
		w.mu.Unlock()
		if pid == 0 {
			return
		}
		syscall.Kill(pid, syscall.SIGCONT)
		select { // the victim ends by itself once it runs; kill it if it does not
		case <-runDone:
		case <-time.After(10 * time.Second):
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	argv := []string{os.Args[0], "-test.run=^$"}
	var err error
	if nodes > 1 {
		err = bootstrap.RunNodes(ctx, nproc, nodes, argv, env, &stopStream{w}, &stopStream{w})
	} else {
		err = bootstrap.Run(ctx, nproc, argv, env, &stopStream{w}, &stopStream{w})
	}
	close(runDone)
	w.closeOnce.Do(func() { close(w.done) })
	<-released

	w.mu.Lock()
	defer w.mu.Unlock()
	// Whatever happened, no shared-memory file of this job's processes
	// stays behind (a killed rank cannot remove its own).
	for _, pid := range w.pids {
		leftover, _ := filepath.Glob(fmt.Sprintf("/dev/shm/weft-*-%d-*", pid))
		for _, f := range leftover {
			os.Remove(f)
		}
		if len(leftover) > 0 {
			t.Logf("removed %d shared-memory files of pid %d", len(leftover), pid)
		}
	}
	defer func() {
		if t.Failed() {
			t.Logf("output of the job:\n%s", w.all.String())
		}
	}()
	if err == nil {
		t.Fatal("the job succeeded although a rank was stopped")
	}
	if w.stoppedAt.IsZero() {
		t.Fatalf("rank %d never stopped itself (%v)", victim, err)
	}
	if out := w.all.String(); nodes > 1 && (!strings.Contains(out, "port channels at a timed-out wait") || !strings.Contains(out, "fifo ")) {
		t.Errorf("no survivor logged its port channels' FIFOs when its wait timed out")
	}
	for r := range nproc {
		if r == victim {
			continue
		}
		line, ok := w.reports[r]
		if !ok {
			t.Errorf("rank %d reported no failure (job: %v)", r, err)
			continue
		}
		m := reportLine.FindStringSubmatch(line)
		ns, _ := strconv.ParseInt(m[2], 10, 64)
		took := time.Unix(0, ns).Sub(w.stoppedAt)
		exited := w.printed[r].Sub(w.stoppedAt)
		t.Logf("rank %d detected the stop after %v and reported it after %v, blaming %s: %s", r, took.Round(time.Millisecond), exited.Round(time.Millisecond), m[3], line)
		if took > 2*stopTimeout || exited > 2*stopTimeout {
			t.Errorf("rank %d detected the stopped rank after %v and reported it (exited) after %v, want both < 2 × WEFT_TIMEOUT = %v", r, took.Round(time.Millisecond), exited.Round(time.Millisecond), 2*stopTimeout)
		}
		if want := strconv.Itoa(victim); m[3] != want {
			t.Errorf("rank %d blamed %s, want exactly rank %s (the stopped one): %s", r, m[3], want, line)
		}
	}
}

// A rank stopped with SIGSTOP in the middle of an AllReduce on hal/host
// (processes sharing memory on one node): every survivor reports it within
// 2 × WEFT_TIMEOUT, and names it, never a healthy rank.
func TestStoppedRankIsNamed(t *testing.T) {
	for _, victim := range []int{1, 2} {
		t.Run("victim"+strconv.Itoa(victim), func(t *testing.T) {
			t.Parallel() // the two jobs wait out their timeouts side by side
			runStopped(t, 1, victim)
		})
	}
}

// The same across 2 emulated nodes over the socket transport: rank 2 is
// alone on node 1, ranks 0 and 1 share node 0.
func TestStoppedRankAcrossNodes(t *testing.T) {
	for _, victim := range []int{1, 2} {
		t.Run("victim"+strconv.Itoa(victim), func(t *testing.T) {
			t.Parallel() // the two jobs wait out their timeouts side by side
			runStopped(t, 2, victim)
		})
	}
}
