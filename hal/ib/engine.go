package ib

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/netcore"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/ibverbs"
)

// ringSize is the number of requests an engine holds before they are
// posted; Put, Copy and Signal wait (bounded by WEFT_TIMEOUT) while it is
// full. It covers four proxy FIFOs.
const ringSize = 4096

// stagingSlots is the number of chunk-sized host slots through which an
// engine sends sources that are not registered memory.
const stagingSlots = 4

// conn is this rank's RC queue pair to one peer, with its completion
// queue, shared by every engine to that peer. Its mutex serialises posts
// and polls; completions are dispatched to engines by the engine id in the
// high 16 bits of the work-request id.
type conn struct {
	nd    *NetDevice
	peer  int
	qp    *ibverbs.QP
	cq    *ibverbs.CQ
	depth int

	mu          sync.Mutex
	connected   bool
	peerNonce   uint64
	outstanding int // requests posted whose completion is not polled
	engines     map[uint16]*engine
	nextID      uint16
	err         error // the first failed completion; the queue pair is in error
	wcs         []ibverbs.WC
	released    bool // the NetDevice destroyed the queue pair and completion queue
}

func (c *conn) newEngine(a address) (*engine, error) {
	nd := c.nd
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.connected && c.peerNonce != a.nonce {
		return nil, fmt.Errorf("ib: rank %d: engine to rank %d: its address changed (another incarnation): %w", nd.cfg.Rank, c.peer, hal.ErrInvalidUsage)
	}
	if c.err != nil {
		return nil, c.err
	}
	if !c.connected {
		mtu := nd.attr.ActiveMTU
		if a.mtu < mtu {
			mtu = a.mtu
		}
		rtr := ibverbs.RTR{Port: nd.port, DestQPN: a.qpns[nd.cfg.Rank], MTU: mtu, DLID: a.lid, MaxDestRd: 16}
		if nd.attr.LinkLayer == ibverbs.LinkEthernet {
			rtr.Global, rtr.DGID, rtr.SGIDIndex = true, a.gid, nd.gidIndex
		}
		if err := c.qp.ToRTR(rtr); err != nil {
			return nil, fmt.Errorf("ib: rank %d: connect to peer rank %d: %w", nd.cfg.Rank, c.peer, err)
		}
		// timeout 14: 4.096 µs × 2^14 ≈ 67 ms per try, 7 tries; rnr_retry 7:
		// forever (the values NCCL uses).
		if err := c.qp.ToRTS(ibverbs.RTS{Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAt: 16}); err != nil {
			return nil, fmt.Errorf("ib: rank %d: connect to peer rank %d: %w", nd.cfg.Rank, c.peer, err)
		}
		c.connected, c.peerNonce = true, a.nonce
	}
	e := &engine{c: c, peer: c.peer, timeout: env.Timeout(), slotWR: make([]uint64, stagingSlots), tickets: hal.MakeTickets(ringSize + 2),
		reads: map[*registration]uint64{}}
	var err error
	e.scratch, err = syscall.Mmap(-1, 0, 16*c.depth, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("ib: rank %d: engine to rank %d: scratch: %v: %w", nd.cfg.Rank, c.peer, err, hal.ErrSystem)
	}
	e.scratchMR, err = nd.pd.RegMR(uint64(uintptr(unsafe.Pointer(&e.scratch[0]))), uint64(len(e.scratch)), ibverbs.AccessLocalWrite)
	if err != nil {
		syscall.Munmap(e.scratch)
		return nil, fmt.Errorf("ib: rank %d: engine to rank %d: scratch: %w", nd.cfg.Rank, c.peer, err)
	}
	for c.engines[c.nextID] != nil {
		c.nextID++
	}
	e.id = c.nextID
	c.nextID++
	c.engines[e.id] = e
	nd.mu.Lock()
	nd.engines[e] = struct{}{}
	nd.mu.Unlock()
	return e, nil
}

// poll takes completions off the queue (c.mu held) and credits them to
// their engines. A failed one records the error that every engine of the
// connection returns from then on.
func (c *conn) poll() {
	for {
		n, err := c.cq.Poll(c.wcs)
		if err != nil {
			c.fail(fmt.Errorf("ib: rank %d: completions of peer rank %d on %s: %v (completion queue overrun?): %w",
				c.nd.cfg.Rank, c.peer, c.nd.Device(), err, hal.ErrSystem))
			return
		}
		for _, wc := range c.wcs[:n] {
			c.outstanding--
			e := c.engines[uint16(wc.ID>>48)]
			if wc.Status != ibverbs.WCSuccess {
				if wc.Status != ibverbs.WCWRFlushErr || c.err == nil {
					c.fail(fmt.Errorf("ib: rank %d: %s to peer rank %d failed: %s (work completion status %d) on %s QP %#x: %w",
						c.nd.cfg.Rank, opName(wc.Opcode), c.peer, c.nd.lib.StatusString(wc.Status), wc.Status, c.nd.Device(), c.qp.Num(), hal.ErrRemote))
				}
				continue
			}
			if e != nil {
				e.done = wc.ID & (1<<48 - 1)
			}
		}
		if n < len(c.wcs) {
			return
		}
	}
}

