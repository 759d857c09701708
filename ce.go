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
)

// The host-issued copy-engine AllGather (WEFT_ALGO=ce; docs/portchannel.md,
// "host-issued CE plan"): no kernel and no proxy. At the call the host
// queues, on the caller's stream, copies of this rank's input into a
// landing slot of every peer and 64-bit flag operations (hal.StreamOps),
// so every operation a wait depends on is queued, on every rank, before
// the wait: no hardware queue shared with an application's streams can
// hold a cycle, which is what stalled the kernel-driven copy-engine plans
// under FSDP2.
//
// Resources, set up collectively on the first call: a landing buffer of
// two halves × (n−1) slots × ceWindow bytes and a flag buffer of four
// 64-bit words per rank, both mapped on every peer. On rank p, the words
// of peer q are data[q][h] (q's window of half h has landed in p's slot
// for q) and free[q][h] (q has copied out p's window of half h, so p may
// write that half of q's slot again).
//
// A call cuts each rank's segment into windows of at most ceWindow bytes;
// window w uses half h = w mod 2. For each window, rank r queues, per peer
// p: a wait for free[p][h] = 1 and its reset to 0; the copy of the window
// into p's slot for r; the write data_p[r][h] = 1. Then, per peer p: a wait
// for data[p][h] = 1 and its reset; the copy of the landed window into
// segment p of the output; the write free_p[r][h] = 1. The free words start
// at 1 (both halves free) and the data words at 0; every flag is reset by
// the rank that waits on it and set again by its peer, so each call leaves
// them as it found them, once the peers have copied out: a CUDA graph
// captured once replays in step (its values are constants), and a rank
// that runs ahead into the next call waits for the free words before it
// writes a half a slower peer has not copied out yet. The own segment is
// copied (unless in place) first.
//
// Lanes (hal.StreamOp.Lane): the pushes (waits for free, copies into the
// peers, data writes) run on the caller's stream, the copy-outs on lane
// 1 and the own segment's copy on lane 2, so that on a GPU three copy
// engines overlap them: window w+1 travels over NVLink while window w is
// copied out of the landing slot. The list stays in the single-stream
// order above, which completes even where every stream shares one
// hardware queue.

// ceAllGatherName is what PlanName says of an AllGather the executor
// serves.
const ceAllGatherName = "all_gather-ce-host-issued"

// ceName is what PlanName says of a call a host-issued executor serves.
func (c *Comm) ceName(call Call) string {
	switch call.Coll {
	case algorithms.AllReduce:
		return cearName
	case algorithms.Reduce:
		return ceReduceName
	}
	return ceAllGatherName
}

// ceWindow is the largest bytes of one window per peer (per half).
const ceWindow = 32 << 20

// ceHostWindow is ceWindow on a device without a GPU (DeviceInfo.Arch ""):
// small, so that tests of moderate sizes cross several windows.
const ceHostWindow = 16 << 10

// The lanes of the executor's operations (hal.StreamOp.Lane): pushes on the
// caller's stream (0).
const (
	ceLaneOut = 1 // copy-outs of landed windows
	ceLaneOwn = 2 // the own segment's copy (out of place)
)

// ceFlagsPerRank is the 64-bit words of the AllGather's flag buffer per
// rank q: data[q][0], data[q][1] (q's window of half h has landed in this
// rank's slot for q), free[q][0], free[q][1] (q has copied out this rank's
// window of half h, so this rank may write that half of q's slot again).
const ceFlagsPerRank = 4

