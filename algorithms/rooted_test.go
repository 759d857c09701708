package algorithms_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
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

// The LL Broadcast and Reduce end with no wait: the writers (the root of
// Broadcast, the others in Reduce) start with one two-credit Ack wait per
// channel they write to, and the readers start each run with a release to
// each writer of the half their previous run read (deferred signals, none
// in the first run) and send nothing at their end. The generated kernel
// passes the credits and skips the first run's releases.
func TestRootedLLCreditsAtStart(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5} {
		for _, root := range []int{0, n - 1} {
			for rank := 0; rank < n; rank++ {
				cfg := algorithms.DefaultConfig(rank, n, 132, true)
				for _, b := range []struct {
					coll   algorithms.Collective
					build  func(algorithms.Config, int) (*plan.Plan, error)
					writer bool
				}{
					{algorithms.Broadcast, algorithms.BroadcastLL, rank == root},
					{algorithms.Broadcast, algorithms.BroadcastLLWide, rank == root},
					{algorithms.Reduce, algorithms.ReduceLL, rank != root},
					{algorithms.Reduce, algorithms.ReduceLLWide, rank != root},
				} {
					p, err := b.build(cfg, root)
					if err != nil {
						t.Fatalf("%v n%d rank %d root %d: %v", b.coll, n, rank, root, err)
					}
					ops := p.Groups[0].Ops
					last := ops[len(ops)-1]
					var credits []plan.Op
					for _, o := range ops {
						if o.Kind == plan.OpWait {
							credits = append(credits, o)
						}
					}
					where := fmt.Sprintf("%s rank %d", p.Name, rank)
					peers := 1 // a Reduce writer and a Broadcast reader have one peer: the root
					if (b.coll == algorithms.Broadcast) == b.writer {
						peers = n - 1
					}
					if b.writer {
						if len(credits) != peers || last.Kind != plan.OpTransfer {
							t.Errorf("%s (writer): %d waits, last op %s; want %d credit waits and a transfer last", where, len(credits), p.OpString(last), peers)
						}
						for i := range credits {
							if o := ops[i]; o.Kind != plan.OpWait || !o.Ack || o.Credits != 2 {
								t.Errorf("%s: op %d is %s (ack %v, credits %d); want the credit waits first, Ack, 2 credits", where, i, p.OpString(o), o.Ack, o.Credits)
							}
						}
						src, err := plan.EmitCUDA(p, plan.Float32, plan.Sum)
						if err != nil {
							t.Fatal(err)
						}
						if !strings.Contains(src, fmt.Sprintf("wait_credits<%d>(c, chs, 0, 2)", peers)) {
							t.Errorf("%s: generated source passes no credits to its wait", where)
						}
						// The credit wait counts every run, the first included
						// (its Deferred flag only says what it counts).
						if strings.Contains(src, "c.launch >= 1") {
							t.Errorf("%s: generated source skips the credit wait in the first run", where)
						}
					} else {
						// The reader releases the previous run's half at the
						// start of each run (plan.Op.Deferred), not at its end.
						releases := 0
						for _, o := range p.Groups[0].Before {
							if o.Kind == plan.OpSignal && o.Deferred {
								releases++
							}
						}
						signals := 0
						for _, o := range ops {
							if o.Kind == plan.OpSignal {
								signals++
							}
						}
						if len(credits) != 0 || signals != 0 || releases != peers || len(p.Groups[0].Before) != peers {
							t.Errorf("%s (reader): %d waits, %d signals among its ops, %d deferred releases of %d ops before; want none, none and %d of %d", where, len(credits), signals, releases, len(p.Groups[0].Before), peers, peers)
						}
						src, err := plan.EmitCUDA(p, plan.Float32, plan.Sum)
						if err != nil {
							t.Fatal(err)
						}
						if !strings.Contains(src, "if (c.launch >= 1) ") {
							t.Errorf("%s: generated source releases in the first run too", where)
						}
					}
				}
			}
		}
	}
}

