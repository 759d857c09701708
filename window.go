package weft

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// Memory windows: NCCL's ncclCommWindowRegister (NCCL 2.27 and later), a
// collective registration of one buffer per rank. Every rank maps every
// other rank's window, so a plan can store straight into a peer's part of
// it. With NCCL_WIN_COLL_SYMMETRIC the user also promises that a
// collective's buffers lie at the same offset from the window's head on
// every rank (NCCL's "Window Registration Flags"); a rank then knows each
// peer's buffer from its own, with no exchange at the call, and weft runs:
//
//   - AllReduce through the copy-engine executor's zero-copy form (cear.go)
//     where cearServes takes its size: the reduced windows go straight
//     into the peers' outputs, as through Comm.AllReduce;
//   - below that, AllReduce through Comm.AllReduce's zero-copy kernel tiers
//     (the plans read the peers' inputs and store into their outputs, no
//     scratch) wherever Launch would take an HB plan, whose data passes
//     through scratch, and where it would take an LL plan for a message
//     above Config.WindowLLMaxBytes (LL packets travel through scratch in
//     any case and win the small sizes; Launch's LL tiers reach further,
//     to 2 MiB on 2 GPUs, where the zero-copy 2PA is faster: 2×H100,
//     docs/bench/2026-11-29-h100x2, calls 3–4);
//   - AllGather and ReduceScatter through the direct plans
//     (algorithms.AllGatherDirect, ReduceScatterDirect: each byte stored
//     or read across the link once, no scratch) where Launch would take an
//     HB plan, or an LL plan above Config.WindowLLMaxBytes (the whole
//     output or input), and the copy-engine AllGather does not serve the
//     call; the
//     AllGather needs its output in a window, the ReduceScatter its input;
//   - point-to-point receives into any window (symmetric or not) as
//     zero-copy receives: the window's registration is in the post table
//     (p2ppost.go), as ncclCommRegister's.
//
// Windows are registered in the same order on every rank (NCCL's rule for
// collective calls), so the k-th window of one rank is the k-th of every
// other. A rank whose window is not in memory its backend can export
// (not ncclMemAlloc'd) takes part with nothing; then no rank uses the
// window for zero-copy collectives (every rank learns it in the exchange,
// so the choice stays the same on every rank) and its peers send to it
// through the scratch path. A communicator whose peers cannot map each
// other's memory (links that are not memory-mapped, ranks on several
// nodes) registers windows without an exchange: each serves nothing
// zero-copy, and the call succeeds, as NCCL's does.

// Window is this rank's part of a collectively registered memory window
// (RegisterWindow).
type Window struct {
	base      uint64 // this rank's window head (device address)
	size      int64  // this rank's window bytes
	symmetric bool
	reg       *channels.Registration // every rank's allocation mapped here; nil: none (windowsMappable)
	// heads are every rank's window head as this rank addresses it (its
	// own at its rank), nil when some rank took part with nothing; span
	// is the smallest window of any rank (bytes from the head that every
	// rank's window holds).
	heads []uint64
	span  int64
}

// Symmetric reports whether the window was registered with the symmetric
// promise (NCCL_WIN_COLL_SYMMETRIC).
func (w *Window) Symmetric() bool { return w.symmetric }

// Mapped reports whether every rank's window is mapped here (every rank
// registered exportable memory): the condition for zero-copy collectives.
func (w *Window) Mapped() bool { return w.heads != nil }

// windowCardBytes is a rank's window description in the exchange: its
// offset from the head of its registered allocation, its bytes, and 1 if
// it offered an allocation.
const windowCardBytes = 17

