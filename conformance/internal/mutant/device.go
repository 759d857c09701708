package mutant

import (
	"fmt"
	"sync"
	"time"

	"github.com/weftccl/weft/hal"
)

// Device wraps a hal/host device. The embedded hal.Device gives the
// methods the mutant does not change; MemoryMapped, PortMapped (port.go)
// and Executor are implemented here, GraphCapturer is not offered.
type Device struct {
	hal.Device
	mm   hal.MemoryMapped
	pm   hal.PortMapped
	exec hal.Executor
	kind Kind
	name string

	mu     sync.Mutex
	live   map[*buffer]struct{}
	decoys map[*buffer]hal.Buffer // WrongExport: what Export really exports
}

var (
	_ hal.Device       = (*Device)(nil)
	_ hal.MemoryMapped = (*Device)(nil)
	_ hal.Executor     = (*Device)(nil)
)

// buffer wraps a host buffer so that the mutant knows what is mapped.
type buffer struct {
	hal.Buffer
	dev *Device
}

func (b *buffer) Free() error {
	d := b.dev
	d.mu.Lock()
	delete(d.live, b)
	decoy := d.decoys[b]
	delete(d.decoys, b)
	d.mu.Unlock()
	if decoy != nil {
		decoy.Free()
	}
	return b.Buffer.Free()
}

func (d *Device) wrap(b hal.Buffer, err error) (hal.Buffer, error) {
	if err != nil {
		return nil, err
	}
	w := &buffer{Buffer: b, dev: d}
	d.mu.Lock()
	d.live[w] = struct{}{}
	d.mu.Unlock()
	return w, nil
}

// unwrap returns the host buffer of a mutant buffer (of any mutant device,
// so that the host reports "another device" itself).
func unwrap(b hal.Buffer) hal.Buffer {
	if w, ok := b.(*buffer); ok {
		return w.Buffer
	}
	return b
}

// bytesAt returns the live memory [addr, addr+n), or nil.
func (d *Device) bytesAt(addr uint64, n int64) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	for b := range d.live {
		base := b.Addr()
		if addr >= base && int64(addr-base)+n <= b.Size() {
			off := int64(addr - base)
			return b.Host()[off : off+n]
		}
	}
	return nil
}

// Info is the host's, under the mutant's name.
func (d *Device) Info() hal.DeviceInfo {
	i := d.Device.Info()
	i.Backend, i.Name = d.name, "host ("+d.name+")"
	return i
}

// Endpoint is the host's, under the mutant's name.
func (d *Device) Endpoint() hal.Endpoint {
	ep := d.Device.Endpoint()
	ep.Backend = d.name
	return ep
}

// Link is the host's towards the peer's host device, without the
// switch-mapped capability: mutants do not wrap hal.SwitchMapped.
func (d *Device) Link(peer hal.Endpoint) hal.Link {
	if peer.Backend != d.name {
		return hal.Link{Reason: fmt.Sprintf("peer uses backend %q", peer.Backend)}
	}
	l := d.Device.Link(hostEndpoint(peer))
	if l.Caps&hal.CapSwitchMapped != 0 {
		l.Caps &^= hal.CapSwitchMapped
		l.Reason = "mutants break memory- and port-mapped guarantees only; they do not wrap the switch-mapped capability"
	}
	return l
}

func (d *Device) Alloc(n int64) (hal.Buffer, error)     { return d.wrap(d.Device.Alloc(n)) }
func (d *Device) AllocHost(n int64) (hal.Buffer, error) { return d.wrap(d.Device.AllocHost(n)) }

func (d *Device) Write(dst hal.Buffer, off int64, src []byte) error {
	return d.Device.Write(unwrap(dst), off, src)
}

func (d *Device) Read(dst []byte, src hal.Buffer, off int64) error {
	return d.Device.Read(dst, unwrap(src), off)
}

// Close frees decoys and closes the host device.
func (d *Device) Close() error {
	d.mu.Lock()
	for b, decoy := range d.decoys {
		decoy.Free()
		delete(d.decoys, b)
	}
	d.mu.Unlock()
	return d.Device.Close()
}

