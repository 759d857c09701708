package cudadev

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/env"
)

// CopyEngine is the port-mapped engine of a link over which this GPU
// reaches the destination memory by address: a peer GPU with peer access
// (imported buffers are mapped, and unified addressing makes their
// addresses valid in this context) or this GPU itself. It owns one
// non-blocking CUDA stream, on which requests run in issue order:
//
//   - Put and Copy are cuMemcpyAsync (the copy engines move the bytes, no
//     SM is used);
//   - Signal is a cuStreamWriteValue64 of the count (when asked for) and
//     one of the semaphore's next value, both after a memory barrier, so
//     stream order puts them after the data of every earlier copy. The
//     engine keeps the value it last wrote to each semaphore (a mirror),
//     so a semaphore it signals must be signalled by it only, starting
//     from 0. Without 64-bit stream memory operations
//     (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS = 0) each value is
//     an 8-byte cuMemcpyHtoDAsync from a slot of a small pinned ring;
//   - Mark records an event from a preallocated ring (grown only when every
//     event in it is outstanding) and Completed queries them oldest first
//     without blocking.
//
// Methods are called from one goroutine at a time (the proxy's), as
// hal.Engine says. In the steady state they allocate nothing: the mirror
// map gains an entry the first time a semaphore is signalled.
type CopyEngine struct {
	dev    *Device
	peer   string // for messages: "GPU 1", "itself"
	stream cuda.Stream

	mirrors map[uint64]uint64 // semaphore address -> value last written

	// Ring of outstanding marks: events[(head+i)%len] was recorded for
	// ticket tickets[...], i < count.
	events    []cuda.Event
	tickets   []uint64
	head      int
	count     int
	issued    uint64 // last ticket handed out
	completed uint64 // last ticket known complete
	dirty     bool   // requests queued since the last recorded mark

	signals *SignalWriter

	err    error // first failure (sticky)
	closed bool
}

var _ hal.Engine = (*CopyEngine)(nil)

// copyEngineMarks is the initial number of events of an engine's mark
// ring; it covers the flushes a proxy keeps outstanding per channel.
const copyEngineMarks = 64

// NewCopyEngine creates a copy engine on this device; peer names the other
// end in messages ("GPU 1"). Errors wrap hal.ErrInvalidUsage (closed
// device) or hal.ErrDevice.
func (d *Device) NewCopyEngine(peer string) (*CopyEngine, error) {
	if err := d.checkOpen("new engine"); err != nil {
		return nil, err
	}
	s, err := d.CreateStream("engine to " + peer)
	if err != nil {
		return nil, err
	}
	e := &CopyEngine{dev: d, peer: peer, stream: s, mirrors: map[uint64]uint64{}}
	if err := e.growMarks(copyEngineMarks); err != nil {
		e.destroy()
		return nil, err
	}
	if e.signals, err = d.NewSignalWriter(s); err != nil {
		e.destroy()
		return nil, fmt.Errorf("engine of %s to %s: %w", d, peer, err)
	}
	return e, nil
}

func (e *CopyEngine) String() string { return fmt.Sprintf("engine of %s to %s", e.dev, e.peer) }

// Stream is the engine's CUDA stream.
func (e *CopyEngine) Stream() cuda.Stream { return e.stream }

func (e *CopyEngine) check(op string) error {
	if e.closed {
		return fmt.Errorf("%s: %s is closed: %w", op, e, hal.ErrInvalidUsage)
	}
	return e.err
}

func (e *CopyEngine) fail(err error) error {
	if e.err == nil {
		e.err = err
	}
	return err
}

// Put queues a copy of bytes from local address src to dst, an address
// this GPU reaches (a buffer imported from the engine's peer).
func (e *CopyEngine) Put(dst, src uint64, bytes int64) error { return e.copy("put", dst, src, bytes) }

// Copy queues a copy between two local addresses, in order with the
// engine's other requests.
func (e *CopyEngine) Copy(dst, src uint64, bytes int64) error { return e.copy("copy", dst, src, bytes) }

func (e *CopyEngine) copy(op string, dst, src uint64, bytes int64) error {
	if err := e.check(op); err != nil {
		return err
	}
	if bytes < 0 {
		return fmt.Errorf("%s of %d bytes on %s: %w", op, bytes, e, hal.ErrInvalidArgument)
	}
	if bytes == 0 {
		return nil
	}
	if err := e.stream.MemcpyAsync(cuda.DevicePtr(dst), cuda.DevicePtr(src), bytes); err != nil {
		return e.fail(fmt.Errorf("%s of %d bytes from %#x to %#x on %s: %w", op, bytes, src, dst, e, err))
	}
	e.dirty = true
	return nil
}

