package weft

import (
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/env"
)

// Copy-engine point-to-point (docs/collectives.md, "Copy-engine
// point-to-point"): a send of at least Config.CEP2PMinBytes bytes on a
// communicator whose peers are all memory-mapped on one node is one copy
// by the sender's copy engines straight into the receiver's buffer, with
// no kernel, no SM and no scratch. Copy engines move 395.6 GB/s one way
// over an H100's NVLink where SM stores reach 367
// (docs/bench/2026-11-28-h100x2, call 1), the ceiling of every SM plan's
// large sends, gathers and scatters (NCCL's included).
//
// The receiver's buffer is any memory of its device. At the call, over
// the bootstrap (messages of one pair and tag arrive in order, and the
// k-th send to a peer matches the peer's k-th receive, as NCCL matches
// them), in three steps that each wait only for the step before on the
// peers: (1) each receiver exports the allocation that holds its buffer
// (hal.RangeExporter: CUDA IPC for cudaMalloc memory) and sends the
// handle, the offset, the size and the allocation's base address to the
// sender (tag ceP2PTagRecv), or a refusal where it cannot export it; (2) each sender maps the allocation
// (once: importCache), checks the range and answers whether it copies
// (ceP2PTagSend); (3) each receiver reads the answer. An operation whose
// buffer overlaps one going the other way in the same group is refused
// by the rank that holds both (the kernels stage such sends). So both
// ranks of a pair always agree on which operations the copy engines move,
// and no order of calls across ranks (or across the communicators that
// one thread drives in a group) can deadlock the exchange; but a large
// send's enqueue returns only once its receiver has enqueued the receive
// (docs/nccl.md). Under CUDA graph capture the exchange runs once, at
// capture; the graph replays the copies.
//
// On the streams (hal.StreamOps, every value a constant, so a captured
// graph replays in step), per round of the group (p2pRounds): the
// receiver writes ready = 1 into the sender's flag word for it (its
// stream has reached the call: whatever used the buffer before is done);
// the sender, on lane 1 + peer mod 3, waits for ready = 1, resets it,
// copies, and writes done = 1 into the receiver's word for it; the
// receiver, on the caller's stream once the lanes have joined it, waits
// for done = 1 and resets it. A copy to itself of the same size runs on
// the caller's stream, by the copy kernel on a few SMs (a copy engine
// beside the sends slowed a root's pushes: docs/collectives.md). The kernels of the group's other
// operations are queued first on every rank, the copy-engine operations
// after them, so neither can wait on the other in a cycle. Each round's
// ready words are written only after the previous round's done words
// came back, so a word is never written twice before its waiter reset it.
// The flag buffer (two words per rank, mapped on every peer) is set up in
// NewComm, since point-to-point calls need not involve every rank.

// The bootstrap tags of the copy-engine point-to-point exchange: a
// receiver's description of its buffer, or a refusal (ceP2PTagRecv), and
// the sender's answer (ceP2PTagSend: 1 if it copies).
const (
	ceP2PTagSend = 0x63655053 // "cePS"
	ceP2PTagRecv = 0x63655052 // "cePR"
)

// ceP2PMismatch is the sender's answer to a receive of another size than
// its send (0: the kernels move it; 1: the copy engines do).
const ceP2PMismatch = 2

// The flag words per rank of the copy-engine point-to-point executor: on
// rank p, ready of rank q is written by q when it is ready to receive
// from p; done of rank q is written by q when its copy into p's buffer
// has completed.
const (
	ceP2PReady = iota
	ceP2PDone
	ceP2PWords
)

// ceP2PMaxImports is how many peer allocations a communicator keeps
// mapped for the copy-engine point-to-point path; the least recently used
// is unmapped beyond it.
const ceP2PMaxImports = 32

// ceP2POp is one operation of a group that the copy engines move.
type ceP2POp struct {
	round int
	P2P
	dst uint64 // sends: the receiver's buffer, mapped here
	src uint64 // copies to itself: the send's buffer
}

// setupCEP2P sets up the flag buffer of the copy-engine point-to-point
// path where it is on (collective: from NewComm).
func (c *Comm) setupCEP2P() error {
	if c.cfg.CEP2PMinBytes <= 0 || c.cfg.NRanks < 2 {
		return nil
	}
	_, err := c.hostIssuedSetup(&c.cep2p, func() hostIssuedSpec {
		return hostIssuedSpec{what: "copy-engine point-to-point", words: ceP2PWords}
	})
	return err
}

