package weft_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// NVLS plans on hal/host: the switch buffer is a software multicast group
// in shared memory (hal/host multicast.go), so the plans' switch
// transfers, barriers and windows run in CI exactly as generated kernels
// run them on NVSwitch hardware, up to the memory model.

// nvlsTypes are AllReduce's cases through the switch: every type and
// operator the switch reduces, and some it does not (served by the
// memory-channel plans that follow the NVLS plan).
func nvlsTypes(all bool) []collCase {
	var cases []collCase
	for _, dt := range plan.DataTypes {
		for _, op := range plan.RedOps {
			if plan.SwitchSupports(dt, op) && (all || op != plan.Min) {
				cases = append(cases, collCase{coll: algorithms.AllReduce, t: dt, op: op})
			}
		}
	}
	return append(cases, collCase{coll: algorithms.AllReduce, t: plan.Float32, op: plan.Max},
		collCase{coll: algorithms.AllReduce, t: plan.Int8, op: plan.Sum}, collCase{coll: algorithms.AllReduce, t: plan.BFloat16, op: plan.PreMulSum})
}

// nvlsCases are the NVLS collectives at counts from one element to several
// windows (hal/host NVLS windows are 16 KiB per chunk), in and out of
// place: AllReduce over nvlsTypes, AllGather over types of every size.
func nvlsCases(counts []int64, all bool) []collCase {
	var cases []collCase
	for i, count := range counts {
		for _, k := range nvlsTypes(all) {
			k.count, k.inPlace = count, i%2 == 1
			cases = append(cases, k)
		}
		for _, dt := range []plan.DataType{plan.Float32, plan.Int8, plan.BFloat16, plan.Float64} {
			cases = append(cases, collCase{coll: algorithms.AllGather, t: dt, op: plan.Sum, count: count, inPlace: i%2 == 0})
		}
	}
	return cases
}

// TestCollectivesNVLS runs AllReduce and AllGather with WEFT_ALGO=nvls on
// 2, 3, 4 and 8 goroutine ranks of hal/host, every element checked: the
// NVLS plans for what the switch serves, the memory-channel plans for the
// rest.
func TestCollectivesNVLS(t *testing.T) {
	t.Setenv("WEFT_ALGO", "nvls")
	for _, n := range []int{2, 3, 4, 8} {
		t.Run(fmt.Sprintf("ranks%d", n), func(t *testing.T) {
			counts := []int64{1, 37, 4100, 70001}
			if n > 4 || testing.Short() {
				counts = []int64{5, 70001}
			}
			runCases(t, n, nvlsCases(counts, n <= 3))
		})
	}
}

// TestNVLSSelected: under WEFT_ALGO=nvls the communicator names the NVLS
// plans for what the switch reduces (and for every AllGather), the
// memory-channel plans for the rest, and Comm.AllReduce goes through the
// NVLS plan too; without it, no NVLS plan is named.
func TestNVLSSelected(t *testing.T) {
	name := func(c *weft.Comm, coll algorithms.Collective, dt plan.DataType, op plan.RedOp) string {
		return c.PlanName(weft.Call{Coll: coll, Type: dt, Op: op, Count: 1 << 20, Send: 1 << 20, Recv: 1 << 30})
	}
	errs := runRanks(t, "host", 2, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		for _, k := range []struct {
			coll algorithms.Collective
			dt   plan.DataType
			op   plan.RedOp
		}{{algorithms.AllReduce, plan.Float32, plan.Sum}, {algorithms.AllGather, plan.Int8, plan.Sum}} {
			if got := name(c, k.coll, k.dt, k.op); strings.Contains(got, "nvls") {
				return fmt.Errorf("%v %v %v without WEFT_ALGO: plan %s", k.coll, k.dt, k.op, got)
			}
		}
		return nil
	})
	reportRanks(t, errs)
	t.Setenv("WEFT_ALGO", "nvls")
	errs = runRanks(t, "host", 2, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		for _, k := range []struct {
			coll algorithms.Collective
			dt   plan.DataType
			op   plan.RedOp
			nvls bool
		}{
			{algorithms.AllReduce, plan.Float32, plan.Sum, true}, {algorithms.AllReduce, plan.BFloat16, plan.Min, true},
			{algorithms.AllReduce, plan.Uint32, plan.Avg, true}, {algorithms.AllReduce, plan.Float32, plan.Max, false},
			{algorithms.AllReduce, plan.Float8E4M3, plan.Sum, false}, {algorithms.AllGather, plan.Int8, plan.Sum, true},
			{algorithms.ReduceScatter, plan.Float32, plan.Sum, false},
		} {
			if got := name(c, k.coll, k.dt, k.op); strings.Contains(got, "nvls") != k.nvls {
				return fmt.Errorf("%v %v %v: plan %s (NVLS: want %v)", k.coll, k.dt, k.op, got, k.nvls)
			}
		}
		// Comm.AllReduce (the zero-copy entry point) takes the NVLS plan.
		return oneAllReduce(c, dev, s, 70001, plan.Int64, plan.Max, false)
	})
	reportRanks(t, errs)
}

// TestNVLSProcesses runs the NVLS collectives in 2, 3, 4 and 8 processes
// sharing a software multicast group through /dev/shm (childMain's "nvls"
// mode, with WEFT_ALGO=nvls).
func TestNVLSProcesses(t *testing.T) {
	t.Parallel() // CPU work that overlaps the waiting process tests
	ranks := []int{2, 3, 4, 8}
	if testing.Short() {
		ranks = []int{3}
	}
	for _, n := range ranks {
		out, err, _ := runChildren(t, n, "nvls", "WEFT_ALGO=nvls")
		if err != nil {
			t.Fatalf("%d processes: %v\n%s", n, err, out)
		}
	}
}

// nvlsChild is one rank of TestNVLSProcesses: Comm.AllReduce over the
// types and operators the switch reduces, and AllGather, each checked
// element by element, after checking that the NVLS plans are the ones in
// use.
func nvlsChild(c *weft.Comm, dev hal.Device, s hal.Stream) error {
	defer releaseCaseBuffers(c, dev)
	rank := c.Rank()
	for _, k := range nvlsTypes(false) {
		if !plan.SwitchSupports(k.t, k.op) {
			continue
		}
		call := weft.Call{Coll: algorithms.AllReduce, Type: k.t, Op: k.op, Count: 1000, Send: 1, Recv: 1}
		if name := c.PlanName(call); !strings.Contains(name, "nvls") {
			return fmt.Errorf("rank %d: %v %v runs plan %q, want an NVLS plan", rank, k.t, k.op, name)
		}
		for i, count := range []int64{3, 4100, 70001} {
			if err := oneAllReduce(c, dev, s, count, k.t, k.op, i%2 == 0); err != nil {
				return fmt.Errorf("rank %d: all_reduce %v %v count %d: %w", rank, k.t, k.op, count, err)
			}
		}
	}
	for i, count := range []int64{1, 4100, 70001} {
		k := collCase{coll: algorithms.AllGather, t: plan.Float16, op: plan.Sum, count: count, inPlace: i%2 == 1}
		wrong, err := runColl(rank, c, dev, s, k)
		if err != nil {
			return fmt.Errorf("rank %d: %v: %w", rank, k, err)
		}
		if wrong != 0 {
			return fmt.Errorf("rank %d: %v: %d wrong elements", rank, k, wrong)
		}
	}
	return nil
}