// Signal queues, after every earlier request: count stored at countAddr
// (unless it is 0), then the semaphore at semAddr set to one more than the
// engine last set it to. Both addresses must be 8-byte aligned.
func (e *CopyEngine) Signal(semAddr, countAddr, count uint64) error {
	if err := e.check("signal"); err != nil {
		return err
	}
	if semAddr == 0 || semAddr%8 != 0 || countAddr%8 != 0 {
		return fmt.Errorf("signal on %s: semaphore %#x and count word %#x must be non-null (semaphore) and 8-byte aligned: %w", e, semAddr, countAddr, hal.ErrInvalidArgument)
	}
	v := e.mirrors[semAddr] + 1
	if err := e.signals.Signal(countAddr, count, semAddr, v); err != nil {
		return e.fail(fmt.Errorf("signal of semaphore %#x on %s: %w", semAddr, e, err))
	}
	e.mirrors[semAddr] = v
	e.dirty = true
	return nil
}

// Mark returns a ticket for the requests queued so far: it records an
// event on the engine's stream (none when nothing was queued since the
// last mark).
func (e *CopyEngine) Mark() (uint64, error) {
	if err := e.check("mark"); err != nil {
		return 0, err
	}
	e.issued++
	t := e.issued
	switch {
	case !e.dirty && e.count == 0:
		e.completed = t
		return t, nil
	case !e.dirty:
		// Nothing new: the newest outstanding event covers this ticket too.
		e.tickets[(e.head+e.count-1)%len(e.events)] = t
		return t, nil
	}
	if e.count == len(e.events) {
		e.poll()
		if e.err != nil {
			return 0, e.err
		}
		if e.count == len(e.events) {
			if err := e.growMarks(len(e.events)); err != nil {
				return 0, e.fail(err)
			}
		}
	}
	i := (e.head + e.count) % len(e.events)
	if err := e.events[i].Record(e.stream); err != nil {
		return 0, e.fail(fmt.Errorf("mark on %s: %w", e, err))
	}
	e.tickets[i] = t
	e.count++
	e.dirty = false
	return t, nil
}

// Completed returns the largest ticket whose requests are complete,
// querying outstanding events oldest first; it never blocks. A failed
// copy (a fault on the stream) is returned as the engine's error.
func (e *CopyEngine) Completed() (uint64, error) {
	if e.closed {
		return e.completed, fmt.Errorf("completed: %s is closed: %w", e, hal.ErrInvalidUsage)
	}
	e.poll()
	return e.completed, e.err
}

func (e *CopyEngine) poll() {
	for e.count > 0 && e.err == nil {
		done, err := e.events[e.head].Query()
		if err != nil {
			e.fail(fmt.Errorf("%s: %w", e, err))
			return
		}
		if !done {
			return
		}
		e.completed = e.tickets[e.head]
		e.head = (e.head + 1) % len(e.events)
		e.count--
	}
}

// growMarks adds n events to the mark ring, keeping the outstanding ones
// in order.
func (e *CopyEngine) growMarks(n int) error {
	evs := make([]cuda.Event, 0, len(e.events)+n)
	tks := make([]uint64, len(e.events)+n)
	for i := 0; i < e.count; i++ {
		j := (e.head + i) % len(e.events)
		evs = append(evs, e.events[j])
		tks[i] = e.tickets[j]
	}
	for i := e.count; i < len(e.events); i++ { // free events after the outstanding ones
		evs = append(evs, e.events[(e.head+i)%len(e.events)])
	}
	for len(evs) < cap(evs) {
		ev, err := e.dev.ctx.EventCreate(cuda.EventDisableTiming)
		if err != nil {
			for _, x := range evs[len(e.events):] {
				x.Destroy()
			}
			return fmt.Errorf("mark ring of %s: %w", e, err)
		}
		evs = append(evs, ev)
	}
	e.events, e.tickets, e.head = evs, tks, 0
	return nil
}

// Close waits for the queued requests (until the WEFT_TIMEOUT deadline)
// and destroys the stream and events. A request still running at the
// deadline is an error wrapping hal.ErrTimeout; the engine is released
// anyway only when the stream drained.
func (e *CopyEngine) Close() error {
	if e.closed {
		return fmt.Errorf("close %s: already closed: %w", e, hal.ErrInvalidUsage)
	}
	e.closed = true
	err := poll(time.Now().Add(env.Timeout()), e.stream.Query, func(err error, waited time.Duration) error {
		if err != nil {
			return fmt.Errorf("close %s: %w", e, err)
		}
		return fmt.Errorf("close %s: requests still running after %v: %w", e, waited.Round(time.Millisecond), hal.ErrTimeout)
	})
	if errors.Is(err, hal.ErrTimeout) {
		return err // the copies may still read and write: keep the stream
	}
	return errors.Join(err, e.destroy())
}

