package mutant

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// Program is a host program with the mutant's changes around it.
type Program struct {
	d     *Device
	p     *plan.Plan // the plan as the caller wrote it
	inner hal.Program
	esize int
	torn  []tornSlot // TornPackets
}

// tornSlot is a peer scratch whose packets the host writes into a shadow,
// from which the mutant copies them, flags first.
type tornSlot struct {
	shadow hal.Buffer // host buffer of this device
	real   uint64     // the peer's scratch, mapped here
}

// Prepare changes the plan or its bindings for the mutant's kind and
// prepares it on the host.
func (d *Device) Prepare(spec hal.PlanSpec) (hal.Program, error) {
	if spec.Plan == nil {
		return d.exec.Prepare(spec)
	}
	pr := &Program{d: d, p: spec.Plan, esize: spec.DataType.Size()}
	inner := spec
	switch d.kind {
	case LostSignal:
		inner.Plan = withoutSignals(spec.Plan)
	case FlushEarly:
		inner.Plan = readsAfterFlush(spec.Plan)
	case TornPackets:
		if spec.Plan.Scratch == plan.Simple || spec.Plan.Validate() != nil || len(spec.Bindings.Peers) != len(spec.Plan.Channels) {
			break
		}
		inner.Bindings.Peers = slices.Clone(spec.Bindings.Peers)
		for ch := range spec.Plan.Channels {
			if !writesPackets(spec.Plan, ch) || spec.Bindings.ScratchBytes == 0 {
				continue
			}
			shadow, err := d.Device.Alloc(spec.Bindings.ScratchBytes)
			if err != nil {
				pr.Close()
				return nil, err
			}
			pr.torn = append(pr.torn, tornSlot{shadow: shadow, real: spec.Bindings.Peers[ch].Scratch})
			inner.Bindings.Peers[ch].Scratch = shadow.Addr()
		}
	}
	prog, err := d.exec.Prepare(inner)
	if err != nil {
		pr.Close()
		return nil, err
	}
	pr.inner = prog
	return pr, nil
}

func (pr *Program) Close() error {
	for _, t := range pr.torn {
		t.shadow.Free()
	}
	pr.torn = nil
	if pr.inner != nil {
		return pr.inner.Close()
	}
	return nil
}

// Launch queues the host launch, with the mutant's work before and after
// it, on s.
func (pr *Program) Launch(hs hal.Stream, a *plan.Args) error {
	s, ok := hs.(*Stream)
	if !ok || s.dev != pr.d {
		return fmt.Errorf("%s: launch %s: stream of another device: %w", pr.d, pr.p.Name, hal.ErrInvalidArgument)
	}
	// The host checks arguments when a launch is queued; the checks that
	// tests rely on are repeated here, since the host launch is queued
	// later, in stream order.
	if a.Count < 0 || (a.Count > 0 && (a.Input == 0 || a.Output == 0)) {
		return fmt.Errorf("%s: launch %s: count %d, input %#x, output %#x: %w", pr.d, pr.p.Name, a.Count, a.Input, a.Output, hal.ErrInvalidArgument)
	}
	args := *a
	args.PeerInput, args.PeerOutput = slices.Clone(a.PeerInput), slices.Clone(a.PeerOutput)
	var pre, post func()
	var shadows []hal.Buffer
	var tr *tearer
	switch pr.d.kind {
	case SignalOvertakesData:
		post, shadows = pr.delayPuts(&args)
	case StaleRead:
		shadows = pr.staleReads(&args)
	case TornPackets:
		if len(pr.torn) > 0 {
			pre = func() { pr.clearShadows(); tr = pr.startTearing() }
			post = func() { tr.finish() }
		}
	}
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = plan.DefaultTimeout
	}
	return s.enqueue(func() error {
		defer func() {
			for _, b := range shadows {
				b.Free()
			}
		}()
		if pre != nil {
			pre()
		}
		if err := pr.inner.Launch(s.inner, &args); err != nil {
			return err
		}
		err := s.inner.Synchronize(time.Now().Add(timeout + 30*time.Second))
		if post != nil {
			post()
		}
		return err
	})
}

// withoutSignals drops every signal of the plan.
func withoutSignals(p *plan.Plan) *plan.Plan {
	q := *p
	q.Groups = nil
	for _, g := range p.Groups {
		var ops []plan.Op
		for _, o := range g.Ops {
			if o.Kind != plan.OpSignal {
				ops = append(ops, o)
			}
		}
		q.Groups = append(q.Groups, plan.Group{Blocks: g.Blocks, Ops: ops})
	}
	return &q
}

// remoteDstChan is the channel of the first remote destination of a
// transfer, or -1.
func remoteDstChan(o plan.Op) int {
	if o.Kind != plan.OpTransfer {
		return -1
	}
	for _, r := range o.Dsts {
		if r.Remote() {
			return r.Chan
		}
	}
	return -1
}

