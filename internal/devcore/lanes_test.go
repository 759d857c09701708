package devcore

import (
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// laneModel records what an engine with lanes queues on each lane, so
// that tests can check happens-before: an op of lane i follows the earlier
// ops of lane i, and after a wait on lane j (Order(i, j)) every op lane j
// had queued then.
type laneModel struct {
	lanes [][]laneOp
	seq   int // issue order of data requests (pieces of one request share it)
}

type laneOp struct {
	kind    string // "copy", "signal", "wait", "record"
	req     int    // data: the request; signal: requests issued before it
	r, w, n uint64
	waitFor [2]int // wait: lane j and how many of its ops precede
}

func newLaneModel(n int) *laneModel { return &laneModel{lanes: make([][]laneOp, n)} }

func (m *laneModel) Count() int { return len(m.lanes) }

func (m *laneModel) MemcpyAsync(i int, dst, src uint64, bytes int64) error {
	m.lanes[i] = append(m.lanes[i], laneOp{kind: "copy", req: m.seq, r: src, w: dst, n: uint64(bytes)})
	return nil
}

func (m *laneModel) Order(i, j int) error {
	m.lanes[i] = append(m.lanes[i], laneOp{kind: "wait", waitFor: [2]int{j, len(m.lanes[j])}})
	return nil
}

func (m *laneModel) Query(i int) (bool, error) { return true, nil }

// mainLane is lane 0 of the model as the engine's Stream.
type mainLane struct{ m *laneModel }

func (s mainLane) MemcpyAsync(dst, src uint64, bytes int64) error {
	return s.m.MemcpyAsync(0, dst, src, bytes)
}

func (s mainLane) Signal(countAddr, count, semAddr, value uint64) error {
	s.m.lanes[0] = append(s.m.lanes[0], laneOp{kind: "signal", req: s.m.seq})
	return nil
}

func (s mainLane) Query() (bool, error) { return true, nil }

// before reports whether op k of lane i happens before op k2 of lane i2
// (k < k2 on the same lane, or through waits).
func (m *laneModel) before(i, k, i2, k2 int) bool {
	type pos struct{ lane, n int } // the first n ops of lane precede
	seen := map[pos]bool{}
	var reach func(lane, n int) bool
	reach = func(lane, n int) bool { // do the first n ops of lane include (i, k)?
		if lane == i && n > k {
			return true
		}
		if seen[pos{lane, n}] {
			return false
		}
		seen[pos{lane, n}] = true
		for x := n - 1; x >= 0; x-- {
			if op := m.lanes[lane][x]; op.kind == "wait" && reach(op.waitFor[0], op.waitFor[1]) {
				return true
			}
		}
		return false
	}
	return reach(i2, k2)
}

func newLaneEngine(t *testing.T, lanes int) (*laneModel, *CopyEngine[int]) {
	t.Helper()
	m := newLaneModel(lanes)
	fs := &fakeStream{events: map[int]int{}}
	e, err := NewLaneEngine("engine of GPU 0 to GPU 1", Stream(mainLane{m}), Lanes(m), fs.fakeEvents(), 4, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return m, e
}

// TestLanePlacement: a large put is cut over the put lanes, a small one
// stays on lane 0, copies go to the last lane, and a signal after work on
// other lanes waits for it.
func TestLanePlacement(t *testing.T) {
	m, e := newLaneEngine(t, 4)
	const mib = 1 << 20
	if err := e.Put(0x1_0000_0000, 0x2_0000_0000, 8*mib); err != nil {
		t.Fatal(err)
	}
	if err := e.Put(0x1_1000_0000, 0x2_1000_0000, mib); err != nil {
		t.Fatal(err)
	}
	if err := e.Copy(0x3_0000_0000, 0x4_0000_0000, 8*mib); err != nil {
		t.Fatal(err)
	}
	sizes := func(lane int) []uint64 {
		var out []uint64
		for _, op := range m.lanes[lane] {
			if op.kind == "copy" {
				out = append(out, op.n)
			}
		}
		return out
	}
	// 8 MiB over 3 put lanes: pieces of ceil(8/3 MiB) rounded to 64 KiB.
	piece := uint64((8*mib/3 + LaneAlign - 1) / LaneAlign * LaneAlign)
	want := [][]uint64{{piece, mib}, {piece}, {8*mib - 2*piece}, {8 * mib}}
	for lane, w := range want {
		if diff := cmp.Diff(w, sizes(lane)); diff != "" {
			t.Errorf("lane %d copies (-want +got):\n%s", lane, diff)
		}
	}
	if err := e.Signal(0x5000, 0, 0); err != nil {
		t.Fatal(err)
	}
	last := len(m.lanes[0]) - 1
	if m.lanes[0][last].kind != "signal" {
		t.Fatalf("lane 0 ends with %q, want the signal", m.lanes[0][last].kind)
	}
	for lane := 1; lane < 4; lane++ {
		for k, op := range m.lanes[lane] {
			if op.kind == "copy" && !m.before(lane, k, 0, last) {
				t.Errorf("copy %d of lane %d does not precede the signal", k, lane)
			}
		}
	}
	waits := 0
	for _, op := range m.lanes[0] {
		if op.kind == "wait" {
			waits++
		}
	}
	if err := e.Signal(0x5000, 0, 0); err != nil { // nothing new on other lanes
		t.Fatal(err)
	}
	w2 := 0
	for _, op := range m.lanes[0] {
		if op.kind == "wait" {
			w2++
		}
	}
	if waits != 3 || w2 != 3 {
		t.Errorf("lane 0 waits: %d after the first signal, %d after the second; want 3 and 3", waits, w2)
	}
}

// TestLaneOrderRandom issues random puts and copies over a few
// overlapping regions, with signals between them, and checks on the
// model: every signal follows every piece issued before it, and every
// request that reads or writes what an earlier one wrote, or writes what
// an earlier one read, follows it (the order one stream gives).
func TestLaneOrderRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, lanes := range []int{2, 3, 5} {
		m, e := newLaneEngine(t, lanes)
		bases := []uint64{0x1000_0000, 0x2000_0000, 0x3000_0000}
		for i := 0; i < 300; i++ {
			n := int64(1+rng.Intn(6)) << 20
			src := bases[rng.Intn(3)] + uint64(rng.Intn(8))<<20
			dst := bases[rng.Intn(3)] + uint64(rng.Intn(8))<<20
			m.seq++
			var err error
			switch rng.Intn(5) {
			case 0, 1:
				err = e.Put(dst, src, n)
			case 2, 3:
				err = e.Copy(dst, src, n)
			default:
				err = e.Signal(0x9000, 0, 0)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		type at struct {
			lane, k int
			op      laneOp
		}
		var data, signals []at
		for lane, ops := range m.lanes {
			for k, op := range ops {
				switch op.kind {
				case "copy":
					data = append(data, at{lane, k, op})
				case "signal":
					signals = append(signals, at{lane, k, op})
				}
			}
		}
		for _, s := range signals {
			for _, d := range data {
				if d.op.req < s.op.req && !m.before(d.lane, d.k, s.lane, s.k) {
					t.Fatalf("%d lanes: signal after request %d does not follow request %d's piece on lane %d", lanes, s.op.req, d.op.req, d.lane)
				}
			}
		}
		for _, a := range data {
			for _, b := range data {
				if a.op.req >= b.op.req || a.lane == b.lane {
					continue
				}
				hazard := overlap(b.op.w, b.op.n, a.op.w, a.op.n) || overlap(b.op.w, b.op.n, a.op.r, a.op.n) || overlap(b.op.r, b.op.n, a.op.w, a.op.n)
				if hazard && !m.before(a.lane, a.k, b.lane, b.k) {
					t.Fatalf("%d lanes: request %d (lane %d) overlaps earlier request %d (lane %d) and does not follow it", lanes, b.op.req, b.lane, a.op.req, a.lane)
				}
			}
		}
	}
}

// TestLaneMark: a mark after work on other lanes records an event after
// waiting for them, even when lane 0 itself had nothing new.
func TestLaneMark(t *testing.T) {
	m, e := newLaneEngine(t, 2)
	if err := e.Copy(0x1000_0000, 0x2000_0000, 4<<20); err != nil {
		t.Fatal(err)
	}
	tk, err := e.Mark()
	if err != nil {
		t.Fatal(err)
	}
	if tk != 1 || len(m.lanes[0]) != 1 || m.lanes[0][0].kind != "wait" || m.lanes[0][0].waitFor != [2]int{1, 1} {
		t.Errorf("ticket %d, lane 0 %+v; want ticket 1 and lane 0 waiting for lane 1's copy", tk, m.lanes[0])
	}
	if _, err := NewLaneEngine[int]("x", mainLane{m}, newLaneModel(MaxLanes+1), (&fakeStream{events: map[int]int{}}).fakeEvents(), 4, nil); err == nil {
		t.Errorf("NewLaneEngine with %d lanes succeeded, want an error", MaxLanes+1)
	}
}

// TestCopyOntoItself: a copy whose source is its destination queues
// nothing (the own segment of an in-place AllGather), on one stream and
// with lanes; a put never is one (its destination is the peer's).
func TestCopyOntoItself(t *testing.T) {
	s, e := newFake(t, 2)
	if err := e.Copy(0x1000, 0x1000, 1<<20); err != nil || len(s.ops) != 0 {
		t.Errorf("Copy onto itself = %v, queued %v; want nothing queued", err, s.ops)
	}
	m, le := newLaneEngine(t, 2)
	if err := le.Put(0x2000_0000, 0x1000_0000, 4<<20); err != nil {
		t.Fatal(err)
	}
	if err := le.Copy(0x1000_0000, 0x1000_0000, 4<<20); err != nil {
		t.Fatal(err)
	}
	for lane, ops := range m.lanes {
		for _, op := range ops {
			if op.kind != "copy" || op.r != 0x1000_0000 || op.w != 0x2000_0000 {
				t.Errorf("lane %d: %+v; want only the put (no copy, no barrier)", lane, op)
			}
		}
	}
}
