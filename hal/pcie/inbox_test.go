package pcie

import (
	"bytes"
	"errors"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
)

// fakeMem is device memory of a fake GPU: addresses from base.
type fakeMem struct {
	base  uint64
	words []uint64
}

func newFakeMem(base uint64, n int) *fakeMem {
	return &fakeMem{base: base, words: make([]uint64, (n+7)/8)}
}

func (m *fakeMem) bytes() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&m.words[0])), 8*len(m.words))
}

func (m *fakeMem) at(addr uint64, n int64) []byte {
	off := addr - m.base
	return m.bytes()[off : off+uint64(n)]
}

func (m *fakeMem) word(addr uint64) *uint64 { return &m.words[(addr-m.base)/8] }

func (m *fakeMem) contains(addr uint64, n int64) bool {
	return addr >= m.base && n >= 0 && addr-m.base+uint64(n) <= uint64(8*len(m.words))
}

// fakeStream runs queued work in order, a random amount of it each time
// a completion is polled, as a CUDA stream runs behind the host.
type fakeStream struct {
	q      []func()
	ran    int
	events []int // completion i: the work queued before it
	rnd    *rand.Rand
}

func newFakeStream(seed int64, n int) *fakeStream {
	return &fakeStream{events: make([]int, n), rnd: rand.New(rand.NewSource(seed))}
}

func (f *fakeStream) enqueue(fn func()) { f.q = append(f.q, fn) }
func (f *fakeStream) record(i int)      { f.events[i] = len(f.q) }

// step runs a random amount (0 to 2) of the queued work.
func (f *fakeStream) step() {
	for n := f.rnd.Intn(3); n > 0 && f.ran < len(f.q); n-- {
		f.q[f.ran]()
		f.q[f.ran] = nil
		f.ran++
	}
}

func (f *fakeStream) done(i int) (bool, error) {
	f.step()
	return f.ran >= f.events[i], nil
}

type fakeStager struct {
	s   *fakeStream
	mem *fakeMem
}

func (f *fakeStager) stage(i int, slot []byte, src uint64) error {
	data := f.mem.at(src, int64(len(slot)))
	f.s.enqueue(func() { copy(slot, data) })
	f.s.record(i)
	return nil
}

func (f *fakeStager) copyLocal(i int, dst, src uint64, n int64) error {
	d, s := f.mem.at(dst, n), f.mem.at(src, n)
	f.s.enqueue(func() { copy(d, s) })
	f.s.record(i)
	return nil
}

func (f *fakeStager) done(i int) (bool, error) { return f.s.done(i) }

type fakeUnstager struct {
	s   *fakeStream
	mem *fakeMem
}

func (f *fakeUnstager) unstage(i int, dst uint64, slot []byte) error {
	d := f.mem.at(dst, int64(len(slot)))
	f.s.enqueue(func() { copy(d, slot) })
	f.s.record(i)
	return nil
}

func (f *fakeUnstager) done(i int) (bool, error) { return f.s.done(i) }

func (f *fakeUnstager) signal(countAddr, count, semAddr, value uint64) error {
	f.s.enqueue(func() {
		if countAddr != 0 {
			atomic.StoreUint64(f.mem.word(countAddr), count)
		}
		atomic.StoreUint64(f.mem.word(semAddr), value)
	})
	return nil
}

