package mutant

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
)

// The port-mapped capability of the mutants. Every mutant offers it: the
// memory-mapped mutants hand out hal/host's engines unchanged, and the
// port mutants (PortKinds) an engine of their own that breaks one
// guarantee of hal.Engine. That engine runs requests in order on a worker
// goroutine, on the mutant's live buffers (the same memory the host's
// engine would write), so that it can delay, reorder, drop or withhold
// them.

const (
	// PortSignalOvertakesPut: an engine applies a signal as soon as it is
	// issued, before the puts and copies issued earlier, which land Delay
	// later.
	PortSignalOvertakesPut Kind = "port-signal-overtakes-put"
	// PortFlushEarly: Completed reports every ticket at once, and the
	// requests a Mark covers run Delay later, reading sources the caller
	// has reused by then.
	PortFlushEarly Kind = "port-flush-early"
	// PortLostPut: one put in LostEvery (of those moving bytes) is
	// silently dropped.
	PortLostPut Kind = "port-lost-put"
	// PortStalledEngine: an engine accepts requests and never executes
	// them; no ticket completes.
	PortStalledEngine Kind = "port-stalled-engine"
)

// PortKinds lists the mutants of the port-mapped capability.
var PortKinds = []Kind{PortSignalOvertakesPut, PortFlushEarly, PortLostPut, PortStalledEngine}

// LostEvery is the period of PortLostPut's drops.
const LostEvery = 10

func init() {
	docs[PortSignalOvertakesPut] = "an engine's signal is applied before the puts issued ahead of it"
	docs[PortFlushEarly] = "an engine reports tickets complete before their requests have run"
	docs[PortLostPut] = fmt.Sprintf("an engine drops one put in %d", LostEvery)
	docs[PortStalledEngine] = "an engine never executes its requests"
}

func (k Kind) port() bool {
	for _, p := range PortKinds {
		if p == k {
			return true
		}
	}
	return false
}

var _ hal.PortMapped = (*Device)(nil)

func (d *Device) ExportPort(b hal.Buffer) (hal.Handle, error) { return d.pm.ExportPort(unwrap(b)) }

func (d *Device) ImportPort(h hal.Handle) (hal.Buffer, error) { return d.wrap(d.pm.ImportPort(h)) }

// NewEngine returns the host's engine, or for a port mutant its own.
func (d *Device) NewEngine(peer hal.Endpoint) (hal.Engine, error) {
	if l := d.Link(peer); l.Caps&hal.CapPortMapped == 0 {
		return nil, fmt.Errorf("%s: engine to %s device %d: %s: %w", d, peer.Backend, peer.Ordinal, l.Reason, hal.ErrNotSupported)
	}
	if !d.kind.port() {
		return d.pm.NewEngine(hostEndpoint(peer))
	}
	e := &engine{d: d, peer: peer.Ordinal}
	e.cond = sync.NewCond(&e.mu)
	if d.kind != PortStalledEngine {
		go e.run()
	}
	return e, nil
}

type reqKind uint8

const (
	reqPut reqKind = iota + 1
	reqCopy
	reqSignal
)

type request struct {
	kind     reqKind
	dst, src uint64 // signal: semaphore and count-word addresses
	n        uint64 // signal: the count
	due      time.Time
}

type mark struct{ ticket, seq uint64 }

// engine is a port mutant's engine.
type engine struct {
	d    *Device
	peer int

	mu              sync.Mutex
	cond            *sync.Cond
	queue           []request
	issued, done    uint64
	marks           []mark
	tickets         uint64
	completed       uint64
	err             error
	closed, stopped bool
	puts            int
}

func (e *engine) String() string { return fmt.Sprintf("%s engine to device %d", e.d, e.peer) }

func (e *engine) stateLocked() error {
	if e.err != nil {
		return e.err
	}
	if e.closed {
		return fmt.Errorf("%s is closed: %w", e, hal.ErrInvalidUsage)
	}
	return nil
}

func (e *engine) issue(r request) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.stateLocked(); err != nil {
		return err
	}
	switch e.d.kind {
	case PortStalledEngine:
		e.issued++ // never run, never done
		return nil
	case PortLostPut:
		if r.kind == reqPut && r.n > 0 {
			if e.puts++; e.puts%LostEvery == 0 {
				return nil
			}
		}
	case PortSignalOvertakesPut:
		if r.kind != reqSignal {
			r.due = time.Now().Add(Delay)
		}
	}
	e.queue = append(e.queue, r)
	e.issued++
	e.cond.Broadcast()
	return nil
}