// awaitReads waits until every RDMA write that an engine of c posted
// from one of regs as a registered source (with its lkey) has completed,
// at most until deadline, limit after the wait began (then an error wrapping hal.ErrTimeout). It
// polls the completion queue itself: the engines may be idle. A failed
// queue pair (its requests are flushed, reading nothing more), closed
// engines (they drained, or gave up) and a released connection have
// nothing to wait for. The caller took regs out of the NetDevice's
// table first, so that no later request reads them; one that looked
// them up before holds c.mu until it has posted.
func (c *conn) awaitReads(regs []*registration, limit time.Duration, deadline time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if c.released || c.err != nil {
			return nil
		}
		c.poll()
		var late *engine
		var want uint64
		for _, e := range c.engines {
			for _, r := range regs {
				wr, ok := e.reads[r]
				switch {
				case !ok:
				case wr > e.done && c.err == nil:
					late, want = e, wr
				default:
					delete(e.reads, r)
				}
			}
		}
		if late == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the RDMA writes an engine to peer rank %d posted from it did not complete within %v (work request %d, %d done): %w",
				c.peer, limit, want, late.done, hal.ErrTimeout)
		}
		c.mu.Unlock()
		time.Sleep(20 * time.Microsecond)
		c.mu.Lock()
	}
}

func opName(op int) string {
	if op == ibverbs.WCOpFetchAdd {
		return "signal (fetch-and-add)"
	}
	return "RDMA write"
}

func (c *conn) fail(err error) {
	if c.err == nil {
		c.err = err
		c.nd.log.Warn("ib connection failed", "peer", c.peer, "err", err)
	}
}

type reqKind uint8

const (
	reqPut reqKind = iota + 1
	reqCopy
	reqSignal
)

// request is one queued request. For a signal dst is the semaphore, src
// the count word and n the count.
type request struct {
	kind       reqKind
	dst, src   uint64
	n          uint64
	rkey, ckey uint32 // remote keys of dst and of the count word

	off    uint64 // bytes of a put already handled
	staged bool   // a chunk sits in slot, copied by own ticket
	slot   int
	ticket uint64
}

// retired is a request fully posted, complete once its last work request
// and own-engine ticket are.
type retired struct{ req, wr, own uint64 }

// engine is a port-mapped engine to one peer over RDMA. The proxy's calls
// queue requests and post what can be posted at once; requests wait only
// on earlier work they depend on:
//
//   - a put of registered memory is RDMA writes of at most the chunk
//     size; of other memory, each chunk is first copied by the device's
//     own engine into a registered host staging slot;
//   - a local Copy goes to the device's own engine once every earlier
//     RDMA request is complete (it may overwrite their sources);
//   - any RDMA request waits for earlier own-engine copies;
//   - a signal is an RDMA write of the count and a fenced fetch-and-add
//     of one on the semaphore, posted on the same queue pair after the
//     puts.
//
// Ordering argument: an RC queue pair delivers and executes requests at
// the responder in the order they were posted, so the count and the
// semaphore change only after the data of every earlier write is placed;
// IBV_SEND_FENCE on the atomic also keeps it from starting before earlier
// atomics and reads of the queue pair complete. Engines sharing a queue
// pair are ordered among themselves the same way, which is stronger than
// needed.
//
// Work that waits (a staged chunk, a Copy behind writes) is moved on by a
// helper goroutine that polls until nothing waits; otherwise polling
// happens in the engine's calls, which never block unless the request
// ring is full.
type engine struct {
	c       *conn
	id      uint16
	peer    int
	timeout time.Duration

	scratch   []byte // 8-byte count sources and fetch-add results, one pair per outstanding request
	scratchMR *ibverbs.MR

	own       hal.Engine // the device's own engine, made on first need
	staging   hal.Buffer // stagingSlots × chunk of host memory, registered
	stagingMR *ibverbs.MR
	slotWR    []uint64 // last work request that read each slot
	nextSlot  int

	// c.mu guards everything below.
	queue          [ringSize]request
	qhead, qlen    int
	posted, done   uint64 // work requests of this engine
	ownIssued      uint64 // own-engine tickets
	ownDone        uint64
	reqIssued      uint64
	reqDone        uint64
	ret            [ringSize]retired
	rhead, rlen    int
	tickets        hal.Tickets // over reqIssued and reqDone
	helper, closed bool
	err            error
	// reads is, per registration of this NetDevice that a put read as a
	// registered source, the last work request that read it (UnexportPort
	// waits for it before deregistering).
	reads map[*registration]uint64
}

