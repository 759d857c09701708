package weft_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
)

// closeRank is one goroutine rank of the Close tests: its hal/host
// device, stream and communicators (one per bootstrap group).
type closeRank struct {
	dev   hal.Device
	s     hal.Stream
	comms []*weft.Comm
	bufs  []hal.Buffer
}

// openCloseRanks opens n hal/host devices and, for each of ncomms
// communicators, the communicator on every rank (NewComm is collective, so
// the ranks create each one concurrently). Cleanup closes whatever the
// test left open.
func openCloseRanks(t *testing.T, n, ncomms int, opts weft.Options) []*closeRank {
	t.Helper()
	job := sanitize(fmt.Sprintf("t%d-%s", n, t.Name()))
	ranks := make([]*closeRank, n)
	for r := range ranks {
		dev, err := hal.Open("host", hal.Config{Ordinal: r, Rank: r, JobID: job})
		if err != nil {
			t.Fatalf("rank %d: open device: %v", r, err)
		}
		s, err := dev.NewStream()
		if err != nil {
			dev.Close()
			t.Fatalf("rank %d: stream: %v", r, err)
		}
		ranks[r] = &closeRank{dev: dev, s: s}
	}
	t.Cleanup(func() {
		for _, rk := range ranks {
			for _, c := range rk.comms {
				if c != nil {
					c.Close()
				}
			}
			for _, b := range rk.bufs {
				b.Free()
			}
			rk.s.Close()
			rk.dev.Close()
		}
	})
	for k := 0; k < ncomms; k++ {
		boots := bootstrap.NewLocal(n)
		errs := make([]error, n)
		comms := make([]*weft.Comm, n)
		var wg sync.WaitGroup
		for r := range ranks {
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				comms[r], errs[r] = weft.NewComm(context.Background(), boots[r], ranks[r].dev, opts)
			}(r)
		}
		wg.Wait()
		for r := range ranks {
			ranks[r].comms = append(ranks[r].comms, comms[r])
			if errs[r] != nil {
				t.Fatalf("rank %d: communicator %d: %v", r, k, errs[r])
			}
		}
	}
	return ranks
}

// p2p launches one LL-sized point-to-point operation of rank rk on
// communicator k (a send of n bytes of p2pBytes(…, it) to peer, or a
// receive from it) and synchronises; a receive is checked byte by byte.
func (rk *closeRank) p2p(k, rank, peer int, send bool, n int64, it int) error {
	b, err := rk.dev.Alloc(n)
	if err != nil {
		return err
	}
	rk.bufs = append(rk.bufs, b)
	if send {
		if err := rk.dev.Write(b, 0, p2pBytes(rank, peer, 0, it, n)); err != nil {
			return err
		}
	}
	c := rk.comms[k]
	if err := c.LaunchP2P([]weft.P2P{{Peer: peer, Send: send, Buf: b.Addr(), Bytes: n}}, rk.s); err != nil {
		return err
	}
	if err := c.Synchronize(rk.s); err != nil {
		return err
	}
	if send {
		return nil
	}
	return checkP2PRecvs(rank, rk.dev, []p2pOp{{peer: peer, n: n, buf: b}}, it)
}

// closeComm closes communicator k of rk and forgets it.
func (rk *closeRank) closeComm(k int) error {
	c := rk.comms[k]
	rk.comms[k] = nil
	return c.Close()
}

// TestCloseWaitsForOwedRelease reproduces the race of a Close without a
// wait: rank 0's two LL sends complete on their own (the plan's first two
// launches need no credit), and rank 1 has received the first, so rank 0
// can close while rank 1 has not yet launched the second receive, at whose
// start it releases the first one's half into rank 0's semaphores
// (plan.Op.Deferred). Close must see that release owed by rank 1 and wait
// (the hook reports the wait; a Close that returns first would have freed
// the semaphores under the release), and return once rank 1 received. The
// second receive's own release is never sent, and Close does not wait for
// it (plan.Plan.ReleaseLag).
func TestCloseWaitsForOwedRelease(t *testing.T) {
	n := min(p2pLLMax(t), 256)
	waiting := make(chan []int, 1)
	defer weft.SetCloseWaitHook(func(rank int, peers []int) {
		if rank == 0 {
			select {
			case waiting <- peers:
			default:
			}
		}
	})()
	ranks := openCloseRanks(t, 2, 1, weft.Options{Timeout: 20 * time.Second})
	for it := 0; it < 2; it++ {
		if err := ranks[0].p2p(0, 0, 1, true, n, it); err != nil {
			t.Fatalf("rank 0: send %d: %v", it, err)
		}
	}
	if err := ranks[1].p2p(0, 1, 0, false, n, 0); err != nil {
		t.Fatalf("rank 1: first receive: %v", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- ranks[0].closeComm(0) }()
	deadline := time.After(15 * time.Second)
	select {
	case peers := <-waiting:
		if len(peers) != 1 || peers[0] != 1 {
			t.Fatalf("rank 0's Close waits for releases of ranks %v, want rank 1", peers)
		}
	case err := <-closed:
		t.Fatalf("rank 0's Close returned (%v) before rank 1 received: rank 1's release would land in freed semaphores", err)
	case <-deadline:
		t.Fatal("rank 0's Close neither waited for rank 1's release nor returned")
	}
	if err := ranks[1].p2p(0, 1, 0, false, n, 1); err != nil {
		t.Fatalf("rank 1: second receive: %v", err)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("rank 0: Close after rank 1 released: %v", err)
		}
	case <-deadline:
		t.Fatal("rank 0's Close did not return after rank 1 released")
	}
	if err := ranks[1].closeComm(0); err != nil {
		t.Fatalf("rank 1: Close: %v", err)
	}
}