// ceP2PSplit takes out of rounds the operations the copy engines move
// (from min bytes, where the path is on) and returns them, after the
// exchange with the peers (see the comment at the top of this file). The
// rounds keep the operations the kernels move, in their order.
func (c *Comm) ceP2PSplit(rounds [][]P2P, min int64, s hal.Stream) ([]ceP2POp, error) {
	if c.cep2p == nil || c.cfg.CEP2PMinBytes <= 0 {
		return nil, nil
	}
	return c.ceP2PExchange(rounds, min, overlapsGroup, s)
}

// ceP2PExchange is ceP2PSplit for the operations of at least min bytes
// (none where min ≤ 0), each rank refusing the operations for which
// refuse(group, o, me) holds (nil: none), for a call on stream s (a
// mapping made while s captures a graph is kept until Close:
// importCache): the copy-engine Reduce into the root's output
// (cereduce.go) and the AllReduce into the peers' outputs (cear.go) run
// it on groups of their own.
func (c *Comm) ceP2PExchange(rounds [][]P2P, min int64, refuse func(group []P2P, o P2P, me int) bool, s hal.Stream) ([]ceP2POp, error) {
	if refuse == nil {
		refuse = func([]P2P, P2P, int) bool { return false }
	}
	if min <= 0 {
		return nil, nil
	}
	// The small operations' path (LL latency) pays this scan only.
	large := false
	for _, round := range rounds {
		for _, o := range round {
			large = large || o.Bytes >= min
		}
	}
	if !large {
		return nil, nil
	}
	if !c.exportable() {
		return nil, nil
	}
	pm, ex, mm := c.boot.(peerMessenger), c.dev.(hal.RangeExporter), c.dev.(hal.MemoryMapped)
	pin := c.capturing(s)
	me := c.cfg.Rank
	group := slices.Concat(rounds...)
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	// Three steps, each waiting only for the step before on the peers:
	// receivers describe (or refuse) their buffers; senders map them and
	// answer whether they copy; receivers learn the answers.
	var ops []ceP2POp
	for r, round := range rounds {
		for _, o := range round {
			if o.Bytes >= min && o.Peer != me {
				ops = append(ops, ceP2POp{round: r, P2P: o})
			}
		}
	}
	t := c.p2pProf.Now()
	offered := make([]bool, len(ops))
	for i, o := range ops {
		if o.Send {
			continue
		}
		msg := []byte{0}
		if !refuse(group, o.P2P, me) {
			msg = ceP2PDescribe(ex, o.P2P)
		}
		offered[i] = msg[0] == 1
		if err := pm.Send(ctx, o.Peer, ceP2PTagRecv, msg); err != nil {
			return nil, fmt.Errorf("weft: point-to-point on rank %d: describing a %d-byte receive to rank %d: %w", me, o.Bytes, o.Peer, err)
		}
	}
	t = c.p2pProf.Since(p2pStageCEDescribe, t)
	keep := make([]ceP2POp, 0, len(ops)+len(rounds))
	for _, o := range ops {
		if !o.Send {
			continue
		}
		msg, err := pm.Recv(ctx, o.Peer, ceP2PTagRecv)
		if err != nil {
			return nil, fmt.Errorf("weft: point-to-point on rank %d: waiting for rank %d's receive buffer for a %d-byte send: %w", me, o.Peer, o.Bytes, err)
		}
		dst, ok, rerr := c.ceP2PResolve(mm, o, msg, pin)
		ok = ok && rerr == nil && !refuse(group, o.P2P, me)
		answer := byte(b2i(ok))
		if errors.Is(rerr, hal.ErrInvalidUsage) {
			answer = ceP2PMismatch
		}
		// Answered even on an error, so that the receiver does not wait
		// out the timeout.
		if err := pm.Send(ctx, o.Peer, ceP2PTagSend, []byte{answer}); err != nil {
			return nil, fmt.Errorf("weft: point-to-point on rank %d: answering rank %d on a %d-byte send: %w", me, o.Peer, o.Bytes, err)
		}
		if rerr != nil {
			return nil, rerr
		}
		if ok {
			o.dst = dst
			keep = append(keep, o)
		}
	}
	t = c.p2pProf.Since(p2pStageCEAnswer, t)
	for i, o := range ops {
		if o.Send {
			continue
		}
		msg, err := pm.Recv(ctx, o.Peer, ceP2PTagSend)
		if err != nil {
			return nil, fmt.Errorf("weft: point-to-point on rank %d: waiting for rank %d's answer on a %d-byte receive: %w", me, o.Peer, o.Bytes, err)
		}
		if len(msg) == 1 && msg[0] == ceP2PMismatch {
			return nil, fmt.Errorf("weft: point-to-point on rank %d: rank %d sends another size than this rank's %d-byte receive: a send and its receive must have the same size: %w", me, o.Peer, o.Bytes, hal.ErrInvalidUsage)
		}
		if len(msg) != 1 || msg[0] > 1 || (msg[0] == 1 && !offered[i]) {
			return nil, fmt.Errorf("weft: point-to-point on rank %d: rank %d's answer on a %d-byte receive is malformed (%d bytes): %w", me, o.Peer, o.Bytes, len(msg), hal.ErrRemote)
		}
		if msg[0] == 1 {
			keep = append(keep, o)
		}
	}
	c.p2pProf.Since(p2pStageCEAgree, t)
	// Copies to itself: where neither half overlaps another operation.
	for r, round := range rounds {
		send := slices.IndexFunc(round, func(o P2P) bool { return o.Peer == me && o.Send })
		recv := slices.IndexFunc(round, func(o P2P) bool { return o.Peer == me && !o.Send })
		if send < 0 || recv < 0 || round[recv].Bytes < min || refuse(group, round[send], me) || refuse(group, round[recv], me) {
			continue
		}
		keep = append(keep, ceP2POp{round: r, P2P: round[recv], src: round[send].Buf})
	}
	slices.SortStableFunc(keep, func(a, b ceP2POp) int { return a.round - b.round })
	// The rounds keep what the copy engines do not move.
	moved := map[[3]int]bool{} // round, peer, send
	for _, o := range keep {
		moved[[3]int{o.round, o.Peer, b2i(o.Send)}] = true
		if o.Peer == me {
			moved[[3]int{o.round, me, 1}] = true
		}
	}
	for r, round := range rounds {
		k := round[:0]
		for _, o := range round {
			if o.Bytes < min || !moved[[3]int{r, o.Peer, b2i(o.Send)}] {
				k = append(k, o)
			}
		}
		rounds[r] = k
	}
	return keep, nil
}

