package algorithms_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/check"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/host"
	"github.com/weftccl/weft/hal/plan"
)

// boundedBuilder is one builder of a plan with bounded peers and the
// channels a rank may have with it for n ranks.
type boundedBuilder struct {
	name     string
	coll     algorithms.Collective
	build    func(c algorithms.Config, root int) (*plan.Plan, error)
	maxChans func(n int) int
}

func unrooted(f func(algorithms.Config) (*plan.Plan, error)) func(algorithms.Config, int) (*plan.Plan, error) {
	return func(c algorithms.Config, _ int) (*plan.Plan, error) { return f(c) }
}

func ringChans(n int) int  { return min(2, n-1) }
func treeChans(n int) int  { return min(6, n-1) }
func bruckChans(n int) int { return min(2*bits.Len(uint(n-1)), n-1) }

var boundedBuilders = []boundedBuilder{
	{"ring-ll", algorithms.AllReduce, unrooted(algorithms.RingAllReduceLL), ringChans},
	{"ring-hb", algorithms.AllReduce, unrooted(algorithms.RingAllReduceHB), ringChans},
	{"tree-ll", algorithms.AllReduce, unrooted(algorithms.DoubleTreeAllReduceLL), treeChans},
	{"tree-hb", algorithms.AllReduce, unrooted(algorithms.DoubleTreeAllReduceHB), treeChans},
	{"ring-ll", algorithms.AllGather, unrooted(algorithms.RingAllGatherLL), ringChans},
	{"ring-hb", algorithms.AllGather, unrooted(algorithms.RingAllGatherHB), ringChans},
	{"bruck-ll", algorithms.AllGather, unrooted(algorithms.BruckAllGatherLL), bruckChans},
	{"bruck-hb", algorithms.AllGather, unrooted(algorithms.BruckAllGatherHB), bruckChans},
	{"ring-ll", algorithms.ReduceScatter, unrooted(algorithms.RingReduceScatterLL), ringChans},
	{"ring-hb", algorithms.ReduceScatter, unrooted(algorithms.RingReduceScatterHB), ringChans},
	{"bruck-ll", algorithms.ReduceScatter, unrooted(algorithms.BruckReduceScatterLL), bruckChans},
	{"bruck-hb", algorithms.ReduceScatter, unrooted(algorithms.BruckReduceScatterHB), bruckChans},
	{"chain-ll", algorithms.Broadcast, algorithms.RingBroadcastLL, ringChans},
	{"chain-hb", algorithms.Broadcast, algorithms.RingBroadcastHB, ringChans},
	{"chain-ll", algorithms.Reduce, algorithms.RingReduceLL, ringChans},
	{"chain-hb", algorithms.Reduce, algorithms.RingReduceHB, ringChans},
}

