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
	"github.com/weftccl/weft/hal/nvlink"
	"github.com/weftccl/weft/hal/plan"
)

// inPlaceA2ACounts are the per-peer counts of type t that in-place AllToAll
// is checked at: 1 and a few elements (LL), one more than a hal/host HB
// window (16 KiB; LL still), exactly the LL limit, and past it (the
// windowed HB plan, many windows).
func inPlaceA2ACounts(t plan.DataType, llMax int64) []int64 {
	es := int64(t.Size())
	return []int64{1, 37, 16<<10/es + 1, llMax / es, llMax/es + 3}
}

// TestInPlaceAllToAll: AllToAll with send == recv through Comm.Launch on
// hal/host, 2 to 5 ranks, every data type, from one element to past the
// LL limit, every element checked. The largest count must be served by the
// HB plan and the smallest by LL, so that both plans are covered.
func TestInPlaceAllToAll(t *testing.T) {
	t.Parallel() // CPU work that overlaps the waiting process tests
	llMax := algorithms.DefaultConfig(0, 2, 1, false).CollLLMaxBytes
	for _, n := range []int{2, 3, 4, 5} {
		t.Run(fmt.Sprintf("ranks%d", n), func(t *testing.T) {
			var cases []collCase
			for ti, typ := range plan.DataTypes {
				if n > 2 && ti%3 != n%3 { // every type on 2 ranks, a third of them on each larger count
					continue
				}
				for _, count := range inPlaceA2ACounts(typ, llMax) {
					cases = append(cases, collCase{coll: algorithms.AllToAll, t: typ, op: plan.Sum, count: count, inPlace: true})
				}
			}
			errs := runRanksOpts(t, "host", n, weft.Options{Timeout: 30 * time.Second}, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
				defer releaseCaseBuffers(c, dev)
				for _, k := range cases {
					name := c.PlanName(weft.Call{Coll: k.coll, Send: 1, Recv: 1, Count: k.count, Type: k.t})
					if wantLL := k.count*int64(k.t.Size()) <= llMax; strings.Contains(name, "LL") != wantLL {
						return fmt.Errorf("%v: plan %q, want an LL plan: %v", k, name, wantLL)
					}
					wrong, err := runColl(rank, c, dev, s, k)
					if err != nil {
						return fmt.Errorf("%v: %w", k, err)
					}
					if wrong != 0 {
						return fmt.Errorf("%v (%s): %d wrong elements on rank %d", k, name, wrong, rank)
					}
				}
				return nil
			})
			reportRanks(t, errs)
		})
	}
}

// TestInPlaceAllToAllPort: in-place AllToAll through the port-channel plan
// (the engines read the send buffer while other engines write the
// receive buffer), 2 and 3 ranks, across several windows.
func TestInPlaceAllToAllPort(t *testing.T) {
	for _, n := range []int{2, 3} {
		var cases []collCase
		for _, typ := range []plan.DataType{plan.Float32, plan.Int8, plan.BFloat16, plan.Float64} {
			for _, count := range []int64{1, 4099, 70001} {
				cases = append(cases, collCase{coll: algorithms.AllToAll, t: typ, op: plan.Sum, count: count, inPlace: true})
			}
		}
		errs := runRanksConfig(t, n, func(c *algorithms.Config) { c.Algo = algorithms.PortFamily }, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
			defer releaseCaseBuffers(c, dev)
			for _, k := range cases {
				if name := c.PlanName(weft.Call{Coll: k.coll, Send: 1, Recv: 1, Count: k.count, Type: k.t}); !strings.Contains(name, algorithms.PortFamily) {
					return fmt.Errorf("%v: plan %q is not a port-channel plan", k, name)
				}
				wrong, err := runColl(rank, c, dev, s, k)
				if err != nil {
					return fmt.Errorf("%v: %w", k, err)
				}
				if wrong != 0 {
					return fmt.Errorf("%v: %d wrong elements on rank %d", k, wrong, rank)
				}
			}
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Errorf("%d ranks, rank %d: %v", n, r, err)
			}
		}
	}
}

// TestInPlaceAllToAllStaging: only in-place calls stage (the out-of-place
// path allocates nothing more), the staging buffer holds the whole send
// data and is reused, and buffers that overlap without being the same are
// refused with ErrInvalidArgument.
func TestInPlaceAllToAllStaging(t *testing.T) {
	const n, count = 3, 5000
	errs := runRanks(t, "host", n, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		defer releaseCaseBuffers(c, dev)
		k := collCase{coll: algorithms.AllToAll, t: plan.Float32, op: plan.Sum, count: count}
		if _, err := runColl(rank, c, dev, s, k); err != nil { // sets the plans up
			return err
		}
		before := c.MemoryBytes()
		if wrong, err := runColl(rank, c, dev, s, k); err != nil || wrong != 0 {
			return fmt.Errorf("out of place: %d wrong, %v", wrong, err)
		}
		if got := c.MemoryBytes(); got != before {
			return fmt.Errorf("out-of-place AllToAll changed the communicator's memory from %d to %d bytes", before, got)
		}
		k.inPlace = true
		for i := 0; i < 2; i++ {
			if wrong, err := runColl(rank, c, dev, s, k); err != nil || wrong != 0 {
				return fmt.Errorf("in place, call %d: %d wrong, %v", i, wrong, err)
			}
		}
		grown := c.MemoryBytes() - before
		if want := int64(n * count * 4); grown < want || grown > 2*want {
			return fmt.Errorf("in-place AllToAll staged %d bytes, want %d to %d (the send data once, reused)", grown, want, 2*want)
		}
		send, _, err := caseBuffers(dev, n*count*4+64)
		if err != nil {
			return err
		}
		call := weft.Call{Coll: algorithms.AllToAll, Send: send.Addr(), Recv: send.Addr() + 64, Count: count, Type: plan.Float32}
		if err := c.Launch(call, s); !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "overlap") {
			return fmt.Errorf("overlapping send and receive buffers: got %v, want ErrInvalidArgument naming the overlap", err)
		}
		return nil
	})
	reportRanks(t, errs)
}

// TestInPlaceAllToAllNVLink: in-place AllToAll on the machine's GPUs (two
// ranks sharing a one-GPU host's), every type, LL and HB plans (several
// 4 MiB windows). It skips without GPUs, unless WEFT_REQUIRE names nvlink.
func TestInPlaceAllToAllNVLink(t *testing.T) {
	n := max(requireGPUs(t), 2)
	var cases []collCase
	for _, typ := range plan.DataTypes {
		for _, count := range []int64{1, 37, 70001, 3<<20 + 5} {
			cases = append(cases, collCase{coll: algorithms.AllToAll, t: typ, op: plan.Sum, count: count, inPlace: true})
		}
	}
	runCasesOn(t, nvlink.Name, n, cases)
}
