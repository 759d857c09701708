package algorithms_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/check"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/host"
	"github.com/weftccl/weft/hal/plan"
)

// NVLS plans are offered only when WEFT_ALGO=nvls forces them and the links
// are switch-mapped; the AllReduce is followed by the memory-channel plans
// for what the switch cannot reduce, and SelectFor chooses by type and
// operator.
func TestNVLSSelection(t *testing.T) {
	cfg := algorithms.DefaultConfig(1, 4, 132, true)
	cfg.Switch = true
	names := func(cs []algorithms.Choice) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Plan.Name)
		}
		return out
	}
	for _, coll := range []algorithms.Collective{algorithms.AllReduce, algorithms.AllGather} {
		cs, err := algorithms.Plans(cfg, coll, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.Plan.HasSwitch() {
				t.Errorf("%v: %s offered without WEFT_ALGO=nvls", coll, c.Plan.Name)
			}
		}
	}
	cfg.Algo = algorithms.NVLSFamily
	ar, err := algorithms.Plans(cfg, algorithms.AllReduce, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"all_reduce-nvls-16x1024-w1048576", "allreduce-1pa-LL16-8x1024", "allreduce-1pa-LL16-32x1024", "all_reduce-2pa-LL16-32x1024", "all_reduce-hb-32x1024-w8388608", "all_reduce-ring-hb-64x512-w16777216"}
	if d := cmp.Diff(want, names(ar)); d != "" {
		t.Fatalf("AllReduce plans under nvls (-want +got):\n%s", d)
	}
	for _, tc := range []struct {
		t     plan.DataType
		op    plan.RedOp
		bytes int64
		want  int
	}{
		{plan.Float32, plan.Sum, 8, 0}, {plan.Float32, plan.Sum, 1 << 30, 0}, {plan.BFloat16, plan.Max, 100, 0}, {plan.Int64, plan.Avg, 100, 0},
		{plan.Float32, plan.Max, 100, 1}, {plan.Float32, plan.Max, 1 << 30, 5}, {plan.Int8, plan.Sum, 100, 1}, {plan.Float16, plan.PreMulSum, 1 << 30, 5},
		{plan.Float32, plan.Max, 4 << 20, 4}, // below RingMinBytes: the all-pairs windowed plan
		{plan.Float32, plan.Max, 1 << 20, 3}, // the two-phase LL plan
		{plan.Float32, plan.Max, 256 << 10, 2},
	} {
		if got := algorithms.SelectFor(ar, tc.bytes, tc.t, tc.op); got != tc.want {
			t.Errorf("SelectFor(%d bytes of %v %v) = %s, want %s", tc.bytes, tc.t, tc.op, ar[got].Plan.Name, ar[tc.want].Plan.Name)
		}
	}
	ag, err := algorithms.Plans(cfg, algorithms.AllGather, 0)
	if err != nil || len(ag) != 1 || !strings.HasPrefix(ag[0].Plan.Name, "all_gather-nvls") || !ag[0].Serves(plan.Int8, plan.Sum) {
		t.Fatalf("AllGather plans under nvls: %v, %v; want the NVLS plan alone, for every type", names(ag), err)
	}
	// Collectives without an NVLS plan keep theirs.
	if rs, err := algorithms.Plans(cfg, algorithms.ReduceScatter, 0); err != nil || rs[0].Plan.HasSwitch() {
		t.Fatalf("ReduceScatter under nvls: %v, %v", names(rs), err)
	}
	cfg.Switch = false
	if _, err := algorithms.Plans(cfg, algorithms.AllReduce, 0); !errors.Is(err, algorithms.ErrNoPlan) {
		t.Fatalf("nvls forced without switch-mapped links: %v, want ErrNoPlan", err)
	}
	one := algorithms.DefaultConfig(0, 1, 132, true)
	one.Algo = algorithms.NVLSFamily
	if cs, err := algorithms.Plans(one, algorithms.AllReduce, 0); err != nil || cs[0].Plan.HasSwitch() {
		t.Fatalf("one rank under nvls: %v, %v; want the ordinary plans", names(cs), err)
	}
}

