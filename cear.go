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
// h = w mod K (K: Config.CEAllReduce.Depth, at least 2) of the RS landing
// area (the peers' inputs to reduce, one slot per peer) and of the export
// area (this rank's reduced windows, which the peers pull). Buffers that
// are not registered with the peers (the NCCL ABI's) take the pulled form;
// for window w rank r queues, on three lanes:
//
//	lane 0, per peer p: wait freeRS[p][h] = 1, reset; copy input[shard p, w]
//	        into p's RS slot for r; write dataRS_p[r][h] = 1.
//	lane 1: per peer p: wait freeAG[p][h] = 1, reset; per peer p: wait
//	        dataRS[p][h] = 1, reset; output[shard r, w] = input[shard r, w] ⊕
//	        each landed window (one StreamReduce per peer, the first from the
//	        input, the next in place, the last storing its result in export
//	        slot h too: hal.StreamOp.Dst2); per peer p: write
//	        freeRS_p[r][h] = 1; per peer p: write dataAG_p[r][h] = 1.
//	lane 3, per peer p: wait dataAG[p][h] = 1, reset; copy p's export slot h
//	        into output[shard p, w] (a copy engine of this GPU reads it over
//	        the link); write freeAG_p[r][h] = 1.
//
// The words of a peer q on rank r: dataRS[q][h] (q's input window landed
// in r's RS slot for q), freeRS[q][h] (q has reduced r's window, so r may
// write q's RS slot for r again), dataAG[q][h] (q's export slot h holds a
// reduced window) and freeAG[q][h] (q has pulled r's export slot h, so r
// may reduce into it again); the free words start at 1. Every word is
// reset by the lane that waits on it, so a call leaves them as it found
// them and a captured graph replays in step, as in ce.go. The list is in
// window order, lanes in order within a window, an order that completes
// where every lane runs in the stream's order (one hardware queue): window
// w's waits depend only on windows ≤ w of every rank, queued before them.
// Every byte crosses the links on copy engines, and no SM copies: the
// staged form this replaced (reduced windows pushed into the peers' landing
// slots, then copied out by SMs) took 3,155–3,162 µs at 1 GB where the SM
// 2PA took 3,050–3,150 (docs/bench/notes.md, fourteenth session).
//
// Through Comm.AllReduce, whose outputs are registered with the peers, the
// zero-copy form pushes the reduced windows straight into the peers'
// outputs (cearOps' peerOut) from lane 2, with no export slot: lane 1
// waits pushed[h] = 1 (reset) instead of the freeAG words and writes
// reduced[h] = 1 after its reductions; lane 2 waits reduced[h] = 1
// (reset), copies output[shard r, w] into every peer's output and writes
// pushed[h] = 1 (rank r's own words; pushed starts at 1).
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
	cearLaneAG     = 2 // zero-copy: copies of reduced windows into the peers' outputs
	cearLaneOut    = 3 // pulled: copies of the peers' reduced windows into the output
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

// cearKernel is a compiled reduction kernel (nil on hal/host, which
// reduces itself) with its module, closed at Close.
type cearKernel struct {
	mod hal.Module
	fn  hal.Function
}

// cearServes reports whether the copy-engine AllReduce serves call: 2 or
// more ranks, a base operator (Avg and PreMulSum keep the other plans),
// and WEFT_ALGO=ce or, with no family forced, a call through Comm.AllReduce
// (zeroCopy: registered buffers) of a message within [CEAllReduceMinBytes,
// CEAllReduceMaxBytes]. Through Launch (the NCCL ABI) the executor stages
// every window through landing slots and never led the SM plans, so only
// WEFT_ALGO=ce sends calls there.
func (c *Comm) cearServes(call Call, zeroCopy bool) bool {
	if !c.ceOK || c.cfg.NRanks < 2 || !call.Op.Valid() || call.Op != call.Op.Base() || !call.Type.Valid() {
		return false
	}
	switch c.cfg.Algo {
	case algorithms.CEFamily:
		return true
	case "":
		if !zeroCopy {
			return false
		}
		b := call.Count * int64(call.Type.Size())
		return c.cfg.CEAllReduceMinBytes > 0 && b >= c.cfg.CEAllReduceMinBytes && (c.cfg.CEAllReduceMaxBytes <= 0 || b <= c.cfg.CEAllReduceMaxBytes)
	}
	return false
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
		return cearKernel{}, fmt.Errorf("weft: AllReduce on rank %d (copy engines): %w", c.cfg.Rank, err)
	}
	mod, fn, err := channels.StreamReduceKernel(c.dev, t, op)
	if err != nil {
		return fail(err)
	}
	kern = cearKernel{mod: mod, fn: fn}
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

// cearBlocks is the blocks of the executor's reduction kernel, its only
// kernel: the shape's, within the block budget (Options.MaxCTAs,
// NCCL_MAX_CTAS).
func (c *Comm) cearBlocks() int {
	b := c.cfg.CEAllReduce.Blocks
	if m := c.cfg.Budget.Max; m > 0 {
		b = min(b, m)
	}
	return b
}

// cearShape is the reduction kernel with its launch shape.
type cearShape struct {
	kernel          hal.Function
	blocks, threads int
}

