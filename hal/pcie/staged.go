package pcie

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/cudadev"
	"github.com/weftccl/weft/internal/env"
)

// ctxPinner pins shared memory for every context of the process
// (cuMemHostRegister with PORTABLE|DEVICEMAP).
type ctxPinner struct{ ctx cuda.Context }

func (p ctxPinner) pin(mem []byte) error {
	return p.ctx.MemHostRegister(unsafe.Pointer(&mem[0]), int64(len(mem)), cuda.MemHostRegisterPortable|cuda.MemHostRegisterDeviceMap)
}

func (p ctxPinner) unpin(mem []byte) error { return p.ctx.MemHostUnregister(unsafe.Pointer(&mem[0])) }

// waitStream polls s until its work is done or the deadline passes.
func waitStream(s cuda.Stream, deadline time.Time) error {
	sleep := time.Microsecond
	for {
		done, err := s.Query()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("copies still running at the deadline: %w", hal.ErrTimeout)
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, 100*time.Microsecond)
	}
}

// cudaStream is a non-blocking stream with a ring of events, one per
// completion index of a sender or receiver. The device tracks the stream
// (cudadev.Device.CreateStream): its Free and Close wait for the copies.
type cudaStream struct {
	dev    *cudadev.Device
	s      cuda.Stream
	events []cuda.Event
}

func newCUDAStream(d *cudadev.Device, what string, n int) (*cudaStream, error) {
	s, err := d.CreateStream(what)
	if err != nil {
		return nil, err
	}
	_, ctx := d.CUDA()
	c := &cudaStream{dev: d, s: s}
	for i := 0; i < n; i++ {
		ev, err := ctx.EventCreate(cuda.EventDisableTiming)
		if err != nil {
			c.destroy()
			return nil, err
		}
		c.events = append(c.events, ev)
	}
	return c, nil
}

func (c *cudaStream) done(i int) (bool, error) { return c.events[i].Query() }

func (c *cudaStream) destroy() error {
	var errs []error
	for _, ev := range c.events {
		errs = append(errs, ev.Destroy())
	}
	return errors.Join(append(errs, c.dev.DestroyStream(c.s))...)
}

// cudaStager is a sender's stager: device-to-host copies into the inbox's
// slots and local copies on the engine's stream.
type cudaStager struct{ *cudaStream }

func (c cudaStager) stage(i int, slot []byte, src uint64) error {
	if err := c.s.MemcpyDtoHAsync(unsafe.Pointer(&slot[0]), cuda.DevicePtr(src), int64(len(slot))); err != nil {
		return err
	}
	return c.events[i].Record(c.s)
}

func (c cudaStager) copyLocal(i int, dst, src uint64, n int64) error {
	if err := c.s.MemcpyAsync(cuda.DevicePtr(dst), cuda.DevicePtr(src), n); err != nil {
		return err
	}
	return c.events[i].Record(c.s)
}

// cudaUnstager is a receiver's unstager: host-to-device copies out of the
// slots and the signal stores, on one stream per inbox.
type cudaUnstager struct {
	*cudaStream
	w *cudadev.SignalWriter
}

func (c cudaUnstager) unstage(i int, dst uint64, slot []byte) error {
	if err := c.s.MemcpyHtoDAsync(cuda.DevicePtr(dst), unsafe.Pointer(&slot[0]), int64(len(slot))); err != nil {
		return err
	}
	return c.events[i].Record(c.s)
}

func (c cudaUnstager) signal(countAddr, count, semAddr, value uint64) error {
	return c.w.Signal(countAddr, count, semAddr, value)
}

// stagedEngine is the engine of a host-staged link: requests go through
// an inbox in shared host memory to the peer device's receiver (package
// doc). Put stages its bytes device-to-host into the inbox's slots; the
// receiver copies them host-to-device into the destination.
type stagedEngine struct {
	dev    *Device
	name   string
	s      *sender
	stream *cudaStream
	m      *shmMap
	closed atomic.Bool
}

var _ hal.Engine = (*stagedEngine)(nil)