// readsAfterFlush moves every put that a flush of its channel follows to
// just before the next signal of that channel: the copy reads its source
// after the flush has returned and the plan has gone on, as a copy engine
// that the flush did not wait for would, while the signal stays ordered
// after the data.
func readsAfterFlush(p *plan.Plan) *plan.Plan {
	q := *p
	q.Groups = nil
	for _, g := range p.Groups {
		var out []plan.Op
		deferred := map[int][]plan.Op{}
		var order []int
		for i, o := range g.Ops {
			if ch := remoteDstChan(o); ch >= 0 && flushedLater(g.Ops[i+1:], ch) {
				if deferred[ch] == nil {
					order = append(order, ch)
				}
				deferred[ch] = append(deferred[ch], o)
				continue
			}
			if o.Kind == plan.OpSignal && len(deferred[o.Chan]) > 0 {
				out = append(out, deferred[o.Chan]...)
				deferred[o.Chan] = nil
			}
			out = append(out, o)
		}
		for _, ch := range order {
			out = append(out, deferred[ch]...)
		}
		q.Groups = append(q.Groups, plan.Group{Blocks: g.Blocks, Ops: out})
	}
	return &q
}

// flushedLater reports whether a flush of ch comes before the next signal
// of ch in ops.
func flushedLater(ops []plan.Op, ch int) bool {
	for _, o := range ops {
		switch {
		case o.Kind == plan.OpFlush && o.Chan == ch:
			return true
		case o.Kind == plan.OpSignal && o.Chan == ch:
			return false
		}
	}
	return false
}

func writesPackets(p *plan.Plan, ch int) bool {
	for _, g := range p.Groups {
		for _, o := range g.Ops {
			for _, r := range o.Dsts {
				if o.Kind == plan.OpTransfer && r.Buf == plan.Scratch && r.Chan == ch {
					return true
				}
			}
		}
	}
	return false
}

// operand is a plain buffer of a launch: Input or Output, local (ch ==
// plan.Local) or of a channel's peer.
type operand struct {
	buf plan.BufferKind
	ch  int
}

// uses reports how the plan uses every plain operand: as a source, as a
// destination, or both.
func uses(p *plan.Plan) (srcs, dsts map[operand]bool) {
	srcs, dsts = map[operand]bool{}, map[operand]bool{}
	for _, g := range p.Groups {
		for _, o := range g.Ops {
			for _, r := range o.Srcs {
				if r.Buf != plan.Scratch {
					srcs[operand{r.Buf, r.Chan}] = true
				}
			}
			for _, r := range o.Dsts {
				if r.Buf != plan.Scratch {
					dsts[operand{r.Buf, r.Chan}] = true
				}
			}
		}
	}
	return srcs, dsts
}

func hasOp(p *plan.Plan, k plan.OpKind) bool {
	for _, g := range p.Groups {
		for _, o := range g.Ops {
			if o.Kind == k {
				return true
			}
		}
	}
	return false
}

// addr returns the address field of a for operand x.
func addr(a *plan.Args, x operand) *uint64 {
	switch {
	case x.ch == plan.Local && x.buf == plan.Input:
		return &a.Input
	case x.ch == plan.Local:
		return &a.Output
	case x.buf == plan.Input && x.ch < len(a.PeerInput):
		return &a.PeerInput[x.ch]
	case x.buf == plan.Output && x.ch < len(a.PeerOutput):
		return &a.PeerOutput[x.ch]
	}
	return nil
}

// delayPuts redirects every peer buffer the plan only writes (puts) into a
// shadow, and returns the work that copies the shadows to the peers after
// the launch and a delay: the signals the plan sends after its puts reach
// the peers long before the data.
func (pr *Program) delayPuts(a *plan.Args) (func(), []hal.Buffer) {
	bytes := a.Count * int64(pr.esize)
	if bytes == 0 || !hasOp(pr.p, plan.OpSignal) {
		return nil, nil
	}
	srcs, dsts := uses(pr.p)
	type landing struct {
		x      operand
		shadow hal.Buffer
		real   uint64
	}
	var lands []landing
	var shadows []hal.Buffer
	for x := range dsts {
		p := addr(a, x)
		if x.ch == plan.Local || srcs[x] || p == nil || *p == 0 {
			continue
		}
		sh, err := pr.d.Device.Alloc(bytes)
		if err != nil {
			continue
		}
		lands = append(lands, landing{x, sh, *p})
		shadows = append(shadows, sh)
		*p = sh.Addr()
	}
	if len(lands) == 0 {
		return nil, nil
	}
	return func() {
		time.Sleep(Delay)
		for _, l := range lands {
			if dst := pr.d.bytesAt(l.real, bytes); dst != nil {
				// Only the ranges the plan wrote: other ranks may own the rest.
				pr.forEachPutRange(l.x, a.Count, func(off, n int64) { copy(dst[off:off+n], l.shadow.Host()[off:off+n]) })
			}
		}
	}, shadows
}

