package conformance

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// Tests of the memory-mapped capability and MemoryChannel
// (architecture.md §2–3). Device-side behaviour is exercised by small
// plans executed through hal.Executor, so on GPU backends these tests run
// the generated kernels.

const (
	kib = 1 << 10
	mib = 1 << 20
)

func init() {
	mm := hal.CapMemoryMapped
	Register(Case{ID: "memory-mapped/export-import", Capability: mm, MinRanks: 2,
		Title: "a buffer exported by one rank and imported by another is the same memory, both ways",
		Run:   testExportImport})
	Register(Case{ID: "memory-mapped/export-import-processes", Capability: mm, MinRanks: 2, Mode: Processes,
		Title: "export, import and map work across processes",
		Run:   testExportImport})
	Register(Case{ID: "memory-mapped/put-signal-wait", Capability: mm, MinRanks: 2,
		Title: "put then signal then wait makes every byte visible, for sizes 0 B to 64 MiB and unaligned offsets",
		Run: func(t *T) error {
			sizes := []int64{0, 1, 3, 4, 15, 16, 17, 4 * kib, mib, 64 * mib}
			if t.Quick() {
				sizes = sizes[:len(sizes)-1]
			}
			return runXfer(t, xferCase{name: "conf-put", sizes: sizes, offsets: unalignedOffsets, blocks: 1})
		}})
	Register(Case{ID: "memory-mapped/put-signal-wait-processes", Capability: mm, MinRanks: 2, Mode: Processes,
		Title: "put then signal then wait between processes",
		Run: func(t *T) error {
			return runXfer(t, xferCase{name: "conf-put-proc", sizes: []int64{0, 17, 4*kib + 3, mib}, offsets: [][2]int64{{0, 0}, {3, 5}}, blocks: 2})
		}})
	Register(Case{ID: "memory-mapped/get", Capability: mm, MinRanks: 2,
		Title: "get after wait reads what the peer wrote before its signal",
		Run:   testGet})
	Register(Case{ID: "memory-mapped/flush", Capability: mm, MinRanks: 2,
		Title: "after flush the source of a put may be overwritten without changing what the peer receives",
		Run: func(t *T) error {
			return runXfer(t, xferCase{name: "conf-flush", sizes: []int64{1, 17, 4*kib + 3, 256 * kib}, offsets: [][2]int64{{0, 0}, {5, 0}, {0, 9}}, blocks: 2, flush: true})
		}})
	Register(Case{ID: "memory-mapped/many-channels", Capability: mm, MinRanks: 2,
		Title: "many channels per peer and many thread blocks per channel, all concurrently",
		Run:   testManyChannels})
	Register(Case{ID: "memory-mapped/semaphore-wraparound", Capability: mm, MinRanks: 2,
		Title: "semaphore counts past 2^32 (64-bit semaphores and expected values)",
		Run: func(t *T) error {
			return runXfer(t, xferCase{name: "conf-sem64", sizes: []int64{17, 4*kib + 3}, offsets: [][2]int64{{0, 0}}, blocks: 2, rounds: 3, preload: 1<<32 - 2})
		}})
	Register(Case{ID: "memory-mapped/ll16", Capability: mm, MinRanks: 2,
		Title: "LL16 packets deliver every byte, across the 32-bit flag wrap-around",
		Run:   func(t *T) error { return testLL(t, plan.LL16) }})
	Register(Case{ID: "memory-mapped/ll8", Capability: mm, MinRanks: 2,
		Title: "LL8 packets deliver every byte, across the 32-bit flag wrap-around",
		Run:   func(t *T) error { return testLL(t, plan.LL8) }})
	Register(Case{ID: "memory-mapped/ll128", Capability: mm, MinRanks: 2,
		Title: "LL128 lines (a warp's 128-byte line as one write, hal.LL128Carrier) deliver every byte, partial lines included, across the 32-bit flag wrap-around",
		Run: func(t *T) error {
			if why, err := ll128Links(t); err != nil {
				return err
			} else if why != "" {
				return t.NotSupported("%s", why)
			}
			return testLL(t, plan.LL128)
		}})
	Register(Case{ID: "memory-mapped/windows", Capability: mm, MinRanks: 2,
		Title: "windowed transfers with flow control deliver every byte whatever the count: one window below the pipeline bound, equal pipelined windows above it, many windows past the window size, sizes changing between launches",
		Run:   testWindows})
	Register(Case{ID: "memory-mapped/graph-replay", Capability: mm, MinRanks: 2,
		Title: "a captured LL launch replayed from a graph uses fresh flags every time (hal.GraphCapturer)",
		Run:   testGraphReplay})
	Register(Case{ID: "memory-mapped/relaxed", Capability: mm, MinRanks: 2,
		Title: "relaxed signal and wait count exactly like the ordered ones",
		Run:   testRelaxed})
	Register(Case{ID: "memory-mapped/deadline-semaphore", Capability: mm, MinRanks: 2,
		Title: "a semaphore wait with no signal passes its deadline and names rank, peer, channel and semaphore",
		Run:   testDeadlineSemaphore})
	Register(Case{ID: "memory-mapped/deadline-packet", Capability: mm, MinRanks: 2,
		Title: "an LL packet wait with no sender passes its deadline and names rank, peer and channel",
		Run:   testDeadlinePacket})
	Register(Case{ID: "memory-mapped/bad-handles", Capability: mm, MinRanks: 2,
		Title: "foreign, malformed, wrong-size and stale handles are refused with the right error",
		Run:   testBadHandles})
}

