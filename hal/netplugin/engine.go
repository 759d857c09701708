package netplugin

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/netcore"
)

// ringSize is the number of requests an engine holds that are not yet
// complete at the source; Put, Copy and Signal wait (bounded by the
// timeout) while it is full.
const ringSize = 4096

// Engine is an engine to a peer over the plugin. The proxy's calls only
// queue requests in a ring; the NetDevice's progress goroutine takes them
// in order: it copies each chunk of a put into a send slot of the link
// with the device's own engine, and sends the message once that copy is
// complete; a Copy goes to the own engine in the same order; a Signal is
// sent once an own-engine ticket covering every earlier request is
// complete. A request is complete at the source when its last own-engine
// ticket is, which is what Mark and Completed report.
type Engine struct {
	nd      *NetDevice
	l       *link
	peer    int
	id      uint64
	own     hal.Engine
	timeout time.Duration

	mu      sync.Mutex
	ring    [ringSize]request
	head    uint64
	closing bool

	// progress goroutine only
	taken      uint64
	curOff     uint64
	curTicket  uint64
	seq        uint64
	ownIssued  uint64
	ownDone    uint64
	retire     []retireEntry
	queuedMsgs uint64
	sentMsgs   uint64
	byeQueued  bool
	byeAcked   bool
	finished   bool

	srcDone  atomic.Uint64
	progress notifier

	marks *netcore.Marks

	st       netcore.EngineState // failure, reported, shutdown
	closedCh chan struct{}
}

type reqKind uint8

const (
	reqPut reqKind = iota + 1
	reqCopy
	reqSignal
)

// request is one ring entry; for a signal dst is the semaphore, src the
// count word and n the count.
type request struct {
	kind     reqKind
	dst, src uint64
	n        uint64
}

type retireEntry struct{ req, ticket uint64 }

var _ hal.Engine = (*Engine)(nil)

func (nd *NetDevice) newEngine(l *link) (*Engine, error) {
	e := &Engine{nd: nd, l: l, peer: l.peer, id: rand.Uint64(), timeout: nd.opts.Timeout,
		closedCh: make(chan struct{}), marks: netcore.NewMarks(ringSize + 2)}
	var err error
	if e.own, err = nd.pm.NewEngine(nd.dev.Endpoint()); err != nil {
		return nil, fmt.Errorf("%s: the device's own engine: %w", e.describe(), err)
	}
	nd.mu.Lock()
	if nd.closed {
		nd.mu.Unlock()
		e.own.Close()
		return nil, fmt.Errorf("%s: the NetDevice is closed: %w", e.describe(), hal.ErrInvalidUsage)
	}
	nd.engines[e] = struct{}{}
	l.engByID[e.id] = e
	nd.mu.Unlock()
	nd.log.Info("net plugin engine connected", "peer", e.peer, "engine", e.id)
	return e, nil
}

func (e *Engine) describe() string {
	return fmt.Sprintf("netplugin: rank %d: engine to rank %d", e.nd.cfg.Rank, e.peer)
}

// Put queues a copy of bytes from local address src to dst, inside a
// buffer imported from this engine's peer (else hal.ErrInvalidArgument,
// at once).
func (e *Engine) Put(dst, src uint64, bytes int64) error {
	if err := e.nd.reg.CheckPut(e.describe(), e.peer, e.l.nonce(), dst, bytes); err != nil {
		return err
	}
	return e.issue(request{kind: reqPut, dst: dst, src: src, n: uint64(bytes)})
}

// Copy queues a copy between two local addresses, ordered with the
// engine's other requests: a later Signal is sent after it has finished.
func (e *Engine) Copy(dst, src uint64, bytes int64) error {
	if err := netcore.CheckCopy(e.describe(), dst, src, bytes); err != nil {
		return err
	}
	return e.issue(request{kind: reqCopy, dst: dst, src: src, n: uint64(bytes)})
}

// Signal queues: once the data of every earlier put has been applied at
// the peer and every earlier copy has finished, store count at countAddr
// (0: nothing) and add one to the semaphore at semAddr, both 8-byte words
// in buffers imported from the peer.
func (e *Engine) Signal(semAddr, countAddr, count uint64) error {
	if err := e.nd.reg.CheckSignal(e.describe(), e.peer, e.l.nonce(), semAddr, countAddr); err != nil {
		return err
	}
	return e.issue(request{kind: reqSignal, dst: semAddr, src: countAddr, n: count})
}

// nonce is the peer's incarnation (known once the link is ready).
func (l *link) nonce() uint64 {
	l.nd.mu.Lock()
	defer l.nd.mu.Unlock()
	return l.peerNonce
}

