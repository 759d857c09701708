package devcore

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weftccl/weft/hal"
)

// Stream is what a CopyEngine needs of a vendor's stream: asynchronous
// copies and the stores of a signal, both in stream order, and a query.
type Stream interface {
	// MemcpyAsync queues a copy of bytes (> 0) from src to dst.
	MemcpyAsync(dst, src uint64, bytes int64) error
	// Signal queues, after the stream's earlier work, the store of count
	// at countAddr (unless countAddr is 0) and then of value at semAddr.
	Signal(countAddr, count, semAddr, value uint64) error
	// Query reports whether the stream's work is done; it never blocks.
	Query() (bool, error)
}

// CopyEngine is the port-mapped engine of a link over which a GPU reaches
// the destination memory by address (a peer GPU with peer access, whose
// buffers are mapped by IPC, or the GPU itself), over a non-blocking
// stream on which requests run in issue order, or, made by NewLaneEngine,
// over several streams (lanes.go: puts and copies run concurrently where
// no overlap of their ranges could show it; signals and marks follow
// every earlier request on every lane):
//
//   - Put and Copy are the stream's asynchronous copies (the copy or SDMA
//     engines move the bytes; no SM or compute unit is used);
//   - Signal stores the count (when asked for) and the semaphore's next
//     value with the stream's signal, ordered after the data of every
//     earlier copy. The engine keeps the value it last wrote to each
//     semaphore (a mirror), so a semaphore it signals must be signalled by
//     it only, starting from 0, as hal.Engine allows;
//   - Mark and Completed are a ring of events ([Marks]), never blocking.
//
// The first failure is sticky: every later call returns it. Methods are
// called from one goroutine at a time (the proxy's), as hal.Engine says.
// In the steady state they allocate nothing: the mirror map gains an entry
// the first time a semaphore is signalled. E is the vendor's event type.
type CopyEngine[E any] struct {
	name    string // "engine of nvlink GPU 0 (rank 0) to GPU 1"
	stream  Stream
	marks   *Marks[E]
	release func() error // frees the stream and what goes with it
	// mirrorMu guards mirrors against DebugState, the one reader outside
	// the proxy's goroutine.
	mirrorMu sync.Mutex
	mirrors  map[uint64]uint64
	counts   map[uint64]uint64 // the count each count word last got from Signal (nil until one did)
	err      error
	closed   bool
	lanes    *laneState // nil: one stream (lanes.go)
	pieces   []piece
}

var _ hal.Engine = (*CopyEngine[int])(nil)

// NewCopyEngine returns an engine named name (in messages) on stream s,
// with a ring of marks events ev of the same stream; release frees the
// stream when the engine closes (not when NewCopyEngine fails: the caller
// frees it then).
func NewCopyEngine[E any](name string, s Stream, ev Events[E], marks int, release func() error) (*CopyEngine[E], error) {
	m, err := NewMarks(ev, marks)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &CopyEngine[E]{name: name, stream: s, marks: m, release: release, mirrors: map[uint64]uint64{}}, nil
}

// NewLaneEngine is NewCopyEngine with more lanes than the main stream s
// (l's lane 0 is s; lanes.go gives the policy); release frees every lane.
// l nil is NewCopyEngine.
func NewLaneEngine[E any](name string, s Stream, l Lanes, ev Events[E], marks int, release func() error) (*CopyEngine[E], error) {
	ls, err := newLaneState(l)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	e, err := NewCopyEngine(name, s, ev, marks, release)
	if err != nil {
		return nil, err
	}
	e.lanes = ls
	return e, nil
}

func (e *CopyEngine[E]) String() string { return e.name }

func (e *CopyEngine[E]) check(op string) error {
	if e.closed {
		return fmt.Errorf("%s: %s is closed: %w", op, e.name, hal.ErrInvalidUsage)
	}
	return e.err
}

func (e *CopyEngine[E]) fail(err error) error {
	if e.err == nil {
		e.err = err
	}
	return err
}

// Put queues a copy of bytes from local address src to dst, an address of
// a buffer imported from the engine's peer.
func (e *CopyEngine[E]) Put(dst, src uint64, bytes int64) error {
	return e.copy("put", dst, src, bytes)
}

// Copy queues a copy between two local addresses, in order with the
// engine's other requests.
func (e *CopyEngine[E]) Copy(dst, src uint64, bytes int64) error {
	return e.copy("copy", dst, src, bytes)
}

func (e *CopyEngine[E]) copy(op string, dst, src uint64, bytes int64) error {
	if err := e.check(op); err != nil || bytes == 0 {
		return err
	}
	if bytes < 0 {
		return fmt.Errorf("%s of %d bytes on %s: %w", op, bytes, e.name, hal.ErrInvalidArgument)
	}
	if op == "copy" && dst == src {
		// A range copied onto itself is unchanged: nothing to queue (the
		// own segment of an in-place AllGather; on an engine with lanes it
		// would also overlap the puts that read it and cost a barrier).
		return nil
	}
	var err error
	if e.lanes == nil {
		err = e.stream.MemcpyAsync(dst, src, bytes)
	} else {
		e.pieces = e.lanes.plan(op == "put", bytes, e.pieces)
		err = e.lanes.issue(e.stream, e.pieces, dst, src)
	}
	if err != nil {
		return e.fail(fmt.Errorf("%s of %d bytes from %#x to %#x on %s: %w", op, bytes, src, dst, e.name, err))
	}
	e.marks.Queued()
	return nil
}

