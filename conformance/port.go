package conformance

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// Tests of the port-mapped capability (architecture.md §2–3): the engine
// of hal.PortMapped driven directly, as the proxy drives it, and the
// host-side PortChannel API of package channels, whose requests go through
// a FIFO and the proxy to the same engines.
//
// Receivers observe what arrived only through the contract: they poll
// their semaphore with Device.Read, with a deadline, and read the data
// with Device.Read as soon as the signal is seen, so data that lands after
// its signal is caught. A wait that passes its deadline is a
// *hal.TimeoutError naming the rank, so that an engine that never
// completes fails with a message saying who waited for whom.

func init() {
	pm := hal.CapPortMapped
	Register(Case{ID: "port-mapped/put-signal", Capability: pm, MinRanks: 2,
		Title: "an engine's put then signal: every byte is there when the signal is seen, for sizes 0 B to 64 MiB and unaligned offsets",
		Run: func(t *T) error {
			sizes := []int64{0, 1, 3, 4, 15, 16, 17, 4 * kib, mib, 64 * mib}
			if t.Quick() {
				sizes = sizes[:len(sizes)-1]
			}
			return runPortXfer(t, portXfer{sizes: sizes, offsets: unalignedOffsets})
		}})
	Register(Case{ID: "port-mapped/put-signal-processes", Capability: pm, MinRanks: 2, Mode: Processes,
		Title: "an engine's put then signal between processes",
		Run: func(t *T) error {
			return runPortXfer(t, portXfer{sizes: []int64{0, 17, 4*kib + 3, mib}, offsets: [][2]int64{{0, 0}, {3, 5}}})
		}})
	Register(Case{ID: "port-mapped/flush", Capability: pm, MinRanks: 2,
		Title: "once Completed reaches a Mark's ticket, overwriting the source does not change what the peer receives",
		Run: func(t *T) error {
			return runPortXfer(t, portXfer{sizes: []int64{1, 17, 4*kib + 3, mib}, offsets: [][2]int64{{0, 0}, {5, 0}, {0, 9}}, flush: true})
		}})
	Register(Case{ID: "port-mapped/many-requests", Capability: pm, MinRanks: 2,
		Title: "4096 puts and signals in flight on one engine: every byte arrives and the semaphore ends exact",
		Run:   testPortManyRequests})
	Register(Case{ID: "port-mapped/engine-copy", Capability: pm, MinRanks: 2,
		Title: "a copy on the engine of the own endpoint is complete when a local signal issued after it is seen",
		Run:   testPortCopy})
	Register(Case{ID: "port-mapped/release", Capability: pm, MinRanks: 2,
		Title: "a release (hal.AckSignaler's, else a signal, as the proxy sends it) follows the engine's earlier copies, counts exactly, and leaves the puts before it to the next signal",
		Run:   testPortRelease})
	Register(Case{ID: "port-mapped/channel-put-signal-wait", Capability: pm, MinRanks: 2,
		Title: "PortChannel put, putWithSignal, putWithSignalAndFlush, signal, wait and flush through the proxy",
		Run:   testPortChannel})
	Register(Case{ID: "port-mapped/channel-fifo-full", Capability: pm, MinRanks: 2,
		Title: "more PortChannel requests than FIFO slots outstanding: pushes wait for room and nothing is lost",
		Run:   testPortFifoFull})
	Register(Case{ID: "port-mapped/unexport", Capability: pm, MinRanks: 2,
		Title: "a registration that peers put into and signalled can be withdrawn (hal.PortUnexporter), once; a buffer never exported cannot",
		Run:   testPortUnexport})
	Register(Case{ID: "port-mapped/channel-deadline", Capability: pm, MinRanks: 2,
		Title: "a PortChannel wait or flush that cannot complete passes its deadline and names rank, peer and channel",
		Run:   testPortDeadline})
}

// portLink is one rank's side of the engine tests: an engine to the next
// rank of the ring, the next rank's window and semaphore words imported,
// and this rank's own, which the previous rank's engine writes. Semaphore
// words: the semaphore at 0, the count word at 8.
type portLink struct {
	rg          ring
	e           hal.Engine
	src         hal.Buffer // local source of puts
	window      hal.Buffer // written by the previous rank
	sems        hal.Buffer
	rwin, rsems hal.Buffer // the next rank's, as this device's engines address them
}

