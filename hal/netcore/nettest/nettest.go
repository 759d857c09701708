// Package nettest holds the fixtures the network backends' test suites
// share (hal/socket, hal/netplugin, hal/ucx): unique job ids, waits on a
// word of host-visible memory or on an engine's tickets (each bounded by
// FailBound, a failure bound and not a timing assertion), data patterns,
// an error check, the window exchange and all-to-all engines of an
// in-process test job, and a ping-pong benchmark. Only tests import it.
package nettest

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
)

// FailBound bounds every wait of a test: a failure bound, not a timing
// assertion.
const FailBound = 30 * time.Second

var jobSeq atomic.Int64

// JobID returns a job id unique to this test process: prefix, the pid and
// a sequence number.
func JobID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), jobSeq.Add(1))
}

// Word returns the 64-bit word at byte off of a host-visible buffer (off
// 8-byte aligned within b); read it with sync/atomic.
func Word(b hal.Buffer, off int64) *uint64 {
	return (*uint64)(unsafe.Pointer(&b.Host()[off]))
}

// WaitWord waits until the word at byte off of b reaches want, failing
// after FailBound, or at once if errf (may be nil) reports an error.
func WaitWord(t testing.TB, b hal.Buffer, off int64, want uint64, errf func() error) {
	t.Helper()
	deadline := time.Now().Add(FailBound)
	for round := 0; ; round++ {
		v := atomic.LoadUint64(Word(b, off))
		if v >= want {
			return
		}
		if errf != nil {
			if err := errf(); err != nil {
				t.Fatalf("waiting for word %d to reach %d (at %d): %v", off, want, v, err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("word at %d is %d after %v, want %d", off, v, FailBound, want)
		}
		if round > 100 {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// WaitCompleted waits until e's Completed reaches ticket, failing on an
// engine error or after FailBound.
func WaitCompleted(t testing.TB, e hal.Engine, ticket uint64) {
	t.Helper()
	deadline := time.Now().Add(FailBound)
	for {
		c, err := e.Completed()
		if err != nil {
			t.Fatalf("completed: %v", err)
		}
		if c >= ticket {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("completed %d after %v, want %d", c, FailBound, ticket)
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// AwaitTicket marks e and waits (hal.AwaitTicket, at most FailBound) until
// the ticket completes; what names the wait in a failure.
func AwaitTicket(t testing.TB, e hal.Engine, what string) {
	t.Helper()
	tk, err := e.Mark()
	if err != nil {
		t.Fatalf("%s: mark: %v", what, err)
	}
	if err := hal.AwaitTicket(e, tk, time.Now().Add(FailBound)); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Eventually polls cond until it holds, failing after FailBound; what
// names the condition.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(FailBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, FailBound)
		}
		time.Sleep(time.Millisecond)
	}
}

// Fill writes a pattern depending on seed into b: FillStream over the
// first 4 KiB, then doubled copies of it (cheap for large buffers). Every
// 4 KiB block holds the same bytes; a test that must catch a misplaced
// block uses FillStream.
func Fill(b []byte, seed uint64) {
	FillStream(b[:min(len(b), 4096)], seed)
	for n := 4096; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}

// FillStream writes an xorshift stream depending on seed over all of b.
func FillStream(b []byte, seed uint64) {
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
}

// ErrorMentions fails unless err is non-nil, wraps want (unless nil) and
// mentions every part.
func ErrorMentions(t testing.TB, err error, want error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want an error wrapping %v mentioning %q", want, parts)
	}
	if want != nil && !errors.Is(err, want) {
		t.Errorf("err = %v, want one wrapping %v", err, want)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("err = %v, want it to mention %q", err, p)
		}
	}
}

// ExchangeWindows exports wins[i] on nds[i] for every rank i and imports
// every peer's window at every rank, as a job's ranks do through the
// bootstrap: remote[i][p] is rank p's window imported at rank i (nil for
// p == i). A failed export or import fails the test.
func ExchangeWindows(t testing.TB, nds []hal.NetDevice, wins []hal.Buffer) [][]hal.Buffer {
	t.Helper()
	handles := make([]hal.Handle, len(nds))
	for i, nd := range nds {
		h, err := nd.ExportPort(wins[i])
		if err != nil {
			t.Fatalf("rank %d: export: %v", i, err)
		}
		handles[i] = h
	}
	remote := make([][]hal.Buffer, len(nds))
	for i, nd := range nds {
		remote[i] = make([]hal.Buffer, len(nds))
		for p := range nds {
			if p == i {
				continue
			}
			b, err := nd.ImportPort(handles[p])
			if err != nil {
				t.Fatalf("rank %d: import rank %d's window: %v", i, p, err)
			}
			remote[i][p] = b
		}
	}
	return remote
}

// ConnectAll opens an engine from every rank i to every other rank p
// (nds[i].NewEngine(eps[p])) and returns them, eng[i][p]. With concurrent,
// every engine is opened on its own goroutine, as ranks of a job do where
// an engine waits for its peer's (hal/netplugin's links); else one after
// another. A failure fails the test, naming both ranks.
func ConnectAll(t testing.TB, nds []hal.NetDevice, eps []hal.Endpoint, concurrent bool) [][]hal.Engine {
	t.Helper()
	n := len(nds)
	eng := make([][]hal.Engine, n)
	for i := range eng {
		eng[i] = make([]hal.Engine, n)
	}
	errs := make(chan error, n*n)
	var wg sync.WaitGroup
	for i := range nds {
		if len(errs) > 0 {
			break
		}
		for p := range nds {
			if p == i {
				continue
			}
			open := func() {
				e, err := nds[i].NewEngine(eps[p])
				if err != nil {
					errs <- fmt.Errorf("rank %d: engine to rank %d: %w", i, p, err)
					return
				}
				eng[i][p] = e
			}
			if !concurrent {
				if open(); len(errs) > 0 {
					break
				}
				continue
			}
			wg.Add(1)
			go func() { defer wg.Done(); open() }()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		for _, row := range eng {
			for _, e := range row {
				if e != nil {
					e.Close()
				}
			}
		}
		t.Fatal(err)
	}
	return eng
}

// PingSide is one rank of a ping-pong: its engine to the other rank, the
// other rank's window imported here, a source of the message's bytes and
// its own window, where the other rank's signal lands.
type PingSide struct {
	Eng    hal.Engine
	Remote hal.Buffer
	Src    hal.Buffer
	Win    hal.Buffer
	// Batch brackets each put and its signal in BeginBatch … EndBatch
	// when the engine is a hal.EngineBatcher, as the proxy of package
	// channels does: the path a plan's small messages take.
	Batch bool
	// Lone sends no signal: the round number, written into the 8 bytes at
	// dataOff of Src (a host-visible buffer), goes as a put of its own
	// onto the word the other side waits on, as an LL put carries its own
	// completion (algorithms/portll.go); the n bytes of data are not sent.
	Lone bool
}

// ping sends round i from s: the round number as a lone put, or the n
// data bytes at dataOff and a signal of the word at semOff, in one
// batch where s.Batch asks for it.
func (s PingSide) ping(i int, n int64, dataOff, semOff uint64) error {
	bt, batch := s.Eng.(hal.EngineBatcher)
	if batch = batch && s.Batch; batch {
		bt.BeginBatch()
	}
	if s.Lone {
		atomic.StoreUint64(Word(s.Src, int64(dataOff)), uint64(i))
		if err := s.Eng.Put(s.Remote.Addr()+semOff, s.Src.Addr()+dataOff, 8); err != nil {
			return err
		}
	} else if err := s.Eng.Put(s.Remote.Addr()+dataOff, s.Src.Addr(), n); err != nil {
		return err
	} else if err := s.Eng.Signal(s.Remote.Addr()+semOff, 0, 0); err != nil {
		return err
	}
	if batch {
		return bt.EndBatch()
	}
	return nil
}

// await polls the word at semOff of s's window until it reaches round i,
// progressing s's engine as a proxy would (engines that move bytes only
// while called: hal/ucx), for at most FailBound.
func (s PingSide) await(i int, semOff uint64) error {
	deadline := time.Now().Add(FailBound)
	for atomic.LoadUint64(Word(s.Win, int64(semOff))) < uint64(i) {
		if _, err := s.Eng.Completed(); err != nil {
			return err
		}
		if e, ok := s.Eng.(interface{ Err() error }); ok {
			if err := e.Err(); err != nil {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("round %d: no signal within %v", i, FailBound)
		}
		runtime.Gosched()
	}
	return nil
}

// PingPong runs b.N round trips between a and c, the timer running: a
// puts n bytes at byte dataOff of c's window and signals the word at byte
// semOff; c, on its own goroutine, waits for that signal and answers the
// same way. It returns the time of the b.N round trips. A wait fails the
// benchmark on the engine's failure (its Err, where it has one) or after
// FailBound.
func PingPong(b *testing.B, a, c PingSide, n int64, dataOff, semOff uint64) time.Duration {
	b.Helper()
	return run2(b, a, c, func(s PingSide, i int, first bool) error {
		if first {
			if err := s.ping(i, n, dataOff, semOff); err != nil {
				return err
			}
			return s.await(i, semOff)
		}
		if err := s.await(i, semOff); err != nil {
			return err
		}
		return s.ping(i, n, dataOff, semOff)
	})
}

// Exchange runs b.N rounds in which a and c both send (as PingPong's
// ping) and then wait for the other's message of the round: the shape of
// a two-rank AllGather, each direction on its own engine, both messages
// in flight together. It returns the time of the b.N rounds (a round's
// time is what a two-rank collective's host legs cost per call).
func Exchange(b *testing.B, a, c PingSide, n int64, dataOff, semOff uint64) time.Duration {
	b.Helper()
	return run2(b, a, c, func(s PingSide, i int, _ bool) error {
		if err := s.ping(i, n, dataOff, semOff); err != nil {
			return err
		}
		return s.await(i, semOff)
	})
}

// run2 runs round(a, i, true) for i = 1 … b.N on the benchmark's
// goroutine, timed, and round(c, i, false) on another, and returns the
// time of a's rounds.
func run2(b *testing.B, a, c PingSide, round func(s PingSide, i int, first bool) error) time.Duration {
	b.Helper()
	done := make(chan error, 1)
	go func() {
		for i := 1; i <= b.N; i++ {
			if err := round(c, i, false); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	b.ResetTimer()
	start := time.Now()
	for i := 1; i <= b.N; i++ {
		if err := round(a, i, true); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	elapsed := time.Since(start)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return elapsed
}

// HostRank is one in-process rank's hal/host device (the caller's test
// imports hal/host) with a receive window and a source buffer.
type HostRank struct {
	Dev      hal.Device
	Win, Src hal.Buffer
}

// OpenHost opens the hal/host device of rank in job (ordinal rank) and
// allocates a window of winBytes and a source of srcBytes on it. On a
// failure it releases what it opened and fails the test.
func OpenHost(t testing.TB, job string, rank int, winBytes, srcBytes int64) HostRank {
	t.Helper()
	dev, err := hal.Open("host", hal.Config{Ordinal: rank, Rank: rank, JobID: job})
	if err != nil {
		t.Fatalf("rank %d: open a host device: %v", rank, err)
	}
	h := HostRank{Dev: dev}
	if h.Win, err = dev.Alloc(winBytes); err == nil {
		h.Src, err = dev.Alloc(srcBytes)
	}
	if err != nil {
		h.Close()
		t.Fatalf("rank %d: allocate: %v", rank, err)
	}
	return h
}

// Close frees the buffers and closes the device.
func (h HostRank) Close() {
	for _, b := range []hal.Buffer{h.Win, h.Src} {
		if b != nil {
			b.Free()
		}
	}
	h.Dev.Close()
}

// Wire readies an in-process job of n ranks, rank i given by at(i) (its
// NetDevice, receive window and endpoint): it exchanges the windows
// (ExchangeWindows) and, with connect, opens engines all to all
// (ConnectAll, concurrently or not); eng is nil without connect.
func Wire(t testing.TB, n int, at func(i int) (hal.NetDevice, hal.Buffer, hal.Endpoint), connect, concurrent bool) (remote [][]hal.Buffer, eng [][]hal.Engine) {
	t.Helper()
	nds, wins, eps := make([]hal.NetDevice, n), make([]hal.Buffer, n), make([]hal.Endpoint, n)
	for i := range n {
		nds[i], wins[i], eps[i] = at(i)
	}
	remote = ExchangeWindows(t, nds, wins)
	if connect {
		eng = ConnectAll(t, nds, eps, concurrent)
	}
	return remote, eng
}
