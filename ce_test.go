package weft_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/check"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/host"
	"github.com/weftccl/weft/hal/plan"
)

// TestCEAllGatherHost: WEFT_ALGO=ce, the host-issued copy-engine AllGather
// (ce.go) on hal/host, 2 to 4 ranks, every element checked: sizes from
// nothing through one 16 KiB window (hal/host's) to many, where the
// windows' "free" flags gate the reuse of a landing half; in and out of
// place; then one call captured in a graph and replayed with new inputs
// (the flags return to 0 within a call). It also checks that the calls
// went through the executor and not a kernel plan.
func TestCEAllGatherHost(t *testing.T) {
	t.Setenv("WEFT_ALGO", "ce")
	for _, n := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("ranks%d", n), func(t *testing.T) {
			var cases []collCase
			for _, count := range []int64{0, 1, 37, 4096, 4097, 20000, 70001} {
				for _, in := range []bool{false, true} {
					cases = append(cases, collCase{coll: algorithms.AllGather, t: plan.Float32, op: plan.Sum, count: count, inPlace: in})
				}
			}
			cases = append(cases, collCase{coll: algorithms.AllGather, t: plan.BFloat16, op: plan.Sum, count: 9999})
			runCasesThen(t, "host", n, cases, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
				if !weft.CEActive(c) {
					return fmt.Errorf("the AllGathers did not go through the host-issued executor")
				}
				call := weft.Call{Coll: algorithms.AllGather, Count: 1000, Type: plan.Float32}
				if name := c.PlanName(call); name != "all_gather-ce-host-issued" {
					return fmt.Errorf("PlanName = %q, want the host-issued executor's", name)
				}
				if b, m := c.PlanSMs(call); b != 0 || m != 0 {
					return fmt.Errorf("PlanSMs = %d, %d, want 0, 0 (no kernel)", b, m)
				}
				return ceGraphReplay(rank, c, dev, s)
			})
		})
	}
}

// TestCEAllGatherNVLink: the host-issued AllGather on 2 GPUs through
// internal/cudadev's stream operations (cuMemcpyAsync, cuStreamWaitValue64,
// cuStreamWriteValue64): sizes from nothing to 80 MB a rank (3 windows of
// the 32 MiB landing halves), in and out of place, bf16, and the graph
// replay.
func TestCEAllGatherNVLink(t *testing.T) {
	if requireGPUs(t) < 2 {
		t.Skip("needs 2 GPUs")
	}
	t.Setenv("WEFT_ALGO", "ce")
	var cases []collCase
	for _, count := range []int64{0, 1, 4097, 1 << 20, 20 << 20} {
		for _, in := range []bool{false, true} {
			cases = append(cases, collCase{coll: algorithms.AllGather, t: plan.Float32, op: plan.Sum, count: count, inPlace: in})
		}
	}
	cases = append(cases, collCase{coll: algorithms.AllGather, t: plan.BFloat16, op: plan.Sum, count: 9<<20 + 3})
	runCasesThen(t, "nvlink", 2, cases, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		if !weft.CEActive(c) {
			return fmt.Errorf("the AllGathers did not go through the host-issued executor")
		}
		return ceGraphReplay(rank, c, dev, s)
	})
}

// captureLaunch captures c.Launch(call) on s into a graph.
func captureLaunch(gc hal.GraphCapturer, c *weft.Comm, call weft.Call, s hal.Stream) (hal.Graph, error) {
	if err := gc.BeginCapture(s); err != nil {
		return nil, err
	}
	if err := c.Launch(call, s); err != nil {
		gc.EndCapture(s)
		return nil, err
	}
	return gc.EndCapture(s)
}

