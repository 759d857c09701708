package hipdev

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/hip"
)

// timeout words the failure of a wait for Poll: the runtime's error, or
// one wrapping hal.ErrTimeout when the deadline passed.
func timeout(what string) func(error, time.Duration) error {
	return func(err error, waited time.Duration) error {
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return fmt.Errorf("%s: not done after %v: %w", what, waited.Round(time.Millisecond), hal.ErrTimeout)
	}
}

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
	return hip.Poll(deadline, s.stream.Query, timeout("synchronize stream of "+s.owner))
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
	return hip.Poll(deadline, e.event.Query, timeout("event synchronize on "+e.owner))
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
	mod    hip.Module
	name   string
	owner  string
	limits Limits
	mu     sync.Mutex
	funcs  map[string]*HALFunction
	closed atomic.Bool
}

var _ hal.Module = (*HALModule)(nil)

// CompileModule compiles s through cache (for its target, s.Arch) and
// loads the code object on d. A cached code object the runtime refuses is
// compiled again. Errors are those of Compile (source errors wrap
// hal.ErrInvalidArgument and carry the log) and of hipModuleLoadData.
func CompileModule(d hip.Device, cache *hip.KernelCache, s hip.Source, limits Limits, owner string) (*HALModule, error) {
	bin, hit, err := cache.Get(s)
	if err != nil {
		return nil, fmt.Errorf("compile %s for %s: %w", s.Name, owner, err)
	}
	mod, err := d.ModuleLoadData(bin)
	if err != nil && hit {
		hip.Logger().Warn("cached code object refused; recompiling", "kernel", s.Name, "device", owner, "err", err)
		cache.Invalidate(s)
		if bin, _, err = cache.Get(s); err != nil {
			return nil, fmt.Errorf("compile %s for %s: %w", s.Name, owner, err)
		}
		mod, err = d.ModuleLoadData(bin)
	}
	if err != nil {
		return nil, fmt.Errorf("load %s on %s: %w", s.Name, owner, err)
	}
	return &HALModule{mod: mod, name: s.Name, owner: owner, limits: limits, funcs: map[string]*HALFunction{}}, nil
}