// overlapsGroup reports whether o's buffer overlaps the buffer of an
// operation of group that goes the other way (a receive for a send, a
// send for a receive), other than o's own half of an in-place copy to
// this rank (me): such a pair would race on the copy engines, so the
// kernels move it (they stage overlapping sends: stageOverlapping).
func overlapsGroup(group []P2P, o P2P, me int) bool {
	for _, g := range group {
		if g.Send == o.Send || g.Bytes == 0 || o.Bytes == 0 {
			continue
		}
		if g.Peer == me && o.Peer == me && g.Buf == o.Buf {
			continue
		}
		if overlaps(o.Buf, uint64(o.Bytes), g.Buf, uint64(g.Bytes)) {
			return true
		}
	}
	return false
}

// ceP2PDescribe is the message a receiver sends for operation o: 1, the
// offset and size of the buffer in its allocation, the allocation's base
// address on the receiver (which identifies its place, so that a sender
// unmaps an allocation freed and replaced there: importCache) and its
// handle; or 0 where the buffer cannot be exported (the kernels move it).
func ceP2PDescribe(ex hal.RangeExporter, o P2P) []byte {
	h, off, err := ex.ExportRange(o.Buf, o.Bytes)
	if err != nil {
		return []byte{0}
	}
	msg := make([]byte, ceP2PDescHeader, ceP2PDescHeader+len(h))
	msg[0] = 1
	binary.LittleEndian.PutUint64(msg[1:], uint64(off))
	binary.LittleEndian.PutUint64(msg[9:], uint64(o.Bytes))
	binary.LittleEndian.PutUint64(msg[17:], o.Buf-uint64(off))
	return append(msg, h...)
}

// ceP2PDescHeader is the bytes of a description before the handle.
const ceP2PDescHeader = 25

