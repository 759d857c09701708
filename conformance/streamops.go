package conformance

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
)

func init() {
	Register(Case{ID: "memory-mapped/stream-ops", Capability: hal.CapMemoryMapped, MinRanks: 2,
		Title: "host-queued stream operations (hal.StreamOps): a copy into the next rank's mapped buffer, its flag written after it, the flag waited for, reset and the data copied out, every byte, on one stream and on forked lanes, plain and replayed from a captured graph (the capture state right where hal.CaptureQuerier reports it); a wait nobody satisfies released by AbortWaits and reported by WaitsFailed",
		Run:   testStreamOps})
}

// landingWithFlag allocates a landing buffer of size bytes and a 64-bit
// flag word (0), both registered with the peers: what a host-issued plan
// copies into and signals on.
func landingWithFlag(t *T, size int64) (landing, flag hal.Buffer, lreg, freg *channels.Registration, err error) {
	if landing, err = t.Alloc(size); err != nil {
		return
	}
	if flag, err = t.Alloc(8); err != nil {
		return
	}
	if err = t.Write(flag, 0, make([]byte, 8)); err != nil {
		return
	}
	if lreg, err = t.Register(landing); err != nil {
		return
	}
	freg, err = t.Register(flag)
	return
}

// testStreamOps is the protocol of a host-issued copy-engine plan
// (docs/portchannel.md) on a ring: rank r copies its input into its slot
// of the next rank's landing buffer and then writes that rank's flag;
// each rank waits for its own flag, resets it and copies the landing
// buffer out. The flags return to 0 within a round, so a graph captured
// once replays in step. Sizes from 0 to 1 MiB and odd lengths, all on the
// stream, then with the send on lane 1 and the receive on lane 2 (the
// stream's synchronisation must cover the lanes: their join).
func testStreamOps(t *T) error {
	so, ok := t.Dev.(hal.StreamOps)
	if !ok {
		return t.NotSupported("the device does not implement hal.StreamOps")
	}
	rg := newRing(t.Rank, t.Size)
	const maxSize = 1<<20 + 7
	in, err := t.Alloc(maxSize)
	if err != nil {
		return err
	}
	out, err := t.Alloc(maxSize)
	if err != nil {
		return err
	}
	landing, flag, lreg, freg, err := landingWithFlag(t, maxSize)
	if err != nil {
		return err
	}
	s, err := t.Stream()
	if err != nil {
		return err
	}
	ops := func(size int64, lanes bool) []hal.StreamOp {
		var send, recv uint8
		if lanes {
			send, recv = 1, 2
		}
		return []hal.StreamOp{
			{Kind: hal.StreamCopy, Dst: lreg.Peers[rg.next].Addr(), Src: in.Addr(), Bytes: size, Lane: send},
			{Kind: hal.StreamWrite, Dst: freg.Peers[rg.next].Addr(), Value: 1, Lane: send},
			{Kind: hal.StreamWaitEq, Dst: flag.Addr(), Value: 1, Lane: recv},
			{Kind: hal.StreamWrite, Dst: flag.Addr(), Value: 0, Lane: recv},
			{Kind: hal.StreamCopy, Dst: out.Addr(), Src: landing.Addr(), Bytes: size, Lane: recv},
		}
	}
	check := func(what string, size int64, k int) error {
		got, err := t.Read(out, 0, size)
		if err != nil {
			return err
		}
		if d := diff(what, got, pattern(seed(rg.prev, k), size)); d != "" {
			return t.Errorf("from rank %d: %s", rg.prev, d)
		}
		f, err := t.Read(flag, 0, 8)
		if err != nil {
			return err
		}
		if v := binary.LittleEndian.Uint64(f); v != 0 {
			return t.Errorf("%s: the flag is %d after the round, want 0 (reset by its reader)", what, v)
		}
		return nil
	}
	round := func(size int64, k int, queue func() error) error {
		if err := t.Write(in, 0, pattern(seed(t.Rank, k), size)); err != nil {
			return err
		}
		if err := t.Write(out, 0, fill(size, poison)); err != nil {
			return err
		}
		if err := t.Barrier(); err != nil {
			return err
		}
		if err := queue(); err != nil {
			return err
		}
		if err := t.Sync(s); err != nil {
			return err
		}
		if err := check(fmt.Sprintf("%d bytes, round %d", size, k), size, k); err != nil {
			return err
		}
		return t.Barrier() // nobody writes into a landing buffer a peer still copies out
	}
	k := 0
	for _, lanes := range []bool{false, true} {
		for _, size := range []int64{0, 1, 8, 4095, 64 << 10, maxSize} {
			k++
			if err := round(size, k, func() error { return so.QueueOps(s, ops(size, lanes)) }); err != nil {
				return fmt.Errorf("lanes %v: %w", lanes, err)
			}
		}
	}

	gc, ok := t.Dev.(hal.GraphCapturer)
	if !ok {
		return nil
	}
	// A device that reports capture states (hal.CaptureQuerier) reports
	// them right: the copy-engine paths keep what a capture mapped.
	cq, _ := t.Dev.(hal.CaptureQuerier)
	capturing := func(want bool, when string) error {
		if cq == nil {
			return nil
		}
		got, err := cq.Capturing(s)
		if err != nil {
			return t.Errorf("hal.CaptureQuerier %s: %w", when, err)
		}
		if got != want {
			return t.Errorf("hal.CaptureQuerier: Capturing %s = %v, want %v", when, got, want)
		}
		return nil
	}
	const size = 4<<10 + 3
	for _, lanes := range []bool{false, true} {
		if err := capturing(false, "before a capture"); err != nil {
			return err
		}
		if err := gc.BeginCapture(s); err != nil {
			if errors.Is(err, hal.ErrNotSupported) {
				return nil
			}
			return t.Errorf("begin capture: %w", err)
		}
		if err := capturing(true, "during a capture"); err != nil {
			gc.EndCapture(s)
			return err
		}
		if err := so.QueueOps(s, ops(size, lanes)); err != nil {
			gc.EndCapture(s)
			return t.Errorf("queue while capturing (lanes %v): %w", lanes, err)
		}
		g, err := gc.EndCapture(s)
		if err != nil {
			return t.Errorf("end capture (lanes %v): %w", lanes, err)
		}
		if err := capturing(false, "after a capture"); err != nil {
			g.Close()
			return err
		}
		t.Cleanup(g.Close)
		for r := 0; r < 3; r++ {
			k++
			if err := round(size, k, func() error { return g.Launch(s) }); err != nil {
				return fmt.Errorf("lanes %v: replay %d: %w", lanes, r, err)
			}
		}
	}

	// Bad input is refused at the call, naming what is wrong.
	if err := so.QueueOps(s, []hal.StreamOp{{Kind: hal.StreamWrite, Dst: flag.Addr() + 4, Value: 1}}); !errors.Is(err, hal.ErrInvalidArgument) {
		return t.Errorf("a flag address not 8-byte aligned: %v, want ErrInvalidArgument", err)
	}
	if err := so.QueueOps(s, []hal.StreamOp{{Kind: hal.StreamWrite, Dst: flag.Addr(), Lane: hal.MaxStreamLanes}}); !errors.Is(err, hal.ErrInvalidArgument) {
		return t.Errorf("lane %d: %v, want ErrInvalidArgument", hal.MaxStreamLanes, err)
	}
	if err := so.QueueOps(s, []hal.StreamOp{{Kind: 0}}); !errors.Is(err, hal.ErrInvalidArgument) {
		return t.Errorf("an unknown kind: %v, want ErrInvalidArgument", err)
	}
	if err := so.QueueOps(s, []hal.StreamOp{{Kind: hal.StreamCopy, Dst: out.Addr(), Src: in.Addr(), Bytes: -1}}); !errors.Is(err, hal.ErrInvalidArgument) {
		return t.Errorf("a negative size: %v, want ErrInvalidArgument", err)
	}
	if err := t.Sync(s); err != nil {
		return err
	}

	// AbortWaits releases a wait nobody will satisfy, on a stream of its
	// own (it fails): the stream drains at once with ErrInvalidUsage.
	stuck, err := t.Alloc(8)
	if err != nil {
		return err
	}
	if err := t.Write(stuck, 0, make([]byte, 8)); err != nil {
		return err
	}
	s2, err := t.Stream()
	if err != nil {
		return err
	}
	if err := so.QueueOps(s2, []hal.StreamOp{{Kind: hal.StreamWaitEq, Dst: stuck.Addr(), Value: 7}}); err != nil {
		return t.Errorf("queue a wait to abort: %w", err)
	}
	if err := s2.Synchronize(time.Now().Add(100 * time.Millisecond)); !errors.Is(err, hal.ErrTimeout) {
		return t.Errorf("a wait for a value nobody stores: synchronize = %v, want ErrTimeout (still waiting)", err)
	}
	start := time.Now()
	so.AbortWaits(stuck)
	err = s2.Synchronize(time.Now().Add(10 * time.Second))
	if took := time.Since(start); !errors.Is(err, hal.ErrInvalidUsage) || took > 5*time.Second {
		return t.Errorf("after AbortWaits: synchronize = %v after %v, want an error wrapping ErrInvalidUsage at once", err, took.Round(time.Millisecond))
	}
	// The failure is reported for the aborted buffer only.
	if err := so.WaitsFailed(stuck); !errors.Is(err, hal.ErrInvalidUsage) {
		return t.Errorf("WaitsFailed of the aborted buffer = %v, want an error wrapping ErrInvalidUsage", err)
	}
	if err := so.WaitsFailed(flag); err != nil {
		return t.Errorf("WaitsFailed of a buffer whose waits all passed = %v, want nil", err)
	}
	return nil
}