// unalignedOffsets are the (source, destination) byte offsets of the put
// tests: aligned, then misaligned for every vector width.
var unalignedOffsets = [][2]int64{{0, 0}, {1, 3}, {3, 1}, {8, 4}, {7, 13}}

// xferCase parameterises runXfer.
type xferCase struct {
	name    string
	sizes   []int64
	offsets [][2]int64
	blocks  int
	flush   bool   // overwrite the source after a flush
	rounds  int    // launches per size and offset (default 1)
	preload uint64 // start the plan's semaphores and expected values here
}

// runXfer runs xferPlan for every size and offset: each rank puts its data
// into the next rank's registered output and checks what it received from
// the previous one, as seen by the device right after the wait (scratch
// slot 0) and in the output afterwards, guard bytes included.
func runXfer(t *T, xc xferCase) error {
	rg := newRing(t.Rank, t.Size)
	B := max(xc.blocks, 1)
	rounds := max(xc.rounds, 1)
	maxSize, maxOff := extent(xc.sizes, xc.offsets)
	bufBytes := maxSize + maxOff + 64
	p := xferPlan(rg, xc.name, B, 256, xc.flush)
	slot := (max(maxSize, 1) + 15) / 16 * 16
	f, err := newFixture(t, p, fixtureSpec{scratch: slot * int64(p.ScratchSlots), in: bufBytes, out: bufBytes, register: registerOutput})
	if err != nil {
		return err
	}
	res, send, recv := f.res, f.in, f.out
	stride := p.SlotStride(res.Bindings.ScratchBytes)
	if xc.preload != 0 {
		if err := preloadSemaphores(t, p, res.Bindings, rg, B, xc.preload); err != nil {
			return err
		}
	}
	poisoned := fill(bufBytes, poison)
	iter := 0
	for _, size := range xc.sizes {
		offsets := xc.offsets
		if size >= mib && len(offsets) > 2 {
			offsets = offsets[:2]
		}
		for _, off := range offsets {
			so, do := off[0], off[1]
			for k := 0; k < rounds; k++ {
				iter++
				what := fmt.Sprintf("%d bytes, source offset %d, destination offset %d, round %d", size, so, do, k)
				data := pattern(seed(t.Rank, iter), size)
				if err := t.Write(send, so, data); err != nil {
					return err
				}
				if err := t.Write(recv, 0, poisoned); err != nil {
					return err
				}
				reuse := pattern(seed(t.Rank, iter)^0xF1F1, size)
				if xc.flush {
					if err := t.Poke(res.Bindings.Scratch+uint64(stride), reuse); err != nil {
						return err
					}
				}
				// Every rank's destination is ready before anyone launches.
				if err := t.Barrier(); err != nil {
					return err
				}
				if err := f.launch(f.args(size, so, do)); err != nil {
					return err
				}
				if err := f.finish(); err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
				want := pattern(seed(rg.prev, iter), size)
				seen, err := t.Peek(res.Bindings.Scratch, size)
				if err != nil {
					return err
				}
				if d := diff("data the device read right after the wait", seen, want); d != "" {
					return t.Errorf("%s from rank %d: %s", what, rg.prev, d)
				}
				got, err := t.Read(recv, 0, bufBytes)
				if err != nil {
					return err
				}
				if d := guarded("destination buffer", got, do, want, poisoned); d != "" {
					return t.Errorf("%s from rank %d: %s", what, rg.prev, d)
				}
				if xc.flush {
					src, err := t.Read(send, so, size)
					if err != nil {
						return err
					}
					if d := diff("source overwritten after the flush", src, reuse); d != "" {
						return t.Errorf("%s: %s", what, d)
					}
				}
				// Nobody rewrites its buffers while a peer still checks.
				if err := t.Barrier(); err != nil {
					return err
				}
			}
		}
	}
	if xc.preload != 0 {
		return checkSemaphores(t, p, res.Bindings, rg, B, xc.preload+uint64(iter))
	}
	return nil
}

