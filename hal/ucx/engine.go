package ucx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/netcore"
	"github.com/weftccl/weft/internal/auth"
	"github.com/weftccl/weft/internal/stageprof"
	"github.com/weftccl/weft/internal/ucx"
)

// ringSize is the number of requests an engine holds before they are
// issued; Put, Copy and Signal wait (bounded by the timeout) while it is
// full.
const ringSize = 1024

// stagingSlots is the number of chunk-sized host slots through which an
// engine sends sources UCX cannot read.
const stagingSlots = 4

type reqKind uint8

const (
	reqPut reqKind = iota + 1
	reqCopy
	reqSignal
	reqRanges // received staged ranges to copy, without a semaphore
)

// request is one queued request; seq numbers it (1, 2, …).
type request struct {
	kind     reqKind
	seq      uint64
	dst, src uint64
	n        uint64
	key      importKey
	sem, cnt uint64
	ranges   []span

	off      uint64 // put: bytes already issued
	inSlot   bool   // put: the next chunk is in slot, copied by ticket
	slot     int
	ticket   uint64
	ack      bool // signal: a release (AckSignal), sent without a flush
	flushing bool // signal: the endpoint flush is under way
	ahead    bool // put: issued while a signal before it waited for its flush (issueAhead)
	flush    ucx.Request
	// signal: the put before it, carried in its message (kind 3) instead
	// of as a ucp_put_nbx (fusePut).
	putDst uint64
	put    []byte
}

// op is a UCX request in flight for request seq.
type op struct {
	r    ucx.Request
	call string
	seq  uint64
	slot int // staging slot it reads, or -1
}

type retired struct{ seq, own uint64 }

// engine is a port-mapped engine to one peer over UCX: a UCP endpoint to
// the peer's worker and the authenticated side channel it was set up on.
// Requests are issued in order as they become ready:
//
//   - a Put of memory UCX reads (host memory, GPU memory of a UCX with its
//     memory type) is one ucp_put_nbx; of other memory, each chunk is first
//     copied by the device's own engine into a host staging slot;
//   - a Copy goes to the device's own engine once every earlier UCX
//     operation is complete at the source (it may overwrite their sources);
//   - a Signal waits for earlier own-engine copies, flushes the endpoint
//     (ucp_ep_flush_nbx: every earlier put is complete at the peer) and
//     then sends the signal as an active message, which the peer applies
//     with its device engine: UCX 1.13's ucp_worker_fence does not order
//     operations that travel on different lanes (a put over cma, a message
//     over shared memory), a flush does. A release (AckSignal) announces
//     no put of this rank and skips the flush.
//
// Everything is guarded by the NetDevice's worker lock; the proxy's calls
// and the NetDevice's progress loop both pump the engine.
type engine struct {
	nd      *NetDevice
	peer    int
	id      uint32
	token   uint64
	ep      *ucx.Endpoint
	conn    net.Conn
	timeout time.Duration

	errMu sync.Mutex
	err   error

	peerClosed atomic.Bool // the peer's NetDevice said it closes
	closing    atomic.Bool

	// wmu guards the rest.
	rkeys     map[importKey]*ucx.Rkey
	own       hal.Engine
	ownIssued uint64
	ownDone   uint64
	staging   hal.Buffer
	slotOps   [stagingSlots]int
	nextSlot  int

	queue        [ringSize]request
	qhead, qlen  int
	ops          []op
	outstanding  map[uint64]int
	ret          []retired
	reqIssued    uint64
	reqDone      uint64
	tickets      hal.Tickets
	dirty        bool // puts issued since the last flush
	batch        bool // the proxy's pass is under way (BeginBatch)
	fused        int  // puts sent inside their signal's message (fusePut)
	ahead        int  // puts issued while a signal before them waited for its flush (issueAhead)
	amSeq        uint64
	curRanges    []span    // staged destination ranges since the last signal
	lastRangeKey importKey // the registration of the last of curRanges
	lastMove     time.Time
	closed       bool
	abandoned    []op // in flight when the peer closed; released at Close
	suspectErr   error
	suspectAt    time.Time
}

var _ hal.Engine = (*engine)(nil)