// ceGraphReplay captures one host-issued AllGather of several windows and
// replays it three times with new inputs, checking every element.
func ceGraphReplay(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
	gc, ok := dev.(hal.GraphCapturer)
	if !ok {
		return nil
	}
	n := c.Size()
	const count = 12345 // float32: ~48 KiB per rank, 4 windows
	es := int64(plan.Float32.Size())
	in, err := dev.Alloc(count * es)
	if err != nil {
		return err
	}
	defer in.Free()
	out, err := dev.Alloc(int64(n) * count * es)
	if err != nil {
		return err
	}
	defer out.Free()
	call := weft.Call{Coll: algorithms.AllGather, Send: in.Addr(), Recv: out.Addr(), Count: count, Type: plan.Float32, Op: plan.Sum}
	g, err := captureLaunch(gc, c, call, s)
	if err != nil {
		return err
	}
	defer g.Close()
	for k := 0; k < 3; k++ {
		// Inputs differ per replay: rank r's segment is the Send pattern
		// of rank r+k, so the expected output shifts with k. No barrier:
		// a rank's input is read by its own stream only (synchronised
		// below), and a landing half is written again only after its
		// reader has released it (the free words), whatever the skew.
		if err := dev.Write(in, 0, check.Send(algorithms.AllGather, plan.Float32, plan.Sum, n+3, rank+k, count)); err != nil {
			return err
		}
		if err := g.Launch(s); err != nil {
			return err
		}
		if err := c.Synchronize(s); err != nil {
			return fmt.Errorf("replay %d: %w", k, err)
		}
		got := make([]byte, int64(n)*count*es)
		if err := dev.Read(got, out, 0); err != nil {
			return err
		}
		for r := 0; r < n; r++ {
			want := check.Send(algorithms.AllGather, plan.Float32, plan.Sum, n+3, r+k, count)
			seg := got[int64(r)*count*es : int64(r+1)*count*es]
			if wrong := check.Wrong(plan.Float32, seg, want); wrong != 0 {
				return fmt.Errorf("replay %d: segment of rank %d: %d wrong elements", k, r, wrong)
			}
		}
	}
	return nil
}

// TestCEDefaultBound: with no family forced, AllGathers of at least
// WEFT_CE_MIN_BYTES output bytes take the host-issued executor and smaller
// ones a kernel plan, both exact; 0 turns it off; a malformed value is
// refused naming the variable; ranks with different bounds fail NewComm
// naming the rank (an AllGather must run on copy engines on every rank or
// on none).
func TestCEDefaultBound(t *testing.T) {
	t.Setenv("WEFT_TUNING_FILE", "off")
	t.Setenv("WEFT_ALGO", "")
	t.Setenv("WEFT_CE_MIN_BYTES", "64K")
	const n = 3
	small := int64(4096)       // 48 KiB of output: a kernel plan
	large := int64(6000)       // 72 KiB: the executor
	larger := int64(100 << 10) // 1.2 MiB: many 16 KiB windows
	var cases []collCase
	for _, count := range []int64{small, large, larger} {
		for _, in := range []bool{false, true} {
			cases = append(cases, collCase{coll: algorithms.AllGather, t: plan.Float32, op: plan.Sum, count: count, inPlace: in})
		}
	}
	runCasesThen(t, "host", n, cases, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		for _, k := range []struct {
			count int64
			ce    bool
		}{{small, false}, {large, true}, {larger, true}} {
			call := weft.Call{Coll: algorithms.AllGather, Count: k.count, Type: plan.Float32}
			if got := c.PlanName(call) == "all_gather-ce-host-issued"; got != k.ce {
				return fmt.Errorf("AllGather of %d floats on %d ranks: PlanName %q, want the executor: %v", k.count, n, c.PlanName(call), k.ce)
			}
		}
		if !weft.CEActive(c) {
			return fmt.Errorf("the large AllGathers did not go through the host-issued executor")
		}
		return nil
	})

	t.Setenv("WEFT_CE_MIN_BYTES", "0")
	runCasesThen(t, "host", 2, cases[4:5], func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		if weft.CEActive(c) {
			return fmt.Errorf("WEFT_CE_MIN_BYTES=0: an AllGather went through the executor")
		}
		return nil
	})

	t.Setenv("WEFT_CE_MIN_BYTES", "big")
	errs := runRanksWith(t, "host", 2, func(int, hal.Device) weft.Options { return weft.Options{} },
		func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "WEFT_CE_MIN_BYTES") {
			t.Errorf("rank %d with WEFT_CE_MIN_BYTES=big: %v; want ErrInvalidArgument naming the variable", r, err)
		}
	}

	t.Setenv("WEFT_CE_MIN_BYTES", "")
	errs = runRanksWith(t, "host", 3, func(r int, dev hal.Device) weft.Options {
		if r != 2 {
			return weft.Options{}
		}
		c := algorithms.DefaultConfig(r, 3, dev.Info().Multiprocessors, false)
		c.CEMinBytes = 1 << 20
		return weft.Options{Config: &c}
	}, func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "rank 2 1048576 bytes") {
			t.Errorf("rank %d: %v; want ErrInvalidUsage naming rank 2's copy-engine bound", r, err)
		}
	}
	// The same lower bound everywhere, another upper bound on rank 2.
	errs = runRanksWith(t, "host", 3, func(r int, dev hal.Device) weft.Options {
		c := algorithms.DefaultConfig(r, 3, dev.Info().Multiprocessors, false)
		c.CEMinBytes = 1 << 20
		if r == 2 {
			c.CEMaxBytes = 2 << 20
		}
		return weft.Options{Config: &c}
	}, func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "rank 2 1048576 to 2097152 bytes") {
			t.Errorf("rank %d: %v; want ErrInvalidUsage naming rank 2's copy-engine bounds", r, err)
		}
	}
}

