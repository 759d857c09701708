package host

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// Program is a plan prepared for the Go interpreter.
type Program struct {
	dev   *Device
	p     *plan.Plan
	t     plan.DataType
	op    plan.RedOp
	esize int

	scratch []byte
	sems    []byte
	// netScratch and netSems are the network windows of a plan that
	// splits them (plan.Plan.NetSlot), else scratch and sems again.
	netScratch []byte
	netSems    []byte
	netChans   uint64 // the channels whose peers signal netSems (plan.Plan.NetChannels)
	expected   []byte
	state      []byte
	control    []byte
	peers      []peerMem
	fifo       []byte // port-channel FIFO (plans with port channels)
	fifoHead   []byte
	// The switch buffer (plans with one): this rank's copy, and every
	// member's copy in member order (the multicast view).
	sw []byte
	mc [][]byte
	// The mappings of everything above: a launch holds them (inflight.go)
	// from Launch until it has run, so none is unmapped under it.
	inUse []*guard
}

type peerMem struct {
	scratch []byte
	sems    []byte
	// Port channels: the peer's buffers as ImportPort gave them, which
	// engines take and which may not be mapped here (a network's remote
	// addresses); the interpreter computes addresses in them, never
	// dereferences them.
	scratchAddr, semsAddr uint64
}

// Prepare resolves the plan's bindings to this device's mappings.
func (d *Device) Prepare(spec hal.PlanSpec) (hal.Program, error) {
	p := spec.Plan
	if p == nil {
		return nil, fmt.Errorf("host: prepare: nil plan: %w", hal.ErrInvalidArgument)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("host: prepare: %v: %w", err, hal.ErrInvalidArgument)
	}
	if !spec.DataType.Valid() || !spec.RedOp.Valid() {
		return nil, fmt.Errorf("host: prepare %s: data type %v, op %v: %w", p.Name, spec.DataType, spec.RedOp, hal.ErrInvalidArgument)
	}
	if p.SwitchReduces() && !plan.SwitchSupports(spec.DataType, spec.RedOp) {
		return nil, fmt.Errorf("host: prepare %s: the switch cannot reduce %v with %v (plan.SwitchSupports), as the hardware's multimem load-reduce cannot: %w",
			p.Name, spec.DataType, spec.RedOp, hal.ErrInvalidArgument)
	}
	if spec.RedOp == plan.PreMulSum {
		if err := p.ServesPreMulSum(); err != nil {
			return nil, fmt.Errorf("host: prepare %s for PreMulSum on rank %d: %v: %w", p.Name, p.Rank, err, hal.ErrNotSupported)
		}
	}
	b := spec.Bindings
	if len(b.Peers) != len(p.Channels) {
		return nil, fmt.Errorf("host: prepare %s: %d peer bindings for %d channels: %w", p.Name, len(b.Peers), len(p.Channels), hal.ErrInvalidArgument)
	}
	pr := &Program{dev: d, p: p, t: spec.DataType, op: spec.RedOp, esize: spec.DataType.Size()}
	var err error
	res := func(addr uint64, n int64, what string) []byte {
		if err != nil || n == 0 {
			return nil
		}
		s, r, e := d.resolveRegion(addr, n)
		if e != nil {
			err = fmt.Errorf("host: prepare %s: %s: %w", p.Name, what, e)
			return nil
		}
		pr.inUse = addGuard(pr.inUse, &r.inUse)
		return s
	}
	pr.scratch = res(b.Scratch, b.ScratchBytes, "scratch")
	pr.sems = res(b.Semaphores, p.SemaphoreRegionBytes(), "semaphores")
	pr.netScratch, pr.netSems = pr.scratch, pr.sems
	if msg := b.CheckNetRegions(p); msg != "" {
		return nil, fmt.Errorf("host: prepare: %s: %w", msg, hal.ErrInvalidArgument)
	}
	if p.NetSlot > 0 {
		pr.netChans = p.NetChannels()
		ns, nm := b.NetRegions()
		pr.netScratch = res(ns, p.NetScratchBytes(b.ScratchBytes), "network scratch")
		pr.netSems = res(nm, p.SemaphoreRegionBytes(), "network semaphores")
	}
	pr.expected = res(b.Expected, p.ExpectedRegionBytes(), "expected values")
	pr.state = res(b.State, p.StateBytes(), "state")
	pr.control = res(b.Control, plan.ControlBytes, "control block")
	if p.HasPorts() {
		pr.fifo = res(b.Fifo, plan.FifoBytes, "port-channel FIFO")
		pr.fifoHead = res(b.FifoHead, plan.FifoHeadBytes, "port-channel FIFO head")
		if err == nil && (pr.fifo == nil || pr.fifoHead == nil) {
			return nil, fmt.Errorf("host: prepare %s: a plan with port channels needs a FIFO: %w", p.Name, hal.ErrInvalidArgument)
		}
	}
	if p.HasSwitch() {
		if b.Switch == 0 || b.Multicast == 0 || b.SwitchBytes <= 0 {
			return nil, fmt.Errorf("host: prepare %s: a plan with a switch buffer needs its copy, multicast address and capacity bound: %w", p.Name, hal.ErrInvalidArgument)
		}
		pr.sw = res(b.Switch, b.SwitchBytes, "switch buffer")
		if err == nil {
			var m *multicast
			if pr.mc, m, err = d.resolveMulticastGroup(b.Multicast, b.SwitchBytes); err != nil {
				err = fmt.Errorf("host: prepare %s: multicast view: %w", p.Name, err)
			} else {
				pr.inUse = addGuard(pr.inUse, &m.inUse)
			}
		}
	}
	for i, pb := range b.Peers {
		if p.Channels[i].Port {
			pr.peers = append(pr.peers, peerMem{scratchAddr: pb.Scratch, semsAddr: pb.Semaphores})
			continue
		}
		pr.peers = append(pr.peers, peerMem{
			scratch: res(pb.Scratch, b.ScratchBytes, fmt.Sprintf("channel %d scratch", i)),
			sems:    res(pb.Semaphores, p.SemaphoreRegionBytes(), fmt.Sprintf("channel %d semaphores", i)),
		})
	}
	if err != nil {
		return nil, err
	}
	if pr.state == nil || pr.control == nil {
		return nil, fmt.Errorf("host: prepare %s: state and control block are required: %w", p.Name, hal.ErrInvalidArgument)
	}
	return pr, nil
}

