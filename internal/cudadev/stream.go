package cudadev

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/devcore"
)

// Stream is a non-blocking CUDA stream of a Device.
type Stream struct {
	dev    *Device
	stream cuda.Stream
	closed atomic.Bool
	// foreign streams belong to the caller (WrapStream): Close leaves them.
	foreign bool

	mu   sync.Mutex
	last cuda.Event // foreign: recorded after each launch (Device.launched)
	// lastRecorded: last holds the latest launch (false before the first
	// and while the stream captures a graph).
	lastRecorded bool
	// failed is set by the stream operations' watchdog (streamops.go) when
	// a wait queued on the stream passed its deadline; Synchronize reports
	// it.
	failed atomic.Pointer[error]
	// lanes are the streams that batches of stream operations on this
	// stream fork onto (streamops.go); Close destroys them.
	lanes opsLanes
}

var _ hal.Stream = (*Stream)(nil)

// NewStream creates a CUDA stream with CU_STREAM_NON_BLOCKING: it does not
// synchronise with the legacy default stream.
func (d *Device) NewStream() (hal.Stream, error) { return d.NewCUDAStream() }

// NewCUDAStream is NewStream returning the concrete type.
func (d *Device) NewCUDAStream() (*Stream, error) {
	if err := d.checkOpen("new stream"); err != nil {
		return nil, err
	}
	s, err := d.CreateStream("new stream")
	if err != nil {
		return nil, err
	}
	return &Stream{dev: d, stream: s}, nil
}

// Native returns the CUstream, for libraries called directly (NCCL).
func (s *Stream) Native() uintptr { return s.stream.Handle }

// CUDA returns the stream with its context.
func (s *Stream) CUDA() cuda.Stream { return s.stream }

// Device returns the stream's device.
func (s *Stream) Device() *Device { return s.dev }

// Synchronize waits until the work queued on s is done, polling
// cuStreamQuery (briefly spinning, then sleeping with a backoff of at most
// 100 µs) so that the wait has a deadline: zero means now + WEFT_TIMEOUT.
// A missed deadline is an error wrapping hal.ErrTimeout that names the
// device; the work stays queued. A kernel fault is an error wrapping
// hal.ErrDevice.
func (s *Stream) Synchronize(deadline time.Time) error {
	if err := s.check("synchronize"); err != nil {
		return err
	}
	err := devcore.Poll(deadline, s.stream.Query, devcore.Failure(fmt.Sprintf("synchronize stream of %s", s.dev)))
	if f := s.failed.Load(); f != nil {
		return *f
	}
	return err
}

// After makes the work queued on s from now on wait for the work queued on
// prev so far (prev a stream of the same device; prev == s does nothing).
// For a caller's stream (WrapStream) "so far" is weft's latest launch on
// it: s waits for the event recorded after that launch, and prev's
// CUstream, which its owner may have destroyed since, is not touched. For
// weft's own streams it is everything queued (an event recorded now).
// While either stream captures a graph it orders nothing: the graph's own
// dependencies order captured work (waiting inside a capture on an event
// recorded outside it is a capture-isolation error). One cgo call; a
// communicator calls it only when a call comes on another stream than its
// last (weft.Comm: NCCL's issue order). A prev closed since orders
// nothing (for a caller's stream its event may be gone with it).
func (s *Stream) After(prev hal.Stream) error {
	if err := s.check("order after"); err != nil {
		return err
	}
	p, ok := prev.(*Stream)
	if !ok || p == nil || p.dev.ctx != s.dev.ctx {
		return fmt.Errorf("order after on %s: stream %T is not a stream of this device: %w", s.dev, prev, hal.ErrInvalidArgument)
	}
	if p.closed.Load() {
		return nil // closed by its user: nothing more to order after
	}
	if p == s || p.stream.Handle == s.stream.Handle {
		return nil
	}
	var err error
	if p.foreign {
		p.mu.Lock()
		ev, recorded := p.last, p.lastRecorded
		p.mu.Unlock()
		if !recorded {
			return nil // nothing of weft's on prev, or its latest launch was captured
		}
		_, err = s.stream.WaitUnlessCapturing(ev)
	} else {
		_, err = s.stream.After(p.stream)
	}
	if err != nil {
		return fmt.Errorf("order stream after another on %s: %w", s.dev, err)
	}
	return nil
}

