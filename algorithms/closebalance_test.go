package algorithms

import (
	"fmt"
	"testing"

	"github.com/weftccl/weft/hal/plan"
)

// TestSignalsPairWithWaits checks the premise of Comm.Close's wait for
// owed releases (closewait.go in the root package, docs/collectives.md
// "Closing a communicator"): in every plan, per launch, the signals rank
// `from` stores into rank `to`'s semaphore s are exactly as many as the
// waits of `to` on (from, s) run, credit waits included (each run of a
// wait advances its expected value by one). Then, after matched launches,
// the expected values on a rank are exactly what its peers' launches
// bring the counters to: Close waits for nothing that never comes, and
// misses no store that is still to come. Windowed groups are counted for
// the windows of several counts (skip-first and skip-last ops run in only
// some); point-to-point plans run every group (each send group pairs with
// its peer's receive group).
func TestSignalsPairWithWaits(t *testing.T) {
	type setup struct {
		name   string
		n      int
		adjust func(*Config)
	}
	setups := []setup{
		{"default", 2, nil}, {"default", 3, nil}, {"default", 4, nil}, {"default", 8, nil},
		{"ll", 3, func(c *Config) { c.Algo = "ll" }},
		{"hb", 3, func(c *Config) { c.Algo = "hb" }},
		{"ring", 4, func(c *Config) { c.Algo = "ring" }},
		{"tree", 5, func(c *Config) { c.Algo = "tree" }},
		{"bruck", 5, func(c *Config) { c.Algo = "bruck" }},
		{"port", 3, func(c *Config) { c.PortOnly = true }},
		{"hier", 4, func(c *Config) { c.PortOnly, c.Nodes = true, []int{0, 0, 1, 1} }},
		{"hier", 6, func(c *Config) { c.PortOnly, c.Nodes = true, []int{0, 1, 0, 1, 0, 1} }},
		{"nvls", 4, func(c *Config) { c.Switch, c.Algo = true, NVLSFamily }},
		{"gpu", 4, nil},
	}
	counts := []int64{1, 5000, 100_000, 3 << 20}
	checked := 0
	for _, su := range setups {
		cfgs := make([]Config, su.n)
		for r := range cfgs {
			cfgs[r] = DefaultConfig(r, su.n, 132, su.name == "gpu" || su.name == "nvls")
			if su.adjust != nil {
				su.adjust(&cfgs[r])
			}
		}
		type key struct {
			coll Collective
			root int
		}
		var keys []key
		for _, coll := range Collectives {
			roots := 1
			if coll == Broadcast || coll == Reduce {
				roots = su.n
			}
			for root := 0; root < roots; root++ {
				keys = append(keys, key{coll, root})
			}
		}
		keys = append(keys, key{coll: 255}) // the zero-copy AllReduce plans
		for _, k := range keys {
			plans := make([][]Choice, su.n)
			var err error
			for r := range plans {
				if k.coll == 255 {
					if su.name == "port" {
						break
					}
					plans[r], err = AllReducePlans(cfgs[r])
				} else {
					plans[r], err = Plans(cfgs[r], k.coll, k.root)
				}
				if err != nil {
					break
				}
			}
			if err != nil || plans[0] == nil {
				continue // no plan of this collective in this setup
			}
			for i := range plans[0] {
				ps := make([]*plan.Plan, su.n)
				for r := range ps {
					if len(plans[r]) != len(plans[0]) {
						t.Fatalf("%s/%d ranks: %v root %d: rank %d has %d choices, rank 0 %d", su.name, su.n, k.coll, k.root, r, len(plans[r]), len(plans[0]))
					}
					ps[r] = plans[r][i].Plan
				}
				for _, count := range counts {
					if msg := pairing(ps, count); msg != "" {
						t.Errorf("%s/%d ranks: %v root %d: plan %s, count %d: %s", su.name, su.n, k.coll, k.root, ps[0].Name, count, msg)
					}
				}
				checked++
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d plans checked; the setups produced too few plans to mean anything", checked)
	}
	t.Logf("%d plans checked", checked)
}

// pairing compares, for every ordered pair of ranks and semaphore, the
// signals of one launch of ps[from] into ps[to] with the wait runs of
// ps[to] on them, for count elements of 4 bytes; "" when they agree.
func pairing(ps []*plan.Plan, count int64) string {
	n := len(ps)
	// sig[from][to][s] and exp[to][from][s].
	sig := make([][]map[int]int64, n)
	exp := make([][]map[int]int64, n)
	for r := range sig {
		sig[r], exp[r] = make([]map[int]int64, n), make([]map[int]int64, n)
		for q := range sig[r] {
			sig[r][q], exp[r][q] = map[int]int64{}, map[int]int64{}
		}
	}
	for r, p := range ps {
		for _, g := range p.Groups {
			nwin := g.Windows(count, 4)
			add := func(o plan.Op, runs int64) {
				if runs == 0 || (o.Kind != plan.OpSignal && o.Kind != plan.OpWait) {
					return
				}
				peer := p.Channels[o.Chan].Peer
				for part := 0; part < g.Blocks; part++ {
					if o.Kind == plan.OpSignal {
						sig[r][peer][o.Sem+part] += runs
					} else {
						exp[r][peer][o.Sem+part] += runs
					}
				}
			}
			for _, o := range g.Before {
				add(o, 1)
			}
			for _, o := range g.Ops {
				var runs int64
				for w := int64(0); w < nwin; w++ {
					if g.Window == 0 || o.Runs(w, nwin) {
						runs++
					}
				}
				add(o, runs)
			}
			for _, o := range g.After {
				add(o, 1)
			}
		}
	}
	for from := 0; from < n; from++ {
		for to := 0; to < n; to++ {
			for s := 0; s < ps[to].Semaphores; s++ {
				if a, b := sig[from][to][s], exp[to][from][s]; a != b {
					return fmt.Sprintf("rank %d signals rank %d's semaphore %d %d times per launch, which waits on it %d times", from, to, s, a, b)
				}
			}
		}
	}
	return ""
}
