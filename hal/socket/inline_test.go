package socket

import (
	"bytes"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
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

// TestPutFromHostSource: an inline put whose source lies in a registration
// of the sending NetDevice with a host view (a plan's scratch in host
// windows) is written straight from it, after an earlier copy into that
// source has finished; a source that is not registered, or no longer is,
// is staged through the device's engine as before. Every byte arrives.
func TestPutFromHostSource(t *testing.T) {
	const (
		n        = 4000
		srcBytes = 3 * n
		winBytes = semArea + n
	)
	rs := openRanks(t, 2, winBytes, srcBytes, Options{Conns: 2, Chunk: 32 << 10})
	s, d := rs[0], rs[1]
	e := s.eng[1].(*Engine)
	src, win := s.src.Host(), d.win.Host()[semArea:semArea+n]
	base := s.remote[1].Addr() + semArea
	round := func(i int, registered bool) {
		t.Helper()
		fill(src, uint64(i))
		// The put reads [n, 2n) after the engine's copy has filled it
		// from [2n, 3n): what it sends must be the copy's result.
		before := e.fromHost.Load()
		if err := e.Copy(s.src.Addr()+n, s.src.Addr()+2*n, n); err != nil {
			t.Fatal(err)
		}
		if err := e.Put(base, s.src.Addr()+n, n); err != nil {
			t.Fatal(err)
		}
		if err := e.Signal(s.remote[1].Addr()+semOff, 0, 0); err != nil {
			t.Fatal(err)
		}
		waitWord(t, d.win, semOff, uint64(i), e.Err)
		if !bytes.Equal(win, src[2*n:]) {
			t.Fatalf("round %d (registered source %v): the window differs from what the copy put in the source", i, registered)
		}
		if got := e.fromHost.Load() - before; registered != (got == 1) {
			t.Errorf("round %d: %d puts written from the host source; want 1 if and only if it is registered (%v)", i, got, registered)
		}
	}
	round(1, false)
	if _, err := s.nd.ExportPort(s.src); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 6; i++ {
		round(i, true)
	}
	if err := s.nd.UnexportPort(s.src); err != nil {
		t.Fatal(err)
	}
	round(7, false)
}

// TestPutWithSignalBatch: in a proxy pass (BeginBatch … EndBatch) a put
// from a host-visible source and the signal after it leave as one frame
// (framePutSignal), applied put first, into a host-visible window and
// through the receiver's staged path alike; a held put that anything but
// a signal follows, or that ends the pass, leaves alone and first.
func TestPutWithSignalBatch(t *testing.T) {
	const n = 3000
	for _, staged := range []bool{false, true} {
		t.Run(fmt.Sprintf("receiverStaged=%v", staged), func(t *testing.T) {
			rs := openRanks(t, 2, semArea+2*n, 2*n, Options{Conns: 2, Chunk: 32 << 10, stagedOnly: staged})
			s, d := rs[0], rs[1]
			e := s.eng[1].(*Engine)
			if _, err := s.nd.ExportPort(s.src); err != nil {
				t.Fatal(err)
			}
			src, win := s.src.Host(), d.win.Host()[semArea:semArea+2*n]
			base, sem, cnt := s.remote[1].Addr()+semArea, s.remote[1].Addr()+semOff, s.remote[1].Addr()+cntOff
			for i := 1; i <= 6; i++ {
				fill(src, uint64(i))
				merged := e.merged.Load()
				e.BeginBatch()
				must := func(err error) {
					t.Helper()
					if err != nil {
						t.Fatalf("round %d: %v", i, err)
					}
				}
				switch i % 3 {
				case 0: // put, signal: one frame
					must(e.Put(base, s.src.Addr(), n))
					if !e.Holding() {
						t.Errorf("round %d: a put from a host source in a batch is not held", i)
					}
					must(e.Signal(sem, cnt, uint64(i)))
					if e.Holding() {
						t.Errorf("round %d: still holding after the signal", i)
					}
				case 1: // put, copy within the source, put of the copy, signal
					must(e.Put(base, s.src.Addr(), n))
					must(e.Copy(s.src.Addr()+n, s.src.Addr(), n))
					must(e.Put(base+n, s.src.Addr()+n, n))
					must(e.Signal(sem, cnt, uint64(i)))
				case 2: // put, end of the pass, then the signal in the next
					must(e.Put(base, s.src.Addr(), n))
					must(e.EndBatch())
					e.BeginBatch()
					must(e.Signal(sem, cnt, uint64(i)))
				}
				must(e.EndBatch())
				waitWord(t, d.win, semOff, uint64(i), e.Err)
				if got := atomic.LoadUint64(word(d.win, cntOff)); got != uint64(i) {
					t.Fatalf("round %d: count word %d", i, got)
				}
				if !bytes.Equal(win[:n], src[:n]) {
					t.Fatalf("round %d: the window differs from the source", i)
				}
				if i%3 == 1 && !bytes.Equal(win[n:], src[:n]) {
					t.Fatalf("round %d: the put of the copy differs from the copy's source", i)
				}
				want := uint64(0)
				if i%3 != 2 {
					want = 1
				}
				if got := e.merged.Load() - merged; got != want {
					t.Errorf("round %d: %d put-with-signal frames, want %d", i, got, want)
				}
			}
		})
	}
}

// TestLargePutFromHostSource: a put of several chunks from a registered
// host-visible source goes through the ring with its frames written from
// the source itself (no staging copy), after an earlier copy into that
// source; it completes at the source (Mark, Completed) only once every
// frame is written, and the source can be unexported afterwards.
func TestLargePutFromHostSource(t *testing.T) {
	const (
		chunk = 32 << 10
		n     = 5*chunk + 1234
	)
	rs := openRanks(t, 2, semArea+n, 2*n, Options{Conns: 2, Chunk: chunk})
	s, d := rs[0], rs[1]
	e := s.eng[1].(*Engine)
	if _, err := s.nd.ExportPort(s.src); err != nil {
		t.Fatal(err)
	}
	src, win := s.src.Host(), d.win.Host()[semArea:semArea+n]
	for i := 1; i <= 4; i++ {
		fill(src, uint64(i))
		before := e.fromHost.Load()
		// The put sends [0, n) after the copy has filled it from [n, 2n).
		if err := e.Copy(s.src.Addr(), s.src.Addr()+n, n); err != nil {
			t.Fatal(err)
		}
		if err := e.Put(s.remote[1].Addr()+semArea, s.src.Addr(), n); err != nil {
			t.Fatal(err)
		}
		if err := e.Signal(s.remote[1].Addr()+semOff, 0, 0); err != nil {
			t.Fatal(err)
		}
		tk, err := e.Mark()
		if err != nil {
			t.Fatal(err)
		}
		waitCompleted(t, e, tk)
		waitWord(t, d.win, semOff, uint64(i), e.Err)
		if !bytes.Equal(win, src[n:]) {
			t.Fatalf("round %d: the window differs from what the copy put in the source", i)
		}
		if got := e.fromHost.Load() - before; got != 1 {
			t.Errorf("round %d: %d puts sent from the host source, want 1", i, got)
		}
	}
	if err := s.nd.UnexportPort(s.src); err != nil {
		t.Fatal(err)
	}
}

// TestSpinningReceiver runs puts and signals, small and chunked, to a
// receiver that polls its sockets between frames (Options.Spin) before it
// parks: every byte and every signal arrives, including after pauses
// longer than the spin, when the receiver has parked.
func TestSpinningReceiver(t *testing.T) {
	const n = 100 << 10
	rs := openRanks(t, 2, semArea+n, n, Options{Conns: 2, Chunk: 32 << 10, Spin: 200 * time.Microsecond, spinSet: true})
	s, d := rs[0], rs[1]
	e := s.eng[1]
	if rc := d.nd.anyReceiver(); rc == nil || (runtime.GOOS == "linux" && !spinning(rc.conn)) {
		t.Fatal("no receiver, or the receiver of a plain TCP connection does not poll its socket")
	}
	src, win := s.src.Host(), d.win.Host()[semArea:semArea+n]
	for i := 1; i <= 8; i++ {
		fill(src, uint64(i))
		size := int64(64 + (i%2)*(n-64)) // 64 B and 100 KiB by turns
		if err := e.Put(s.remote[1].Addr()+semArea, s.src.Addr(), size); err != nil {
			t.Fatal(err)
		}
		if err := e.Signal(s.remote[1].Addr()+semOff, 0, 0); err != nil {
			t.Fatal(err)
		}
		waitWord(t, d.win, semOff, uint64(i), e.(*Engine).Err)
		if !bytes.Equal(win[:size], src[:size]) {
			t.Fatalf("round %d: %d bytes differ", i, size)
		}
		if i%3 == 0 {
			time.Sleep(time.Millisecond) // past the spin: the receiver parks
		}
	}
}