func newTestInbox(t *testing.T, g geometry) *inbox {
	t.Helper()
	mem := make([]uint64, g.size()/8)
	b, err := initInbox(unsafe.Slice((*byte)(unsafe.Pointer(&mem[0])), 8*len(mem)), g, 1)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestInboxTwoGoroutines moves 3000 requests through an inbox of four
// small slots and eight descriptors: puts of random sizes (split across
// slots), local copies that later puts read, signals carrying counts,
// marks whose sources are overwritten once complete. A sender goroutine
// issues, a progress goroutine moves the sender on (as the device's
// goroutine does), a receiver goroutine polls, and a checker waits for
// each signal and checks every put before it.
func TestInboxTwoGoroutines(t *testing.T) {
	g := geometry{slots: 4, slotBytes: 256, descs: 8}
	box := newTestInbox(t, g)
	const srcBase, dstBase = 0x100000, 0x900000
	const requests = 3000
	srcMem := newFakeMem(srcBase, 4<<20)
	dstMem := newFakeMem(dstBase, 2<<20)
	const semAddr, countAddr = dstBase, dstBase + 8
	s := newSender(box, &fakeStager{s: newFakeStream(1, sendFlights), mem: srcMem}, "test sender")
	rs := newFakeStream(2, g.slots)
	r := newReceiver(box, &fakeUnstager{s: rs, mem: dstMem}, "test receiver",
		func(addr uint64, n int64) bool { return dstMem.contains(addr, n) })

	type region struct {
		dst  uint64
		want []byte
	}
	var (
		regions []region
		signals []int // signal k follows regions[:signals[k-1]]
	)
	rnd := rand.New(rand.NewSource(3))
	srcNext, dstNext := uint64(srcBase), uint64(dstBase+64)
	alloc := func(next *uint64, n int) uint64 {
		a := *next
		*next += uint64(n+63) &^ 63
		return a
	}
	fill := func(b []byte) {
		for i := range b {
			b[i] = byte(rnd.Intn(256))
		}
	}

	// Issue everything first from this goroutine's view, but with the
	// receiver and progress running concurrently.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // device progress goroutine
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			s.tryProgress()
		}
	}()
	recvDone := make(chan error, 1)
	go func() { // receiver
		defer wg.Done()
		deadline := time.Now().Add(60 * time.Second)
		for !r.finished() || rs.ran < len(rs.q) {
			rs.step() // the stream runs on its own
			if !r.poll() && time.Now().After(deadline) {
				recvDone <- errors.New("receiver: deadline")
				return
			}
		}
		recvDone <- r.err
	}()

	// The checker waits for each signal in turn.
	type check struct {
		sem     uint64
		regions []region
		count   uint64
	}
	checks := make(chan check, requests)
	checkErr := make(chan error, 1)
	go func() {
		for c := range checks {
			deadline := time.Now().Add(60 * time.Second)
			for atomic.LoadUint64(dstMem.word(semAddr)) < c.sem {
				if time.Now().After(deadline) {
					checkErr <- errors.New("checker: semaphore deadline")
					return
				}
				time.Sleep(time.Microsecond)
			}
			// Counts increase with the signals: the word holds this
			// signal's count or a later one's.
			if cnt := atomic.LoadUint64(dstMem.word(countAddr)); cnt < c.count {
				checkErr <- errors.New("checker: count word older than the signal")
				return
			}
			for _, rg := range c.regions {
				if !bytes.Equal(dstMem.at(rg.dst, int64(len(rg.want))), rg.want) {
					checkErr <- errors.New("checker: data before a signal is not in place")
					return
				}
			}
		}
		checkErr <- nil
	}()

	var pendingMarks []struct {
		ticket  uint64
		sources [][]byte
	}
	var sinceMark [][]byte
	for i := 0; i < requests; i++ {
		switch k := rnd.Intn(20); {
		case k < 14: // a put
			n := 1 + rnd.Intn(900)
			src := alloc(&srcNext, n)
			fill(srcMem.at(src, int64(n)))
			dst := alloc(&dstNext, n)
			regions = append(regions, region{dst, append([]byte(nil), srcMem.at(src, int64(n))...)})
			if err := s.put(dst, src, int64(n)); err != nil {
				t.Fatal(err)
			}
			sinceMark = append(sinceMark, srcMem.at(src, int64(n)))
		case k < 16: // a local copy, then a put of the copy
			n := 8 + rnd.Intn(600)
			a, b := alloc(&srcNext, n), alloc(&srcNext, n)
			fill(srcMem.at(a, int64(n)))
			fill(srcMem.at(b, int64(n)))
			if err := s.copyLocal(b, a, int64(n)); err != nil {
				t.Fatal(err)
			}
			dst := alloc(&dstNext, n)
			regions = append(regions, region{dst, append([]byte(nil), srcMem.at(a, int64(n))...)})
			if err := s.put(dst, b, int64(n)); err != nil {
				t.Fatal(err)
			}
		case k < 18: // a signal with a count
			signals = append(signals, len(regions))
			if err := s.signal(semAddr, countAddr, uint64(i)); err != nil {
				t.Fatal(err)
			}
			checks <- check{sem: uint64(len(signals)), regions: regions, count: uint64(i)}
		default: // a mark; older marks' sources are overwritten once complete
			tk, err := s.mark()
			if err != nil {
				t.Fatal(err)
			}
			pendingMarks = append(pendingMarks, struct {
				ticket  uint64
				sources [][]byte
			}{tk, sinceMark})
			sinceMark = nil
			done, err := s.completedTicket()
			if err != nil {
				t.Fatal(err)
			}
			for len(pendingMarks) > 0 && pendingMarks[0].ticket <= done {
				for _, src := range pendingMarks[0].sources {
					for j := range src {
						src[j] ^= 0xff
					}
				}
				pendingMarks = pendingMarks[1:]
			}
		}
	}
	signals = append(signals, len(regions))
	if err := s.signal(semAddr, 0, 0); err != nil {
		t.Fatal(err)
	}
	checks <- check{sem: uint64(len(signals)), regions: regions, count: atomic.LoadUint64(dstMem.word(countAddr))}
	close(checks)
	if err := <-checkErr; err != nil {
		t.Fatal(err)
	}
	last, err := s.mark()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		done, err := s.completedTicket()
		if err != nil {
			t.Fatal(err)
		}
		if done >= last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ticket %d never completed (completed %d)", last, done)
		}
	}
	if err := s.drain(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := <-recvDone; err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if got := atomic.LoadUint64(dstMem.word(semAddr)); got != uint64(len(signals)) {
		t.Errorf("semaphore = %d, want %d", got, len(signals))
	}
	for i, rg := range regions {
		if !bytes.Equal(dstMem.at(rg.dst, int64(len(rg.want))), rg.want) {
			t.Fatalf("region %d differs", i)
		}
	}
	if box.load(offHead) != box.load(offTail) || box.load(offFreed) != s.slotsUsed || box.load(offClosed) != 1 {
		t.Errorf("inbox counters head %d tail %d freed %d (staged %d) closed %d", box.load(offHead), box.load(offTail), box.load(offFreed), s.slotsUsed, box.load(offClosed))
	}
	if err := s.put(dstBase, srcBase, 8); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("put after close = %v, want ErrInvalidUsage", err)
	}
}