// forEachPutRange calls f with the byte ranges the plan's transfers write
// into operand x; the union over the blocks of a transfer is its chunk.
func (pr *Program) forEachPutRange(x operand, count int64, f func(off, n int64)) {
	es := int64(pr.esize)
	for _, g := range pr.p.Groups {
		for _, o := range g.Ops {
			if o.Kind != plan.OpTransfer || !slices.Contains(o.Dsts, plan.Ref{Buf: x.buf, Chan: x.ch}) {
				continue
			}
			off, n := plan.ChunkRange(count, pr.esize, o.Chunk, o.NChunks)
			f(off*es, n*es)
		}
	}
}

// staleReads gives the launch of a plan that waits a copy, taken now, of
// every buffer it only reads: what it reads after its waits is what the
// memory held before anything it waited for was written.
func (pr *Program) staleReads(a *plan.Args) []hal.Buffer {
	bytes := a.Count * int64(pr.esize)
	if bytes == 0 || !hasOp(pr.p, plan.OpWait) {
		return nil
	}
	srcs, dsts := uses(pr.p)
	var shadows []hal.Buffer
	for x := range srcs {
		p := addr(a, x)
		if dsts[x] || p == nil || *p == 0 {
			continue
		}
		cur := pr.d.bytesAt(*p, bytes)
		if cur == nil {
			continue
		}
		sh, err := pr.d.Device.Alloc(bytes)
		if err != nil {
			continue
		}
		copy(sh.Host(), cur)
		shadows = append(shadows, sh)
		*p = sh.Addr()
	}
	return shadows
}

func (pr *Program) clearShadows() {
	for _, t := range pr.torn {
		clear(t.shadow.Host())
	}
}

// tearer forwards the packets the host writes into the shadows to the
// peers' scratch while the launch runs: each packet's flags as soon as they
// appear, its data words Delay later, as if a packet were two stores that
// the fabric delivered out of order. It runs beside the launch, since a
// peer's launch may wait for these packets before this one can end.
type tearer struct {
	pr   *Program
	stop chan struct{}
	done chan struct{}
}

func (pr *Program) startTearing() *tearer {
	tr := &tearer{pr: pr, stop: make(chan struct{}), done: make(chan struct{})}
	go tr.run()
	return tr
}

// finish waits until every packet seen has been delivered whole.
func (tr *tearer) finish() {
	close(tr.stop)
	<-tr.done
}

func (tr *tearer) run() {
	defer close(tr.done)
	pr := tr.pr
	pb := pr.p.Scratch.PacketBytes()
	flags, data := []int{4}, []int{0}
	if pr.p.Scratch == plan.LL16 {
		flags, data = []int{4, 12}, []int{0, 8}
	}
	word := func(b []byte, off int) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
	// Header packets (the element count, at the start of every slot of
	// both halves) are delivered whole, so that what tears is data.
	headers := map[int]bool{}
	if len(pr.torn) > 0 {
		stride := int(pr.p.SlotStride(pr.torn[0].shadow.Size()))
		for k := 0; k < 2*pr.p.ScratchSlots; k++ {
			headers[k*stride] = true
		}
	}
	type key struct{ slot, off int }
	flagged := map[key]time.Time{} // packets whose flags went out
	sent := map[key]bool{}         // packets whose data went out too
	stopping := false
	for {
		now := time.Now()
		pendingData := false
		for i, t := range pr.torn {
			sh := t.shadow.Host()
			real := pr.d.bytesAt(t.real, int64(len(sh)))
			if real == nil {
				continue
			}
			for off := 0; off+pb <= len(sh); off += pb {
				k := key{i, off}
				if sent[k] || atomic.LoadUint32(word(sh, off+flags[0])) == 0 {
					continue // delivered, or not written by this launch
				}
				at, ok := flagged[k]
				switch {
				case headers[off]:
					for _, w := range append(append([]int{}, data...), flags...) {
						atomic.StoreUint32(word(real, off+w), atomic.LoadUint32(word(sh, off+w)))
					}
					sent[k] = true
				case !ok:
					for _, w := range flags {
						atomic.StoreUint32(word(real, off+w), atomic.LoadUint32(word(sh, off+w)))
					}
					flagged[k] = now
					pendingData = true
				case now.Sub(at) >= Delay:
					for _, w := range data {
						atomic.StoreUint32(word(real, off+w), atomic.LoadUint32(word(sh, off+w)))
					}
					sent[k] = true
				default:
					pendingData = true
				}
			}
		}
		if !stopping {
			select {
			case <-tr.stop:
				stopping = true
			default:
			}
		}
		if stopping && !pendingData {
			return
		}
		time.Sleep(200 * time.Microsecond)
	}
}