// dial connects an engine to the peer at a (see NewEngine).
func (nd *NetDevice) dial(a address) (*engine, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("ucx: rank %d: engine to peer rank %d at %s: %s: %w", nd.cfg.Rank, a.rank, a.side, fmt.Sprintf(format, args...), hal.ErrRemote)
	}
	raw, err := net.DialTimeout("tcp", a.side, nd.opts.Timeout)
	if err != nil {
		return nil, fail("side channel: %v", err)
	}
	c := raw
	if !nd.secret.IsZero() {
		if c, err = auth.Client(raw, nd.authConfig(a.rank)); err != nil {
			raw.Close()
			return nil, fmt.Errorf("ucx: rank %d: engine to peer rank %d at %s: %w", nd.cfg.Rank, a.rank, a.side, err)
		}
	}
	nd.mu.Lock()
	nd.lastEng++
	id := nd.lastEng
	nd.mu.Unlock()
	hs := auth.HandshakeTimeout(nd.opts.Timeout)
	if err := writeAll(c, encodeHello(hello{job: nd.job, clientNonce: nd.nonce, serverNonce: a.nonce, client: nd.cfg.Rank, server: a.rank, engine: id}), hs); err != nil {
		raw.Close()
		return nil, fail("hello: %v", err)
	}
	hdr := make([]byte, replyHeader)
	if err := readFull(c, hdr, hs); err != nil {
		raw.Close()
		return nil, fail("no reply: %v", err)
	}
	accept, token, n, err := decodeReplyHeader(hdr)
	if err != nil || n > maxReplyBody || (accept && n == 0) {
		raw.Close()
		return nil, fail("malformed reply (%v, body of %d bytes)", err, n)
	}
	body := make([]byte, n)
	if err := readFull(c, body, hs); err != nil {
		raw.Close()
		return nil, fail("reply body: %v", err)
	}
	if !accept {
		raw.Close()
		return nil, fail("refused: %s", printable(body))
	}
	e := &engine{nd: nd, peer: a.rank, id: id, token: token, conn: c, timeout: nd.opts.Timeout,
		rkeys: map[importKey]*ucx.Rkey{}, outstanding: map[uint64]int{}, tickets: hal.MakeTickets(ringSize + 2)}
	nd.wmu.Lock()
	e.ep, err = nd.w.Connect(body)
	nd.wmu.Unlock()
	if err != nil {
		raw.Close()
		return nil, fmt.Errorf("ucx: rank %d: engine to peer rank %d: %w", nd.cfg.Rank, a.rank, err)
	}
	nd.mu.Lock()
	if nd.closed {
		nd.mu.Unlock()
		raw.Close()
		nd.wmu.Lock()
		e.ep.Close(true)
		nd.wmu.Unlock()
		return nil, fmt.Errorf("ucx: rank %d: engine on a closed NetDevice: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	nd.engines[e] = struct{}{}
	nd.wg.Add(1)
	nd.mu.Unlock()
	go e.watch()
	return e, nil
}

// printable keeps a peer's reason to 200 printable characters.
func printable(b []byte) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return '?'
	}, string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// watch reads the side channel until it ends: the peer's "closing" word
// is an orderly end; anything else while the engine is open means the
// peer is lost.
func (e *engine) watch() {
	defer e.nd.wg.Done()
	word := make([]byte, len(closeWord))
	_, err := readAll(e.conn, word)
	if err == nil && string(word) == closeWord {
		// The peer closed cleanly: it waits for nothing more of this
		// engine, so what is queued or in flight, and what comes, is moot
		// (pump completes it without sending).
		e.peerClosed.Store(true)
		e.nd.wake()
		return
	}
	if e.closing.Load() || e.nd.closing.Load() {
		return
	}
	why := "sent a word that is not a close"
	if err != nil {
		why = fmt.Sprintf("its side channel ended (%v)", err)
	}
	e.nd.failPeer(e.peer, fmt.Errorf("ucx: rank %d: peer rank %d is lost: %s: %w", e.nd.cfg.Rank, e.peer, why, hal.ErrRemote))
}