// hostIssued is the resources of one host-issued executor of a
// communicator (the AllGather here, the AllReduce in cear.go), set up
// collectively on its first call: a landing buffer and a flag buffer of
// words 64-bit words per rank, both mapped on every peer. The words of a
// rank q ≠ me are written by q and reset by this rank's waits, except the
// free words, which start at 1 and which q sets back to 1 once it will no
// longer write into the landing half they guard; the words of rank me are
// the executor's own (its lanes ordering each other).
type hostIssued struct {
	what           string // "copy-engine AllGather", for messages
	window         int64
	landing, flags hal.Buffer
	lreg, freg     *channels.Registration
	words          int   // flag words per rank
	free           []int // the words of a peer that start at 1
	// ag and agreg are a second landing buffer, set up on first use: the
	// copy-engine AllReduce's AG slots, which only its staged form (the
	// NCCL ABI's) needs (cearAGLanding).
	ag    hal.Buffer
	agreg *channels.Registration
}

// hostIssuedSpec describes an executor's resources for hostIssuedSetup.
type hostIssuedSpec struct {
	what string
	// window is the bytes of a window per peer on a GPU; on a device
	// without one (DeviceInfo.Arch "") it is ceHostWindow.
	window int64
	// slots is the landing windows per peer: the landing buffer holds
	// slots × (n−1) windows (0 slots: no landing buffer, flags only).
	slots int64
	words int
	free  []int
	// local is the initial value of this rank's own words (missing: 0).
	local []uint64
}

// flag is the byte offset of word of rank q in a flag buffer.
func (st *hostIssued) flag(q, word int) int64 { return int64(8 * (st.words*q + word)) }

// hostIssuedStates are the communicator's host-issued executors set up so
// far.
func (c *Comm) hostIssuedStates() []*hostIssued {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*hostIssued
	for _, st := range []*hostIssued{c.ce, c.cear, c.cered, c.cep2p} {
		if st != nil {
			out = append(out, st)
		}
	}
	return out
}

// ceServes reports whether a host-issued executor serves call through
// Launch: the AllGather (below) or the AllReduce (cear.go) where they can
// run (ceOK), asked for (WEFT_ALGO=ce) or, with no family forced, within
// the AllGather's size bounds (Config.CEMinBytes and CEMaxBytes of its
// output; the AllReduce only under WEFT_ALGO=ce here: cearServes).
func (c *Comm) ceServes(call Call) bool {
	if !c.ceOK {
		return false
	}
	switch call.Coll {
	case algorithms.AllGather:
		switch c.cfg.Algo {
		case algorithms.CEFamily:
			return true
		case "":
			out := call.Count * int64(call.Type.Size()) * int64(c.cfg.NRanks)
			return c.cfg.CEMinBytes > 0 && out >= c.cfg.CEMinBytes && (c.cfg.CEMaxBytes <= 0 || out <= c.cfg.CEMaxBytes)
		}
	case algorithms.AllReduce:
		return c.cearServes(call, false)
	case algorithms.Reduce:
		return c.ceReduceServes(call)
	}
	return false
}

// ceUsable reports whether the executors can serve this communicator by
// default: peer-mapped links on one node and a device whose stream
// operations run (hal.StreamOps.StreamOpsSupport).
func ceUsable(dev hal.Device, cfg algorithms.Config) bool {
	so, ok := dev.(hal.StreamOps)
	if !ok || !peersMapped(cfg) {
		return false
	}
	return so.StreamOpsSupport() == nil
}

// peersMapped reports whether every rank of cfg can map every other's
// memory: links that are memory-mapped, every rank on one node.
func peersMapped(cfg algorithms.Config) bool {
	return !cfg.PortOnly && !slices.ContainsFunc(cfg.Nodes, func(n int) bool { return n != 0 })
}

