package socket

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftccl/weft/hal"
)

// Window layout of these tests: semaphores and count words in the first
// 4 KiB, data after.
const (
	semArea = 4096
	semOff  = 0   // semaphore signalled by rank 0 (… + 8·src for others)
	cntOff  = 512 // count word, likewise
)

// TestPutSizes puts many sizes at unaligned offsets from rank 0 to rank 1
// over two connections, each followed by a signal, and checks that every
// byte landed and nothing around it changed, with the receiver reading
// payloads straight into the window and through staging.
func TestPutSizes(t *testing.T) {
	for _, m := range applyModes {
		t.Run(m.name, func(t *testing.T) { testPutSizes(t, m.staged) })
	}
}

func testPutSizes(t *testing.T, staged bool) {
	const maxSize = 64 << 20
	rs := openRanks(t, 2, semArea+maxSize+64, maxSize+64, Options{Conns: 2, stagedOnly: staged})
	s, d := rs[0], rs[1]
	defer checkApplyMode(t, d.nd, staged)
	cases := []struct {
		n              int64
		srcOff, dstOff int64
	}{
		{1, 0, 0}, {1, 3, 5}, {7, 1, 13}, {4095, 0, 1}, {4096, 8, 8}, {65537, 5, 3},
		{512<<10 - 1, 1, 0}, {512 << 10, 0, 0}, {512<<10 + 3, 7, 11}, {3<<20 + 5, 13, 1},
		{maxSize, 0, 0}, {maxSize - 3, 3, 17},
	}
	winData := d.win.Host()[semArea:]
	for i, c := range cases {
		t.Run(fmt.Sprintf("%dB_src+%d_dst+%d", c.n, c.srcOff, c.dstOff), func(t *testing.T) {
			fill(s.src.Host(), uint64(i))
			fill(winData, 1000+uint64(i)) // sentinel around the destination
			before, after := winData[c.dstOff-min(c.dstOff, 1)], winData[c.dstOff+c.n]
			dst := s.remote[1].Addr() + uint64(semArea+c.dstOff)
			if err := s.eng[1].Put(dst, s.src.Addr()+uint64(c.srcOff), c.n); err != nil {
				t.Fatal(err)
			}
			if err := s.eng[1].Signal(s.remote[1].Addr()+semOff, s.remote[1].Addr()+cntOff, uint64(c.n)); err != nil {
				t.Fatal(err)
			}
			waitWord(t, d.win, semOff, uint64(i+1), s.eng[1].(*Engine).Err)
			if got := atomic.LoadUint64(word(d.win, cntOff)); got != uint64(c.n) {
				t.Errorf("count word = %d, want %d", got, c.n)
			}
			want := s.src.Host()[c.srcOff : c.srcOff+c.n]
			got := winData[c.dstOff : c.dstOff+c.n]
			if !bytes.Equal(got, want) {
				for j := range got {
					if got[j] != want[j] {
						t.Fatalf("byte %d of %d: got %#x, want %#x", j, c.n, got[j], want[j])
					}
				}
			}
			if c.dstOff > 0 && winData[c.dstOff-1] != before {
				t.Errorf("byte before the destination changed")
			}
			if winData[c.dstOff+c.n] != after {
				t.Errorf("byte after the destination changed")
			}
		})
	}
}

// TestSignalWaitsForDelayedConnection delays every frame of connection 0
// while connection 1 runs freely. Each round puts 15 chunks (frames 0–14,
// 8 of them on the slow connection) and a signal that travels on the fast
// one, so the signal reaches the receiver before the data it covers. The
// receiver must hold it back: when the semaphore is seen, every byte must
// be there. The test checks that the overtaking did happen.
func TestSignalWaitsForDelayedConnection(t *testing.T) {
	for _, m := range applyModes {
		t.Run(m.name, func(t *testing.T) { testSignalWaitsForDelayedConnection(t, m.staged) })
	}
}

func testSignalWaitsForDelayedConnection(t *testing.T, staged bool) {
	const chunk = 4096
	const n = 15 * chunk
	opts := Options{Conns: 2, Chunk: chunk, stagedOnly: staged, hooks: &testHooks{beforeSend: func(conn int, seq uint64) {
		if conn == 0 {
			time.Sleep(3 * time.Millisecond)
		}
	}}}
	rs := openRanks(t, 2, semArea+n, n, opts)
	s, d := rs[0], rs[1]
	var waited, signals uint64
	for round := 1; round <= 6; round++ {
		putSignalRound(t, s, d, n, round, "the semaphore was set before the data landed")
		waited, signals = d.nd.waited()
	}
	if signals == 0 {
		t.Fatalf("no signal arrived ahead of the data it covers (%d frames did): the delayed connection did not delay it, so the test proved nothing", waited)
	}
	t.Logf("%d frames, %d of them signals, arrived before an earlier frame and were held back", waited, signals)
}

