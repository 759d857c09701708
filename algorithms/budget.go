package algorithms

import (
	"fmt"
	"reflect"
)

// BlockBudget bounds the thread blocks (CTAs) one launch of a plan holds,
// as NCCL's ncclConfig_t.maxCTAs and minCTAs bound its channels: a
// collective that overlaps compute (FSDP's AllGather and ReduceScatter
// beside the GEMMs) takes its SMs from the compute kernels, so a job may
// give communication fewer of them.
//
// Max, when positive, is the most blocks a launch holds: every plan is
// re-parameterised with fewer blocks per group until it fits (FitBlocks). A plan
// that needs more than Max whatever its shape (one block per group, and
// more groups than Max: the point-to-point plans hold 2(n−1)+1 groups on n
// ranks, the windowed AllReduce 3) keeps that minimum; FitBlocks reports
// it. Min, when positive, raises plans that hold fewer blocks towards Min
// where their shapes can grow, never past Max nor past SMs. SMs is the
// device's multiprocessor count (the fewest of the ranks'; 0: unknown,
// then nothing is raised past its default): every block of a plan must be
// resident at once (blocks wait for their peers' blocks), so no plan is
// raised past it. The zero BlockBudget changes nothing.
type BlockBudget struct {
	Min, Max, SMs int
}

// Set reports whether the budget bounds anything.
func (b BlockBudget) Set() bool { return b.Min > 0 || b.Max > 0 }

// String is the budget's text form for logs and errors ("at most 16 blocks").
func (b BlockBudget) String() string {
	switch {
	case b.Min > 0 && b.Max > 0:
		return fmt.Sprintf("%d to %d blocks", b.Min, b.Max)
	case b.Max > 0:
		return fmt.Sprintf("at most %d blocks", b.Max)
	case b.Min > 0:
		return fmt.Sprintf("at least %d blocks", b.Min)
	}
	return "no block budget"
}

// Validate checks a budget: Min and Max not negative, Min ≤ Max when both
// are set.
func (b BlockBudget) Validate() error {
	switch {
	case b.Min < 0 || b.Max < 0 || b.SMs < 0:
		return fmt.Errorf("algorithms: block budget min %d, max %d, %d SMs: want none negative (0: unset)", b.Min, b.Max, b.SMs)
	case b.Min > 0 && b.Max > 0 && b.Min > b.Max:
		return fmt.Errorf("algorithms: block budget min %d is above max %d", b.Min, b.Max)
	}
	return nil
}

// Clamp is a plan that holds more blocks than the budget's Max because it
// cannot run with fewer: Blocks is its minimum (the most of any rank's).
type Clamp struct {
	Plan   string
	Blocks int
	Max    int
}

// withBlocks returns c with the blocks of every launch shape clamped to
// [lo, hi] (0: that side open): every field of type Shape, LLBlocks and
// the AllReduce tiers. Blocks 0 means "no such plan" for some shapes
// (WideLL, RootedHB) and stays 0. A shape whose blocks shrink on a GPU
// (512 threads or more per block) takes 1024 threads and 4 vectors in
// flight per thread where it had fewer, so that each block it keeps moves
// as many bytes at once as a block can: in the 4×H200 sweeps
// (docs/bench/notes.md) 64 × 1024 threads with unroll 4 beat 128 × 512
// with unroll 2 up to 16 MB, and a budget leaves a plan fewer blocks than
// either.
func (c Config) withBlocks(lo, hi int) Config {
	clampShape := func(s *Shape) {
		if s.Blocks <= 0 {
			return
		}
		b := s.Blocks
		if lo > 0 {
			b = max(b, lo)
		}
		if hi > 0 {
			b = min(b, hi)
		}
		if b < s.Blocks && s.Threads >= 512 {
			s.Threads = max(s.Threads, 1024)
			if s.Unroll > 0 {
				s.Unroll = max(s.Unroll, 4)
			}
		}
		s.Blocks = b
	}
	v := reflect.ValueOf(&c).Elem()
	shapeType := reflect.TypeOf(Shape{})
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Type() == shapeType && f.CanSet() {
			s := f.Interface().(Shape)
			clampShape(&s)
			f.Set(reflect.ValueOf(s))
		}
	}
	ll := Shape{Blocks: c.LLBlocks}
	clampShape(&ll)
	c.LLBlocks = ll.Blocks
	if len(c.AllReduce) > 0 {
		tiers := make([]Tier, len(c.AllReduce))
		for i, t := range c.AllReduce {
			clampShape(&t.Shape)
			tiers[i] = t
		}
		c.AllReduce = tiers
	}
	c.Budget = BlockBudget{}
	return c
}