// Every plan with bounded peers validates for 1 to 64 ranks (and 100 and
// 256), names the same plan on every rank, keeps to its channel bound
// (rings 2, trees 6, Bruck 2⌈log2 n⌉, whatever n is), connects only to
// distinct other ranks and uses every channel it has; its GPU kernel
// source generates.
func TestBoundedPlansChannels(t *testing.T) {
	ns := []int{100, 256}
	for n := 1; n <= 64; n++ {
		ns = append(ns, n)
	}
	for _, n := range ns {
		for _, b := range boundedBuilders {
			root := n / 3
			var name string
			for rank := 0; rank < n; rank++ {
				c := algorithms.DefaultConfig(rank, n, 132, true)
				p, err := b.build(c, root)
				if err != nil {
					t.Fatalf("%v %s, rank %d of %d: %v", b.coll, b.name, rank, n, err)
				}
				if rank == 0 {
					name = p.Name
				} else if p.Name != name {
					t.Fatalf("%v %s, %d ranks: rank %d builds %s, rank 0 %s", b.coll, b.name, n, rank, p.Name, name)
				}
				if len(p.Channels) > b.maxChans(n) {
					t.Errorf("%s rank %d of %d: %d channels, want at most %d", p.Name, rank, n, len(p.Channels), b.maxChans(n))
				}
				used := map[int]bool{}
				for _, g := range p.Groups {
					for _, o := range append(append(append([]plan.Op{}, g.Before...), g.Ops...), g.After...) {
						if o.Kind != plan.OpTransfer {
							used[o.Chan] = true
						}
						for _, r := range append(append([]plan.Ref{}, o.Srcs...), o.Dsts...) {
							if r.Remote() {
								used[r.Chan] = true
							}
						}
					}
				}
				peers := map[int]bool{}
				for ci, ch := range p.Channels {
					if ch.Peer == rank || peers[ch.Peer] || !used[ci] {
						t.Errorf("%s rank %d of %d: channel %d to peer %d (duplicate, itself or unused)", p.Name, rank, n, ci, ch.Peer)
					}
					peers[ch.Peer] = true
				}
				if n <= 64 && (rank == 0 || rank == n-1 || rank == root) {
					if _, err := plan.EmitCUDA(p, plan.BFloat16, plan.PreMulSum); err != nil && b.coll.Reduces() {
						t.Errorf("%s rank %d of %d: %v", p.Name, rank, n, err)
					}
					if _, err := plan.EmitCUDA(p, plan.Float32, plan.Sum); err != nil {
						t.Errorf("%s rank %d of %d: %v", p.Name, rank, n, err)
					}
				}
			}
		}
	}
	if _, err := algorithms.BruckAllGatherLL(algorithms.DefaultConfig(0, 257, 132, true)); err == nil {
		t.Error("a Bruck plan of 257 ranks validates; its transfers need more than plan.MaxOperands operands")
	}
}

// The two trees are binary trees over every rank: each rank has one parent
// in each (but the roots, ranks 0 and n−1 or 1), at most two children, its
// parent lists it as a child, every rank reaches the root within
// ⌈log2 n⌉ + 1 hops, and no rank but the roots has children in both.
func TestDoubleTree(t *testing.T) {
	for n := 1; n <= 256; n++ {
		trees := make([][2]algorithms.Tree, n)
		for r := range trees {
			trees[r] = algorithms.DoubleTree(n, r)
		}
		for tt := range 2 {
			roots := 0
			for r := 0; r < n; r++ {
				tr := trees[r][tt]
				if len(tr.Children) > 2 {
					t.Fatalf("n %d tree %d: rank %d has %d children", n, tt, r, len(tr.Children))
				}
				if tr.Parent < 0 {
					roots++
					continue
				}
				found := false
				for _, k := range trees[tr.Parent][tt].Children {
					found = found || k == r
				}
				if !found {
					t.Fatalf("n %d tree %d: rank %d's parent %d does not list it", n, tt, r, tr.Parent)
				}
				hops, at := 0, r
				for trees[at][tt].Parent >= 0 && hops <= n {
					at, hops = trees[at][tt].Parent, hops+1
				}
				if hops > bits.Len(uint(n-1))+1 {
					t.Fatalf("n %d tree %d: rank %d is %d hops from the root", n, tt, r, hops)
				}
			}
			if roots != 1 {
				t.Fatalf("n %d tree %d: %d roots", n, tt, roots)
			}
		}
		for r := 0; r < n && n > 2; r++ {
			if len(trees[r][0].Children) > 0 && len(trees[r][1].Children) > 0 && trees[r][0].Parent >= 0 && trees[r][1].Parent >= 0 {
				t.Errorf("n %d: rank %d is interior in both trees", n, r)
			}
		}
	}
}

