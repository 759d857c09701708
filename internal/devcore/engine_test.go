package devcore

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/hal"
)

// fakeStream is a stream whose work completes when the test says: ops
// are the requests queued, reached how many of them are done, and an
// event is reached once the requests before its record are.
type fakeStream struct {
	ops       []string
	reached   int
	events    map[int]int // event -> requests queued when it was recorded
	nextEvent int
	created   int
	destroyed int
	failQuery error
	failCopy  error
	released  bool
}

func (s *fakeStream) MemcpyAsync(dst, src uint64, bytes int64) error {
	if s.failCopy != nil {
		return s.failCopy
	}
	s.ops = append(s.ops, "copy")
	return nil
}

func (s *fakeStream) Signal(countAddr, count, semAddr, value uint64) error {
	s.ops = append(s.ops, "signal")
	return nil
}

func (s *fakeStream) Query() (bool, error) { return s.reached >= len(s.ops), s.failQuery }

func (s *fakeStream) fakeEvents() Events[int] {
	return Events[int]{
		New: func() (int, error) {
			s.nextEvent++
			s.created++
			return s.nextEvent, nil
		},
		Record: func(e int) error { s.events[e] = len(s.ops); return nil },
		Query: func(e int) (bool, error) {
			if s.failQuery != nil {
				return false, s.failQuery
			}
			return s.reached >= s.events[e], nil
		},
		Destroy: func(int) error { s.destroyed++; return nil },
	}
}

func newFake(t *testing.T, marks int) (*fakeStream, *CopyEngine[int]) {
	s := &fakeStream{events: map[int]int{}}
	e, err := NewCopyEngine("engine of GPU 0 to GPU 1", s, s.fakeEvents(), marks, func() error { s.released = true; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return s, e
}

func TestCopyEngineTickets(t *testing.T) {
	s, e := newFake(t, 2)
	mark := func() uint64 {
		t.Helper()
		v, err := e.Mark()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	completed := func() uint64 {
		t.Helper()
		v, err := e.Completed()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := mark(); v != 1 || completed() != 1 || len(s.events) != 0 {
		t.Fatalf("a mark with nothing queued: ticket %d, completed %d, %d events recorded; want 1, 1, 0", v, completed(), len(s.events))
	}
	var tickets []uint64
	for i := 0; i < 5; i++ { // more than the ring holds: it grows
		if err := e.Put(0x1000, 0x2000, 64); err != nil {
			t.Fatal(err)
		}
		tickets = append(tickets, mark())
	}
	if v := mark(); v != 7 || completed() != 1 || s.created != 8 {
		t.Fatalf("nothing new: ticket %d, completed %d, %d events; want 7 (the newest event covers it), 1, 8 (2 grown twice)", v, completed(), s.created)
	}
	s.reached = 2
	if c := completed(); c != 3 {
		t.Errorf("completed = %d after 2 requests, want 3", c)
	}
	s.reached = 5
	if c := completed(); c != 7 {
		t.Errorf("completed = %d after every request, want 7 (merged ticket)", c)
	}
	if diff := cmp.Diff([]uint64{2, 3, 4, 5, 6}, tickets); diff != "" {
		t.Errorf("tickets (-want +got):\n%s", diff)
	}
	if err := e.Put(0, 0, 0); err != nil || len(s.ops) != 5 {
		t.Errorf("a put of 0 bytes = %v and queued %d requests, want nothing queued", err, len(s.ops)-5)
	}
	if err := e.Close(); err != nil || !s.released || s.destroyed != s.created {
		t.Errorf("Close = %v: released %v, %d of %d events destroyed", err, s.released, s.destroyed, s.created)
	}
	if _, err := e.Mark(); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("Mark after Close = %v, want ErrInvalidUsage", err)
	}
	if err := e.Close(); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("second Close = %v, want ErrInvalidUsage", err)
	}
}

func TestCopyEngineSignalMirrors(t *testing.T) {
	s, e := newFake(t, 4)
	var got []uint64
	s2 := &recordSignals{fakeStream: s, values: &got}
	e.stream = s2
	for _, sem := range []uint64{0x100, 0x100, 0x200, 0x100} {
		if err := e.Signal(sem, 0x300, 9); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]uint64{1, 2, 1, 3}, got); diff != "" {
		t.Errorf("semaphore values written (-want +got):\n%s", diff)
	}
	// The hang report names every semaphore with the value last queued.
	if got, want := e.DebugState(), "engine of GPU 0 to GPU 1: 2 semaphores signalled: 0x100=3 0x200=1"; got != want {
		t.Errorf("DebugState() = %q, want %q", got, want)
	}
	for _, c := range [][2]uint64{{0, 0}, {0x104, 0}, {0x100, 0x304}} {
		if err := e.Signal(c[0], c[1], 1); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Errorf("Signal(%#x, %#x) = %v, want ErrInvalidArgument", c[0], c[1], err)
		}
	}
	if err := e.Copy(1, 2, -1); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("Copy of -1 bytes = %v, want ErrInvalidArgument", err)
	}
}

type recordSignals struct {
	*fakeStream
	values *[]uint64
}

func (r *recordSignals) Signal(countAddr, count, semAddr, value uint64) error {
	*r.values = append(*r.values, value)
	return r.fakeStream.Signal(countAddr, count, semAddr, value)
}

func TestCopyEngineFailures(t *testing.T) {
	s, e := newFake(t, 2)
	boom := errors.New("illegal address")
	s.failCopy = boom
	if err := e.Put(1, 2, 8); !errors.Is(err, boom) || !strings.Contains(err.Error(), "engine of GPU 0 to GPU 1") {
		t.Errorf("failed put = %v", err)
	}
	s.failCopy = nil
	if err := e.Copy(1, 2, 8); !errors.Is(err, boom) {
		t.Errorf("copy after a failure = %v, want the sticky error", err)
	}

	s, e = newFake(t, 2)
	e.Put(1, 2, 8)
	e.Mark()
	s.failQuery = boom
	if _, err := e.Completed(); !errors.Is(err, boom) {
		t.Errorf("Completed with a failing event = %v", err)
	}
	if c, err := e.Completed(); !errors.Is(err, boom) || c != 0 {
		t.Errorf("Completed after a failure = %d, %v; want 0 and the sticky error", c, err)
	}

	s, e = newFake(t, 2)
	e.Put(1, 2, 8) // never reached
	t.Setenv("WEFT_TIMEOUT", "5ms")
	if err := e.Close(); !errors.Is(err, hal.ErrTimeout) || s.released {
		t.Errorf("Close with work running = %v (released %v), want ErrTimeout and the stream kept", err, s.released)
	}
}
