package host

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
)

// Stream runs queued work in order on one goroutine. An error of a work
// item is sticky, as a CUDA stream's is: Synchronize reports it and later
// work is skipped.
type Stream struct {
	dev  *Device
	work chan work

	mu        sync.Mutex
	cond      *sync.Cond
	submitted uint64
	completed uint64
	err       error
	capture   *Graph
	closed    bool
}

// work is one item of a stream: run, holding the mappings inUse (acquired
// for user when queued, released once run has returned or been skipped).
type work struct {
	run   func() error
	user  user
	inUse []*guard
	what  string // names the memory in the error of a failed acquire
}

// NewStream starts a stream.
func (d *Device) NewStream() (hal.Stream, error) {
	s := &Stream{dev: d, work: make(chan work, 1024)}
	s.cond = sync.NewCond(&s.mu)
	go s.run()
	return s, nil
}

func (s *Stream) run() {
	for w := range s.work {
		s.mu.Lock()
		failed := s.err != nil
		s.mu.Unlock()
		var err error
		if !failed {
			err = w.run()
		}
		unpinSet(w.user, w.inUse)
		s.mu.Lock()
		if err != nil && s.err == nil {
			s.err = err
		}
		s.completed++
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

// enqueue queues f, or records it when the stream is being captured.
func (s *Stream) enqueue(f func() error) error { return s.enqueueWork(work{run: f}) }

// enqueueWork queues w, holding its mappings until it has run, or records
// it when the stream is being captured (a replay acquires them again).
// A mapping being freed fails it with hal.ErrInvalidUsage.
func (s *Stream) enqueueWork(w work) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("host: stream is closed: %w", hal.ErrInvalidUsage)
	}
	if s.capture != nil {
		s.capture.work = append(s.capture.work, w)
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	if err := pinSet(w.user, w.inUse, w.what); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		unpinSet(w.user, w.inUse)
		return fmt.Errorf("host: stream is closed: %w", hal.ErrInvalidUsage)
	}
	s.submitted++
	s.mu.Unlock()
	s.work <- w
	return nil
}

// Synchronize waits for the work queued so far, until deadline (zero:
// WEFT_TIMEOUT from now).
func (s *Stream) Synchronize(deadline time.Time) error {
	if deadline.IsZero() {
		deadline = time.Now().Add(env.Timeout())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.capture != nil {
		return fmt.Errorf("host: synchronize during graph capture: %w", hal.ErrInvalidUsage)
	}
	target := s.submitted
	stop := time.AfterFunc(time.Until(deadline), func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer stop.Stop()
	for s.completed < target {
		if !time.Now().Before(deadline) {
			return fmt.Errorf("host: stream synchronize: %d of %d work items still running at the deadline: %w",
				target-s.completed, target, hal.ErrTimeout)
		}
		s.cond.Wait()
	}
	return s.err
}

// Close stops the stream once its queued work is done.
func (s *Stream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("host: stream closed twice: %w", hal.ErrInvalidUsage)
	}
	s.closed = true
	s.mu.Unlock()
	close(s.work)
	return nil
}

// After makes the work queued on s from now on wait for the work queued on
// prev so far: an event recorded on prev, and a work item on s that waits
// for it until WEFT_TIMEOUT (then fails the stream with hal.ErrTimeout).
// While either stream captures a graph, or prev is closed, it orders
// nothing, as on CUDA.
func (s *Stream) After(prev hal.Stream) error {
	p, ok := prev.(*Stream)
	if !ok || p == nil || p.dev != s.dev {
		return fmt.Errorf("host: order after a stream %T of another device: %w", prev, hal.ErrInvalidArgument)
	}
	if p == s || s.capturing() || p.capturing() {
		return nil
	}
	ev, err := p.Record()
	if errors.Is(err, hal.ErrInvalidUsage) && p.isClosed() {
		return nil // closed by its user: nothing more to order after
	}
	if err != nil {
		return err
	}
	return s.enqueue(func() error {
		if err := ev.Synchronize(time.Now().Add(env.Timeout())); err != nil {
			return fmt.Errorf("host: stream waiting for another stream's work: %w", err)
		}
		return nil
	})
}

// isClosed reports whether s was closed.
func (s *Stream) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// capturing reports whether s is capturing a graph.
func (s *Stream) capturing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.capture != nil
}

// Event is a point in a stream; its time is when the stream reached it.
type Event struct {
	done chan struct{}
	at   time.Time
}

// Record places an event.
func (s *Stream) Record() (hal.Event, error) {
	e := &Event{done: make(chan struct{})}
	err := s.enqueue(func() error {
		e.at = time.Now()
		close(e.done)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Synchronize waits for the event.
func (e *Event) Synchronize(deadline time.Time) error {
	if deadline.IsZero() {
		deadline = time.Now().Add(env.Timeout())
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-e.done:
		return nil
	case <-t.C:
		return fmt.Errorf("host: event not reached by the deadline: %w", hal.ErrTimeout)
	}
}

// Elapsed is the time from start to e.
func (e *Event) Elapsed(start hal.Event) (time.Duration, error) {
	st, ok := start.(*Event)
	if !ok {
		return 0, fmt.Errorf("host: elapsed: start event of another backend: %w", hal.ErrInvalidArgument)
	}
	for _, x := range []*Event{st, e} {
		select {
		case <-x.done:
		default:
			return 0, fmt.Errorf("host: elapsed: event not reached yet: %w", hal.ErrInvalidUsage)
		}
	}
	return e.at.Sub(st.at), nil
}

func (e *Event) Close() error { return nil }

// Graph is a recorded sequence of stream work.
type Graph struct {
	work []work
}

// Capturing reports whether s is capturing a graph (hal.CaptureQuerier).
func (d *Device) Capturing(hs hal.Stream) (bool, error) {
	s, ok := hs.(*Stream)
	if !ok {
		return false, fmt.Errorf("host: capture query: stream of another backend: %w", hal.ErrInvalidArgument)
	}
	return s.capturing(), nil
}

// BeginCapture starts recording s's work instead of running it.
func (d *Device) BeginCapture(hs hal.Stream) error {
	s, ok := hs.(*Stream)
	if !ok {
		return fmt.Errorf("host: capture: stream of another backend: %w", hal.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.capture != nil {
		return fmt.Errorf("host: capture already in progress: %w", hal.ErrInvalidUsage)
	}
	s.capture = &Graph{}
	return nil
}

// EndCapture returns what was recorded since BeginCapture.
func (d *Device) EndCapture(hs hal.Stream) (hal.Graph, error) {
	s, ok := hs.(*Stream)
	if !ok {
		return nil, fmt.Errorf("host: capture: stream of another backend: %w", hal.ErrInvalidArgument)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.capture
	if g == nil {
		return nil, fmt.Errorf("host: end capture without begin: %w", hal.ErrInvalidUsage)
	}
	s.capture = nil
	return g, nil
}

// Launch queues the recorded work on s.
func (g *Graph) Launch(hs hal.Stream) error {
	s, ok := hs.(*Stream)
	if !ok {
		return fmt.Errorf("host: graph launch: stream of another backend: %w", hal.ErrInvalidArgument)
	}
	for _, w := range g.work {
		if err := s.enqueueWork(w); err != nil {
			return err
		}
	}
	return nil
}

func (g *Graph) Close() error { return nil }