// BoundedPlans offers LL, then windowed plans, for the collectives that
// have them, Staged where they reduce; AllToAll has none.
func TestBoundedPlansRanges(t *testing.T) {
	c := algorithms.DefaultConfig(3, 64, 132, true)
	want := map[algorithms.Collective][]string{
		algorithms.AllReduce:     {"all_reduce-tree-LL16", "all_reduce-tree-hb-32x1024-w4194304", "all_reduce-ring-hb-32x1024-w4194304"},
		algorithms.AllGather:     {"all_gather-bruck-LL16", "all_gather-bruck-hb-32x1024-w532608", "all_gather-ring-hb-32x1024-w4194304"},
		algorithms.ReduceScatter: {"reduce_scatter-bruck-LL16", "reduce_scatter-bruck-hb-32x1024-w532608", "reduce_scatter-ring-hb-32x1024-w4194304"},
		algorithms.Broadcast:     {"broadcast-chain-r5-LL16", "broadcast-chain-r5-hb-32x1024-w524288"},
		algorithms.Reduce:        {"reduce-chain-r5-LL16", "reduce-chain-r5-hb-32x1024-w524288"},
	}
	for coll, names := range want {
		cs, err := algorithms.BoundedPlans(c, coll, 5)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for i, ch := range cs {
			got = append(got, ch.Plan.Name)
			if ch.Staged != coll.Reduces() {
				t.Errorf("%s: staged %v", ch.Plan.Name, ch.Staged)
			}
			if last := i == len(cs)-1; last != (ch.MaxBytes == 0) || (i > 0 && !last && ch.MaxBytes <= cs[i-1].MaxBytes) {
				t.Errorf("%v: choice %d (%s) serves up to %d bytes; want growing bounds, the last unbounded", coll, i, ch.Plan.Name, ch.MaxBytes)
			}
			if ch.Plan.MaxBytes > 0 && ch.MaxBytes > ch.Plan.MaxBytes {
				t.Errorf("%s: choice bound %d above the plan's %d", ch.Plan.Name, ch.MaxBytes, ch.Plan.MaxBytes)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(names) {
			t.Errorf("%v: %v, want %v", coll, got, names)
		}
	}
	if _, err := algorithms.BoundedPlans(c, algorithms.AllToAll, 0); !errors.Is(err, algorithms.ErrNoPlan) {
		t.Errorf("AllToAll: %v, want ErrNoPlan", err)
	}
}

// boundedRun runs a sequence of calls of one collective on n ranks of
// hal/host in one process (goroutines, bootstrap.NewLocal), through the
// plans choices gives (each call taking the plan Select picks), with no
// host synchronisation between calls, and checks every output exactly.
type boundedRun struct {
	coll    algorithms.Collective
	n, root int
	t       plan.DataType
	op      plan.RedOp
	counts  []int64
	choices func(c algorithms.Config) ([]algorithms.Choice, error)
	job     string
}

// expected returns, per call, the output each rank must hold (nil: not
// checked), computed once for all ranks.
func (r boundedRun) expected() [][][]byte {
	out := make([][][]byte, len(r.counts))
	es := int64(r.t.Size())
	for i, count := range r.counts {
		out[i] = make([][]byte, r.n)
		switch r.coll {
		case algorithms.AllReduce, algorithms.Reduce:
			w := check.AllReduce(r.t, r.op, r.n, count)
			for rank := range out[i] {
				if r.coll == algorithms.AllReduce || rank == r.root {
					out[i][rank] = w
				}
			}
		case algorithms.ReduceScatter:
			w := check.AllReduce(r.t, r.op, r.n, int64(r.n)*count)
			for rank := range out[i] {
				out[i][rank] = w[int64(rank)*count*es : int64(rank+1)*count*es]
			}
		default:
			w := check.Expected(r.coll, r.t, r.op, r.n, 0, r.root, count)
			for rank := range out[i] {
				out[i][rank] = w
			}
		}
	}
	return out
}

func (r boundedRun) rank(boot bootstrap.Bootstrap, rank int, want [][][]byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a failed rank leaves no one waiting
	defer cancel()
	dev, err := hal.Open(host.Name, hal.Config{Ordinal: rank, JobID: r.job})
	if err != nil {
		return err
	}
	defer dev.Close()
	cs, err := r.choices(algorithms.DefaultConfig(rank, r.n, 2, false))
	if err != nil {
		return err
	}
	es := int64(r.t.Size())
	// Scratch: what the largest call each plan serves needs.
	largest := make([]int64, len(cs))
	for _, count := range r.counts {
		i := algorithms.Select(cs, count*es)
		largest[i] = max(largest[i], count)
	}
	progs := make([]hal.Program, len(cs))
	var all []*channels.Resources
	for i, c := range cs {
		p := c.Plan
		res, err := channels.Setup(ctx, boot, dev, p, p.ScratchBytes(largest[i], int(es)), 0)
		if err != nil {
			return fmt.Errorf("setup %s: %w", p.Name, err)
		}
		defer res.Close()
		all = append(all, res)
		if progs[i], err = dev.(hal.Executor).Prepare(hal.PlanSpec{Plan: p, Bindings: res.Bindings, DataType: r.t, RedOp: r.op}); err != nil {
			return fmt.Errorf("prepare %s: %w", p.Name, err)
		}
		defer progs[i].Close()
	}
	s, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	sendSegs, recvSegs := r.coll.Segments(r.n)
	ins, outs := make([]hal.Buffer, len(r.counts)), make([]hal.Buffer, len(r.counts))
	sentinel := func(i int) []byte { return bytes.Repeat([]byte{0xA5}, int(int64(recvSegs)*r.counts[i]*es)) }
	for i, count := range r.counts {
		if ins[i], err = dev.Alloc(max(int64(sendSegs)*count*es, 16)); err != nil {
			return err
		}
		defer ins[i].Free()
		if outs[i], err = dev.Alloc(max(int64(recvSegs)*count*es, 16)); err != nil {
			return err
		}
		defer outs[i].Free()
		if err := dev.Write(ins[i], 0, check.Send(r.coll, r.t, r.op, r.n, rank, count)); err != nil {
			return err
		}
		if err := dev.Write(outs[i], 0, sentinel(i)); err != nil {
			return err
		}
	}
	const timeout = 60 * time.Second
	for i, count := range r.counts {
		a := &plan.Args{Count: count, Input: ins[i].Addr(), Output: outs[i].Addr(), Timeout: timeout}
		if r.op == plan.PreMulSum {
			a.Scalar = check.PreMulScalar(r.t, rank)
		}
		if err := progs[algorithms.Select(cs, count*es)].Launch(s, a); err != nil {
			return err
		}
	}
	if err := s.Synchronize(time.Now().Add(2 * timeout)); err != nil {
		return err
	}
	for _, res := range all {
		if err := res.Check(); err != nil {
			return err
		}
	}
	for i := range r.counts {
		w := want[i][rank]
		if w == nil {
			w = sentinel(i) // Reduce leaves the others' outputs alone
		}
		got := make([]byte, len(w))
		if err := dev.Read(got, outs[i], 0); err != nil {
			return err
		}
		if wrong := check.Wrong(r.t, got, w); wrong != 0 {
			return fmt.Errorf("call %d (%d elements, plan %s): %d of %d elements wrong", i, r.counts[i],
				cs[algorithms.Select(cs, r.counts[i]*es)].Plan.Name, wrong, len(w)/int(es))
		}
	}
	return nil
}

func (r boundedRun) run(t *testing.T) {
	t.Helper()
	want := r.expected()
	boots := bootstrap.NewLocal(r.n)
	errs := make([]error, r.n)
	var wg sync.WaitGroup
	for rank := 0; rank < r.n; rank++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[rank] = r.rank(boots[rank], rank, want)
		}()
	}
	wg.Wait()
	for rank, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", rank, err)
		}
	}
}