func (pr *Program) Close() error { return nil }

// launch is one execution's resolved arguments.
type launch struct {
	*Program
	groups          []groupRun // by group index
	peerIn, peerOut [][]byte
	timeout         time.Duration
	scalar          uint64                 // PreMulSum multiplier (bits of one element)
	scalarPtr       uint64                 // or its address, read when the launch runs
	postTable       []byte                 // the communicator's post table (plan.Args.PostTable), or nil
	inUse           []*guard               // the program's mappings and the arguments'
	aborted         atomic.Pointer[string] // why a Free or Close aborted the launch
}

// abort stops the launch for a Free or Close of memory it uses: a launch
// not yet started returns at once, a running one's blocks stop at their
// next operation or poll (the control block records StatusAborted).
func (l *launch) abort(why string) {
	if !l.aborted.CompareAndSwap(nil, &why) {
		return
	}
	c := l.control
	if atomic.CompareAndSwapUint32(u32(c, plan.CtlStatus), 0, plan.StatusAborted) {
		binary.LittleEndian.PutUint32(c[plan.CtlRank:], uint32(int32(l.p.Rank)))
		binary.LittleEndian.PutUint32(c[plan.CtlPeer:], ^uint32(0))
		binary.LittleEndian.PutUint32(c[plan.CtlChannel:], ^uint32(0))
		binary.LittleEndian.PutUint32(c[plan.CtlSemaphore:], ^uint32(0))
		binary.LittleEndian.PutUint32(c[plan.CtlBlock:], ^uint32(0))
	}
	atomic.StoreUint32(u32(c, plan.CtlAbort), 1)
}

// abortErr is the stream's error for a launch that abort stopped.
func (l *launch) abortErr() error {
	if why := l.aborted.Load(); why != nil {
		return fmt.Errorf("host: launch %s aborted: %s: %w", l.p.Name, *why, hal.ErrInvalidUsage)
	}
	return nil
}

// groupRun is one group's count and buffers in a launch.
type groupRun struct {
	count   int64
	in, out []byte
	skip    bool
	post    uint64 // plan.GroupArgs.Post
}

// Launch checks the arguments and queues one execution on s.
func (pr *Program) Launch(hs hal.Stream, a *plan.Args) error {
	s, ok := hs.(*Stream)
	if !ok || s.dev != pr.dev {
		return fmt.Errorf("host: launch %s: stream of another device: %w", pr.p.Name, hal.ErrInvalidArgument)
	}
	l, err := pr.resolveArgs(a)
	if err != nil {
		return err
	}
	return s.enqueueWork(work{run: l.run, user: l, inUse: l.inUse, what: "a buffer of launch " + pr.p.Name})
}

