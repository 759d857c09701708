package sim

import (
	"container/heap"
	"fmt"
	"math"

	"github.com/weftccl/weft/hal/plan"
)

// The engine executes one launch of a plan on every simulated rank. Each
// thread-block group of a rank is an actor that runs its ops in order
// (per window for windowed groups, then its After ops). A transfer becomes
// one flow per remote operand (or one through local memory), and flows
// share the resources they cross — a GPU's NVLink egress and ingress, a
// NIC's, a node's share of the leaf uplinks, the group's own issue rate —
// max-min fairly, recomputed whenever a flow starts or ends (a fluid
// model). A signal is delivered one hop after it is issued (after the
// engine's earlier puts for a port channel); a wait resumes its group at
// the delivery of the matching signal. Ranks of a translation-symmetric
// plan are represented by one period of ranks: whatever a rank outside it
// does, its representative did at the same time (see run.rep).

type resKind uint8

const (
	resNVLOut resKind = iota
	resNVLIn
	resNICOut
	resNICIn
	resUp
	resDown
	resHBM
	resPrivate
)

type resKey struct {
	kind resKind
	id   int
}

type sigKey struct{ from, to, sem int }

type mailbox struct {
	times   []float64
	waiters []waiter
}

type waiter struct {
	k  int
	fn func(t float64)
}

// flow is one stream of bytes through its resources. rem is what is left
// at time t0; since then it has moved at rate (bytes/µs). ver counts the
// rate changes, so that stale entries of the completion heap are skipped.
type flow struct {
	rem, rate, t0 float64
	res           []int
	done          func()
	ver           int
	live          bool
}

// left is what remains of f at time t.
func (f *flow) left(t float64) float64 {
	if f.rate > 0 {
		return f.rem - f.rate*(t-f.t0)
	}
	return f.rem
}

// finish is an entry of the completion heap: flow f ends at t at the rate
// it had at version ver.
type finish struct {
	t   float64
	f   *flow
	ver int
}

type finishQueue []finish