// TestSignalAfterStagedCopy: a signal stored by the CPU into a
// host-visible window must follow the device engine's copy of an earlier
// put that took the staged path. Each round puts two 32 MiB chunks:
// chunk 0 on connection 0, held back, so chunk 1 (connection 1) arrives
// first and is staged; chunk 0 is then read straight into the window and
// chunk 1 copied out of staging by the engine while the signal (held back
// on connection 0 too) arrives. When the semaphore is seen, every byte of
// both chunks must be there.
func TestSignalAfterStagedCopy(t *testing.T) {
	const chunk = 32 << 20
	const n = 2 * chunk
	opts := Options{Conns: 2, Chunk: chunk, hooks: &testHooks{beforeSend: func(conn int, seq uint64) {
		if conn == 0 {
			time.Sleep(3 * time.Millisecond)
		}
	}}}
	rs := openRanks(t, 2, semArea+n, n, opts)
	s, d := rs[0], rs[1]
	for round := 1; round <= 3; round++ {
		putSignalRound(t, s, d, n, round, "the semaphore was set before the staged chunk was copied into the window")
	}
	if d.nd.directPuts() == 0 {
		t.Error("no chunk was read straight into the window: the test mixed no paths")
	}
}

// TestManyInFlight issues 4096 puts, each with its signal, without
// waiting (8192 requests, twice the request ring), over four connections,
// then flushes with Mark/Completed.
func TestManyInFlight(t *testing.T) {
	for _, m := range applyModes {
		t.Run(m.name, func(t *testing.T) { testManyInFlight(t, m.staged) })
	}
}

func testManyInFlight(t *testing.T, staged bool) {
	const n = 4096
	rs := openRanks(t, 2, semArea+8*n, 8*n, Options{Conns: 4, Chunk: MinChunk, stagedOnly: staged})
	s, d := rs[0], rs[1]
	defer checkApplyMode(t, d.nd, staged)
	for i := range n {
		binary.LittleEndian.PutUint64(s.src.Host()[8*i:], uint64(i)*3+1)
	}
	e := s.eng[1]
	for i := range n {
		if err := e.Put(s.remote[1].Addr()+semArea+uint64(8*i), s.src.Addr()+uint64(8*i), 8); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		if err := e.Signal(s.remote[1].Addr()+semOff, s.remote[1].Addr()+cntOff, uint64(i)); err != nil {
			t.Fatalf("signal %d: %v", i, err)
		}
	}
	tk, err := e.Mark()
	if err != nil {
		t.Fatal(err)
	}
	waitCompleted(t, e, tk)
	waitWord(t, d.win, semOff, n, e.(*Engine).Err)
	if got := atomic.LoadUint64(word(d.win, cntOff)); got != n-1 {
		t.Errorf("count word = %d, want %d (the last signal's)", got, n-1)
	}
	for i := range n {
		if got := binary.LittleEndian.Uint64(d.win.Host()[semArea+8*i:]); got != uint64(i)*3+1 {
			t.Fatalf("slot %d = %d, want %d", i, got, uint64(i)*3+1)
		}
	}
}

// TestMarkCompleted checks tickets: they count from 1, Completed never
// passes the last Mark, a completed ticket means the source may be
// overwritten (the receiver still gets the old bytes), and a Copy is done
// before a later signal is delivered.
func TestMarkCompleted(t *testing.T) {
	const n = 8 << 20
	rs := openRanks(t, 2, semArea+n, 2*n, Options{Conns: 2, Chunk: 256 << 10})
	s, d := rs[0], rs[1]
	e := s.eng[1]
	t1, err := e.Mark()
	if err != nil || t1 != 1 {
		t.Fatalf("first ticket = %d, %v; want 1", t1, err)
	}
	if c, err := e.Completed(); err != nil || c != 1 {
		t.Fatalf("completed with nothing issued = %d, %v; want 1", c, err)
	}
	fill(s.src.Host()[:n], 7)
	want := append([]byte(nil), s.src.Host()[:n]...)
	if err := e.Put(s.remote[1].Addr()+semArea, s.src.Addr(), n); err != nil {
		t.Fatal(err)
	}
	t2, _ := e.Mark()
	t3, _ := e.Mark()
	if t2 != 2 || t3 != 3 {
		t.Fatalf("tickets %d, %d; want 2, 3", t2, t3)
	}
	if c, _ := e.Completed(); c > t3 {
		t.Fatalf("completed %d beyond the last ticket %d", c, t3)
	}
	waitCompleted(t, e, t3)
	// The source is reusable: overwrite it, by a Copy on the engine itself
	// (from the second half), before signalling.
	fill(s.src.Host()[n:], 8)
	if err := e.Copy(s.src.Addr(), s.src.Addr()+n, n); err != nil {
		t.Fatal(err)
	}
	if err := e.Signal(s.remote[1].Addr()+semOff, 0, 0); err != nil {
		t.Fatal(err)
	}
	waitWord(t, d.win, semOff, 1, e.(*Engine).Err)
	if !bytes.Equal(d.win.Host()[semArea:semArea+n], want) {
		t.Fatalf("the receiver did not get the bytes staged before the source was overwritten")
	}
	// The signal followed the copy: by the time it was seen, the copy was done.
	if !bytes.Equal(s.src.Host()[:n], s.src.Host()[n:]) {
		t.Fatalf("the signal was delivered before the engine's earlier copy finished")
	}
	t4, _ := e.Mark()
	waitCompleted(t, e, t4)
}