var _ hal.Engine = (*engine)(nil)

func (e *engine) errLocked() error {
	if e.err != nil {
		return e.err
	}
	return e.c.err
}

func (e *engine) Put(dst, src uint64, bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("ib: rank %d: put of %d bytes to peer rank %d: %w", e.c.nd.cfg.Rank, bytes, e.peer, hal.ErrInvalidArgument)
	}
	rkey, ok := e.c.nd.remote(e.peer, dst, bytes)
	if bytes > 0 && !ok {
		return fmt.Errorf("ib: rank %d: put of %d bytes to %#x: not inside a buffer of peer rank %d imported with ImportPort: %w", e.c.nd.cfg.Rank, bytes, dst, e.peer, hal.ErrInvalidArgument)
	}
	return e.enqueue(request{kind: reqPut, dst: dst, src: src, n: uint64(bytes), rkey: rkey})
}

func (e *engine) Copy(dst, src uint64, bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("ib: rank %d: copy of %d bytes: %w", e.c.nd.cfg.Rank, bytes, hal.ErrInvalidArgument)
	}
	return e.enqueue(request{kind: reqCopy, dst: dst, src: src, n: uint64(bytes)})
}

func (e *engine) Signal(semAddr, countAddr, count uint64) error {
	rkey, ok := e.c.nd.remote(e.peer, semAddr, 8)
	if !ok || semAddr%8 != 0 {
		return fmt.Errorf("ib: rank %d: signal of %#x: not an aligned word of a buffer of peer rank %d imported with ImportPort: %w", e.c.nd.cfg.Rank, semAddr, e.peer, hal.ErrInvalidArgument)
	}
	var ckey uint32
	if countAddr != 0 {
		if ckey, ok = e.c.nd.remote(e.peer, countAddr, 8); !ok || countAddr%8 != 0 {
			return fmt.Errorf("ib: rank %d: signal count word %#x: not an aligned word of a buffer of peer rank %d: %w", e.c.nd.cfg.Rank, countAddr, e.peer, hal.ErrInvalidArgument)
		}
	}
	return e.enqueue(request{kind: reqSignal, dst: semAddr, src: countAddr, n: count, rkey: rkey, ckey: ckey})
}

func (e *engine) enqueue(r request) error {
	c := e.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.closed {
		return fmt.Errorf("ib: rank %d: request on a closed engine to peer rank %d: %w", c.nd.cfg.Rank, e.peer, hal.ErrInvalidUsage)
	}
	if err := e.errLocked(); err != nil {
		return err
	}
	if e.qlen == ringSize || e.rlen == ringSize {
		deadline := time.Now().Add(e.timeout)
		for e.qlen == ringSize || e.rlen == ringSize {
			e.pump()
			if err := e.errLocked(); err != nil {
				return err
			}
			if e.qlen < ringSize && e.rlen < ringSize {
				break
			}
			if time.Now().After(deadline) {
				return &hal.TimeoutError{Rank: c.nd.cfg.Rank, Peer: e.peer, Channel: -1, Semaphore: -1, Block: -1,
					What: "ib engine request ring", Expected: e.reqIssued, Observed: e.reqDone}
			}
			c.mu.Unlock()
			time.Sleep(20 * time.Microsecond)
			c.mu.Lock()
		}
	}
	e.queue[(e.qhead+e.qlen)%ringSize] = r
	e.qlen++
	e.reqIssued++
	e.pump()
	return e.errLocked()
}