// single offers one builder's plan as the only choice.
func single(b boundedBuilder, root int) func(algorithms.Config) ([]algorithms.Choice, error) {
	return func(c algorithms.Config) ([]algorithms.Choice, error) {
		p, err := b.build(c, root)
		if err != nil {
			return nil, err
		}
		return []algorithms.Choice{{Plan: p, MaxBytes: p.MaxBytes}}, nil
	}
}

// boundedCounts are the counts of a call sequence of builder b on n ranks
// for type t on hal/host's configuration: 1 element, odd counts, an LL
// plan's largest message, and, for windowed plans, counts that cross many
// windows (up to a few MiB per rank where n is small, fewer bytes per
// segment where a rank's buffers hold n segments).
func boundedCounts(b boundedBuilder, p *plan.Plan, n int, t plan.DataType) []int64 {
	es := int64(t.Size())
	if n > 16 {
		// 33 and 64 ranks on two cores: what a large n checks is the step
		// structure (one element, an odd count, one past the LL range or
		// a windowed count); the size sweep runs on fewer ranks.
		if p.MaxBytes > 0 {
			return []int64{1, 7, p.MaxBytes/es/3 + 1}
		}
		return []int64{1, 33, (int64(256<<10)/int64(n))/es + 5}
	}
	if p.MaxBytes > 0 {
		top := p.MaxBytes / es
		return []int64{1, 7, top, top/3 + 1, 1000/es + 3, 2}
	}
	// Windowed plans: hal/host's 16 KiB windows (DefaultConfig), so 768 KiB
	// per rank crosses 48 of them and every scratch slot many times over.
	big := int64(768<<10) / es
	if b.coll == algorithms.AllGather || b.coll == algorithms.ReduceScatter {
		big = (int64(1536<<10) / int64(n)) / es
	} else if n > 8 {
		big = (384 << 10) / es
	}
	return []int64{1, 5, 100<<10/es + 3, big, 33}
}