// Join makes the work queued on s from now on wait for everything queued
// on prev so far, the caller's work included (an event recorded on prev
// now, unlike After for a caller's stream), when both streams capture a
// graph or neither does. libweft_nccl joins the streams of a group's
// point-to-point operations this way, as NCCL does, around their one
// launch. prev's CUstream must be live (the caller passed it in this call).
func (s *Stream) Join(prev *Stream) error {
	if err := s.check("join"); err != nil {
		return err
	}
	if err := prev.check("join"); err != nil {
		return err
	}
	if prev.dev.ctx != s.dev.ctx {
		return fmt.Errorf("join on %s: stream of %s: %w", s.dev, prev.dev, hal.ErrInvalidArgument)
	}
	if prev == s || prev.stream.Handle == s.stream.Handle {
		return nil
	}
	if _, err := s.stream.Join(prev.stream); err != nil {
		return fmt.Errorf("join streams on %s: %w", s.dev, err)
	}
	return nil
}

// Record places a timing event in s.
func (s *Stream) Record() (hal.Event, error) {
	if err := s.check("record"); err != nil {
		return nil, err
	}
	e, err := s.dev.ctx.EventCreate(cuda.EventDefault)
	if err != nil {
		return nil, fmt.Errorf("record event on %s: %w", s.dev, err)
	}
	if err := e.Record(s.stream); err != nil {
		e.Destroy()
		return nil, fmt.Errorf("record event on %s: %w", s.dev, err)
	}
	return &Event{dev: s.dev, event: e}, nil
}

// Close destroys the stream; work already queued still completes, and the
// device's Free and Close still wait for it.
func (s *Stream) Close() error {
	if s.closed.Swap(true) {
		return fmt.Errorf("close stream of %s: already closed: %w", s.dev, hal.ErrInvalidUsage)
	}
	s.dev.destroyLanes(&s.lanes)
	if s.foreign {
		s.dev.disown(s)
		return nil
	}
	if err := s.dev.DestroyStream(s.stream); err != nil {
		return fmt.Errorf("close stream of %s: %w", s.dev, err)
	}
	return nil
}

func (s *Stream) check(op string) error {
	if s.closed.Load() {
		return fmt.Errorf("%s: stream of %s used after Close: %w", op, s.dev, hal.ErrInvalidUsage)
	}
	return nil
}

// stream returns hs as a live *Stream of d.
func (d *Device) stream(op string, hs hal.Stream) (*Stream, error) {
	s, ok := hs.(*Stream)
	if !ok || s == nil {
		return nil, fmt.Errorf("%s on %s: stream %T is not a %s stream: %w", op, d, hs, d.backend, hal.ErrInvalidArgument)
	}
	if s.dev.ctx != d.ctx {
		return nil, fmt.Errorf("%s on %s: stream belongs to %s: %w", op, d, s.dev, hal.ErrInvalidArgument)
	}
	return s, s.check(op)
}

// Event is a timing event recorded in a Stream.
type Event struct {
	dev    *Device
	event  cuda.Event
	closed atomic.Bool
}

var _ hal.Event = (*Event)(nil)