func (pr *Program) resolveArgs(a *plan.Args) (*launch, error) {
	p := pr.p
	bad := func(f string, args ...any) error {
		return fmt.Errorf("host: launch %s: %s: %w", p.Name, fmt.Sprintf(f, args...), hal.ErrInvalidArgument)
	}
	if a.Count < 0 {
		return nil, bad("negative count %d", a.Count)
	}
	bytes := a.Count * int64(pr.esize)
	if p.MaxBytes > 0 && bytes > p.MaxBytes {
		return nil, bad("%d bytes exceed the plan's limit of %d", bytes, p.MaxBytes)
	}
	if need := p.ScratchBytes(a.Count, pr.esize); need > int64(len(pr.scratch)) {
		return nil, bad("needs %d bytes of scratch, has %d", need, len(pr.scratch))
	}
	if need := p.SwitchBytes(a.Count, pr.esize); need > int64(len(pr.sw)) {
		return nil, bad("needs %d bytes of switch buffer, has %d", need, len(pr.sw))
	}
	l := &launch{Program: pr, timeout: a.Timeout, scalar: a.Scalar, scalarPtr: a.ScalarPtr, inUse: append([]*guard(nil), pr.inUse...)}
	if l.timeout <= 0 {
		l.timeout = plan.DefaultTimeout
	}
	if a.ScalarPtr != 0 { // read when the launch runs: keep it mapped until then
		if _, r, err := pr.dev.resolveRegion(a.ScalarPtr, int64(pr.esize)); err == nil {
			l.inUse = addGuard(l.inUse, &r.inUse)
		}
	}
	res := func(addr uint64, bytes int64, what string) ([]byte, error) {
		if bytes == 0 {
			return nil, nil
		}
		if addr == 0 {
			return nil, bad("%s buffer is null", what)
		}
		b, r, err := pr.dev.resolveRegion(addr, bytes)
		if err != nil {
			return nil, fmt.Errorf("host: launch %s: %s buffer: %w", p.Name, what, err)
		}
		l.inUse = addGuard(l.inUse, &r.inUse)
		return b, nil
	}
	var err error
	// The peers' buffers hold as many segments as the largest of any
	// group's operands (a direct AllGather stores into segment r of every
	// peer's output).
	peerInBytes, peerOutBytes := bytes, bytes
	for gi := range p.Groups {
		g := &p.Groups[gi]
		ga, ok := a.GroupArgs(g)
		if !ok {
			l.groups = append(l.groups, groupRun{skip: true})
			continue
		}
		if ga.Count < 0 {
			return nil, bad("group %d: negative count %d", gi, ga.Count)
		}
		gr := groupRun{count: ga.Count, post: ga.Post}
		if g.Post == nil {
			gr.post = 0
		}
		segIn, segOut := g.Extent()
		gb := ga.Count * int64(pr.esize)
		peerInBytes, peerOutBytes = max(peerInBytes, int64(segIn)*gb), max(peerOutBytes, int64(segOut)*gb)
		if gr.in, err = res(ga.Input, int64(segIn)*gb, fmt.Sprintf("group %d input", gi)); err != nil {
			return nil, err
		}
		if gr.out, err = res(ga.Output, int64(segOut)*gb, fmt.Sprintf("group %d output", gi)); err != nil {
			return nil, err
		}
		l.groups = append(l.groups, gr)
	}
	if a.PostTable != 0 && p.Posts() {
		if l.postTable, err = res(a.PostTable, plan.PostTableBytes(p.NRanks), "post table"); err != nil {
			return nil, err
		}
	}
	needIn, needOut := p.Needs()
	l.peerIn = make([][]byte, len(p.Channels))
	l.peerOut = make([][]byte, len(p.Channels))
	for ch := range p.Channels {
		if needIn {
			if ch >= len(a.PeerInput) {
				return nil, bad("no registered input buffer of channel %d (peer rank %d)", ch, p.Channels[ch].Peer)
			}
			if l.peerIn[ch], err = res(a.PeerInput[ch], peerInBytes, fmt.Sprintf("channel %d peer input", ch)); err != nil {
				return nil, err
			}
		}
		if needOut {
			if ch >= len(a.PeerOutput) {
				return nil, bad("no registered output buffer of channel %d (peer rank %d)", ch, p.Channels[ch].Peer)
			}
			if l.peerOut[ch], err = res(a.PeerOutput[ch], peerOutBytes, fmt.Sprintf("channel %d peer output", ch)); err != nil {
				return nil, err
			}
		}
	}
	return l, nil
}

func u32(b []byte, off int64) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }
func u64(b []byte, off int64) *uint64 { return (*uint64)(unsafe.Pointer(&b[off])) }

