package devcore

import "fmt"

// Lanes are the streams of a copy engine with several lanes: lane 0 is the
// engine's main stream (the Stream it was made with, which carries every
// signal and mark), lanes 1 … Count()−1 are more streams of the same
// device, each of which the driver may serve with another copy engine.
// Local copies on a lane of their own run beside the puts instead of after
// them: that is what pays (a CE AllGather on 2×H200 at 256 MB–1 GB,
// 2026-11-26: 1.01–1.03× NCCL on one stream, 1.13–1.15× with a copy lane).
// Cutting a put over several lanes did not: one stream's copy already
// fills what the copy engines give a link (32 MiB puts each followed by a
// signal, GPU 0 to GPU 1: 317 GB/s on 1 lane, 316 on 2, 316 on 3 (2 put
// lanes), 300 on 4, 290 on 5), so the pieces are there for hardware whose
// copy engines do not (hal/nvlink's default is 2 lanes: no cut).
type Lanes interface {
	// Count is the number of lanes, the main stream included (≥ 2).
	Count() int
	// MemcpyAsync queues a copy of bytes (> 0) from src to dst on lane i
	// (1 ≤ i < Count()).
	MemcpyAsync(i int, dst, src uint64, bytes int64) error
	// Order makes the work queued later on lane i wait for the work queued
	// so far on lane j (i ≠ j; either may be 0): an event recorded on
	// lane j that lane i waits for, no host wait.
	Order(i, j int) error
	// Query reports whether the work of lane i (≥ 1) is done; it never
	// blocks.
	Query(i int) (bool, error)
}

// Lane policy of an engine with lanes (CopyEngine.copy):
//
//   - Puts go to the put lanes: lanes 0 … Count()−2. A put of at least
//     2 × LaneSplitMin bytes is cut into one piece per put lane (pieces
//     rounded up to LaneAlign, at least LaneSplitMin each); a smaller one
//     stays whole on lane 0, so that the signal after a small put needs no
//     ordering between streams.
//   - Copies (local) go whole to the copy lane, Count()−1: they run beside
//     the puts (the receiver's slot-to-output copy of a port plan beside
//     this rank's own puts).
//   - A Signal or a Mark first orders every lane with work queued since its
//     last such ordering before lane 0 (Lanes.Order(0, i)), then writes or
//     records on lane 0: the signal follows every piece of every earlier
//     request, exactly as on one stream.
//   - Requests on different lanes run concurrently, which is only allowed
//     where the order could not be seen: a request whose destination
//     overlaps the source or destination of an earlier request on another
//     lane, or whose source overlaps an earlier destination there, is
//     preceded by a barrier (every lane ordered after every other), so
//     that Copy(b ← a) then Put(b) still puts a's bytes. The engine keeps
//     the ranges since the last barrier (at most laneSpans; a barrier
//     clears them).
const (
	// LaneSplitMin is the smallest piece of a put split over lanes: below
	// a few MiB a copy's fixed cost (a few µs to start an engine) is
	// comparable to its transfer (1 MiB moves in 2.7 µs at 370 GB/s).
	LaneSplitMin = 1 << 20
	// LaneAlign is the granularity of the pieces' sizes.
	LaneAlign = 64 << 10
	// laneSpans bounds the ranges kept for the overlap check.
	laneSpans = 128
)

// MaxLanes bounds Lanes.Count (WEFT_CE_LANES).
const MaxLanes = 8

// span is one request's ranges on a lane: it read [r, r+n) and wrote
// [w, w+n).
type span struct {
	lane int
	r, w uint64
	n    uint64
}

// laneState is the lane bookkeeping of a CopyEngine.
type laneState struct {
	l     Lanes
	dirty []bool // lane i (≥ 1) has work not yet ordered before lane 0
	spans []span
}

func newLaneState(l Lanes) (*laneState, error) {
	if l == nil {
		return nil, nil
	}
	if n := l.Count(); n < 2 || n > MaxLanes {
		return nil, fmt.Errorf("%d lanes: want 2 to %d", n, MaxLanes)
	}
	return &laneState{l: l, dirty: make([]bool, l.Count()), spans: make([]span, 0, laneSpans)}, nil
}

func overlap(a, an, b, bn uint64) bool { return a < b+bn && b < a+an }

// conflicts reports whether a request on lane i reading [r, r+n) and
// writing [w, w+n) must wait for an earlier request of another lane.
func (ls *laneState) conflicts(i int, r, w, n uint64) bool {
	for _, s := range ls.spans {
		if s.lane == i {
			continue
		}
		if overlap(w, n, s.r, s.n) || overlap(w, n, s.w, s.n) || overlap(r, n, s.w, s.n) {
			return true
		}
	}
	return false
}

// barrier orders every lane after the work queued so far on every lane:
// the dirty lanes before lane 0, then every lane after lane 0.
func (ls *laneState) barrier() error {
	if err := ls.join(); err != nil {
		return err
	}
	for i := 1; i < len(ls.dirty); i++ {
		if err := ls.l.Order(i, 0); err != nil {
			return err
		}
	}
	ls.spans = ls.spans[:0]
	return nil
}

// join orders the work of the dirty lanes before later work of lane 0 and
// reports through the error only; it is what a Signal and a Mark need.
func (ls *laneState) join() error {
	for i := 1; i < len(ls.dirty); i++ {
		if !ls.dirty[i] {
			continue
		}
		if err := ls.l.Order(0, i); err != nil {
			return err
		}
		ls.dirty[i] = false
	}
	return nil
}

// anyDirty reports whether a lane has work not ordered before lane 0.
func (ls *laneState) anyDirty() bool {
	for _, d := range ls.dirty[1:] {
		if d {
			return true
		}
	}
	return false
}

// piece is one part of a request: bytes n at offset off, on lane.
type piece struct {
	lane int
	off  int64
	n    int64
}

// plan cuts a request into pieces by the lane policy; out is reused.
func (ls *laneState) plan(put bool, bytes int64, out []piece) []piece {
	out = out[:0]
	n := ls.l.Count()
	if !put {
		return append(out, piece{lane: n - 1, n: bytes})
	}
	putLanes := int64(n - 1)
	k := min(putLanes, bytes/LaneSplitMin)
	if k < 2 || n == 2 {
		return append(out, piece{lane: 0, n: bytes})
	}
	size := (bytes + k - 1) / k
	size = (size + LaneAlign - 1) / LaneAlign * LaneAlign
	for i, off := 0, int64(0); off < bytes; i++ {
		m := min(size, bytes-off)
		out = append(out, piece{lane: i, off: off, n: m})
		off += m
	}
	return out
}

// issue queues the pieces of a request from src to dst: lane 0's through
// the main stream's copy, the others' through Lanes.
func (ls *laneState) issue(main Stream, pieces []piece, dst, src uint64) error {
	full := len(ls.spans)+len(pieces) > cap(ls.spans)
	for _, p := range pieces {
		if full || ls.conflicts(p.lane, src+uint64(p.off), dst+uint64(p.off), uint64(p.n)) {
			if err := ls.barrier(); err != nil {
				return err
			}
			break
		}
	}
	for _, p := range pieces {
		d, s := dst+uint64(p.off), src+uint64(p.off)
		var err error
		if p.lane == 0 {
			err = main.MemcpyAsync(d, s, p.n)
		} else {
			err = ls.l.MemcpyAsync(p.lane, d, s, p.n)
			ls.dirty[p.lane] = true
		}
		if err != nil {
			return err
		}
		ls.spans = append(ls.spans, span{lane: p.lane, r: s, w: d, n: uint64(p.n)})
	}
	return nil
}