// RegisterWindow registers the window of size bytes at device address
// base with every rank, collectively, in the same order on every rank
// (NCCL's ncclCommWindowRegister). buf is the allocation that holds [base,
// base+size), exported to the peers; nil where this rank's memory cannot
// be exported (the rank takes part with nothing, and the window serves no
// zero-copy collective on any rank). symmetric is NCCL_WIN_COLL_SYMMETRIC:
// the caller promises that every collective whose buffer lies in the
// window uses the same offset from its head on every rank.
//
// Errors: ErrInvalidArgument for a negative size or a range outside buf;
// errors of the exchange
// (a rank that does not take part: the communicator's timeout; a peer's
// malformed description) otherwise.
func (c *Comm) RegisterWindow(base uint64, size int64, buf hal.Buffer, symmetric bool) (*Window, error) {
	fail := func(err error) (*Window, error) {
		return nil, fmt.Errorf("weft: register window on rank %d: %w", c.cfg.Rank, err)
	}
	if size < 0 {
		return fail(fmt.Errorf("size %d: %w", size, hal.ErrInvalidArgument))
	}
	var off uint64
	if buf != nil {
		if base < buf.Addr() || base-buf.Addr() > uint64(buf.Size()) || uint64(size) > uint64(buf.Size())-(base-buf.Addr()) {
			return fail(fmt.Errorf("window [%#x, +%d) is not inside its allocation [%#x, +%d): %w", base, size, buf.Addr(), buf.Size(), hal.ErrInvalidArgument))
		}
		off = base - buf.Addr()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.windowsMappable() {
		w := &Window{base: base, size: size, symmetric: symmetric}
		c.windows = append(c.windows, w)
		return w, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	reg, err := channels.Register(ctx, c.boot, c.dev, buf)
	if err != nil {
		return fail(err)
	}
	card := make([]byte, windowCardBytes)
	binary.LittleEndian.PutUint64(card, off)
	binary.LittleEndian.PutUint64(card[8:], uint64(size))
	if buf != nil {
		card[16] = 1
	}
	cards, err := c.boot.AllGather(ctx, card)
	if err != nil {
		reg.Close()
		return fail(fmt.Errorf("exchange window descriptions: %w", err))
	}
	w := &Window{base: base, size: size, symmetric: symmetric, reg: reg, span: size}
	heads := make([]uint64, len(cards))
	for r, cd := range cards {
		if len(cd) != windowCardBytes || cd[16] > 1 {
			reg.Close()
			return fail(fmt.Errorf("rank %d sent a malformed window description (%d bytes): %w", r, len(cd), hal.ErrRemote))
		}
		poff, psize := binary.LittleEndian.Uint64(cd), binary.LittleEndian.Uint64(cd[8:])
		if cd[16] == 0 {
			heads = nil
			continue
		}
		pb := reg.Local
		if r != c.cfg.Rank {
			pb = reg.Peers[r]
		}
		if pb == nil || psize > uint64(pb.Size()) || poff > uint64(pb.Size())-psize {
			reg.Close()
			return fail(fmt.Errorf("rank %d described a window [%d, +%d) outside its registered allocation: %w", r, poff, psize, hal.ErrRemote))
		}
		w.span = min(w.span, int64(psize))
		if heads != nil {
			heads[r] = pb.Addr() + poff
		}
	}
	w.heads = heads
	if err := c.postAddLocked(reg); err != nil { // zero-copy receives into the window
		reg.Close()
		return fail(err)
	}
	c.windows = append(c.windows, w)
	if w.symmetric && w.heads != nil {
		c.symWindows.Add(1)
	}
	return w, nil
}

// DeregisterWindow unmaps w's peers and ends its zero-copy use; not
// collective. Call it only once the collectives that use w have completed.
func (c *Comm) DeregisterWindow(w *Window) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.windows, w)
	if i < 0 {
		return fmt.Errorf("weft: deregister window on rank %d: not a live window of this communicator: %w", c.cfg.Rank, hal.ErrInvalidArgument)
	}
	c.windows = slices.Delete(c.windows, i, i+1)
	if w.symmetric && w.heads != nil {
		c.symWindows.Add(-1)
	}
	if w.reg == nil {
		return nil
	}
	return errors.Join(c.postRemoveLocked(w.reg), w.reg.Close())
}

