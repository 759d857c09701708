package weft_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// budgetCases are every collective at a count the LL plans serve and one
// that crosses windows of the HB plans, in and out of place.
func budgetCases(n int) []collCase {
	var cases []collCase
	for _, coll := range algorithms.Collectives {
		if coll == algorithms.SendRecv {
			continue
		}
		for _, count := range []int64{37, 70001} {
			cases = append(cases, collCase{coll: coll, t: plan.Float32, op: plan.Sum, root: n - 1, count: count, inPlace: count%2 == 0},
				collCase{coll: coll, t: plan.Float32, op: plan.Sum, root: 0, count: count, inPlace: count%2 == 1})
		}
	}
	return cases
}

// defaultMostBlocks is the most blocks any plan of rank 0's default
// configuration holds on hal/host: what a budget must bind below.
func defaultMostBlocks(t *testing.T, n, sms int) int {
	t.Helper()
	c := algorithms.DefaultConfig(0, n, sms, false)
	most := 0
	for _, coll := range algorithms.Collectives {
		cs, err := algorithms.Plans(c, coll, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range cs {
			most = max(most, ch.Plan.Blocks())
		}
	}
	return most
}

// budgetBody runs every case, the AllReduce of Comm.AllReduce and a
// point-to-point all-to-all-v, checks every result, and checks that no
// plan it ran held more than limit(plan) blocks (PlanSMs per call, then
// PeakBlocks over every launch).
func budgetBody(cases []collCase, limit func(c *weft.Comm, name string) int) func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
	return func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		defer releaseCaseBuffers(c, dev)
		most := 0
		for _, k := range cases {
			send, recv, err := caseBuffers(dev, 16)
			if err != nil {
				return err
			}
			call := weft.Call{Coll: k.coll, Send: send.Addr(), Recv: recv.Addr(), Count: k.count, Type: k.t, Op: k.op, Root: k.root}
			blocks, _ := c.PlanSMs(call)
			if lim := limit(c, c.PlanName(call)); blocks > lim || blocks == 0 {
				return fmt.Errorf("%v: plan %s holds %d blocks, limit %d", k, c.PlanName(call), blocks, lim)
			}
			most = max(most, blocks)
			wrong, err := runColl(rank, c, dev, s, k)
			if err != nil {
				return fmt.Errorf("%v: %w", k, err)
			}
			if wrong != 0 {
				return fmt.Errorf("%v: %d wrong elements on rank %d", k, wrong, rank)
			}
		}
		for _, count := range []int64{5, 300000} {
			if err := oneAllReduce(c, dev, s, count, plan.Float32, plan.Sum, false); err != nil {
				return fmt.Errorf("Comm.AllReduce of %d floats: %w", count, err)
			}
		}
		if err := budgetP2P(rank, c, dev, s); err != nil {
			return err
		}
		peak := c.PeakBlocks()
		if peak < most {
			return fmt.Errorf("PeakBlocks %d is below the %d blocks of a plan that ran", peak, most)
		}
		if lim := limit(c, ""); peak > lim {
			return fmt.Errorf("PeakBlocks %d, limit %d", peak, lim)
		}
		return nil
	}
}

// budgetP2P runs an all-to-all-v of 1 to 60000 bytes per pair (sizes the
// LL and the windowed point-to-point plans serve) and checks every byte.
func budgetP2P(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
	n := c.Size()
	size := func(src, dst int) int64 { return int64(src*7919+dst*104729)%60000 + 1 }
	var ops []weft.P2P
	var recvs []hal.Buffer
	for p := 0; p < n; p++ {
		sb, err := dev.Alloc(size(rank, p))
		if err != nil {
			return err
		}
		defer sb.Free()
		data := make([]byte, size(rank, p))
		for i := range data {
			data[i] = byte(rank*37 + p*11 + i)
		}
		if err := dev.Write(sb, 0, data); err != nil {
			return err
		}
		rb, err := dev.Alloc(size(p, rank))
		if err != nil {
			return err
		}
		defer rb.Free()
		recvs = append(recvs, rb)
		ops = append(ops, weft.P2P{Peer: p, Send: true, Buf: sb.Addr(), Bytes: size(rank, p)}, weft.P2P{Peer: p, Buf: rb.Addr(), Bytes: size(p, rank)})
	}
	if err := c.LaunchP2P(ops, s); err != nil {
		return err
	}
	if err := c.Synchronize(s); err != nil {
		return err
	}
	for p, rb := range recvs {
		got := make([]byte, size(p, rank))
		if err := dev.Read(got, rb, 0); err != nil {
			return err
		}
		for i, b := range got {
			if b != byte(p*37+rank*11+i) {
				return fmt.Errorf("point-to-point from rank %d: byte %d of %d is %d, want %d", p, i, len(got), b, byte(p*37+rank*11+i))
			}
		}
	}
	return nil
}