// fitBlocks returns the choices build makes for c, each fitted to
// c.Budget (BlockBudget), and the plans that keep more blocks than its
// Max because they cannot run with fewer. Without a budget it is build(c).
//
// Each choice is fitted on its own: the launch shapes of the
// configuration are clamped to [lo, hi] (withBlocks) with the largest hi
// that keeps the choice within Max, then, for Min, the smallest lo that
// brings it to Min within Max and SMs; the choice is taken from that
// build. The bounds are chosen from the blocks of every rank's plan (a
// rooted plan's groups differ between the root and the others), so every
// rank fits the same shapes and blocks that signal each other pair up.
// Blocks grow with the shapes' blocks, so each bound is a binary search.
//
// Clamping can make two plans one (the wide 1PA and the last 1PA tier of
// the same clamped shape, a Mid and a Large 2PA that become equal), so a
// choice is found in a clamped build by what it serves, not by its index:
// the first choice that serves the same types and operators and at least
// the same sizes (match). A choice that an earlier one of the result
// already serves in full is dropped.
func (c Config) fitBlocks(build func(Config) ([]Choice, error)) ([]Choice, []Clamp, error) {
	b := c.Budget
	if !b.Set() {
		choices, err := build(c)
		return choices, nil, err
	}
	if err := b.Validate(); err != nil {
		return nil, nil, err
	}
	type probe struct {
		mine []Choice
		all  [][]Choice // every rank's choices
	}
	memo := map[[2]int]*probe{}
	at := func(lo, hi int) (*probe, error) {
		if p, ok := memo[[2]int{lo, hi}]; ok {
			return p, nil
		}
		p := &probe{all: make([][]Choice, c.NRanks)}
		for r := range p.all {
			cr := c.withBlocks(lo, hi)
			cr.Rank = r
			cs, err := build(cr)
			if err != nil {
				return nil, fmt.Errorf("plans with %d to %d blocks per group (%v): %w", lo, hi, b, err)
			}
			if len(cs) != len(p.all[0]) && r > 0 {
				return nil, fmt.Errorf("algorithms: rank %d has %d plan choices, rank 0 %d: selection must not depend on the rank", r, len(cs), len(p.all[0]))
			}
			p.all[r] = cs
		}
		p.mine = p.all[c.Rank]
		memo[[2]int{lo, hi}] = p
		return p, nil
	}
	base, err := at(0, 0)
	if err != nil {
		return nil, nil, err
	}
	// most is, for base choice i in the build at [lo, hi], its index there
	// and the most blocks any rank's plan of it holds.
	most := func(i, lo, hi int) (j, blocks int, p *probe, err error) {
		if p, err = at(lo, hi); err != nil {
			return 0, 0, nil, err
		}
		if j = match(p.mine, base.mine[i]); j < 0 {
			return 0, 0, nil, fmt.Errorf("algorithms: no plan with %d to %d blocks per group serves what %s serves", lo, hi, base.mine[i].Plan.Name)
		}
		for _, cs := range p.all {
			blocks = max(blocks, cs[j].Plan.Blocks())
		}
		return j, blocks, p, nil
	}
	// search returns the least v in [lo, hi] with ok(v), or hi+1.
	search := func(lo, hi int, ok func(v int) (bool, error)) (int, error) {
		for lo <= hi {
			mid := lo + (hi-lo)/2
			yes, err := ok(mid)
			if err != nil {
				return 0, err
			}
			if yes {
				hi = mid - 1
			} else {
				lo = mid + 1
			}
		}
		return lo, nil
	}
	var out []Choice
	var clamps []Clamp
	for i := range base.mine {
		lo, hi := 0, 0
		_, cur, _, err := most(i, 0, 0)
		if err != nil {
			return nil, nil, err
		}
		if b.Max > 0 && cur > b.Max {
			// The largest per-group cap within Max: the least cap that
			// exceeds it, minus one; 1 where even that exceeds it.
			over, err := search(1, b.Max, func(v int) (bool, error) {
				_, m, _, err := most(i, 0, v)
				return m > b.Max, err
			})
			if err != nil {
				return nil, nil, err
			}
			hi = max(1, over-1)
			j, m, p, err := most(i, 0, hi)
			if err != nil {
				return nil, nil, err
			}
			if cur = m; cur > b.Max {
				clamps = append(clamps, Clamp{Plan: p.mine[j].Plan.Name, Blocks: cur, Max: b.Max})
			}
		}
		if b.Min > 0 && hi == 0 {
			// Raise towards Min: the plan may grow to SMs (when known) and
			// Max, never below what it holds by default.
			limit := cur
			if b.SMs > 0 {
				limit = max(cur, b.SMs)
			}
			if b.Max > 0 {
				limit = min(limit, b.Max)
			}
			if target := min(b.Min, limit); cur < target {
				// The largest floor that keeps the plan within limit, then
				// the least floor up to it that reaches target.
				over, err := search(1, target, func(v int) (bool, error) {
					_, m, _, err := most(i, v, 0)
					return m > limit, err
				})
				if err != nil {
					return nil, nil, err
				}
				top := over - 1 // ≥ 1: floor 1 is the default, within limit
				reach, err := search(1, top, func(v int) (bool, error) {
					_, m, _, err := most(i, v, 0)
					return m >= target, err
				})
				if err != nil {
					return nil, nil, err
				}
				lo = min(reach, top)
			}
		}
		j, _, p, err := most(i, lo, hi)
		if err != nil {
			return nil, nil, err
		}
		if ch := p.mine[j]; !covered(out, ch) {
			out = append(out, ch)
		}
	}
	return out, clamps, nil
}