// Function returns the kernel called name (an extern "C" __global__
// function). Unknown names wrap hal.ErrDevice (hipErrorNotFound).
func (m *HALModule) Function(name string) (hal.Function, error) {
	if m.closed.Load() {
		return nil, fmt.Errorf("function %q of %s: module used after Close: %w", name, m.name, hal.ErrInvalidUsage)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.funcs[name]; f != nil {
		return f, nil
	}
	fn, err := m.mod.Function(name)
	if err != nil {
		return nil, fmt.Errorf("module %s on %s: %w", m.name, m.owner, err)
	}
	f := &HALFunction{mod: m, name: name, fn: fn}
	m.funcs[name] = f
	return f, nil
}

// Close unloads the module; its functions become invalid.
func (m *HALModule) Close() error {
	if m.closed.Swap(true) {
		return fmt.Errorf("close module %s: already closed: %w", m.name, hal.ErrInvalidUsage)
	}
	if err := m.mod.Unload(); err != nil {
		return fmt.Errorf("close module %s on %s: %w", m.name, m.owner, err)
	}
	return nil
}

// HALFunction is a kernel entry point; kernels take one parameter, a
// struct passed by value.
type HALFunction struct {
	mod  *HALModule
	name string
	fn   hip.Function
}

var _ hal.Function = (*HALFunction)(nil)

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
	case m.closed.Load():
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
// buffers are mapped by IPC, or the GPU itself): a non-blocking stream on
// which requests run in issue order.
//
//   - Put and Copy are hipMemcpyAsync: copies between GPUs (and within
//     one) run on the SDMA engines, no compute unit is used;
//   - Signal is a hipStreamWriteValue64 of the count (when asked for) and
//     one of the semaphore's next value, each ordered after the work
//     queued before it, so that the data of every earlier copy is in
//     place first. The engine keeps the value it last wrote to each
//     semaphore (a mirror), so a semaphore it signals must be signalled by
//     it only, starting from 0 (hal.Engine);
//   - Mark and Completed are a ring of events (Marks), never blocking.
//
// Methods are called from one goroutine at a time (the proxy's).
type CopyEngine struct {
	name    string // "engine of xgmi GPU 0 (rank 0) to GPU 1 of pid 42"
	stream  hip.Stream
	marks   *hip.Marks
	mirrors map[uint64]uint64 // semaphore address -> value last written
	last    uint64            // last ticket Completed returned
	err     error             // first failure (sticky)
	closed  bool
}

var _ hal.Engine = (*CopyEngine)(nil)

// NewCopyEngine creates a copy engine on d; name names it in messages.
func NewCopyEngine(d hip.Device, name string) (*CopyEngine, error) {
	s, err := d.StreamCreate(hip.StreamNonBlocking)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	e := &CopyEngine{name: name, stream: s, mirrors: map[uint64]uint64{}}
	if e.marks, err = hip.NewMarks(s, 64); err != nil {
		s.Destroy()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return e, nil
}

func (e *CopyEngine) String() string { return e.name }

func (e *CopyEngine) check(op string) error {
	if e.closed {
		return fmt.Errorf("%s: %s is closed: %w", op, e.name, hal.ErrInvalidUsage)
	}
	return e.err
}

func (e *CopyEngine) fail(err error) error {
	if e.err == nil {
		e.err = err
	}
	return err
}

// Put queues a copy of bytes from local address src to dst, an address of
// a buffer imported from the engine's peer.
func (e *CopyEngine) Put(dst, src uint64, bytes int64) error { return e.copy("put", dst, src, bytes) }

// Copy queues a copy between two local addresses, in order with the
// engine's other requests.
func (e *CopyEngine) Copy(dst, src uint64, bytes int64) error { return e.copy("copy", dst, src, bytes) }

func (e *CopyEngine) copy(op string, dst, src uint64, bytes int64) error {
	if err := e.check(op); err != nil || bytes == 0 {
		return err
	}
	if bytes < 0 {
		return fmt.Errorf("%s of %d bytes on %s: %w", op, bytes, e.name, hal.ErrInvalidArgument)
	}
	if err := e.stream.MemcpyAsync(hip.DevicePtr(dst), hip.DevicePtr(src), bytes); err != nil {
		return e.fail(fmt.Errorf("%s of %d bytes from %#x to %#x on %s: %w", op, bytes, src, dst, e.name, err))
	}
	e.marks.Queued()
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
		return fmt.Errorf("signal on %s: semaphore %#x and count word %#x must be non-null (semaphore) and 8-byte aligned: %w", e.name, semAddr, countAddr, hal.ErrInvalidArgument)
	}
	v := e.mirrors[semAddr] + 1
	if err := e.stream.Signal64(hip.DevicePtr(countAddr), count, hip.DevicePtr(semAddr), v); err != nil {
		return e.fail(fmt.Errorf("signal of semaphore %#x on %s: %w", semAddr, e.name, err))
	}
	e.mirrors[semAddr] = v
	e.marks.Queued()
	return nil
}

// Mark returns a ticket for the requests queued so far.
func (e *CopyEngine) Mark() (uint64, error) {
	if err := e.check("mark"); err != nil {
		return 0, err
	}
	t, err := e.marks.Mark()
	if err != nil {
		return 0, e.fail(fmt.Errorf("mark on %s: %w", e.name, err))
	}
	return t, nil
}

// Completed returns the largest ticket whose requests are complete; it
// never blocks. A failed copy is returned as the engine's error.
func (e *CopyEngine) Completed() (uint64, error) {
	if err := e.check("completed"); err != nil {
		return e.last, err
	}
	c, err := e.marks.Completed()
	if err != nil {
		return c, e.fail(fmt.Errorf("%s: %w", e.name, err))
	}
	e.last = c
	return c, nil
}

// Close waits for the queued requests (until the WEFT_TIMEOUT deadline)
// and releases the stream and events. Requests still running at the
// deadline are an error wrapping hal.ErrTimeout, and the stream is kept:
// the copies may still read and write.
func (e *CopyEngine) Close() error {
	if e.closed {
		return fmt.Errorf("close %s: already closed: %w", e.name, hal.ErrInvalidUsage)
	}
	e.closed = true
	err := hip.Poll(time.Time{}, e.stream.Query, timeout("close "+e.name))
	if errors.Is(err, hal.ErrTimeout) {
		return err
	}
	if err := errors.Join(err, e.marks.Destroy(), e.stream.Destroy()); err != nil {
		return fmt.Errorf("close %s: %w", e.name, err)
	}
	return nil
}