// TestAllPairs runs four ranks, each putting a block into every peer's
// window and signalling it, all at once.
func TestAllPairs(t *testing.T) {
	const nr = 4
	const blk = 1<<20 + 5
	rs := openRanks(t, nr, semArea+nr*blk, blk, Options{Conns: 2, Chunk: 64 << 10})
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
				if err := x.eng[p].Put(base+semArea+uint64(x.r*blk), x.src.Addr(), blk); err != nil {
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
			if !bytes.Equal(x.win.Host()[semArea+p*blk:semArea+(p+1)*blk], rs[p].src.Host()) {
				t.Errorf("rank %d: block from rank %d differs", x.r, p)
			}
		}
	}
}

// TestLocalEngine checks the engine to the own endpoint: copies and
// signals on local memory, with device addresses and with addresses of the
// rank's own registration.
func TestLocalEngine(t *testing.T) {
	rs := openRanks(t, 1, semArea+4096, 4096, Options{})
	x := rs[0]
	e, err := x.nd.NewEngine(x.dev.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, ok := e.(*localEngine); !ok {
		t.Fatalf("engine to the own endpoint is %T, want a local engine", e)
	}
	h, err := x.nd.ExportPort(x.win)
	if err != nil {
		t.Fatal(err)
	}
	self, err := x.nd.ImportPort(h)
	if err != nil {
		t.Fatal(err)
	}
	defer self.Free()
	fill(x.src.Host(), 3)
	if err := e.Copy(x.win.Addr()+semArea, x.src.Addr(), 1000); err != nil {
		t.Fatal(err)
	}
	if err := e.Put(self.Addr()+semArea+1000, x.src.Addr()+1000, 3000); err != nil {
		t.Fatal(err)
	}
	if err := e.Signal(self.Addr()+semOff, x.win.Addr()+cntOff, 42); err != nil {
		t.Fatal(err)
	}
	waitWord(t, x.win, semOff, 1, nil)
	if got := atomic.LoadUint64(word(x.win, cntOff)); got != 42 {
		t.Errorf("count = %d, want 42", got)
	}
	if !bytes.Equal(x.win.Host()[semArea:semArea+4000], x.src.Host()[:4000]) {
		t.Errorf("local copies did not land")
	}
	// The own Address also gives the local engine.
	e2, err := x.nd.NewEngine(endpointOf(x))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e2.(*localEngine); !ok {
		t.Errorf("engine to the own address is %T, want a local engine", e2)
	}
	e2.Close()
	if err := e.Put(self.Addr()+4096+semArea, x.src.Addr(), 8); err == nil {
		t.Errorf("put beyond the own registration: no error")
	}
}

// TestCloseWhileIdle closes one side's NetDevice while the peer's engine
// is idle: the peer's engine then refuses new requests naming the rank,
// and its Close reports nothing.
func TestCloseWhileIdle(t *testing.T) {
	rs := openRanks(t, 2, semArea+4096, 4096, Options{})
	s, d := rs[0], rs[1]
	if err := s.eng[1].Put(s.remote[1].Addr()+semArea, s.src.Addr(), 100); err != nil {
		t.Fatal(err)
	}
	if err := s.eng[1].Signal(s.remote[1].Addr()+semOff, 0, 0); err != nil {
		t.Fatal(err)
	}
	waitWord(t, d.win, semOff, 1, nil)
	for _, e := range d.eng {
		if e != nil {
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	d.eng = nil
	if err := d.nd.Close(); err != nil {
		t.Fatal(err)
	}
	d.nd = nil
	d.win.Free()
	d.src.Free()
	d.dev.Close()
	rs[1] = nil
	deadline := time.Now().Add(failBound)
	var err error
	for err == nil && time.Now().Before(deadline) {
		err = s.eng[1].Put(s.remote[1].Addr()+semArea, s.src.Addr(), 100)
		time.Sleep(time.Millisecond)
	}
	errorMentions(t, err, hal.ErrRemote, "rank 1")
	if err := s.eng[1].Close(); err == nil {
		t.Log("close after the peer closed: no error (the failure was reported)")
	}
	s.eng[1] = nil
}

// putSignalRound puts n bytes of source s, filled for this round, at the
// start of d's data area and signals; once d sees the semaphore reach
// round, every byte must be there (else it fails with what).
func putSignalRound(t *testing.T, s, d *rank, n int64, round int, what string) {
	t.Helper()
	fill(s.src.Host(), uint64(round))
	if err := s.eng[1].Put(s.remote[1].Addr()+semArea, s.src.Addr(), n); err != nil {
		t.Fatal(err)
	}
	if err := s.eng[1].Signal(s.remote[1].Addr()+semOff, 0, 0); err != nil {
		t.Fatal(err)
	}
	waitWord(t, d.win, semOff, uint64(round), s.eng[1].(*Engine).Err)
	if got := d.win.Host()[semArea : semArea+n]; !bytes.Equal(got, s.src.Host()[:n]) {
		t.Fatalf("round %d: %s", round, what)
	}
}