// Elapsed returns the time from start to e; both must have completed.
func (e *Event) Elapsed(start hal.Event) (time.Duration, error) {
	se, ok := start.(*Event)
	if !ok || se == nil {
		return 0, fmt.Errorf("event elapsed on %s: start event %T is not a %s event: %w", e.dev, start, e.dev.backend, hal.ErrInvalidArgument)
	}
	if e.closed.Load() || se.closed.Load() {
		return 0, fmt.Errorf("event elapsed on %s: event used after Close: %w", e.dev, hal.ErrInvalidUsage)
	}
	ms, err := e.event.ElapsedMillis(se.event)
	if err != nil {
		return 0, fmt.Errorf("event elapsed on %s: %w", e.dev, err)
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Synchronize waits for the event with a deadline (zero: WEFT_TIMEOUT).
func (e *Event) Synchronize(deadline time.Time) error {
	if e.closed.Load() {
		return fmt.Errorf("event synchronize on %s: event used after Close: %w", e.dev, hal.ErrInvalidUsage)
	}
	return devcore.Poll(deadline, e.event.Query, devcore.Failure(fmt.Sprintf("event synchronize on %s", e.dev)))
}

// Close destroys the event.
func (e *Event) Close() error {
	if e.closed.Swap(true) {
		return fmt.Errorf("close event of %s: already closed: %w", e.dev, hal.ErrInvalidUsage)
	}
	if err := e.event.Destroy(); err != nil {
		return fmt.Errorf("close event of %s: %w", e.dev, err)
	}
	return nil
}

// Graph is a captured and instantiated CUDA graph.
type Graph struct {
	dev    *Device
	graph  cuda.Graph
	exec   cuda.GraphExec
	closed atomic.Bool
}

var _ hal.Graph = (*Graph)(nil)

// BeginCapture starts capturing s (cuStreamBeginCapture, relaxed mode, so
// that other threads' CUDA calls are unaffected).
func (d *Device) BeginCapture(hs hal.Stream) error {
	s, err := d.stream("begin capture", hs)
	if err != nil {
		return err
	}
	if err := s.stream.BeginCapture(cuda.StreamCaptureModeRelaxed); err != nil {
		return fmt.Errorf("begin capture on %s: %w", d, err)
	}
	return nil
}

// Capturing reports whether s is capturing a graph (hal.CaptureQuerier).
func (d *Device) Capturing(hs hal.Stream) (bool, error) {
	s, err := d.stream("capture query", hs)
	if err != nil {
		return false, err
	}
	c, err := s.stream.IsCapturing()
	if err != nil {
		return false, fmt.Errorf("capture query on %s: %w", d, err)
	}
	return c, nil
}

// EndCapture ends the capture of s and instantiates the graph.
func (d *Device) EndCapture(hs hal.Stream) (hal.Graph, error) {
	s, err := d.stream("end capture", hs)
	if err != nil {
		return nil, err
	}
	g, err := s.stream.EndCapture()
	if err != nil {
		return nil, fmt.Errorf("end capture on %s: %w", d, err)
	}
	exec, err := g.Instantiate(0)
	if err != nil {
		g.Destroy()
		return nil, fmt.Errorf("instantiate graph on %s: %w", d, err)
	}
	return &Graph{dev: d, graph: g, exec: exec}, nil
}

// Launch enqueues one replay of the graph on s.
func (g *Graph) Launch(hs hal.Stream) error {
	if g.closed.Load() {
		return fmt.Errorf("launch graph on %s: graph used after Close: %w", g.dev, hal.ErrInvalidUsage)
	}
	s, err := g.dev.stream("launch graph", hs)
	if err != nil {
		return err
	}
	if err := g.exec.Launch(s.stream); err != nil {
		return fmt.Errorf("launch graph on %s: %w", g.dev, err)
	}
	return g.dev.launched(s)
}

// Close destroys the graph.
func (g *Graph) Close() error {
	if g.closed.Swap(true) {
		return fmt.Errorf("close graph of %s: already closed: %w", g.dev, hal.ErrInvalidUsage)
	}
	err1 := g.exec.Destroy()
	err2 := g.graph.Destroy()
	if err1 != nil {
		return fmt.Errorf("close graph of %s: %w", g.dev, err1)
	}
	if err2 != nil {
		return fmt.Errorf("close graph of %s: %w", g.dev, err2)
	}
	return nil
}