// sameService reports whether two choices serve the same types and
// operators (Choice.Serves depends on these).
func sameService(a, b Choice) bool {
	return a.Staged == b.Staged && a.Plan.SwitchReduces() == b.Plan.SwitchReduces() &&
		(a.Plan.ServesPreMulSum() == nil) == (b.Plan.ServesPreMulSum() == nil)
}

// match is the index of the first of choices that serves what want
// serves: the same types and operators, and every size want serves (an
// unbounded want needs an unbounded choice); -1 for none.
func match(choices []Choice, want Choice) int {
	for j, ch := range choices {
		if !sameService(ch, want) {
			continue
		}
		if ch.MaxBytes == 0 || (want.MaxBytes > 0 && ch.MaxBytes >= want.MaxBytes) {
			return j
		}
	}
	return -1
}

// covered reports whether an earlier choice of out serves every call ch
// would: the same plan, or one that serves the same types and operators
// and every size ch serves (selection takes the first that serves a call).
func covered(out []Choice, ch Choice) bool {
	for _, o := range out {
		if o.Plan == ch.Plan {
			return true
		}
		if sameService(o, ch) && (o.MaxBytes == 0 || (ch.MaxBytes > 0 && o.MaxBytes >= ch.MaxBytes)) {
			return true
		}
	}
	return false
}

// FitBlocks is Plans (AllReducePlans when zeroCopy) fitted to c.Budget,
// with the plans that keep more blocks than its Max because they cannot
// run with fewer (Clamp). Plans and AllReducePlans fit their choices the
// same way; FitBlocks also says which were clamped, for the communicator
// to log.
func FitBlocks(c Config, coll Collective, root int, zeroCopy bool) ([]Choice, []Clamp, error) {
	build := func(c Config) ([]Choice, error) { return Plans(c, coll, root) }
	if zeroCopy {
		build = AllReducePlans
	}
	return c.fitBlocks(build)
}