// hostIssuedSetup returns *slot, setting it up from specOf() on the first
// call (collective: every rank makes the same calls in the same order);
// later calls build no spec.
func (c *Comm) hostIssuedSetup(slot **hostIssued, specOf func() hostIssuedSpec) (*hostIssued, error) {
	c.mu.Lock()
	st := *slot
	c.mu.Unlock()
	if st != nil {
		return st, nil
	}
	spec := specOf()
	n := int64(c.cfg.NRanks)
	st = &hostIssued{what: spec.what, window: spec.window, words: spec.words, free: spec.free}
	if c.dev.Info().Arch == "" {
		st.window = ceHostWindow
	}
	fail := func(what string, err error) (*hostIssued, error) {
		st.close()
		return nil, fmt.Errorf("weft: rank %d: %s: %s: %w", c.cfg.Rank, spec.what, what, err)
	}
	var err error
	if spec.slots > 0 {
		if st.landing, err = c.dev.Alloc(max(1, spec.slots*(n-1)*st.window)); err != nil {
			return fail("landing buffer", err)
		}
	}
	flagBytes := st.flag(int(n), 0)
	if st.flags, err = c.dev.Alloc(flagBytes); err != nil {
		return fail("flags", err)
	}
	init := make([]byte, flagBytes)
	for q := 0; q < int(n); q++ {
		if q == c.cfg.Rank {
			for w, v := range spec.local {
				binary.LittleEndian.PutUint64(init[st.flag(q, w):], v)
			}
			continue
		}
		for _, w := range st.free {
			init[st.flag(q, w)] = 1
		}
	}
	if err := c.dev.Write(st.flags, 0, init); err != nil {
		return fail("flags", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if st.landing != nil {
		st.lreg, err = channels.Register(ctx, c.boot, c.dev, st.landing)
	}
	if err == nil {
		st.freg, err = channels.Register(ctx, c.boot, c.dev, st.flags)
	}
	if err != nil {
		return fail("map on the peers", err)
	}
	c.mu.Lock()
	*slot = st
	c.mu.Unlock()
	return st, nil
}

// awaitQuiet waits until no peer can still write into this rank's
// buffers: the last write of a call into them is each peer's free words
// (set after its copies and data words), so all of them at 1 means the
// peers are done. Up to deadline; a lost or stalled peer is not waited
// for (lost reports it). An error means memory a peer may still write:
// close must not free it.
func (st *hostIssued) awaitQuiet(dev hal.Device, me, n int, deadline time.Time, lost func() bool) error {
	pause := time.Millisecond
	for {
		b := make([]byte, st.flag(n, 0))
		if err := dev.Read(b, st.flags, 0); err != nil {
			return err
		}
		var pending []int
		for q := 0; q < n; q++ {
			if q == me {
				continue
			}
			for _, w := range st.free {
				if binary.LittleEndian.Uint64(b[st.flag(q, w):]) != 1 {
					pending = append(pending, q)
					break
				}
			}
		}
		if len(pending) == 0 || lost() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: ranks %v have not released this rank's landing halves (their last writes into its memory) by the deadline: %w", st.what, pending, hal.ErrRemote)
		}
		time.Sleep(pause)
		pause = min(2*pause, 20*time.Millisecond)
	}
}

// close unmaps the peers' buffers and frees this rank's.
func (st *hostIssued) close() error {
	var errs []error
	for _, r := range []*channels.Registration{st.lreg, st.freg, st.agreg} {
		if r != nil {
			errs = append(errs, r.Close())
		}
	}
	for _, b := range []hal.Buffer{st.landing, st.flags, st.ag} {
		if b != nil {
			errs = append(errs, b.Free())
		}
	}
	return errors.Join(errs...)
}

// ceSlot is the landing slot of sender q on rank p (one per other rank).
func ceSlot(q, p int) int64 {
	if q < p {
		return int64(q)
	}
	return int64(q - 1)
}

// ceOps returns the stream operations of one AllGather of seg bytes per
// rank from input to output (device addresses; output holds n segments),
// for rank me of n (see the comment at the top of this file).
func ceOps(st *hostIssued, me, n int, input, output uint64, seg int64) []hal.StreamOp {
	if seg == 0 {
		return nil
	}
	W := st.window
	nwin := (seg + W - 1) / W
	flag := func(base uint64, q, word int) uint64 { return base + uint64(st.flag(q, word)) }
	slot := func(base uint64, q, p int, h int64) uint64 {
		return base + uint64((h*int64(n-1)+ceSlot(q, p))*W)
	}
	myFlags, myLanding := st.flags.Addr(), st.landing.Addr()
	var ops []hal.StreamOp
	if own := output + uint64(int64(me)*seg); own != input {
		ops = append(ops, hal.StreamOp{Kind: hal.StreamCopy, Dst: own, Src: input, Bytes: seg, Lane: ceLaneOwn})
	}
	for w := int64(0); w < nwin; w++ {
		h := int(w % 2)
		off := w * W
		l := min(W, seg-off)
		for k := 1; k < n; k++ {
			p := (me + k) % n
			free := flag(myFlags, p, 2+h)
			ops = append(ops,
				hal.StreamOp{Kind: hal.StreamWaitEq, Dst: free, Value: 1},
				hal.StreamOp{Kind: hal.StreamWrite, Dst: free, Value: 0},
				hal.StreamOp{Kind: hal.StreamCopy, Dst: slot(st.lreg.Peers[p].Addr(), me, p, int64(h)), Src: input + uint64(off), Bytes: l},
				hal.StreamOp{Kind: hal.StreamWrite, Dst: flag(st.freg.Peers[p].Addr(), me, h), Value: 1})
		}
		for k := 1; k < n; k++ {
			p := (me - k + n) % n
			data := flag(myFlags, p, h)
			ops = append(ops,
				hal.StreamOp{Kind: hal.StreamWaitEq, Dst: data, Value: 1, Lane: ceLaneOut},
				hal.StreamOp{Kind: hal.StreamWrite, Dst: data, Value: 0, Lane: ceLaneOut},
				hal.StreamOp{Kind: hal.StreamCopy, Dst: output + uint64(int64(p)*seg+off), Src: slot(myLanding, p, me, int64(h)), Bytes: l, Lane: ceLaneOut},
				hal.StreamOp{Kind: hal.StreamWrite, Dst: flag(st.freg.Peers[p].Addr(), me, 2+h), Value: 1, Lane: ceLaneOut})
		}
	}
	return ops
}

// queueCE queues a host-issued executor's operations for call on s; t is
// when the operations were built from (WEFT_PROXY_PROFILE's stages).
func (c *Comm) queueCE(call Call, s hal.Stream, ops []hal.StreamOp, t time.Time) error {
	t = c.prof.Since(stageCEBuild, t)
	err := c.dev.(hal.StreamOps).QueueOps(s, ops)
	c.prof.Since(stageCEQueue, t)
	if err != nil {
		return fmt.Errorf("weft: %v on rank %d (host-issued copy engines): %w", call.Coll, c.cfg.Rank, err)
	}
	return nil
}

// ceSetup returns the copy-engine AllGather's resources, which the
// copy-engine Reduce shares (cereduce.go), setting them up on first use
// (collective).
func (c *Comm) ceSetup() (*hostIssued, error) {
	return c.hostIssuedSetup(&c.ce, func() hostIssuedSpec {
		return hostIssuedSpec{what: "copy-engine AllGather and Reduce", window: ceWindow, slots: 2, words: ceFlagsPerRank, free: []int{2, 3}}
	})
}

// launchCE queues the host-issued AllGather (or AllReduce: cear.go; or
// Reduce: cereduce.go) of call on s; t is when the call began
// (WEFT_PROXY_PROFILE's stages).
func (c *Comm) launchCE(call Call, s hal.Stream, t time.Time) error {
	if call.Coll == algorithms.AllReduce {
		return c.launchCEAllReduce(call, s, t, nil) // cear.go
	}
	if call.Coll == algorithms.Reduce {
		return c.launchCEReduce(call, s, t) // cereduce.go
	}
	st, err := c.ceSetup()
	if err != nil {
		return err
	}
	if err := c.launched(s); err != nil {
		return err
	}
	seg := call.Count * int64(call.Type.Size())
	ops := ceOps(st, c.cfg.Rank, c.cfg.NRanks, call.Send, call.Recv, seg)
	return c.queueCE(call, s, ops, t)
}
