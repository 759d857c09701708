package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"reflect"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal/plan"
)

// SMs is the multiprocessor count the plans are shaped for
// (algorithms.DefaultConfig): H100 and H200 SXM have 132.
const SMs = 132

// Row is the prediction for one message size, as a row of nccl-tests:
// Bytes is nccl-tests' size (AllGather: the n×count output, ReduceScatter:
// the n×count input), Count the elements per rank (algorithms.Collective.
// Segments), TimeUs the time of one call, AlgBW = Bytes / time and BusBW =
// AlgBW × the collective's bus factor, in GB/s. Simulated is the number of
// ranks the engine executed (fewer than the cluster's where the plans are
// translation-symmetric), Ops the number of ops it executed.
type Row struct {
	Bytes, Count         int64
	Plan                 string
	TimeUs, AlgBW, BusBW float64
	Simulated, Ops       int
}

// Predictor predicts one family's collective on one cluster.
type Predictor struct {
	Cluster Cluster
	Family  Family
	Coll    algorithms.Collective
	Type    plan.DataType

	n, g   int
	nodes  []int
	period int
	// choices are the plans of ranks 0 … period−1 (one node's when the
	// cluster has several); sym[i] reports whether choice i is
	// translation-symmetric (the plans of r and r+G agree up to the shift
	// of every peer by G), so that those ranks represent all. full[i]
	// holds every rank's plan of a choice that is not, built when a size
	// first selects it (Family.Choice builds that plan alone).
	choices [][]algorithms.Choice
	sym     []bool
	full    map[int][]*plan.Plan
}

// NewPredictor builds the plans of the representative ranks. Errors wrap
// ErrInvalid for a bad cluster, or are the family's when it does not apply.
func NewPredictor(cl Cluster, fam Family, coll algorithms.Collective, dt plan.DataType) (*Predictor, error) {
	if err := cl.Validate(); err != nil {
		return nil, err
	}
	if !dt.Valid() {
		return nil, fmt.Errorf("sim: data type %v: %w", dt, ErrInvalid)
	}
	p := &Predictor{Cluster: cl, Family: fam, Coll: coll, Type: dt, n: cl.GPUs(), g: cl.GPUsPerNode, full: map[int][]*plan.Plan{}}
	if cl.Nodes > 1 {
		p.nodes = make([]int, p.n)
		for r := range p.nodes {
			p.nodes[r] = r / p.g
		}
	}
	p.period = p.n
	if cl.Nodes > 1 {
		sym, err := p.symmetric()
		if err != nil {
			return nil, err
		}
		p.sym, p.period = sym, p.g
	}
	for r := len(p.choices); r < p.period; r++ {
		cs, err := p.build(r)
		if err != nil {
			return nil, err
		}
		p.choices = append(p.choices, cs)
	}
	return p, nil
}

// config is rank's configuration as a communicator on the modelled
// cluster takes it: GPUs on NVLink, so the wide LL plans on LL128 lines
// (algorithms.Config.WithLL128).
func (p *Predictor) config(rank int) algorithms.Config {
	c := algorithms.DefaultConfig(rank, p.n, SMs, true).WithLL128(true)
	c.Nodes = p.nodes
	return c
}

func (p *Predictor) build(rank int) ([]algorithms.Choice, error) {
	c := p.config(rank)
	cs, err := p.Family.Build(c, p.Coll)
	if err != nil {
		return nil, fmt.Errorf("sim: family %s, %v, rank %d of %d: %w", p.Family.Name, p.Coll, rank, p.n, err)
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("sim: family %s has no %v plan: %w", p.Family.Name, p.Coll, ErrInvalid)
	}
	return cs, nil
}

