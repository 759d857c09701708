package host

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// filesOf lists the shared-memory files whose names start with prefix.
func filesOf(t *testing.T, prefix string) []string {
	t.Helper()
	ents, err := os.ReadDir(shmDir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestHelperRank is the body of a rank process for the tests below: it
// allocates buffers, prints its device's file prefix and waits to be
// killed. It does nothing in a normal test run.
func TestHelperRank(t *testing.T) {
	if os.Getenv("WEFT_HOST_TEST_RANK") == "" {
		t.Skip("helper process of TestReclaimAfterKilledRank")
	}
	d, err := backend{}.Open(hal.Config{JobID: "killed-rank"})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	for range 3 {
		if _, err := d.Alloc(1 << 16); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
	}
	fmt.Println("ready", filePrefix+d.(*Device).tag+"-")
	time.Sleep(time.Minute)
	os.Exit(3)
}

// startRank starts a helper rank and returns it with the prefix of its
// files, once they exist.
func startRank(t *testing.T) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRank$")
	cmd.Env = append(os.Environ(), "WEFT_HOST_TEST_RANK=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Scan()
		line <- sc.Text()
	}()
	select {
	case l := <-line:
		prefix, ok := strings.CutPrefix(l, "ready ")
		if !ok {
			t.Fatalf("helper rank said %q", l)
		}
		return cmd, prefix
	case <-time.After(30 * time.Second):
		t.Fatal("helper rank not ready after 30 s")
	}
	return nil, ""
}

// A rank killed by SIGKILL or SIGTERM leaves its files; the next Open of
// any job removes them, and leaves those of live processes (this one's and
// another rank's) alone.
func TestReclaimAfterKilledRank(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			mine := open(t, "reclaim-live", 0)
			if _, err := mine.Alloc(4096); err != nil {
				t.Fatal(err)
			}
			minePrefix := filePrefix + mine.tag + "-"
			live, livePrefix := startRank(t)
			victim, victimPrefix := startRank(t)
			if got := len(filesOf(t, victimPrefix)); got != 3 {
				t.Fatalf("the rank to kill has %d files, want 3", got)
			}
			if err := victim.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			victim.Wait()
			if got := len(filesOf(t, victimPrefix)); got != 3 {
				t.Fatalf("after %v the rank left %d files, want 3 (the leak this test covers)", sig, got)
			}
			open(t, "another-job", 1) // Open reclaims
			if left := filesOf(t, victimPrefix); len(left) != 0 {
				t.Errorf("files of the killed rank after the next Open: %v, want none", left)
			}
			if got := len(filesOf(t, livePrefix)); got != 3 {
				t.Errorf("a live rank has %d files after the reclaim, want its 3", got)
			}
			if got := len(filesOf(t, minePrefix)); got != 1 {
				t.Errorf("this process has %d files after the reclaim, want its 1", got)
			}
			live.Process.Kill()
			live.Wait()
			open(t, "another-job", 2)
			if left := filesOf(t, livePrefix); len(left) != 0 {
				t.Errorf("files of the second rank after it was killed too: %v, want none", left)
			}
		})
	}
}