// ceP2PResolve checks a receiver's message for send o and returns the
// receiver's buffer mapped here (pinned in importCache when pin is set);
// ok is false where the receiver refused
// or its allocation cannot be mapped here (the kernels move the
// operation). A message that is malformed or describes a range outside
// the allocation it names is an error wrapping hal.ErrRemote; one of
// another size than the send's, hal.ErrInvalidUsage.
func (c *Comm) ceP2PResolve(mm hal.MemoryMapped, o ceP2POp, msg []byte, pin bool) (dst uint64, ok bool, err error) {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("weft: point-to-point on rank %d: rank %d's receive buffer for a %d-byte send: %s: %w", c.cfg.Rank, o.Peer, o.Bytes, fmt.Sprintf(f, a...), hal.ErrRemote)
	}
	switch {
	case len(msg) == 1 && msg[0] == 0:
		return 0, false, nil
	case len(msg) <= ceP2PDescHeader || msg[0] != 1:
		return 0, false, bad("malformed description (%d bytes)", len(msg))
	}
	off, size, base := binary.LittleEndian.Uint64(msg[1:]), binary.LittleEndian.Uint64(msg[9:]), binary.LittleEndian.Uint64(msg[17:])
	if size != uint64(o.Bytes) {
		return 0, false, fmt.Errorf("weft: point-to-point on rank %d: rank %d receives %d bytes where this rank sends %d: a send and its receive must have the same size: %w", c.cfg.Rank, o.Peer, size, o.Bytes, hal.ErrInvalidUsage)
	}
	b, err := c.imports.get(mm, importPlace{o.Peer, base}, hal.Handle(msg[ceP2PDescHeader:]), pin)
	if err != nil {
		// Memory this device cannot map (another host's, say): the
		// kernels move the operation.
		env.Logger("COLL").Debug("copy-engine point-to-point: the receiver's buffer cannot be mapped here; kernels move it", "rank", c.cfg.Rank, "peer", o.Peer, "bytes", o.Bytes, "err", err)
		return 0, false, nil
	}
	if off > uint64(b.Size()) || size > uint64(b.Size())-off {
		return 0, false, bad("range [%d, %d) outside its %d-byte allocation", off, off+size, b.Size())
	}
	return b.Addr() + off, true, nil
}