// run executes the launch: one goroutine per thread block. It is the
// software analogue of a kernel; its failures go to the control block.
func (l *launch) run() error {
	if err := l.abortErr(); err != nil {
		return err
	}
	if l.scalarPtr != 0 {
		s, err := l.dev.resolve(l.scalarPtr, int64(l.esize))
		if err != nil {
			return fmt.Errorf("host: launch %s: PreMulSum scalar: %w", l.p.Name, err)
		}
		var v [8]byte
		copy(v[:], s)
		l.scalar = binary.LittleEndian.Uint64(v[:])
	}
	var wg sync.WaitGroup
	errs := make(chan error, l.p.Blocks())
	block := 0
	for gi := range l.p.Groups {
		g := &l.p.Groups[gi]
		for part := 0; part < g.Blocks; part++ {
			wg.Add(1)
			go func(g *plan.Group, part, block int) {
				defer wg.Done()
				if err := l.runBlock(g, part, block); err != nil {
					errs <- err
				}
			}(g, part, block)
			block++
		}
	}
	wg.Wait()
	// Each block that ran advances its own launch counter; a group left
	// out of the launch keeps its counters (plan.Plan.StateBytes).
	block = 0
	for gi := range l.p.Groups {
		for part := 0; part < l.p.Groups[gi].Blocks; part++ {
			if !l.groups[gi].skip {
				n := u64(l.state, 8*int64(block))
				atomic.StoreUint64(n, atomic.LoadUint64(n)+1)
			}
			block++
		}
	}
	close(errs)
	if err := l.abortErr(); err != nil {
		return err
	}
	return <-errs
}

type blockCtx struct {
	*launch
	groupRun // the group's count and buffers
	g        *plan.Group
	part     int
	block    int
	window   int64  // window of a windowed group; -1 outside the loop
	wbase    int64  // windows of earlier launches of a rolling group (plan.Group.Rolling)
	posted   []byte // the peer's posted buffer mapped here, while direct ops run
	number   uint64 // the block's launch number (plan.Plan.StateBytes)
	flag     uint32 // the LL flag of that launch (plan.Flag)
	wstart   int64  // first element of the current op's window
	wlen     int64  // elements of every window of the call (plan.Group.WindowElems)
}

func (l *launch) runBlock(g *plan.Group, part, block int) error {
	b := &blockCtx{launch: l, g: g, part: part, block: block}
	for gi := range l.p.Groups {
		if &l.p.Groups[gi] == g {
			b.groupRun = l.groups[gi]
		}
	}
	if b.skip {
		return nil
	}
	b.number = atomic.LoadUint64(u64(l.state, 8*int64(block)))
	b.flag = plan.Flag(b.number)
	if g.Post != nil && b.post != 0 {
		b.window = -1 // direct ops run once, outside windows
		done, ok, err := b.exchangePost(g.Post)
		if !ok || done || err != nil {
			return err
		}
	}
	b.window = -1
	if g.Rolling {
		// Read before this block's first wait advances the count.
		b.wbase = int64(*u64(b.expected, b.p.InboundOffset(b.p.Channels[g.RollChan].Peer, g.RollSem+b.part)))
	}
	for _, o := range g.Before {
		if o.Kind == plan.OpSignal && o.Deferred && b.number == 0 {
			continue // a release of the previous run (plan.Op.Deferred): none before the first
		}
		if ok, err := b.run(o, false); !ok || err != nil {
			return err
		}
	}
	nwin := g.Windows(b.count, l.esize)
	if g.Window > 0 {
		b.wlen = g.WindowElems(b.count, l.esize) // once per call, as the kernels' wlen
	}
	check := plan.FirstWaits(g.Ops)
	for b.window = 0; b.window < nwin; b.window++ {
		for i, o := range g.Ops {
			if !o.Runs(b.window, nwin) {
				continue
			}
			if ok, err := b.run(o, check[i] && b.window == 0); !ok || err != nil {
				return err // a failure is recorded in the control block
			}
		}
	}
	b.window = -1
	check = plan.FirstWaits(g.After)
	for i, o := range g.After {
		if ok, err := b.run(o, check[i]); !ok || err != nil {
			return err
		}
	}
	return nil
}

// run executes one op; false when the block must stop.
func (b *blockCtx) run(o plan.Op, checkCount bool) (bool, error) {
	if b.aborted() {
		return false, nil
	}
	switch {
	case o.Kind == plan.OpSignal && b.port(o.Chan):
		return b.portSignal(o), nil
	case o.Kind == plan.OpFlush && b.port(o.Chan):
		return b.portFlush(o), nil
	case o.Kind == plan.OpTransfer && o.Port:
		return b.portTransfer(o), nil
	}
	switch o.Kind {
	case plan.OpSignal:
		b.signal(o)
		return true, nil
	case plan.OpWait:
		return b.wait(o, checkCount), nil
	case plan.OpFlush:
		return true, nil // memory-channel stores are complete when issued
	case plan.OpTransfer:
		return b.transfer(o)
	}
	return false, fmt.Errorf("host: unknown op kind %d: %w", o.Kind, hal.ErrInternal)
}

func (b *blockCtx) aborted() bool { return atomic.LoadUint32(u32(b.control, plan.CtlAbort)) != 0 }

