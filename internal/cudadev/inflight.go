package cudadev

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/devcore"
	"github.com/weftccl/weft/internal/env"
)

// inflight is what a Device knows of the work it queued that may still
// run: the streams weft created on it (launches, copies, signals), an event
// recorded after the latest launch on each caller's stream (WrapStream),
// whose CUstream weft may not query (the caller may have destroyed it), and
// the last event of every stream destroyed while its work still ran.
//
// Memory that work can touch is released only once all of it is done
// (Device.quiesce): cuIpcCloseMemHandle and cuMemHostUnregister do not wait
// for the device, and cuMemFree and cuCtxDestroy wait without a deadline,
// so a stuck kernel would hang them. Tracking every stream, rather than
// which buffers a launch names, is the simplest rule that is sound: a plan
// kernel reaches buffers through channel tables in device memory, which
// the host does not parse.
type inflight struct {
	mu      sync.Mutex
	streams map[uintptr]cuda.Stream // weft's own streams, by handle
	events  map[uintptr]*tracked    // last launch on a caller's stream, or a destroyed stream's last work
}

// tracked is an event quiesce waits for; owner is the wrapper of a
// caller's stream that records into it, nil once nothing does.
type tracked struct {
	ev    cuda.Event
	owner *Stream
}

// CreateStream creates a non-blocking stream on d that Free and Close wait
// for; what names its user in messages. Release it with DestroyStream.
func (d *Device) CreateStream(what string) (cuda.Stream, error) {
	if err := d.checkOpen(what); err != nil {
		return cuda.Stream{}, err
	}
	s, err := d.ctx.StreamCreate(cuda.StreamNonBlocking)
	if err != nil {
		return cuda.Stream{}, fmt.Errorf("%s: new stream on %s: %w", what, d, err)
	}
	d.work.mu.Lock()
	if d.work.streams == nil {
		d.work.streams = map[uintptr]cuda.Stream{}
	}
	d.work.streams[s.Handle] = s
	d.work.mu.Unlock()
	return s, nil
}

// DestroyStream destroys a stream of CreateStream. Work still queued on it
// completes (cuStreamDestroy returns at once): an event recorded first
// keeps Free and Close waiting for it.
func (d *Device) DestroyStream(s cuda.Stream) error {
	d.work.mu.Lock()
	_, ok := d.work.streams[s.Handle]
	delete(d.work.streams, s.Handle)
	d.work.mu.Unlock()
	if ok {
		if done, err := s.Query(); err == nil && !done {
			if ev, err := d.ctx.EventCreate(cuda.EventDisableTiming); err == nil {
				if ev.Record(s) == nil {
					d.keepEvent(ev, nil)
				} else {
					ev.Destroy()
				}
			}
		}
	}
	return s.Destroy()
}

// keepEvent makes quiesce wait for ev, which it destroys once it has
// completed and no owner records into it any more.
func (d *Device) keepEvent(ev cuda.Event, owner *Stream) {
	d.work.mu.Lock()
	defer d.work.mu.Unlock()
	if d.work.events == nil {
		d.work.events = map[uintptr]*tracked{}
	}
	d.work.events[ev.Handle] = &tracked{ev: ev, owner: owner}
}

// disown is called when the wrapper of a caller's stream is closed: its
// launch event is destroyed once complete.
func (d *Device) disown(s *Stream) {
	d.work.mu.Lock()
	defer d.work.mu.Unlock()
	for _, t := range d.work.events {
		if t.owner == s {
			t.owner = nil
		}
	}
}

// launched is called after work was queued on s: for a caller's stream it
// records s's launch event, which quiesce waits for instead of querying
// the caller's CUstream. A stream capturing a graph records nothing (the
// graph's launch will).
func (d *Device) launched(s *Stream) error {
	if !s.foreign {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last.Handle == 0 {
		ev, err := d.ctx.EventCreate(cuda.EventDisableTiming)
		if err != nil {
			return fmt.Errorf("launch event on %s: %w", d, err)
		}
		s.last = ev
		d.keepEvent(ev, s)
	}
	recorded, err := s.last.RecordUnlessCapturing(s.stream)
	s.lastRecorded = recorded
	if err != nil {
		return fmt.Errorf("launch event on %s: %w", d, err)
	}
	return nil
}

// quiesce waits until no work weft queued on d can still run, polling
// until deadline (zero: now + WEFT_TIMEOUT). what names the memory or
// object about to be released ("free device buffer 0x7f..+1024 on nvlink
// GPU 0 (rank 0)"). At the deadline the error wraps hal.ErrTimeout and says
// what is still running; the caller then leaves the memory mapped. A
// stream that reports a fault counts as done: a faulted context runs
// nothing more.
func (d *Device) quiesce(deadline time.Time, what string) error {
	if deadline.IsZero() {
		deadline = time.Now().Add(env.Timeout())
	}
	d.work.mu.Lock()
	streams := make([]cuda.Stream, 0, len(d.work.streams))
	for _, s := range d.work.streams {
		streams = append(streams, s)
	}
	d.work.mu.Unlock()
	var faults []error
	running := 0 // tracked events not complete at the last pass
	// Each pass queries under d.work.mu, and only what is still tracked:
	// another goroutine may destroy a stream (DestroyStream) or retire an
	// event (a concurrent quiesce) after the snapshot above, and querying
	// a destroyed handle is a use after free in the driver (seen on 2×H100
	// at Close: a socket receiver freeing its staging buffer while the
	// engine's shutdown destroyed its stream). The snapshot's streams are
	// waited for until each is idle once; the events are the tracked ones
	// at each pass, so the event a stream destroyed meanwhile left (with
	// its work) is waited for too.
	query := func() (bool, error) {
		d.work.mu.Lock()
		defer d.work.mu.Unlock()
		for i := 0; i < len(streams); i++ {
			done := true
			if cur, ok := d.work.streams[streams[i].Handle]; ok && cur == streams[i] {
				var err error
				if done, err = streams[i].Query(); err != nil {
					faults = append(faults, err)
					done = true
				}
			}
			if !done {
				return false, nil
			}
			streams = append(streams[:i], streams[i+1:]...)
			i--
		}
		running = 0
		for h, t := range d.work.events {
			done, err := t.ev.Query()
			if err != nil {
				faults = append(faults, err)
				done = true
			}
			switch {
			case !done:
				running++
			case t.owner == nil:
				delete(d.work.events, h)
				t.ev.Destroy()
			}
		}
		return running == 0, nil
	}
	err := devcore.Poll(deadline, query, func(_ error, waited time.Duration) error {
		return fmt.Errorf("%s: %d stream(s) and %d launch(es) of %s still running after %v (a kernel waiting for a peer that never signals?); left in place: %w",
			what, len(streams), running, d, waited.Round(time.Millisecond), hal.ErrTimeout)
	})
	if len(faults) > 0 {
		d.log.Warn("work failed on the device before its memory was released", "what", what, "err", errors.Join(faults...))
	}
	return err
}

// destroyEvents destroys every tracked event (Close, once quiesced).
func (d *Device) destroyEvents() {
	d.work.mu.Lock()
	defer d.work.mu.Unlock()
	for h, t := range d.work.events {
		t.ev.Destroy()
		delete(d.work.events, h)
	}
}