// extent returns the largest size and the largest source or destination
// offset of a transfer test.
func extent(sizes []int64, offsets [][2]int64) (maxSize, maxOff int64) {
	for _, s := range sizes {
		maxSize = max(maxSize, s)
	}
	for _, o := range offsets {
		maxOff = max(maxOff, o[0], o[1])
	}
	return maxSize, maxOff
}

// semaphoreWords lists the (from, semaphore) counters of rank rg.rank that
// xferPlan uses: ready semaphores signalled by the next rank, data
// semaphores signalled by the previous one.
func semaphoreWords(rg ring, B int) [][2]int {
	var out [][2]int
	for i := 0; i < B; i++ {
		out = append(out, [2]int{rg.next, i}, [2]int{rg.prev, B + i})
	}
	return out
}

// preloadSemaphores sets the counters and expected values of xferPlan to v,
// on the device, as if v signals had already been exchanged.
func preloadSemaphores(t *T, p *plan.Plan, b plan.Bindings, rg ring, B int, v uint64) error {
	sems := make([]byte, p.SemaphoreRegionBytes())
	exp := make([]byte, p.ExpectedRegionBytes())
	for _, w := range semaphoreWords(rg, B) {
		binary.LittleEndian.PutUint64(sems[p.InboundOffset(w[0], w[1]):], v)
		binary.LittleEndian.PutUint64(exp[p.InboundOffset(w[0], w[1]):], v)
	}
	if err := t.Poke(b.Semaphores, sems); err != nil {
		return err
	}
	if err := t.Poke(b.Expected, exp); err != nil {
		return err
	}
	return t.Barrier()
}

// checkSemaphores reads the counters and expected values back.
func checkSemaphores(t *T, p *plan.Plan, b plan.Bindings, rg ring, B int, want uint64) error {
	sems, err := t.Peek(b.Semaphores, p.SemaphoreRegionBytes())
	if err != nil {
		return err
	}
	exp, err := t.Peek(b.Expected, p.ExpectedRegionBytes())
	if err != nil {
		return err
	}
	for _, w := range semaphoreWords(rg, B) {
		off := p.InboundOffset(w[0], w[1])
		got, gotExp := binary.LittleEndian.Uint64(sems[off:]), binary.LittleEndian.Uint64(exp[off:])
		if got != want || gotExp != want {
			return t.Errorf("semaphore %d from rank %d: counter %#x, expected value %#x, want %#x for both", w[1], w[0], got, gotExp, want)
		}
	}
	return nil
}

func testGet(t *T) error {
	rg := newRing(t.Rank, t.Size)
	const B = 2
	p := getPlan(rg, "conf-get", B, 256)
	sizes := []int64{1, 17, 4*kib + 3, mib + 1}
	maxSize := sizes[len(sizes)-1]
	slot := (maxSize + 15) / 16 * 16
	f, err := newFixture(t, p, fixtureSpec{scratch: 2 * slot, in: maxSize + 16, register: registerInput})
	if err != nil {
		return err
	}
	res, in := f.res, f.in
	stride := p.SlotStride(res.Bindings.ScratchBytes)
	iter := 0
	for _, size := range sizes {
		for _, off := range []int64{0, 5} {
			iter++
			if err := t.Write(in, 0, fill(maxSize+16, poison)); err != nil {
				return err
			}
			if err := t.Poke(res.Bindings.Scratch+uint64(stride), pattern(seed(t.Rank, iter), size)); err != nil {
				return err
			}
			if err := t.Barrier(); err != nil {
				return err
			}
			if err := f.launch(f.args(size, off, off)); err != nil {
				return err
			}
			what := fmt.Sprintf("%d bytes at offset %d", size, off)
			if err := f.finish(); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			seen, err := t.Peek(res.Bindings.Scratch, size)
			if err != nil {
				return err
			}
			if d := diff("data read from the peer's input after the wait", seen, pattern(seed(rg.prev, iter), size)); d != "" {
				return t.Errorf("%s from rank %d: %s", what, rg.prev, d)
			}
			if err := t.Barrier(); err != nil {
				return err
			}
		}
	}
	return nil
}