// fail records the first failure of the launch and makes every block stop.
func (b *blockCtx) fail(status, what uint32, ch, sem int, expected, observed uint64) {
	c := b.control
	if atomic.CompareAndSwapUint32(u32(c, plan.CtlStatus), 0, status) {
		le := binary.LittleEndian
		peer := -1
		if ch >= 0 {
			peer = b.p.Channels[ch].Peer
		}
		le.PutUint32(c[plan.CtlRank:], uint32(int32(b.p.Rank)))
		le.PutUint32(c[plan.CtlPeer:], uint32(int32(peer)))
		le.PutUint32(c[plan.CtlChannel:], uint32(int32(ch)))
		le.PutUint32(c[plan.CtlSemaphore:], uint32(int32(sem)))
		le.PutUint32(c[plan.CtlBlock:], uint32(int32(b.block)))
		le.PutUint32(c[plan.CtlWhat:], what)
		le.PutUint64(c[plan.CtlExpected:], expected)
		le.PutUint64(c[plan.CtlObserved:], observed)
		le.PutUint64(c[plan.CtlLaunch:], b.number)
	}
	atomic.StoreUint32(u32(c, plan.CtlAbort), 1)
}

func (b *blockCtx) signal(o plan.Op) {
	s := o.Sem + b.part
	peer := b.peers[o.Chan].sems
	atomic.StoreUint64(u64(peer, b.p.CountOffset(b.p.Rank, s)), b.tag())
	atomic.AddUint64(u64(peer, b.p.InboundOffset(b.p.Rank, s)), 1)
}

// spin polls ready until it returns true, the deadline passes (false) or
// the launch is aborted (false). It yields for the first spinYields polls
// (a peer block of this process may be about to store), then sleeps with a
// growing pause of at most spinMaxSleep: ranks are often separate
// processes on few cores, and a process that only yields keeps its core
// from the peer it waits for.
func (b *blockCtx) spin(ready func() bool) bool {
	deadline := time.Now().Add(b.timeout)
	for i := 0; ; i++ {
		if ready() {
			return true
		}
		if i&15 == 15 && (b.aborted() || time.Now().After(deadline)) {
			return ready()
		}
		if i < spinYields {
			runtime.Gosched()
			continue
		}
		time.Sleep(min(time.Duration(i-spinYields+1)*time.Microsecond, spinMaxSleep))
	}
}

// spinYields and spinMaxSleep shape spin's backoff (see there).
const (
	spinYields   = 1024
	spinMaxSleep = 100 * time.Microsecond
)

func (b *blockCtx) wait(o plan.Op, checkCount bool) bool {
	s := o.Sem + b.part
	peer := b.p.Channels[o.Chan].Peer
	exp := u64(b.expected, b.p.InboundOffset(peer, s))
	want := *exp + 1
	*exp = want
	if o.Credits > 0 {
		return b.waitCredits(o, peer, want)
	}
	sems := b.inboundRegion(o.Chan)
	inbound := u64(sems, b.p.InboundOffset(peer, s))
	if !b.spin(func() bool { return atomic.LoadUint64(inbound) >= want }) {
		if !b.aborted() || atomic.LoadUint32(u32(b.control, plan.CtlStatus)) == 0 {
			b.fail(plan.StatusTimeout, plan.WhatSemaphore, o.Chan, s, want, atomic.LoadUint64(inbound))
		}
		return false
	}
	if got, tag := atomic.LoadUint64(u64(sems, b.p.CountOffset(peer, s))), b.tag(); checkCount && got != tag {
		if !b.rolling() {
			b.fail(plan.StatusMismatch, plan.WhatSemaphore, o.Chan, s, uint64(b.count), got)
			return false
		}
		if (got^tag)&uint64(b.p.Depth()-1) == 0 {
			b.fail(plan.StatusMismatch, plan.WhatSemaphore, o.Chan, s, uint64(b.count), got>>b.p.RollBits())
			return false
		}
		// Another position's tag: a later window of the writer, perhaps
		// of a later launch, already signalled (plan.Group.Rolling).
	}
	return true
}

// rolling reports whether the block runs a window of a rolling group
// (plan.Group.Rolling).
func (b *blockCtx) rolling() bool { return b.g.Rolling && b.window >= 0 }

// tag is what the block's signals store in the peer's count word and its
// checked waits compare (the kernels' Ctx.tag): the count, or in a window
// of a rolling group count·D + the window's scratch position (D: the
// plan's window depth).
func (b *blockCtx) tag() uint64 {
	if b.rolling() {
		return uint64(b.count)<<b.p.RollBits() | uint64(b.wbase+b.window)&uint64(b.p.Depth()-1)
	}
	return uint64(b.count)
}