// TestBlockBudget: with Options.MaxCTAs every plan that runs holds at most
// that many blocks (the budget is chosen at the smallest plan minimum, the
// point-to-point plan's 2(n−1)+1 groups, and binds: the default plans hold
// more), and every result is right.
func TestBlockBudget(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("ranks%d", n), func(t *testing.T) {
			budget := 2*(n-1) + 1
			if most := defaultMostBlocks(t, n, 4); most <= budget {
				t.Fatalf("the default plans hold at most %d blocks: a budget of %d binds nothing", most, budget)
			}
			errs := runRanksOpts(t, "host", n, weft.Options{MaxCTAs: budget, Timeout: 20 * time.Second},
				budgetBody(budgetCases(n), func(*weft.Comm, string) int { return budget }))
			reportRanks(t, errs)
		})
	}
}

// TestBlockBudgetClamp: a budget below what a plan can run with (one
// block per group) leaves that plan at its minimum, and only that plan;
// results stay right.
func TestBlockBudgetClamp(t *testing.T) {
	const n, budget = 3, 2
	// The plans that cannot fit, with their minima (every rank's config
	// gives the same: the fit is collective).
	c := algorithms.DefaultConfig(0, n, 4, false)
	c.Budget = algorithms.BlockBudget{Max: budget}
	minima := map[string]int{}
	for _, coll := range algorithms.Collectives {
		for _, root := range []int{0, n - 1} {
			_, clamps, err := algorithms.FitBlocks(c, coll, root, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, cl := range clamps {
				minima[cl.Plan] = cl.Blocks
			}
		}
	}
	if len(minima) == 0 {
		t.Fatalf("no plan is clamped under %d blocks on %d ranks", budget, n)
	}
	limit := func(_ *weft.Comm, name string) int {
		if name == "" { // PeakBlocks: the largest minimum
			m := budget
			for _, b := range minima {
				m = max(m, b)
			}
			return m
		}
		if m, ok := minima[name]; ok {
			return m
		}
		return budget
	}
	errs := runRanksOpts(t, "host", n, weft.Options{MaxCTAs: budget, Timeout: 20 * time.Second}, budgetBody(budgetCases(n), limit))
	reportRanks(t, errs)
}

// TestBlockBudgetEnv: WEFT_MAX_CTAS sets the budget; Options.MaxCTAs wins
// over it; malformed values and a minimum above the maximum are
// ErrInvalidArgument naming what is wrong; ranks with different budgets
// are ErrInvalidUsage.
func TestBlockBudgetEnv(t *testing.T) {
	const n = 2
	ag := collCase{coll: algorithms.AllGather, t: plan.Float32, op: plan.Sum, count: 70001}
	most := defaultMostBlocks(t, n, 4)
	peakOf := func(opts weft.Options) int {
		t.Helper()
		peaks := make([]int, n)
		errs := runRanksOpts(t, "host", n, opts, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
			defer releaseCaseBuffers(c, dev)
			wrong, err := runColl(rank, c, dev, s, ag)
			if err == nil && wrong != 0 {
				err = fmt.Errorf("%d wrong elements", wrong)
			}
			peaks[rank] = c.PeakBlocks()
			return err
		})
		reportRanks(t, errs)
		return peaks[0]
	}
	free := peakOf(weft.Options{})
	if free <= 2 || free > most {
		t.Skipf("AllGather of %d floats without a budget holds %d blocks: want 3 to %d for this test", ag.count, free, most)
	}
	t.Setenv("WEFT_MAX_CTAS", "2")
	if got := peakOf(weft.Options{}); got != 2 {
		t.Errorf("WEFT_MAX_CTAS=2: AllGather holds %d blocks, want 2", got)
	}
	if got := peakOf(weft.Options{MaxCTAs: free}); got != free {
		t.Errorf("Options.MaxCTAs=%d over WEFT_MAX_CTAS=2: AllGather holds %d blocks, want %d", free, got, free)
	}

	bad := []struct {
		env  map[string]string
		opts weft.Options
		want string
	}{
		{map[string]string{"WEFT_MAX_CTAS": "0"}, weft.Options{}, "WEFT_MAX_CTAS"},
		{map[string]string{"WEFT_MAX_CTAS": "many"}, weft.Options{}, "WEFT_MAX_CTAS"},
		{map[string]string{"WEFT_MAX_CTAS": "4", "WEFT_MIN_CTAS": "8"}, weft.Options{}, "WEFT_MIN_CTAS"},
		{nil, weft.Options{MaxCTAs: -1}, "Options.MaxCTAs"},
		{nil, weft.Options{MinCTAs: 9, MaxCTAs: 3}, "above max"},
	}
	for _, k := range bad {
		t.Run(fmt.Sprintf("%v/%+v", k.env, k.opts), func(t *testing.T) {
			t.Setenv("WEFT_MAX_CTAS", "")
			for name, v := range k.env {
				t.Setenv(name, v)
			}
			errs := runRanksOpts(t, "host", 1, k.opts, func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
			if !errors.Is(errs[0], hal.ErrInvalidArgument) || !strings.Contains(errs[0].Error(), k.want) {
				t.Errorf("NewComm = %v, want ErrInvalidArgument naming %s", errs[0], k.want)
			}
		})
	}

	t.Setenv("WEFT_MAX_CTAS", "")
	errs := runRanksWith(t, "host", n, func(rank int, _ hal.Device) weft.Options { return weft.Options{MaxCTAs: 3 + rank} },
		func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "block budgets") {
			t.Errorf("rank %d with MaxCTAs %d: NewComm = %v, want ErrInvalidUsage naming the budgets", r, 3+r, err)
		}
	}
}