func (e *engine) Put(dst, src uint64, bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("%s: put of %d bytes: %w", e, bytes, hal.ErrInvalidArgument)
	}
	return e.issue(request{kind: reqPut, dst: dst, src: src, n: uint64(bytes)})
}

func (e *engine) Copy(dst, src uint64, bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("%s: copy of %d bytes: %w", e, bytes, hal.ErrInvalidArgument)
	}
	return e.issue(request{kind: reqCopy, dst: dst, src: src, n: uint64(bytes)})
}

func (e *engine) Signal(semAddr, countAddr, count uint64) error {
	r := request{kind: reqSignal, dst: semAddr, src: countAddr, n: count}
	if e.d.kind == PortSignalOvertakesPut {
		// Applied now, ahead of the puts still queued.
		e.mu.Lock()
		err := e.stateLocked()
		e.mu.Unlock()
		if err != nil {
			return err
		}
		return e.exec(r)
	}
	return e.issue(r)
}

// AckSignal is Signal (hal.AckSignaler): a release must still follow
// the engine's earlier copies, which PortSignalOvertakesPut breaks.
func (e *engine) AckSignal(semAddr, countAddr, count uint64) error {
	return e.Signal(semAddr, countAddr, count)
}

func (e *engine) Mark() (uint64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.stateLocked(); err != nil {
		return 0, err
	}
	e.tickets++
	if e.d.kind == PortFlushEarly {
		hold := time.Now().Add(Delay)
		for i := range e.queue {
			if e.queue[i].due.Before(hold) {
				e.queue[i].due = hold
			}
		}
	}
	e.marks = append(e.marks, mark{ticket: e.tickets, seq: e.issued})
	return e.tickets, nil
}

func (e *engine) Completed() (uint64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.d.kind == PortFlushEarly {
		return e.tickets, e.err
	}
	for len(e.marks) > 0 && e.marks[0].seq <= e.done {
		e.completed = e.marks[0].ticket
		e.marks = e.marks[1:]
	}
	return e.completed, e.err
}

func (e *engine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return fmt.Errorf("%s closed twice: %w", e, hal.ErrInvalidUsage)
	}
	e.closed = true
	if e.d.kind == PortStalledEngine {
		return fmt.Errorf("%s: close: %d requests never completed: %w", e, e.issued, hal.ErrTimeout)
	}
	e.cond.Broadcast()
	for !e.stopped {
		e.cond.Wait()
	}
	return e.err
}

// run executes the queue in order, each request no earlier than its due
// time, until the engine is closed and drained.
func (e *engine) run() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for {
		for len(e.queue) == 0 && !e.closed {
			e.cond.Wait()
		}
		if len(e.queue) == 0 {
			e.stopped = true
			e.cond.Broadcast()
			return
		}
		r := e.queue[0]
		if wait := time.Until(r.due); wait > 0 {
			// A Mark may push the due time back: look again after a while.
			e.mu.Unlock()
			time.Sleep(min(wait, 5*time.Millisecond))
			e.mu.Lock()
			continue
		}
		e.queue = e.queue[1:]
		failed := e.err != nil
		e.mu.Unlock()
		var err error
		if !failed {
			err = e.exec(r)
		}
		e.mu.Lock()
		if err != nil && e.err == nil {
			e.err = err
		}
		e.done++
	}
}

// exec runs one request on the device's live buffers.
func (e *engine) exec(r request) error {
	switch r.kind {
	case reqPut, reqCopy:
		if r.n == 0 {
			return nil
		}
		src, dst := e.d.bytesAt(r.src, int64(r.n)), e.d.bytesAt(r.dst, int64(r.n))
		if src == nil || dst == nil {
			return fmt.Errorf("%s: %#x → %#x (%d bytes) is not mapped: %w", e, r.src, r.dst, r.n, hal.ErrInvalidArgument)
		}
		copy(dst, src)
	case reqSignal:
		if r.src != 0 {
			w, err := e.word(r.src)
			if err != nil {
				return err
			}
			atomic.StoreUint64(w, r.n)
		}
		w, err := e.word(r.dst)
		if err != nil {
			return err
		}
		atomic.AddUint64(w, 1)
	}
	return nil
}

func (e *engine) word(addr uint64) (*uint64, error) {
	b := e.d.bytesAt(addr, 8)
	if b == nil || addr%8 != 0 {
		return nil, fmt.Errorf("%s: signal word %#x is not mapped or not aligned: %w", e, addr, hal.ErrInvalidArgument)
	}
	return (*uint64)(unsafe.Pointer(&b[0])), nil
}
