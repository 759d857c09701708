package algorithms_test

import (
	"context"
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

// The 1PA plans run across the LL flag wrap-around (launch numbers from
// 2^32−3, flags …, 2^32−1, 1, 2, …) with exact results every time, in both
// packet formats.
func TestAllReduce1PAFlagWrapAround(t *testing.T) {
	for _, ll := range []plan.Protocol{plan.LL16, plan.LL8} {
		t.Run(ll.String(), func(t *testing.T) {
			const n, count = 3, 1000
			boots := bootstrap.NewLocal(n)
			var wg sync.WaitGroup
			errs := make([]error, n)
			for r := 0; r < n; r++ {
				wg.Add(1)
				go func(r int) {
					defer wg.Done()
					errs[r] = runWrap(boots[r], ll, r, n, count)
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

func runWrap(boot bootstrap.Bootstrap, ll plan.Protocol, rank, n int, count int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a failed rank leaves no one waiting
	defer cancel()
	dev, err := hal.Open(host.Name, hal.Config{Ordinal: rank, JobID: "wrap-" + ll.String()})
	if err != nil {
		return err
	}
	defer dev.Close()
	cfg := algorithms.DefaultConfig(rank, n, 2, false)
	cfg.LL = ll
	p, err := algorithms.AllReduce1PA(cfg)
	if err != nil {
		return err
	}
	res, err := channels.Setup(ctx, boot, dev, p, p.ScratchBytes(count, 4), 0xFFFFFFFF-3)
	if err != nil {
		return err
	}
	defer res.Close()
	prog, err := dev.(hal.Executor).Prepare(hal.PlanSpec{Plan: p, Bindings: res.Bindings, DataType: plan.Int32, RedOp: plan.Sum})
	if err != nil {
		return err
	}
	in, _ := dev.Alloc(count * 4)
	out, _ := dev.Alloc(count * 4)
	defer in.Free()
	defer out.Free()
	s, _ := dev.NewStream()
	defer s.Close()
	want := check.AllReduce(plan.Int32, plan.Sum, n, count)
	for i := 0; i < 6; i++ {
		if err := dev.Write(in, 0, check.Input(plan.Int32, plan.Sum, rank, count)); err != nil {
			return err
		}
		if err := prog.Launch(s, &plan.Args{Count: count, Input: in.Addr(), Output: out.Addr(), Timeout: 5 * time.Second}); err != nil {
			return err
		}
		if err := s.Synchronize(time.Time{}); err != nil {
			return err
		}
		if err := res.Check(); err != nil {
			return fmt.Errorf("launch %d: %w", i, err)
		}
		got := make([]byte, count*4)
		dev.Read(got, out, 0)
		if d := cmp.Diff(want, got); d != "" {
			return fmt.Errorf("launch %d (flag %#x): wrong result", i, plan.Flag(0xFFFFFFFF-3+uint64(i)))
		}
		// All ranks finish a launch before the next overwrites the inputs.
		if err := boot.Barrier(ctx); err != nil {
			return err
		}
	}
	return nil
}

func TestPlansValidateForEverySize(t *testing.T) {
	for n := 1; n <= 8; n++ {
		for r := 0; r < n; r++ {
			for _, gpu := range []bool{false, true} {
				cs, err := algorithms.AllReducePlans(algorithms.DefaultConfig(r, n, 132, gpu))
				if err != nil {
					t.Fatalf("rank %d of %d: %v", r, n, err)
				}
				if got := algorithms.Select(cs, 8); got != 0 {
					t.Errorf("8 bytes selects plan %d, want 1PA", got)
				}
				if got := algorithms.Select(cs, 1<<30); !strings.HasPrefix(cs[got].Plan.Name, "allreduce-2pa-") {
					t.Errorf("1 GiB selects %s, want 2PA", cs[got].Plan.Name)
				}
			}
		}
	}
	if _, err := algorithms.AllReduce1PA(algorithms.DefaultConfig(0, 9, 4, false)); err == nil {
		t.Error("9 ranks accepted; GPU plans support 8")
	}
}

// The store-only 2PA generates a window loop whose pushes and reduction
// address the window-sized scratch, with the slot-free handshake skipped in
// the first two windows and the last two.
func TestAllReduce2PAPushCodegen(t *testing.T) {
	c := algorithms.DefaultConfig(1, 4, 132, true)
	s := c.Large
	s.Push, s.Window = true, 8<<20
	p, err := algorithms.AllReduce2PAPush(c, s)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.ScratchBytes(1<<30, 4), int64(2*3*8<<20); got != want {
		t.Errorf("scratch %d bytes, want %d (two halves of 3 window slots, whatever the count)", got, want)
	}
	src, err := plan.EmitCUDA(p, plan.Float32, plan.Sum)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"const weft_u64 nwin = windows<ES>(c, 8388608, 4, 0, 0);",
		"const weft_u64 wlen = window_elems<ES>(c, 4, nwin);",
		"for (weft_u64 w = 0; w < nwin; ++w) {",
		"if (w >= 2 && w + 0 < nwin) {", "if (w >= 0 && w + 2 < nwin) {",
		"range_w<ES>(c, 1, 4, w, wlen, wstart, off, len);",
		"wslot_at<ES>(c, P.peer_scratch[0], 0, w, off - wstart)", "wslot_at<ES>(c, P.peer_scratch[1], 1, w, off - wstart)",
		"wslot_at<ES>(c, P.scratch, 2, w, off - wstart)",
		"const bool check[3] = {w == 0, w == 0, w == 0};",
		"xfer_plain<DT, OP, 4, 4, 2, CMB>(c, s, d, len);",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("generated source lacks %q", want)
		}
	}
	if _, err := algorithms.AllReduce2PAPush(c, algorithms.Shape{Blocks: 4, Push: true, Window: 100}); err == nil {
		t.Error("a window that is not a multiple of 16 bytes was accepted")
	}
}