// issue puts r in the ring, waiting (at most the timeout without
// progress) while ringSize requests are not complete at the source.
func (e *Engine) issue(r request) error {
	if err := e.check(); err != nil {
		return err
	}
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		return fmt.Errorf("%s is closed: %w", e.describe(), hal.ErrInvalidUsage)
	}
	h := e.head
	if h-e.srcDone.Load() >= ringSize {
		e.mu.Unlock()
		if err := e.await("request ring full", func() bool { return h-e.srcDone.Load() < ringSize }); err != nil {
			return e.report(err)
		}
		e.mu.Lock()
	}
	e.ring[h%ringSize] = r
	e.head = h + 1
	e.mu.Unlock()
	e.nd.kick()
	return nil
}

// check returns the engine's failure: its own, its link's, or its peer's.
func (e *Engine) check() error {
	if err := e.st.Err(); err != nil {
		return e.report(err)
	}
	if err := e.l.failure(); err != nil {
		e.fail(fmt.Errorf("%s: %w", e.describe(), err))
		return e.report(e.st.Err())
	}
	if e.nd.fails.Count() > 0 {
		if err := e.nd.PeerErr(e.peer); err != nil {
			e.fail(fmt.Errorf("%s: rank %d failed: %w", e.describe(), e.peer, err))
			return e.report(e.st.Err())
		}
	}
	if e.l.peerClosed() {
		e.fail(fmt.Errorf("%s: rank %d closed its net plugin transport: %w", e.describe(), e.peer, hal.ErrRemote))
		return e.report(e.st.Err())
	}
	return nil
}

func (e *Engine) report(err error) error { return e.st.Report(err) }

func (e *Engine) fail(err error) {
	if e.st.Fail(err) {
		e.progress.Notify()
		e.nd.kick()
	}
}

// Err returns the engine's failure, or nil.
func (e *Engine) Err() error { return e.st.Err() }

// await waits until ready holds, the engine fails, or nothing advances
// for the timeout.
func (e *Engine) await(what string, ready func() bool) error {
	return e.progress.Await(netcore.Wait{Describe: e.describe, What: what, Timeout: e.timeout, Ready: ready, Err: e.Err})
}

// Mark returns a ticket covering the requests issued so far.
func (e *Engine) Mark() (uint64, error) {
	if err := e.check(); err != nil {
		return 0, err
	}
	e.mu.Lock()
	req, closing := e.head, e.closing
	e.mu.Unlock()
	if closing {
		return 0, fmt.Errorf("%s is closed: %w", e.describe(), hal.ErrInvalidUsage)
	}
	return e.marks.Mark(req, e.srcDone.Load()), nil
}

// Completed returns the largest ticket whose requests are complete at the
// source (put sources staged, copies done), or the engine's failure.
func (e *Engine) Completed() (uint64, error) {
	err := e.check()
	return e.marks.Completed(e.srcDone.Load()), err
}

// step is the progress goroutine's work on the engine: own-engine
// completions, staging of new requests, the goodbye at Close.
func (e *Engine) step() bool {
	if e.finished {
		return false
	}
	l := e.l
	busy := false
	if e.ownIssued > e.ownDone {
		d, err := e.own.Completed()
		if err != nil {
			e.fail(fmt.Errorf("%s: the device's own engine: %w", e.describe(), err))
		} else if d > e.ownDone {
			e.ownDone = d
			busy = true
		}
	}
	moved := false
	for len(e.retire) > 0 && e.retire[0].ticket <= e.ownDone {
		e.srcDone.Store(e.retire[0].req)
		e.retire = e.retire[1:]
		moved = true
	}
	if moved {
		e.progress.Notify()
		busy = true
	}
	e.mu.Lock()
	head, closing := e.head, e.closing
	e.mu.Unlock()
	if e.Err() == nil {
		e.stepCheck(head)
	}
	if err := e.Err(); err != nil {
		e.finish()
		return true
	}
	for e.taken < head {
		r := e.ring[e.taken%ringSize]
		switch r.kind {
		case reqPut:
			for e.curOff < r.n {
				slot := l.takeSlot()
				if slot < 0 {
					return busy
				}
				n := min(uint64(l.chunk), r.n-e.curOff)
				dst := l.sendStage.Addr() + uint64(slot*l.slotSize()+headerSize)
				t, err := e.ownOp(func() error { return e.own.Copy(dst, r.src+e.curOff, int64(n)) })
				if err != nil {
					l.freeSend = append(l.freeSend, slot)
					e.fail(err)
					return true
				}
				l.push(outMsg{m: message{kind: msgPut, e: e.id, s: e.seq, a: r.dst + e.curOff, b: n}, size: int(n), slot: slot, eng: e, ticket: t})
				e.seq++
				e.queuedMsgs++
				e.curOff += n
				e.curTicket = t
			}
			if r.n == 0 {
				t, err := e.ownOp(nil)
				if err != nil {
					e.fail(err)
					return true
				}
				e.curTicket = t
			}
		case reqCopy:
			t, err := e.ownOp(func() error {
				if r.n == 0 {
					return nil
				}
				return e.own.Copy(r.dst, r.src, int64(r.n))
			})
			if err != nil {
				e.fail(err)
				return true
			}
			e.curTicket = t
		case reqSignal:
			slot := l.takeSlot()
			if slot < 0 {
				return busy
			}
			t, err := e.ownOp(nil)
			if err != nil {
				l.freeSend = append(l.freeSend, slot)
				e.fail(err)
				return true
			}
			l.push(outMsg{m: message{kind: msgSignal, e: e.id, s: e.seq, a: r.dst, b: r.src, c: r.n}, slot: slot, eng: e, ticket: t})
			e.seq++
			e.queuedMsgs++
			e.curTicket = t
		}
		e.taken++
		e.curOff = 0
		e.retire = append(e.retire, retireEntry{req: e.taken, ticket: e.curTicket})
		busy = true
	}
	if closing && e.taken == head {
		if !e.byeQueued && e.idle(head) && l.peerClosed() {
			// The peer closed its transport after everything of this
			// engine was applied: nobody is left to say goodbye to.
			e.finish()
			return true
		}
		if !e.byeQueued && e.sentMsgs == e.queuedMsgs && len(e.retire) == 0 {
			l.queue(message{kind: msgBye, e: e.id, s: e.seq}, nil)
			e.byeQueued = true
			busy = true
		}
		if e.byeAcked || (e.byeQueued && l.peerClosed()) {
			e.finish()
			busy = true
		}
	}
	return busy
}