// cearOps returns the stream operations of one AllReduce of count
// elements of type t with base operator op, from input to output (device
// addresses), for rank me of n (see the comment at the top of this file).
//
// peerOut, when not nil, holds every peer's output mapped here (a
// registered output: Comm.AllReduce): the reduced windows are copied
// straight into the peers' outputs (the zero-copy form), with no export
// slot or per-window AG flags; after its last window lane 2 writes each peer's done word
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
	// slot is sender q's slot h on rank p in the RS landing buffer at
	// base.
	slot := func(base uint64, q, p int, h int64) uint64 {
		return base + uint64((h*int64(n-1)+ceSlot(q, p))*W)
	}
	peerFlags := func(p int) uint64 { return st.freg.Peers[p].Addr() }
	peerLanding := func(p int) uint64 { return st.lreg.Peers[p].Addr() }
	// export is slot h of an export buffer at base (the pulled form's
	// reduced windows).
	export := func(base uint64, h int64) uint64 { return base + uint64(h*W) }
	var myExport uint64
	peerExport := func(int) uint64 { return 0 }
	if peerOut == nil {
		myExport = st.ag.Addr()
		peerExport = func(p int) uint64 { return st.agreg.Peers[p].Addr() }
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
		// Lane 1: the reduction of this rank's window (pulled: into its
		// export slot too, once every peer has pulled the slot's last).
		off, l := part(me, w)
		if peerOut != nil {
			ops = append(ops, wait(flag(myFlags, me, word(cearOwnPushed)), cearLaneReduce)...)
		} else {
			for j := 1; j < n; j++ {
				ops = append(ops, wait(flag(myFlags, (me+j)%n, word(cearFreeAG)), cearLaneReduce)...)
			}
		}
		for j := 1; j < n; j++ {
			p := (me - j + n) % n
			ops = append(ops, wait(flag(myFlags, p, word(cearDataRS)), cearLaneReduce)...)
			red := hal.StreamOp{Kind: hal.StreamReduce, Dst: output + off, Src: input + off, Src2: slot(myLanding, p, me, h), Bytes: l,
				Type: t, Op: op, Kernel: k.kernel, Blocks: k.blocks, Threads: k.threads, Lane: cearLaneReduce}
			if j > 1 {
				red.Src = output + off
			}
			if j == n-1 && peerOut == nil {
				red.Dst2 = export(myExport, h)
			}
			ops = append(ops, red)
		}
		for j := 1; j < n; j++ {
			p := (me - j + n) % n
			ops = append(ops, write(flag(peerFlags(p), me, word(cearFreeRS)), cearLaneReduce))
		}
		if peerOut == nil {
			for j := 1; j < n; j++ {
				ops = append(ops, write(flag(peerFlags((me+j)%n), me, word(cearDataAG)), cearLaneReduce))
			}
			// Lane 3: each peer's reduced window pulled from its export
			// slot into the output.
			for j := 1; j < n; j++ {
				p := (me - j + n) % n
				poff, pl := part(p, w)
				ops = append(ops, wait(flag(myFlags, p, word(cearDataAG)), cearLaneOut)...)
				ops = append(ops,
					hal.StreamOp{Kind: hal.StreamCopy, Dst: output + poff, Src: export(peerExport(p), h), Bytes: pl, Lane: cearLaneOut},
					write(flag(peerFlags(p), me, word(cearFreeAG)), cearLaneOut))
			}
			continue
		}
		ops = append(ops, write(flag(myFlags, me, word(cearOwnReduce)), cearLaneReduce))
		// Lane 2: the reduced window into every peer's output.
		ops = append(ops, wait(flag(myFlags, me, word(cearOwnReduce)), cearLaneAG)...)
		for j := 1; j < n; j++ {
			p := (me + j) % n
			ops = append(ops, hal.StreamOp{Kind: hal.StreamCopy, Dst: peerOut[p] + off, Src: output + off, Bytes: l, Lane: cearLaneAG})
		}
		ops = append(ops, write(flag(myFlags, me, word(cearOwnPushed)), cearLaneAG))
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

// cearExport sets up st's export buffer, K windows, on the first pulled
// call (collective: every rank makes the same pulled calls in the same
// order); the zero-copy form needs none.
func (c *Comm) cearExport(st *hostIssued, K int64) error {
	c.mu.Lock()
	done := st.ag != nil
	c.mu.Unlock()
	if done {
		return nil
	}
	b, err := c.dev.Alloc(K * st.window)
	if err != nil {
		return fmt.Errorf("weft: rank %d: copy-engine AllReduce: export buffer: %w", c.cfg.Rank, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	reg, err := channels.Register(ctx, c.boot, c.dev, b)
	if err != nil {
		b.Free()
		return fmt.Errorf("weft: rank %d: copy-engine AllReduce: map the export buffer on the peers: %w", c.cfg.Rank, err)
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
		if err := c.cearExport(st, int64(K)); err != nil {
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
		cearShape{kernel: kern.fn, blocks: c.cearBlocks(), threads: shape.Threads}, peerOut)
	t = c.prof.Since(stageCEBuild, t)
	err = c.dev.(hal.StreamOps).QueueOps(s, ops)
	c.prof.Since(stageCEQueue, t)
	if err != nil {
		return fmt.Errorf("weft: AllReduce on rank %d (host-issued copy engines): %w", c.cfg.Rank, err)
	}
	return nil
}