func readAll(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := c.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (e *engine) fail(err error) {
	e.errMu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.errMu.Unlock()
}

func (e *engine) getErr() error {
	e.errMu.Lock()
	defer e.errMu.Unlock()
	return e.err
}

// closeGrace is how long a UCX failure of the link waits for the side
// channel to say whether the peer closed cleanly (its worker went away
// with this engine's last requests in flight, which it no longer needs)
// or is lost.
const closeGrace = time.Second

// suspect records a UCX failure of the link (wmu held): the engine stops
// issuing, and pump reports it after closeGrace unless the peer said it
// closed.
func (e *engine) suspect(err error) {
	if e.suspectErr == nil {
		e.suspectErr, e.suspectAt = err, time.Now()
	}
}

// peerFail records a failure of the link to the peer (a UCX operation
// failed, a timeout): the engine and the NetDevice report it.
func (e *engine) peerFail(err error) {
	e.fail(err)
	if !e.peerClosed.Load() {
		e.nd.failPeer(e.peer, err)
	}
}

func (e *engine) Put(dst, src uint64, bytes int64) error {
	nd := e.nd
	if bytes < 0 {
		return fmt.Errorf("ucx: rank %d: put of %d bytes to peer rank %d: %w", nd.cfg.Rank, bytes, e.peer, hal.ErrInvalidArgument)
	}
	r := request{kind: reqPut, dst: dst, src: src, n: uint64(bytes)}
	if bytes > 0 {
		k, imp, ok := nd.remote(e.peer, dst, uint64(bytes))
		if !ok {
			return fmt.Errorf("ucx: rank %d: put of %d bytes to %#x: not inside a buffer of peer rank %d imported with ImportPort: %w", nd.cfg.Rank, bytes, dst, e.peer, hal.ErrInvalidArgument)
		}
		r.key = k
		if imp.staged {
			return e.enqueue(r, &span{dst, uint64(bytes)})
		}
	}
	return e.enqueue(r, nil)
}

func (e *engine) Copy(dst, src uint64, bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("ucx: rank %d: copy of %d bytes: %w", e.nd.cfg.Rank, bytes, hal.ErrInvalidArgument)
	}
	return e.enqueue(request{kind: reqCopy, dst: dst, src: src, n: uint64(bytes)}, nil)
}

func (e *engine) Signal(semAddr, countAddr, count uint64) error {
	return e.signal(semAddr, countAddr, count, false)
}

// AckSignal is a release (hal.AckSignaler): the signal waits for the
// engine's earlier copies, as every signal does, but not for its earlier
// puts to land, so no endpoint flush (a round trip to the peer) stands
// before its message; nor does it carry the staged ranges of those puts,
// which the next Signal applies.
func (e *engine) AckSignal(semAddr, countAddr, count uint64) error {
	return e.signal(semAddr, countAddr, count, true)
}

func (e *engine) signal(semAddr, countAddr, count uint64, ack bool) error {
	nd := e.nd
	if _, _, ok := nd.remote(e.peer, semAddr, 8); !ok || semAddr%8 != 0 {
		return fmt.Errorf("ucx: rank %d: signal of %#x: not an aligned word of a buffer of peer rank %d imported with ImportPort: %w", nd.cfg.Rank, semAddr, e.peer, hal.ErrInvalidArgument)
	}
	if countAddr != 0 {
		if _, _, ok := nd.remote(e.peer, countAddr, 8); !ok || countAddr%8 != 0 {
			return fmt.Errorf("ucx: rank %d: signal count word %#x: not an aligned word of a buffer of peer rank %d: %w", nd.cfg.Rank, countAddr, e.peer, hal.ErrInvalidArgument)
		}
	}
	return e.enqueue(request{kind: reqSignal, sem: semAddr, cnt: countAddr, n: count, ack: ack}, nil)
}

