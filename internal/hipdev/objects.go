package hipdev

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/devcore"
	"github.com/weftccl/weft/internal/hip"
)

// HALStream is a non-blocking HIP stream as a hal.Stream.
type HALStream struct {
	stream hip.Stream
	owner  string
	closed atomic.Bool
}

var _ hal.Stream = (*HALStream)(nil)

// NewHALStream creates a stream with hipStreamNonBlocking on d: it does not
// synchronise with the null stream.
func NewHALStream(d hip.Device, owner string) (*HALStream, error) {
	s, err := d.StreamCreate(hip.StreamNonBlocking)
	if err != nil {
		return nil, fmt.Errorf("new stream on %s: %w", owner, err)
	}
	return &HALStream{stream: s, owner: owner}, nil
}

// HALStreamOf returns hs as a live stream of d; errors wrap
// hal.ErrInvalidArgument (another backend's or device's stream) or
// hal.ErrInvalidUsage (closed). op names the caller in messages.
func HALStreamOf(op string, hs hal.Stream, d hip.Device, owner string) (*HALStream, error) {
	s, ok := hs.(*HALStream)
	if !ok || s == nil || s.stream.Dev != d {
		return nil, fmt.Errorf("%s on %s: stream %T is not a stream of this GPU: %w", op, owner, hs, hal.ErrInvalidArgument)
	}
	return s, s.check(op)
}

// Raw is the runtime stream.
func (s *HALStream) Raw() hip.Stream { return s.stream }

func (s *HALStream) check(op string) error {
	if s.closed.Load() {
		return fmt.Errorf("%s: stream of %s used after Close: %w", op, s.owner, hal.ErrInvalidUsage)
	}
	return nil
}

// Synchronize waits until the work queued on s is done, polling
// hipStreamQuery so that the wait has a deadline (zero: now +
// WEFT_TIMEOUT). A missed deadline wraps hal.ErrTimeout and leaves the
// work queued; a kernel fault wraps hal.ErrDevice.
func (s *HALStream) Synchronize(deadline time.Time) error {
	if err := s.check("synchronize"); err != nil {
		return err
	}
	return devcore.Poll(deadline, s.stream.Query, devcore.Failure("synchronize stream of "+s.owner))
}

