package weft_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/sysnccl"
)

// Child processes: the test binary re-executed by bootstrap.Run with
// WEFT_TEST_CHILD set runs childMain instead of the tests.
func TestMain(m *testing.M) {
	if mode := os.Getenv("WEFT_TEST_CHILD"); mode != "" {
		if err := childMain(mode); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1 + int(sysnccl.ResultOf(err)))
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childMain is one rank of a multi-process job. Modes: "sweep" runs
// AllReduce over every data type and a range of sizes and checks each
// result; "nvls" runs the NVLS collectives (nvlsChild); "kill" runs
// AllReduce in a loop, and the rank named by WEFT_TEST_KILL kills itself
// with SIGKILL after a few iterations. In the modes whose ranks all finish
// ("sweep", "nvls", "net", "scale") closing the communicator must succeed
// too: every release a peer owes arrived (closewait.go).
func childMain(mode string) (err error) {
	launch, ok, err := bootstrap.FromEnv()
	if err != nil || !ok {
		return fmt.Errorf("no launcher environment: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	boot, err := launch.Connect(ctx)
	if err != nil {
		return err
	}
	defer boot.Close()
	backend := os.Getenv("WEFT_TEST_HAL")
	if backend == "" {
		backend = "host"
	}
	dev, err := hal.Open(backend, hal.Config{Ordinal: launch.LocalRank, Rank: launch.Rank, JobID: fmt.Sprintf("%016x", launch.ID.Magic)})
	if err != nil {
		return err
	}
	defer dev.Close()
	opts := weft.Options{Timeout: 20 * time.Second}
	if mode == "stop" || mode == "netstop" {
		opts.Timeout = 0 // WEFT_TIMEOUT, set short by the test
	}
	comm, err := weft.NewComm(ctx, boot, dev, opts)
	if err != nil {
		return err
	}
	defer func() {
		cerr := comm.Close()
		switch mode {
		case "sweep", "nvls", "net", "scale":
			if cerr != nil && err == nil {
				err = fmt.Errorf("rank %d: %w", launch.Rank, cerr)
			}
		}
	}()
	s, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	switch mode {
	case "sweep":
		for _, dt := range plan.DataTypes {
			for _, bytes := range []int64{0, 5, 4096 + 4, 200000, 1 << 20} {
				count := bytes / int64(dt.Size())
				if err := oneAllReduce(comm, dev, s, count, dt, plan.Sum, bytes%2 == 0); err != nil {
					return fmt.Errorf("rank %d %v %d bytes: %w", launch.Rank, dt, bytes, err)
				}
			}
		}
		return nil
	case "nvls":
		return nvlsChild(comm, dev, s)
	case "net", "netkill":
		return netChild(mode, launch.Rank, comm, dev, s)
	case "scale":
		return scaleChild(launch.Rank, comm, dev, s)
	case "stop", "netstop":
		return stopChild(mode, launch.Rank, comm, dev, s)
	case "kill":
		// Buffers registered once: after the first calls, a lost peer is
		// met inside device-side waits, not in a bootstrap exchange.
		victim, _ := strconv.Atoi(os.Getenv("WEFT_TEST_KILL"))
		const count = 1 << 18
		buf, err := dev.Alloc(count * 4)
		if err != nil {
			return err
		}
		for i := 0; ; i++ {
			if launch.Rank == victim && i == 20 {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
			if err := comm.AllReduce(buf, buf, count, plan.Float32, plan.Sum, s); err != nil {
				return err
			}
			if err := comm.Synchronize(s); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("unknown child mode %q", mode)
}

func runChildren(t *testing.T, n int, mode string, extra ...string) (string, error, time.Duration) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	start := time.Now()
	err := bootstrap.Run(ctx, n, []string{os.Args[0], "-test.run=^$"}, append([]string{"WEFT_TEST_CHILD=" + mode}, extra...), &out, &out)
	return out.String(), err, time.Since(start)
}

// AllReduce on hal/host in separate processes sharing memory through
// /dev/shm, every data type, in and out of place.
func TestAllReduceProcesses(t *testing.T) {
	t.Parallel() // CPU work that overlaps the waiting process tests
	for _, n := range []int{2, 3} {
		out, err, _ := runChildren(t, n, "sweep")
		if err != nil {
			t.Fatalf("%d processes: %v\n%s", n, err, out)
		}
	}
}

// Killing one rank mid-run makes the others exit within 30 s with an
// error that names it.
func TestKilledRankIsNamed(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes and waits for a failure: not in -short")
	}
	out, err, took := runChildren(t, 3, "kill", "WEFT_TEST_KILL=1")
	if err == nil {
		t.Fatalf("the job succeeded although rank 1 was killed\n%s", out)
	}
	if took > 30*time.Second {
		t.Errorf("the survivors took %v to exit (want < 30 s)", took)
	}
	var rerr *bootstrap.RunError
	if !errors.As(err, &rerr) {
		t.Fatalf("Run error %v is not a *bootstrap.RunError", err)
	}
	if !strings.Contains(err.Error(), "rank 1") {
		t.Errorf("launcher error does not name rank 1: %v", err)
	}
	for _, r := range []string{"0", "2"} {
		found := false
		for _, line := range strings.Split(out, "\n") {
			if (r == "0" && !strings.HasPrefix(line, "[rank")) || strings.HasPrefix(line, "[rank "+r+"]") {
				if strings.Contains(line, "child:") && strings.Contains(line, "rank 1") {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("rank %s did not report an error naming rank 1; output:\n%s", r, out)
		}
	}
}
