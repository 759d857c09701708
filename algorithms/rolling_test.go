package algorithms_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal/plan"
)

// TestRollingPortPlans: every windowed group of every port plan is rolling
// (plan.Group.Rolling): writers wait in every window for the "free" of the
// half the window reuses as a credit two releases behind, with no skipped
// window, no "done" credit at the launch's start and no wait at its end;
// readers release every window. The kernel reads the window base before
// its first wait and addresses slots by base + w; Validate refuses a
// rolling group whose counting wait is missing or skipped.
func TestRollingPortPlans(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		for r := 0; r < n; r++ {
			cfg := algorithms.DefaultConfig(r, n, 132, true)
			cfg.PortOnly = true
			var plans []*plan.Plan
			for _, coll := range algorithms.Collectives {
				p, err := algorithms.PortPlanRoot(cfg, coll, n-1)
				if err != nil {
					t.Fatalf("%v, rank %d of %d: %v", coll, r, n, err)
				}
				plans = append(plans, p)
			}
			p2p, err := algorithms.P2PPort(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range append(plans, p2p) {
				for gi, g := range p.Groups {
					if g.Window == 0 {
						continue
					}
					where := fmt.Sprintf("%s, group %d", p.Name, gi)
					if !g.Rolling {
						t.Errorf("%s: windowed but not rolling", where)
					}
					if len(g.Before) > 0 {
						t.Errorf("%s: takes credits at the launch's start: %v", where, p.OpString(g.Before[0]))
					}
					for _, o := range g.After {
						if o.Kind == plan.OpWait {
							t.Errorf("%s: %s waits at the end of the launch", where, p.OpString(o))
						}
					}
					for _, o := range g.Ops {
						if o.SkipFirst != 0 || o.SkipLast != 0 {
							t.Errorf("%s: %s skips windows", where, p.OpString(o))
						}
						if o.Kind == plan.OpWait && o.Ack && o.Credits != 2 {
							t.Errorf("%s: %s, want a credit wait two releases behind", where, p.OpString(o))
						}
					}
				}
			}
		}
	}

	p, err := algorithms.AllGatherPort(algorithms.DefaultConfig(0, 2, 132, true))
	if err != nil {
		t.Fatal(err)
	}
	src, err := plan.EmitCUDA(p, plan.Float32, plan.Sum)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"const weft_u64 wbase = ", "wslot_at<ES>(c, P.scratch, 0, wbase + w, off - wstart)"} {
		if !strings.Contains(src, want) {
			t.Errorf("AllGatherPort's kernel lacks %q", want)
		}
	}
	if base, wait := strings.Index(src, "wbase = "), strings.Index(src, "wait_credits<"); base < 0 || wait < 0 || base > wait {
		t.Errorf("the window base (at %d) must be read before the first credit wait (at %d)", base, wait)
	}

	for _, mut := range []func(g *plan.Group){
		func(g *plan.Group) { g.RollSem += 7 },
		func(g *plan.Group) { g.RollChan = 5 },
		func(g *plan.Group) { g.Window = 0 },
		func(g *plan.Group) {
			for i := range g.Ops {
				if g.Ops[i].Kind == plan.OpWait {
					g.Ops[i].SkipFirst = 1
				}
			}
		},
	} {
		q := *p
		q.Groups = append([]plan.Group(nil), p.Groups...)
		q.Groups[0].Ops = append([]plan.Op(nil), p.Groups[0].Ops...)
		mut(&q.Groups[0])
		if err := q.Validate(); err == nil {
			t.Errorf("a rolling group %+v validates; want an error", q.Groups[0])
		}
	}
}

// TestStagedSendsDropFlushes: with staged sends (every rank alone on its
// node over a network that sends host memory) the port plans' groups end
// without flushes, except where an engine reads a caller's buffer
// (AllReducePort's all-gather puts of the output); every put of the
// input goes through a staging slot. Without host windows nothing
// changes.
func TestStagedSendsDropFlushes(t *testing.T) {
	for _, host := range []bool{true, false} {
		for r := 0; r < 3; r++ {
			cfg := algorithms.DefaultConfig(r, 3, 132, true)
			cfg.PortOnly, cfg.Nodes, cfg.HostWindows = true, []int{0, 1, 2}, host
			var plans []*plan.Plan
			for _, coll := range algorithms.Collectives {
				p, err := algorithms.PortPlanRoot(cfg, coll, 1)
				if err != nil {
					t.Fatal(err)
				}
				plans = append(plans, p)
			}
			p2p, err := algorithms.P2PPort(cfg)
			if err != nil {
				t.Fatal(err)
			}
			plans = append(plans, p2p)
			if one, err := algorithms.AllReduceOneShotPort(cfg); host && err == nil {
				plans = append(plans, one)
			} else if host || err == nil {
				t.Errorf("AllReduceOneShotPort with host windows %v: %v; want a plan only with them", host, err)
			}
			for _, p := range plans {
				if p.StageSends != host || strings.HasSuffix(p.Name, "-hs") != host {
					t.Errorf("%s: StageSends %v, want %v (and the -hs suffix with it)", p.Name, p.StageSends, host)
				}
				for gi, g := range p.Groups {
					flushes, unstaged := 0, 0
					for _, o := range g.After {
						if o.Kind == plan.OpFlush {
							flushes++
						}
					}
					for _, o := range g.Ops {
						if o.Kind == plan.OpTransfer && o.Port && o.Stage == 0 {
							unstaged++
						}
					}
					switch {
					case host && unstaged == 0 && flushes > 0:
						t.Errorf("%s group %d: %d flushes although its engines touch only scratch", p.Name, gi, flushes)
					case host && unstaged > 0 && !strings.HasPrefix(p.Name, "all_reduce"):
						t.Errorf("%s group %d: %d port transfers without a staging slot", p.Name, gi, unstaged)
					case unstaged > 0 && flushes == 0:
						t.Errorf("%s group %d: an engine touches a caller's buffer but the group does not flush", p.Name, gi)
					case !host && g.Window > 0 && flushes == 0:
						t.Errorf("%s group %d: no flush without host windows", p.Name, gi)
					}
				}
			}
		}
	}
}
