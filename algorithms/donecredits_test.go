package algorithms_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal/plan"
)

// TestDoneCreditsAtLaunchStart checks where the writers of the one-hop
// windowed plans take their readers' "done" (algorithms.doneCredits; the
// port plans roll their windows instead, rolling_test.go):
// in plan.Group.Before, as Ack waits with one credit, with no wait left in
// After; that AllReduceHB keeps its done waits in After (measured slower
// with credits); that Validate refuses anything but credit waits in Before;
// and that the CUDA kernel runs Before once, before the window loop.
func TestDoneCreditsAtLaunchStart(t *testing.T) {
	for _, n := range []int{2, 3} {
		cfg := algorithms.DefaultConfig(0, n, 132, true)
		builds := map[string]func() (*plan.Plan, error){
			"AllGatherHB":     func() (*plan.Plan, error) { return algorithms.AllGatherHB(cfg) },
			"AllToAllHB":      func() (*plan.Plan, error) { return algorithms.AllToAllHB(cfg) },
			"ReduceScatterHB": func() (*plan.Plan, error) { return algorithms.ReduceScatterHB(cfg) },
			"P2PPlan":         func() (*plan.Plan, error) { return algorithms.P2PPlan(cfg) },
		}
		for name, build := range builds {
			p, err := build()
			if err != nil {
				t.Fatalf("%s, %d ranks: %v", name, n, err)
			}
			writers := 0
			for gi, g := range p.Groups {
				for _, o := range g.Before {
					if o.Kind != plan.OpWait || !o.Ack || o.Credits != 1 {
						t.Errorf("%s, %d ranks, group %d: before-op %s, want an Ack wait with 1 credit", name, n, gi, p.OpString(o))
					}
				}
				for _, o := range g.After {
					if o.Kind == plan.OpWait {
						t.Errorf("%s, %d ranks, group %d: %s still waits at the end of the launch", name, n, gi, p.OpString(o))
					}
				}
				if len(g.Before) > 0 {
					writers++
				}
			}
			if writers == 0 {
				t.Errorf("%s, %d ranks: no group takes a done credit", name, n)
			}
		}
		hb, err := algorithms.AllReduceHB(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for gi, g := range hb.Groups {
			if len(g.Before) > 0 {
				t.Errorf("AllReduceHB group %d has done credits; it keeps its done waits in After", gi)
			}
		}
	}

	p, err := algorithms.AllGatherHB(algorithms.DefaultConfig(0, 2, 132, true))
	if err != nil {
		t.Fatal(err)
	}
	gi := -1
	for i, g := range p.Groups {
		if len(g.Before) > 0 {
			gi = i
		}
	}
	src, err := plan.EmitCUDA(p, plan.Float32, plan.Sum)
	if err != nil {
		t.Fatal(err)
	}
	body := src[strings.Index(src, fmt.Sprintf("void group%d(", gi)):]
	body = body[:strings.Index(body, "\n}\n")]
	credit, loop := strings.Index(body, "wait_credits<"), strings.Index(body, "for (weft_u64 w = 0;")
	if credit < 0 || loop < 0 || credit > loop {
		t.Errorf("group %d: the credit wait (at %d) must come before the window loop (at %d):\n%s", gi, credit, loop, body)
	}

	for _, mut := range []func(o *plan.Op){
		func(o *plan.Op) { o.Credits = 0 },
		func(o *plan.Op) { o.Ack = false },
		func(o *plan.Op) { *o = plan.Signal(o.Chan, o.Sem) },
		func(o *plan.Op) { o.Chan = 99 },
		func(o *plan.Op) { o.SkipFirst = 2 },
	} {
		q := *p
		q.Groups = append([]plan.Group(nil), p.Groups...)
		q.Groups[gi].Before = append([]plan.Op(nil), p.Groups[gi].Before...)
		mut(&q.Groups[gi].Before[0])
		if err := q.Validate(); err == nil {
			t.Errorf("Before holding %+v validates; want an error", q.Groups[gi].Before[0])
		}
	}
}