// waitCredits is the rest of a credit wait (plan.Op.Credits) whose run
// expects release number want: it passes once every block q of the peer's
// group (as many as this group's) has signalled Sem+q at least want −
// Credits times; the first Credits runs pass at once.
func (b *blockCtx) waitCredits(o plan.Op, peer int, want uint64) bool {
	c := uint64(o.Credits)
	if want <= c {
		return true
	}
	want -= c
	for q := 0; q < b.g.Blocks; q++ {
		s := o.Sem + q
		inbound := u64(b.inboundRegion(o.Chan), b.p.InboundOffset(peer, s))
		if !b.spin(func() bool { return atomic.LoadUint64(inbound) >= want }) {
			if !b.aborted() || atomic.LoadUint32(u32(b.control, plan.CtlStatus)) == 0 {
				b.fail(plan.StatusTimeout, plan.WhatSemaphore, o.Chan, s, want, atomic.LoadUint64(inbound))
			}
			return false
		}
	}
	return true
}

// plain returns the bytes of elements [off, off+n) of a plain operand.
func (b *blockCtx) plain(r plan.Ref, off, n int64) []byte {
	es := int64(b.esize)
	var buf []byte
	switch {
	case r.Buf == plan.Input && r.Chan == plan.Local:
		buf = b.in
	case r.Buf == plan.Output && r.Chan == plan.Local:
		buf = b.out
	case r.Buf == plan.Input:
		buf = b.peerIn[r.Chan]
	case r.Buf == plan.Output:
		buf = b.peerOut[r.Chan]
	case r.Buf == plan.Scratch:
		sc := b.packetSlot(r)
		o := b.scratchOffset(r, off)
		return sc[o : o+n*es]
	case r.Buf == plan.Switch:
		o := b.switchOffset(r, off)
		return b.sw[o : o+n*es]
	case r.Buf == plan.Posted:
		buf = b.posted
	}
	off += int64(r.Seg) * b.count
	return buf[off*es : (off+n)*es]
}

// slotElem is element off of transfer o as its scratch operands count it:
// from the chunk's start in a plan with slot chunks (Plan.SlotChunks).
func (b *blockCtx) slotElem(o plan.Op, off int64) int64 {
	if b.p.SlotChunks > 0 {
		c, _ := b.p.ChunkRange(b.count, b.esize, o.Chunk, o.NChunks)
		return off - c
	}
	return off
}

// scratchOffset is the byte offset of element off of scratch operand r.
func (b *blockCtx) scratchOffset(r plan.Ref, off int64) int64 {
	if b.g.Window > 0 && b.window >= 0 {
		return b.p.WindowScratchOffset(int64(len(b.scratch)), b.esize, b.wbase+b.window, r.Slot, off-b.wstart)
	}
	return b.p.ScratchOffset(int64(len(b.scratch)), b.esize, b.number, r.Slot, off)
}

// packetSlot is the region scratch operand r lies in: the peer's scratch
// of its channel, or this rank's device or network windows
// (plan.Plan.NetSlot).
func (b *blockCtx) packetSlot(r plan.Ref) []byte {
	switch {
	case r.Chan != plan.Local:
		return b.peers[r.Chan].scratch
	case b.p.NetScratchSlot(r.Slot):
		return b.netScratch
	}
	return b.scratch
}

// inboundRegion is the semaphore region the peer of channel ch signals:
// the network's for a split plan's port channels (plan.Plan.NetSlot), the
// device's otherwise.
func (b *blockCtx) inboundRegion(ch int) []byte {
	if b.netChans>>ch&1 != 0 {
		return b.netSems
	}
	return b.sems
}

// partRange is the block's element range of transfer o (in the current
// window of a windowed group, whose start it records in b.wstart).
func (b *blockCtx) partRange(o plan.Op) (off, n int64) {
	off, n = b.p.ChunkRange(b.count, b.esize, o.Chunk, o.NChunks)
	switch {
	case b.g.Window > 0 && b.window >= 0:
		b.wstart, off, n = plan.WindowShare(b.wlen, off, n, b.esize, b.window, b.part, b.g.Blocks)
	case b.g.Span > 0:
		off, n = plan.SpanRange(b.count, b.esize, b.g.Span, b.part, b.g.Blocks)
	default:
		off, n = b.p.PartRange(off, n, b.esize, b.part, b.g.Blocks)
	}
	return off, n
}