// Export exports b, or, for WrongExport, a decoy of the same size that is
// not b.
func (d *Device) Export(b hal.Buffer) (hal.Handle, error) {
	w, ok := b.(*buffer)
	if d.kind != WrongExport || !ok || w.dev != d {
		return d.mm.Export(unwrap(b))
	}
	d.mu.Lock()
	decoy := d.decoys[w]
	d.mu.Unlock()
	if decoy == nil {
		h, err := d.mm.Export(w.Buffer) // the real buffer's errors (freed, …)
		if err != nil {
			return h, err
		}
		if decoy, err = d.Device.Alloc(w.Size()); err != nil {
			return nil, err
		}
		d.mu.Lock()
		d.decoys[w] = decoy
		d.mu.Unlock()
	}
	return d.mm.Export(decoy)
}

func (d *Device) Import(h hal.Handle) (hal.Buffer, error) { return d.wrap(d.mm.Import(h)) }

func (d *Device) DeviceHeader() string { return "" }

// NewStream returns a stream of the mutant's own, which runs host launches
// and the mutant's work around them in order.
func (d *Device) NewStream() (hal.Stream, error) {
	inner, err := d.Device.NewStream()
	if err != nil {
		return nil, err
	}
	s := &Stream{dev: d, inner: inner, work: make(chan func() error, 1024)}
	s.cond = sync.NewCond(&s.mu)
	go s.run()
	return s, nil
}

// Stream runs queued work in order on one goroutine; an error is sticky,
// as on hal/host.
type Stream struct {
	dev   *Device
	inner hal.Stream
	work  chan func() error

	mu                   sync.Mutex
	cond                 *sync.Cond
	submitted, completed uint64
	err                  error
	closed               bool
}

func (s *Stream) run() {
	for f := range s.work {
		s.mu.Lock()
		failed := s.err != nil
		s.mu.Unlock()
		var err error
		if !failed {
			err = f()
		}
		s.mu.Lock()
		if err != nil && s.err == nil {
			s.err = err
		}
		s.completed++
		s.cond.Broadcast()
		s.mu.Unlock()
	}
	s.inner.Close()
}

func (s *Stream) enqueue(f func() error) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("%s: stream is closed: %w", s.dev, hal.ErrInvalidUsage)
	}
	s.submitted++
	s.mu.Unlock()
	s.work <- f
	return nil
}

func (s *Stream) Synchronize(deadline time.Time) error {
	if deadline.IsZero() {
		deadline = time.Now().Add(time.Minute)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	target := s.submitted
	stop := time.AfterFunc(time.Until(deadline), func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer stop.Stop()
	for s.completed < target {
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%s: stream synchronize: work still running at the deadline: %w", s.dev, hal.ErrTimeout)
		}
		s.cond.Wait()
	}
	return s.err
}

func (s *Stream) Record() (hal.Event, error) {
	e := &Event{done: make(chan struct{})}
	if err := s.enqueue(func() error { e.at = time.Now(); close(e.done); return nil }); err != nil {
		return nil, err
	}
	return e, nil
}

// After orders s after the work queued on prev so far: an event on prev
// that a work item of s waits for (a minute at most, as Synchronize).
func (s *Stream) After(prev hal.Stream) error {
	p, ok := prev.(*Stream)
	if !ok || p == nil || p.dev != s.dev {
		return fmt.Errorf("%s: order after a stream %T of another device: %w", s.dev, prev, hal.ErrInvalidArgument)
	}
	if p == s {
		return nil
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil
	}
	ev, err := p.Record()
	if err != nil {
		return err
	}
	return s.enqueue(func() error { return ev.Synchronize(time.Now().Add(time.Minute)) })
}

func (s *Stream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("%s: stream closed twice: %w", s.dev, hal.ErrInvalidUsage)
	}
	s.closed = true
	s.mu.Unlock()
	close(s.work)
	return nil
}

// Event is a point in a mutant stream.
type Event struct {
	done chan struct{}
	at   time.Time
}

func (e *Event) Synchronize(deadline time.Time) error {
	if deadline.IsZero() {
		deadline = time.Now().Add(time.Minute)
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-e.done:
		return nil
	case <-t.C:
		return fmt.Errorf("mutant: event not reached by the deadline: %w", hal.ErrTimeout)
	}
}

func (e *Event) Elapsed(start hal.Event) (time.Duration, error) {
	st, ok := start.(*Event)
	if !ok {
		return 0, fmt.Errorf("mutant: elapsed: start event of another backend: %w", hal.ErrInvalidArgument)
	}
	for _, x := range []*Event{st, e} {
		select {
		case <-x.done:
		default:
			return 0, fmt.Errorf("mutant: elapsed: event not reached yet: %w", hal.ErrInvalidUsage)
		}
	}
	return e.at.Sub(st.at), nil
}

func (e *Event) Close() error { return nil }