// ceP2PQueue queues the copy-engine operations of a group on s, round by
// round (see the comment at the top of this file), in batches that each
// start once the one before has ended on s (hal.StreamOps forks the
// lanes at a batch's start and joins them at its end): the ready words;
// the copies to itself and the sends (each peer's on its own lane); the
// waits for the done words (queued with the next round's ready words). A
// wait queued beside the copies, or a send's wait beside the ready
// words, would be free to take a hardware queue ahead of what it waits
// for: a CUDA graph orders its nodes by their dependencies only, and a
// wait that blocks a queue stalls what follows it there. On 2×H100 (docs/bench/2026-11-27b-h100x2, call 1)
// that serialised the two directions of a sendrecv (1 GB in 5.4 ms
// against 1.37 ms one way).
func (c *Comm) ceP2PQueue(ops []ceP2POp, s hal.Stream) error {
	if len(ops) == 0 {
		return nil
	}
	st, me := c.cep2p, c.cfg.Rank
	mine := st.flags.Addr()
	// Copies to itself run on SMs (a few blocks of the copy kernel): the
	// copy engines stay with the links (a root's sends in a Scatter or
	// Broadcast). Without the kernel (it did not compile) a copy engine
	// does them: the peers have agreed on the copies already.
	var own cearShape
	if slices.ContainsFunc(ops, func(o ceP2POp) bool { return o.Peer == me && o.Buf != o.src }) {
		if kern, err := c.cearReduceKernel(plan.Uint8, plan.Sum); err != nil {
			env.Logger("COLL").Warn("copy-engine point-to-point: no copy kernel; copies to itself on a copy engine", "rank", me, "err", err)
		} else if kern.copyFn != nil {
			own = cearShape{copy: kern.copyFn, blocks: c.cearBlocks(), threads: c.cfg.CEAllReduce.Threads}
		}
	}
	flag := func(base uint64, q, word int) uint64 { return base + uint64(st.flag(q, word)) }
	queue := func(q []hal.StreamOp) error {
		if len(q) == 0 {
			return nil
		}
		if err := c.dev.(hal.StreamOps).QueueOps(s, q); err != nil {
			return fmt.Errorf("weft: point-to-point on rank %d (copy engines): %w", me, err)
		}
		return nil
	}
	var waits []hal.StreamOp // the previous round's, on s before this round's ready words
	for first := 0; first < len(ops); {
		last := first
		for last < len(ops) && ops[last].round == ops[first].round {
			last++
		}
		round := ops[first:last]
		first = last
		readies, moves := waits, []hal.StreamOp(nil)
		waits = nil
		for _, o := range round {
			if !o.Send && o.Peer != me {
				readies = append(readies, hal.StreamOp{Kind: hal.StreamWrite, Dst: flag(st.freg.Peers[o.Peer].Addr(), me, ceP2PReady), Value: 1})
				done := flag(mine, o.Peer, ceP2PDone)
				waits = append(waits,
					hal.StreamOp{Kind: hal.StreamWaitEq, Dst: done, Value: 1},
					hal.StreamOp{Kind: hal.StreamWrite, Dst: done, Value: 0})
			}
		}
		for _, o := range round {
			switch {
			case o.Peer == me:
				if o.Buf != o.src {
					moves = append(moves, hal.StreamOp{Kind: hal.StreamCopy, Dst: o.Buf, Src: o.src, Bytes: o.Bytes,
						Kernel: own.copy, Blocks: own.blocks, Threads: own.threads})
				}
			case o.Send:
				lane := uint8(1 + o.Peer%(hal.MaxStreamLanes-1))
				ready := flag(mine, o.Peer, ceP2PReady)
				moves = append(moves,
					hal.StreamOp{Kind: hal.StreamWaitEq, Dst: ready, Value: 1, Lane: lane},
					hal.StreamOp{Kind: hal.StreamWrite, Dst: ready, Value: 0, Lane: lane},
					hal.StreamOp{Kind: hal.StreamCopy, Dst: o.dst, Src: o.Buf, Bytes: o.Bytes, Lane: lane},
					hal.StreamOp{Kind: hal.StreamWrite, Dst: flag(st.freg.Peers[o.Peer].Addr(), me, ceP2PDone), Value: 1, Lane: lane})
			}
		}
		if err := queue(readies); err != nil {
			return err
		}
		if err := queue(moves); err != nil {
			return err
		}
	}
	if err := queue(waits); err != nil {
		return err
	}
	c.ceP2POps.Add(int64(len(ops)))
	return nil
}

// ceP2PServes reports whether the copy-engine point-to-point path takes
// call (Launch, PlanName, PlanSMs): a Broadcast on two ranks of at least
// ceP2PBroadcastFactor × Config.CEP2PMinBytes bytes, an out-of-place
// SendRecv (LaunchP2P's, named for PlanName: sends, receives, gathers and
// scatters) with operations of at least Config.CEP2PMinBytes, or an
// out-of-place AllToAll on two ranks with segments of at least
// ceP2PAllToAllMin. Launch runs the
// Broadcast and AllToAll as groups of sends and receives (broadcastP2P,
// allToAllP2P), whose operations the exchange may still give back to the
// point-to-point kernels.
func (c *Comm) ceP2PServes(call Call) bool {
	min := c.cfg.CEP2PMinBytes
	if min <= 0 || c.cep2p == nil {
		return false
	}
	bytes := call.Count * int64(call.Type.Size())
	switch call.Coll {
	case algorithms.Broadcast:
		// With the root's copy of its own output on a copy engine the SM
		// plan led at 64–128 MB (2×H100, docs/bench/2026-11-27b-h100x2,
		// call 3); with that copy on SMs the engines lead from 64 MB
		// (1.08× NCCL against 1.07× at 64 MB, 1.10× against 1.06× at
		// 128 MB) but not at 32 MB (1.05× against 1.11×;
		// docs/bench/2026-11-27c-h100x2, calls 8–9). Two ranks only: past
		// two the root's engines would send the message once per peer, as
		// the all-pairs SM plan did (4×H100: 0.34–0.40× NCCL at 32–512 MB),
		// where the split SM plan sends it once (algorithms.BroadcastSplitHB;
		// docs/bench/2026-11-27d-h100x2); an explicit WEFT_CE_P2P_MIN_BYTES
		// past two ranks (hal/nvlink's default is 0 there) leaves them to it.
		return c.cfg.NRanks == 2 && bytes >= ceP2PBroadcastFactor*min
	case algorithms.SendRecv: // in place, overlapping sends go to the kernels
		return bytes >= min && call.Send != call.Recv
	case algorithms.AllToAll:
		// Two ranks only: past two every rank's engines serve n−1 peers at
		// once and lost to the SM plan (4×H100, docs/bench/2026-11-27g-h100x4,
		// call 9: 0.53–0.64× NCCL from 128 MB on 3 and 4 ranks against
		// 0.93–1.95 on SMs).
		return c.cfg.NRanks == 2 && bytes >= c.ceP2PAllToAllMin() && call.Send != call.Recv
	}
	return false
}