// manyPlan connects rank to every other rank with k channels each; every
// channel carries B blocks each way. Rank r's data for channel k of a peer
// is chunk r·K+k of the input, written into the same chunk of the peer's
// output; the receiver copies each chunk it gets into scratch slot 0.
func manyPlan(rank, n, K, B, threads int) *plan.Plan {
	p := &plan.Plan{Name: "conf-many", Rank: rank, NRanks: n, Threads: threads, Semaphores: 2 * B * K, ScratchSlots: 1}
	for q := 0; q < n; q++ {
		if q == rank {
			continue
		}
		for k := 0; k < K; k++ {
			ci := len(p.Channels)
			p.Channels = append(p.Channels, plan.Channel{Peer: q})
			ready, data := 2*B*k, 2*B*k+B
			p.Groups = append(p.Groups,
				plan.Group{Blocks: B, Ops: []plan.Op{
					plan.Signal(ci, ready),
					plan.Wait(ci, data),
					plan.Transfer(q*K+k, n*K, []plan.Ref{plan.LS(0)}, plan.L(plan.Output)),
				}},
				plan.Group{Blocks: B, Ops: []plan.Op{
					plan.Wait(ci, ready),
					plan.Transfer(rank*K+k, n*K, []plan.Ref{plan.R(ci, plan.Output)}, plan.L(plan.Input)),
					plan.Signal(ci, data),
				}})
		}
	}
	return p
}

func testManyChannels(t *T) error {
	n := t.Size
	K := min(4, plan.MaxPeers/(n-1))
	B := 4
	if t.Quick() {
		B = 2
	}
	chunk := int64(16*kib + 7)
	if !t.Quick() {
		chunk = 256*kib + 7
	}
	count := int64(n*K) * chunk
	p := manyPlan(t.Rank, n, K, B, 256)
	f, err := newFixture(t, p, fixtureSpec{scratch: (count + 15) / 16 * 16, in: count, out: count, register: registerOutput})
	if err != nil {
		return err
	}
	in, out := f.in, f.out
	for round := 0; round < 2; round++ {
		if err := t.Write(in, 0, pattern(seed(t.Rank, round), count)); err != nil {
			return err
		}
		if err := t.Write(out, 0, fill(count, poison)); err != nil {
			return err
		}
		if err := t.Barrier(); err != nil {
			return err
		}
		if err := f.launch(f.args(count, 0, 0)); err != nil {
			return err
		}
		if err := f.finish(); err != nil {
			return fmt.Errorf("round %d (%d channels × %d blocks each way): %w", round, len(p.Channels), B, err)
		}
		seen, err := t.Peek(f.res.Bindings.Scratch, count)
		if err != nil {
			return err
		}
		got, err := t.Read(out, 0, count)
		if err != nil {
			return err
		}
		for q := 0; q < n; q++ {
			if q == t.Rank {
				continue
			}
			data := pattern(seed(q, round), count)
			for k := 0; k < K; k++ {
				off, l := plan.ChunkRange(count, 1, q*K+k, n*K)
				where := fmt.Sprintf("round %d, rank %d channel %d of %d (%d bytes)", round, q, k, K, l)
				if d := diff("data the device read right after the wait", seen[off:off+l], data[off:off+l]); d != "" {
					return t.Errorf("%s: %s", where, d)
				}
				if d := diff("destination chunk", got[off:off+l], data[off:off+l]); d != "" {
					return t.Errorf("%s: %s", where, d)
				}
			}
		}
		if err := t.Barrier(); err != nil {
			return err
		}
	}
	return nil
}

// testLL sends LL packets around the ring for a range of sizes, the launch
// counter (from which flags derive) starting just below 2^32 so that the
// flags wrap around during the test.
// ll128Links says, alike on every rank, why the ranks' links do not all
// carry LL128 lines (hal.LL128Carrier), or "" when they do: each rank
// judges its links to every peer, and the verdicts are exchanged.
func ll128Links(t *T) (string, error) {
	ep, err := json.Marshal(t.Dev.Endpoint())
	if err != nil {
		return "", err
	}
	eps, err := t.AllGather(ep)
	if err != nil {
		return "", err
	}
	why := ""
	c, ok := t.Dev.(hal.LL128Carrier)
	if !ok {
		why = fmt.Sprintf("rank %d: the device does not implement hal.LL128Carrier", t.Rank)
	}
	for r, b := range eps {
		var p hal.Endpoint
		if why != "" || r == t.Rank {
			continue
		}
		if err := json.Unmarshal(b, &p); err != nil {
			return "", fmt.Errorf("rank %d sent a malformed endpoint: %v", r, err)
		}
		if !c.LL128(p) {
			why = fmt.Sprintf("rank %d: the link to rank %d (%s GPU %d) does not carry LL128 lines as one write", t.Rank, r, p.Backend, p.Ordinal)
		}
	}
	all, err := t.AllGather([]byte(why))
	if err != nil {
		return "", err
	}
	for _, w := range all {
		if len(w) > 0 {
			return string(w), nil
		}
	}
	return "", nil
}