// pump polls completions and posts what the queued requests allow (c.mu
// held). If requests still wait, the helper goroutine keeps pumping.
func (e *engine) pump() {
	c := e.c
	c.poll()
	if e.own != nil && e.ownDone < e.ownIssued && e.err == nil {
		t, err := e.own.Completed()
		if err != nil {
			e.err = fmt.Errorf("ib: rank %d: engine to peer rank %d: local copy: %w", c.nd.cfg.Rank, e.peer, err)
		}
		e.ownDone = t
	}
	for e.qlen > 0 && e.errLocked() == nil {
		r := &e.queue[e.qhead]
		if !e.issue(r) {
			break
		}
		e.ret[(e.rhead+e.rlen)%ringSize] = retired{req: e.reqIssued - uint64(e.qlen) + 1, wr: e.posted, own: e.ownIssued}
		e.rlen++
		e.qhead = (e.qhead + 1) % ringSize
		e.qlen--
	}
	for e.rlen > 0 {
		r := e.ret[e.rhead]
		if r.wr > e.done || r.own > e.ownDone {
			break
		}
		e.reqDone = r.req
		e.rhead = (e.rhead + 1) % ringSize
		e.rlen--
	}
	e.tickets.Advance(e.reqDone)
	if e.qlen > 0 && !e.helper && !e.closed && e.errLocked() == nil {
		e.helper = true
		go e.help()
	}
}

