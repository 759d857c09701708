package devcore

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// signalStream records the stores of every Signal.
type signalStream struct {
	fakeStream
	stores [][4]uint64 // countAddr, count, semAddr, value
}

func (s *signalStream) Signal(countAddr, count, semAddr, value uint64) error {
	s.stores = append(s.stores, [4]uint64{countAddr, count, semAddr, value})
	return s.fakeStream.Signal(countAddr, count, semAddr, value)
}

// TestSignalSkipsUnchangedCount: a count word gets its count again only
// when the count changes (per word); the semaphore is stored every time.
func TestSignalSkipsUnchangedCount(t *testing.T) {
	s := &signalStream{fakeStream: fakeStream{events: map[int]int{}}}
	e, err := NewCopyEngine("engine of GPU 0 to GPU 1", s, s.fakeEvents(), 4, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	const semA, cntA, semB, cntB = 0x1000, 0x2000, 0x1008, 0x2008
	for _, c := range []struct{ sem, cnt, n uint64 }{
		{semA, cntA, 7}, {semA, cntA, 7}, {semB, cntB, 7}, {semA, cntA, 9}, {semA, cntA, 9}, {semA, 0, 9},
	} {
		if err := e.Signal(c.sem, c.cnt, c.n); err != nil {
			t.Fatal(err)
		}
	}
	want := [][4]uint64{
		{cntA, 7, semA, 1}, {0, 7, semA, 2}, {cntB, 7, semB, 1}, {cntA, 9, semA, 3}, {0, 9, semA, 4}, {0, 9, semA, 5},
	}
	if d := cmp.Diff(want, s.stores); d != "" {
		t.Errorf("stores (-want +got):\n%s", d)
	}
}