// Signal queues, after every earlier request: count stored at countAddr
// (unless it is 0), then the semaphore at semAddr set to one more than the
// engine last set it to. Both addresses must be 8-byte aligned; errors
// wrap hal.ErrInvalidArgument otherwise.
//
// A count word, like the semaphore beside it, is written by this engine
// only, so a count equal to the one it last stored there is not stored
// again: a stream memory operation costs microseconds of driver time on
// the proxy's critical path, and a plan's launches repeat their count.
func (e *CopyEngine[E]) Signal(semAddr, countAddr, count uint64) error {
	if err := e.check("signal"); err != nil {
		return err
	}
	if semAddr == 0 || semAddr%8 != 0 || countAddr%8 != 0 {
		return fmt.Errorf("signal on %s: semaphore %#x and count word %#x must be non-null (semaphore) and 8-byte aligned: %w", e.name, semAddr, countAddr, hal.ErrInvalidArgument)
	}
	v := e.mirrors[semAddr] + 1
	if last, ok := e.counts[countAddr]; ok && countAddr != 0 && last == count {
		countAddr = 0
	}
	if err := e.joinLanes(); err != nil {
		return e.fail(fmt.Errorf("signal of semaphore %#x on %s: %w", semAddr, e.name, err))
	}
	if err := e.stream.Signal(countAddr, count, semAddr, v); err != nil {
		return e.fail(fmt.Errorf("signal of semaphore %#x on %s: %w", semAddr, e.name, err))
	}
	e.mirrorMu.Lock()
	e.mirrors[semAddr] = v
	e.mirrorMu.Unlock()
	if countAddr != 0 {
		if e.counts == nil {
			e.counts = map[uint64]uint64{}
		}
		e.counts[countAddr] = count
	}
	e.marks.Queued()
	return nil
}

// DebugState describes the engine for a hung job's diagnosis
// (channels.DebugState): the value it last queued for each semaphore it
// signals, by address. A semaphore a device wait reports at one below its
// mirror had its signal queued but not executed by the stream (the copy
// engine is held up, e.g. behind another stream's work); at its mirror,
// the engine was never asked for the next signal. Safe to call from any
// goroutine.
func (e *CopyEngine[E]) DebugState() string {
	e.mirrorMu.Lock()
	addrs := make([]uint64, 0, len(e.mirrors))
	for a := range e.mirrors {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d semaphores signalled", e.name, len(addrs))
	for i, a := range addrs {
		if i == 0 {
			b.WriteString(":")
		}
		fmt.Fprintf(&b, " %#x=%d", a, e.mirrors[a])
	}
	e.mirrorMu.Unlock()
	return b.String()
}

// Mark returns a ticket for the requests queued so far: it records an
// event on the stream (none when nothing was queued since the last mark).
func (e *CopyEngine[E]) Mark() (uint64, error) {
	if err := e.check("mark"); err != nil {
		return 0, err
	}
	if e.lanes != nil && e.lanes.anyDirty() {
		if err := e.joinLanes(); err != nil {
			return 0, e.fail(fmt.Errorf("mark on %s: %w", e.name, err))
		}
		e.marks.Queued() // the main stream now waits for the lanes: the mark records
	}
	t, err := e.marks.Mark()
	if err != nil {
		return 0, e.fail(fmt.Errorf("mark on %s: %w", e.name, err))
	}
	return t, nil
}

// Completed returns the largest ticket whose requests are complete,
// querying outstanding events oldest first; it never blocks. A failed
// copy is returned as the engine's (sticky) error.
func (e *CopyEngine[E]) Completed() (uint64, error) {
	if err := e.check("completed"); err != nil {
		return e.marks.tk.Completed(), err
	}
	c, err := e.marks.Completed()
	if err != nil {
		return c, e.fail(fmt.Errorf("%s: %w", e.name, err))
	}
	return c, nil
}

// Close waits for the queued requests (until the WEFT_TIMEOUT deadline)
// and releases the events and the stream. Requests still running at the
// deadline are an error wrapping hal.ErrTimeout, and the stream is kept:
// the copies may still read and write.
func (e *CopyEngine[E]) Close() error {
	if e.closed {
		return fmt.Errorf("close %s: already closed: %w", e.name, hal.ErrInvalidUsage)
	}
	e.closed = true
	err := Poll(time.Time{}, e.idle, Failure("close "+e.name))
	if errors.Is(err, hal.ErrTimeout) {
		return err
	}
	if err := errors.Join(err, e.marks.Destroy(), e.release()); err != nil {
		return fmt.Errorf("close %s: %w", e.name, err)
	}
	return nil
}

// joinLanes orders the lanes' queued work before the main stream's next
// request (a signal or a mark); nothing without lanes.
func (e *CopyEngine[E]) joinLanes() error {
	if e.lanes == nil {
		return nil
	}
	return e.lanes.join()
}

// idle reports whether the work of every lane is done.
func (e *CopyEngine[E]) idle() (bool, error) {
	done, err := e.stream.Query()
	if err != nil || !done || e.lanes == nil {
		return done, err
	}
	for i := 1; i < e.lanes.l.Count(); i++ {
		if done, err := e.lanes.l.Query(i); err != nil || !done {
			return done, err
		}
	}
	return true, nil
}
