package socket

import (
	"bytes"
	"sync/atomic"
	"testing"
)

// TestInlineAndRingInterleaved mixes requests that the issuing goroutine
// runs itself (small puts, signals and copies on an idle engine) with
// requests that take the ring (puts above inlineMax, and whatever finds
// the engine busy): each round copies a block inside rank 0's source,
// puts that copy, a small and a large region, and signals; rank 1 checks
// every byte once the semaphore moves. Both paths must have run.
func TestInlineAndRingInterleaved(t *testing.T) {
	const (
		small  = 3000
		large  = inlineMax + 12345
		copied = 5000
		rounds = 40
		// source layout: [0, small) small, [small, small+large) large,
		// copy from [64K+large, +copied) to [128K+large, +copied)
		copyFrom = 64<<10 + large
		copyTo   = 128<<10 + large
		srcBytes = copyTo + copied
		// window layout after semArea: small, large, copied
		winBytes = semArea + small + large + copied
	)
	rs := openRanks(t, 2, winBytes, srcBytes, Options{Conns: 2, Chunk: 32 << 10})
	s, d := rs[0], rs[1]
	e := s.eng[1].(*Engine)
	src, win := s.src.Host(), d.win.Host()[semArea:]
	base := s.remote[1].Addr() + semArea
	for i := 1; i <= rounds; i++ {
		fill(src, uint64(i))
		fill(src[copyTo:], uint64(i)+7777) // what a put that overtook the copy would send
		// Rounds alternate which request comes first, so that the large
		// put sometimes leaves the engine busy for the small one.
		reqs := []func() error{
			func() error { return e.Copy(s.src.Addr()+copyTo, s.src.Addr()+copyFrom, copied) },
			func() error { return e.Put(base+small+large, s.src.Addr()+copyTo, copied) },
			func() error { return e.Put(base, s.src.Addr(), small) },
			func() error { return e.Put(base+small, s.src.Addr()+small, large) },
		}
		if i%2 == 0 {
			reqs[2], reqs[3] = reqs[3], reqs[2]
		}
		for _, r := range reqs {
			if err := r(); err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
		if err := e.Signal(s.remote[1].Addr()+semOff, s.remote[1].Addr()+cntOff, uint64(i)); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		waitWord(t, d.win, semOff, uint64(i), e.Err)
		if got := atomic.LoadUint64(word(d.win, cntOff)); got != uint64(i) {
			t.Fatalf("round %d: count word %d", i, got)
		}
		for _, c := range []struct {
			name     string
			got, src []byte
		}{
			{"small put", win[:small], src[:small]},
			{"large put", win[small : small+large], src[small : small+large]},
			{"put of the copy", win[small+large : small+large+copied], src[copyFrom : copyFrom+copied]},
		} {
			if !bytes.Equal(c.got, c.src) {
				t.Fatalf("round %d: %s: the window differs from the source", i, c.name)
			}
		}
	}
	total := uint64(rounds * 5)
	if n := e.inlined.Load(); n == 0 || n >= total {
		t.Errorf("%d of %d requests ran inline, want some but not all", n, total)
	} else {
		t.Logf("%d of %d requests ran inline", n, total)
	}
}