// TestSenderNeverBlocks queues far more than the inbox holds with no
// receiver: every call returns, tickets stay incomplete, and the requests
// go through once a receiver polls.
func TestSenderNeverBlocks(t *testing.T) {
	g := geometry{slots: 2, slotBytes: 64, descs: 4}
	box := newTestInbox(t, g)
	src := newFakeMem(0x1000, 1<<16)
	dst := newFakeMem(0x100000, 1<<16)
	s := newSender(box, &fakeStager{s: newFakeStream(4, sendFlights), mem: src}, "sender")
	for i := range src.bytes() {
		src.bytes()[i] = byte(i * 7)
	}
	for i := 0; i < 200; i++ {
		if err := s.put(0x100000+uint64(i*200), 0x1000+uint64(i*200), 200); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.signal(0x100000+0xf000, 0, 0); err != nil {
		t.Fatal(err)
	}
	tk, _ := s.mark()
	for i := 0; i < 100; i++ {
		s.tryProgress()
	}
	if done, _ := s.completedTicket(); done >= tk {
		t.Fatalf("ticket %d complete with no receiver", tk)
	}
	if s.opCount == 0 {
		t.Fatal("no request waits for the receiver")
	}
	rs := newFakeStream(5, g.slots)
	r := newReceiver(box, &fakeUnstager{s: rs, mem: dst}, "receiver", dst.contains)
	deadline := time.Now().Add(10 * time.Second)
	for atomic.LoadUint64(dst.word(0x100000+0xf000)) != 1 {
		rs.step()
		r.poll()
		s.tryProgress()
		if time.Now().After(deadline) {
			t.Fatal("signal never arrived")
		}
	}
	if !bytes.Equal(dst.bytes()[:200*200], src.bytes()[:200*200]) {
		t.Error("data differs")
	}
	for {
		done, err := s.completedTicket()
		if err != nil {
			t.Fatal(err)
		}
		if done >= tk {
			break
		}
		r.poll()
	}
}

// TestReceiverRejects feeds a receiver descriptors that break the
// protocol: it fails, leaves the failure in the inbox, and the sender
// reports it as hal.ErrRemote.
func TestReceiverRejects(t *testing.T) {
	g := geometry{slots: 2, slotBytes: 64, descs: 4}
	tests := []struct {
		name string
		d    desc
		code uint64
		text string
	}{
		{"bad kind", desc{kind: 9}, rxErrCorrupt, "has kind 9"},
		{"bad number", desc{kind: descData, slot: 0, a: 0x100000, b: 8, seq: 5}, rxErrCorrupt, "carries number 5"},
		{"wrong slot", desc{kind: descData, slot: 1, a: 0x100000, b: 8}, rxErrCorrupt, "names slot 1 (expected 0)"},
		{"too long", desc{kind: descData, slot: 0, a: 0x100000, b: 65}, rxErrCorrupt, "and 65 bytes"},
		{"outside", desc{kind: descData, slot: 0, a: 0x900000, b: 8}, rxErrRange, "outside the buffers"},
		{"signal outside", desc{kind: descSignal, a: 0x900000, d: 1}, rxErrRange, "semaphore 0x900000"},
		{"misaligned signal", desc{kind: descSignal, a: 0x100004, d: 1}, rxErrRange, "semaphore 0x100004"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			box := newTestInbox(t, g)
			dst := newFakeMem(0x100000, 4096)
			r := newReceiver(box, &fakeUnstager{s: newFakeStream(6, g.slots), mem: dst}, "receiver", dst.contains)
			box.writeDesc(0, tt.d)
			if tt.d.seq != 0 { // writeDesc numbers descriptors: overwrite
				box.store(box.descOffset(0)+40, tt.d.seq)
			}
			box.store(offHead, 1)
			r.poll()
			if !errors.Is(r.err, hal.ErrRemote) || !strings.Contains(r.err.Error(), tt.text) {
				t.Errorf("receiver error %v, want ErrRemote containing %q", r.err, tt.text)
			}
			if c := box.load(offRxErr); c != tt.code {
				t.Errorf("failure code %d, want %d", c, tt.code)
			}
			if !r.finished() || r.poll() {
				t.Error("a failed receiver still works")
			}
			s := newSender(box, &fakeStager{s: newFakeStream(7, sendFlights), mem: dst}, "sender")
			if err := s.put(0x100000, 0x100000, 8); !errors.Is(err, hal.ErrRemote) || !strings.Contains(err.Error(), rxErrText(tt.code)) {
				t.Errorf("sender after a receiver failure: %v", err)
			}
		})
	}
}