// help pumps until no request waits: the proxy may issue nothing more for
// a while, and a staged chunk or a copy must still move.
func (e *engine) help() {
	c := e.c
	for spin := 0; ; spin++ {
		if spin < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
		c.mu.Lock()
		if !e.closed {
			e.pump()
		}
		if e.qlen == 0 || e.closed || e.errLocked() != nil {
			e.helper = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
}

func (e *engine) space(n int) bool { return e.c.outstanding+n <= e.c.depth }

// issue posts what it can of r; true when r is fully posted.
func (e *engine) issue(r *request) bool {
	nd := e.c.nd
	switch r.kind {
	case reqCopy:
		if e.done < e.posted {
			return false
		}
		own, err := e.ownEngine()
		if err == nil {
			var t uint64
			if t, err = netcore.CopyMark(own, r.dst, r.src, int64(r.n)); err == nil {
				e.ownIssued = t
			}
		}
		if err != nil {
			e.err = fmt.Errorf("ib: rank %d: engine to peer rank %d: copy: %w", nd.cfg.Rank, e.peer, err)
			return false
		}
		return true
	case reqPut:
		for r.off < r.n {
			cn := min(uint64(nd.chunk), r.n-r.off)
			if !r.staged {
				if iova, lkey, reg := nd.localRegion(r.src+r.off, int64(cn)); reg != nil {
					if e.ownDone < e.ownIssued || !e.space(1) {
						return false
					}
					if !e.post(ibverbs.WR{Opcode: ibverbs.OpWrite, LAddr: iova, Len: uint32(cn), LKey: lkey, RAddr: r.dst + r.off, RKey: r.rkey}) {
						return false
					}
					e.reads[reg] = e.posted
					r.off += cn
					continue
				}
				if !e.stage(r, cn) {
					return false
				}
			}
			if e.ownDone < r.ticket || !e.space(1) {
				return false
			}
			laddr := e.stagingMR.Addr() + uint64(r.slot)*uint64(nd.chunk)
			if !e.post(ibverbs.WR{Opcode: ibverbs.OpWrite, LAddr: laddr, Len: uint32(cn), LKey: e.stagingMR.LKey(), RAddr: r.dst + r.off, RKey: r.rkey}) {
				return false
			}
			e.slotWR[r.slot] = e.posted
			r.staged = false
			r.off += cn
		}
		return true
	case reqSignal:
		n := 1
		if r.src != 0 {
			n = 2
		}
		if e.ownDone < e.ownIssued || !e.space(n) {
			return false
		}
		base := uint64(uintptr(unsafe.Pointer(&e.scratch[0])))
		slot := int(e.posted % uint64(e.c.depth))
		if r.src != 0 {
			binary.NativeEndian.PutUint64(e.scratch[16*slot:], r.n)
			if !e.post(ibverbs.WR{Opcode: ibverbs.OpWrite, LAddr: base + uint64(16*slot), Len: 8, LKey: e.scratchMR.LKey(), RAddr: r.src, RKey: r.ckey}) {
				return false
			}
		}
		return e.post(ibverbs.WR{Opcode: ibverbs.OpFetchAdd, Flags: ibverbs.SendFence, LAddr: base + uint64(16*slot+8), Len: 8,
			LKey: e.scratchMR.LKey(), RAddr: r.dst, RKey: r.rkey, Add: 1})
	}
	return false
}

// stage copies the next chunk of r into a free staging slot with the own
// engine.
func (e *engine) stage(r *request, cn uint64) bool {
	nd := e.c.nd
	if e.slotWR[e.nextSlot] > e.done {
		return false
	}
	if e.staging == nil {
		b, err := nd.dev.AllocHost(stagingSlots * nd.chunk)
		if err == nil && b.Host() == nil {
			b.Free()
			err = fmt.Errorf("host allocation without host bytes")
		}
		if err != nil {
			e.err = fmt.Errorf("ib: rank %d: engine to peer rank %d: staging buffer: %w", nd.cfg.Rank, e.peer, err)
			return false
		}
		host := b.Host()
		mr, err := nd.pd.RegMR(uint64(uintptr(unsafe.Pointer(&host[0]))), uint64(len(host)), ibverbs.AccessLocalWrite)
		if err != nil {
			b.Free()
			e.err = fmt.Errorf("ib: rank %d: engine to peer rank %d: staging buffer: %w", nd.cfg.Rank, e.peer, err)
			return false
		}
		e.staging, e.stagingMR = b, mr
	}
	own, err := e.ownEngine()
	if err == nil {
		var t uint64
		if t, err = netcore.CopyMark(own, e.staging.Addr()+uint64(e.nextSlot)*uint64(nd.chunk), r.src+r.off, int64(cn)); err == nil {
			e.ownIssued = t
		}
	}
	if err != nil {
		e.err = fmt.Errorf("ib: rank %d: engine to peer rank %d: stage %d bytes from %#x: %w", nd.cfg.Rank, e.peer, cn, r.src+r.off, err)
		return false
	}
	r.staged, r.slot, r.ticket = true, e.nextSlot, e.ownIssued
	e.nextSlot = (e.nextSlot + 1) % stagingSlots
	return true
}

func (e *engine) ownEngine() (hal.Engine, error) {
	if e.own == nil {
		nd := e.c.nd
		own, err := nd.pm.NewEngine(nd.dev.Endpoint())
		if err != nil {
			return nil, err
		}
		e.own = own
	}
	return e.own, nil
}

// post posts one signalled work request of this engine.
func (e *engine) post(w ibverbs.WR) bool {
	c := e.c
	w.ID = uint64(e.id)<<48 | (e.posted + 1)
	w.Flags |= ibverbs.SendSignaled
	n, err := c.qp.Post([]ibverbs.WR{w})
	if n != 1 || err != nil {
		c.fail(fmt.Errorf("ib: rank %d: post to peer rank %d on %s: %w", c.nd.cfg.Rank, e.peer, c.nd.Device(), err))
		return false
	}
	e.posted++
	c.outstanding++
	return true
}

// Mark returns a ticket covering every request issued so far. Marks with
// no request between them share the request count, so at most ringSize+1
// are pending.
func (e *engine) Mark() (uint64, error) {
	c := e.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := e.errLocked(); err != nil {
		return 0, err
	}
	t, _ := e.tickets.Mark(e.reqIssued, e.reqDone)
	return t, nil
}

// Completed polls and returns the largest ticket whose requests are
// complete at the source.
func (e *engine) Completed() (uint64, error) {
	c := e.c
	c.mu.Lock()
	defer c.mu.Unlock()
	e.pump()
	return e.tickets.Completed(), e.errLocked()
}

// Close waits (up to WEFT_TIMEOUT) for queued requests and releases the
// engine. The queue pair stays with the NetDevice.
func (e *engine) Close() error {
	c := e.c
	deadline := time.Now().Add(e.timeout)
	c.mu.Lock()
	if e.closed {
		c.mu.Unlock()
		return fmt.Errorf("ib: rank %d: engine to peer rank %d closed twice: %w", c.nd.cfg.Rank, e.peer, hal.ErrInvalidUsage)
	}
	var err error
	for {
		e.pump()
		if err = e.errLocked(); err != nil || (e.qlen == 0 && e.done == e.posted && e.ownDone >= e.ownIssued) {
			break
		}
		if time.Now().After(deadline) {
			err = &hal.TimeoutError{Rank: c.nd.cfg.Rank, Peer: e.peer, Channel: -1, Semaphore: -1, Block: -1,
				What: "ib engine close", Expected: e.reqIssued, Observed: e.reqDone}
			break
		}
		c.mu.Unlock()
		time.Sleep(20 * time.Microsecond)
		c.mu.Lock()
	}
	c.mu.Unlock()
	e.shutdown()
	return err
}

// shutdown releases the engine's resources without waiting.
func (e *engine) shutdown() {
	c := e.c
	c.mu.Lock()
	if e.closed {
		c.mu.Unlock()
		return
	}
	e.closed = true
	delete(c.engines, e.id)
	c.mu.Unlock()
	nd := c.nd
	nd.mu.Lock()
	delete(nd.engines, e)
	nd.mu.Unlock()
	if e.own != nil {
		e.own.Close()
	}
	if e.stagingMR != nil {
		e.stagingMR.Dereg()
		e.staging.Free()
	}
	e.scratchMR.Dereg()
	syscall.Munmap(e.scratch)
}
