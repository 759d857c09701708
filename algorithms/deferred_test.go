package algorithms_test

import (
	"fmt"
	"testing"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal/plan"
)

// Every credit wait pairs with its peer's releases in kind: a wait that
// counts deferred releases (plan.Op.Deferred, which Close subtracts one
// for: plan.Plan.ReleaseLag) has only deferred releases at the start of
// the peer's runs (plan.Group.Before) on its semaphore, and a wait that
// does not has only ordinary signals. A writer marked deferred whose
// reader still released at its end would let Close free the semaphores
// before the last release lands. Every plan family with credit waits,
// 2–6 ranks, every root, on GPUs and hal/host.
func TestCreditsPairWithReleases(t *testing.T) {
	type builder struct {
		name  string
		build func(c algorithms.Config, root int) (*plan.Plan, error)
	}
	builders := []builder{
		{"p2p-ll", func(c algorithms.Config, _ int) (*plan.Plan, error) { return algorithms.P2PLLPlan(c) }},
		{"broadcast-ll", algorithms.BroadcastLL},
		{"broadcast-ll-wide", algorithms.BroadcastLLWide},
		{"reduce-ll", algorithms.ReduceLL},
		{"reduce-ll-wide", algorithms.ReduceLLWide},
	}
	for _, b := range boundedBuilders {
		builders = append(builders, builder{b.name + "-" + b.coll.String(), b.build})
	}
	for _, gpu := range []bool{true, false} {
		for n := 2; n <= 6; n++ {
			for _, b := range builders {
				for root := 0; root < n; root++ {
					plans := make([]*plan.Plan, n)
					for r := range n {
						p, err := b.build(algorithms.DefaultConfig(r, n, 132, gpu), root)
						if err != nil {
							t.Fatalf("%s n%d rank %d root %d: %v", b.name, n, r, root, err)
						}
						plans[r] = p
					}
					for r, p := range plans {
						where := fmt.Sprintf("%s (gpu %v) n%d root %d rank %d", p.Name, gpu, n, root, r)
						checkCreditPairs(t, where, r, p, plans)
					}
				}
			}
		}
	}
}

// checkCreditPairs checks rank r's credit waits in p against the signals
// of the peers' plans (see TestCreditsPairWithReleases).
func checkCreditPairs(t *testing.T, where string, r int, p *plan.Plan, plans []*plan.Plan) {
	t.Helper()
	for _, g := range p.Groups {
		for _, ops := range [][]plan.Op{g.Before, g.Ops, g.After} {
			for _, o := range ops {
				if o.Kind != plan.OpWait || o.Credits == 0 {
					continue
				}
				q := p.Channels[o.Chan].Peer
				found := 0
				for _, pg := range plans[q].Groups {
					for part, pops := range [][]plan.Op{pg.Before, pg.Ops, pg.After} {
						for _, s := range pops {
							if s.Kind != plan.OpSignal || s.Sem != o.Sem || plans[q].Channels[s.Chan].Peer != r {
								continue
							}
							found++
							if deferred := s.Deferred && part == 0; deferred != o.Deferred {
								t.Errorf("%s: credit wait on rank %d's semaphore %d counts deferred releases: %v; rank %d releases with %s (deferred at a run's start: %v)",
									where, q, o.Sem, o.Deferred, q, plans[q].OpString(s), deferred)
							}
						}
					}
				}
				if found == 0 {
					t.Errorf("%s: credit wait %s has no release from rank %d", where, p.OpString(o), q)
				}
			}
		}
	}
}
