package socket

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestPairedConnections opens engines all to all among 4 ranks, one
// after another and all at once, and checks that with pairing every two
// ranks share one connection (whichever engine dialled, or both at once:
// the redirect), without it each engine has its own; then every rank
// puts a block to every other with a signal, both ways on every link.
func TestPairedConnections(t *testing.T) {
	for _, how := range []engineOpening{enginesInTurn, enginesAtOnce} {
		for _, noPair := range []bool{false, true} {
			name := fmt.Sprintf("at-once=%v/pair=%v", how == enginesAtOnce, !noPair)
			t.Run(name, func(t *testing.T) {
				const nr = 4
				const blk = 256<<10 + 3
				rs := openRanksHow(t, nr, semArea+nr*blk, blk, Options{Chunk: 64 << 10, NoPair: noPair}, nil, how)
				paired := 0
				for _, x := range rs {
					paired += int(x.nd.paired.Load())
					wantLinks := nr - 1
					if noPair {
						wantLinks = 2 * (nr - 1)
					}
					// A listener offers a link just after its accept,
					// which the dialler may see first.
					links := x.nd.linkCount()
					for end := time.Now().Add(failBound); links != wantLinks && time.Now().Before(end); links = x.nd.linkCount() {
						time.Sleep(time.Millisecond)
					}
					if links != wantLinks {
						t.Errorf("rank %d: %d connections, want %d", x.r, links, wantLinks)
					}
					for p, e := range x.eng {
						if e == nil {
							continue
						}
						l := e.(*Engine).conns[0].l
						x.nd.mu.Lock()
						both := l.send != nil && l.recv != nil
						x.nd.mu.Unlock()
						if both == noPair {
							t.Errorf("rank %d: the connection of its engine to rank %d carries both directions: %v", x.r, p, both)
						}
					}
				}
				if want := nr * (nr - 1) / 2; !noPair && paired != want {
					t.Errorf("%d attaches answered, want %d", paired, want)
				} else if noPair && paired != 0 {
					t.Errorf("%d attaches answered without pairing", paired)
				}
				putAllPairs(t, rs, blk)
			})
		}
	}
}

// TestOneSidedRing opens engines in a ring only (rank r to r+1): no
// engine of the peer ever attaches, and every link carries one direction.
func TestOneSidedRing(t *testing.T) {
	const nr = 3
	rs := openRanksNoEngines(t, nr, semArea+4096, 4096, Options{Timeout: 5 * time.Second})
	for _, x := range rs {
		p := (x.r + 1) % nr
		e, err := x.nd.NewEngine(endpointOf(rs[p]))
		if err != nil {
			t.Fatal(err)
		}
		x.eng[p] = e
	}
	for _, x := range rs {
		p := (x.r + 1) % nr
		fill(x.src.Host(), uint64(x.r))
		if err := x.eng[p].Put(x.remote[p].Addr()+semArea, x.src.Addr(), 4096); err != nil {
			t.Fatal(err)
		}
		if err := x.eng[p].Signal(x.remote[p].Addr()+semOff, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, x := range rs {
		prev := rs[(x.r+nr-1)%nr]
		waitWord(t, x.win, semOff, 1, prev.eng[x.r].(*Engine).Err)
		if !bytes.Equal(x.win.Host()[semArea:semArea+4096], prev.src.Host()) {
			t.Errorf("rank %d: block from rank %d differs", x.r, prev.r)
		}
		if n := x.nd.paired.Load(); n != 0 {
			t.Errorf("rank %d answered %d attaches in a one-sided ring", x.r, n)
		}
	}
}

// TestRedirectFallback: the lower rank redirects the higher rank's engine
// to a dial of its own that never completes (an intent put there by the
// test); the higher rank waits for that connection until the timeout,
// then dials one of its own, not offered, and its engine works.
func TestRedirectFallback(t *testing.T) {
	rs := openRanksNoEngines(t, 2, semArea+4096, 4096, Options{Timeout: 300 * time.Millisecond})
	lo, hi := rs[0], rs[1]
	lo.nd.mu.Lock()
	lo.nd.intents[12345] = &intent{peer: 1}
	lo.nd.mu.Unlock()
	e, err := hi.nd.NewEngine(endpointOf(lo))
	if err != nil {
		t.Fatal(err)
	}
	hi.eng[0] = e
	lo.nd.mu.Lock()
	reserved := lo.nd.intents[12345].reserved
	delete(lo.nd.intents, 12345)
	lo.nd.mu.Unlock()
	if !reserved {
		t.Error("the lower rank did not redirect the higher rank's engine to its dial under way")
	}
	if l := e.(*Engine).conns[0].l; l.pairable {
		t.Error("the fallback connection is offered for pairing")
	}
	if err := e.Put(hi.remote[0].Addr()+semArea, hi.src.Addr(), 64); err != nil {
		t.Fatal(err)
	}
	if err := e.Signal(hi.remote[0].Addr()+semOff, 0, 0); err != nil {
		t.Fatal(err)
	}
	waitWord(t, lo.win, semOff, 1, e.(*Engine).Err)
}

// putAllPairs has every rank put blk bytes of its source into every other
// rank's window at its own block, with a signal, all ranks at once, and
// checks every block.
func putAllPairs(t *testing.T, rs []*rank, blk int) {
	t.Helper()
	nr := len(rs)
	for _, x := range rs {
		fill(x.src.Host(), uint64(100+x.r))
	}
	var wg sync.WaitGroup
	errs := make(chan error, nr*nr)
	for _, x := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range nr {
				if p == x.r {
					continue
				}
				base := x.remote[p].Addr()
				if err := x.eng[p].Put(base+semArea+uint64(x.r*blk), x.src.Addr(), int64(blk)); err != nil {
					errs <- err
					return
				}
				if err := x.eng[p].Signal(base+semOff+uint64(8*x.r), 0, 0); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, x := range rs {
		for p := range nr {
			if p == x.r {
				continue
			}
			waitWord(t, x.win, semOff+int64(8*p), 1, rs[p].eng[x.r].(*Engine).Err)
			if !bytes.Equal(x.win.Host()[semArea+p*blk:semArea+(p+1)*blk], rs[p].src.Host()[:blk]) {
				t.Errorf("rank %d: block from rank %d differs", x.r, p)
			}
		}
	}
}