func testLL(t *T, proto plan.Protocol) error {
	rg := newRing(t.Rank, t.Size)
	sizes := []int64{0, 1, 3, 4, 7, 8, 9, 17, 4*kib + 3, 64*kib + 1}
	const B = 2
	p := llPlan(rg, "conf-"+proto.String(), proto, B, 256)
	maxSize := sizes[len(sizes)-1]
	const start = 1<<32 - 3 // flags 0xfffffffe, 0xffffffff, 1, 2, …
	f, err := newFixture(t, p, fixtureSpec{scratch: p.ScratchBytes(maxSize, 1), initialLaunch: start, in: maxSize + 16, out: maxSize + 16})
	if err != nil {
		return err
	}
	launch := uint64(start)
	for i, size := range sizes {
		// Two launches per size, so that both scratch halves are used at
		// each size and the flags cross the wrap-around at small sizes.
		for k := 0; k < 2; k++ {
			what := fmt.Sprintf("%s, %d bytes, launch %#x (flag %#x)", proto, size, launch, plan.Flag(launch))
			if err := sendAround(t, f, rg, 2*i+k, size, maxSize, what, "unpacked packets"); err != nil {
				return err
			}
			launch++
			// Scratch halves alternate by launch: in a ring of more than
			// three ranks nothing else keeps a rank from writing a half
			// its next rank has not read yet.
			if err := t.Barrier(); err != nil {
				return err
			}
		}
	}
	return nil
}