// ceP2PAllToAllMin is the smallest segment of an out-of-place AllToAll
// that Launch moves on copy engines: half of Config.CEP2PMinBytes. On
// 2×H100 (docs/bench/2026-11-27c-h100x2, call 9) 16 MiB segments took
// NCCL's time × 1.30 there against the SM plan's 1.11–1.15, where 16 MiB
// sends, gathers and scatters lost to their kernels.
func (c *Comm) ceP2PAllToAllMin() int64 { return max(1, c.cfg.CEP2PMinBytes/2) }

// ceP2PBroadcastFactor scales the copy-engine point-to-point bound for a
// Broadcast (ceP2PServes).
const ceP2PBroadcastFactor = 2

// ceP2PName is what PlanName says of a call ceP2PServes takes.
func ceP2PName(call Call) string { return call.Coll.String() + "-ce-host-issued" }

// launchCEP2P runs a Broadcast or AllToAll that ceP2PServes takes as one
// group of point-to-point operations.
func (c *Comm) launchCEP2P(call Call, s hal.Stream) error {
	if call.Coll == algorithms.AllToAll {
		return c.allToAllP2P(call, s, c.ceP2PAllToAllMin())
	}
	return c.broadcastP2P(call, s)
}

// broadcastP2P runs a Broadcast as one group: the root sends its buffer to
// every other rank (and copies it into its output out of place), the
// others receive it.
func (c *Comm) broadcastP2P(call Call, s hal.Stream) error {
	bytes := call.Count * int64(call.Type.Size())
	var ops []P2P
	if c.cfg.Rank != call.Root {
		ops = []P2P{{Peer: call.Root, Buf: call.Recv, Bytes: bytes}}
	} else {
		for p := 0; p < c.cfg.NRanks; p++ {
			if p != call.Root {
				ops = append(ops, P2P{Peer: p, Send: true, Buf: call.Send, Bytes: bytes})
			}
		}
		if call.Send != call.Recv {
			ops = append(ops, P2P{Peer: call.Root, Send: true, Buf: call.Send, Bytes: bytes}, P2P{Peer: call.Root, Buf: call.Recv, Bytes: bytes})
		}
	}
	if err := c.LaunchP2P(ops, s); err != nil {
		return fmt.Errorf("weft: %v on rank %d as point-to-point: %w", call.Coll, c.cfg.Rank, err)
	}
	return nil
}

// ExportedCalls is the number of collectives this communicator has run on
// copy engines into outputs exported at the call: Reduces pushed into the
// root's output (cereduce.go) and AllReduces through Launch into the
// peers' outputs (cear.go); a captured graph's once.
func (c *Comm) ExportedCalls() int64 { return c.ceRedDirect.Load() + c.cearExported.Load() }

// CopyEngineP2POps is the number of point-to-point operations (sends,
// receives and copies to itself) this communicator has queued on copy
// engines (Config.CEP2PMinBytes; a captured graph's count once).
func (c *Comm) CopyEngineP2POps() int64 { return c.ceP2POps.Load() }

// peerMessenger is the part of a bootstrap that carries messages between
// two ranks (bootstrap.Bootstrap has it): the copy-engine point-to-point
// path needs it, and is off without it.
type peerMessenger interface {
	Send(ctx context.Context, peer int, tag uint32, data []byte) error
	Recv(ctx context.Context, peer int, tag uint32) ([]byte, error)
}