// Credits are refused where they cannot mean anything.
func TestCreditsValidate(t *testing.T) {
	p, err := algorithms.BroadcastLL(algorithms.DefaultConfig(0, 2, 132, true), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, mut := range []func(o *plan.Op){
		func(o *plan.Op) { o.Ack = false },
		func(o *plan.Op) { o.Credits = plan.MaxCredits + 1 },
		func(o *plan.Op) { o.Credits = -1 },
		func(o *plan.Op) { o.Kind = plan.OpSignal },
	} {
		q := *p
		q.Groups = []plan.Group{p.Groups[0]}
		q.Groups[0].Ops = append([]plan.Op(nil), p.Groups[0].Ops...)
		mut(&q.Groups[0].Ops[0])
		if err := q.Validate(); err == nil {
			t.Errorf("%s validates; want an error", q.OpString(q.Groups[0].Ops[0]))
		}
	}
}

// Broadcast and Reduce take the narrow LL plan up to RootedWideMinBytes,
// the wide one up to RootedLLMaxBytes (1 MiB / (n−1), a power of two, on
// GPUs; 2 MiB / (n−1) from 4 ranks), from 3 ranks the split LL Broadcast
// to BroadcastSplitLLMaxBytes, the windowed plan with RootedHB's blocks beyond, its window as
// large as 64 MiB of scratch allows (2·(n−1) windows), from 4 to 16 MiB, but on 3 to 5 ranks
// 4 MiB windows four deep (no more scratch than two deep).
func TestRootedSelection(t *testing.T) {
	// Beyond the LL bounds the all-pairs windowed plan with the rooted
	// shape; from 3 ranks and RootedSplitMinBytes the split plan, with half the
	// rooted shape's blocks per group.
	for _, tc := range []struct {
		n      int
		wide   int64
		window string
	}{{2, 1 << 20, "16777216"}, {3, 512 << 10, "4194304-d4"}, {4, 512 << 10, "4194304-d4"}, {5, 512 << 10, "4194304-d4"}, {8, 256 << 10, "4194304"}} {
		for _, coll := range []algorithms.Collective{algorithms.Broadcast, algorithms.Reduce} {
			cfg := algorithms.DefaultConfig(0, tc.n, 132, true)
			cs, err := algorithms.Plans(cfg, coll, tc.n-1)
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%s-r%d", coll, tc.n-1)
			hb := fmt.Sprintf("%s-hb-128x512-w%s", name, tc.window)
			large := hb
			if tc.n >= algorithms.SplitMinRanks {
				// Half the rooted blocks per group; up to 4 ranks the
				// Broadcast root's group per owner holds 128/(n−1).
				blocks := 64
				if coll == algorithms.Broadcast && tc.n <= 4 {
					blocks = min(blocks, 128/(tc.n-1))
				}
				large = fmt.Sprintf("%s-split-r%d-hb-%dx512-w%s", coll, tc.n-1, blocks, tc.window)
			}
			cases := []struct {
				bytes int64
				want  string
			}{
				{8, name + "-LL16"}, {64 << 10, name + "-LL16"}, {64<<10 + 16, name + "-LL16-32x1024"},
				{tc.wide, name + "-LL16-32x1024"}, {tc.wide + 16, hb}, {cfg.RootedSplitMinBytes - 16, hb},
				{cfg.RootedSplitMinBytes, large}, {512 << 20, large},
			}
			if tc.n >= algorithms.SplitMinRanks && coll == algorithms.Broadcast {
				// The split LL Broadcast above the LL bound, to 2 MiB.
				splitLL := fmt.Sprintf("broadcast-split-r%d-LL16-32x1024", tc.n-1)
				cases[4].want = splitLL
				cases = append(cases, struct {
					bytes int64
					want  string
				}{2 << 20, splitLL}, struct {
					bytes int64
					want  string
				}{2<<20 + 16, hb})
			}
			for _, s := range cases {
				if got := cs[algorithms.Select(cs, s.bytes)].Plan.Name; got != s.want {
					t.Errorf("%d ranks, %v of %d bytes: %s, want %s", tc.n, coll, s.bytes, got, s.want)
				}
			}
		}
	}
	// WEFT_ALGO=ll keeps both LL plans, hb the windowed one alone.
	cfg := algorithms.DefaultConfig(1, 2, 132, true)
	for algo, want := range map[string][]string{
		"ll": {"broadcast-r0-LL16", "broadcast-r0-LL16-32x1024"},
		"hb": {"broadcast-r0-hb-128x512-w16777216"},
	} {
		cfg.Algo = algo
		cs, err := algorithms.Plans(cfg, algorithms.Broadcast, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range cs {
			got = append(got, c.Plan.Name)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("WEFT_ALGO=%s (-want +got):\n%s", algo, d)
		}
	}
}

// AllReduce through Launch (the NCCL API's scratch path) has no cliff
// between 64 KiB and 4 MiB: the zero-copy path's 1PA tiers, then the wide
// 1PA up to ScratchLLMaxBytes (2 MiB / (n−1)), from 4 ranks the two-phase
// LL plan up to ScratchLL2PAMaxBytes, and the windowed plan only beyond. Tiers from WEFT_ALLREDUCE or a tuning file shape the scratch
// path's LL tiers too.
func TestAllReduceScratchSelection(t *testing.T) {
	for _, tc := range []struct {
		n      int
		tiers  string
		wantLL []string // plan per LL bound, in order
		bounds []int64
	}{
		{2, "", []string{"allreduce-1pa-LL16-8x1024", "allreduce-1pa-LL16-32x1024"}, []int64{128 << 10, 2 << 20}},
		{3, "", []string{"allreduce-1pa-LL16-8x1024", "allreduce-1pa-LL16-32x1024"}, []int64{128 << 10, 1 << 20}},
		// From 4 ranks the two-phase LL plan up to ScratchLL2PAMaxBytes.
		{4, "", []string{"allreduce-1pa-LL16-8x1024", "allreduce-1pa-LL16-32x1024", "all_reduce-2pa-LL16-32x1024"}, []int64{128 << 10, 512 << 10, 1 << 20}},
		{2, "1pa-LL16-1x1024@4K,1pa-LL8-8x512@128K,2pa-64x1024-u4@16M,2pa-128x512-u2",
			[]string{"allreduce-1pa-LL16-1x1024", "allreduce-1pa-LL8-8x512", "allreduce-1pa-LL16-32x1024"}, []int64{4 << 10, 128 << 10, 2 << 20}},
		// A last 1PA tier with the wide shape is widened, not doubled.
		{2, "1pa-LL16-32x1024@256K,2pa-64x1024-u4", []string{"allreduce-1pa-LL16-32x1024"}, []int64{2 << 20}},
		// A 1PA tier above ScratchLLMaxBytes keeps its bound.
		{2, "1pa-LL16-16x1024@4M,2pa-64x1024-u4", []string{"allreduce-1pa-LL16-16x1024"}, []int64{4 << 20}},
	} {
		t.Run(fmt.Sprintf("n%d-%s", tc.n, tc.tiers), func(t *testing.T) {
			cfg := algorithms.DefaultConfig(0, tc.n, 132, true)
			if tc.tiers != "" {
				tiers, err := algorithms.ParseTiers(tc.tiers)
				if err != nil {
					t.Fatal(err)
				}
				cfg.AllReduce = tiers
			}
			cs, err := algorithms.Plans(cfg, algorithms.AllReduce, 0)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			var bounds []int64
			ll := cs[:len(cs)-1]
			if tc.n >= 3 {
				ll = cs[:len(cs)-2] // the all-pairs windowed plan and the ring
			}
			for _, c := range ll {
				names, bounds = append(names, c.Plan.Name), append(bounds, c.MaxBytes)
			}
			if d := cmp.Diff(tc.wantLL, names); d != "" {
				t.Errorf("LL plans (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.bounds, bounds); d != "" {
				t.Errorf("LL bounds (-want +got):\n%s", d)
			}
			hb, hbMax := cs[len(cs)-1], int64(0)
			if tc.n >= 3 {
				// From RingMinBytes the windowed ring.
				if hb.MaxBytes != 0 || !strings.HasPrefix(hb.Plan.Name, "all_reduce-ring-hb-") {
					t.Errorf("last plan %s (bound %d); want the windowed ring, unbounded", hb.Plan.Name, hb.MaxBytes)
				}
				cs, hbMax = cs[:len(cs)-1], cfg.RingMinBytes-1
				hb = cs[len(cs)-1]
			}
			if hb.MaxBytes != hbMax || !strings.HasPrefix(hb.Plan.Name, "all_reduce-hb-") {
				t.Errorf("windowed plan %s (bound %d); want the all-pairs windowed plan up to %d", hb.Plan.Name, hb.MaxBytes, hbMax)
			}
			top := bounds[len(bounds)-1]
			for b := int64(64 << 10); b <= 4<<20; b *= 2 {
				for _, bytes := range []int64{b - 16, b, b + 16} {
					c := cs[algorithms.Select(cs, bytes)]
					if isLL := c.Plan.Scratch != plan.Simple; isLL != (bytes <= top) {
						t.Errorf("%d bytes: %s; want LL exactly up to %d bytes", bytes, c.Plan.Name, top)
					}
					if c.Plan.MaxBytes != 0 && bytes > c.Plan.MaxBytes {
						t.Errorf("%d bytes: %s serves at most %d", bytes, c.Plan.Name, c.Plan.MaxBytes)
					}
				}
			}
		})
	}
}

// rootedRun is one rank's side of a sequence of Broadcast or Reduce calls
// through every plan Plans offers (set up as a communicator sets them up,
// each call taking the plan Select picks), with no host synchronisation
// between calls.
type rootedRun struct {
	coll   algorithms.Collective
	n      int
	root   int
	t      plan.DataType
	op     plan.RedOp
	counts []int64
	// delayReaders: the readers (Broadcast's peers, Reduce's root) enqueue
	// their calls this long after the writers, so a writer without flow
	// control would overwrite scratch halves not yet read.
	delayReaders time.Duration
	// graph: capture the calls into a graph and replay it (twice back to
	// back, after one checked replay) instead of launching them directly.
	graph bool
	// strip removes the credit waits from the LL plans (the test that
	// shows the delayed readers would otherwise be overrun).
	strip   bool
	timeout time.Duration
	job     string
}

// input is what rank sends in call i: Broadcast sends a different stream
// per call (as if from rank i), Reduce the checked inputs of its count.
func (r rootedRun) input(rank, i int) []byte {
	if r.coll == algorithms.Broadcast {
		return check.Input(r.t, plan.Sum, i%5, r.counts[i])
	}
	return check.Send(r.coll, r.t, r.op, r.n, rank, r.counts[i])
}

func (r rootedRun) want(rank, i int) []byte {
	if r.coll == algorithms.Broadcast {
		return r.input(r.root, i)
	}
	return check.Expected(r.coll, r.t, r.op, r.n, rank, r.root, r.counts[i])
}

func stripCredits(p *plan.Plan) *plan.Plan {
	q := *p
	q.Groups = nil
	for _, g := range p.Groups {
		var ops []plan.Op
		for _, o := range g.Ops {
			if o.Credits == 0 {
				ops = append(ops, o)
			}
		}
		g.Ops = ops
		q.Groups = append(q.Groups, g)
	}
	return &q
}

func (r rootedRun) rank(boot bootstrap.Bootstrap, rank int) error {
	// A deadline on the set-up exchanges: a rank that fails before them
	// must not leave the others waiting for it.
	ctx, cancel := context.WithTimeout(context.Background(), 6*r.timeout)
	defer cancel()
	dev, err := hal.Open(host.Name, hal.Config{Ordinal: rank, JobID: r.job})
	if err != nil {
		return err
	}
	defer dev.Close()
	cfg := algorithms.DefaultConfig(rank, r.n, 2, false)
	cs, err := algorithms.Plans(cfg, r.coll, r.root)
	if err != nil {
		return err
	}
	es := int64(r.t.Size())
	progs := make([]hal.Program, len(cs))
	var all []*channels.Resources
	for i, c := range cs {
		p := c.Plan
		if r.strip {
			p = stripCredits(p)
		}
		scratch := p.ScratchBytes(0, 1)
		if !p.Windowed() && c.MaxBytes > 0 {
			scratch = p.ScratchBytes(c.MaxBytes/es, int(es))
		}
		res, err := channels.Setup(ctx, boot, dev, p, scratch, 0)
		if err != nil {
			return fmt.Errorf("setup %s: %w", p.Name, err)
		}
		defer res.Close()
		all = append(all, res)
		op := r.op
		if op == plan.Avg && r.t.Float() && !c.Serves(r.t, op) {
			op = plan.PreMulSum // a staged plan runs a floating Avg so, as Comm.Launch does (runOp)
		}
		if progs[i], err = dev.(hal.Executor).Prepare(hal.PlanSpec{Plan: p, Bindings: res.Bindings, DataType: r.t, RedOp: op}); err != nil {
			return err
		}
		defer progs[i].Close()
	}
	s, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	ins, outs := make([]hal.Buffer, len(r.counts)), make([]hal.Buffer, len(r.counts))
	sentinel := func(i int) []byte { return bytes.Repeat([]byte{0xA5}, int(r.counts[i]*es)) }
	for i, count := range r.counts {
		if ins[i], err = dev.Alloc(max(count*es, 16)); err != nil {
			return err
		}
		defer ins[i].Free()
		if outs[i], err = dev.Alloc(max(count*es, 16)); err != nil {
			return err
		}
		defer outs[i].Free()
		if err := dev.Write(ins[i], 0, r.input(rank, i)); err != nil {
			return err
		}
		if err := dev.Write(outs[i], 0, sentinel(i)); err != nil {
			return err
		}
	}
	writer := (rank == r.root) == (r.coll == algorithms.Broadcast)
	if !writer {
		time.Sleep(r.delayReaders)
	}
	var scalar uint64
	if r.op == plan.Avg && r.t.Float() {
		scalar = plan.AvgScalar(r.t, r.n) // as Comm.Launch passes it
	}
	launchAll := func() error {
		for i, count := range r.counts {
			prog := progs[algorithms.Select(cs, count*es)]
			if err := prog.Launch(s, &plan.Args{Count: count, Input: ins[i].Addr(), Output: outs[i].Addr(), Timeout: r.timeout, Scalar: scalar}); err != nil {
				return err
			}
		}
		return nil
	}
	verify := func(what string) error {
		if err := s.Synchronize(time.Now().Add(4 * r.timeout)); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		for _, res := range all {
			if err := res.Check(); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
		}
		for i := range r.counts {
			want := r.want(rank, i)
			if want == nil {
				want = sentinel(i) // Reduce leaves the others' outputs alone
			}
			got := make([]byte, len(want))
			if err := dev.Read(got, outs[i], 0); err != nil {
				return err
			}
			// Exact, bit for bit, but for floating Avg, whose check allows
			// the rounding of 1/n (check.Wrong).
			ok := bytes.Equal(got, want)
			if r.op == plan.Avg && r.want(rank, i) != nil {
				ok = check.Wrong(r.t, got, want) == 0
			}
			if !ok {
				return fmt.Errorf("%s: call %d (%d elements, plan %s): %d wrong elements", what, i, r.counts[i],
					cs[algorithms.Select(cs, r.counts[i]*es)].Plan.Name, max(check.Wrong(r.t, got, want), 1))
			}
		}
		return nil
	}
	if !r.graph {
		if err := launchAll(); err != nil {
			return err
		}
		return verify("consecutive calls")
	}
	gc := dev.(hal.GraphCapturer)
	if err := gc.BeginCapture(s); err != nil {
		return err
	}
	if err := launchAll(); err != nil {
		return err
	}
	g, err := gc.EndCapture(s)
	if err != nil {
		return err
	}
	defer g.Close()
	if err := g.Launch(s); err != nil {
		return err
	}
	if err := verify("first replay"); err != nil {
		return err
	}
	for i := range r.counts {
		if err := dev.Write(outs[i], 0, sentinel(i)); err != nil {
			return err
		}
	}
	// Every rank has cleared its outputs before anyone replays again.
	bctx, cancel := context.WithTimeout(ctx, 4*r.timeout)
	defer cancel()
	if err := boot.Barrier(bctx); err != nil {
		return err
	}
	if !writer {
		time.Sleep(r.delayReaders)
	}
	for range 2 {
		if err := g.Launch(s); err != nil {
			return err
		}
	}
	return verify("two replays back to back")
}

func (r rootedRun) run(t *testing.T) []error {
	t.Helper()
	boots := bootstrap.NewLocal(r.n)
	errs := make([]error, r.n)
	var wg sync.WaitGroup
	for rank := 0; rank < r.n; rank++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[rank] = r.rank(boots[rank], rank)
		}()
	}
	wg.Wait()
	return errs
}

// rootedCounts are the counts of a call sequence for type t on hal/host's
// default configuration: narrow LL, wide LL, windowed, and narrow again,
// each plan run at least three times in a row (more launches than scratch
// halves) and interleaved with the others.
func rootedCounts(t plan.DataType) []int64 {
	es := int64(t.Size())
	// hb: the all-pairs windowed plans; split: from 3 ranks the split
	// plans (hal/host's bounds: LL to 128 KiB, split from 160 KiB).
	narrow, wide, hb, split := (4<<10)/es+1, (100<<10)/es+3, (144<<10)/es+5, (200<<10)/es+5
	return []int64{1, narrow, 7, narrow - 3, wide, wide - 17, wide + 9, split, hb, narrow, split - 1, 3, wide, hb - 1, 5, 2}
}

// Ack-free LL Broadcast and Reduce on hal/host: consecutive calls without
// host synchronisation, the readers starting late so the writers run ahead
// as far as the credits let them, then the same calls captured in a graph
// and replayed; every data type, roots 0 and n−1, 2 to 5 ranks.
func TestRootedLLConsecutiveAndReplayed(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5} {
		for _, coll := range []algorithms.Collective{algorithms.Broadcast, algorithms.Reduce} {
			for ti, typ := range plan.DataTypes {
				if n > 2 && ti%3 != n%3 { // every type on 2 ranks, a third of them on each larger count
					continue
				}
				op := plan.Sum
				if coll == algorithms.Reduce {
					op = []plan.RedOp{plan.Sum, plan.Max, plan.Min, plan.Prod, plan.Avg}[ti%5]
				}
				for ri, root := range []int{0, n - 1} {
					for gi, graph := range []bool{false, true} {
						// Every root and graph form for one type in four
						// (a quarter of the types each: they all meet
						// both roots and both forms across the sizes).
						if (ri*2+gi+ti+n)%4 != 0 && ti%4 != 0 {
							continue
						}
						name := fmt.Sprintf("%v-n%d-%v-%v-root%d-graph%v", coll, n, typ, op, root, graph)
						t.Run(name, func(t *testing.T) {
							r := rootedRun{coll: coll, n: n, root: root, t: typ, op: op, counts: rootedCounts(typ),
								delayReaders: 30 * time.Millisecond, graph: graph, timeout: 10 * time.Second, job: "rooted-" + name}
							for rank, err := range r.run(t) {
								if err != nil {
									t.Errorf("rank %d: %v", rank, err)
								}
							}
						})
					}
				}
			}
		}
	}
}

