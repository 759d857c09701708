package host

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
)

// The port-mapped capability in software. A buffer exported for ports is
// an ordinary shared-memory export, and an imported one is a mapping in
// this process, so an engine's Put is a copy between two mappings and its
// Signal an atomic add on a mapped word. The engine is asynchronous as a
// copy engine is: requests go into a bounded ring that one worker goroutine
// consumes in order.

var _ hal.PortMapped = (*Device)(nil)

// ExportPort is Export: a port destination is a shared-memory buffer.
func (d *Device) ExportPort(b hal.Buffer) (hal.Handle, error) { return d.Export(b) }

// ImportPort is Import: the buffer's Addr is the local mapping, the
// address engines take as a Put destination or Signal target.
func (d *Device) ImportPort(h hal.Handle) (hal.Buffer, error) { return d.Import(h) }

// engineRing is the number of requests an engine holds before Put, Copy
// and Signal block. It covers a full proxy FIFO (plan.FifoSlots).
const engineRing = 1024

// NewEngine starts a software engine for the link to peer (which may be
// this device's own endpoint). Errors wrap ErrNotSupported when the link is
// not port-mapped (another host, another backend) and ErrInvalidUsage on a
// closed device.
func (d *Device) NewEngine(peer hal.Endpoint) (hal.Engine, error) {
	if l := d.Link(peer); l.Caps&hal.CapPortMapped == 0 {
		return nil, fmt.Errorf("host: engine to %s device %d: %s: %w", peer.Backend, peer.Ordinal, l.Reason, hal.ErrNotSupported)
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("host: engine on a closed device: %w", hal.ErrInvalidUsage)
	}
	e := &Engine{dev: d, peer: peer, tickets: hal.MakeTickets(engineRing + 2)}
	e.notEmpty = sync.NewCond(&e.mu)
	e.notFull = sync.NewCond(&e.mu)
	go e.run()
	return e, nil
}

type reqKind uint8

const (
	reqPut reqKind = iota + 1
	reqCopy
	reqSignal
)

// request is one ring entry. For a signal, dst is the semaphore address,
// src the count-word address and n the count.
type request struct {
	kind     reqKind
	dst, src uint64
	n        uint64
}

// Engine is hal/host's port-mapped engine. Requests are numbered 1, 2, …
// in issue order; the worker publishes the number of the last one it has
// finished (done). A ticket is the request number at its Mark; Completed
// is the largest ticket whose number done has reached.
type Engine struct {
	dev  *Device
	peer hal.Endpoint

	ring [engineRing]request

	mu       sync.Mutex
	notEmpty *sync.Cond // the worker waits for requests
	notFull  *sync.Cond // issuers wait for room; Close waits for the drain
	head     uint64     // requests issued
	tail     uint64     // requests the worker has released their slots of
	closed   bool       // no more requests; the worker exits once drained
	stopped  bool       // the worker has exited
	err      error      // first failed request (sticky)

	failed atomic.Pointer[error] // err, for Completed to read without mu

	done atomic.Uint64 // requests finished, in order

	// Tickets of Mark and Completed over the request numbers (seq) and
	// done: marks with the same number merge, so at most engineRing+1 are
	// ever outstanding and the ring never grows.
	markMu  sync.Mutex
	tickets hal.Tickets
}

// Put queues a copy of bytes from local address src to dst, the address of
// a buffer imported with ImportPort.
func (e *Engine) Put(dst, src uint64, bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("host: engine put of %d bytes: %w", bytes, hal.ErrInvalidArgument)
	}
	return e.issue(request{kind: reqPut, dst: dst, src: src, n: uint64(bytes)})
}

// Copy queues a local copy, ordered with the engine's other requests.
func (e *Engine) Copy(dst, src uint64, bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("host: engine copy of %d bytes: %w", bytes, hal.ErrInvalidArgument)
	}
	return e.issue(request{kind: reqCopy, dst: dst, src: src, n: uint64(bytes)})
}

// Signal queues: store count at countAddr (unless countAddr is 0), then add
// one to the semaphore at semAddr, both atomically and after every earlier
// request. Both addresses must be 8-byte aligned.
func (e *Engine) Signal(semAddr, countAddr, count uint64) error {
	return e.issue(request{kind: reqSignal, dst: semAddr, src: countAddr, n: count})
}

// issue puts r in the ring, waiting while the ring is full. It returns the
// engine's sticky error, if a request has failed.
func (e *Engine) issue(r request) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for !e.closed && e.err == nil && e.head-e.tail == engineRing {
		e.notFull.Wait()
	}
	if err := e.stateLocked(); err != nil {
		return err
	}
	e.ring[e.head%engineRing] = r
	e.head++
	e.notEmpty.Signal()
	return nil
}

func (e *Engine) stateLocked() error {
	if e.err != nil {
		return e.err
	}
	if e.closed {
		return fmt.Errorf("host: engine to device %d is closed: %w", e.peer.Ordinal, hal.ErrInvalidUsage)
	}
	return nil
}

// Mark returns a ticket covering the requests issued so far.
func (e *Engine) Mark() (uint64, error) {
	e.mu.Lock()
	seq, err := e.head, e.stateLocked()
	e.mu.Unlock()
	if err != nil {
		return 0, err
	}
	e.markMu.Lock()
	defer e.markMu.Unlock()
	t, _ := e.tickets.Mark(seq, e.done.Load())
	return t, nil
}