// importCache maps peers' allocations for the copy-engine point-to-point
// path, by handle (a new allocation, even at an old address, has a new
// handle), at most ceP2PMaxImports of them, the least recently used
// unmapped first. A mapping keeps its allocation's memory alive on the
// peer's device after the peer frees it (CUDA IPC; the contents are then
// undefined, and nothing writes there: every call names the receiver's
// current allocation), so a handle for the place (peer, base address) of
// a mapped allocation unmaps the old one at once: the peer freed it. The
// MPI libraries' CUDA IPC caches (UCX's cuda_ipc, Open MPI's smcuda) keep
// mappings of user buffers the same way.
//
// A mapping that a graph capture used is pinned: every replay of the
// graph copies into it again, so it is never the least recently used one
// unmapped, and one replaced at its place is set aside (retired), still
// mapped; pinned and retired mappings are unmapped at close. (Unmapped,
// its addresses could be mapped again for another allocation, and a
// replay would write there.) They do not count against ceP2PMaxImports.
type importCache struct {
	mu      sync.Mutex
	order   *list.List // of *importEntry, most recent first
	byKey   map[string]*list.Element
	places  map[importPlace]*list.Element
	pinned  int          // entries of order that are pinned
	retired []hal.Buffer // pinned mappings replaced at their place
}

// importPlace is where an allocation lives: the peer and its base address
// there.
type importPlace struct {
	peer int
	base uint64
}

type importEntry struct {
	key    string
	place  importPlace
	buf    hal.Buffer
	pinned bool
}

// get returns the mapping of handle h of the allocation at place,
// importing it on first use; pin pins it (a graph capture uses it).
func (ic *importCache) get(dev hal.MemoryMapped, place importPlace, h hal.Handle, pin bool) (hal.Buffer, error) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.byKey == nil {
		ic.order, ic.byKey, ic.places = list.New(), map[string]*list.Element{}, map[importPlace]*list.Element{}
	}
	if e, ok := ic.byKey[string(h)]; ok {
		ic.order.MoveToFront(e)
		ent := e.Value.(*importEntry)
		if pin && !ent.pinned {
			ent.pinned = true
			ic.pinned++
		}
		return ent.buf, nil
	}
	if e, ok := ic.places[place]; ok { // replaced at its address: freed
		if err := ic.drop(e); err != nil {
			return nil, err
		}
	}
	b, err := dev.Import(h)
	if err != nil {
		return nil, err
	}
	e := ic.order.PushFront(&importEntry{key: string(h), place: place, buf: b, pinned: pin})
	ic.byKey[string(h)], ic.places[place] = e, e
	if pin {
		ic.pinned++
	}
	for ic.order.Len()-ic.pinned > ceP2PMaxImports {
		lru := ic.order.Back()
		for lru.Value.(*importEntry).pinned {
			lru = lru.Prev()
		}
		if err := ic.drop(lru); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// drop unmaps entry e, or retires it where it is pinned.
func (ic *importCache) drop(e *list.Element) error {
	ent := e.Value.(*importEntry)
	ic.order.Remove(e)
	delete(ic.byKey, ent.key)
	if ic.places[ent.place] == e {
		delete(ic.places, ent.place)
	}
	if ent.pinned {
		ic.pinned--
		ic.retired = append(ic.retired, ent.buf)
		return nil
	}
	if err := ent.buf.Free(); err != nil {
		return fmt.Errorf("unmapping a peer's allocation: %w", err)
	}
	return nil
}

// close unmaps every allocation, pinned and retired ones included.
func (ic *importCache) close() error {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	var errs []error
	if ic.order != nil {
		for e := ic.order.Front(); e != nil; e = e.Next() {
			errs = append(errs, e.Value.(*importEntry).buf.Free())
		}
	}
	for _, b := range ic.retired {
		errs = append(errs, b.Free())
	}
	ic.order, ic.byKey, ic.places, ic.pinned, ic.retired = nil, nil, nil, 0, nil
	return errors.Join(errs...)
}

// capturing reports whether s is capturing a graph (hal.CaptureQuerier);
// where the device cannot tell, or the query fails, it reports true, so
// that a mapping is kept rather than unmapped under a graph.
func (c *Comm) capturing(s hal.Stream) bool {
	q, ok := c.dev.(hal.CaptureQuerier)
	if !ok {
		return true
	}
	capt, err := q.Capturing(s)
	return err != nil || capt
}