// connectPort allocates a window and a source of n bytes each and connects
// this rank's engine to the next rank's window; collective.
func connectPort(t *T, n int64) (*portLink, error) {
	pm, err := t.Port()
	if err != nil {
		return nil, err
	}
	l := &portLink{rg: newRing(t.Rank, t.Size)}
	if l.src, err = t.Alloc(n); err != nil {
		return nil, err
	}
	if l.window, err = t.Alloc(n); err != nil {
		return nil, err
	}
	if l.sems, err = t.Alloc(32); err != nil {
		return nil, err
	}
	type card struct {
		Endpoint    hal.Endpoint
		Window, Sem hal.Handle
	}
	me := card{Endpoint: t.Endpoint()}
	if me.Window, err = pm.ExportPort(l.window); err != nil {
		return nil, t.Errorf("export window for ports: %w", err)
	}
	if me.Sem, err = pm.ExportPort(l.sems); err != nil {
		return nil, t.Errorf("export semaphores for ports: %w", err)
	}
	blob, _ := json.Marshal(me)
	all, err := t.AllGather(blob)
	if err != nil {
		return nil, err
	}
	var next card
	if err := json.Unmarshal(all[l.rg.next], &next); err != nil {
		return nil, t.Errorf("card of rank %d: %v", l.rg.next, err)
	}
	imported := &peerBuffers{}
	t.Cleanup(imported.Close)
	if l.rwin, err = imported.importFrom(t, pm.ImportPort, l.rg.next, next.Window, "window"); err != nil {
		return nil, err
	}
	if l.rsems, err = imported.importFrom(t, pm.ImportPort, l.rg.next, next.Sem, "semaphores"); err != nil {
		return nil, err
	}
	if l.e, err = pm.NewEngine(next.Endpoint); err != nil {
		return nil, t.Errorf("new engine to rank %d: %w", l.rg.next, err)
	}
	t.Cleanup(l.e.Close)
	if t.Network() != "" {
		// A network connects a pair when both ends have opened an engine
		// (an RDMA queue pair receives only once its own side is
		// connected): open the one towards the previous rank, unused, and
		// let every rank finish connecting before any puts.
		if l.rg.prev != l.rg.next {
			var prev card
			if err := json.Unmarshal(all[l.rg.prev], &prev); err != nil {
				return nil, t.Errorf("card of rank %d: %v", l.rg.prev, err)
			}
			e, err := pm.NewEngine(prev.Endpoint)
			if err != nil {
				return nil, t.Errorf("new engine to rank %d: %w", l.rg.prev, err)
			}
			t.Cleanup(e.Close)
		}
		if err := t.Barrier(); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// word reads the 64-bit word at off of b.
func (t *T) word(b hal.Buffer, off int64) (uint64, error) {
	v, err := t.Read(b, off, 8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(v), nil
}

// waitWord polls the semaphore at off of sems until it reaches want, for
// at most the wait deadline; peer is the rank expected to signal it.
func waitWord(t *T, sems hal.Buffer, off int64, want uint64, peer int) (uint64, error) {
	deadline := time.Now().Add(t.Timeout())
	for spins := 0; ; spins++ {
		v, err := t.word(sems, off)
		if err != nil {
			return 0, err
		}
		if v >= want {
			return v, nil
		}
		if time.Now().After(deadline) {
			return v, fmt.Errorf("%w", &hal.TimeoutError{Rank: t.Rank, Peer: peer, Channel: -1, Semaphore: -1, Block: -1,
				What: "port-mapped semaphore (polled by the host)", Expected: want, Observed: v})
		}
		if spins > 100 {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// waitTicket polls e.Completed until it reaches ticket, for at most the
// wait deadline.
func waitTicket(t *T, e hal.Engine, ticket uint64, peer int) error {
	deadline := time.Now().Add(t.Timeout())
	for spins := 0; ; spins++ {
		done, err := e.Completed()
		if err != nil {
			return t.Errorf("engine to rank %d: completed: %w", peer, err)
		}
		if done > ticket {
			return t.Errorf("engine to rank %d: completed ticket %d, but the last Mark returned %d", peer, done, ticket)
		}
		if done == ticket {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w", &hal.TimeoutError{Rank: t.Rank, Peer: peer, Channel: -1, Semaphore: -1, Block: -1,
				What: "port-mapped flush (engine ticket)", Expected: ticket, Observed: done})
		}
		if spins > 100 {
			time.Sleep(10 * time.Microsecond)
		}
	}
}

// portXfer parameterises runPortXfer.
type portXfer struct {
	sizes   []int64
	offsets [][2]int64 // source and destination offsets
	flush   bool       // Mark, wait for Completed, overwrite the source, then signal
}

// runPortXfer: for every size and offset, each rank puts data into the next
// rank's window and signals it with the round number as count; the
// receiver polls its semaphore and checks, as soon as it sees the signal,
// the window (guard bytes included), the count word and the exact
// semaphore value.
func runPortXfer(t *T, px portXfer) error {
	maxSize, maxOff := extent(px.sizes, px.offsets)
	n := maxSize + maxOff + 64
	l, err := connectPort(t, n)
	if err != nil {
		return err
	}
	rg := l.rg
	poisoned := fill(n, poison)
	iter := 0
	for _, size := range px.sizes {
		offsets := px.offsets
		if size >= mib && len(offsets) > 2 {
			offsets = offsets[:2]
		}
		for _, off := range offsets {
			iter++
			so, do := off[0], off[1]
			what := fmt.Sprintf("%d bytes, source offset %d, destination offset %d", size, so, do)
			data := pattern(seed(t.Rank, iter), size)
			if err := t.Write(l.src, so, data); err != nil {
				return err
			}
			if err := t.Write(l.window, 0, poisoned); err != nil {
				return err
			}
			if err := t.Barrier(); err != nil {
				return err
			}
			if err := l.e.Put(l.rwin.Addr()+uint64(do), l.src.Addr()+uint64(so), size); err != nil {
				return t.Errorf("%s: put: %w", what, err)
			}
			if px.flush {
				tk, err := l.e.Mark()
				if err != nil {
					return t.Errorf("%s: mark: %w", what, err)
				}
				if err := waitTicket(t, l.e, tk, rg.next); err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
				if err := t.Write(l.src, so, pattern(seed(t.Rank, iter)^0xF1F1, size)); err != nil {
					return err
				}
			}
			if err := l.e.Signal(l.rsems.Addr(), l.rsems.Addr()+8, uint64(iter)); err != nil {
				return t.Errorf("%s: signal: %w", what, err)
			}
			v, err := waitWord(t, l.sems, 0, uint64(iter), rg.prev)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			got, err := t.Read(l.window, 0, n)
			if err != nil {
				return err
			}
			want := pattern(seed(rg.prev, iter), size)
			if d := guarded("window read as soon as the signal was seen", got, do, want, poisoned); d != "" {
				if px.flush {
					d += " (the source was overwritten after the flush)"
				}
				return t.Errorf("%s from rank %d: %s", what, rg.prev, d)
			}
			if v != uint64(iter) {
				return t.Errorf("%s: semaphore is %d after %d signals", what, v, iter)
			}
			if c, err := t.word(l.sems, 8); err != nil {
				return err
			} else if c != uint64(iter) {
				return t.Errorf("%s: count word is %d when the signal is seen, want %d", what, c, iter)
			}
			if err := t.Barrier(); err != nil {
				return err
			}
		}
	}
	return nil
}

// prime fills the first n bytes of l's source with rank's pattern k and
// poisons its window, then waits for every rank to have done so (nothing
// may land in a window before it is poisoned); it returns the poison.
func (l *portLink) prime(t *T, k int, n int64) ([]byte, error) {
	if err := t.Write(l.src, 0, pattern(seed(t.Rank, k), n)); err != nil {
		return nil, err
	}
	poisoned := fill(n, poison)
	if err := t.Write(l.window, 0, poisoned); err != nil {
		return nil, err
	}
	return poisoned, t.Barrier()
}

// manyRequests is the number of put+signal pairs of testPortManyRequests.
const manyRequests = 4096

// testPortManyRequests queues 4096 puts of 1–64 bytes at unaligned offsets,
// each followed by a signal, without waiting, with a Mark every 256; then
// the receiver waits for the last signal and checks every byte and the
// exact semaphore and count, and the sender waits for the last ticket.
func testPortManyRequests(t *T) error {
	chunks, end := layChunks(manyRequests, 3, 37, 64)
	n := end + 64
	l, err := connectPort(t, n)
	if err != nil {
		return err
	}
	rg := l.rg
	poisoned, err := l.prime(t, 1, n)
	if err != nil {
		return err
	}
	var last, completed uint64
	for i, c := range chunks {
		// Source and destination offsets differ, so a put cannot land
		// right by accident.
		src := n - c.off - c.n
		if err := l.e.Put(l.rwin.Addr()+uint64(c.off), l.src.Addr()+uint64(src), c.n); err != nil {
			return t.Errorf("put %d of %d: %w", i+1, manyRequests, err)
		}
		if err := l.e.Signal(l.rsems.Addr(), l.rsems.Addr()+8, uint64(i+1)); err != nil {
			return t.Errorf("signal %d of %d: %w", i+1, manyRequests, err)
		}
		if (i+1)%256 == 0 {
			if last, err = l.e.Mark(); err != nil {
				return t.Errorf("mark after request %d: %w", 2*(i+1), err)
			}
			done, err := l.e.Completed()
			if err != nil {
				return t.Errorf("completed: %w", err)
			}
			if done < completed || done > last {
				return t.Errorf("completed went from %d to %d (last ticket %d): tickets must not go back nor pass the last Mark", completed, done, last)
			}
			completed = done
		}
	}
	if _, err := waitWord(t, l.sems, 0, manyRequests, rg.prev); err != nil {
		return err
	}
	got, err := t.Read(l.window, 0, n)
	if err != nil {
		return err
	}
	want := chunksExpected(poisoned, pattern(seed(rg.prev, 1), n), chunks)
	if d := diff(fmt.Sprintf("window after %d puts and signals", manyRequests), got, want); d != "" {
		return t.Errorf("from rank %d: %s", rg.prev, d)
	}
	if err := waitTicket(t, l.e, last, rg.next); err != nil {
		return err
	}
	if err := t.Barrier(); err != nil { // every engine is done
		return err
	}
	if v, err := t.word(l.sems, 0); err != nil {
		return err
	} else if v != manyRequests {
		return t.Errorf("semaphore is %d after %d signals", v, manyRequests)
	}
	if c, err := t.word(l.sems, 8); err != nil {
		return err
	} else if c != manyRequests {
		return t.Errorf("count word is %d, want %d (the last signal's)", c, manyRequests)
	}
	return nil
}

// testPortCopy: on the engine bound to this device's own endpoint, Copy
// then Signal a local semaphore; the copy is complete when the signal is
// seen.
func testPortCopy(t *T) error {
	e, err := ownEngine(t)
	if err != nil {
		return err
	}
	return ownCopies(t, e.Copy, e.Signal, "signal")
}

// ownEngine is a port-mapped engine bound to this device's own endpoint,
// closed when the case ends.
func ownEngine(t *T) (hal.Engine, error) {
	pm, err := t.Port()
	if err != nil {
		return nil, err
	}
	e, err := pm.NewEngine(t.Endpoint())
	if err != nil {
		return nil, t.Errorf("new engine to the own endpoint: %w", err)
	}
	t.Cleanup(e.Close)
	return e, nil
}

// ownCopies runs copies of 1 B to 4 MiB at unaligned offsets through move
// (an engine's Copy on the own endpoint), each followed by signal (Signal,
// or AckSignal: a release; what names it) on a local semaphore, and
// checks that each copy is whole, its guard bytes untouched, as soon as
// its signal is seen, and that the count word holds the signal's count.
func ownCopies(t *T, move func(dst, src uint64, n int64) error, signal func(sem, cnt, count uint64) error, what string) error {
	sizes := []int64{1, 17, 4*kib + 3, mib, 4 * mib}
	offsets := [][2]int64{{0, 0}, {3, 5}}
	const guard = 64
	half := int64(4*mib + 3*guard) // destinations start at half+guard
	buf, err := t.Alloc(2 * half)
	if err != nil {
		return err
	}
	sems, err := t.Alloc(16)
	if err != nil {
		return err
	}
	iter := 0
	for _, size := range sizes {
		for _, off := range offsets {
			iter++
			so, do := off[0], half+guard+off[1]
			name := fmt.Sprintf("copy of %d bytes, source offset %d, destination offset %d", size, so, off[1])
			data := pattern(seed(t.Rank, iter), size)
			if err := t.Write(buf, so, data); err != nil {
				return err
			}
			poisoned := fill(size+2*guard, poison)
			if err := t.Write(buf, do-guard, poisoned); err != nil {
				return err
			}
			if err := move(buf.Addr()+uint64(do), buf.Addr()+uint64(so), size); err != nil {
				return t.Errorf("%s: %w", name, err)
			}
			if err := signal(sems.Addr(), sems.Addr()+8, uint64(size)); err != nil {
				return t.Errorf("%s: %s: %w", name, what, err)
			}
			if _, err := waitWord(t, sems, 0, uint64(iter), t.Rank); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			got, err := t.Read(buf, do-guard, size+2*guard)
			if err != nil {
				return err
			}
			if d := guarded("destination read as soon as the local "+what+" was seen", got, guard, data, poisoned); d != "" {
				return t.Errorf("%s: %s", name, d)
			}
			if c, err := t.word(sems, 8); err != nil {
				return err
			} else if c != uint64(size) {
				return t.Errorf("%s: count word %d, want %d", name, c, size)
			}
		}
	}
	return nil
}

// releaseRounds is the number of puts, each followed by a release, of
// testPortRelease; every releaseEvery-th is also followed by a signal.
const (
	releaseRounds = 256
	releaseEvery  = 16
)

// releaseOf is how the proxy sends a release (plan.TriggerAck) through
// e: AckSignal where e implements hal.AckSignaler, else Signal.
func releaseOf(e hal.Engine) func(sem, cnt, count uint64) error {
	if a, ok := e.(hal.AckSignaler); ok {
		return a.AckSignal
	}
	return e.Signal
}

// testPortRelease checks releases as the proxy sends them (releaseOf:
// hal.AckSignaler's, else an ordinary signal). To the next rank: 256 puts of 1 B to 4 KiB at unaligned offsets, each
// followed by a release on a second semaphore (word 16, count at 24) and
// every 16th by a signal (word 0); the receiver waits for the last signal
// and checks every byte (a release announces no put, so the signals must
// still carry all of them: an engine that staged a put's bytes and let
// the release apply them before they landed would leave stale bytes),
// then waits for the releases to end exact, with the last one's count.
// On the engine of the own endpoint: copies, each followed by a local
// release, complete when the release is seen.
func testPortRelease(t *T) error {
	chunks, end := layChunks(releaseRounds, 5, 97, 4*kib)
	n := end + 64
	l, err := connectPort(t, n)
	if err != nil {
		return err
	}
	release := releaseOf(l.e)
	rg := l.rg
	poisoned, err := l.prime(t, 7, n)
	if err != nil {
		return err
	}
	for i, c := range chunks {
		if err := l.e.Put(l.rwin.Addr()+uint64(c.off), l.src.Addr()+uint64(n-c.off-c.n), c.n); err != nil {
			return t.Errorf("put %d of %d: %w", i+1, releaseRounds, err)
		}
		if err := release(l.rsems.Addr()+16, l.rsems.Addr()+24, uint64(i+1)); err != nil {
			return t.Errorf("release %d of %d: %w", i+1, releaseRounds, err)
		}
		if (i+1)%releaseEvery == 0 {
			if err := l.e.Signal(l.rsems.Addr(), l.rsems.Addr()+8, uint64(i+1)); err != nil {
				return t.Errorf("signal after put %d: %w", i+1, err)
			}
		}
	}
	if _, err := waitWord(t, l.sems, 0, releaseRounds/releaseEvery, rg.prev); err != nil {
		return err
	}
	got, err := t.Read(l.window, 0, n)
	if err != nil {
		return err
	}
	want := chunksExpected(poisoned, pattern(seed(rg.prev, 7), n), chunks)
	if d := diff(fmt.Sprintf("window when the last of %d signals (after %d puts and releases) was seen", releaseRounds/releaseEvery, releaseRounds), got, want); d != "" {
		return t.Errorf("from rank %d: %s", rg.prev, d)
	}
	if _, err := waitWord(t, l.sems, 16, releaseRounds, rg.prev); err != nil {
		return err
	}
	if err := t.Barrier(); err != nil { // every engine is done
		return err
	}
	for _, w := range []struct {
		off  int64
		want uint64
		what string
	}{{0, releaseRounds / releaseEvery, "signal semaphore"}, {8, releaseRounds, "signal count word"},
		{16, releaseRounds, "release semaphore"}, {24, releaseRounds, "release count word"}} {
		if v, err := t.word(l.sems, w.off); err != nil {
			return err
		} else if v != w.want {
			return t.Errorf("%s is %d, want %d", w.what, v, w.want)
		}
	}
	return testOwnRelease(t)
}

// testOwnRelease: on the engine of the own endpoint, each copy is
// complete when the local release issued after it is seen (ownCopies).
func testOwnRelease(t *T) error {
	e, err := ownEngine(t)
	if err != nil {
		return err
	}
	return ownCopies(t, e.Copy, releaseOf(e), "release")
}

// portRing is the set-up of the PortChannel tests: a window of this rank,
// a proxy, port channels to every rank over the window, and the two of
// them that a ring uses.
type portRing struct {
	rg      ring
	window  hal.Buffer
	g       *channels.PortGroup
	out, in *channels.PortChannel // to the next rank, from the previous one
}

// connectPortRing allocates a window of n bytes, starts a proxy and
// connects port channels over the window; collective. Everything is
// released after the test.
func connectPortRing(t *T, n int64) (*portRing, error) {
	pr := &portRing{rg: newRing(t.Rank, t.Size)}
	var err error
	if pr.window, err = t.Alloc(n); err != nil {
		return nil, err
	}
	if _, err := t.Port(); err != nil {
		return nil, err
	}
	proxy := channels.NewProxy(t.Dev, t.Rank)
	t.Cleanup(proxy.Close)
	if pr.g, err = channels.ConnectPorts(t.Context(), t.Boot, t.PortDevice(), proxy, pr.window); err != nil {
		return nil, t.Errorf("%w", err)
	}
	t.Cleanup(pr.g.Close)
	pr.out, pr.in = pr.g.Channels[pr.rg.next], pr.g.Channels[pr.rg.prev]
	return pr, nil
}

// testPortChannel: each rank sends to the next rank over its PortChannel
// with every form of put, and receives from the previous rank with Wait.
// The window's first half is the source of puts, its second half receives.
func testPortChannel(t *T) error {
	sizes := []int64{0, 1, 17, 4*kib + 3, 256*kib + 5, mib}
	const guard = 64
	half := int64(mib + 2*guard)
	pr, err := connectPortRing(t, 2*half)
	if err != nil {
		return err
	}
	rg, window, g, out, in := pr.rg, pr.window, pr.g, pr.out, pr.in
	if out == nil || in == nil || g.Channels[t.Rank] != nil {
		return t.Errorf("PortGroup.Channels: want a channel to ranks %d and %d and none to itself", rg.next, rg.prev)
	}
	deadline := func() time.Time { return time.Now().Add(t.Timeout()) }
	forms := []string{"put+signal", "putWithSignal", "putWithSignalAndFlush"}
	iter := 0
	for _, size := range sizes {
		for fi, form := range forms {
			iter++
			so, do := int64(fi*3), half+guard+int64(fi*5)
			what := fmt.Sprintf("%s of %d bytes, source offset %d, destination offset %d", form, size, so, do-half)
			data := pattern(seed(t.Rank, iter), size)
			if err := t.Write(window, so, data); err != nil {
				return err
			}
			poisoned := fill(half, poison)
			if err := t.Write(window, half, poisoned); err != nil {
				return err
			}
			if err := t.Barrier(); err != nil {
				return err
			}
			switch form {
			case "put+signal":
				err = out.Put(do, so, size)
				if err == nil {
					err = out.Signal()
				}
			case "putWithSignal":
				err = out.PutWithSignal(do, so, size)
			case "putWithSignalAndFlush":
				err = out.PutWithSignalAndFlush(do, so, size, deadline())
				if err == nil { // the source is free now
					err = t.Write(window, so, pattern(seed(t.Rank, iter)^0xF1F1, size))
				}
			}
			if err != nil {
				return t.Errorf("%s to rank %d: %w", what, rg.next, err)
			}
			if err := in.Wait(deadline()); err != nil {
				return t.Errorf("%s: wait for rank %d: %w", what, rg.prev, err)
			}
			got, err := t.Read(window, half, half)
			if err != nil {
				return err
			}
			want := pattern(seed(rg.prev, iter), size)
			if d := guarded("receive half of the window after Wait", got, do-half, want, poisoned); d != "" {
				if form == "putWithSignalAndFlush" {
					d += " (the sender overwrote its source after the flush)"
				}
				return t.Errorf("%s from rank %d: %s", what, rg.prev, d)
			}
			if err := out.Flush(deadline()); err != nil {
				return t.Errorf("%s: flush: %w", what, err)
			}
			if err := t.Barrier(); err != nil {
				return err
			}
		}
	}
	// A signal with no put, and a flush with nothing outstanding.
	if err := out.Signal(); err != nil {
		return t.Errorf("signal to rank %d: %w", rg.next, err)
	}
	if err := in.Wait(deadline()); err != nil {
		return t.Errorf("wait for a signal with no data from rank %d: %w", rg.prev, err)
	}
	if err := out.Flush(deadline()); err != nil {
		return t.Errorf("flush with nothing outstanding: %w", err)
	}
	if err := g.Err(); err != nil {
		return t.Errorf("the proxy reports: %w", err)
	}
	return nil
}

// testPortFifoFull pushes 4 × FifoSlots puts and FifoSlots signals without
// waiting, so that pushes find the FIFO full, then waits for every signal.
// Every byte must arrive, and the signal count must be exact: one more
// Wait times out.
func testPortFifoFull(t *T) error {
	puts, perSignal := 4*plan.FifoSlots, 4
	chunks, end := layChunks(puts, 5, 53, 200)
	half := end + 64
	pr, err := connectPortRing(t, 2*half)
	if err != nil {
		return err
	}
	rg, window, out, in := pr.rg, pr.window, pr.out, pr.in
	data := pattern(seed(t.Rank, 7), half)
	if err := t.Write(window, 0, data); err != nil {
		return err
	}
	poisoned := fill(half, poison)
	if err := t.Write(window, half, poisoned); err != nil {
		return err
	}
	if err := t.Barrier(); err != nil {
		return err
	}
	for i, c := range chunks {
		src := half - c.off - c.n
		if err := out.Put(half+c.off, src, c.n); err != nil {
			return t.Errorf("put %d of %d to rank %d: %w", i+1, puts, rg.next, err)
		}
		if (i+1)%perSignal == 0 {
			if err := out.Signal(); err != nil {
				return t.Errorf("signal after put %d to rank %d: %w", i+1, rg.next, err)
			}
		}
	}
	deadline := time.Now().Add(t.Timeout())
	for k := 0; k < puts/perSignal; k++ {
		if err := in.Wait(deadline); err != nil {
			return t.Errorf("wait %d of %d for rank %d: %w", k+1, puts/perSignal, rg.prev, err)
		}
	}
	got, err := t.Read(window, half, half)
	if err != nil {
		return err
	}
	want := chunksExpected(poisoned, pattern(seed(rg.prev, 7), half), chunks)
	if d := diff(fmt.Sprintf("receive half after %d puts", puts), got, want); d != "" {
		return t.Errorf("from rank %d: %s", rg.prev, d)
	}
	if err := out.Flush(time.Now().Add(t.Timeout())); err != nil {
		return t.Errorf("flush after %d puts: %w", puts, err)
	}
	if err := t.Barrier(); err != nil { // every rank has pushed all it will
		return err
	}
	if err := in.Wait(time.Now().Add(20 * time.Millisecond)); !errors.Is(err, hal.ErrTimeout) {
		return t.Errorf("a wait for signal %d, which rank %d never sent: %v; want a timeout", puts/perSignal+1, rg.prev, err)
	}
	return nil
}

// testPortDeadline: a Wait for a signal nobody sends, and a Flush whose
// deadline has passed behind 128 MiB of puts, end in *hal.TimeoutError
// naming the rank, the peer and the channel; a later Flush completes.
func testPortDeadline(t *T) error {
	const chunk = 4 * mib
	pr, err := connectPortRing(t, 2*chunk)
	if err != nil {
		return err
	}
	rg, out, in := pr.rg, pr.out, pr.in
	check := func(what string, err error, peer int, elapsed, limit time.Duration) error {
		var te *hal.TimeoutError
		switch {
		case err == nil:
			return t.Errorf("%s that cannot complete returned no error; want a timeout", what)
		case !errors.As(err, &te) || !errors.Is(err, hal.ErrTimeout):
			return t.Errorf("%s: error %q is not a *hal.TimeoutError wrapping hal.ErrTimeout", what, err)
		case te.Rank != t.Rank || te.Peer != peer || te.Channel < 0:
			return t.Errorf("%s: the timeout names rank %d, peer %d, channel %d; want rank %d, peer %d and a channel (error: %v)",
				what, te.Rank, te.Peer, te.Channel, t.Rank, peer, err)
		case elapsed < limit*9/10:
			return t.Errorf("%s: the deadline of %v fired after %v: too early", what, limit, elapsed)
		}
		return nil
	}
	const d = 300 * time.Millisecond
	start := time.Now()
	err = in.Wait(start.Add(d))
	if err := check("a wait for a signal rank "+fmt.Sprint(rg.prev)+" never sends", err, rg.prev, time.Since(start), d); err != nil {
		return err
	}
	// Every rank's wait has timed out before any rank sends the signal
	// below: a rank that started late would otherwise see its previous
	// rank's signal in that wait (make test on 2 cores, once).
	if err := t.Barrier(); err != nil {
		return err
	}
	// An engine may, rarely, finish 128 MiB before the flush first looks:
	// that is no failure, so try a few times.
	for attempt := 1; ; attempt++ {
		for i := 0; i < 32; i++ {
			if err := out.Put(chunk, 0, chunk); err != nil {
				return t.Errorf("put %d to rank %d: %w", i, rg.next, err)
			}
		}
		err = out.Flush(time.Now())
		if err == nil && attempt < 3 {
			continue
		}
		if err := check("a flush past its deadline behind 128 MiB of puts", err, rg.next, 0, 0); err != nil {
			return err
		}
		break
	}
	if err := out.Flush(time.Now().Add(t.Timeout())); err != nil {
		return t.Errorf("a flush after the timed-out one: %w", err)
	}
	// A flush says the sources may be reused, not that the bytes have
	// landed: a network (UCX over TCP) may still be writing them into the
	// next rank's window, which its clean-up frees. A signal after them,
	// seen by the next rank, says they have landed.
	if err := out.Signal(); err != nil {
		return t.Errorf("signal to rank %d after the puts: %w", rg.next, err)
	}
	if err := in.Wait(time.Now().Add(t.Timeout())); err != nil {
		return t.Errorf("the signal after rank %d's puts: %w", rg.prev, err)
	}
	return t.Barrier()
}

// portChunk is one put of the many-request tests: n bytes at byte offset off
// of the destination, taken from the source at its mirror position
// (len − off − n), so that a put landing at the wrong offset is seen.
type portChunk struct{ off, n int64 }

// layChunks lays count chunks end to end: chunk i follows the previous one
// after a gap of i mod gapMod bytes and is 1 + (i·stride mod maxLen) bytes
// long, so offsets and lengths are unaligned and varied. It returns them
// with the end of the last one.
func layChunks(count int, gapMod, stride, maxLen int64) ([]portChunk, int64) {
	chunks := make([]portChunk, 0, count)
	var end int64
	for i := 0; i < count; i++ {
		c := portChunk{off: end + int64(i)%gapMod, n: 1 + int64(i)*stride%maxLen}
		chunks = append(chunks, c)
		end = c.off + c.n
	}
	return chunks, end
}

// chunksExpected is what the destination must hold after every chunk has
// landed: the poison everywhere else, and each chunk's bytes from the
// mirror position of src (len(src) == len(poisoned)).
func chunksExpected(poisoned, src []byte, chunks []portChunk) []byte {
	want := append([]byte(nil), poisoned...)
	n := int64(len(src))
	for _, c := range chunks {
		from := n - c.off - c.n
		copy(want[c.off:c.off+c.n], src[from:from+c.n])
	}
	return want
}

// testPortUnexport checks hal.PortUnexporter where the port-mapped side
// implements it (every network): a registration a peer has put into and
// signalled can be withdrawn, withdrawing it again or withdrawing a
// buffer never exported is ErrInvalidArgument, and the buffer can be
// exported anew and used. Puts and signals after the withdrawal are not
// sent: transports refuse them differently (a receiver's error, a remote
// access error at the sender) and UCX cannot refuse a put at all.
func testPortUnexport(t *T) error {
	pm, err := t.Port()
	if err != nil {
		return err
	}
	u, ok := pm.(hal.PortUnexporter)
	if !ok {
		return t.NotSupported("the port-mapped side does not implement hal.PortUnexporter (registrations live until the device closes)")
	}
	const n = 4 * kib
	round := func(l *portLink, iter int) error {
		data := pattern(seed(t.Rank, iter), n)
		if err := t.Write(l.src, 0, data); err != nil {
			return err
		}
		if err := l.e.Put(l.rwin.Addr(), l.src.Addr(), n); err != nil {
			return t.Errorf("put to rank %d: %w", l.rg.next, err)
		}
		if err := l.e.Signal(l.rsems.Addr(), l.rsems.Addr()+8, n); err != nil {
			return t.Errorf("signal to rank %d: %w", l.rg.next, err)
		}
		if _, err := waitWord(t, l.sems, 0, 1, l.rg.prev); err != nil {
			return err
		}
		got, err := t.Read(l.window, 0, n)
		if err != nil {
			return err
		}
		if want := pattern(seed(l.rg.prev, iter), n); !bytes.Equal(got, want) {
			return t.Errorf("the window holds other bytes than rank %d put", l.rg.prev)
		}
		return t.Barrier() // every rank has seen its signal before any unexports
	}
	for iter := 1; iter <= 2; iter++ {
		// Each round exports a new window and semaphores (connectPort),
		// uses them, and withdraws them.
		l, err := connectPort(t, n)
		if err != nil {
			return err
		}
		if err := round(l, iter); err != nil {
			return err
		}
		for _, b := range []hal.Buffer{l.window, l.sems} {
			if err := u.UnexportPort(b); err != nil {
				return t.Errorf("unexport a registration after its peer's put and signal: %w", err)
			}
			if err := u.UnexportPort(b); !errors.Is(err, hal.ErrInvalidArgument) {
				return t.Errorf("unexport the same registration again: %v, want an error wrapping %v", err, hal.ErrInvalidArgument)
			}
		}
		if err := u.UnexportPort(l.src); !errors.Is(err, hal.ErrInvalidArgument) {
			return t.Errorf("unexport a buffer never exported: %v, want an error wrapping %v", err, hal.ErrInvalidArgument)
		}
		if err := t.Barrier(); err != nil {
			return err
		}
	}
	return nil
}