// enqueue queues r; rng is the staged destination range of a put, which
// the next signal carries (a ranges-only message goes first when the
// list is full).
func (e *engine) enqueue(r request, rng *span) error {
	nd := e.nd
	nd.wmu.Lock()
	defer nd.wmu.Unlock()
	if e.closed {
		return fmt.Errorf("ucx: rank %d: request on a closed engine to peer rank %d: %w", nd.cfg.Rank, e.peer, hal.ErrInvalidUsage)
	}
	if err := e.getErr(); err != nil {
		return err
	}
	need := 1
	if rng != nil && len(e.curRanges) == maxRanges {
		need = 2
	}
	if e.qlen+need > ringSize {
		deadline := time.Now().Add(e.timeout)
		for e.qlen+need > ringSize {
			e.pump()
			if err := e.getErr(); err != nil {
				return err
			}
			if e.qlen+need <= ringSize {
				break
			}
			if time.Now().After(deadline) {
				return &hal.TimeoutError{Rank: nd.cfg.Rank, Peer: e.peer, Channel: -1, Semaphore: -1, Block: -1,
					What: "ucx engine request ring", Expected: e.reqIssued, Observed: e.reqDone}
			}
			nd.wmu.Unlock()
			time.Sleep(20 * time.Microsecond)
			nd.wmu.Lock()
		}
	}
	idle := !e.waiting()
	if rng != nil {
		if need == 2 {
			e.push(request{kind: reqRanges, ranges: e.curRanges})
			e.curRanges = nil
		}
		// Contiguous ranges of one registration merge; ranges of two
		// registrations never do (their bounce regions may be adjacent).
		if l := len(e.curRanges); l > 0 && e.lastRangeKey == r.key && e.curRanges[l-1].addr+e.curRanges[l-1].n == rng.addr {
			e.curRanges[l-1].n += rng.n
		} else {
			e.curRanges = append(e.curRanges, *rng)
		}
		e.lastRangeKey = r.key
	}
	if r.kind == reqSignal && !r.ack {
		r.ranges, e.curRanges = e.curRanges, nil
	}
	e.push(r)
	if idle {
		e.lastMove = time.Now()
	}
	e.pump()
	if idle && e.waiting() {
		nd.wake()
	}
	return e.getErr()
}

func (e *engine) push(r request) {
	e.reqIssued++
	r.seq = e.reqIssued
	e.queue[(e.qhead+e.qlen)%ringSize] = r
	e.qlen++
}

// waiting reports whether requests are queued or in flight (wmu held).
func (e *engine) waiting() bool {
	return !e.closed && e.getErr() == nil && (e.qlen > 0 || len(e.ops) > 0 || e.ownDone < e.ownIssued)
}

// pump progresses the worker once, polls the engine's operations and
// issues what the queued requests allow (wmu held).
func (e *engine) pump() {
	nd := e.nd
	if e.closed || e.getErr() != nil {
		return
	}
	peerClosed := e.peerClosed.Load()
	if peerClosed {
		// Retire what is queued without sending it, and stop waiting
		// for UCX operations; local copies still complete.
		for e.qlen > 0 {
			if r := &e.queue[e.qhead]; r.flushing {
				e.abandoned = append(e.abandoned, op{r: r.flush, call: "ucp_ep_flush_nbx", slot: -1})
			}
			e.ret = append(e.ret, retired{seq: e.queue[e.qhead].seq, own: e.ownIssued})
			e.queue[e.qhead] = request{}
			e.qhead = (e.qhead + 1) % ringSize
			e.qlen--
		}
		e.abandoned = append(e.abandoned, e.ops...)
		e.ops = nil
		clear(e.outstanding)
	}
	nd.w.Progress()
	moved := false
	kept := e.ops[:0]
	for _, o := range e.ops {
		done, err := nd.lib.Done(&o.r, o.call)
		if err != nil {
			e.suspect(fmt.Errorf("ucx: rank %d: %s to peer rank %d failed: %w", nd.cfg.Rank, o.call, e.peer, err))
		}
		if !done {
			kept = append(kept, o)
			continue
		}
		moved = true
		if e.outstanding[o.seq]--; e.outstanding[o.seq] == 0 {
			delete(e.outstanding, o.seq)
		}
		if o.slot >= 0 {
			e.slotOps[o.slot]--
		}
	}
	e.ops = kept
	if e.own != nil && e.ownDone < e.ownIssued {
		t, err := e.own.Completed()
		if err != nil {
			e.fail(fmt.Errorf("ucx: rank %d: engine to peer rank %d: local copy: %w", nd.cfg.Rank, e.peer, err))
			return
		}
		if t > e.ownDone {
			e.ownDone, moved = t, true
		}
	}
	if err := e.ep.Err(); err != nil {
		e.suspect(fmt.Errorf("ucx: rank %d: endpoint to peer rank %d: %w", nd.cfg.Rank, e.peer, err))
	}
	if e.suspectErr != nil && !peerClosed {
		// Wait for the side channel's word (the peer closed cleanly, or
		// is lost) before reporting a UCX failure of the link, for at
		// most closeGrace.
		if time.Since(e.suspectAt) >= closeGrace {
			e.peerFail(e.suspectErr)
		}
		return
	}
	for e.qlen > 0 && e.getErr() == nil && !peerClosed {
		r := &e.queue[e.qhead]
		if !e.issue(r) {
			if r.flushing && e.issueAhead() {
				moved = true
			}
			break
		}
		moved = true
		e.ret = append(e.ret, retired{seq: r.seq, own: e.ownIssued})
		e.queue[e.qhead] = request{}
		e.qhead = (e.qhead + 1) % ringSize
		e.qlen--
	}
	n := 0
	for _, r := range e.ret {
		if e.outstanding[r.seq] > 0 || r.own > e.ownDone {
			break
		}
		e.reqDone = r.seq
		n++
	}
	if n > 0 {
		e.ret = append(e.ret[:0], e.ret[n:]...)
	}
	e.tickets.Advance(e.reqDone)
	now := time.Now()
	switch {
	case moved || peerClosed || !e.waiting():
		e.lastMove = now
	case now.Sub(e.lastMove) > e.timeout:
		e.peerFail(&hal.TimeoutError{Rank: nd.cfg.Rank, Peer: e.peer, Channel: -1, Semaphore: -1, Block: -1,
			What:     fmt.Sprintf("ucx engine to peer rank %d (%d operations in flight, %d requests queued, no progress in %v)", e.peer, len(e.ops), e.qlen, e.timeout),
			Expected: e.reqIssued, Observed: e.reqDone})
	}
}