// No shared-memory name carries the job id (which may be a secret).
func TestFileNamesOmitJob(t *testing.T) {
	const job = "0123456789abcdef"
	d := open(t, job, 0)
	b := alloc(t, d, 4096)
	m, err := d.NewMulticast(4096, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, path := range []string{b.(*region).path, m.(*multicast).path} {
		name := filepath.Base(path)
		if strings.Contains(name, job) {
			t.Errorf("file name %q contains the job id", name)
		}
		if !strings.HasPrefix(name, filePrefix+d.tag) {
			t.Errorf("file name %q does not start with the device's tag %q", name, d.tag)
		}
	}
}

// stuckPlan waits for a signal its peer never sends.
func stuckPlan() *plan.Plan {
	return &plan.Plan{
		Name: "stuck", Rank: 0, NRanks: 2, Threads: 32, Semaphores: 1,
		Channels: []plan.Channel{{Peer: 1}},
		Groups: []plan.Group{{Blocks: 1, Ops: []plan.Op{
			plan.Wait(0, 0),
			plan.Transfer(plan.All, 1, []plan.Ref{plan.L(plan.Output)}, plan.L(plan.Input)),
		}}},
	}
}

// launchStuck queues a launch of stuckPlan on d that only an abort ends
// (its own deadline is a minute away) and waits until it runs.
func launchStuck(t *testing.T, d *Device) (s hal.Stream, ctl, sems, in hal.Buffer) {
	t.Helper()
	p := stuckPlan()
	state, expected := alloc(t, d, max(p.StateBytes(), 64)), alloc(t, d, max(p.ExpectedRegionBytes(), 64))
	ctl, sems = alloc(t, d, plan.ControlBytes), alloc(t, d, max(p.SemaphoreRegionBytes(), 64))
	peerSems := alloc(t, d, max(p.SemaphoreRegionBytes(), 64))
	in, out := alloc(t, d, 4096), alloc(t, d, 4096)
	prog, err := d.Prepare(hal.PlanSpec{Plan: p, DataType: plan.Float32, RedOp: plan.Sum, Bindings: plan.Bindings{
		State: state.Addr(), Control: ctl.Addr(), Semaphores: sems.Addr(), Expected: expected.Addr(),
		Peers: []plan.PeerBinding{{Semaphores: peerSems.Addr()}}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err = d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := prog.Launch(s, &plan.Args{Count: 1024, Input: in.Addr(), Output: out.Addr(), Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	// The launch is running once it has taken its expected value.
	started := func() bool { return strings.Trim(string(expected.Host()), "\x00") != "" }
	for deadline := time.Now().Add(10 * time.Second); !started(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the launch did not start within 10 s")
		}
	}
	return s, ctl, sems, in
}

// Freeing memory under a launch that waits forever does not crash (the
// wait polls the freed semaphores): Free aborts the launch, returns within
// its deadline saying so, and the stream reports the abort.
func TestFreeDuringStuckLaunch(t *testing.T) {
	d := open(t, "stuck-free", 0)
	s, ctl, sems, _ := launchStuck(t, d)
	start := time.Now()
	err := sems.Free()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Free took %v with a launch in flight, want the abort to end it within 2 s", took)
	}
	if !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "aborted") {
		t.Errorf("Free under a launch: %v, want an ErrInvalidUsage that says the launch was aborted", err)
	}
	if err := d.Read(make([]byte, 8), sems, 0); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("read after the free: %v, want ErrInvalidUsage (freed)", err)
	}
	err = s.Synchronize(time.Now().Add(5 * time.Second))
	if !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "aborted") {
		t.Errorf("stream after the abort: %v, want the launch's abort (ErrInvalidUsage)", err)
	}
	if f, failed := plan.DecodeControl(ctl.Host()); !failed || f.Status != plan.StatusAborted {
		t.Errorf("control block after the abort: failed %v, %+v; want StatusAborted", failed, f)
	}
}

// Closing the device under a launch that waits forever aborts it and
// unmaps everything within the deadline.
func TestCloseDuringStuckLaunch(t *testing.T) {
	d := open(t, "stuck-close", 0)
	s, _, _, _ := launchStuck(t, d)
	prefix := filePrefix + d.tag + "-"
	start := time.Now()
	err := d.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close took %v with a launch in flight, want within 2 s", took)
	}
	if !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "aborted") {
		t.Errorf("Close under a launch: %v, want an ErrInvalidUsage that says the launch was aborted", err)
	}
	if left := filesOf(t, prefix); len(left) != 0 {
		t.Errorf("files after Close: %v, want none", left)
	}
	if err := s.Synchronize(time.Now().Add(5 * time.Second)); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("stream after Close: %v, want the launch's abort (ErrInvalidUsage)", err)
	}
}

// Work that cannot be aborted keeps memory mapped: Free gives up at its
// deadline with ErrTimeout and leaves the buffer usable; a later Free
// succeeds.
func TestFreeDeadline(t *testing.T) {
	d := open(t, "free-deadline", 0)
	b := alloc(t, d, 4096).(*region)
	u := &noAbort{}
	if err := b.inUse.acquire(u, "test"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := b.free(start.Add(100 * time.Millisecond))
	if took := time.Since(start); took < 100*time.Millisecond || took > 2*time.Second {
		t.Errorf("free with a 100 ms deadline took %v", took)
	}
	if !errors.Is(err, hal.ErrTimeout) {
		t.Fatalf("free while in use: %v, want ErrTimeout", err)
	}
	if err := d.Write(b, 0, []byte("still")); err != nil {
		t.Fatalf("the buffer was not left mapped: %v", err)
	}
	b.inUse.release(u)
	if err := b.Free(); err != nil {
		t.Fatalf("free once unused: %v", err)
	}
}

// An allocation larger than the room left fails at once, names the size
// and the room, and leaves no file.
func TestAllocTooLarge(t *testing.T) {
	d := open(t, "too-large", 0)
	start := time.Now()
	_, err := d.Alloc(1 << 40)
	if took := time.Since(start); took > time.Second {
		t.Errorf("a 1 TiB allocation took %v to fail, want under 1 s", took)
	}
	if !errors.Is(err, hal.ErrSystem) {
		t.Fatalf("1 TiB allocation: %v, want ErrSystem", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "1 TiB") || !strings.Contains(msg, "free") {
		t.Errorf("message %q does not name the size asked (1 TiB) and what is free", msg)
	}
	if left := filesOf(t, filePrefix+d.tag+"-"); len(left) != 0 {
		t.Errorf("files after the failed allocation: %v", left)
	}
}