// symmetric reports, for each choice, whether the plans of rank r and r+G
// are the same up to the shift of every peer by G (chunk and segment
// indices, which only place the data, aside), for the ranks of the first
// node: then every node behaves as the first, and one node's ranks
// represent all. It keeps the first node's choices.
func (p *Predictor) symmetric() ([]bool, error) {
	var sym []bool
	for r := 0; r < p.g; r++ {
		a, err := p.build(r)
		if err != nil {
			return nil, err
		}
		p.choices = append(p.choices, a)
		b, err := p.build(r + p.g)
		if err != nil {
			return nil, err
		}
		if len(a) != len(b) || len(a) != len(p.choices[0]) {
			return nil, fmt.Errorf("sim: family %s gives rank %d %d %v plans, rank %d %d and rank 0 %d: %w",
				p.Family.Name, r, len(a), p.Coll, r+p.g, len(b), len(p.choices[0]), ErrInvalid)
		}
		if sym == nil {
			sym = make([]bool, len(a))
			for i := range sym {
				sym[i] = true
			}
		}
		for i := range a {
			sym[i] = sym[i] && shifted(a[i].Plan, b[i].Plan, p.g, p.n) && a[i].MaxBytes == b[i].MaxBytes
		}
	}
	return sym, nil
}

// fullRanksMax bounds the ranks whose plans of a translation-symmetric
// family are all built when the symmetry does not hold for a size
// (evenChunks): a ring's plan has O(n) ops, so n plans cost O(n²).
const fullRanksMax = 1024

// ErrNotSimulated is wrapped by Predict for a size the engine cannot
// represent at the cluster's scale (see fullRanksMax); the other sizes of
// the table still are.
var ErrNotSimulated = errors.New("not simulated")

// evenChunks reports whether every chunked transfer of p splits count
// elements of esize bytes into chunks of one size (plan.ChunkRange rounds
// chunks up to plan.AlignBytes, so the last ones may be short or empty).
func evenChunks(p *plan.Plan, count int64, esize int) bool {
	for _, g := range p.Groups {
		for _, ops := range [][]plan.Op{g.Ops, g.After} {
			for _, o := range ops {
				if o.Kind != plan.OpTransfer || o.Chunk == plan.All || o.NChunks < 2 {
					continue
				}
				_, first := plan.ChunkRange(count, esize, 0, o.NChunks)
				_, last := plan.ChunkRange(count, esize, o.NChunks-1, o.NChunks)
				if first != last {
					return false
				}
			}
		}
	}
	return true
}

// fullPlans returns every rank's plan of choice i, built on first use.
func (p *Predictor) fullPlans(i int) ([]*plan.Plan, error) {
	if pl, ok := p.full[i]; ok {
		return pl, nil
	}
	out := make([]*plan.Plan, p.n)
	for r := range out {
		if r < len(p.choices) {
			out[r] = p.choices[r][i].Plan
			continue
		}
		ch, err := p.Family.choice(p.config(r), p.Coll, i)
		if err != nil {
			return nil, fmt.Errorf("sim: family %s, %v, rank %d of %d: %w", p.Family.Name, p.Coll, r, p.n, err)
		}
		out[r] = ch.Plan
	}
	p.full[i] = out
	return out, nil
}

func shifted(a, b *plan.Plan, shift, n int) bool {
	if len(a.Channels) != len(b.Channels) || a.Name != b.Name {
		return false
	}
	for i, c := range a.Channels {
		if b.Channels[i].Port != c.Port || b.Channels[i].Peer != (c.Peer+shift)%n {
			return false
		}
	}
	return reflect.DeepEqual(placeless(a.Groups), placeless(b.Groups))
}

// placeless copies groups with every chunk index and segment set to 0.
func placeless(gs []plan.Group) []plan.Group {
	out := make([]plan.Group, len(gs))
	for i, g := range gs {
		g.Ops, g.After = placelessOps(g.Ops), placelessOps(g.After)
		out[i] = g
	}
	return out
}

