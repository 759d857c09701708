package weft_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/host"
	"github.com/weftccl/weft/hal/plan"
)

// noLines is a hal/host device whose links do not carry LL128 lines (as a
// GPU reached over PCIe would not).
type noLines struct{ *host.Device }

func (noLines) LL128(hal.Endpoint) bool { return false }

// TestLL128Links: the wide LL plans take LL128 lines only where every
// link of every rank carries them (hal.LL128Carrier), judged alike by all
// ranks: with one rank's links unable to, every rank keeps LL16 (and
// LL16's bounds), collectives stay right, and WEFT_LL128=1 or an
// AllReduce tier naming LL128 (WEFT_ALLREDUCE) is refused on every rank;
// where all links carry them, LL128.
func TestLL128Links(t *testing.T) {
	open := func(job string, without int) func(r int) (hal.Device, error) {
		return func(r int) (hal.Device, error) {
			d, err := hal.Open(host.Name, hal.Config{Ordinal: r, Rank: r, JobID: job})
			if err != nil || r != without {
				return d, err
			}
			return noLines{d.(*host.Device)}, nil
		}
	}
	none := func(int, hal.Device) weft.Options { return weft.Options{} }
	wide := weft.Call{Coll: algorithms.AllGather, Count: 40000, Type: plan.Float32, Op: plan.Sum, Send: 1 << 20, Recv: 64 << 20}
	for _, tc := range []struct {
		without int // the rank without LL128 lines; -1: none
		want    string
	}{{-1, "-LL128-"}, {2, "-LL16-"}, {0, "-LL16-"}} {
		errs := runRanksOn(3, open(sanitize(fmt.Sprintf("ll128-%d-%s", tc.without, t.Name())), tc.without), none, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
			if got := c.PlanName(wide); !strings.Contains(got, tc.want) {
				return fmt.Errorf("rank %d without lines: PlanName(AllGather of %d floats) = %q, want …%s…", tc.without, wide.Count, got, tc.want)
			}
			defer releaseCaseBuffers(c, dev)
			for _, k := range []collCase{
				{coll: algorithms.AllGather, t: plan.Float32, op: plan.Sum, count: 40000},
				{coll: algorithms.AllReduce, t: plan.BFloat16, op: plan.Sum, count: 60001},
				{coll: algorithms.Broadcast, t: plan.Float32, op: plan.Sum, root: 1, count: 50001},
			} {
				if wrong, err := runColl(rank, c, dev, s, k); err != nil || wrong != 0 {
					return fmt.Errorf("rank %d without lines, %v: %d wrong, %v", tc.without, k, wrong, err)
				}
			}
			return nil
		})
		reportRanks(t, errs)
	}
	// A tier naming LL128 lines (WEFT_ALLREDUCE) is refused the same way
	// where a link cannot carry them.
	t.Setenv("WEFT_ALLREDUCE", "1pa-LL128-2x64@4K,2pa-4x64")
	errs := runRanksOn(3, open(sanitize("ll128-tier-"+t.Name()), 2), none, func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "1pa-LL128-2x64@4K") {
			t.Errorf("rank %d: an LL128 AllReduce tier with a link that does not carry lines: %v, want ErrInvalidArgument naming the tier", r, err)
		}
	}
	t.Setenv("WEFT_ALLREDUCE", "")
	t.Setenv("WEFT_LL128", "1")
	errs = runRanksOn(3, open(sanitize("ll128-forced-"+t.Name()), 1), none, func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "WEFT_LL128=1") {
			t.Errorf("rank %d: WEFT_LL128=1 with a link that does not carry lines: %v, want ErrInvalidArgument naming the variable", r, err)
		}
	}
}

// TestLL128EightRanks: on 8 ranks (an 8-GPU node's count, which takes the
// 4-rank bounds unmeasured) the plans with slots of one chunk on LL128
// lines are right: the two-phase LL AllReduce (8 chunks, 14 slots) and the
// split LL Broadcast and Reduce (7 chunks), with roots other than 0.
func TestLL128EightRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	t.Setenv("WEFT_BROADCAST_SPLIT_LL_MAX_BYTES", "1M")
	t.Setenv("WEFT_REDUCE_SPLIT_LL_MAX_BYTES", "1M")
	runCasesThen(t, "host", 8, []collCase{
		{coll: algorithms.AllReduce, t: plan.Float32, op: plan.Sum, count: 70001},
		{coll: algorithms.AllReduce, t: plan.BFloat16, op: plan.Avg, count: 90001, inPlace: true},
		{coll: algorithms.Broadcast, t: plan.Float32, op: plan.Sum, root: 5, count: 50001},
		{coll: algorithms.Reduce, t: plan.Int32, op: plan.Avg, root: 7, count: 200003},
		{coll: algorithms.Reduce, t: plan.Float32, op: plan.PreMulSum, root: 2, count: 60001, inPlace: true},
	}, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		for _, k := range []struct {
			coll  algorithms.Collective
			count int64
			want  string
		}{{algorithms.AllReduce, 70001, "all_reduce-2pa-LL128-"}, {algorithms.Broadcast, 50001, "broadcast-split-r1-LL128"}, {algorithms.Reduce, 200003, "reduce-split-r1-LL128"}} {
			call := weft.Call{Coll: k.coll, Count: k.count, Type: plan.Float32, Op: plan.Sum, Root: 1, Send: 1 << 20, Recv: 64 << 20}
			if got := c.PlanName(call); !strings.Contains(got, k.want) {
				return fmt.Errorf("PlanName(%v of %d floats) = %q, want …%s…", k.coll, k.count, got, k.want)
			}
		}
		return nil
	})
}