func (d *Device) newStagedEngine(peer hal.Endpoint) (*stagedEngine, error) {
	rx, err := d.receiveLoop()
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("host-staged engine of %s to GPU %d of pid %d", d, peer.Ordinal, peer.PID)
	path, err := peerIndexPath(peer.UUID, peer.PID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	x, err := openIndex(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer x.close(false, d.job)
	_, ctx := d.CUDA()
	box, m, err := x.announce(defaultGeometry, senderID{tag: d.tag, ordinal: d.Ordinal(), job: d.job}, ctxPinner{ctx})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cs, err := newCUDAStream(d.Device, name, sendFlights)
	if err != nil {
		box.store(offClosed, 1)
		m.release()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	e := &stagedEngine{dev: d, name: name, s: newSender(box, cudaStager{cs}, name), stream: cs, m: m}
	rx.addSender(e.s)
	return e, nil
}

func (e *stagedEngine) Put(dst, src uint64, bytes int64) error { return e.s.put(dst, src, bytes) }
func (e *stagedEngine) Copy(dst, src uint64, bytes int64) error {
	return e.s.copyLocal(dst, src, bytes)
}
func (e *stagedEngine) Signal(semAddr, countAddr, count uint64) error {
	return e.s.signal(semAddr, countAddr, count)
}
func (e *stagedEngine) Mark() (uint64, error)      { return e.s.mark() }
func (e *stagedEngine) Completed() (uint64, error) { return e.s.completedTicket() }

// Close publishes what is queued (waiting for free slots until the
// WEFT_TIMEOUT deadline), closes the inbox and releases the stream. After
// a timeout the inbox and stream stay allocated: copies may still use them.
func (e *stagedEngine) Close() error {
	if e.closed.Swap(true) {
		return fmt.Errorf("close %s: already closed: %w", e.name, hal.ErrInvalidUsage)
	}
	if rx := e.dev.rxLoopIfRunning(); rx != nil {
		rx.removeSender(e.s)
	}
	deadline := time.Now().Add(env.Timeout())
	err := e.s.drain(deadline)
	if errors.Is(err, hal.ErrTimeout) {
		return err
	}
	if werr := waitStream(e.stream.s, deadline); werr != nil {
		return errors.Join(err, fmt.Errorf("close %s: %w", e.name, werr))
	}
	_, ctx := e.dev.CUDA()
	return errors.Join(err, e.stream.destroy(), e.m.releaseWith(ctxPinner{ctx}))
}

// rxInbox is an inbox the receive loop serves.
type rxInbox struct {
	a      announced
	r      *receiver
	stream *cudaStream
	w      *cudadev.SignalWriter
}

// rxLoop is a device's progress goroutine: it serves the inboxes that
// senders announce to this device, and moves this device's host-staged
// senders on (so that their signals are published while the proxy is
// idle). It runs on a locked OS thread, spins while there is work and
// backs off to sleeps of up to maxIdleSleep when there is none.
type rxLoop struct {
	dev   *Device
	index *index
	log   func(msg string, args ...any)

	mu      sync.Mutex
	senders atomic.Pointer[[]*sender] // copy on write

	inboxes []*rxInbox // the goroutine's own
	gen     uint64

	stop chan struct{}
	done chan struct{}
}

const maxIdleSleep = 200 * time.Microsecond

func (d *Device) startReceiveLoop() (*rxLoop, error) {
	ep := d.Endpoint()
	x, err := openIndex(indexPath(d.tag, ep.UUID))
	if err != nil {
		return nil, fmt.Errorf("receive loop of %s: %w", d, err)
	}
	rx := &rxLoop{dev: d, index: x, log: d.Logger().Warn, stop: make(chan struct{}), done: make(chan struct{}), gen: ^uint64(0)}
	empty := []*sender{}
	rx.senders.Store(&empty)
	go rx.run()
	return rx, nil
}

func (rx *rxLoop) addSender(s *sender) {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	list := append(append([]*sender(nil), *rx.senders.Load()...), s)
	rx.senders.Store(&list)
}

func (rx *rxLoop) removeSender(s *sender) {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	var list []*sender
	for _, o := range *rx.senders.Load() {
		if o != s {
			list = append(list, o)
		}
	}
	rx.senders.Store(&list)
}

func (rx *rxLoop) run() {
	runtime.LockOSThread()
	defer close(rx.done)
	idleSince := time.Now()
	sleep := time.Duration(0)
	for polls := 0; ; polls++ {
		work := rx.takeInboxes()
		for i := 0; i < len(rx.inboxes); i++ {
			in := rx.inboxes[i]
			if in.r.poll() {
				work = true
			}
			if in.r.finished() {
				if in.r.err != nil {
					rx.log("host-staged inbox failed", "sender_pid", in.a.senderPID, "sender_gpu", in.a.ordinal, "err", in.r.err)
				}
				rx.closeInbox(in, time.Now().Add(env.Timeout()))
				rx.inboxes = append(rx.inboxes[:i], rx.inboxes[i+1:]...)
				i--
			}
		}
		for _, s := range *rx.senders.Load() {
			if s.tryProgress() {
				work = true
			}
		}
		if work || polls&255 == 0 {
			select {
			case <-rx.stop:
				return
			default:
			}
		}
		if work {
			sleep, idleSince = 0, time.Now()
			continue
		}
		if polls&63 != 0 {
			continue
		}
		if sleep == 0 && time.Since(idleSince) < 50*time.Microsecond {
			continue
		}
		sleep = min(max(2*sleep, time.Microsecond), maxIdleSleep)
		time.Sleep(sleep)
	}
}

// takeInboxes opens the inboxes announced since the last look.
func (rx *rxLoop) takeInboxes() bool {
	gen := rx.index.generation()
	if gen == rx.gen {
		return false
	}
	rx.gen = gen
	_, ctx := rx.dev.CUDA()
	got, errs := rx.index.take(rx.dev.job, ctxPinner{ctx})
	for _, err := range errs {
		rx.log("announced inbox unusable", "err", err)
	}
	for _, a := range got {
		name := fmt.Sprintf("receiver of %s for GPU %d of pid %d", rx.dev, a.ordinal, a.senderPID)
		cs, err := newCUDAStream(rx.dev.Device, name, a.box.g.slots)
		var w *cudadev.SignalWriter
		if err == nil {
			if w, err = rx.dev.NewSignalWriter(cs.s); err != nil {
				cs.destroy()
			}
		}
		if err != nil {
			rx.log("cannot serve an inbox", "sender_pid", a.senderPID, "err", err)
			a.box.store(offRxErr, rxErrDevice)
			a.m.release()
			rx.index.free(a.entry)
			continue
		}
		r := newReceiver(a.box, cudaUnstager{cs, w}, name, rx.dev.validPort)
		rx.inboxes = append(rx.inboxes, &rxInbox{a: a, r: r, stream: cs, w: w})
	}
	return len(got) > 0
}

// closeInbox waits for the inbox's copies (until deadline), releases its
// stream and mapping and frees its entry. After a timeout the stream and
// mapping stay: copies may still use them.
func (rx *rxLoop) closeInbox(in *rxInbox, deadline time.Time) {
	if err := waitStream(in.stream.s, deadline); err != nil {
		rx.log("inbox copies did not finish", "sender_pid", in.a.senderPID, "err", err)
		return
	}
	_, ctx := rx.dev.CUDA()
	if err := errors.Join(in.w.Close(), in.stream.destroy(), in.a.m.releaseWith(ctxPinner{ctx})); err != nil {
		rx.log("closing an inbox", "sender_pid", in.a.senderPID, "err", err)
	}
	rx.index.free(in.a.entry)
}

// close stops the goroutine and releases every inbox; the index file is
// removed (senders of a closed device get no further service).
func (rx *rxLoop) close() error {
	close(rx.stop)
	<-rx.done
	deadline := time.Now().Add(env.Timeout())
	for _, in := range rx.inboxes {
		in.a.box.store(offRxErr, rxErrClosed) // its sender learns that nobody serves it
		rx.closeInbox(in, deadline)
	}
	rx.inboxes = nil
	return rx.index.close(true, rx.dev.job)
}