// The NVLS plans validate for every rank of 1 to 8, have one switch slot
// per rank and a switch buffer of two halves of window-sized slots
// whatever the count, and generate switch transfers.
func TestNVLSPlansValidate(t *testing.T) {
	for n := 1; n <= 8; n++ {
		for r := 0; r < n; r++ {
			c := algorithms.DefaultConfig(r, n, 132, true)
			for _, build := range []func(algorithms.Config) (*plan.Plan, error){algorithms.AllReduceNVLS, algorithms.AllGatherNVLS} {
				p, err := build(c)
				if err != nil {
					t.Fatalf("rank %d of %d: %v", r, n, err)
				}
				if p.SwitchSlots != n || p.SwitchBytes(1<<30, 4) != 2*int64(n)*c.NVLS.Window {
					t.Errorf("%s rank %d of %d: %d slots, %d bytes", p.Name, r, n, p.SwitchSlots, p.SwitchBytes(1<<30, 4))
				}
			}
		}
	}
	p, _ := algorithms.AllReduceNVLS(algorithms.DefaultConfig(2, 4, 132, true))
	src, err := plan.EmitCUDA(p, plan.BFloat16, plan.Sum)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`#include "weft_switch.h"`,
		"xfer_switch<DT, OP, 0, 0, 4, CMB, true, true>(c, (const char*)wswitch_at<ES>(c, P.switch_mc, 2, w, off - wstart)",
		"(char*)wswitch_at<ES>(c, P.switch_local, 3, w, off - wstart)"} {
		if !strings.Contains(src, want) {
			t.Errorf("generated source lacks %q", want)
		}
	}
	if _, err := algorithms.AllReduceNVLS(algorithms.Config{Rank: 0, NRanks: 2, Mid: algorithms.Shape{Blocks: 1}, Large: algorithms.Shape{Blocks: 1}, LLBlocks: 1}); err == nil {
		t.Error("an NVLS plan without an NVLS shape was accepted")
	}
}

// The NVLS plans run on hal/host through channels.Setup, across several
// windows and launches, with exact results on every rank.
func TestNVLSRunHost(t *testing.T) {
	const n = 3
	for _, coll := range []algorithms.Collective{algorithms.AllReduce, algorithms.AllGather} {
		t.Run(coll.String(), func(t *testing.T) {
			boots := bootstrap.NewLocal(n)
			var wg sync.WaitGroup
			errs := make([]error, n)
			for r := 0; r < n; r++ {
				wg.Add(1)
				go func(r int) {
					defer wg.Done()
					errs[r] = runNVLS(boots[r], coll, r, n)
				}(r)
			}
			wg.Wait()
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

func runNVLS(boot bootstrap.Bootstrap, coll algorithms.Collective, rank, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dev, err := hal.Open(host.Name, hal.Config{Ordinal: rank, JobID: "nvls-" + coll.String()})
	if err != nil {
		return err
	}
	defer dev.Close()
	cfg := algorithms.DefaultConfig(rank, n, 2, false)
	build := algorithms.AllReduceNVLS
	if coll == algorithms.AllGather {
		build = algorithms.AllGatherNVLS
	}
	p, err := build(cfg)
	if err != nil {
		return err
	}
	res, err := channels.Setup(ctx, boot, dev, p, 0, 0)
	if err != nil {
		return err
	}
	defer res.Close()
	const dt, op = plan.Float32, plan.Sum
	prog, err := dev.(hal.Executor).Prepare(hal.PlanSpec{Plan: p, Bindings: res.Bindings, DataType: dt, RedOp: op})
	if err != nil {
		return err
	}
	defer prog.Close()
	s, _ := dev.NewStream()
	defer s.Close()
	for _, count := range []int64{1, 37, 4100, 70001, 3} {
		sendSeg, recvSeg := coll.Segments(n)
		in, _ := dev.Alloc(int64(sendSeg) * count * 4)
		out, _ := dev.Alloc(int64(recvSeg) * count * 4)
		if err := dev.Write(in, 0, check.Send(coll, dt, op, n, rank, count)); err != nil {
			return err
		}
		if err := prog.Launch(s, &plan.Args{Count: count, Input: in.Addr(), Output: out.Addr(), Timeout: 10 * time.Second}); err != nil {
			return err
		}
		if err := s.Synchronize(time.Time{}); err != nil {
			return err
		}
		if err := res.Check(); err != nil {
			return fmt.Errorf("count %d: %w", count, err)
		}
		want := check.Expected(coll, dt, op, n, rank, 0, count)
		got := make([]byte, len(want))
		dev.Read(got, out, 0)
		if wrong := check.Wrong(dt, got, want); wrong != 0 {
			return fmt.Errorf("count %d: %d wrong elements", count, wrong)
		}
		if err := boot.Barrier(ctx); err != nil {
			return err
		}
		in.Free()
		out.Free()
	}
	return nil
}