// idle reports whether every request up to head is staged and sent.
func (e *Engine) idle(head uint64) bool {
	return e.taken == head && e.sentMsgs == e.queuedMsgs && len(e.retire) == 0
}

// stepCheck is check for the progress goroutine: a peer that closed its
// transport fails the engine only while requests are not yet sent (a
// call on the engine still fails at once, by check).
func (e *Engine) stepCheck(head uint64) {
	if err := e.l.failure(); err != nil {
		e.fail(fmt.Errorf("%s: %w", e.describe(), err))
		return
	}
	if e.nd.fails.Count() > 0 {
		if err := e.nd.PeerErr(e.peer); err != nil {
			e.fail(fmt.Errorf("%s: rank %d failed: %w", e.describe(), e.peer, err))
			return
		}
	}
	if !e.idle(head) && e.l.peerClosed() {
		e.fail(fmt.Errorf("%s: rank %d closed its net plugin transport with requests of this engine in flight: %w", e.describe(), e.peer, hal.ErrRemote))
	}
}

// ownOp runs op (nil: none) on the own engine and returns a ticket
// covering it and everything before it.
func (e *Engine) ownOp(op func() error) (uint64, error) {
	if op != nil {
		if err := op(); err != nil {
			return 0, fmt.Errorf("%s: the device's own engine: %w", e.describe(), err)
		}
	}
	t, err := e.own.Mark()
	if err != nil {
		return 0, fmt.Errorf("%s: the device's own engine: %w", e.describe(), err)
	}
	e.ownIssued = max(e.ownIssued, t)
	return t, nil
}

// finish ends the engine's life in the progress goroutine.
func (e *Engine) finish() {
	if e.finished {
		return
	}
	e.finished = true
	e.progress.Notify()
	close(e.closedCh)
}

// Close waits until every queued request is sent, says goodbye and waits
// for the peer's acknowledgement (every message applied or queued on its
// device), at most the timeout, then releases the engine. It returns the
// engine's failure, naming the peer, if it had one.
func (e *Engine) Close() error { return e.st.Close(e.describe, e.shutdown) }

// closeQuiet closes for NetDevice.Close: a second close is no error, and
// a failure already returned by a call is not repeated.
func (e *Engine) closeQuiet() error { return e.st.CloseQuiet(e.shutdown) }

func (e *Engine) shutdown() error {
	e.mu.Lock()
	e.closing = true
	e.mu.Unlock()
	e.nd.kick()
	// Wait for the drain and the goodbye, at most the timeout without
	// progress (a message sent, a source staged).
	timer := time.NewTimer(e.timeout)
	defer timer.Stop()
	var err error
wait:
	for {
		ch := e.progress.Wait()
		select {
		case <-e.closedCh:
			err = e.Err()
			break wait
		case <-ch:
			timer.Reset(e.timeout)
		case <-timer.C:
			err = fmt.Errorf("%s: close: rank %d did not take or acknowledge the engine's messages within %v (lost?): %w", e.describe(), e.peer, e.timeout, hal.ErrTimeout)
			e.fail(err)
			e.nd.failPeer(e.peer, err)
			// The progress goroutine finishes a failed engine at its
			// next step; only then is the own engine released.
			select {
			case <-e.closedCh:
			case <-time.After(e.timeout):
				return err
			}
			break wait
		}
	}
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	if cerr := e.own.Close(); cerr != nil && err == nil {
		errs = append(errs, fmt.Errorf("%s: close the device's own engine: %w", e.describe(), cerr))
	}
	nd := e.nd
	nd.mu.Lock()
	delete(nd.engines, e)
	delete(e.l.engByID, e.id)
	nd.mu.Unlock()
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}