func (e *engine) track(seq uint64, r ucx.Request, call string, slot int) {
	if !r.Pending() {
		return
	}
	e.ops = append(e.ops, op{r: r, call: call, seq: seq, slot: slot})
	e.outstanding[seq]++
	if slot >= 0 {
		e.slotOps[slot]++
	}
}

// issueAhead issues the puts queued right behind the head, a signal
// waiting for its endpoint flush: a flush completes when the operations
// issued before it have (ucp_ep_flush_nbx), so a put issued meanwhile
// does not delay the signal, and its bytes stream while the flush's round
// trip is under way instead of after it. Without this, a one-way plan's
// windows over UCX's TCP transport (a put, then a signal, per window)
// left the connection idle for a round trip per window. Only puts that
// UCX reads in place (no staging, whose own-engine copy the signal would
// then wait for, and none that fusePut would carry in a signal's message)
// go ahead; it stops at the first other request. The signal is still
// issued before them in the retirement order (issue returns true for a
// put already issued). It reports whether any put was issued.
func (e *engine) issueAhead() bool {
	issued := false
	for i := 1; i < e.qlen; i++ {
		r := &e.queue[(e.qhead+i)%ringSize]
		if r.ahead {
			continue
		}
		if r.kind != reqPut || r.n == 0 {
			break
		}
		src, host := e.inPlace(r)
		if src == 0 || e.fusable(r, host) || !e.putInPlace(r, src) {
			break
		}
		r.ahead, issued = true, true
		e.ahead++
	}
	return issued
}

// inPlace returns the address UCX reads put r's bytes from in place (0:
// the put is staged) and, for host memory registered directly, its host
// view (fusePut's source): the device's memory where UCX reaches it
// (e.direct), or a registration with a host view (a host window's slot,
// HostWindows).
func (e *engine) inPlace(r *request) (uintptr, []byte) {
	if e.direct() {
		return uintptr(r.src), nil
	}
	if r.inSlot || r.off != 0 {
		return 0, nil
	}
	host := e.nd.localHost(r.src, r.n)
	if host == nil {
		return 0, nil
	}
	return uintptr(unsafe.Pointer(&host[0])), host
}

// putInPlace issues put r from src as one ucp_put_nbx once the own
// engine's earlier copies are done (the source may be one's destination);
// false: not yet, or the put failed (recorded).
func (e *engine) putInPlace(r *request, src uintptr) bool {
	if e.ownDone < e.ownIssued {
		return false
	}
	k, err := e.rkey(r.key)
	if err != nil {
		e.fail(err)
		return false
	}
	req, err := e.ep.Put(src, r.n, r.dst, k)
	if err != nil {
		e.suspect(fmt.Errorf("ucx: rank %d: put of %d bytes to peer rank %d: %w", e.nd.cfg.Rank, r.n, e.peer, err))
		return false
	}
	e.track(r.seq, req, "ucp_put_nbx", -1)
	e.dirty = true
	return true
}

// direct reports whether UCX reads this device's memory itself.
func (e *engine) direct() bool { return e.nd.memType >= 0 }

