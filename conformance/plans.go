package conformance

import (
	"bytes"
	"fmt"

	"github.com/weftccl/weft/hal/plan"
)

// Data of the tests. Every byte a test moves comes from pattern, whose
// values are never 0 (zeroed memory) nor poison (the value tests fill
// destinations and guard bytes with), and differ between ranks, rounds and
// launches, so that data left from an earlier round is seen as wrong.

const poison = 0xEE

// pattern returns n bytes of data number seed.
func pattern(seed uint64, n int64) []byte {
	out := make([]byte, n)
	x := seed*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	for i := int64(0); i < n; i += 8 {
		x += 0x9E3779B97F4A7C15
		z := (x ^ x>>30) * 0xBF58476D1CE4E5B9
		z = (z ^ z>>27) * 0x94D049BB133111EB
		z ^= z >> 31
		for j := int64(0); j < 8 && i+j < n; j++ {
			out[i+j] = patternByte[byte(z>>(8*j))]
		}
	}
	return out
}

// patternByte maps random bytes onto data bytes: never 0, never poison.
var patternByte = func() (t [256]byte) {
	for i := range t {
		v := byte(i%253) + 1
		if v == poison {
			v = 254
		}
		t[i] = v
	}
	return
}()

// seed names the data of rank in round (or launch) k of a test.
func seed(rank, k int) uint64 { return uint64(rank)<<32 | uint64(k) + 1 }

func fill(n int64, v byte) []byte { return bytes.Repeat([]byte{v}, int(n)) }

// guarded describes the first difference of buf from poison outside
// [off, off+len(want)) and from want inside, or "".
func guarded(what string, buf []byte, off int64, want []byte, poisoned []byte) string {
	end := off + int64(len(want))
	if d := diff(what+" (guard bytes before)", buf[:off], poisoned[:off]); d != "" {
		return d
	}
	if d := diff(what, buf[off:end], want); d != "" {
		return d
	}
	return diff(what+" (guard bytes after)", buf[end:], poisoned[end:])
}

// diff describes the first difference between got and want, or "".
func diff(what string, got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	if len(got) != len(want) {
		return fmt.Sprintf("%s: %d bytes, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			n := 0
			for j := i; j < len(got); j++ {
				if got[j] != want[j] {
					n++
				}
			}
			return fmt.Sprintf("%s: byte %d is %#02x, want %#02x (%d of %d bytes wrong)", what, i, got[i], want[i], n, len(got))
		}
	}
	return ""
}

// ring is a rank's place in a ring of n ranks, and the channels of the
// plans the tests build: one to the next rank and one to the previous, the
// same channel when n == 2.
type ring struct {
	rank, n        int
	next, prev     int
	chNext, chPrev int
	channels       []plan.Channel
	slotOnNext     int // the scratch slot of the next rank that this rank writes (its channel to us)
	slots          int
}

func newRing(rank, n int) ring {
	r := ring{rank: rank, n: n, next: (rank + 1) % n, prev: (rank + n - 1) % n}
	if n == 2 {
		r.channels = []plan.Channel{{Peer: r.next}}
		r.chNext, r.chPrev, r.slotOnNext = 0, 0, 0
	} else {
		r.channels = []plan.Channel{{Peer: r.next}, {Peer: r.prev}}
		r.chNext, r.chPrev, r.slotOnNext = 0, 1, 1
	}
	r.slots = len(r.channels)
	return r
}

func (r ring) plan(name string, threads int, sems int, groups ...plan.Group) *plan.Plan {
	return &plan.Plan{Name: name, Rank: r.rank, NRanks: r.n, Channels: r.channels, Groups: groups, Threads: threads, Semaphores: sems}
}

// Semaphores of the data plans: with B blocks, "ready" semaphores 0…B−1
// (the receiver tells its previous rank it has started) and "data"
// semaphores B…2B−1 (the sender tells its next rank the data is there).