// Every plan with bounded peers, on 2 to 64 ranks of hal/host in one
// process: consecutive calls of 1 element to 768 KiB with exact results,
// for Sum, Max and PreMulSum (a scalar per rank) on float32, bfloat16,
// int32 and FP8 E4M3, roots at both ends and inside. -short stops at 8
// ranks.
func TestBoundedCollectives(t *testing.T) {
	types := []plan.DataType{plan.Float32, plan.BFloat16, plan.Int32, plan.Float8E4M3}
	ops := []plan.RedOp{plan.Sum, plan.Max, plan.PreMulSum}
	for _, n := range []int{2, 3, 4, 5, 8, 16, 33, 64} {
		if testing.Short() && n > 8 {
			continue
		}
		for bi, b := range boundedBuilders {
			// On 2 ranks every builder meets every type and operator;
			// on more, each builder some of them in turn.
			for ti, typ := range types {
				for oi, op := range ops {
					if !b.coll.Reduces() && oi > 0 {
						continue
					}
					if n > 2 && (ti+oi+bi+n)%len(types) != 0 {
						continue
					}
					if n > 8 && oi != (bi+n)%len(ops) && b.coll.Reduces() {
						continue
					}
					root := []int{0, n - 1, n / 2}[(bi+ti+n)%3]
					cfg := algorithms.DefaultConfig(0, n, 2, false)
					p, err := b.build(cfg, root)
					if err != nil {
						t.Fatal(err)
					}
					counts := boundedCounts(b, p, n, typ)
					name := fmt.Sprintf("n%d/%v/%s/%v/%v/root%d", n, b.coll, b.name, typ, op, root)
					t.Run(name, func(t *testing.T) {
						boundedRun{coll: b.coll, n: n, root: root, t: typ, op: op, counts: counts,
							choices: single(b, root), job: "bounded-" + strings.ReplaceAll(name, "/", "-")}.run(t)
					})
				}
			}
		}
	}
}

// BoundedPlans' choices, one call sequence crossing every size range on
// 3 and 6 ranks: Select moves between the LL, tree or Bruck HB, and ring
// plans from one call to the next without host synchronisation.
func TestBoundedPlansSelected(t *testing.T) {
	for _, n := range []int{3, 6} {
		for _, coll := range []algorithms.Collective{algorithms.AllReduce, algorithms.AllGather, algorithms.ReduceScatter, algorithms.Broadcast, algorithms.Reduce} {
			cfg := algorithms.DefaultConfig(0, n, 2, false)
			cs, err := algorithms.BoundedPlans(cfg, coll, 1)
			if err != nil {
				t.Fatal(err)
			}
			var counts []int64
			for i, c := range cs {
				if i < len(cs)-1 {
					counts = append(counts, c.MaxBytes/4, c.MaxBytes/4-3)
				} else {
					counts = append(counts, cs[i-1].MaxBytes/4+5)
				}
			}
			counts = append(counts, 1, counts[0])
			op := plan.Sum // collectives that do not reduce run with Sum (plan/premul.go)
			if coll.Reduces() {
				op = plan.PreMulSum
			}
			name := fmt.Sprintf("n%d/%v", n, coll)
			t.Run(name, func(t *testing.T) {
				boundedRun{coll: coll, n: n, root: 1, t: plan.Float32, op: op, counts: counts,
					choices: func(c algorithms.Config) ([]algorithms.Choice, error) { return algorithms.BoundedPlans(c, coll, 1) },
					job:     "bounded-sel-" + strings.ReplaceAll(name, "/", "-")}.run(t)
			})
		}
	}
}

