package cudadev

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/devcore"
)

// CopyEngine is the port-mapped engine of a link over which this GPU
// reaches the destination memory by address: a peer GPU with peer access
// (imported buffers are mapped, and unified addressing makes their
// addresses valid in this context) or this GPU itself. It is the copy
// engine both GPU cores share (devcore.CopyEngine, whose documentation
// gives the semantics) over one non-blocking CUDA stream, or over several
// (NewLaneEngine: lanes, one CUDA event each for the orderings between
// them):
//
//   - Put and Copy are cuMemcpyAsync (the copy engines move the bytes, no
//     SM is used);
//   - Signal is a cuStreamWriteValue64 of the count (when asked for) and
//     one of the semaphore's next value, both after a memory barrier, so
//     stream order puts them after the data of every earlier copy.
//     Without 64-bit stream memory operations
//     (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS = 0) each value is
//     an 8-byte cuMemcpyHtoDAsync from a slot of a small pinned ring
//     ([SignalWriter]);
//   - Mark and Completed are a ring of CUDA events (devcore.Marks).
type CopyEngine struct {
	*devcore.CopyEngine[cuda.Event]
	stream cuda.Stream
}

var _ hal.Engine = (*CopyEngine)(nil)

// copyEngineMarks is the initial number of events of an engine's mark
// ring; it covers the flushes a proxy keeps outstanding per channel.
const copyEngineMarks = 64

// NewCopyEngine creates a copy engine on this device with one stream;
// peer names the other end in messages ("GPU 1"). Errors wrap
// hal.ErrInvalidUsage (closed device) or hal.ErrDevice.
func (d *Device) NewCopyEngine(peer string) (*CopyEngine, error) {
	return d.NewLaneEngine(peer, 1)
}