// Completed returns the largest ticket whose requests are all finished, or
// the error of a failed request.
func (e *Engine) Completed() (uint64, error) {
	var err error
	if p := e.failed.Load(); p != nil {
		err = *p
	}
	e.markMu.Lock()
	defer e.markMu.Unlock()
	return e.tickets.Advance(e.done.Load()), err
}

// Close waits until the queued requests are done (at most WEFT_TIMEOUT)
// and stops the worker. It returns the sticky error of a failed request,
// or ErrTimeout when the requests did not finish in time.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return fmt.Errorf("host: engine to device %d closed twice: %w", e.peer.Ordinal, hal.ErrInvalidUsage)
	}
	e.closed = true
	e.notEmpty.Signal()
	deadline := time.Now().Add(env.Timeout())
	timer := time.AfterFunc(env.Timeout(), func() {
		e.mu.Lock()
		e.notFull.Broadcast()
		e.mu.Unlock()
	})
	defer timer.Stop()
	for !e.stopped {
		if !time.Now().Before(deadline) {
			left := e.head - e.done.Load()
			e.mu.Unlock()
			return fmt.Errorf("host: engine to device %d: close: %d requests still queued at the deadline: %w", e.peer.Ordinal, left, hal.ErrTimeout)
		}
		e.notFull.Wait()
	}
	err := e.err
	e.mu.Unlock()
	return err
}

// run is the worker: it executes requests in order until the engine is
// closed and drained. After a failed request it skips the rest (they still
// count as done, so Close does not wait for them).
func (e *Engine) run() {
	e.mu.Lock()
	for {
		for e.tail == e.head && !e.closed {
			e.notEmpty.Wait()
		}
		if e.tail == e.head {
			e.stopped = true
			e.notFull.Broadcast()
			e.mu.Unlock()
			return
		}
		// Slots [tail, end) are the worker's until tail moves: issuers
		// write only at head. Release them in batches of at most a
		// quarter ring so that a blocked issuer resumes early.
		end, failed := e.head, e.err != nil
		if end-e.tail > engineRing/4 {
			end = e.tail + engineRing/4
		}
		start := e.tail
		e.mu.Unlock()
		var err error
		for i := start; i < end; i++ {
			if !failed && err == nil {
				err = e.exec(&e.ring[i%engineRing], i+1)
			}
			e.done.Store(i + 1)
		}
		e.mu.Lock()
		if err != nil && e.err == nil {
			e.err = err
			e.failed.Store(&e.err)
		}
		e.tail = end
		e.notFull.Broadcast()
	}
}

// exec executes request number seq.
func (e *Engine) exec(r *request, seq uint64) error {
	switch r.kind {
	case reqPut, reqCopy:
		if r.n == 0 {
			return nil
		}
		what := "put"
		if r.kind == reqCopy {
			what = "copy"
		}
		src, rs, err := e.dev.resolveRegion(r.src, int64(r.n))
		if err != nil {
			return fmt.Errorf("host: engine to device %d: %s request %d source: %w", e.peer.Ordinal, what, seq, err)
		}
		dst, rd, err := e.dev.resolveRegion(r.dst, int64(r.n))
		if err != nil {
			return fmt.Errorf("host: engine to device %d: %s request %d destination: %w", e.peer.Ordinal, what, seq, err)
		}
		// Hold both mappings for the copy: a Free waits for it.
		if err := rs.inUse.acquire(e, "source buffer"); err != nil {
			return fmt.Errorf("host: engine to device %d: %s request %d: %w", e.peer.Ordinal, what, seq, err)
		}
		defer rs.inUse.release(e)
		if err := rd.inUse.acquire(e, "destination buffer"); err != nil {
			return fmt.Errorf("host: engine to device %d: %s request %d: %w", e.peer.Ordinal, what, seq, err)
		}
		defer rd.inUse.release(e)
		copy(dst, src)
	case reqSignal:
		if r.src != 0 {
			w, err := e.word(r.src, "count word", seq)
			if err != nil {
				return err
			}
			atomic.StoreUint64(w, r.n)
		}
		w, err := e.word(r.dst, "semaphore", seq)
		if err != nil {
			return err
		}
		atomic.AddUint64(w, 1)
	}
	return nil
}

// abort does nothing: a request's copy is short, and a Free of its memory
// waits for it (guard).
func (e *Engine) abort(string) {}

// word resolves an aligned 64-bit word for an atomic.
func (e *Engine) word(addr uint64, what string, seq uint64) (*uint64, error) {
	if addr%8 != 0 {
		return nil, fmt.Errorf("host: engine to device %d: signal request %d: %s address %#x is not 8-byte aligned: %w", e.peer.Ordinal, seq, what, addr, hal.ErrInvalidArgument)
	}
	b, err := e.dev.resolve(addr, 8)
	if err != nil {
		return nil, fmt.Errorf("host: engine to device %d: signal request %d %s: %w", e.peer.Ordinal, seq, what, err)
	}
	return (*uint64)(unsafe.Pointer(&b[0])), nil
}