// issue issues what it can of r; true when r is fully issued.
func (e *engine) issue(r *request) bool {
	nd := e.nd
	switch r.kind {
	case reqCopy:
		if len(e.ops) > 0 {
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
			e.fail(fmt.Errorf("ucx: rank %d: engine to peer rank %d: copy: %w", nd.cfg.Rank, e.peer, err))
			return false
		}
		return true
	case reqPut:
		if r.n == 0 || r.ahead {
			return true
		}
		src, host := e.inPlace(r)
		if fused, hold := e.fusePut(r, host); fused || hold {
			return fused
		}
		if src != 0 {
			return e.putInPlace(r, src)
		}
		k, err := e.rkey(r.key)
		if err != nil {
			e.fail(err)
			return false
		}
		chunk := uint64(nd.opts.Chunk)
		for r.off < r.n {
			cn := min(chunk, r.n-r.off)
			if !r.inSlot {
				if !e.stage(r, cn) {
					return false
				}
			}
			if e.ownDone < r.ticket {
				return false
			}
			host := uintptr(unsafe.Pointer(&e.staging.Host()[0])) + uintptr(r.slot)*uintptr(chunk)
			req, err := e.ep.Put(host, cn, r.dst+r.off, k)
			if err != nil {
				e.suspect(fmt.Errorf("ucx: rank %d: put of %d bytes to peer rank %d: %w", nd.cfg.Rank, cn, e.peer, err))
				return false
			}
			e.track(r.seq, req, "ucp_put_nbx", r.slot)
			e.dirty = true
			r.inSlot = false
			r.off += cn
		}
		return true
	case reqSignal, reqRanges:
		if e.ownDone < e.ownIssued {
			return false
		}
		if !r.flushing && e.dirty && !r.ack {
			req, err := e.ep.Flush()
			if err != nil {
				e.suspect(fmt.Errorf("ucx: rank %d: flush of the endpoint to peer rank %d: %w", nd.cfg.Rank, e.peer, err))
				return false
			}
			r.flush, r.flushing, e.dirty = req, true, false
		}
		if r.flushing {
			done, err := nd.lib.Done(&r.flush, "ucp_ep_flush_nbx")
			if err != nil {
				e.suspect(fmt.Errorf("ucx: rank %d: flush of the endpoint to peer rank %d: %w", nd.cfg.Rank, e.peer, err))
				return false
			}
			if !done {
				return false
			}
			r.flushing = false
		}
		kind := byte(kindSignal)
		switch {
		case r.kind == reqRanges:
			kind = kindRanges
		case r.put != nil:
			kind = kindPutSignal
		}
		msg := encodeSignal(signalMsg{kind: kind, rank: nd.cfg.Rank, engine: e.id, token: e.token, seq: e.amSeq,
			sem: r.sem, cnt: r.cnt, count: r.n, ranges: r.ranges, putDst: r.putDst, put: r.put})
		ts := stageprof.TraceStart()
		req, err := e.ep.SendAM(amID, msg)
		if err != nil {
			e.suspect(fmt.Errorf("ucx: rank %d: signal to peer rank %d: %w", nd.cfg.Rank, e.peer, err))
			return false
		}
		stageprof.Trace(stageprof.EvWrite, nd.cfg.Rank, ts, uint64(e.id), e.amSeq, uint64(ucxTraceKind+kind)|uint64(e.peer)<<8)
		e.amSeq++
		e.track(r.seq, req, "ucp_am_send_nbx", -1)
		return true
	}
	return false
}

// ucxTraceKind is added to a message's kind in the timeline
// (WEFT_PROXY_TRACE), so that scripts/net-trace.py tells UCX's messages
// from the socket transport's frames.
const ucxTraceKind = 16

// fusePut moves put r (at the head of the queue) into the signal queued
// right behind it, whose message then carries the bytes (kind 3): one
// active message instead of a ucp_put_nbx, the endpoint flush that must
// order it before the signal (a round trip), and the message. Only a put
// of at most maxInline bytes from host memory registered directly, of a
// NetDevice whose peers' registrations are all host memory the CPU
// writes (directly, or a bounce region: UCX without the GPU's memory
// type), and after the own engine's earlier copies (its source may be
// one's destination). fused: r was moved (it is complete: its bytes are
// copied). hold: r could be, but no request follows it yet and the
// proxy's pass is under way (BeginBatch): it waits in the queue for the
// signal a kernel pushes right behind a put.
func (e *engine) fusePut(r *request, src []byte) (fused, hold bool) {
	switch {
	case !e.fusable(r, src):
		return false, false
	case e.ownDone < e.ownIssued:
		return false, true // not yet: the source may still be written
	case e.qlen < 2:
		return false, e.batch
	}
	next := &e.queue[(e.qhead+1)%ringSize]
	if next.kind != reqSignal || next.put != nil {
		return false, false
	}
	next.putDst, next.put = r.dst, append([]byte(nil), src...)
	e.fused++
	return true, false
}