// Without the credit waits, writers that run ahead of late readers
// overwrite a scratch half before it is read: the readers then never see
// their launch's flags and time out. (This is what the credits prevent,
// and shows that the test above can fail.)
func TestRootedLLWithoutCreditsOverruns(t *testing.T) {
	for _, coll := range []algorithms.Collective{algorithms.Broadcast, algorithms.Reduce} {
		r := rootedRun{coll: coll, n: 2, root: 0, t: plan.Int32, op: plan.Sum, counts: []int64{64, 64, 64, 64},
			delayReaders: 200 * time.Millisecond, strip: true, timeout: 300 * time.Millisecond, job: "overrun-" + coll.String()}
		errs := r.run(t)
		reader := 1
		if coll == algorithms.Reduce {
			reader = 0
		}
		if errs[reader] == nil || !strings.Contains(errs[reader].Error(), "LL packet wait") {
			t.Errorf("%v without credits, late reader: %v; want an LL packet wait that timed out", coll, errs[reader])
		}
	}
}

// TestWithLL128Selection: Config.WithLL128 puts every WideLL-shaped plan
// on LL128 lines (the narrow LL plans keep LL16) and, on GPUs, moves the
// LL bounds measured with them: on 2 ranks the wide 1PA AllReduce and
// the rooted LL plans to 4 MiB and the collectives' LL segments to 1 MiB;
// from 3 ranks the two-phase LL AllReduce and the LL Reduce to 2 MiB, the
// split LL Reduce and Broadcast to 8 MiB. hal/host's configuration
// (gpu false) changes its packets only.
func TestWithLL128Selection(t *testing.T) {
	type pick struct {
		coll  algorithms.Collective
		bytes int64
		want  string
	}
	for _, tc := range []struct {
		n     int
		picks []pick
	}{
		{2, []pick{
			{algorithms.AllReduce, 64 << 10, "allreduce-1pa-LL16-8x1024"},
			{algorithms.AllReduce, 4 << 20, "allreduce-1pa-LL128-32x1024"},
			{algorithms.AllReduce, 4<<20 + 16, "all_reduce-hb-"},
			{algorithms.Broadcast, 4 << 20, "broadcast-r1-LL128-32x1024"},
			{algorithms.Reduce, 4 << 20, "reduce-r1-LL128-32x1024"},
			{algorithms.Reduce, 4<<20 + 16, "reduce-r1-hb-"},
			{algorithms.AllGather, 1 << 20, "-LL128-32x1024"},
			{algorithms.AllGather, 1<<20 + 16, "-hb-"},
		}},
		// On 3 and 4 ranks the wide LL plans take 128 × 512 but the
		// rooted ones (broadcast-r1, reduce-r1), which keep 32 × 1024.
		{3, []pick{
			{algorithms.AllReduce, 8 << 20, "all_reduce-2pa-LL128-128x512"},
			{algorithms.AllReduce, 8<<20 + 16, "ring"},
			{algorithms.Reduce, 2 << 20, "reduce-r1-LL128-32x1024"},
			{algorithms.Reduce, 8 << 20, "reduce-split-r1-LL128-128x512"},
			{algorithms.Broadcast, 8 << 20, "broadcast-split-r1-LL128-128x512"},
			{algorithms.AllGather, 1 << 20, "-LL128-128x512"},
			{algorithms.AllGather, 1<<20 + 16, "-hb-"},
			{algorithms.ReduceScatter, 2 << 20, "-LL128-128x512"},
			{algorithms.ReduceScatter, 2<<20 + 16, "-hb-"},
			{algorithms.AllToAll, 2 << 20, "-LL128-128x512"},
			{algorithms.AllToAll, 2<<20 + 16, "-hb-"},
		}},
		{4, []pick{
			{algorithms.AllReduce, 512 << 10, "allreduce-1pa-LL128-128x512"},
			{algorithms.AllReduce, 4 << 20, "all_reduce-2pa-LL128-128x512"},
			{algorithms.AllReduce, 4<<20 + 16, "all_reduce-2pa-LL128-160x512"},
			{algorithms.AllReduce, 8 << 20, "all_reduce-2pa-LL128-160x512"},
			{algorithms.AllReduce, 8<<20 + 16, "ring"},
			{algorithms.Broadcast, 512 << 10, "broadcast-r1-LL128-32x1024"},
			{algorithms.Broadcast, 8 << 20, "broadcast-split-r1-LL128-128x512"},
			{algorithms.Broadcast, 8<<20 + 16, "broadcast-split-r1-hb-"},
			{algorithms.Reduce, 2 << 20, "reduce-r1-LL128-32x1024"},
			{algorithms.Reduce, 8 << 20, "reduce-split-r1-LL128-128x512"},
			{algorithms.Reduce, 8<<20 + 16, "reduce-split-r1-hb-"},
			{algorithms.AllGather, 1 << 20, "-LL128-128x512"},
			{algorithms.AllGather, 1<<20 + 16, "-hb-"},
			{algorithms.ReduceScatter, 2 << 20, "-LL128-128x512"},
			{algorithms.ReduceScatter, 2<<20 + 16, "ring"},
			{algorithms.AllToAll, 2 << 20, "-LL128-128x512"},
			{algorithms.AllToAll, 2<<20 + 16, "-hb-"},
		}},
		{5, []pick{ // past 4 ranks: not measured, the shapes before
			{algorithms.AllReduce, 2 << 20, "all_reduce-2pa-LL128-32x1024"},
			{algorithms.AllGather, 1 << 20, "-LL128-32x1024"},
		}},
	} {
		cfg := algorithms.DefaultConfig(0, tc.n, 132, true).WithLL128(true)
		if cfg.WideProto != plan.LL128 {
			t.Fatalf("%d ranks: WideProto %v", tc.n, cfg.WideProto)
		}
		for _, p := range tc.picks {
			// The AllReduce's scratch path (Launch) takes the 2PA-LL plan;
			// Plans returns it among the LL choices.
			cs, err := algorithms.Plans(cfg, p.coll, 1)
			if err != nil {
				t.Fatal(err)
			}
			got := cs[algorithms.Select(cs, p.bytes)].Plan
			if !strings.Contains(got.Name, p.want) {
				t.Errorf("%d ranks, %v of %d bytes: %s, want …%s…", tc.n, p.coll, p.bytes, got.Name, p.want)
			}
			if strings.Contains(p.want, "LL128") && got.Scratch != plan.LL128 {
				t.Errorf("%s: scratch %v, want LL128", got.Name, got.Scratch)
			}
		}
	}
	host := algorithms.DefaultConfig(0, 4, 2, false)
	lines := host.WithLL128(false)
	lines.WideProto = host.WideProto
	if d := cmp.Diff(host, lines); d != "" {
		t.Errorf("WithLL128(false) changed more than the packets (-before +after):\n%s", d)
	}
}