// ceStuck runs a host-issued AllGather of count floats on 2 ranks once
// together (the executor's buffers are set up collectively), then a second
// time on rank 0 alone: rank 1 never joins it. then runs on rank 0 after
// that call is queued.
func ceStuck(t *testing.T, count int64, then func(c *weft.Comm, s hal.Stream) error) {
	t.Helper()
	t.Setenv("WEFT_ALGO", "ce")
	done := make(chan struct{})
	errs := runRanksOpts(t, "host", 2, weft.Options{Timeout: 60 * time.Second}, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		es := int64(plan.Float32.Size())
		in, err := dev.Alloc(count * es)
		if err != nil {
			return err
		}
		defer in.Free()
		out, err := dev.Alloc(2 * count * es)
		if err != nil {
			return err
		}
		defer out.Free()
		call := weft.Call{Coll: algorithms.AllGather, Send: in.Addr(), Recv: out.Addr(), Count: count, Type: plan.Float32}
		if err := c.Launch(call, s); err != nil {
			return err
		}
		if err := c.Synchronize(s); err != nil {
			return err
		}
		if rank == 1 {
			<-done // never joins the second call
			return nil
		}
		defer close(done)
		if err := c.AsyncError(); err != nil {
			return fmt.Errorf("AsyncError before the call without its peer: %v", err)
		}
		if err := c.Launch(call, s); err != nil {
			return err
		}
		return then(c, s)
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestCEAbort: a host-issued AllGather whose peer never joins holds its
// stream in a flag wait (no kernel abort word reaches it); Comm.Abort
// releases it through hal.StreamOps.AbortWaits, so the stream drains at
// once with an error wrapping ErrInvalidUsage, long before WEFT_TIMEOUT,
// and Close does not wait for the absent peer.
func TestCEAbort(t *testing.T) {
	t.Setenv("WEFT_TIMEOUT", "60s")
	ceStuck(t, 50000, func(c *weft.Comm, s hal.Stream) error { // ~200 KiB per rank, 13 windows of 16 KiB
		if err := s.Synchronize(time.Now().Add(200 * time.Millisecond)); !errors.Is(err, hal.ErrTimeout) {
			return fmt.Errorf("the call without its peer: Synchronize = %v, want a timeout (held in a wait)", err)
		}
		start := time.Now()
		c.Abort()
		err := s.Synchronize(time.Now().Add(10 * time.Second))
		if took := time.Since(start); !errors.Is(err, hal.ErrInvalidUsage) || took > 5*time.Second {
			return fmt.Errorf("after Abort: Synchronize = %v after %v, want an error wrapping ErrInvalidUsage at once", err, took.Round(time.Millisecond))
		}
		return nil
	})
}

// TestCEStuckPeer: a host-issued AllGather whose peer never joins (alive,
// not lost) fails its wait at WEFT_TIMEOUT; Comm.AsyncError reports it
// without a Synchronize (as the kernels' timeouts are, through their
// control blocks), wrapping ErrTimeout, and the stream has drained.
func TestCEStuckPeer(t *testing.T) {
	t.Setenv("WEFT_TIMEOUT", "300ms")
	ceStuck(t, 20000, func(c *weft.Comm, s hal.Stream) error {
		deadline := time.Now().Add(10 * time.Second)
		for c.AsyncError() == nil {
			if time.Now().After(deadline) {
				return fmt.Errorf("AsyncError still nil 10 s after a call whose peer never joined (WEFT_TIMEOUT=300ms)")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := c.AsyncError(); !errors.Is(err, hal.ErrTimeout) {
			return fmt.Errorf("AsyncError = %v, want an error wrapping ErrTimeout", err)
		}
		// Drained: Synchronize reports the failed wait itself (hal/host:
		// "wait at … timed out"), not work still running at its deadline.
		if err := s.Synchronize(time.Now().Add(5 * time.Second)); err == nil || !strings.Contains(err.Error(), "wait at") || strings.Contains(err.Error(), "still running") {
			return fmt.Errorf("the stream after the failed wait: Synchronize = %v, want it drained with the wait's error", err)
		}
		return nil
	})
}

// preferringDevice is a hal/host device that declares a copy-engine
// preference (hal.CopyEnginePreference), as hal/nvlink does.
type preferringDevice struct {
	*host.Device
	minBytes, maxBytes int64
}

func (d preferringDevice) CopyEngineMinBytes(nranks int) int64 { return d.minBytes }
func (d preferringDevice) CopyEngineMaxBytes(nranks int) int64 { return d.maxBytes }

// TestCopyEnginePreference: with nothing set, the copy-engine AllGather is
// the default only where the backend declares a bound
// (hal.CopyEnginePreference), from its lower bound up to its upper bound;
// WEFT_CE_MIN_BYTES and WEFT_CE_MAX_BYTES override the backend's bounds
// (0: off, and no upper bound).
func TestCopyEnginePreference(t *testing.T) {
	t.Setenv("WEFT_TUNING_FILE", "off")
	t.Setenv("WEFT_ALGO", "")
	const n = 2
	small, large := int64(4096), int64(16<<10) // 32 KiB and 128 KiB of output
	for _, tc := range []struct {
		name          string
		prefer, upper int64 // prefer < 0: a plain hal/host device
		env, envMax   string
		ce            [2]bool // small, large
	}{
		{"no preference", -1, 0, "", "", [2]bool{false, false}},
		{"64K preferred", 64 << 10, 0, "", "", [2]bool{false, true}},
		{"64K preferred, WEFT_CE_MIN_BYTES=0", 64 << 10, 0, "0", "", [2]bool{false, false}},
		{"64K preferred, WEFT_CE_MIN_BYTES=16K", 64 << 10, 0, "16K", "", [2]bool{true, true}},
		{"16K to 64K preferred", 16 << 10, 64 << 10, "", "", [2]bool{true, false}},
		{"16K to 64K preferred, WEFT_CE_MAX_BYTES=0", 16 << 10, 64 << 10, "", "0", [2]bool{true, true}},
		{"16K preferred, WEFT_CE_MAX_BYTES=32K", 16 << 10, 0, "", "32K", [2]bool{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("WEFT_CE_MIN_BYTES", tc.env)
			t.Setenv("WEFT_CE_MAX_BYTES", tc.envMax)
			job := sanitize("cepref-" + tc.name)
			open := func(r int) (hal.Device, error) {
				hd, err := hal.Open(host.Name, hal.Config{Ordinal: r, Rank: r, JobID: job})
				if err != nil || tc.prefer < 0 {
					return hd, err
				}
				return preferringDevice{Device: hd.(*host.Device), minBytes: tc.prefer, maxBytes: tc.upper}, nil
			}
			errs := runRanksOn(n, open, func(int, hal.Device) weft.Options { return weft.Options{} },
				func(_ int, c *weft.Comm, _ hal.Device, _ hal.Stream) error {
					for i, count := range []int64{small, large} {
						call := weft.Call{Coll: algorithms.AllGather, Count: count, Type: plan.Float32}
						if got := c.PlanName(call) == "all_gather-ce-host-issued"; got != tc.ce[i] {
							return fmt.Errorf("AllGather of %d floats: plan %q, want the copy-engine executor: %v", count, c.PlanName(call), tc.ce[i])
						}
					}
					return nil
				})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}