// windowsMappable reports whether every rank can map every other rank's
// memory: a memory-mapped device, links that are, one node. The same on
// every rank.
func (c *Comm) windowsMappable() bool {
	_, mm := c.dev.(hal.MemoryMapped)
	return mm && peersMapped(c.cfg) // ce.go
}

// windowPeers returns, for a collective whose buffer on this rank is
// [addr, addr+bytes), the same buffer on every rank as this rank
// addresses it (its own at its rank), when the buffer lies in a
// symmetric window that every rank mapped; nil otherwise. On every rank
// the answer is the same for the same call, by the symmetric promise.
func (c *Comm) windowPeers(addr uint64, bytes int64) []uint64 {
	if c.symWindows.Load() == 0 { // no lock on the launch path of a communicator without windows
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.windows {
		if !w.symmetric || w.heads == nil || addr < w.base {
			continue
		}
		off := addr - w.base
		if off > uint64(w.span) || uint64(bytes) > uint64(w.span)-off {
			continue
		}
		out := make([]uint64, len(w.heads))
		for r, h := range w.heads {
			out[r] = h + off
		}
		return out
	}
	return nil
}

// windowServes returns, for a call that runs zero-copy through a
// symmetric window (see the top of this file), every rank's output as
// this rank addresses it; nil for any other call.
func (c *Comm) windowServes(call Call) []uint64 {
	if call.Coll != algorithms.AllReduce || call.Count <= 0 || !c.cearServes(call, true) {
		return nil
	}
	return c.windowPeers(call.Recv, call.Count*int64(call.Type.Size()))
}

// windowSM returns the zero-copy kernel tier (Comm.AllReduce's) that
// serves call through symmetric windows, with every rank's input and
// output as this rank addresses them (nil where the plan reads none), or
// a nil tier: not an AllReduce, no zero-copy tiers on this communicator,
// an LL plan through Launch, an operator the tier cannot compute, or a
// buffer the plan needs outside every symmetric window. It is local.
func (c *Comm) windowSM(call Call) (a *algo, peerIn, peerOut []uint64) {
	if call.Coll != algorithms.AllReduce || call.Count <= 0 || c.symWindows.Load() == 0 || c.allReduceViaLaunch() {
		return nil, nil, nil
	}
	bytes := call.Count * int64(call.Type.Size())
	if p := c.planFor(call, false); p == nil || (p.Scratch != plan.Simple && bytes <= c.cfg.WindowLLMaxBytes) {
		return nil, nil, nil
	}
	ch, a, err := c.selectPlan(call, true, false)
	if err != nil || !ch.Serves(call.Type, runOp([]algorithms.Choice{ch}, call)) {
		return nil, nil, nil
	}
	needIn, needOut := ch.Plan.Needs()
	if needIn {
		if peerIn = c.windowPeers(call.Send, bytes); peerIn == nil {
			return nil, nil, nil
		}
	}
	if needOut {
		if peerOut = c.windowPeers(call.Recv, bytes); peerOut == nil {
			return nil, nil, nil
		}
	}
	return a, peerIn, peerOut
}

// directKey is the key of the direct plans of a collective in c.colls
// (root −1: no collective has it).
func directKey(coll algorithms.Collective) collKey { return collKey{coll: coll, root: -1} }

// windowDirect returns the direct plan (algorithms.DirectPlans) that
// serves an AllGather or ReduceScatter call through symmetric windows,
// with every rank's output (AllGather) or input (ReduceScatter) as this
// rank addresses it, or a zero Choice: another collective, no zero-copy
// kernels on this communicator, the copy-engine AllGather's call, an LL
// plan through Launch, an operator the plan cannot compute, or the buffer
// outside every symmetric window. It is local.
func (c *Comm) windowDirect(call Call) (ch algorithms.Choice, peers []uint64) {
	if (call.Coll != algorithms.AllGather && call.Coll != algorithms.ReduceScatter) || call.Count <= 0 ||
		c.symWindows.Load() == 0 || c.allReduceViaLaunch() || c.ceServes(call) {
		return algorithms.Choice{}, nil
	}
	bytes := call.Count * int64(call.Type.Size()) * int64(c.cfg.NRanks) // the whole output or input
	if p := c.planFor(call, false); p == nil || (p.Scratch != plan.Simple && bytes <= c.cfg.WindowLLMaxBytes) {
		return algorithms.Choice{}, nil
	}
	choices, err := c.directChoices(call.Coll)
	if err != nil {
		return algorithms.Choice{}, nil
	}
	ch = choices[algorithms.Select(choices, bytes)]
	if call.Coll == algorithms.ReduceScatter && !ch.Serves(call.Type, runOp([]algorithms.Choice{ch}, call)) {
		return algorithms.Choice{}, nil
	}
	buf := call.Recv
	if call.Coll == algorithms.ReduceScatter {
		buf = call.Send
	}
	if peers = c.windowPeers(buf, bytes); peers == nil {
		return algorithms.Choice{}, nil
	}
	return ch, peers
}

// directChoices are the direct plans of coll: those set up already, or
// computed (setting nothing up).
func (c *Comm) directChoices(coll algorithms.Collective) ([]algorithms.Choice, error) {
	c.mu.Lock()
	algos, ok := c.colls[directKey(coll)]
	c.mu.Unlock()
	if ok {
		return choicesOf(algos), nil
	}
	return c.plansOf(directKey(coll))
}

// directAlgo returns the set-up direct plan of coll that is choice ch,
// setting up every direct plan of coll on first use (collAlgos; collective:
// the windowed choice is the same on every rank).
func (c *Comm) directAlgo(coll algorithms.Collective, ch algorithms.Choice) (*algo, error) {
	algos, err := c.collAlgos(directKey(coll))
	if err != nil {
		return nil, err
	}
	for _, a := range algos {
		if a.choice.Plan.Name == ch.Plan.Name {
			return a, nil
		}
	}
	return nil, fmt.Errorf("weft: %v on rank %d: direct plan %s is not set up: %w", coll, c.cfg.Rank, ch.Plan.Name, hal.ErrInvalidArgument)
}

// windowPlanName is the plan that serves call through symmetric windows
// (PlanName), or "".
func (c *Comm) windowPlanName(call Call) string {
	if c.windowServes(call) != nil {
		return cearName
	}
	if a, _, _ := c.windowSM(call); a != nil {
		return a.choice.Plan.Name
	}
	if ch, _ := c.windowDirect(call); ch.Plan != nil {
		return ch.Plan.Name
	}
	return ""
}

// launchWindowed runs call zero-copy through symmetric windows where it
// can and reports whether it did; t is when the call began.
func (c *Comm) launchWindowed(call Call, s hal.Stream, t time.Time) (bool, error) {
	if peers := c.windowServes(call); peers != nil {
		c.windowCalls.Add(1)
		return true, c.launchCEAllReduce(call, s, t, peers)
	}
	a, peerIn, peerOut := c.windowSM(call)
	if a == nil {
		ch, peers := c.windowDirect(call)
		if ch.Plan == nil {
			return false, nil
		}
		var err error
		if a, err = c.directAlgo(call.Coll, ch); err != nil {
			return true, err
		}
		if call.Coll == algorithms.AllGather {
			peerOut = peers
		} else {
			peerIn = peers
		}
	}
	prog, err := c.program(a, call.Type, programKey(a, call).op, call.Count)
	if err != nil {
		return true, err
	}
	c.windowCalls.Add(1)
	return true, c.launchPeers(a, prog, call, peerIn, peerOut, s)
}

// WindowCalls is the number of collectives this communicator has run
// zero-copy through symmetric windows.
func (c *Comm) WindowCalls() int64 { return c.windowCalls.Load() }