// fusable reports whether fusePut may move put r, whose source is src in
// host memory registered directly (nil: elsewhere), into the signal
// after it.
func (e *engine) fusable(r *request, src []byte) bool {
	return src != nil && r.kind == reqPut && !e.direct() && r.n > 0 && r.n <= maxInline && !r.inSlot && r.off == 0
}

// BeginBatch starts a pass of the proxy (hal.EngineBatcher): until
// EndBatch, a put that could travel in its signal's message (fusePut)
// waits in the queue for the request after it.
func (e *engine) BeginBatch() {
	e.nd.wmu.Lock()
	e.batch = true
	e.nd.wmu.Unlock()
}

// Holding reports whether a put waits for the request after it.
func (e *engine) Holding() bool {
	nd := e.nd
	nd.wmu.Lock()
	defer nd.wmu.Unlock()
	if !e.batch || e.qlen != 1 {
		return false
	}
	r := &e.queue[e.qhead]
	return r.kind == reqPut && e.fusable(r, nd.localHost(r.src, r.n))
}

// EndBatch ends the pass: a put still waiting goes out as a ucp_put_nbx.
func (e *engine) EndBatch() error {
	nd := e.nd
	nd.wmu.Lock()
	defer nd.wmu.Unlock()
	e.batch = false
	e.pump()
	if e.waiting() {
		nd.wake()
	}
	return e.getErr()
}

// stage copies the next chunk of r into a free staging slot with the own
// engine.
func (e *engine) stage(r *request, cn uint64) bool {
	nd := e.nd
	if e.slotOps[e.nextSlot] > 0 {
		return false
	}
	if e.staging == nil {
		b, err := nd.dev.AllocHost(stagingSlots * nd.opts.Chunk)
		if err == nil && b.Host() == nil {
			b.Free()
			err = fmt.Errorf("host allocation without host bytes")
		}
		if err != nil {
			e.fail(fmt.Errorf("ucx: rank %d: engine to peer rank %d: staging buffer: %w", nd.cfg.Rank, e.peer, err))
			return false
		}
		e.staging = b
	}
	own, err := e.ownEngine()
	if err == nil {
		var t uint64
		if t, err = netcore.CopyMark(own, e.staging.Addr()+uint64(e.nextSlot)*uint64(nd.opts.Chunk), r.src+r.off, int64(cn)); err == nil {
			e.ownIssued = t
		}
	}
	if err != nil {
		e.fail(fmt.Errorf("ucx: rank %d: engine to peer rank %d: stage %d bytes from %#x: %w", nd.cfg.Rank, e.peer, cn, r.src+r.off, err))
		return false
	}
	r.inSlot, r.slot, r.ticket = true, e.nextSlot, e.ownIssued
	e.nextSlot = (e.nextSlot + 1) % stagingSlots
	return true
}

func (e *engine) ownEngine() (hal.Engine, error) {
	if e.own == nil {
		own, err := e.nd.pm.NewEngine(e.nd.dev.Endpoint())
		if err != nil {
			return nil, err
		}
		e.own = own
	}
	return e.own, nil
}

// rkey unpacks the remote key of an import on this engine's endpoint the
// first time it is used.
func (e *engine) rkey(k importKey) (*ucx.Rkey, error) {
	if r := e.rkeys[k]; r != nil {
		return r, nil
	}
	nd := e.nd
	nd.mu.Lock()
	imp := nd.imports[k]
	var packed []byte
	if imp != nil {
		packed = imp.rkey
	}
	nd.mu.Unlock()
	if imp == nil {
		return nil, fmt.Errorf("ucx: rank %d: registration %d of peer rank %d was freed while a put to it was queued: %w", nd.cfg.Rank, k.reg, k.rank, hal.ErrInvalidUsage)
	}
	r, err := e.ep.UnpackRkey(packed)
	if err != nil {
		return nil, fmt.Errorf("ucx: rank %d: remote key of registration %d of peer rank %d: %w", nd.cfg.Rank, k.reg, k.rank, err)
	}
	e.rkeys[k] = r
	return r, nil
}