// sendAround runs one launch of a ring plan whose every rank sends size
// bytes of its input to the next rank's output: it writes this rank's
// input for iteration iter, poisons the output (maxSize+16 bytes), launches,
// waits, and checks the previous rank's data and the guard bytes after it.
// what names the launch in errors, got what the output holds.
func sendAround(t *T, f *fixture, rg ring, iter int, size, maxSize int64, what, got string) error {
	if err := t.Write(f.in, 0, pattern(seed(t.Rank, iter), size)); err != nil {
		return err
	}
	if err := t.Write(f.out, 0, fill(maxSize+16, poison)); err != nil {
		return err
	}
	if err := f.launch(f.args(size, 0, 0)); err != nil {
		return err
	}
	if err := f.finish(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	out, err := t.Read(f.out, 0, maxSize+16)
	if err != nil {
		return err
	}
	if d := guarded(got, out, 0, pattern(seed(rg.prev, iter), size), fill(maxSize+16, poison)); d != "" {
		return t.Errorf("%s from rank %d: %s", what, rg.prev, d)
	}
	return nil
}

// testWindows sends windowPlan around the ring at sizes that take one
// window (below the window size), equal pipelined windows (from one window
// size: at least plan.PipelineWindows) and many windows, odd sizes included, two launches per size back to back
// (the second reuses scratch halves the first's receiver released), and
// checks every byte received and the guard bytes after it.
func testWindows(t *T) error {
	rg := newRing(t.Rank, t.Size)
	const B, window, pipeline = 3, 64 * kib, plan.PipelineWindows
	sizes := []int64{0, 1, 17, 4*kib + 3, 16*kib + 16, 40*kib + 5, 64 * kib, 64*kib + 1, 300*kib + 7, mib}
	p := windowPlan(rg, "conf-windows", B, 128, window, pipeline)
	maxSize := sizes[len(sizes)-1]
	f, err := newFixture(t, p, fixtureSpec{scratch: p.ScratchBytes(maxSize, 1), in: maxSize + 16, out: maxSize + 16})
	if err != nil {
		return err
	}
	for i, size := range sizes {
		for k := 0; k < 2; k++ {
			g := p.Groups[0]
			what := fmt.Sprintf("%d bytes in %d windows of %d bytes, launch %d", size, g.Windows(size, 1), g.WindowElems(size, 1), k)
			if err := sendAround(t, f, rg, 2*i+k, size, maxSize, what, "received"); err != nil {
				return err
			}
		}
		if err := t.Barrier(); err != nil { // the inputs of the next size are written after every rank's launches ended
			return err
		}
	}
	return nil
}

// testGraphReplay captures one LL16 launch in a graph and replays it: the
// flags are epochs the device advances itself, so every replay must deliver
// that replay's data, across the flag wrap-around.
func testGraphReplay(t *T) error {
	gc, ok := t.Dev.(hal.GraphCapturer)
	if !ok {
		return t.NotSupported("the device does not implement hal.GraphCapturer")
	}
	rg := newRing(t.Rank, t.Size)
	const size, replays = 4*kib + 3, 5
	p := llPlan(rg, "conf-graph", plan.LL16, 2, 256)
	f, err := newFixture(t, p, fixtureSpec{scratch: p.ScratchBytes(size, 1), initialLaunch: 1<<32 - 3, in: size, out: size})
	if err != nil {
		return err
	}
	in, out, s := f.in, f.out, f.s
	if err := gc.BeginCapture(s); err != nil {
		if errors.Is(err, hal.ErrNotSupported) {
			return t.NotSupported("graph capture: %v", err)
		}
		return t.Errorf("begin capture: %w", err)
	}
	if err := f.launch(f.args(size, 0, 0)); err != nil {
		gc.EndCapture(s)
		return err
	}
	g, err := gc.EndCapture(s)
	if err != nil {
		return t.Errorf("end capture: %w", err)
	}
	t.Cleanup(g.Close)
	for k := 0; k < replays; k++ {
		if err := t.Write(in, 0, pattern(seed(t.Rank, k), size)); err != nil {
			return err
		}
		if err := t.Write(out, 0, fill(size, poison)); err != nil {
			return err
		}
		if err := t.Barrier(); err != nil {
			return err
		}
		if err := g.Launch(s); err != nil {
			return t.Errorf("graph launch %d: %w", k, err)
		}
		if err := f.finish(); err != nil {
			return fmt.Errorf("replay %d: %w", k, err)
		}
		got, err := t.Read(out, 0, size)
		if err != nil {
			return err
		}
		if d := diff(fmt.Sprintf("replay %d: unpacked packets", k), got, pattern(seed(rg.prev, k), size)); d != "" {
			return t.Errorf("from rank %d: %s", rg.prev, d)
		}
		if err := t.Barrier(); err != nil {
			return err
		}
	}
	return nil
}

// testRelaxed runs a ring barrier of relaxed signals and waits many times
// and checks that every counter, expected value and count word is exact.
func testRelaxed(t *T) error {
	rg := newRing(t.Rank, t.Size)
	const B, rounds, launches, count = 2, 64, 3, 5
	var ops []plan.Op
	for i := 0; i < rounds; i++ {
		ops = append(ops,
			plan.Op{Kind: plan.OpSignal, Chan: rg.chNext, Sem: 0, Relaxed: true},
			plan.Op{Kind: plan.OpWait, Chan: rg.chPrev, Sem: 0, Relaxed: true})
	}
	p := rg.plan("conf-relaxed", 64, B, plan.Group{Blocks: B, Ops: ops})
	// The count is what the signals store beside their counters; no data
	// moves, so the buffer (input and output in place) only needs to exist.
	f, err := newFixture(t, p, fixtureSpec{in: 64})
	if err != nil {
		return err
	}
	res := f.res
	for l := 0; l < launches; l++ {
		if err := f.launch(f.args(count, 0, 0)); err != nil {
			return err
		}
	}
	if err := f.finish(); err != nil {
		return err
	}
	if err := t.Barrier(); err != nil {
		return err
	}
	sems, err := t.Peek(res.Bindings.Semaphores, p.SemaphoreRegionBytes())
	if err != nil {
		return err
	}
	exp, err := t.Peek(res.Bindings.Expected, p.ExpectedRegionBytes())
	if err != nil {
		return err
	}
	le := binary.LittleEndian
	for b := 0; b < B; b++ {
		want := uint64(rounds * launches)
		c := le.Uint64(sems[p.InboundOffset(rg.prev, b):])
		e := le.Uint64(exp[p.InboundOffset(rg.prev, b):])
		w := le.Uint64(sems[p.CountOffset(rg.prev, b):])
		if c != want || e != want || w != count {
			return t.Errorf("semaphore %d from rank %d after %d relaxed signals: counter %d, expected value %d, count word %d; want %d, %d, %d",
				b, rg.prev, want, c, e, w, want, want, count)
		}
	}
	return nil
}

// deadline is the wait deadline of the deadline tests.
const deadline = 300_000_000 // ns

func checkTimeout(t *T, err error, want hal.TimeoutError, checkSem bool, elapsed float64) error {
	if err == nil {
		return t.Errorf("the wait with no signal completed without error; want a timeout")
	}
	var te *hal.TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, hal.ErrTimeout) {
		return t.Errorf("error %q is not a *hal.TimeoutError wrapping hal.ErrTimeout", err)
	}
	got := *te
	if !checkSem {
		got.Semaphore, want.Semaphore = 0, 0
	}
	got.Observed, want.Observed = 0, 0
	if got.Rank != want.Rank || got.Peer != want.Peer || got.Channel != want.Channel || got.Semaphore != want.Semaphore ||
		got.Block != want.Block || got.What != want.What {
		return t.Errorf("timeout names rank %d, peer %d, channel %d, semaphore %d, block %d, %q; want rank %d, peer %d, channel %d, semaphore %d, block %d, %q (error: %v)",
			te.Rank, te.Peer, te.Channel, te.Semaphore, te.Block, te.What, want.Rank, want.Peer, want.Channel, want.Semaphore, want.Block, want.What, err)
	}
	if checkSem && te.Expected != want.Expected {
		return t.Errorf("timeout says expected value %d, want %d (error: %v)", te.Expected, want.Expected, err)
	}
	if elapsed < 0.9*deadline/1e9 {
		return t.Errorf("the deadline of %v fired after %.3f s: too early", float64(deadline)/1e9, elapsed)
	}
	return nil
}