func placelessOps(ops []plan.Op) []plan.Op {
	out := make([]plan.Op, len(ops))
	for i, o := range ops {
		if o.Chunk != plan.All {
			o.Chunk = 0
		}
		o.Srcs, o.Dsts = placelessRefs(o.Srcs), placelessRefs(o.Dsts)
		out[i] = o
	}
	return out
}

func placelessRefs(rs []plan.Ref) []plan.Ref {
	out := make([]plan.Ref, len(rs))
	for i, r := range rs {
		r.Seg = 0
		out[i] = r
	}
	return out
}

// Representatives is the number of ranks the engine executes for the
// translation-symmetric choices (one node's on a cluster of several);
// a choice that is not symmetric runs every rank (Row.Simulated).
func (p *Predictor) Representatives() int { return p.period }

// Predict returns the row for a message of bytes (nccl-tests' size); ok
// is false when the size gives less than one element per rank.
func (p *Predictor) Predict(bytes int64) (Row, bool, error) {
	es := int64(p.Type.Size())
	send, recv := p.Coll.Segments(p.n)
	count := bytes / es / int64(max(send, recv))
	if count < 1 {
		return Row{}, false, nil
	}
	idx := algorithms.Select(p.choices[0], count*es)
	period := p.period
	plans := make([]*plan.Plan, 0, p.n)
	sym := period == p.n || p.sym[idx]
	if sym && period < p.n && !evenChunks(p.choices[0][idx].Plan, count, int(es)) {
		// Chunks of different sizes break the translation symmetry (a
		// ring of n chunks with fewer than n·16 bytes has empty ones: rank
		// r and r+G then move different data at different times).
		if p.n > fullRanksMax {
			return Row{}, false, fmt.Errorf("sim: %s at %d bytes on %d ranks: chunks of unequal size, so one node cannot represent the others, and a run of every rank builds %d plans (more than %d): %w",
				p.choices[0][idx].Plan.Name, bytes, p.n, p.n, fullRanksMax, ErrNotSimulated)
		}
		sym = false
	}
	if sym {
		for rank := 0; rank < period; rank++ {
			plans = append(plans, p.choices[rank][min(idx, len(p.choices[rank])-1)].Plan)
		}
	} else {
		all, err := p.fullPlans(idx)
		if err != nil {
			return Row{}, false, err
		}
		plans, period = all, p.n
	}
	cl := p.Cluster
	r := &run{cl: &cl, p: &cl.Model, n: p.n, g: p.g, period: period, esize: int(es), count: count,
		resIdx: map[resKey]int{}, boxes: map[sigKey]*mailbox{}, pkts: map[sigKey]*mailbox{}, engs: map[[2]int]*engine{}}
	heap.Init(&r.q)
	blocks := 0
	var name string
	for rank, pl := range plans {
		name = pl.Name
		blocks = max(blocks, pl.Blocks())
		r.plans = append(r.plans, pl)
		for gi := range pl.Groups {
			g := &pl.Groups[gi]
			if g.Arg != 0 {
				continue
			}
			r.actors = append(r.actors, &actor{rank: rank, pl: pl, g: g, nwin: g.Windows(count, int(es)), waits: map[sigKey]int{}})
		}
	}
	t, err := r.execute()
	if err != nil {
		return Row{}, false, fmt.Errorf("%s, %d bytes: %w", name, bytes, err)
	}
	t += cl.Model.LaunchUs + cl.Model.BlockUs*float64(blocks)
	size := count * es * int64(max(send, recv))
	alg := float64(size) / t / 1e3
	return Row{Bytes: size, Count: count, Plan: name, TimeUs: t, AlgBW: alg, BusBW: alg * p.Coll.BusFactor(p.n),
		Simulated: period, Ops: r.ops}, true, nil
}

// Sizes returns min, min·factor, … up to max (bytes).
func Sizes(min, max, factor int64) []int64 {
	var out []int64
	for b := min; b <= max && b > 0; b *= factor {
		out = append(out, b)
		if factor < 2 {
			break
		}
	}
	return out
}