// TestCloseOrderTwoComms: one thread per rank closes two communicators
// in opposite orders (NCCL lets a thread destroy communicators one after
// another in any order). After LL exchanges both ways on both, rank 0
// sends once more on A and on B and closes A then B at once; rank 1
// receives on B, closes B, and only then receives on A and closes A. Rank
// 0's Close of A is owed rank 1's release of A, which rank 1 sends only
// after closing B: a collective barrier in Close deadlocks here (rank 0 in
// A's, rank 1 in B's), the local wait finishes, well within the
// communicators' timeout (an error otherwise).
func TestCloseOrderTwoComms(t *testing.T) {
	n := min(p2pLLMax(t), 256)
	var polls atomic.Int64 // rank 0's polls that found releases owed (logged: it depends on timing)
	defer weft.SetCloseWaitHook(func(rank int, _ []int) {
		if rank == 0 {
			polls.Add(1)
		}
	})()
	ranks := openCloseRanks(t, 2, 2, weft.Options{Timeout: 10 * time.Second})
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range ranks {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			rk, peer := ranks[r], 1-r
			fail := func(f string, a ...any) { errs[r] = fmt.Errorf(f, a...) }
			for k := 0; k < 2; k++ {
				// Rank 0 sends first, rank 1 receives first.
				for it := 0; it < 3; it++ {
					for _, send := range []bool{r == 0, r != 0} {
						if err := rk.p2p(k, r, peer, send, n, it); err != nil {
							fail("communicator %d, round %d: %w", k, it, err)
							return
						}
					}
				}
			}
			if r == 0 {
				for k := 0; k < 2; k++ {
					if err := rk.p2p(k, r, peer, true, n, 3); err != nil {
						fail("communicator %d, last send: %w", k, err)
						return
					}
				}
				for k := 0; k < 2; k++ {
					if err := rk.closeComm(k); err != nil {
						fail("close communicator %d: %w", k, err)
						return
					}
				}
				return
			}
			for _, k := range []int{1, 0} {
				if err := rk.p2p(k, r, peer, false, n, 3); err != nil {
					fail("communicator %d, last receive: %w", k, err)
					return
				}
				if err := rk.closeComm(k); err != nil {
					fail("close communicator %d: %w", k, err)
					return
				}
			}
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	t.Logf("rank 0's Close polled %d times for owed releases", polls.Load())
}

// TestCloseDeadPeer: rank 1 never runs the receives of rank 0's two LL
// sends (as if it died first), so the release of the first, which its
// second receive would send, never comes. Rank 0's Close gives up at the
// communicator's timeout with an error wrapping hal.ErrRemote that names
// rank 1, and frees its memory anyway.
func TestCloseDeadPeer(t *testing.T) {
	n := min(p2pLLMax(t), 256)
	ranks := openCloseRanks(t, 2, 1, weft.Options{Timeout: time.Second})
	for it := 0; it < 2; it++ {
		if err := ranks[0].p2p(0, 0, 1, true, n, it); err != nil {
			t.Fatalf("rank 0: send %d: %v", it, err)
		}
	}
	c := ranks[0].comms[0]
	err := ranks[0].closeComm(0)
	if err == nil || !errors.Is(err, hal.ErrRemote) || !strings.Contains(err.Error(), "rank 1 did not release") {
		t.Fatalf("rank 0: Close: got %v, want an error wrapping hal.ErrRemote naming rank 1", err)
	}
	if m := c.MemoryBytes(); m != 0 {
		t.Errorf("rank 0: %d bytes still held after Close gave up", m)
	}
	// Rank 1 owes nothing: its Close returns at once, without an error.
	if err := ranks[1].closeComm(0); err != nil {
		t.Errorf("rank 1: Close: %v", err)
	}
}

// TestCloseAfterAbort: after Abort (ncclCommAbort), Close does not wait
// for releases (the aborted launches' expected values need not match
// anything a peer will send): with rank 1's release owed and a timeout
// far beyond the test's, Close returns without an error, having freed
// everything.
func TestCloseAfterAbort(t *testing.T) {
	n := min(p2pLLMax(t), 256)
	ranks := openCloseRanks(t, 2, 1, weft.Options{Timeout: 10 * time.Minute})
	if err := ranks[0].p2p(0, 0, 1, true, n, 0); err != nil {
		t.Fatalf("rank 0: send: %v", err)
	}
	c := ranks[0].comms[0]
	c.Abort()
	if err := ranks[0].closeComm(0); err != nil {
		t.Fatalf("rank 0: Close after Abort: %v", err)
	}
	if m := c.MemoryBytes(); m != 0 {
		t.Errorf("rank 0: %d bytes still held after Close", m)
	}
}