func (e *CopyEngine) destroy() error {
	var errs []error
	for _, ev := range e.events {
		errs = append(errs, ev.Destroy())
	}
	e.events = nil
	if e.signals != nil {
		errs = append(errs, e.signals.Close())
	}
	if e.stream.Handle != 0 {
		errs = append(errs, e.dev.DestroyStream(e.stream))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close %s: %w", e, err)
	}
	return nil
}

// SignalWriter queues the stores of a port-channel signal on a stream:
// cuStreamWriteValue64 where the device has 64-bit stream memory
// operations, else 8-byte cuMemcpyHtoDAsync copies from a small pinned
// ring. Either way the stores follow the earlier work of the stream. One
// goroutine at a time uses a writer.
type SignalWriter struct {
	stream cuda.Stream
	values *valueRing // nil when cuStreamWriteValue64 is usable
}

// NewSignalWriter returns a writer for stream s of d.
func (d *Device) NewSignalWriter(s cuda.Stream) (*SignalWriter, error) {
	w := &SignalWriter{stream: s}
	if !d.streamMemOps64 {
		var err error
		if w.values, err = d.newValueRing(); err != nil {
			return nil, err
		}
		d.log.Info("no 64-bit stream memory operations: signals are 8-byte host-to-device copies")
	}
	return w, nil
}

// Signal queues value0 stored at addr0 (skipped when addr0 is 0), then
// value1 at addr1, after the earlier work of the stream.
func (w *SignalWriter) Signal(addr0, value0, addr1, value1 uint64) error {
	if w.values == nil {
		return w.stream.Signal64(cuda.DevicePtr(addr0), value0, cuda.DevicePtr(addr1), value1)
	}
	if addr0 != 0 {
		if err := w.values.write(w.stream, cuda.DevicePtr(addr0), value0); err != nil {
			return err
		}
	}
	return w.values.write(w.stream, cuda.DevicePtr(addr1), value1)
}

// Close releases the fallback ring; the stream's queued work must be done.
func (w *SignalWriter) Close() error {
	if w.values == nil {
		return nil
	}
	return w.values.close()
}

// valueRing is the fallback for cuStreamWriteValue64: 64-bit values are
// written into slots of a pinned host ring and copied to their address
// with 8-byte cuMemcpyHtoDAsync. The ring is reused in groups; before a
// group's slots are written again, the event recorded after its last copy
// must have completed (a wait that only a stalled stream makes long).
type valueRing struct {
	ctx    cuda.Context
	host   unsafe.Pointer
	slots  []uint64 // the pinned memory
	next   int
	events [valueGroups]cuda.Event
	used   [valueGroups]bool
}

const (
	valueGroups    = 8
	valuesPerGroup = 64
)

func (d *Device) newValueRing() (*valueRing, error) {
	const n = valueGroups * valuesPerGroup
	hp, err := d.ctx.MemHostAlloc(8*n, cuda.MemHostAllocPortable)
	if err != nil {
		return nil, err
	}
	r := &valueRing{ctx: d.ctx, host: hp, slots: unsafe.Slice((*uint64)(hp), n)}
	for i := range r.events {
		if r.events[i], err = d.ctx.EventCreate(cuda.EventDisableTiming); err != nil {
			r.close()
			return nil, err
		}
	}
	return r, nil
}

func (r *valueRing) write(s cuda.Stream, addr cuda.DevicePtr, v uint64) error {
	g := r.next / valuesPerGroup
	if r.next%valuesPerGroup == 0 && r.used[g] {
		err := poll(time.Time{}, r.events[g].Query, func(err error, waited time.Duration) error {
			if err != nil {
				return err
			}
			return fmt.Errorf("signal value slots still in use after %v: %w", waited.Round(time.Millisecond), hal.ErrTimeout)
		})
		if err != nil {
			return err
		}
		r.used[g] = false
	}
	r.slots[r.next] = v
	if err := s.MemcpyHtoDAsync(addr, unsafe.Pointer(&r.slots[r.next]), 8); err != nil {
		return err
	}
	r.next++
	if r.next%valuesPerGroup == 0 {
		if err := r.events[g].Record(s); err != nil {
			return err
		}
		r.used[g] = true
		r.next %= len(r.slots)
	}
	return nil
}

func (r *valueRing) close() error {
	var errs []error
	for _, ev := range r.events {
		if ev.Handle != 0 {
			errs = append(errs, ev.Destroy())
		}
	}
	errs = append(errs, r.ctx.MemFreeHost(r.host))
	return errors.Join(errs...)
}