// Record places a timing event in s.
func (s *HALStream) Record() (hal.Event, error) {
	if err := s.check("record"); err != nil {
		return nil, err
	}
	e, err := s.stream.Dev.EventCreate(hip.EventDefault)
	if err == nil {
		if err = e.Record(s.stream); err != nil {
			e.Destroy()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("record event on %s: %w", s.owner, err)
	}
	return &HALEvent{event: e, owner: s.owner}, nil
}

// After makes the work queued on s from now on wait for the work queued on
// prev so far (prev a stream of the same device; prev == s does nothing);
// while either stream captures a graph, or prev is closed, it orders
// nothing (hal.Stream).
func (s *HALStream) After(prev hal.Stream) error {
	if err := s.check("order after"); err != nil {
		return err
	}
	p, ok := prev.(*HALStream)
	if !ok || p == nil || p.stream.Dev != s.stream.Dev {
		return fmt.Errorf("order after on %s: stream %T is not a stream of this device: %w", s.owner, prev, hal.ErrInvalidArgument)
	}
	if p.closed.Load() || p == s || p.stream.Handle == s.stream.Handle {
		return nil
	}
	if _, err := s.stream.After(p.stream); err != nil {
		return fmt.Errorf("order stream after another on %s: %w", s.owner, err)
	}
	return nil
}

// Close destroys the stream; work already queued still completes.
func (s *HALStream) Close() error {
	if s.closed.Swap(true) {
		return fmt.Errorf("close stream of %s: already closed: %w", s.owner, hal.ErrInvalidUsage)
	}
	if err := s.stream.Destroy(); err != nil {
		return fmt.Errorf("close stream of %s: %w", s.owner, err)
	}
	return nil
}

// BeginCapture starts capturing s (hipStreamBeginCapture, relaxed mode, so
// that other threads' HIP calls are unaffected).
func (s *HALStream) BeginCapture() error {
	if err := s.check("begin capture"); err != nil {
		return err
	}
	if err := s.stream.BeginCapture(hip.StreamCaptureModeRelaxed); err != nil {
		return fmt.Errorf("begin capture on %s: %w", s.owner, err)
	}
	return nil
}

// EndCapture ends the capture of s and instantiates the graph.
func (s *HALStream) EndCapture() (*HALGraph, error) {
	if err := s.check("end capture"); err != nil {
		return nil, err
	}
	g, err := s.stream.EndCapture()
	if err != nil {
		return nil, fmt.Errorf("end capture on %s: %w", s.owner, err)
	}
	exec, err := g.Instantiate()
	if err != nil {
		g.Destroy()
		return nil, fmt.Errorf("instantiate graph on %s: %w", s.owner, err)
	}
	return &HALGraph{graph: g, exec: exec, owner: s.owner}, nil
}

// HALEvent is a timing event recorded in a HALStream.
type HALEvent struct {
	event  hip.Event
	owner  string
	closed atomic.Bool
}

var _ hal.Event = (*HALEvent)(nil)

// Elapsed returns the time from start to e; both must have completed.
func (e *HALEvent) Elapsed(start hal.Event) (time.Duration, error) {
	se, ok := start.(*HALEvent)
	switch {
	case !ok || se == nil:
		return 0, fmt.Errorf("event elapsed on %s: start event %T is not a HIP event: %w", e.owner, start, hal.ErrInvalidArgument)
	case e.closed.Load() || se.closed.Load():
		return 0, fmt.Errorf("event elapsed on %s: event used after Close: %w", e.owner, hal.ErrInvalidUsage)
	}
	ms, err := e.event.ElapsedMillis(se.event)
	if err != nil {
		return 0, fmt.Errorf("event elapsed on %s: %w", e.owner, err)
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Synchronize waits for the event with a deadline (zero: WEFT_TIMEOUT).
func (e *HALEvent) Synchronize(deadline time.Time) error {
	if e.closed.Load() {
		return fmt.Errorf("event synchronize on %s: event used after Close: %w", e.owner, hal.ErrInvalidUsage)
	}
	return devcore.Poll(deadline, e.event.Query, devcore.Failure("event synchronize on "+e.owner))
}

// Close destroys the event.
func (e *HALEvent) Close() error {
	if e.closed.Swap(true) {
		return fmt.Errorf("close event of %s: already closed: %w", e.owner, hal.ErrInvalidUsage)
	}
	if err := e.event.Destroy(); err != nil {
		return fmt.Errorf("close event of %s: %w", e.owner, err)
	}
	return nil
}

// HALGraph is a captured and instantiated HIP graph.
type HALGraph struct {
	graph  hip.Graph
	exec   hip.GraphExec
	owner  string
	closed atomic.Bool
}

var _ hal.Graph = (*HALGraph)(nil)

// Launch enqueues one replay of the graph on s, a stream of its GPU.
func (g *HALGraph) Launch(hs hal.Stream) error {
	if g.closed.Load() {
		return fmt.Errorf("launch graph on %s: graph used after Close: %w", g.owner, hal.ErrInvalidUsage)
	}
	s, err := HALStreamOf("launch graph", hs, g.graph.Dev, g.owner)
	if err != nil {
		return err
	}
	if err := g.exec.Launch(s.stream); err != nil {
		return fmt.Errorf("launch graph on %s: %w", g.owner, err)
	}
	return nil
}

// Close destroys the graph.
func (g *HALGraph) Close() error {
	if g.closed.Swap(true) {
		return fmt.Errorf("close graph of %s: already closed: %w", g.owner, hal.ErrInvalidUsage)
	}
	if err := errors.Join(g.exec.Destroy(), g.graph.Destroy()); err != nil {
		return fmt.Errorf("close graph of %s: %w", g.owner, err)
	}
	return nil
}

// Limits bound the launches of a module's kernels.
type Limits struct {
	MaxBlock  int // threads per block
	MaxShared int // bytes of dynamic shared memory (LDS) per block
}

// HALModule is a loaded code object as a hal.Module.
type HALModule struct {
	*devcore.Kernels[*HALFunction] // Close, and the kernels looked up so far
	mod                            hip.Module
	name                           string
	owner                          string
	limits                         Limits
}

var _ hal.Module = (*HALModule)(nil)

// CompileModule compiles s through cache (for its target, s.Arch) and
// loads the code object on d. A cached code object the runtime refuses is
// compiled again. Errors are those of Compile (source errors wrap
// hal.ErrInvalidArgument and carry the log) and of hipModuleLoadData.
func CompileModule(d hip.Device, cache *hip.KernelCache, s hip.Source, limits Limits, owner string) (*HALModule, error) {
	refused := func(err error) {
		hip.Logger().Warn("cached code object refused; recompiling", "kernel", s.Name, "device", owner, "err", err)
	}
	mod, err := devcore.LoadCached(cache, s, d.ModuleLoadData, refused, s.Name, owner)
	if err != nil {
		return nil, err
	}
	return &HALModule{Kernels: devcore.NewKernels[*HALFunction](s.Name, owner, mod.Unload), mod: mod, name: s.Name, owner: owner, limits: limits}, nil
}

// Function returns the kernel called name (an extern "C" __global__
// function). Unknown names wrap hal.ErrDevice (hipErrorNotFound).
func (m *HALModule) Function(name string) (hal.Function, error) {
	f, err := m.HALKernel(name)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// HALKernel is Function returning the concrete type.
func (m *HALModule) HALKernel(name string) (*HALFunction, error) {
	return m.Kernel(name, func(name string) (*HALFunction, error) {
		fn, err := m.mod.Function(name)
		if err != nil {
			return nil, err
		}
		return &HALFunction{mod: m, name: name, fn: fn}, nil
	})
}

// HALFunction is a kernel entry point; kernels take one parameter, a
// struct passed by value.
type HALFunction struct {
	mod  *HALModule
	name string
	fn   hip.Function
}

var _ hal.Function = (*HALFunction)(nil)

// CheckResident is devcore.CheckResident for blocks blocks of threads
// threads (sharedBytes of LDS each) of this kernel on cus compute units
// (hipModuleOccupancyMaxActiveBlocksPerMultiprocessor).
func (f *HALFunction) CheckResident(blocks, threads, sharedBytes, cus int) error {
	per, err := f.fn.MaxActiveBlocksPerMultiprocessor(threads, sharedBytes)
	if err != nil {
		return fmt.Errorf("%s on %s: occupancy: %w", f.name, f.mod.owner, err)
	}
	return devcore.CheckResident(f.name, f.mod.owner, blocks, threads, per, cus)
}

// Launch enqueues the kernel on s with a 1-D grid of grid blocks of block
// threads, sharedBytes of dynamic shared memory, and params as the bytes
// of its by-value struct parameter (laid out as the kernel's struct,
// little-endian, natural alignment), passed to hipModuleLaunchKernel as
// one argument buffer. It is one cgo call. Errors wrap
// hal.ErrInvalidArgument (a shape beyond the module's Limits, a stream of
// another device), hal.ErrInvalidUsage (closed module or stream) or
// hal.ErrDevice.
func (f *HALFunction) Launch(hs hal.Stream, grid, block, sharedBytes int, params []byte) error {
	m := f.mod
	s, err := HALStreamOf("launch "+f.name, hs, m.mod.Dev, m.owner)
	switch {
	case err != nil:
		return err
	case m.Closed():
		return fmt.Errorf("launch %s on %s: module used after Close: %w", f.name, m.owner, hal.ErrInvalidUsage)
	case grid <= 0 || grid > 1<<31-1 || block <= 0 || block > m.limits.MaxBlock || sharedBytes < 0 || sharedBytes > m.limits.MaxShared:
		return fmt.Errorf("launch %s on %s: grid %d, block %d (at most %d), shared %d bytes (at most %d): %w",
			f.name, m.owner, grid, block, m.limits.MaxBlock, sharedBytes, m.limits.MaxShared, hal.ErrInvalidArgument)
	}
	if err := f.fn.Launch(hip.Dim3{X: uint32(grid)}, hip.Dim3{X: uint32(block)}, sharedBytes, s.stream, params); err != nil {
		return fmt.Errorf("launch %s on %s: %w", f.name, m.owner, err)
	}
	return nil
}

// CopyEngine is the port-mapped engine of a link over which a GPU reaches
// the destination memory by address (a peer GPU with peer access, whose
// buffers are mapped by IPC, or the GPU itself): the copy engine both GPU
// cores share (devcore.CopyEngine, whose documentation gives the
// semantics) over one non-blocking HIP stream:
//
//   - Put and Copy are hipMemcpyAsync: copies between GPUs (and within
//     one) run on the SDMA engines, no compute unit is used;
//   - Signal is a hipStreamWriteValue64 of the count (when asked for) and
//     one of the semaphore's next value, each ordered after the work
//     queued before it, so that the data of every earlier copy is in
//     place first;
//   - Mark and Completed are a ring of HIP events (devcore.Marks).
type CopyEngine = devcore.CopyEngine[hip.Event]

// copyEngineMarks is the initial number of events of an engine's mark
// ring; it covers the flushes a proxy keeps outstanding per channel.
const copyEngineMarks = 64

// NewCopyEngine creates a copy engine on d; name names it in messages.
func NewCopyEngine(d hip.Device, name string) (*CopyEngine, error) {
	s, err := d.StreamCreate(hip.StreamNonBlocking)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	events := devcore.Events[hip.Event]{
		New:     func() (hip.Event, error) { return d.EventCreate(hip.EventDisableTiming) },
		Record:  func(ev hip.Event) error { return ev.Record(s) },
		Query:   hip.Event.Query,
		Destroy: hip.Event.Destroy,
	}
	e, err := devcore.NewCopyEngine(name, copyStream{s}, events, copyEngineMarks, s.Destroy)
	if err != nil {
		s.Destroy()
		return nil, err
	}
	return e, nil
}

// copyStream is a HIP stream as a devcore.Stream.
type copyStream struct{ hip.Stream }

func (q copyStream) MemcpyAsync(dst, src uint64, bytes int64) error {
	return q.Stream.MemcpyAsync(hip.DevicePtr(dst), hip.DevicePtr(src), bytes)
}

func (q copyStream) Signal(countAddr, count, semAddr, value uint64) error {
	return q.Signal64(hip.DevicePtr(countAddr), count, hip.DevicePtr(semAddr), value)
}