// Mark returns a ticket covering every request issued so far.
func (e *engine) Mark() (uint64, error) {
	e.nd.wmu.Lock()
	defer e.nd.wmu.Unlock()
	if err := e.getErr(); err != nil {
		return 0, err
	}
	t, _ := e.tickets.Mark(e.reqIssued, e.reqDone)
	return t, nil
}

// Completed progresses and returns the largest ticket whose requests are
// complete at the source.
func (e *engine) Completed() (uint64, error) {
	e.nd.wmu.Lock()
	e.pump()
	t, err := e.tickets.Completed(), e.getErr()
	e.nd.wmu.Unlock()
	return t, err
}

// Close waits (up to the timeout) for queued requests, says goodbye on
// the side channel and closes the endpoint. Closing twice is
// hal.ErrInvalidUsage.
func (e *engine) Close() error {
	e.nd.wmu.Lock()
	closed := e.closed
	e.nd.wmu.Unlock()
	if closed {
		return fmt.Errorf("ucx: rank %d: engine to peer rank %d closed twice: %w", e.nd.cfg.Rank, e.peer, hal.ErrInvalidUsage)
	}
	return e.closeQuiet()
}

// closeQuiet is Close for the NetDevice: a second call returns nil. A
// failure already reported by an engine call is not repeated.
func (e *engine) closeQuiet() error {
	nd := e.nd
	deadline := time.Now().Add(e.timeout)
	var err error
	nd.wmu.Lock()
	if e.closed {
		nd.wmu.Unlock()
		return nil
	}
	for {
		e.pump()
		if e.getErr() != nil || (e.qlen == 0 && len(e.ops) == 0 && e.ownDone >= e.ownIssued) {
			break
		}
		if time.Now().After(deadline) {
			err = &hal.TimeoutError{Rank: nd.cfg.Rank, Peer: e.peer, Channel: -1, Semaphore: -1, Block: -1,
				What: "ucx engine close", Expected: e.reqIssued, Observed: e.reqDone}
			break
		}
		nd.wmu.Unlock()
		time.Sleep(20 * time.Microsecond)
		nd.wmu.Lock()
	}
	failed := e.getErr() != nil || err != nil
	e.closed = true
	e.closing.Store(true)
	nd.wmu.Unlock()
	if !failed && !e.peerClosed.Load() {
		// The goodbye says how many signals were sent: the peer applies
		// them all (they travel through UCX, the goodbye through TCP, and
		// may arrive after it) before it ends the session.
		writeAll(e.conn, binary.BigEndian.AppendUint64([]byte(byeWord), e.amSeq), time.Second)
	}
	e.conn.Close()
	nd.wmu.Lock()
	for k, r := range e.rkeys {
		r.Destroy()
		delete(e.rkeys, k)
	}
	for _, o := range append(e.ops, e.abandoned...) {
		nd.lib.Done(&o.r, o.call) // releases what completed; the rest goes with the endpoint
	}
	e.ops, e.abandoned = nil, nil
	// A forced close (no flush: the peer failed or left first) is
	// refused by UCX with "Invalid parameter" on an endpoint made
	// without peer failure handling (shared-memory transports).
	req, cerr := e.ep.Close((failed || e.peerClosed.Load()) && e.ep.PeerFailureHandling())
	for cerr == nil && req.Pending() && time.Now().Before(deadline.Add(time.Second)) {
		nd.w.Progress()
		var done bool
		if done, cerr = nd.lib.Done(&req, "ucp_ep_close_nbx"); done {
			break
		}
		nd.wmu.Unlock()
		time.Sleep(20 * time.Microsecond)
		nd.wmu.Lock()
	}
	nd.wmu.Unlock()
	if cerr != nil && !failed && !errors.Is(cerr, hal.ErrRemote) {
		err = errors.Join(err, fmt.Errorf("ucx: rank %d: close the endpoint to peer rank %d: %w", nd.cfg.Rank, e.peer, cerr))
	}
	if e.own != nil {
		if cerr := e.own.Close(); cerr != nil && !failed {
			err = errors.Join(err, cerr)
		}
	}
	if e.staging != nil {
		e.staging.Free()
	}
	nd.mu.Lock()
	delete(nd.engines, e)
	nd.mu.Unlock()
	return err
}