// xferPlan is the plan of a put (or, with flush, a put whose source is
// reused after a flush): every rank puts its input into the next rank's
// registered output and receives the previous rank's put, then copies what
// it sees right after the wait into scratch slot 0, where the test reads
// it back. The receiver announces itself first, so its launch has started
// before the data is sent.
//
//	recv (B blocks): signal(prev, ready); wait(prev, data); scratch[0] <- out
//	send (B blocks): wait(next, ready); next.out <- in; [flush(next); in <- scratch[1];] signal(next, data)
func xferPlan(r ring, name string, blocks, threads int, flush bool) *plan.Plan {
	B := blocks
	recv := plan.Group{Blocks: B, Ops: []plan.Op{
		plan.Signal(r.chPrev, 0),
		plan.Wait(r.chPrev, B),
		plan.Transfer(plan.All, 0, []plan.Ref{plan.LS(0)}, plan.L(plan.Output)),
	}}
	send := plan.Group{Blocks: B, Ops: []plan.Op{
		plan.Wait(r.chNext, 0),
		plan.Transfer(plan.All, 0, []plan.Ref{plan.R(r.chNext, plan.Output)}, plan.L(plan.Input)),
	}}
	if flush {
		send.Ops = append(send.Ops, plan.Flush(r.chNext),
			plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Input)}, plan.LS(1)))
	}
	send.Ops = append(send.Ops, plan.Signal(r.chNext, B))
	p := r.plan(name, threads, 2*B, recv, send)
	p.ScratchSlots = 1
	if flush {
		p.ScratchSlots = 2
	}
	return p
}

// getPlan: every rank reads the previous rank's registered input, which
// that rank writes in the same launch (from its scratch slot 1) once the
// reader has announced itself; the reader copies it into scratch slot 0.
//
//	owner  (B): wait(next, ready); in <- scratch[1]; signal(next, data)
//	reader (B): signal(prev, ready); wait(prev, data); scratch[0] <- prev.in
func getPlan(r ring, name string, blocks, threads int) *plan.Plan {
	B := blocks
	owner := plan.Group{Blocks: B, Ops: []plan.Op{
		plan.Wait(r.chNext, 0),
		plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Input)}, plan.LS(1)),
		plan.Signal(r.chNext, B),
	}}
	reader := plan.Group{Blocks: B, Ops: []plan.Op{
		plan.Signal(r.chPrev, 0),
		plan.Wait(r.chPrev, B),
		plan.Transfer(plan.All, 0, []plan.Ref{plan.LS(0)}, plan.R(r.chPrev, plan.Input)),
	}}
	p := r.plan(name, threads, 2*B, owner, reader)
	p.ScratchSlots = 2
	return p
}

// windowPlan: every rank sends its input around the ring through its slot
// of the next rank's scratch in windows of `window` bytes (equal windows
// per launch, at least `pipeline` of them for a message of a window or
// more: plan.Group.Windows), with the flow control of the windowed plans of
// algorithms (two scratch halves, semaphores per block):
//
//	send (B): [w ≥ 2] wait(next, free); next.scratch[w] <- in[w]; signal(next, data)
//	          after the last window: wait(next, done)
//	recv (B): wait(prev, data); out[w] <- scratch[w]; [w < n−2] signal(prev, free)
//	          after the last window: signal(prev, done)
//
// Semaphores with B blocks: free 0…B−1, data B…2B−1, done 2B…3B−1.
func windowPlan(r ring, name string, blocks, threads int, window int64, pipeline int) *plan.Plan {
	B := blocks
	free := plan.Wait(r.chNext, 0)
	free.SkipFirst = 2
	release := plan.Signal(r.chPrev, 0)
	release.SkipLast = 2
	send := plan.Group{Blocks: B, Window: window, NChunks: 1, Pipeline: pipeline,
		Ops: []plan.Op{free,
			plan.Transfer(0, 1, []plan.Ref{plan.RS(r.chNext, r.slotOnNext)}, plan.L(plan.Input)),
			plan.Signal(r.chNext, B)},
		After: []plan.Op{plan.Wait(r.chNext, 2*B)}}
	recv := plan.Group{Blocks: B, Window: window, NChunks: 1, Pipeline: pipeline,
		Ops: []plan.Op{plan.Wait(r.chPrev, B),
			plan.Transfer(0, 1, []plan.Ref{plan.L(plan.Output)}, plan.LS(r.chPrev)),
			release},
		After: []plan.Op{plan.Signal(r.chPrev, 2*B)}}
	p := r.plan(name, threads, 3*B, send, recv)
	p.Scratch, p.ScratchSlots = plan.Simple, r.slots
	return p
}

// llPlan: every rank writes its input as LL packets into its slot of the
// next rank's scratch, and unpacks the previous rank's packets into its
// output. No semaphores: the packets' flags are the synchronisation.
func llPlan(r ring, name string, proto plan.Protocol, blocks, threads int) *plan.Plan {
	send := plan.Group{Blocks: blocks, Ops: []plan.Op{
		plan.Transfer(plan.All, 0, []plan.Ref{plan.RS(r.chNext, r.slotOnNext)}, plan.L(plan.Input)),
	}}
	recv := plan.Group{Blocks: blocks, Ops: []plan.Op{
		plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, plan.LS(r.chPrev)),
	}}
	p := r.plan(name, threads, 0, send, recv)
	p.Scratch, p.ScratchSlots = proto, r.slots
	return p
}
