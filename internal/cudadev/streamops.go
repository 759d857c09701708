package cudadev

import (
	"fmt"
	"sync"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/env"
)

var _ hal.StreamOps = (*Device)(nil)

// QueueOps implements hal.StreamOps with cuMemcpyAsync,
// cuStreamWriteValue64 and cuStreamWaitValue64 (the v2 entry points) and,
// for reductions and copies with a kernel, cuLaunchKernel of the
// operation's kernel, on the stream. Lanes are streams of s's own (created on first use, destroyed
// with s: lanes shared between callers' streams would make one caller's
// work wait for another's), forked from s by an event recorded on s and
// joined back by one recorded on each lane that s waits for; while s
// captures a graph, the lanes join the capture through those events. The
// operations are submitted in list order. A CUDA stream wait has no
// timeout, so a batch with waits is watched from the host: an event
// recorded after it that has not completed by WEFT_TIMEOUT fails the
// stream (Synchronize reports it, wrapping hal.ErrTimeout and naming the
// waits) and the host stores the awaited values so that the stream
// drains. Inside a graph capture nothing is watched (Synchronize's own
// deadline remains). Errors: hal.ErrNotSupported where the device lacks
// 64-bit stream memory operations; hal.ErrInvalidArgument for bad input.
func (d *Device) QueueOps(hs hal.Stream, ops []hal.StreamOp) error {
	s, err := d.stream("queue stream operations", hs)
	if err != nil {
		return err
	}
	if err := d.StreamOpsSupport(); err != nil {
		return fmt.Errorf("queue stream operations: %w", err)
	}
	if err := hal.CheckStreamOps(ops); err != nil {
		return fmt.Errorf("queue stream operations on %s: %w", d, err)
	}
	var waits []hal.StreamOp
	lanes := 0
	for _, op := range ops {
		if op.Kind == hal.StreamWaitEq {
			waits = append(waits, op)
		}
		lanes = max(lanes, int(op.Lane))
	}
	on := []cuda.Stream{s.stream}
	l := &s.lanes
	if lanes > 0 {
		l.mu.Lock()
		defer l.mu.Unlock()
		forked, err := d.forkLanes(l, s.stream, lanes)
		if err != nil {
			return fmt.Errorf("queue stream operations on %s: %w", d, err)
		}
		on = append(on, forked...)
	}
	cops := make([]cuda.StreamOp, len(ops))
	for i, op := range ops {
		c := cuda.StreamOp{Kind: cuda.OpCopy, Lane: op.Lane, Dst: cuda.DevicePtr(op.Dst), Src: cuda.DevicePtr(op.Src), Bytes: op.Bytes, Value: op.Value}
		switch op.Kind {
		case hal.StreamWaitEq:
			c.Kind = cuda.OpWait
		case hal.StreamWrite:
			c.Kind = cuda.OpWrite
		case hal.StreamCopy:
			if op.Kernel == nil {
				break // copy engines
			}
			fallthrough
		case hal.StreamReduce:
			f, ok := op.Kernel.(*Function)
			if !ok || f == nil || f.dev.ctx != d.ctx {
				return fmt.Errorf("queue stream operations on %s: operation %d: a reduction or kernel copy needs its kernel compiled for this device (channels.StreamReduceKernel, StreamCopyKernel), got %T: %w", d, i, op.Kernel, hal.ErrInvalidArgument)
			}
			if op.Threads > d.maxThreadsPerBlock {
				return fmt.Errorf("queue stream operations on %s: operation %d: %d threads per block, at most %d: %w", d, i, op.Threads, d.maxThreadsPerBlock, hal.ErrInvalidArgument)
			}
			c.Kind, c.Src2, c.Func, c.Grid, c.Block = cuda.OpKernel, cuda.DevicePtr(op.Src2), f.fn, uint32(op.Blocks), uint32(op.Threads)
		}
		cops[i] = c
	}
	// One cgo call for the batch, in list order (cuda.QueueOps).
	if i, err := cuda.QueueOps(d.ctx, on, cops, streamBatch()); err != nil {
		if lanes > 0 {
			d.joinLanes(l, s.stream, lanes) // the lanes must not stay forked (or in a capture)
		}
		return fmt.Errorf("stream operation %d of %d on %s: %w", i, len(ops), d, err)
	}
	if lanes > 0 {
		if err := d.joinLanes(l, s.stream, lanes); err != nil {
			return fmt.Errorf("queue stream operations on %s: %w", d, err)
		}
	}
	if len(waits) > 0 {
		if err := d.watchOps(s, waits); err != nil {
			return err
		}
	}
	return d.launched(s)
}