// NewLaneEngine is NewCopyEngine with lanes streams (1 to
// devcore.MaxLanes): puts of at least 2 MiB are cut over lanes − 1 streams
// and local copies run on a stream of their own, with signals and marks
// after every lane's earlier work (devcore.Lanes gives the policy). An
// engine of a GPU to itself only copies, so it takes one stream whatever
// lanes says when peer is "itself". Errors as NewCopyEngine, and
// hal.ErrInvalidArgument for lanes out of range.
func (d *Device) NewLaneEngine(peer string, lanes int) (*CopyEngine, error) {
	if err := d.checkOpen("new engine"); err != nil {
		return nil, err
	}
	if lanes < 1 || lanes > devcore.MaxLanes {
		return nil, fmt.Errorf("engine of %s to %s: %d lanes, want 1 to %d: %w", d, peer, lanes, devcore.MaxLanes, hal.ErrInvalidArgument)
	}
	s, err := d.CreateStream("engine to " + peer)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("engine of %s to %s", d, peer)
	signals, err := d.NewSignalWriter(s)
	if err != nil {
		d.DestroyStream(s)
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	q := copyStream{stream: s, signals: signals}
	var ls *laneStreams
	if lanes > 1 {
		if ls, err = d.newLaneStreams(s, lanes, peer); err != nil {
			signals.Close()
			d.DestroyStream(s)
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		name += fmt.Sprintf(" (%d lanes)", lanes)
	}
	release := func() error {
		err := errors.Join(signals.Close(), d.DestroyStream(s))
		if ls != nil {
			err = errors.Join(err, ls.close())
		}
		return err
	}
	var e *devcore.CopyEngine[cuda.Event]
	if ls != nil {
		e, err = devcore.NewLaneEngine(name, q, devcore.Lanes(ls), d.events(s), copyEngineMarks, release)
	} else {
		e, err = devcore.NewCopyEngine(name, q, d.events(s), copyEngineMarks, release)
	}
	if err != nil {
		release()
		return nil, err
	}
	return &CopyEngine{CopyEngine: e, stream: s}, nil
}

// MaxEngineLanes bounds the lanes of NewLaneEngine.
const MaxEngineLanes = devcore.MaxLanes

// laneStreams are the lanes of an engine: streams[0] is its main stream
// (owned by the engine), the others are created here; events[i] is
// recorded on lane i whenever another lane must wait for it.
type laneStreams struct {
	d       *Device
	streams []cuda.Stream
	events  []cuda.Event
}

func (d *Device) newLaneStreams(main cuda.Stream, n int, peer string) (*laneStreams, error) {
	ls := &laneStreams{d: d, streams: []cuda.Stream{main}}
	for i := 0; i < n; i++ {
		if i > 0 {
			s, err := d.CreateStream(fmt.Sprintf("engine lane %d to %s", i, peer))
			if err != nil {
				ls.close()
				return nil, err
			}
			ls.streams = append(ls.streams, s)
		}
		ev, err := d.ctx.EventCreate(cuda.EventDisableTiming)
		if err != nil {
			ls.close()
			return nil, err
		}
		ls.events = append(ls.events, ev)
	}
	return ls, nil
}

func (l *laneStreams) Count() int { return len(l.streams) }

func (l *laneStreams) MemcpyAsync(i int, dst, src uint64, bytes int64) error {
	return l.streams[i].MemcpyAsync(cuda.DevicePtr(dst), cuda.DevicePtr(src), bytes)
}

// Order records lane j's event on lane j and makes lane i wait for it: the
// wait takes the record's state at this call, so re-recording the event
// later does not change it (cuStreamWaitEvent).
func (l *laneStreams) Order(i, j int) error {
	if err := l.events[j].Record(l.streams[j]); err != nil {
		return err
	}
	return l.streams[i].WaitEvent(l.events[j])
}

func (l *laneStreams) Query(i int) (bool, error) { return l.streams[i].Query() }

// close destroys the lanes' events and the streams it created (the main
// stream is the engine's); their work must be done.
func (l *laneStreams) close() error {
	var errs []error
	for _, ev := range l.events {
		errs = append(errs, ev.Destroy())
	}
	for _, s := range l.streams[1:] {
		errs = append(errs, l.d.DestroyStream(s))
	}
	return errors.Join(errs...)
}

// Stream is the engine's CUDA stream.
func (e *CopyEngine) Stream() cuda.Stream { return e.stream }

// events are the calls devcore.Marks makes on CUDA events of stream s.
func (d *Device) events(s cuda.Stream) devcore.Events[cuda.Event] {
	return devcore.Events[cuda.Event]{
		New:     func() (cuda.Event, error) { return d.ctx.EventCreate(cuda.EventDisableTiming) },
		Record:  func(ev cuda.Event) error { return ev.Record(s) },
		Query:   cuda.Event.Query,
		Destroy: cuda.Event.Destroy,
	}
}

// copyStream is a CUDA stream as a devcore.Stream.
type copyStream struct {
	stream  cuda.Stream
	signals *SignalWriter
}

func (q copyStream) MemcpyAsync(dst, src uint64, bytes int64) error {
	return q.stream.MemcpyAsync(cuda.DevicePtr(dst), cuda.DevicePtr(src), bytes)
}

func (q copyStream) Signal(countAddr, count, semAddr, value uint64) error {
	return q.signals.Signal(countAddr, count, semAddr, value)
}

func (q copyStream) Query() (bool, error) { return q.stream.Query() }

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
		err := devcore.Poll(time.Time{}, r.events[g].Query, func(err error, waited time.Duration) error {
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

// NVLinkCopyEngineMinBytes is the hal.CopyEnginePreference of GPUs joined
// by NVLink (hal/nvlink, hal/nvswitch): 32 MiB on 2 ranks, 0 (no default)
// beyond. On 2×H100 (2026-11-26, docs/bench/2026-11-26e-h100x2) the
// copy-engine AllGather took 1.07–1.12× NCCL's time from 32 MB to 512 MB
// (0.95× at 8 MB) with no SM, against 1.25–1.37× for the SM plan alone,
// but FSDP2's step ran 1.00–1.02× NCCL's with it against 0.96–0.97× with
// the SM plan, whose 64 blocks the overlapped GEMMs miss. Not measured
// beyond 2 ranks (one lane pushes to every peer), nor over PCIe.
func NVLinkCopyEngineMinBytes(nranks int) int64 {
	if nranks == 2 {
		return 32 << 20
	}
	return 0
}

// NVLinkCopyEngineAllReduceMinBytes is the hal.CopyEngineAllReducePreference
// of GPUs joined by NVLink (hal/nvlink): 512 MiB on 2 ranks, 0 beyond. The
// copy-engine AllReduce then copies reduced windows straight into the
// peers' outputs: registered ones through Comm.AllReduce, ones exported at
// the call through the NCCL ABI (2 ranks). On 2×H100 (2026-11-27,
// docs/bench/2026-11-27c-h100x2 call 5, through the ABI, alternated twice)
// it took NCCL's time × 1.09–1.10 at 1 GB and 1.09–1.11 at 512 MB, where
// the SM 2PA took 1.04–1.07 and 1.06–1.11 in the same call; at 256 MB the
// SM plan led (1.12–1.13 against 1.08–1.10), at 64 MB by 0.2× (2026-11-28,
// docs/bench/2026-11-28-h100x2 call 11: Comm.AllReduce at 1 GB 1.09 / 1.10
// against the SM plan's 1.03 / 1.04). The staged form (landing slots for
// the reduced windows and a copy-out, where the outputs cannot be mapped)
// never led the SM plans: only WEFT_ALGO=ce takes it.
func NVLinkCopyEngineAllReduceMinBytes(nranks int) int64 {
	if nranks == 2 {
		return 512 << 20
	}
	return 0
}

// NVLinkCopyEngineP2PMinBytes is the hal.CopyEngineP2PPreference of GPUs
// joined by NVLink (hal/nvlink): 32 MiB per operation on 2 ranks, 0
// beyond. Copy engines move 395.6 GB/s one way over the H100's NVLink
// where SM stores reach 367 (docs/bench/2026-11-28-h100x2, call 1), the
// ceiling at which NCCL's and weft's SM point-to-point plans sit from
// tens of MiB; a copy straight into the receiver's exported buffer pays
// the export, a host message and two flag trips per operation, which the
// larger operations hide. On 2×H100 (docs/bench/2026-11-27c-h100x2, call 9,
// alternated twice, with copies to itself on SMs) 32 MiB operations took
// NCCL's time × 1.01–1.02 in a 64 MB gather (SM plan 0.95–0.99), 1.03–1.04
// in a scatter (0.98–0.99), 1.33 in an AllToAll (1.11–1.13) and 1.35–1.37
// in a sendrecv (1.26–1.29); 16 MiB ones lost (gather 0.93–0.94). The
// same from 3 ranks: on 4×H100 (docs/bench/2026-11-27g-h100x4, call 9,
// float, NCCL twice beside) sendrecv of 512 MB 0.96 → 1.09 on 4 and 3
// ranks (128 MB 1.91–2.00 → 2.28), gather and scatter of 512 MB on 4 ranks
// 1.00 → 1.04 / 1.06, on 3 ranks gather of 31 MB 1.55 → 2.03 and scatter
// of 127 MB 1.54 → 1.71; the AllToAll lost there (0.53–0.64 from 128 MB
// against 0.93–1.95 on SMs), so the communicator keeps it to two ranks
// (Comm.ceP2PServes).
func NVLinkCopyEngineP2PMinBytes(nranks int) int64 {
	if nranks >= 2 {
		return 32 << 20
	}
	return 0
}

// NVLinkCopyEngineReduceMinBytes is the hal.CopyEngineReducePreference of
// GPUs joined by NVLink (hal/nvlink): 64 MiB on 2 ranks, 0 beyond. On
// 2×H100 (2026-11-27, docs/bench/2026-11-27b-h100x2, calls 4–5) the
// copy-engine Reduce took NCCL's time × 1.06–1.07 at 64 MB, 1.03 at
// 128 MB, 1.01 at 256 MB and 0.99–1.00 at 512 MB – 1 GB, where the SM
// plan took 0.99–1.01 throughout; at 16 and 32 MB (one 32 MiB window, no
// pipeline) 0.68. The reduction kernel's shape changed nothing (32 to 128
// blocks). Not measured beyond 2 ranks.
func NVLinkCopyEngineReduceMinBytes(nranks int) int64 {
	if nranks == 2 {
		return 64 << 20
	}
	return 0
}

// NVLinkCopyEngineReduceDirectMinBytes is where, on 2 NVLink-connected
// GPUs, that Reduce pushes straight into the root's output rather than into
// landing slots: 512 MiB. On 2×H100 (2026-11-27,
// docs/bench/2026-11-27c-h100x2, calls 2–3) straight into the output took
// NCCL's time × 1.02 at 512 MB and 1.035 at 1 GB against the slots' 1.00
// and 0.99, but 0.98 at 256 MB and 0.89 at 64 MB against 1.01 and 1.07:
// the pusher waits, at each call, for the root's stream to reach it, where
// the slots let a call's first windows land while the root still reduces
// the last call's.
func NVLinkCopyEngineReduceDirectMinBytes(nranks int) int64 { return 512 << 20 }

// NVLinkCopyEngineMaxBytes is the upper end of that default: 512 MiB on
// 2 ranks. On 2×H100 (2026-11-26, docs/bench/2026-11-26j-h100x2, calls
// 5–6) the copy-engine AllGather took NCCL's time × 1.08–1.11 at 256 and
// 512 MB but × 0.96 at 1 GB (2047 µs against NCCL's 1968: its per-byte
// time grows past 512 MB while NCCL's shrinks), where the SM plan took
// × 1.19; beyond 512 MiB the SM plan serves by default.
func NVLinkCopyEngineMaxBytes(nranks int) int64 {
	if nranks == 2 {
		return 512 << 20
	}
	return 0
}