// Avg of integer types on every reducing plan with bounded peers, on 3, 5
// and 16 ranks of hal/host (sums that do not divide evenly, signed inputs
// negative as often as positive): each plan divides once, at its final
// step (plan.Op.PostDiv), truncating toward zero as NCCL's SumPostDiv and
// check.AllReduce do; an LL plan's largest message and windowed counts
// that cross several windows, in one call sequence.
func TestBoundedIntegerAvg(t *testing.T) {
	types := []plan.DataType{plan.Int32, plan.Int8, plan.Uint64, plan.Int64}
	for _, n := range []int{3, 5, 16} {
		if testing.Short() && n > 8 {
			continue
		}
		for bi, b := range boundedBuilders {
			if !b.coll.Reduces() {
				continue
			}
			typ := types[(bi+n)%len(types)]
			root := []int{0, n - 1, n / 2}[(bi+n)%3]
			p, err := b.build(algorithms.DefaultConfig(0, n, 2, false), root)
			if err != nil {
				t.Fatal(err)
			}
			if !p.PostDiv {
				t.Fatalf("%s: does not declare PostDiv", p.Name)
			}
			es := int64(typ.Size())
			counts := []int64{1, 7, 5000/es + 3}
			if p.MaxBytes > 0 {
				counts = []int64{1, 7, p.MaxBytes / es}
			} else if b.coll != algorithms.ReduceScatter || n < 16 {
				counts = append(counts, (48<<10)/es+1)
			}
			name := fmt.Sprintf("n%d/%v/%s/%v/root%d", n, b.coll, b.name, typ, root)
			t.Run(name, func(t *testing.T) {
				boundedRun{coll: b.coll, n: n, root: root, t: typ, op: plan.Avg, counts: counts,
					choices: func(c algorithms.Config) ([]algorithms.Choice, error) {
						p, err := b.build(c, root)
						if err != nil {
							return nil, err
						}
						ch := algorithms.Choice{Plan: p, MaxBytes: p.MaxBytes, Staged: true}
						if !ch.Serves(typ, plan.Avg) || ch.Serves(plan.Float32, plan.Avg) {
							return nil, fmt.Errorf("%s: serves integer Avg %v, float Avg %v; want true, false", p.Name,
								ch.Serves(typ, plan.Avg), ch.Serves(plan.Float32, plan.Avg))
						}
						return []algorithms.Choice{ch}, nil
					},
					job: "bounded-avg-" + strings.ReplaceAll(name, "/", "-")}.run(t)
			})
		}
	}
}

// BoundedPlans gives the tree AllReduce messages up to TreeMaxBytes(n),
// which grows with n (the ring's latency grows as 2(n−1), the tree's as
// 2⌈log2 n⌉) and follows the simulator's table between its entries.
func TestTreeMaxBytesByRanks(t *testing.T) {
	prev := int64(0)
	for _, n := range []int{9, 16, 24, 100, 128, 1000, 1024, 4096, 16384} {
		b := algorithms.TreeMaxBytes(n)
		if b < prev || b%4096 != 0 {
			t.Errorf("%d ranks: tree up to %d bytes after %d (want growing multiples of 4 KiB)", n, b, prev)
		}
		prev = b
		cs, err := algorithms.BoundedPlans(algorithms.DefaultConfig(0, n, 132, true), algorithms.AllReduce, 0)
		if err != nil {
			t.Fatal(err)
		}
		if cs[1].MaxBytes != b || !strings.Contains(cs[1].Plan.Name, "tree") || !strings.Contains(cs[2].Plan.Name, "ring") {
			t.Errorf("%d ranks: %s up to %d bytes, then %s; want the tree up to %d", n, cs[1].Plan.Name, cs[1].MaxBytes, cs[2].Plan.Name, b)
		}
	}
	if a, b := algorithms.TreeMaxBytes(128), algorithms.TreeMaxBytes(1024); a != 2696<<10 || b != 15852<<10 {
		t.Errorf("table entries: 128 ranks %d, 1024 ranks %d bytes; want 2696 KiB and 15852 KiB", a, b)
	}
}