// streamBatch reports whether consecutive flag operations on a lane go in
// one cuStreamBatchMemOp: the default since 2×H100 measured it
// (docs/bench/2026-11-28-h100x2, call 4: the copy-engine AllGather of
// 256 MB 496 → 484 µs, 64 MB 147 → 142; the copy-engine AllReduce of
// 1 GB 3,547 → 3,333); WEFT_STREAM_BATCH=0 queues each with its own call.
func streamBatch() bool {
	on, _ := env.Bool("WEFT_STREAM_BATCH", true)
	return on
}

// StreamOpsSupport implements hal.StreamOps: an error where the device
// lacks 64-bit stream memory operations (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS).
func (d *Device) StreamOpsSupport() error {
	if !d.streamMemOps64 {
		return fmt.Errorf("%s has no 64-bit stream memory operations (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS is 0): %w", d, hal.ErrNotSupported)
	}
	return nil
}

// opsLanes are the lane streams of one Stream's stream-operation batches
// with the events that fork them from the stream and join them back. mu is
// held by a batch from its fork to its join.
type opsLanes struct {
	mu      sync.Mutex
	streams []cuda.Stream // lane k is streams[k-1]
	fork    cuda.Event
	join    []cuda.Event
}

// forkLanes makes lanes 1..n of l (created on first use) start after the
// work queued on s so far and returns them. The caller holds l.mu. Reusing
// the events at once is sound: a stream wait takes the event's state when
// it is queued.
func (d *Device) forkLanes(l *opsLanes, s cuda.Stream, n int) ([]cuda.Stream, error) {
	if l.fork.Handle == 0 {
		ev, err := d.ctx.EventCreate(cuda.EventDisableTiming)
		if err != nil {
			return nil, fmt.Errorf("lane fork event: %w", err)
		}
		l.fork = ev
	}
	for len(l.streams) < n {
		st, err := d.CreateStream("stream-operation lane")
		if err != nil {
			return nil, err
		}
		ev, err := d.ctx.EventCreate(cuda.EventDisableTiming)
		if err != nil {
			d.DestroyStream(st)
			return nil, fmt.Errorf("lane join event: %w", err)
		}
		l.streams = append(l.streams, st)
		l.join = append(l.join, ev)
	}
	if err := l.fork.Record(s); err != nil {
		return nil, fmt.Errorf("lane fork: %w", err)
	}
	for _, st := range l.streams[:n] {
		if err := st.WaitEvent(l.fork); err != nil {
			return nil, fmt.Errorf("lane fork: %w", err)
		}
	}
	return l.streams[:n], nil
}

// joinLanes makes the work queued on s from now on wait for lanes 1..n
// of l. The caller holds l.mu.
func (d *Device) joinLanes(l *opsLanes, s cuda.Stream, n int) error {
	var first error
	for i, st := range l.streams[:n] {
		err := l.join[i].Record(st)
		if err == nil {
			err = s.WaitEvent(l.join[i])
		}
		if err != nil && first == nil {
			first = fmt.Errorf("lane join: %w", err)
		}
	}
	return first
}

// destroyLanes releases l's streams and events (Stream.Close). Work still
// queued on a lane completes; Free and Close wait for it (DestroyStream).
func (d *Device) destroyLanes(l *opsLanes) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, st := range l.streams {
		d.DestroyStream(st)
		l.join[i].Destroy()
	}
	if l.fork.Handle != 0 {
		l.fork.Destroy()
	}
	l.streams, l.join, l.fork = nil, nil, cuda.Event{}
}

// opsWatch is one batch of queued waits the watchdog follows. Once
// released (its deadline passed, or AbortOps) the watchdog stores the
// awaited values again at every poll until the batch completes: a call of
// several windows waits on the same word more than once, each wait
// resetting it, so one store would release only the first.
type opsWatch struct {
	s        *Stream
	ev       cuda.Event
	deadline time.Time
	waits    []hal.StreamOp
	released bool
	aborted  bool  // AbortWaits: release at the next poll
	err      error // why it was released
}

// opsWatchdog follows the batches of a device (Device.watch).
type opsWatchdog struct {
	mu      sync.Mutex
	pending []*opsWatch
	running bool
	free    []cuda.Event // completed batches' events, recorded again by later ones
	// relStream carries the stores that release timed-out or aborted
	// waits (release); done: Close has destroyed it.
	relStream cuda.Stream
	done      bool
	failed    []*opsWatch // released batches, for WaitsFailed
}