// expectTimeout launches a on f with the deadline of the deadline tests,
// waits for the device-side deadline to end the launch, and checks the
// failure it recorded against want (checkTimeout).
func expectTimeout(t *T, f *fixture, a *plan.Args, want hal.TimeoutError, checkSem bool) error {
	a.Timeout = deadline
	start := nowSeconds()
	if err := f.launch(a); err != nil {
		return err
	}
	if err := t.Sync(f.s); err != nil {
		return fmt.Errorf("the device-side deadline did not end the launch: %w", err)
	}
	elapsed := nowSeconds() - start
	return checkTimeout(t, f.res.Check(), want, checkSem, elapsed)
}

func testDeadlineSemaphore(t *T) error {
	rg := newRing(t.Rank, t.Size)
	const sem = 2
	p := rg.plan("conf-deadline", 64, sem+1, plan.Group{Blocks: 1, Ops: []plan.Op{plan.Wait(rg.chNext, sem)}})
	f, err := newFixture(t, p, fixtureSpec{})
	if err != nil {
		return err
	}
	return expectTimeout(t, f, f.args(0, 0, 0), hal.TimeoutError{Rank: t.Rank, Peer: rg.next, Channel: rg.chNext, Semaphore: sem, Block: 0,
		What: "semaphore", Expected: 1}, true)
}

func testDeadlinePacket(t *T) error {
	rg := newRing(t.Rank, t.Size)
	p := rg.plan("conf-deadline-ll", 64, 0, plan.Group{Blocks: 1, Ops: []plan.Op{
		plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, plan.LS(rg.chPrev)),
	}})
	p.Scratch, p.ScratchSlots = plan.LL16, rg.slots
	const count = 64
	// One buffer, input and output in place.
	f, err := newFixture(t, p, fixtureSpec{scratch: p.ScratchBytes(count, 1), in: count})
	if err != nil {
		return err
	}
	return expectTimeout(t, f, f.args(count, 0, 0), hal.TimeoutError{Rank: t.Rank, Peer: rg.prev, Channel: rg.chPrev, Block: 0, What: "LL packet"}, false)
}

// testExportImport: every rank exports a buffer holding its data; every
// other rank imports it, reads the data through the mapping and writes a
// marker into it, which the owner then reads.
func testExportImport(t *T) error {
	mm, err := memoryMapped(t)
	if err != nil {
		return err
	}
	sizes := []int64{1, 4*kib + 3, mib + 5}
	if t.Quick() {
		sizes = sizes[:2]
	}
	for i, size := range sizes {
		buf, err := t.Alloc(size)
		if err != nil {
			return err
		}
		if err := t.Write(buf, 0, pattern(seed(t.Rank, i), size)); err != nil {
			return err
		}
		maps, err := mapPeers(t, mm, buf, fmt.Sprintf("%d-byte buffer", size))
		if err != nil {
			return err
		}
		marker := func(q int) (int64, byte) { return int64(q) * size / int64(t.Size), byte(0x10 + q) }
		for _, m := range maps.bufs {
			if m.Size() != size {
				return t.Errorf("the imported buffer of rank %d is %d bytes, want %d", m.rank, m.Size(), size)
			}
			got, err := t.Read(m.Buffer, 0, size)
			if err != nil {
				return err
			}
			if d := diff(fmt.Sprintf("the %d-byte buffer of rank %d read through its mapping", size, m.rank), got, pattern(seed(m.rank, i), size)); d != "" {
				return t.Errorf("%s", d)
			}
		}
		// Everybody has read the data; now everybody marks every peer's buffer.
		if err := t.Barrier(); err != nil {
			return err
		}
		if off, v := marker(t.Rank); size >= int64(t.Size) {
			for _, m := range maps.bufs {
				if err := t.Write(m.Buffer, off, []byte{v}); err != nil {
					return err
				}
			}
		}
		mapped := maps.bufs
		if err := maps.Close(); err != nil {
			return t.Errorf("%w", err)
		}
		for _, m := range mapped {
			if err := m.Free(); !errors.Is(err, hal.ErrInvalidUsage) {
				return t.Errorf("second Free of an imported buffer: got %v, want an error wrapping hal.ErrInvalidUsage", err)
			}
		}
		if err := t.Barrier(); err != nil {
			return err
		}
		if size >= int64(t.Size) {
			got, err := t.Read(buf, 0, size)
			if err != nil {
				return err
			}
			for q := 0; q < t.Size; q++ {
				if q == t.Rank {
					continue
				}
				off, v := marker(q)
				if got[off] != v {
					return t.Errorf("byte %d of the %d-byte buffer is %#02x after rank %d wrote %#02x through its mapping", off, size, got[off], q, v)
				}
			}
		}
		if err := t.Barrier(); err != nil {
			return err
		}
	}
	return nil
}

