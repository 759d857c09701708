package weft

import (
	"context"
	"fmt"
	"time"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// The host-issued copy-engine AllReduce (WEFT_ALGO=ce, and by default from
// Config.CEAllReduceMinBytes; docs/portchannel.md, "Copy-engine
// AllReduce"): the two-phase all-pairs AllReduce with every byte moved
// over the links by copy engines and each landed window reduced by a
// kernel of a few blocks (hal.StreamReduce), all queued by the host at the
// call as the AllGather of ce.go is, so no proxy stands between a window's
// arrival and its reduction and no hardware queue shared with an
// application's streams can hold a cycle. On 2×H100 copy engines move
// 390 GB/s each way at once where SM stores move 361 and the 2PA's mix of
// loads and stores 340 (docs/bench/2026-11-28-h100x2, call 1): MSCCL++'s
// 2PR over PortChannel is its fastest large intra-node AllReduce for the
// same reason (MSCCL++ paper, §7).
//
// The message of count elements is cut into n shards of sc elements (sc:
// count/n rounded up to whole 16-byte vectors; the last shards may be
// shorter or empty); rank r reduces shard r. Each shard is cut into
// windows of W bytes (Config.CEAllReduce.Window); window w uses slot
// h = w mod K (K: Config.CEAllReduce.Depth, at least 2) of two landing
// areas per peer: RS (the peers' inputs to reduce) and AG (the peers'
// reduced windows). For window w rank r queues, on four lanes:
//
//	lane 0, per peer p: wait freeRS[p][h] = 1, reset; copy input[shard p, w]
//	        into p's RS slot for r; write dataRS_p[r][h] = 1.
//	lane 1: wait pushed[h] = 1, reset; per peer p: wait dataRS[p][h] = 1,
//	        reset; output[shard r, w] = input[shard r, w] ⊕ each landed
//	        window (one StreamReduce per peer, the first from the input,
//	        the next in place); per peer p: write freeRS_p[r][h] = 1; write
//	        reduced[h] = 1.
//	lane 2: wait reduced[h] = 1, reset; per peer p: wait freeAG[p][h] = 1,
//	        reset; copy output[shard r, w] into p's AG slot for r; write
//	        dataAG_p[r][h] = 1; then write pushed[h] = 1.
//	lane 3, per peer p: wait dataAG[p][h] = 1, reset; copy p's AG slot into
//	        output[shard p, w] with SMs (the copy kernel of the reduction's
//	        module: a copy engine doing it took copy engines from the links,
//	        1 GB 3,022 µs without it against 3,260); write freeAG_p[r][h] = 1.
//
// The words of a peer q on rank r: dataRS[q][h] (q's input window landed
// in r's RS slot for q), freeRS[q][h] (q has reduced r's window, so r may
// write q's RS slot for r again), dataAG[q][h] and freeAG[q][h] likewise
// for the AG slots; the free words start at 1. Rank r's own words:
// reduced[h] (lane 1 has reduced window w, lane 2 may push it) and
// pushed[h] (lane 2 has pushed the window of slot h, so lane 1 may write
// reduced[h] again; starts at 1). Every word is reset by the lane that
// waits on it, so a call leaves them as it found them and a captured graph
// replays in step, as in ce.go. The list is in window order, lanes 0 to 3
// within a window, an order that completes where every lane runs in the
// stream's order (one hardware queue): window w's waits depend only on
// windows ≤ w of every rank, queued before them.
//
// Through Comm.AllReduce, whose buffers are registered with the peers, the
// reduced windows go straight into the peers' outputs (cearOps' peerOut):
// one copy fewer per window and no copy-out.
//
// In place (input = output) is sound: a peer's reduced window lands in
// output[shard p, w] only after p has reduced window w, which waited for
// this rank's copy of input[shard p, w]; this rank's reduction writes only
// its own shard, element by element from the same positions.

// cearName is what PlanName says of a call the executor serves.
const cearName = "all_reduce-ce-host-issued"

// cearLanes are the lanes of the executor's operations.
const (
	cearLaneRS     = 0 // copies of the peers' shards into their RS slots
	cearLaneReduce = 1 // reductions of landed windows
	cearLaneAG     = 2 // copies of reduced windows into the peers' AG slots
	cearLaneOut    = 3 // copies of the peers' reduced windows into the output
)

// The flag words of the executor per rank: four groups of K words, one
// per landing slot (cearWord). A peer q's words on this rank are dataRS,
// freeRS (starts at 1), dataAG and freeAG (starts at 1); this rank's own,
// at q = me, are reduced (group cearDataRS) and pushed (group cearFreeRS,
// starts at 1).
const (
	cearDataRS    = 0
	cearFreeRS    = 1
	cearDataAG    = 2
	cearFreeAG    = 3
	cearOwnReduce = cearDataRS
	cearOwnPushed = cearFreeRS
	cearGroups    = 4
)

// cearWord is the index of group g's word for slot h of K slots.
func cearWord(g, h, K int) int { return g*K + h }

// cearKey names a reduction kernel by element type and operator.
type cearKey struct {
	t  plan.DataType
	op plan.RedOp
}

// cearKernel is a compiled reduction kernel and the copy kernel of its
// module (nil on hal/host, which reduces and copies itself) with the
// module, closed at Close.
type cearKernel struct {
	mod        hal.Module
	fn, copyFn hal.Function
}

// cearServes reports whether the copy-engine AllReduce serves call: 2 or
// more ranks, a base operator (Avg and PreMulSum keep the other plans),
// and WEFT_ALGO=ce or, with no family forced, a call through Comm.AllReduce
// (zeroCopy: registered buffers) of a message within [CEAllReduceMinBytes,
// CEAllReduceMaxBytes]. Through Launch (the NCCL ABI) on two ranks the
// outputs are exported at the call instead (cearExportServes); the form
// that stages every window through landing slots never led the SM plans,
// so only WEFT_ALGO=ce sends calls there.
func (c *Comm) cearServes(call Call, zeroCopy bool) bool {
	switch c.ceReduction(call) {
	case ceForced:
		return true
	case ceBySize:
		if !zeroCopy {
			return false
		}
		b := call.Count * int64(call.Type.Size())
		return c.cfg.CEAllReduceMinBytes > 0 && b >= c.cfg.CEAllReduceMinBytes && (c.cfg.CEAllReduceMaxBytes <= 0 || b <= c.cfg.CEAllReduceMaxBytes)
	}
	return false
}

// cearExportServes reports whether Launch (the NCCL ABI, buffers not
// registered) tries call on the copy-engine AllReduce with the peers'
// outputs exported at the call (launchCEAllReduceExported): two ranks
// whose device exports and maps memory and whose bootstrap carries
// messages between them, and a message within [CEAllReduceMinBytes,
// CEAllReduceMaxBytes], the bounds of the registered form, which this one
// is once the outputs are mapped, with no family forced or under
// WEFT_ALGO=ce (whose other AllReduces take the staged form).
func (c *Comm) cearExportServes(call Call) bool {
	if call.Coll != algorithms.AllReduce || c.cfg.NRanks != 2 || call.Count <= 0 || c.cfg.CEAllReduceMinBytes <= 0 {
		return false
	}
	b := call.Count * int64(call.Type.Size())
	return b >= c.cfg.CEAllReduceMinBytes && (c.cfg.CEAllReduceMaxBytes <= 0 || b <= c.cfg.CEAllReduceMaxBytes) &&
		c.ceReduction(call) != ceNever && c.exportable()
}

// exportable reports whether buffers of this communicator's device can be
// exported at a call and mapped by its peers (the copy-engine
// point-to-point exchange, p2pce.go).
func (c *Comm) exportable() bool {
	_, ok := c.boot.(peerMessenger)
	_, eok := c.dev.(hal.RangeExporter)
	_, mok := c.dev.(hal.MemoryMapped)
	return ok && eok && mok
}

// launchCEAllReduceExported runs an AllReduce that cearExportServes takes
// as the registered form of the copy-engine AllReduce (peerOut): each rank
// exports its output at the call and maps its peer's, over the copy-engine
// point-to-point exchange (p2pce.go), which both ranks end agreeing on (a
// rank that cannot export or map refuses, and both then report false, for
// the plans after it). In place is sound, as with registered outputs
// (cearOps). On 2×H100 the registered form took NCCL's time × 1.09–1.10 at
// 1 GB where the staged form (landing slots for the reduced windows and a
// copy-out) never led the SM plans (docs/portchannel.md).
func (c *Comm) launchCEAllReduceExported(call Call, s hal.Stream, t time.Time) (bool, error) {
	me := c.cfg.Rank
	peer := 1 - me
	bytes := call.Count * int64(call.Type.Size())
	group := []P2P{{Peer: peer, Buf: call.Recv, Bytes: bytes}, {Peer: peer, Send: true, Buf: call.Recv, Bytes: bytes}}
	keep, err := c.ceP2PExchange([][]P2P{group}, bytes, nil, s)
	if err != nil {
		return true, fmt.Errorf("weft: AllReduce on rank %d: exporting the outputs for copy engines: %w", me, err)
	}
	peerOut := make([]uint64, 2)
	for _, o := range keep {
		if o.Send {
			peerOut[peer] = o.dst
		}
	}
	if len(keep) != 2 || peerOut[peer] == 0 {
		return false, nil
	}
	c.cearExported.Add(1)
	return true, c.launchCEAllReduce(call, s, t, peerOut)
}

// ceChoice is how a collective that reduces may come to a host-issued
// executor (ceReduction).
type ceChoice uint8

const (
	ceNever  ceChoice = iota // the executors cannot run it here
	ceForced                 // WEFT_ALGO=ce
	ceBySize                 // no family forced: the executor's size bound decides
)

// ceReduction is where a reducing call stands for the host-issued
// executors (the AllReduce here, the Reduce in cereduce.go): they run
// where ceOK holds, on 2 or more ranks, for a valid type and a base
// operator (Sum, Prod, Max, Min; Avg and PreMulSum keep the kernel plans,
// whose reduction kernel they do not have).
func (c *Comm) ceReduction(call Call) ceChoice {
	if !c.ceOK || c.cfg.NRanks < 2 || !call.Op.Valid() || call.Op != call.Op.Base() || !call.Type.Valid() {
		return ceNever
	}
	switch c.cfg.Algo {
	case algorithms.CEFamily:
		return ceForced
	case "":
		return ceBySize
	}
	return ceNever
}

// cearReduceKernel returns the reduction and copy kernels for t and op,
// compiling them on first use.
func (c *Comm) cearReduceKernel(t plan.DataType, op plan.RedOp) (cearKernel, error) {
	k := cearKey{t, op}
	c.mu.Lock()
	kern, ok := c.cearKernels[k]
	c.mu.Unlock()
	if ok {
		return kern, nil
	}
	fail := func(err error) (cearKernel, error) {
		return cearKernel{}, fmt.Errorf("weft: rank %d: the copy engines' %v %v reduction and copy kernels: %w", c.cfg.Rank, t, op, err)
	}
	mod, fn, err := channels.StreamReduceKernel(c.dev, t, op)
	if err != nil {
		return fail(err)
	}
	copyFn, err := channels.StreamCopyKernel(mod)
	if err != nil {
		mod.Close()
		return fail(err)
	}
	kern = cearKernel{mod: mod, fn: fn, copyFn: copyFn}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cearKernels == nil {
		c.cearKernels = map[cearKey]cearKernel{}
	}
	if old, ok := c.cearKernels[k]; ok { // compiled meanwhile by another caller
		if mod != nil {
			mod.Close()
		}
		return old, nil
	}
	c.cearKernels[k] = kern
	return kern, nil
}

// cearBlocks is the blocks of each of the executor's kernels: the shape's,
// within the block budget (Options.MaxCTAs, NCCL_MAX_CTAS), of which the
// reduction and the copy-out, on two lanes, may hold half each.
func (c *Comm) cearBlocks() int {
	b := c.cfg.CEAllReduce.Blocks
	if m := c.cfg.Budget.Max; m > 0 {
		b = min(b, max(1, m/2))
	}
	return b
}

// cearShape is the reduction and copy kernels with their launch shape.
type cearShape struct {
	kernel, copy    hal.Function
	blocks, threads int
}

// cearOps returns the stream operations of one AllReduce of count
// elements of type t with base operator op, from input to output (device
// addresses), for rank me of n (see the comment at the top of this file).
//
// peerOut, when not nil, holds every peer's output mapped here (a
// registered output: Comm.AllReduce): the reduced windows are copied
// straight into the peers' outputs, with no AG slot, copy-out or per-window
// AG flags; after its last window lane 2 writes each peer's done word
// (dataAG of slot 0), and lane 3 waits for every peer's before the call
// ends. A peer's copy into this rank's output follows its reduction of a
// window that waited for this rank's copy of the same window of its input,
// so this rank has entered the call and, in place, read that window.
func cearOps(st *hostIssued, me, n int, input, output uint64, count int64, t plan.DataType, op plan.RedOp, k cearShape, peerOut []uint64) []hal.StreamOp {
	es := int64(t.Size())
	if count == 0 {
		return nil
	}
	perVec := max(1, 16/es)
	sc := (count + int64(n) - 1) / int64(n)
	sc = (sc + perVec - 1) / perVec * perVec
	shard := sc * es // bytes of a full shard
	total := count * es
	W := st.window
	K := st.words / cearGroups // landing slots per peer and area
	nwin := (shard + W - 1) / W
	// part is window w of shard q: its byte offset in the message and its
	// length (0 past the shard's or the message's end).
	part := func(q int, w int64) (uint64, int64) {
		lo := int64(q)*shard + w*W
		hi := min(lo+W, int64(q+1)*shard, total)
		if hi <= lo {
			return 0, 0
		}
		return uint64(lo), hi - lo
	}
	myFlags, myLanding := st.flags.Addr(), st.landing.Addr()
	flag := func(base uint64, q, word int) uint64 { return base + uint64(st.flag(q, word)) }
	// slot is sender q's slot h on rank p in the landing buffer at base
	// (the RS slots in st.landing, the AG slots in st.ag).
	slot := func(base uint64, q, p int, h int64) uint64 {
		return base + uint64((h*int64(n-1)+ceSlot(q, p))*W)
	}
	peerFlags := func(p int) uint64 { return st.freg.Peers[p].Addr() }
	peerLanding := func(p int) uint64 { return st.lreg.Peers[p].Addr() }
	var myAG uint64
	peerAG := func(int) uint64 { return 0 }
	if peerOut == nil {
		myAG = st.ag.Addr()
		peerAG = func(p int) uint64 { return st.agreg.Peers[p].Addr() }
	}
	wait := func(addr uint64, lane uint8) []hal.StreamOp {
		return []hal.StreamOp{{Kind: hal.StreamWaitEq, Dst: addr, Value: 1, Lane: lane}, {Kind: hal.StreamWrite, Dst: addr, Value: 0, Lane: lane}}
	}
	write := func(addr uint64, lane uint8) hal.StreamOp {
		return hal.StreamOp{Kind: hal.StreamWrite, Dst: addr, Value: 1, Lane: lane}
	}
	var ops []hal.StreamOp
	for w := int64(0); w < nwin; w++ {
		h := w % int64(K)
		hi := int(h)
		word := func(g int) int { return cearWord(g, hi, K) }
		// Lane 0: this rank's input for each peer's shard into its RS slot.
		for j := 1; j < n; j++ {
			p := (me + j) % n
			off, l := part(p, w)
			ops = append(ops, wait(flag(myFlags, p, word(cearFreeRS)), cearLaneRS)...)
			ops = append(ops,
				hal.StreamOp{Kind: hal.StreamCopy, Dst: slot(peerLanding(p), me, p, h), Src: input + off, Bytes: l, Lane: cearLaneRS},
				write(flag(peerFlags(p), me, word(cearDataRS)), cearLaneRS))
		}
		// Lane 1: the reduction of this rank's window.
		off, l := part(me, w)
		ops = append(ops, wait(flag(myFlags, me, word(cearOwnPushed)), cearLaneReduce)...)
		for j := 1; j < n; j++ {
			p := (me - j + n) % n
			ops = append(ops, wait(flag(myFlags, p, word(cearDataRS)), cearLaneReduce)...)
			src := input + off
			if j > 1 {
				src = output + off
			}
			ops = append(ops, hal.StreamOp{Kind: hal.StreamReduce, Dst: output + off, Src: src, Src2: slot(myLanding, p, me, h), Bytes: l,
				Type: t, Op: op, Kernel: k.kernel, Blocks: k.blocks, Threads: k.threads, Lane: cearLaneReduce})
		}
		for j := 1; j < n; j++ {
			p := (me - j + n) % n
			ops = append(ops, write(flag(peerFlags(p), me, word(cearFreeRS)), cearLaneReduce))
		}
		ops = append(ops, write(flag(myFlags, me, word(cearOwnReduce)), cearLaneReduce))
		// Lane 2: the reduced window into every peer's AG slot (or output).
		ops = append(ops, wait(flag(myFlags, me, word(cearOwnReduce)), cearLaneAG)...)
		for j := 1; j < n; j++ {
			p := (me + j) % n
			if peerOut != nil {
				ops = append(ops, hal.StreamOp{Kind: hal.StreamCopy, Dst: peerOut[p] + off, Src: output + off, Bytes: l, Lane: cearLaneAG})
				continue
			}
			ops = append(ops, wait(flag(myFlags, p, word(cearFreeAG)), cearLaneAG)...)
			ops = append(ops,
				hal.StreamOp{Kind: hal.StreamCopy, Dst: slot(peerAG(p), me, p, h), Src: output + off, Bytes: l, Lane: cearLaneAG},
				write(flag(peerFlags(p), me, word(cearDataAG)), cearLaneAG))
		}
		ops = append(ops, write(flag(myFlags, me, word(cearOwnPushed)), cearLaneAG))
		if peerOut != nil {
			continue
		}
		// Lane 3: the peers' reduced windows into the output.
		for j := 1; j < n; j++ {
			p := (me - j + n) % n
			poff, pl := part(p, w)
			ops = append(ops, wait(flag(myFlags, p, word(cearDataAG)), cearLaneOut)...)
			ops = append(ops,
				hal.StreamOp{Kind: hal.StreamCopy, Dst: output + poff, Src: slot(myAG, p, me, h), Bytes: pl, Lane: cearLaneOut,
					Kernel: k.copy, Blocks: k.blocks, Threads: k.threads},
				write(flag(peerFlags(p), me, word(cearFreeAG)), cearLaneOut))
		}
	}
	if peerOut != nil {
		done := cearWord(cearDataAG, 0, K)
		for j := 1; j < n; j++ {
			ops = append(ops, write(flag(peerFlags((me+j)%n), me, done), cearLaneAG))
		}
		for j := 1; j < n; j++ {
			ops = append(ops, wait(flag(myFlags, (me-j+n)%n, done), cearLaneOut)...)
		}
	}
	return ops
}

// cearAGLanding sets up st's AG landing buffer, K slots per peer, on the
// first staged call (collective: every rank makes the same staged calls
// in the same order); the zero-copy form needs none.
func (c *Comm) cearAGLanding(st *hostIssued, K int64) error {
	c.mu.Lock()
	done := st.ag != nil
	c.mu.Unlock()
	if done {
		return nil
	}
	b, err := c.dev.Alloc(max(1, K*int64(c.cfg.NRanks-1)*st.window))
	if err != nil {
		return fmt.Errorf("weft: rank %d: copy-engine AllReduce: AG landing buffer: %w", c.cfg.Rank, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	reg, err := channels.Register(ctx, c.boot, c.dev, b)
	if err != nil {
		b.Free()
		return fmt.Errorf("weft: rank %d: copy-engine AllReduce: map the AG landing buffer on the peers: %w", c.cfg.Rank, err)
	}
	c.mu.Lock()
	st.ag, st.agreg = b, reg
	c.mu.Unlock()
	return nil
}

// launchCEAllReduce queues the host-issued AllReduce of call on s; t is
// when the call began (WEFT_PROXY_PROFILE's stages); peerOut, when not
// nil, is every peer's registered output mapped here (cearOps).
func (c *Comm) launchCEAllReduce(call Call, s hal.Stream, t time.Time, peerOut []uint64) error {
	shape := c.cfg.CEAllReduce
	K := max(2, shape.Depth)
	st, err := c.hostIssuedSetup(&c.cear, func() hostIssuedSpec {
		spec := hostIssuedSpec{what: "copy-engine AllReduce", window: shape.Window, slots: int64(K), words: cearGroups * K,
			local: make([]uint64, cearGroups*K)}
		for h := 0; h < K; h++ {
			spec.free = append(spec.free, cearWord(cearFreeRS, h, K), cearWord(cearFreeAG, h, K))
			spec.local[cearWord(cearOwnPushed, h, K)] = 1
		}
		return spec
	})
	if err != nil {
		return err
	}
	if peerOut == nil {
		if err := c.cearAGLanding(st, int64(K)); err != nil {
			return err
		}
	}
	kern, err := c.cearReduceKernel(call.Type, call.Op)
	if err != nil {
		return err
	}
	if err := c.launched(s); err != nil {
		return err
	}
	ops := cearOps(st, c.cfg.Rank, c.cfg.NRanks, call.Send, call.Recv, call.Count, call.Type, call.Op,
		cearShape{kernel: kern.fn, copy: kern.copyFn, blocks: c.cearBlocks(), threads: shape.Threads}, peerOut)
	return c.queueCE(call, s, ops, t)
}