func (b *blockCtx) transfer(o plan.Op) (bool, error) {
	off, n := b.partRange(o)
	packets := b.p.Scratch != plan.Simple
	// Headers: block 0 of the group writes the element count ahead of the
	// packets of every destination slot and checks it on every source slot.
	if packets && b.part == 0 {
		for _, r := range o.Dsts {
			if r.Buf == plan.Scratch {
				b.putHeader(r)
			}
		}
		for _, r := range o.Srcs {
			if r.Buf == plan.Scratch && !b.checkHeader(o, r) {
				return false, nil
			}
		}
	}
	if n == 0 {
		return true, nil
	}
	bytes := n * int64(b.esize)
	scale, div := false, false
	if o.Combine {
		scale, div = plan.CombineMode(b.t, b.op)
	} else if o.PostDiv {
		// The final step of a staged reduction: the integer Avg's sum
		// divided once, here (plan.Op.PostDiv).
		_, div = plan.CombineMode(b.t, b.op)
	}
	var acc []byte
	if o.Srcs[0].IsMulticast() {
		// Load-reduce: every member's copy, reduced in member order, as
		// the switch does (Prepare has refused what it cannot reduce).
		so := b.switchOffset(o.Srcs[0], off)
		for i, c := range b.mc {
			if i == 0 {
				acc = append([]byte(nil), c[so:so+bytes]...)
				continue
			}
			reduceInto(acc, c[so:so+bytes], b.t, b.op.Base())
		}
		if div {
			divInto(acc, b.t, b.p.NRanks)
		}
		b.store(o, off, n, acc)
		return true, nil
	}
	for i, r := range o.Srcs {
		var src []byte
		if packets && r.Buf == plan.Scratch {
			src = make([]byte, bytes)
			if !b.unpack(o, r, b.slotElem(o, off), src) {
				return false, nil
			}
		} else {
			src = b.plain(r, off, n)
			if scale || plan.ScalesSource(b.op, r) {
				src = append([]byte(nil), src...)
			}
		}
		// Combine's scaling (floating Avg) or PreMulSum's: this rank's
		// input times its own scalar, where it is read (plan/premul.go).
		if scale || plan.ScalesSource(b.op, r) {
			scaleInto(src, b.t, b.scalar)
		}
		if i == 0 {
			if len(o.Srcs) == 1 && !div {
				acc = src
			} else {
				acc = append([]byte(nil), src...)
			}
			continue
		}
		reduceInto(acc, src, b.t, b.op.Base())
	}
	if div {
		divInto(acc, b.t, b.p.NRanks)
	}
	b.store(o, off, n, acc)
	return true, nil
}

// store writes the value of transfer o (elements [off, off+n)) to each of
// its destinations: packets, plain buffers, or every member's switch copy
// through the multicast view.
func (b *blockCtx) store(o plan.Op, off, n int64, acc []byte) {
	packets := b.p.Scratch != plan.Simple
	for _, r := range o.Dsts {
		switch {
		case r.IsMulticast():
			do := b.switchOffset(r, off)
			for _, c := range b.mc {
				copy(c[do:do+int64(len(acc))], acc)
			}
		case packets && r.Buf == plan.Scratch:
			b.pack(r, b.slotElem(o, off), acc)
		default:
			copy(b.plain(r, off, n), acc)
		}
	}
}

// switchOffset is the byte offset of element off of switch operand r in
// the switch buffer (its window's, in a windowed group).
func (b *blockCtx) switchOffset(r plan.Ref, off int64) int64 {
	capacity := int64(len(b.sw))
	if b.g.Window > 0 && b.window >= 0 {
		return b.p.WindowSwitchOffset(capacity, b.esize, b.window, r.Slot, off-b.wstart)
	}
	return b.p.SwitchOffset(capacity, b.esize, r.Slot, off)
}

func (b *blockCtx) putHeader(r plan.Ref) {
	h := b.packetSlot(r)[b.p.HeaderOffset(int64(len(b.scratch)), b.number, r.Slot):]
	c := uint64(b.count)
	b.storePacket(h, []byte{byte(c), byte(c >> 8), byte(c >> 16), byte(c >> 24), byte(c >> 32), byte(c >> 40), byte(c >> 48), byte(c >> 56)})
}

func (b *blockCtx) checkHeader(o plan.Op, r plan.Ref) bool {
	h := b.packetSlot(r)[b.p.HeaderOffset(int64(len(b.scratch)), b.number, r.Slot):]
	data := make([]byte, b.p.Scratch.PayloadBytes())
	ch := b.headerChannel(o, r)
	if !b.spin(func() bool { return b.loadPacket(h, data) }) {
		if atomic.LoadUint32(u32(b.control, plan.CtlStatus)) == 0 {
			b.fail(plan.StatusTimeout, plan.WhatPacket, ch, -1, uint64(b.flag), uint64(b.observedFlag(h)))
		}
		return false
	}
	var got uint64
	for i := min(len(data), 8) - 1; i >= 0; i-- {
		got = got<<8 | uint64(data[i])
	}
	want := uint64(b.count)
	if b.p.Scratch == plan.LL8 {
		want &= 0xffffffff
	}
	if got != want {
		b.fail(plan.StatusMismatch, plan.WhatPacket, ch, -1, want, got)
		return false
	}
	return true
}