// watchOps records an event after a batch with waits and hands it to the
// device's watchdog, started on first use; nothing while s captures.
func (d *Device) watchOps(s *Stream, waits []hal.StreamOp) error {
	w := &d.watch
	var ev cuda.Event
	w.mu.Lock()
	if n := len(w.free); n > 0 {
		ev, w.free = w.free[n-1], w.free[:n-1]
	}
	w.mu.Unlock()
	if ev.Handle == 0 {
		var err error
		if ev, err = d.ctx.EventCreate(cuda.EventDisableTiming); err != nil {
			return fmt.Errorf("queue stream operations on %s: watch event: %w", d, err)
		}
	}
	recorded, err := ev.RecordUnlessCapturing(s.stream)
	if err != nil || !recorded {
		ev.Destroy()
		if err != nil {
			return fmt.Errorf("queue stream operations on %s: watch event: %w", d, err)
		}
		return nil
	}
	w.mu.Lock()
	w.pending = append(w.pending, &opsWatch{s: s, ev: ev, deadline: time.Now().Add(env.Timeout()), waits: waits})
	start := !w.running
	w.running = true
	w.mu.Unlock()
	if start {
		go d.watchLoop()
	}
	return nil
}

// WaitsFailed implements hal.StreamOps: the error of the first batch the
// watchdog released that waited on a word of b.
func (d *Device) WaitsFailed(b hal.Buffer) error {
	w := &d.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.failed {
		if hal.WaitsOn(p.waits, b) {
			return p.err
		}
	}
	return nil
}

// AbortWaits implements hal.StreamOps: every batch queued so far (outside
// graph captures) with a wait on a word of b is released at the
// watchdog's next poll, as at its deadline: its stream fails and its waits
// pass until it completes.
func (d *Device) AbortWaits(b hal.Buffer) {
	w := &d.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.pending {
		if hal.WaitsOn(p.waits, b) {
			p.aborted = true
		}
	}
}

// watchLoop polls the pending batches every millisecond until none is
// left: a completed one is dropped; one past its deadline (or aborted by
// AbortWaits) fails its stream and has the awaited values stored from
// the host until it completes, so that it drains.
func (d *Device) watchLoop() {
	w := &d.watch
	for {
		time.Sleep(time.Millisecond)
		w.mu.Lock()
		keep := w.pending[:0]
		var release []*opsWatch
		for _, p := range w.pending {
			done, err := p.ev.Query()
			switch {
			case err != nil:
				p.ev.Destroy()
				continue
			case done:
				w.free = append(w.free, p.ev) // no stream records it now
				continue
			case p.released || p.aborted || time.Now().After(p.deadline):
				if !p.released {
					err := fmt.Errorf("stream operations on %s: a wait did not pass within %v (waits for %s): %w", d, env.Timeout(), describeWaits(p.waits), hal.ErrTimeout)
					if p.aborted {
						err = fmt.Errorf("stream operations on %s: waits for %s aborted: %w", d, describeWaits(p.waits), hal.ErrInvalidUsage)
					}
					p.s.failed.CompareAndSwap(nil, &err)
					p.err = err
					p.released = true
					w.failed = append(w.failed, p)
				}
				release = append(release, p)
			}
			keep = append(keep, p)
		}
		w.pending = keep
		idle := len(keep) == 0
		if idle {
			w.running = false
		}
		w.mu.Unlock()
		for _, p := range release {
			d.release(p)
		}
		if idle {
			return
		}
	}
}

// destroyWatchEvents destroys the pooled events of completed batches and
// the release stream (Close, after quiesce).
func (d *Device) destroyWatchEvents() {
	w := &d.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range w.free {
		ev.Destroy()
	}
	w.free = nil
	if w.relStream.Handle != 0 {
		d.DestroyStream(w.relStream)
		w.relStream = cuda.Stream{}
	}
	w.done = true
}

// release stores the values p's waits wait for, by stream writes on a
// stream of the watchdog's own (non-blocking: a store through the legacy
// stream, cuMemcpyHtoD, would wait for a blocking caller's stream that the
// wait itself holds). It queues nothing while its previous stores are
// still pending, so that retries at every poll do not pile up.
func (d *Device) release(p *opsWatch) {
	w := &d.watch
	w.mu.Lock() // Close destroys the stream (destroyWatchEvents)
	defer w.mu.Unlock()
	if w.done {
		return
	}
	if w.relStream.Handle == 0 {
		st, err := d.CreateStream("stream-operation release")
		if err != nil {
			d.log.Warn("release of stream waits: no stream", "err", err)
			return
		}
		w.relStream = st
	}
	if done, err := w.relStream.Query(); err != nil || !done {
		return
	}
	for _, op := range p.waits {
		if err := w.relStream.WriteValue64(cuda.DevicePtr(op.Dst), op.Value, 0); err != nil {
			d.log.Warn("release of a stream wait failed", "addr", fmt.Sprintf("%#x", op.Dst), "err", err)
		}
	}
}

func describeWaits(ws []hal.StreamOp) string {
	s := ""
	for i, op := range ws {
		if i > 0 {
			s += ", "
		}
		if i == 4 {
			return s + fmt.Sprintf("and %d more", len(ws)-4)
		}
		s += fmt.Sprintf("%#x = %d", op.Dst, op.Value)
	}
	return s
}