func TestInboxHeader(t *testing.T) {
	g := geometry{slots: 3, slotBytes: 4096, descs: 16}
	box := newTestInbox(t, g)
	got, err := openInbox(box.mem)
	if err != nil {
		t.Fatal(err)
	}
	if got.g != g {
		t.Errorf("geometry %+v, want %+v", got.g, g)
	}
	if g.slotsOffset()%4096 != 0 || g.size() != g.slotsOffset()+3*4096 {
		t.Errorf("slots at %d, size %d", g.slotsOffset(), g.size())
	}
	if defaultGeometry.size() != 8192+32<<20 {
		t.Errorf("default inbox is %d bytes", defaultGeometry.size())
	}
	bad := []struct {
		name string
		mod  func(b *inbox)
		text string
	}{
		{"magic", func(b *inbox) { b.store(offMagic, 1) }, "magic 0x1"},
		{"version", func(b *inbox) { b.store(offVersion, 2|3<<32) }, "version 2"},
		{"geometry", func(b *inbox) { b.store(offSlotBytes, 1<<40) }, "does not fit"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			b := newTestInbox(t, g)
			tt.mod(b)
			if _, err := openInbox(b.mem); !errors.Is(err, hal.ErrRemote) || !strings.Contains(err.Error(), tt.text) {
				t.Errorf("openInbox = %v, want ErrRemote containing %q", err, tt.text)
			}
		})
	}
	if _, err := openInbox(box.mem[:100]); !errors.Is(err, hal.ErrRemote) {
		t.Errorf("openInbox(short) = %v", err)
	}
	if _, err := initInbox(box.mem[:4096], g, 1); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("initInbox(short) = %v", err)
	}
}

func TestSenderArguments(t *testing.T) {
	g := geometry{slots: 2, slotBytes: 64, descs: 4}
	s := newSender(newTestInbox(t, g), &fakeStager{s: newFakeStream(8, sendFlights), mem: newFakeMem(0, 64)}, "sender")
	if err := s.put(0, 0, -1); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("put(-1) = %v", err)
	}
	for _, c := range [][2]uint64{{0, 0}, {12, 0}, {16, 4}} {
		if err := s.signal(c[0], c[1], 0); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Errorf("signal(%#x, %#x) = %v", c[0], c[1], err)
		}
	}
	if err := s.put(8, 0, 0); err != nil {
		t.Errorf("put of nothing = %v", err)
	}
	for want := uint64(1); want <= 3; want++ {
		tk, err := s.mark()
		if err != nil || tk != want {
			t.Fatalf("mark = %d, %v; want %d", tk, err, want)
		}
		if done, _ := s.completedTicket(); done != want {
			t.Errorf("completed = %d with nothing queued, want %d", done, want)
		}
	}
	if err := s.drain(time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.drain(time.Now()); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("second drain = %v", err)
	}
}