// headerChannel names the channel whose peer writes slot r of local
// scratch: by convention the plan builder gives the slot of peer p the
// channel index of p; fall back to -1 when the plan does otherwise.
func (b *blockCtx) headerChannel(o plan.Op, r plan.Ref) int {
	return b.p.SlotChannel(r.Slot)
}

func (b *blockCtx) observedFlag(pkt []byte) uint32 {
	if b.p.Scratch == plan.LL128 {
		return atomic.LoadUint32(u32(pkt, ll128Flag))
	}
	return atomic.LoadUint32(u32(pkt, 4))
}

// ll128Flag is the offset of an LL128 line's flag: its last word, of which
// this backend uses the low half.
const ll128Flag = plan.LL128Line - 8

// storePacket writes one packet: data words first, then the flags with
// atomic stores, so a reader that sees the flags sees the data. An LL128
// line's data is stored plainly, then its flag: the atomic store orders
// the data before it for a reader that loads the flag atomically (the
// GPU's line is one NVLink write instead).
func (b *blockCtx) storePacket(pkt, data []byte) {
	if b.p.Scratch == plan.LL128 {
		copy(pkt[:len(data)], data)
		atomic.StoreUint32(u32(pkt, ll128Flag), b.flag)
		return
	}
	var d [8]byte
	copy(d[:], data)
	if b.p.Scratch == plan.LL16 {
		atomic.StoreUint32(u32(pkt, 0), binary.LittleEndian.Uint32(d[0:]))
		atomic.StoreUint32(u32(pkt, 8), binary.LittleEndian.Uint32(d[4:]))
		atomic.StoreUint32(u32(pkt, 4), b.flag)
		atomic.StoreUint32(u32(pkt, 12), b.flag)
		return
	}
	atomic.StoreUint32(u32(pkt, 0), binary.LittleEndian.Uint32(d[0:]))
	atomic.StoreUint32(u32(pkt, 4), b.flag)
}

// loadPacket reads one packet into data (payload bytes) if its flags are
// this launch's.
func (b *blockCtx) loadPacket(pkt, data []byte) bool {
	if b.p.Scratch == plan.LL128 {
		if atomic.LoadUint32(u32(pkt, ll128Flag)) != b.flag {
			return false
		}
		copy(data, pkt[:min(len(data), ll128Flag)])
		return true
	}
	if b.p.Scratch == plan.LL16 {
		if atomic.LoadUint32(u32(pkt, 4)) != b.flag || atomic.LoadUint32(u32(pkt, 12)) != b.flag {
			return false
		}
		binary.LittleEndian.PutUint32(data[0:], atomic.LoadUint32(u32(pkt, 0)))
		binary.LittleEndian.PutUint32(data[4:], atomic.LoadUint32(u32(pkt, 8)))
		return true
	}
	if atomic.LoadUint32(u32(pkt, 4)) != b.flag {
		return false
	}
	binary.LittleEndian.PutUint32(data[0:], atomic.LoadUint32(u32(pkt, 0)))
	return true
}

func (b *blockCtx) pack(r plan.Ref, off int64, data []byte) {
	slot := b.packetSlot(r)
	base := b.p.ScratchOffset(int64(len(b.scratch)), b.esize, b.number, r.Slot, off)
	pay, pb := b.p.Scratch.PayloadBytes(), int64(b.p.Scratch.PacketBytes())
	for k := 0; k*pay < len(data); k++ {
		end := min((k+1)*pay, len(data))
		b.storePacket(slot[base+int64(k)*pb:], data[k*pay:end])
	}
}

func (b *blockCtx) unpack(o plan.Op, r plan.Ref, off int64, dst []byte) bool {
	slot := b.packetSlot(r)
	base := b.p.ScratchOffset(int64(len(b.scratch)), b.esize, b.number, r.Slot, off)
	pay, pb := b.p.Scratch.PayloadBytes(), int64(b.p.Scratch.PacketBytes())
	var tmp [plan.LL128Line]byte
	for k := 0; k*pay < len(dst); k++ {
		pkt := slot[base+int64(k)*pb:]
		// Most packets have landed by the time they are read: try once
		// before building the polling closure.
		if !b.loadPacket(pkt, tmp[:]) && !b.spin(func() bool { return b.loadPacket(pkt, tmp[:]) }) {
			if atomic.LoadUint32(u32(b.control, plan.CtlStatus)) == 0 {
				b.fail(plan.StatusTimeout, plan.WhatPacket, b.headerChannel(o, r), -1, uint64(b.flag), uint64(b.observedFlag(pkt)))
			}
			return false
		}
		copy(dst[k*pay:], tmp[:pay])
	}
	return true
}
