package cudadev

import (
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/env"
)

var _ hal.StreamOps = (*Device)(nil)

// QueueOps implements hal.StreamOps with cuMemcpyAsync,
// cuStreamWriteValue64 and cuStreamWaitValue64 on the stream (written
// 2026-11-26 without a GPU to run it: the conformance case
// memory-mapped/stream-ops is its first check). A CUDA stream wait has no
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
	if !d.streamMemOps64 {
		return fmt.Errorf("queue stream operations on %s: the device has no 64-bit stream memory operations: %w", d, hal.ErrNotSupported)
	}
	if err := hal.CheckStreamOps(ops); err != nil {
		return fmt.Errorf("queue stream operations on %s: %w", d, err)
	}
	var waits []hal.StreamOp
	for _, op := range ops {
		if op.Kind == hal.StreamWaitEq {
			waits = append(waits, op)
		}
	}
	for i, op := range ops {
		switch op.Kind {
		case hal.StreamCopy:
			if op.Bytes > 0 {
				err = s.stream.MemcpyAsync(cuda.DevicePtr(op.Dst), cuda.DevicePtr(op.Src), op.Bytes)
			}
		case hal.StreamWrite:
			err = s.stream.WriteValue64(cuda.DevicePtr(op.Dst), op.Value, 0)
		case hal.StreamWaitEq:
			err = s.stream.WaitValue64(cuda.DevicePtr(op.Dst), op.Value, cuda.StreamWaitValueEq)
		}
		if err != nil {
			return fmt.Errorf("stream operation %d of %d on %s: %w", i, len(ops), d, err)
		}
	}
	if len(waits) > 0 {
		if err := d.watchOps(s, waits); err != nil {
			return err
		}
	}
	return d.launched(s)
}

// opsWatch is one batch of queued waits the watchdog follows.
type opsWatch struct {
	s        *Stream
	ev       cuda.Event
	deadline time.Time
	waits    []hal.StreamOp
}

// opsWatchdog follows the batches of a device (Device.watch).
type opsWatchdog struct {
	mu      sync.Mutex
	pending []opsWatch
	running bool
}

// watchOps records an event after a batch with waits and hands it to the
// device's watchdog, started on first use; nothing while s captures.
func (d *Device) watchOps(s *Stream, waits []hal.StreamOp) error {
	ev, err := d.ctx.EventCreate(cuda.EventDisableTiming)
	if err != nil {
		return fmt.Errorf("queue stream operations on %s: watch event: %w", d, err)
	}
	recorded, err := ev.RecordUnlessCapturing(s.stream)
	if err != nil || !recorded {
		ev.Destroy()
		if err != nil {
			return fmt.Errorf("queue stream operations on %s: watch event: %w", d, err)
		}
		return nil
	}
	w := &d.watch
	w.mu.Lock()
	w.pending = append(w.pending, opsWatch{s: s, ev: ev, deadline: time.Now().Add(env.Timeout()), waits: waits})
	start := !w.running
	w.running = true
	w.mu.Unlock()
	if start {
		go d.watchLoop()
	}
	return nil
}

// watchLoop polls the pending batches every millisecond until none is
// left: a completed one is dropped; one past its deadline fails its stream
// and has the awaited values stored from the host, so that it drains.
func (d *Device) watchLoop() {
	w := &d.watch
	for {
		time.Sleep(time.Millisecond)
		w.mu.Lock()
		keep := w.pending[:0]
		var expired []opsWatch
		for _, p := range w.pending {
			done, err := p.ev.Query()
			switch {
			case done || err != nil:
				p.ev.Destroy()
			case time.Now().After(p.deadline):
				expired = append(expired, p)
			default:
				keep = append(keep, p)
			}
		}
		w.pending = keep
		idle := len(keep) == 0
		if idle {
			w.running = false
		}
		w.mu.Unlock()
		for _, p := range expired {
			d.expire(p)
		}
		if idle {
			return
		}
	}
}

// expire fails p's stream and releases its waits.
func (d *Device) expire(p opsWatch) {
	err := fmt.Errorf("stream operations on %s: a wait did not pass within %v (waits for %s): %w", d, env.Timeout(), describeWaits(p.waits), hal.ErrTimeout)
	p.s.failed.CompareAndSwap(nil, &err)
	var b [8]byte
	for _, op := range p.waits {
		binary.LittleEndian.PutUint64(b[:], op.Value)
		if err := d.ctx.MemcpyHtoD(cuda.DevicePtr(op.Dst), b[:]); err != nil {
			d.log.Warn("release of a timed-out stream wait failed", "addr", fmt.Sprintf("%#x", op.Dst), "err", err)
		}
	}
	p.ev.Destroy()
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
