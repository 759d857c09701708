package sim

import (
	"fmt"
	"sort"

	"github.com/weftccl/weft/algorithms"
)

// A Family builds the plans weft would run for one rank: the choices of a
// collective, smallest messages first, as algorithms' builders return
// them (algorithms.Select picks by size). c is algorithms.DefaultConfig
// for an H100/H200 (132 SMs) with c.Nodes set from the cluster.
type Family struct {
	Name string
	Doc  string
	// Build returns the rank's choices; an error means the family does not
	// apply (too many ranks, one GPU per node, …) and the family is left
	// out of that table.
	Build func(c algorithms.Config, coll algorithms.Collective) ([]algorithms.Choice, error)
	// Choice, when not nil, builds choice i of Build's alone: a plan
	// that must be built for every rank (one that is not
	// translation-symmetric, as trees are) then costs only its own
	// construction, not that of the family's other plans (a ring's
	// grows with n).
	Choice func(c algorithms.Config, coll algorithms.Collective, i int) (algorithms.Choice, error)
}

// choice builds choice i of the family for one rank.
func (f Family) choice(c algorithms.Config, coll algorithms.Collective, i int) (algorithms.Choice, error) {
	if f.Choice != nil {
		return f.Choice(c, coll, i)
	}
	cs, err := f.Build(c, coll)
	if err != nil {
		return algorithms.Choice{}, err
	}
	if i >= len(cs) {
		return algorithms.Choice{}, fmt.Errorf("sim: family %s has %d %v plans for rank %d, not %d: %w", f.Name, len(cs), coll, c.Rank, i+1, ErrInvalid)
	}
	return cs[i], nil
}

var registry = map[string]Family{}

// Register adds a plan family; adding a family to `weft sim` is one call.
// It panics on a duplicate name (registration happens in init).
func Register(f Family) {
	if _, dup := registry[f.Name]; dup {
		panic("sim: family " + f.Name + " registered twice")
	}
	registry[f.Name] = f
}

// Families lists the registered family names, sorted.
func Families() []string {
	var names []string
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the family named name.
func Lookup(name string) (Family, error) {
	f, ok := registry[name]
	if !ok {
		return Family{}, fmt.Errorf("sim: unknown plan family %q (have %v): %w", name, Families(), ErrInvalid)
	}
	return f, nil
}

func init() {
	Register(Family{Name: "all-pairs",
		Doc: "weft's single-node plans: AllReduce 1PA-LL / 2PA zero-copy tiers (algorithms.AllReducePlans), AllGather and ReduceScatter LL then windowed HB (algorithms.Plans); at most 8 ranks",
		Build: func(c algorithms.Config, coll algorithms.Collective) ([]algorithms.Choice, error) {
			if coll == algorithms.AllReduce {
				return algorithms.AllReducePlans(c)
			}
			return algorithms.Plans(c, coll, 0)
		}})
	Register(Family{Name: "2ph",
		Doc: "two-phase hierarchical (algorithms.AllReduce2PH, AllGather2PH, ReduceScatter2PH): all-pairs inside a node, port channels to the counterparts on the other nodes; ≥ 2 nodes of ≥ 2 GPUs, at most 8 ranks",
		Build: func(c algorithms.Config, coll algorithms.Collective) ([]algorithms.Choice, error) {
			c.PortOnly = true
			var build func(algorithms.Config) (*planT, error)
			switch coll {
			case algorithms.AllReduce:
				build = algorithms.AllReduce2PH
			case algorithms.AllGather:
				build = algorithms.AllGather2PH
			case algorithms.ReduceScatter:
				build = algorithms.ReduceScatter2PH
			default:
				return nil, fmt.Errorf("sim: 2ph has no %v plan: %w", coll, ErrInvalid)
			}
			p, err := build(c)
			if err != nil {
				return nil, err
			}
			return []algorithms.Choice{{Plan: p}}, nil
		}})
	Register(Family{Name: "ring-ref",
		Doc:   "the simulator's reference ring (ringref.go): one ring over all ranks, HB windows, reduce and forward in one transfer; stands in for the bounded plans until they land",
		Build: RingPlans})
	for _, fam := range []string{algorithms.RingFamily, algorithms.TreeFamily} {
		Register(Family{Name: fam,
			Doc: "one family of algorithms.BoundedPlans forced at every size, as WEFT_ALGO=" + fam + " does (Plans with Config.Algo): its LL plan, then its HB plan; tree: AllReduce only",
			Build: func(c algorithms.Config, coll algorithms.Collective) ([]algorithms.Choice, error) {
				if fam == algorithms.TreeFamily && coll != algorithms.AllReduce {
					return nil, fmt.Errorf("sim: the tree family has no %v plan", coll)
				}
				c.Algo = fam
				return algorithms.Plans(c, coll, 0)
			}})
	}
	Register(Family{Name: "bounded",
		Doc: "algorithms.BoundedPlans: plans whose channels per rank stay bounded (ring, double binary tree, Bruck/PAT), as weft selects them by size",
		Build: func(c algorithms.Config, coll algorithms.Collective) ([]algorithms.Choice, error) {
			return algorithms.BoundedPlans(c, coll, 0)
		},
		Choice: func(c algorithms.Config, coll algorithms.Collective, i int) (algorithms.Choice, error) {
			return algorithms.BoundedPlan(c, coll, 0, i)
		}})
}