func (q finishQueue) Len() int           { return len(q) }
func (q finishQueue) Less(i, j int) bool { return q[i].t < q[j].t }
func (q finishQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *finishQueue) Push(x any)        { *q = append(*q, x.(finish)) }
func (q *finishQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type event struct {
	t   float64
	seq int
	fn  func()
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].t != q[j].t {
		return q[i].t < q[j].t
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type actor struct {
	rank  int
	pl    *plan.Plan
	g     *plan.Group
	nwin  int64
	w     int64
	i     int
	after bool
	done  bool
	end   float64
	waits map[sigKey]int
}

type job struct {
	signal bool
	key    sigKey
	bytes  float64
	peer   int
	issued float64
}

type engine struct {
	rank, res int
	fifo      []job
	busy      bool
	idle      []func()
}

type run struct {
	cl     *Cluster
	p      *Params
	n, g   int
	period int
	esize  int
	plans  []*plan.Plan
	count  int64 // elements per rank of the launch

	now float64
	seq int
	q   eventQueue
	// Flows: users lists the live flows of each resource; rates are
	// recomputed only for the flows connected (through shared resources)
	// to a resource in dirty, where a flow started or ended: max-min
	// fairness decomposes over those components, so the result is the
	// same as recomputing every flow. ends holds each live flow's
	// completion at its current rate.
	nflows int
	users  [][]*flow
	dirty  []int
	ends   finishQueue
	caps   []float64
	resIdx map[resKey]int
	free   []int
	boxes  map[sigKey]*mailbox
	pkts   map[sigKey]*mailbox
	engs   map[[2]int]*engine
	actors []*actor
	ops    int
}

// rep returns the representative of rank x and the shift that maps x to
// it (x = rep + shift mod n).
func (r *run) rep(x int) (int, int) {
	x = ((x % r.n) + r.n) % r.n
	rp := x % r.period
	return rp, x - rp
}

func (r *run) mapKey(k sigKey) sigKey {
	rp, sh := r.rep(k.from)
	return sigKey{from: rp, to: ((k.to-sh)%r.n + r.n) % r.n, sem: k.sem}
}

func (r *run) at(t float64, fn func()) {
	r.seq++
	heap.Push(&r.q, event{t: t, seq: r.seq, fn: fn})
}

func (r *run) res(k resKey, capGBps float64) int {
	if i, ok := r.resIdx[k]; ok {
		return i
	}
	r.caps = append(r.caps, capGBps*1e3)
	r.resIdx[k] = len(r.caps) - 1
	return len(r.caps) - 1
}

func (r *run) private(capGBps float64) int {
	if n := len(r.free); n > 0 {
		i := r.free[n-1]
		r.free = r.free[:n-1]
		r.caps[i] = capGBps * 1e3
		return i
	}
	r.caps = append(r.caps, capGBps*1e3)
	return len(r.caps) - 1
}

func (r *run) node(x int) int { return x / r.g }

func (r *run) nic(x int) int {
	return r.node(x)*r.cl.NIC.Count + (x%r.g)*r.cl.NIC.Count/r.g
}

// crossesSpine reports whether traffic from rank a to rank b (other
// nodes) leaves their leaf switch.
func (r *run) crossesSpine(a, b int) bool {
	s := r.cl.Switching
	if r.node(a)/s.NodesPerLeaf != r.node(b)/s.NodesPerLeaf {
		return true
	}
	return s.Kind == Rail && r.nic(a)%r.cl.NIC.Count != r.nic(b)%r.cl.NIC.Count
}

// route lists the shared resources a flow from rank a to rank b crosses.
func (r *run) route(a, b int) []int {
	ra, _ := r.rep(a)
	rb, _ := r.rep(b)
	if r.node(a) == r.node(b) {
		return []int{r.res(resKey{resNVLOut, ra}, r.cl.NVLink.GBps), r.res(resKey{resNVLIn, rb}, r.cl.NVLink.GBps)}
	}
	nic := r.cl.NIC.Gbps / 8
	out := []int{r.res(resKey{resNICOut, r.nicRep(a)}, nic), r.res(resKey{resNICIn, r.nicRep(b)}, nic)}
	if r.crossesSpine(a, b) {
		up := float64(r.cl.NIC.Count) * nic / r.cl.Switching.Oversubscription
		out = append(out, r.res(resKey{resUp, r.node(ra)}, up), r.res(resKey{resDown, r.node(rb)}, up))
	}
	return out
}

func (r *run) nicRep(x int) int {
	rp, _ := r.rep(x)
	return r.nic(rp)
}

// hop is the one-way latency of a signal (ll false) or an LL packet from
// rank a to rank b; port adds the proxy's latency inside a node (between
// nodes NIC.LatencyUs includes it).
func (r *run) hop(a, b int, ll, port bool) float64 {
	if r.node(a) != r.node(b) {
		t := r.cl.NIC.LatencyUs
		if r.crossesSpine(a, b) {
			t += 2 * r.cl.Switching.HopLatencyUs
		}
		return t
	}
	t := r.p.SignalHopUs
	if ll {
		t = r.p.LLHopUs
	}
	if port {
		t += r.p.ProxyUs
	}
	return t
}

func (r *run) deliver(boxes map[sigKey]*mailbox, k sigKey, t float64) {
	b := boxes[k]
	if b == nil {
		b = &mailbox{}
		boxes[k] = b
	}
	b.times = append(b.times, t)
	kept := b.waiters[:0]
	var ready []waiter
	for _, w := range b.waiters {
		if w.k <= len(b.times) {
			ready = append(ready, w)
		} else {
			kept = append(kept, w)
		}
	}
	b.waiters = kept
	for _, w := range ready {
		w.fn(b.times[w.k-1])
	}
}

// await calls fn with the delivery time of the k-th delivery on k (mapped
// to the representatives), now or when it happens.
func (r *run) await(boxes map[sigKey]*mailbox, key sigKey, k int, fn func(t float64)) {
	key = r.mapKey(key)
	b := boxes[key]
	if b == nil {
		b = &mailbox{}
		boxes[key] = b
	}
	if k <= len(b.times) {
		fn(b.times[k-1])
		return
	}
	b.waiters = append(b.waiters, waiter{k: k, fn: fn})
}

// cur returns the actor's current op, advancing past ops that do not run
// in the current window; false when the actor has finished.
func (a *actor) cur() (plan.Op, bool) {
	for {
		if !a.after {
			if a.i < len(a.g.Ops) {
				o := a.g.Ops[a.i]
				if a.g.Window > 0 && !o.Runs(a.w, a.nwin) {
					a.i++
					continue
				}
				return o, true
			}
			a.w++
			a.i = 0
			if a.w >= a.nwin {
				a.after = true
			}
			continue
		}
		if a.i < len(a.g.After) {
			return a.g.After[a.i], true
		}
		return plan.Op{}, false
	}
}

// opBytes is the number of bytes of the op's element range in the
// actor's current window.
func (r *run) opBytes(a *actor, o plan.Op, count int64) int64 {
	off, length := plan.ChunkRange(count, r.esize, o.Chunk, o.NChunks)
	_ = off
	if a.g.Window > 0 && !a.after {
		we := a.g.Window / int64(r.esize)
		length = max(0, min(we, length-a.w*we))
	}
	return length * int64(r.esize)
}

// step runs the actor's ops from r.now until one blocks or it finishes.
func (r *run) step(a *actor, count int64) {
	for {
		o, ok := a.cur()
		if !ok {
			a.done, a.end = true, r.now
			return
		}
		a.i++
		r.ops++
		switch o.Kind {
		case plan.OpSignal:
			ch := a.pl.Channels[o.Chan]
			k := sigKey{from: a.rank, to: ch.Peer, sem: o.Sem}
			if ch.Port {
				r.engineJob(a.rank, o.Chan, job{signal: true, key: k, peer: ch.Peer, issued: r.now})
				continue
			}
			r.deliver(r.boxes, k, r.now+r.hop(a.rank, ch.Peer, false, false))
		case plan.OpWait:
			peer := a.pl.Channels[o.Chan].Peer
			k := sigKey{from: peer, to: a.rank, sem: o.Sem}
			a.waits[k]++
			n := a.waits[k] - o.Credits
			if n <= 0 {
				continue
			}
			sync, ready, tReady := true, false, 0.0
			r.await(r.boxes, k, n, func(t float64) {
				if sync {
					ready, tReady = true, t
					return
				}
				r.at(max(t, r.now), func() { r.step(a, count) })
			})
			sync = false
			if !ready {
				return
			}
			if tReady > r.now {
				r.at(tReady, func() { r.step(a, count) })
				return
			}
		case plan.OpFlush:
			if !a.pl.Channels[o.Chan].Port {
				continue
			}
			e := r.engine(a.rank, o.Chan)
			if !e.busy && len(e.fifo) == 0 {
				continue
			}
			e.idle = append(e.idle, func() { r.at(r.now, func() { r.step(a, count) }) })
			return
		case plan.OpTransfer:
			if r.transfer(a, o, count) {
				return
			}
		default:
			panic(fmt.Sprintf("sim: op kind %d", o.Kind))
		}
	}
}

// transfer starts the op's flows; it reports whether the actor blocks
// (and is resumed when they end).
func (r *run) transfer(a *actor, o plan.Op, count int64) bool {
	bytes := float64(r.opBytes(a, o, count))
	if bytes == 0 {
		return false
	}
	ll := a.pl.Scratch != plan.Simple
	if o.Port {
		ch := a.pl.Channels[o.Chan]
		peer := a.rank
		if o.Dsts[0].Remote() {
			peer = ch.Peer
		}
		r.engineJob(a.rank, o.Chan, job{bytes: bytes, peer: peer, issued: r.now})
		r.at(r.now+r.p.OpUs, func() { r.step(a, count) })
		return true
	}
	// LL packets this transfer reads must have arrived.
	var pktSlots []int
	for _, s := range o.Srcs {
		if ll && s.Buf == plan.Scratch && s.Chan == plan.Local {
			pktSlots = append(pktSlots, s.Slot)
		}
	}
	start := func() {
		operands := len(pktSlots)
		type stream struct {
			from, to int
			wire     float64
		}
		var streams []stream
		read, llDst := false, false
		for _, d := range o.Dsts {
			if d.Remote() {
				w := bytes
				if ll && d.Buf == plan.Scratch {
					// Packets carry their flags: 2× the bytes as LL16 or LL8
					// packets, 128/120 as LL128 lines.
					pr := a.pl.Scratch
					w, llDst = bytes*float64(pr.PacketBytes())/float64(pr.PayloadBytes()), true
				}
				streams = append(streams, stream{a.rank, a.pl.Channels[d.Chan].Peer, w})
				operands++
			}
		}
		for _, s := range o.Srcs {
			if s.Remote() {
				streams = append(streams, stream{a.pl.Channels[s.Chan].Peer, a.rank, bytes})
				read = true
				operands++
			}
		}
		overhead := r.p.OpUs + r.p.OperandUs*float64(operands)
		rate := r.p.GroupRate(r.cl.NVLink.GBps, a.g.Blocks)
		if read {
			rate *= r.p.ReadFactor
		}
		if llDst {
			rate *= r.p.LLFactor
		}
		var fl []*flow
		priv := -1
		if len(streams) == 0 {
			rp, _ := r.rep(a.rank)
			moved := bytes * float64(len(o.Srcs)+len(o.Dsts))
			if ll && len(pktSlots) > 0 {
				moved += bytes * float64(len(pktSlots))
			}
			fl = append(fl, &flow{rem: moved, res: []int{r.res(resKey{resHBM, rp}, r.cl.HBMGBps)}})
		} else {
			priv = r.private(rate)
			for _, s := range streams {
				fl = append(fl, &flow{rem: s.wire, res: append(r.route(s.from, s.to), priv)})
			}
		}
		left := len(fl)
		for _, f := range fl {
			f.done = func() {
				left--
				if left > 0 {
					return
				}
				if priv >= 0 {
					r.free = append(r.free, priv)
				}
				for _, d := range o.Dsts {
					switch {
					case ll && d.Remote() && d.Buf == plan.Scratch:
						peer := a.pl.Channels[d.Chan].Peer
						r.deliver(r.pkts, r.mapKey(sigKey{peer, peer, d.Slot}), r.now+r.hop(a.rank, peer, true, false))
					case ll && d.Chan == plan.Local && d.Buf == plan.Scratch:
						r.deliver(r.pkts, sigKey{a.rank, a.rank, d.Slot}, r.now)
					}
				}
				r.at(r.now+overhead, func() { r.step(a, count) })
			}
			r.addFlow(f)
		}
	}
	if len(pktSlots) == 0 {
		start()
		return true
	}
	left, latest := len(pktSlots), r.now
	for _, s := range pktSlots {
		// An LL slot has one writer per launch (the peer of channel s by
		// convention, but trees and PAT number slots their own way), so
		// packets are matched by receiver and slot.
		r.await(r.pkts, sigKey{a.rank, a.rank, s}, 1, func(t float64) {
			latest = max(latest, t)
			if left--; left == 0 {
				r.at(max(latest, r.now), start)
			}
		})
	}
	return true
}

func (r *run) engine(rank, ch int) *engine {
	k := [2]int{rank, ch}
	e := r.engs[k]
	if e == nil {
		e = &engine{rank: rank, res: r.private(r.p.EngineGBps)}
		r.engs[k] = e
	}
	return e
}

func (r *run) engineJob(rank, ch int, j job) {
	e := r.engine(rank, ch)
	e.fifo = append(e.fifo, j)
	r.pump(e)
}

// pump starts the engine's next job when it is idle.
func (r *run) pump(e *engine) {
	for !e.busy && len(e.fifo) > 0 {
		j := e.fifo[0]
		e.fifo = e.fifo[1:]
		proxy := 0.0
		if r.node(e.rank) == r.node(j.peer) {
			proxy = r.p.ProxyUs
		}
		startAt := max(r.now, j.issued+proxy)
		if j.signal {
			r.deliver(r.boxes, j.key, startAt+r.hop(e.rank, j.peer, false, false))
			continue
		}
		e.busy = true
		r.at(startAt, func() {
			var res []int
			if j.peer == e.rank {
				rp, _ := r.rep(e.rank)
				res = []int{r.res(resKey{resHBM, rp}, r.cl.HBMGBps)}
			} else {
				res = r.route(e.rank, j.peer)
			}
			res = append(res, e.res)
			f := &flow{rem: j.bytes, res: res}
			f.done = func() {
				e.busy = false
				r.pump(e)
				if !e.busy && len(e.fifo) == 0 {
					idle := e.idle
					e.idle = nil
					for _, fn := range idle {
						fn()
					}
				}
			}
			r.addFlow(f)
		})
		return
	}
}

// addFlow starts f now.
func (r *run) addFlow(f *flow) {
	f.t0, f.rate, f.live = r.now, 0, true
	r.nflows++
	for _, x := range f.res {
		for len(r.users) <= x {
			r.users = append(r.users, nil)
		}
		r.users[x] = append(r.users[x], f)
		r.dirty = append(r.dirty, x)
	}
}

// endFlow removes f, which has ended.
func (r *run) endFlow(f *flow) {
	f.live = false
	r.nflows--
	for _, x := range f.res {
		us := r.users[x]
		for i, g := range us {
			if g == f {
				us[i] = us[len(us)-1]
				r.users[x] = us[:len(us)-1]
				break
			}
		}
		r.dirty = append(r.dirty, x)
	}
}

// rates shares every resource among its flows, max-min fairly
// (progressive filling: the resource with the smallest fair share freezes
// its flows at that share, repeatedly), for the flows connected to a
// dirty resource; the others keep their rates.
func (r *run) rates() {
	seenRes := map[int]bool{}
	seenFlow := map[*flow]bool{}
	var comp []*flow
	var res []int
	stack := append([]int(nil), r.dirty...)
	r.dirty = r.dirty[:0]
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seenRes[x] {
			continue
		}
		seenRes[x] = true
		res = append(res, x)
		for _, f := range r.users[x] {
			if seenFlow[f] {
				continue
			}
			seenFlow[f] = true
			comp = append(comp, f)
			stack = append(stack, f.res...)
		}
	}
	left := make(map[int]float64, len(res))
	users := make(map[int]int, len(res))
	for _, f := range comp {
		f.rem, f.t0 = f.left(r.now), r.now
		f.rate = -1
		for _, x := range f.res {
			left[x] = r.caps[x]
			users[x]++
		}
	}
	unfrozen := len(comp)
	for unfrozen > 0 {
		best, share := -1, math.Inf(1)
		for _, x := range res {
			if u := users[x]; u > 0 {
				if s := left[x] / float64(u); s < share || (s == share && x < best) {
					best, share = x, s
				}
			}
		}
		if best < 0 {
			break
		}
		for _, f := range r.users[best] {
			if f.rate >= 0 {
				continue
			}
			f.rate = share
			unfrozen--
			for _, x := range f.res {
				left[x] -= share
				users[x]--
			}
		}
	}
	for _, f := range comp {
		f.ver++
		if f.rate > 0 {
			heap.Push(&r.ends, finish{t: r.now + f.rem/f.rate, f: f, ver: f.ver})
		}
	}
}

// nextEnd is the earliest completion of a live flow at its current rate
// (stale heap entries dropped), or false when no flow moves.
func (r *run) nextEnd() (finish, bool) {
	for len(r.ends) > 0 {
		e := r.ends[0]
		if e.f.live && e.ver == e.f.ver {
			return e, true
		}
		heap.Pop(&r.ends)
	}
	return finish{}, false
}

// execute runs the launch and returns its time (µs from the launch).
func (r *run) execute() (float64, error) {
	for _, a := range r.actors {
		r.at(r.now, func() { r.step(a, r.count) })
	}
	const maxOps = 400_000_000
	for {
		if len(r.dirty) > 0 {
			r.rates()
		}
		end, moving := r.nextEnd()
		if !moving && len(r.q) == 0 {
			break
		}
		if moving && (len(r.q) == 0 || end.t <= r.q[0].t) {
			r.now = max(r.now, end.t)
			// Every flow that is done by now (within rounding) ends.
			var done []*flow
			for {
				e, ok := r.nextEnd()
				if !ok || e.f.left(r.now) > 1e-6*max(1, e.f.rate) {
					break
				}
				heap.Pop(&r.ends)
				r.endFlow(e.f)
				done = append(done, e.f)
			}
			for _, f := range done {
				f.done()
			}
			continue
		}
		e := heap.Pop(&r.q).(event)
		r.now = max(r.now, e.t)
		e.fn()
		if r.ops > maxOps {
			return 0, fmt.Errorf("sim: more than %d operations: %w", maxOps, ErrInvalid)
		}
	}
	if r.nflows > 0 {
		return 0, fmt.Errorf("sim: %d flows never end (a resource of no capacity): %w", r.nflows, ErrInvalid)
	}
	end := 0.0
	for _, a := range r.actors {
		if !a.done {
			return 0, fmt.Errorf("sim: rank %d group of %d blocks stopped at window %d op %d (%s): the plan deadlocks in the model: %w",
				a.rank, a.g.Blocks, a.w, a.i, describe(a), ErrInvalid)
		}
		end = max(end, a.end)
	}
	return end, nil
}

func describe(a *actor) string {
	if a.i > 0 && !a.after && a.i <= len(a.g.Ops) {
		return a.pl.OpString(a.g.Ops[a.i-1])
	}
	return "?"
}