// TestWithLL128AllRanks: on 3 to 8 ranks (8-GPU nodes take the 4-rank
// bounds unmeasured) every collective's plans build and validate with
// LL128 lines on every rank and root, and their kernels emit.
func TestWithLL128AllRanks(t *testing.T) {
	for n := 3; n <= 8; n++ {
		for rank := 0; rank < n; rank++ {
			cfg := algorithms.DefaultConfig(rank, n, 132, true).WithLL128(true)
			for _, coll := range algorithms.Collectives {
				for _, root := range []int{0, n - 1} {
					if root != 0 && !coll.Rooted() {
						continue
					}
					cs, err := algorithms.Plans(cfg, coll, root)
					if err != nil {
						t.Fatalf("%d ranks, rank %d, %v root %d: %v", n, rank, coll, root, err)
					}
					for _, c := range cs {
						if c.Plan.Scratch != plan.LL128 {
							continue
						}
						if _, err := plan.EmitCUDA(c.Plan, plan.BFloat16, plan.Sum); err != nil {
							t.Errorf("%d ranks, rank %d: %s: %v", n, rank, c.Plan.Name, err)
						}
					}
				}
			}
		}
	}
}

// TestLL2LargeTier: on 4 GPUs the scratch AllReduce takes two two-phase LL
// plans, 128 × 512 to 4 MiB and 160 × 512 to 8 MiB (Config.LL2Large); one
// plan to the larger bound where the shapes agree, as a block budget that
// clamps both to the same shape makes them; none past ScratchLL2PAMaxBytes
// when the large bound is not above it.
func TestLL2LargeTier(t *testing.T) {
	ll2 := func(cfg algorithms.Config) []string {
		t.Helper()
		cs, err := algorithms.Plans(cfg, algorithms.AllReduce, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cs {
			if strings.HasPrefix(c.Plan.Name, "all_reduce-2pa-") {
				out = append(out, fmt.Sprintf("%s≤%d", c.Plan.Name, c.MaxBytes))
			}
		}
		return out
	}
	base := algorithms.DefaultConfig(0, 4, 132, true).WithLL128(true)
	if base.LL2Large != (algorithms.Shape{Blocks: 160, Threads: 512}) || base.ScratchLL2PALargeMaxBytes != 8<<20 {
		t.Fatalf("4 ranks: LL2Large %+v to %d bytes, want 160 × 512 to 8 MiB", base.LL2Large, base.ScratchLL2PALargeMaxBytes)
	}
	same := base
	same.LL2Large = same.WideLL
	lower := base
	lower.ScratchLL2PALargeMaxBytes = 4 << 20
	budget := base
	budget.Budget = algorithms.BlockBudget{Max: 16}
	for _, tc := range []struct {
		name string
		cfg  algorithms.Config
		want []string
	}{
		{"default", base, []string{"all_reduce-2pa-LL128-128x512≤4194304", "all_reduce-2pa-LL128-160x512≤8388608"}},
		{"same shape", same, []string{"all_reduce-2pa-LL128-128x512≤8388608"}},
		{"bound not above", lower, []string{"all_reduce-2pa-LL128-128x512≤4194304"}},
		{"budget of 16", budget, []string{"all_reduce-2pa-LL128-16x1024≤8388608"}},
	} {
		if got := ll2(tc.cfg); !slices.Equal(got, tc.want) {
			t.Errorf("%s: two-phase LL choices %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, n := range []int{2, 3, 5, 8} {
		if c := algorithms.DefaultConfig(0, n, 132, true).WithLL128(true); c.LL2Large.Blocks != 0 {
			t.Errorf("%d ranks: LL2Large %+v, want none (measured on 4 ranks only)", n, c.LL2Large)
		}
	}
}