// testBadHandles: Import refuses malformed, wrong-size and foreign handles
// with ErrInvalidArgument and handles of freed buffers with
// ErrInvalidUsage.
func testBadHandles(t *T) error {
	mm, err := memoryMapped(t)
	if err != nil {
		return err
	}
	buf, err := t.Alloc(4096)
	if err != nil {
		return err
	}
	h, err := mm.Export(buf)
	if err != nil {
		return t.Errorf("export: %w", err)
	}
	not := make(hal.Handle, len(h))
	for i := range h {
		not[i] = ^h[i]
	}
	bad := []struct {
		what string
		h    hal.Handle
		want error
	}{
		{"an empty handle", hal.Handle{}, hal.ErrInvalidArgument},
		{"a handle one byte short", h[:len(h)-1], hal.ErrInvalidArgument},
		{"a handle one byte long", append(append(hal.Handle{}, h...), 0), hal.ErrInvalidArgument},
		{"a handle of zeros", make(hal.Handle, len(h)), hal.ErrInvalidArgument},
		{"a handle with every bit flipped", not, hal.ErrInvalidArgument},
	}
	for _, c := range bad {
		m, err := mm.Import(c.h)
		if err == nil {
			m.Free()
			return t.Errorf("import of %s succeeded; want an error wrapping %v", c.what, c.want)
		}
		if !errors.Is(err, c.want) {
			return t.Errorf("import of %s: error %q does not wrap %v", c.what, err, c.want)
		}
	}
	// A handle of another backend (hal/host's, of another job) is refused
	// as a bad argument or as one of another job (the contract's two
	// sentinels for it).
	if t.Backend != "host" {
		if fh, err := foreignHandle(); err == nil {
			m, err := mm.Import(fh)
			if err == nil {
				m.Free()
				return t.Errorf("import of a handle of the host backend succeeded")
			}
			if !errors.Is(err, hal.ErrInvalidArgument) && !errors.Is(err, hal.ErrInvalidUsage) {
				return t.Errorf("import of a handle of the host backend: error %q wraps neither %v nor %v", err, hal.ErrInvalidArgument, hal.ErrInvalidUsage)
			}
		}
	}
	// A buffer freed by its exporter can no longer be imported.
	gone, err := t.Dev.Alloc(4096)
	if err != nil {
		return t.Errorf("alloc: %w", err)
	}
	hg, err := mm.Export(gone)
	if err != nil {
		gone.Free()
		return t.Errorf("export: %w", err)
	}
	if err := gone.Free(); err != nil {
		return t.Errorf("free: %w", err)
	}
	if _, err := mm.Export(gone); !errors.Is(err, hal.ErrInvalidUsage) {
		return t.Errorf("export of a freed buffer: got %v, want an error wrapping hal.ErrInvalidUsage", err)
	}
	all, err := t.AllGather(hg)
	if err != nil {
		return err
	}
	prev := (t.Rank + t.Size - 1) % t.Size
	if m, err := mm.Import(all[prev]); err == nil {
		m.Free()
		return t.Errorf("import of a buffer rank %d had freed succeeded; want an error wrapping hal.ErrInvalidUsage", prev)
	} else if !errors.Is(err, hal.ErrInvalidUsage) {
		return t.Errorf("import of a buffer rank %d had freed: error %q does not wrap hal.ErrInvalidUsage", prev, err)
	}
	return nil
}

// memoryMapped returns the device's memory-mapped interface: a backend whose
// links offer the capability must implement it.
func memoryMapped(t *T) (hal.MemoryMapped, error) {
	mm, ok := t.Dev.(hal.MemoryMapped)
	if !ok {
		return nil, t.Errorf("links offer %s but the device does not implement hal.MemoryMapped", hal.CapMemoryMapped)
	}
	return mm, nil
}

func nowSeconds() float64 { return float64(time.Now().UnixNano()) / 1e9 }

// foreignHandle exports a buffer of the host backend, when it is registered.
func foreignHandle() (hal.Handle, error) {
	d, err := hal.Open("host", hal.Config{JobID: jobID("foreign")})
	if err != nil {
		return nil, err
	}
	defer d.Close()
	b, err := d.Alloc(4096)
	if err != nil {
		return nil, err
	}
	defer b.Free()
	return d.(hal.MemoryMapped).Export(b)
}
