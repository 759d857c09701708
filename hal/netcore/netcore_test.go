package netcore

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/netcore/nettest"
)

// buf is a device buffer as ExportPort sees it.
type buf struct {
	addr uint64
	size int64
}

func (b buf) Addr() uint64 { return b.addr }
func (b buf) Size() int64  { return b.size }
func (b buf) Host() []byte { return nil }
func (b buf) Free() error  { return nil }

// hostBuf is a buffer the CPU can write (a hal/host or host-mapped one).
type hostBuf struct {
	buf
	host []byte
}

func (b hostBuf) Host() []byte { return b.host }

// call is one call a fakeEngine saw.
type call struct {
	op      string
	a, b, c uint64
	n       int64
}

// fakeEngine records the device addresses a LocalEngine passes on.
type fakeEngine struct {
	calls  []call
	closed int
}

func (e *fakeEngine) Put(dst, src uint64, n int64) error {
	e.calls = append(e.calls, call{op: "put", a: dst, b: src, n: n})
	return nil
}
func (e *fakeEngine) Copy(dst, src uint64, n int64) error {
	e.calls = append(e.calls, call{op: "copy", a: dst, b: src, n: n})
	return nil
}
func (e *fakeEngine) Signal(sem, cnt, count uint64) error {
	e.calls = append(e.calls, call{op: "signal", a: sem, b: cnt, c: count})
	return nil
}
func (e *fakeEngine) Mark() (uint64, error)      { return 7, nil }
func (e *fakeEngine) Completed() (uint64, error) { return 5, nil }
func (e *fakeEngine) Close() error               { e.closed++; return nil }

var format = HandleFormat{Magic: 0x57544854, Version: 3,
	ErrMalformed: errors.New("malformed"), ErrMagic: errors.New("bad magic"), ErrVer: errors.New("protocol version")}

func TestAddr(t *testing.T) {
	for _, c := range []struct {
		reg uint32
		off uint64
	}{{1, 0}, {1, 1}, {MaxReg, offMask}, {77, 12345}} {
		reg, off, ok := DecodeAddr(EncodeAddr(c.reg, c.off))
		if !ok || reg != c.reg || off != c.off {
			t.Errorf("DecodeAddr(EncodeAddr(%d, %d)) = %d, %d, %v", c.reg, c.off, reg, off, ok)
		}
	}
	if reg, off, _ := DecodeAddr(EncodeAddr(9, 0) + 4096); reg != 9 || off != 4096 {
		t.Errorf("Addr()+4096 decodes as registration %d offset %d", reg, off)
	}
	for _, a := range []uint64{0, 0x7f0012345678, AddrTag | 5} {
		if _, _, ok := DecodeAddr(a); ok {
			t.Errorf("DecodeAddr(%#x) accepted", a)
		}
	}
}

func TestHandleFormat(t *testing.T) {
	h := Handle{Job: 1, Nonce: 2, Rank: 3, Reg: 4, Size: 5}
	got, err := format.Decode(format.Encode(h))
	if err != nil || got != h {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, h)
	}
	bad := func(f func(b []byte) []byte) []byte { return f(format.Encode(h)) }
	for _, c := range []struct {
		name string
		b    []byte
		want error
		part string
	}{
		{"short", format.Encode(h)[:39], format.ErrMalformed, "39 bytes, want 40"},
		{"magic", bad(func(b []byte) []byte { b[0] ^= 1; return b }), format.ErrMagic, "in a handle"},
		{"version", bad(func(b []byte) []byte { b[4] = 9; return b }), format.ErrVer, "9 in a handle, want 3"},
		{"reserved", bad(func(b []byte) []byte { b[6] = 1; return b }), format.ErrMalformed, "reserved"},
		{"registration 0", format.Encode(Handle{Size: 1}), format.ErrMalformed, "registration id 0"},
		{"size 0", format.Encode(Handle{Reg: 1}), format.ErrMalformed, "size 0"},
		{"size 2 TiB", format.Encode(Handle{Reg: 1, Size: 2 * MaxBytes}), format.ErrMalformed, "size"},
	} {
		_, err := format.Decode(c.b)
		if err == nil || !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.part) {
			t.Errorf("%s: err = %v, want one wrapping %v mentioning %q", c.name, err, c.want, c.part)
		}
	}
}

// pair is two ranks' registries of one job, rank 0 exporting a window
// of 4 KiB at device address 0x10000.
func pair(t *testing.T) (r0, r1 *Registry, closed *bool, h hal.Handle) {
	t.Helper()
	closed = new(bool)
	r0 = NewRegistry("test", "test-transport", format, hal.HandleOwner{Job: 9, Rank: 0, Nonce: 11}, 2, func() bool { return *closed })
	r1 = NewRegistry("test", "test-transport", format, hal.HandleOwner{Job: 9, Rank: 1, Nonce: 13}, 2, func() bool { return false })
	h, err := r0.Export(buf{addr: 0x10000, size: 4096})
	if err != nil {
		t.Fatal(err)
	}
	return r0, r1, closed, h
}

func TestRegistry(t *testing.T) {
	r0, r1, closed, h := pair(t)
	b, err := r1.Import(h)
	if err != nil {
		t.Fatal(err)
	}
	if b.Addr() != EncodeAddr(1, 0) || b.Size() != 4096 || b.Host() != nil {
		t.Errorf("import: Addr %#x Size %d, want %#x 4096", b.Addr(), b.Size(), EncodeAddr(1, 0))
	}
	if err := r1.CheckRemote(0, 11, b.Addr()+4088, 8, "semaphore"); err != nil {
		t.Errorf("last word: %v", err)
	}
	nettest.ErrorMentions(t, r1.CheckRemote(0, 11, b.Addr()+4090, 8, "semaphore"), hal.ErrInvalidArgument, "semaphore", "beyond registration 1 of rank 0 (4096 bytes)")
	nettest.ErrorMentions(t, r1.CheckRemote(0, 12, b.Addr(), 8, "put destination"), hal.ErrInvalidUsage, "earlier incarnation of rank 0")
	nettest.ErrorMentions(t, r1.CheckRemote(1, 11, b.Addr(), 8, "put destination"), hal.ErrInvalidArgument, "not imported from rank 1")
	nettest.ErrorMentions(t, r1.CheckRemote(0, 11, 0x1234, 8, "put destination"), hal.ErrInvalidArgument, "not the address of a buffer imported")

	if d, err := r0.Resolve(EncodeAddr(1, 64), 8, 8); err != nil || d != 0x10040 {
		t.Errorf("Resolve(registration 1 + 64) = %#x, %v; want 0x10040", d, err)
	}
	for _, c := range []struct {
		a, n, align uint64
		part        string
	}{
		{EncodeAddr(1, 4), 8, 8, "not 8-byte aligned"},
		{EncodeAddr(1, 4000), 100, 1, "beyond registration 1 of 4096 bytes"},
		{EncodeAddr(2, 0), 8, 1, "unknown registration id 2"},
		{0x10000, 8, 1, "not a test-transport address"},
	} {
		if _, err := r0.Resolve(c.a, c.n, c.align); err == nil || !strings.Contains(err.Error(), c.part) {
			t.Errorf("Resolve(%#x, %d, %d) = %v, want an error mentioning %q", c.a, c.n, c.align, err, c.part)
		}
	}

	if w, err := r0.ResolveSignal(EncodeAddr(1, 8), EncodeAddr(1, 16)); err != nil || w.Sem != 0x10008 || w.Cnt != 0x10010 || w.SemHost != nil || w.CntHost != nil {
		t.Errorf("ResolveSignal = %+v, %v; want 0x10008, 0x10010, no host views", w, err)
	}
	if w, err := r0.ResolveSignal(EncodeAddr(1, 8), 0); err != nil || w.Sem != 0x10008 || w.Cnt != 0 {
		t.Errorf("ResolveSignal without a count word = %+v, %v", w, err)
	}
	if _, err := r0.ResolveSignal(EncodeAddr(1, 8), EncodeAddr(1, 12)); err == nil || !strings.Contains(err.Error(), "not 8-byte aligned") {
		t.Errorf("ResolveSignal of an unaligned count word: %v", err)
	}

	// A registration with a host view (registration 2): its words come
	// with their host bytes; a signal whose semaphore and count word mix
	// it with a device-only window is refused (each word has one writer).
	mem := make([]uint64, 64)
	hb := unsafe.Slice((*byte)(unsafe.Pointer(&mem[0])), 512)
	if _, err := r0.Export(hostBuf{buf: buf{addr: 0x20000, size: 512}, host: hb}); err != nil {
		t.Fatal(err)
	}
	d, view, hold, err := r0.ResolveHost(EncodeAddr(2, 64), 8, 8)
	if err != nil || d != 0x20040 || len(view) != 8 || &view[0] != &hb[64] {
		t.Errorf("ResolveHost(registration 2 + 64) = %#x, %d host bytes, %v; want 0x20040 and bytes 64-71 of its host view", d, len(view), err)
	}
	hold.Release()
	w, err := r0.ResolveSignal(EncodeAddr(2, 8), EncodeAddr(2, 16))
	if err != nil || w.SemHost == nil || w.CntHost == nil {
		t.Errorf("ResolveSignal in a host-visible window = %+v, %v; want both host views", w, err)
	}
	w.Release()
	if _, err := r0.ResolveSignal(EncodeAddr(2, 8), EncodeAddr(1, 16)); err == nil || !strings.Contains(err.Error(), "host-visible and a device-only window") {
		t.Errorf("ResolveSignal mixing a host-visible and a device-only window: %v; want it refused", err)
	}

	desc := "test: rank 1: engine to rank 0"
	if err := r1.CheckPut(desc, 0, 11, b.Addr(), 4096); err != nil {
		t.Errorf("CheckPut of the whole window: %v", err)
	}
	if err := r1.CheckPut(desc, 0, 11, 0x1234, 0); err != nil {
		t.Errorf("CheckPut of 0 bytes checks no address: %v", err)
	}
	nettest.ErrorMentions(t, r1.CheckPut(desc, 0, 11, b.Addr(), -1), hal.ErrInvalidArgument, desc+": put of -1 bytes")
	nettest.ErrorMentions(t, r1.CheckPut(desc, 0, 11, b.Addr()+1, 4096), hal.ErrInvalidArgument, desc+": put destination", "beyond registration 1")
	if err := r1.CheckSignal(desc, 0, 11, b.Addr(), 0); err != nil {
		t.Errorf("CheckSignal without a count word: %v", err)
	}
	nettest.ErrorMentions(t, r1.CheckSignal(desc, 0, 11, 0x1234, 0), hal.ErrInvalidArgument, desc+": signal: semaphore")
	nettest.ErrorMentions(t, r1.CheckSignal(desc, 0, 11, b.Addr(), b.Addr()+4092), hal.ErrInvalidArgument, desc+": signal: count word")
	if err := CheckCopy(desc, 0x100, 0x200, 8); err != nil {
		t.Errorf("CheckCopy of local addresses: %v", err)
	}
	nettest.ErrorMentions(t, CheckCopy(desc, b.Addr(), 0x200, 8), hal.ErrInvalidArgument, "a copy takes local addresses")
	nettest.ErrorMentions(t, CheckCopy(desc, 0x100, 0x200, -8), hal.ErrInvalidArgument, "copy of -8 bytes")

	// A second import counts a reference: the address stays valid until
	// both are freed.
	b2, err := r1.Import(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	nettest.ErrorMentions(t, b.Free(), hal.ErrInvalidUsage, "test: free registration 1 of rank 0: already freed")
	if err := r1.CheckRemote(0, 11, b2.Addr(), 8, "semaphore"); err != nil {
		t.Errorf("after one of two frees: %v", err)
	}
	b2.Free()
	nettest.ErrorMentions(t, r1.CheckRemote(0, 11, b2.Addr(), 8, "semaphore"), hal.ErrInvalidArgument, "freed")

	// The same registration with another size, another job, another
	// incarnation of this rank, a malformed handle.
	if _, err := r1.Import(h); err != nil {
		t.Fatal(err)
	}
	x, _ := format.Decode(h)
	x.Size = 8
	nettest.ErrorMentions(t, second(r1.Import(format.Encode(x))), hal.ErrInvalidUsage, "test: rank 1: import: registration 1 of rank 0 is already imported")
	x, _ = format.Decode(h)
	x.Job = 10
	nettest.ErrorMentions(t, second(r1.Import(format.Encode(x))), hal.ErrInvalidUsage, "another job")
	x, _ = format.Decode(h)
	x.Rank, x.Nonce = 1, 99
	nettest.ErrorMentions(t, second(r1.Import(format.Encode(x))), hal.ErrInvalidUsage, "another NetDevice")
	x.Rank = 5
	nettest.ErrorMentions(t, second(r1.Import(format.Encode(x))), hal.ErrInvalidArgument, "rank 5 in a job of 2 ranks")
	nettest.ErrorMentions(t, second(r1.Import(h[:10])), hal.ErrInvalidArgument, "test: rank 1: import", "10 bytes")

	// Bad exports, and a closed NetDevice.
	nettest.ErrorMentions(t, second(r0.Export(nil)), hal.ErrInvalidArgument, "test: rank 0: export a buffer of 0 bytes")
	nettest.ErrorMentions(t, second(r0.Export(buf{size: 2 * MaxBytes})), hal.ErrInvalidArgument, "want 1 byte to 1 TiB")
	*closed = true
	nettest.ErrorMentions(t, second(r0.Export(buf{addr: 1, size: 1})), hal.ErrInvalidUsage, "export on a closed NetDevice")
	nettest.ErrorMentions(t, second(r0.Import(h)), hal.ErrInvalidUsage, "import on a closed NetDevice")
	r0.Clear()
	if _, err := r0.Resolve(EncodeAddr(1, 0), 8, 1); err == nil {
		t.Error("Resolve after Clear succeeded")
	}
}

func second[T any](_ T, err error) error { return err }

func TestLocalEngine(t *testing.T) {
	r0, _, _, _ := pair(t)
	eng := &fakeEngine{}
	tracked := map[*LocalEngine]bool{}
	track := func(l *LocalEngine) bool { tracked[l] = true; return true }
	untrack := func(l *LocalEngine) { delete(tracked, l) }
	l, err := NewLocalEngine("test", 0, eng, r0, track, untrack)
	if err != nil {
		t.Fatal(err)
	}
	if !tracked[l] {
		t.Fatal("the engine was not tracked")
	}
	if err := l.Put(EncodeAddr(1, 16), 0x500, 32); err != nil {
		t.Fatal(err)
	}
	if err := l.Signal(EncodeAddr(1, 8), 0x600, 2); err != nil {
		t.Fatal(err)
	}
	if err := l.Signal(0x700, 0, 1); err != nil {
		t.Fatal(err)
	}
	want := []call{{op: "copy", a: 0x10010, b: 0x500, n: 32}, {op: "signal", a: 0x10008, b: 0x600, c: 2}, {op: "signal", a: 0x700, c: 1}}
	if fmt.Sprint(eng.calls) != fmt.Sprint(want) {
		t.Errorf("device engine saw %v, want %v", eng.calls, want)
	}
	nettest.ErrorMentions(t, l.Copy(EncodeAddr(1, 4090), 0x500, 32), hal.ErrInvalidArgument, "test: rank 0: local engine: destination", "beyond registration 1")
	nettest.ErrorMentions(t, l.Copy(0x500, EncodeAddr(3, 0), 8), hal.ErrInvalidArgument, "source", "unknown registration id 3")
	nettest.ErrorMentions(t, l.Signal(EncodeAddr(1, 4), 0, 1), hal.ErrInvalidArgument, "semaphore", "not 8-byte aligned")
	nettest.ErrorMentions(t, l.Signal(EncodeAddr(1, 8), EncodeAddr(1, 12), 1), hal.ErrInvalidArgument, "count word")
	nettest.ErrorMentions(t, l.Copy(0, 0, -1), hal.ErrInvalidArgument, "copy of -1 bytes")
	if m, _ := l.Mark(); m != 7 {
		t.Errorf("Mark = %d, want the device engine's 7", m)
	}
	if c, _ := l.Completed(); c != 5 {
		t.Errorf("Completed = %d, want the device engine's 5", c)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	nettest.ErrorMentions(t, l.Close(), hal.ErrInvalidUsage, "local engine closed twice")
	if err := l.CloseQuiet(); err != nil || eng.closed != 1 || tracked[l] {
		t.Errorf("after closes: CloseQuiet %v, device engine closed %d times, tracked %v", err, eng.closed, tracked[l])
	}

	// On a closed NetDevice the device engine is closed at once.
	eng2 := &fakeEngine{}
	_, err = NewLocalEngine("test", 0, eng2, r0, func(*LocalEngine) bool { return false }, untrack)
	nettest.ErrorMentions(t, err, hal.ErrInvalidUsage, "local engine on a closed NetDevice")
	if eng2.closed != 1 {
		t.Errorf("device engine closed %d times, want 1", eng2.closed)
	}
}

func TestFailures(t *testing.T) {
	var f Failures
	if f.Err() != nil || f.Peer(1) != nil || f.Count() != 0 {
		t.Fatal("zero Failures reports a failure")
	}
	e1, e2, e3 := errors.New("one"), errors.New("two"), errors.New("three")
	if !f.Record(1, e1) || f.Record(1, e2) || !f.Record(2, e3) {
		t.Error("Record did not report first failures by rank")
	}
	if f.Err() != e1 || f.Peer(1) != e1 || f.Peer(2) != e3 || f.Peer(0) != nil || f.Count() != 2 {
		t.Errorf("Err %v Peer(1) %v Peer(2) %v Count %d", f.Err(), f.Peer(1), f.Peer(2), f.Count())
	}
	for i := range 20 {
		f.Refuse(fmt.Errorf("refused %d", i))
	}
	r := f.Refused()
	if len(r) != 16 || r[0].Error() != "refused 4" || r[15].Error() != "refused 19" {
		t.Errorf("Refused = %v, want refused 4 to 19", r)
	}
}

func TestNotifier(t *testing.T) {
	var n Notifier
	n.Notify() // nobody waits: no effect
	ch := n.Wait()
	if n.Wait() != ch {
		t.Fatal("two waiters before a Notify got different channels")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Error("Notify did not wake the waiter within 30 s")
		}
	}()
	n.Notify()
	<-done
	if n.Wait() == ch {
		t.Error("a Wait after Notify returned the closed channel")
	}
}

func TestEngineState(t *testing.T) {
	var s EngineState
	e1, e2 := errors.New("lost"), errors.New("later")
	if s.Err() != nil || !s.Fail(e1) || s.Fail(e2) || s.Err() != e1 {
		t.Fatalf("Fail/Err: the first failure does not stick (Err %v)", s.Err())
	}
	shutdowns := 0
	shutdown := func() error { shutdowns++; return s.Err() }
	// Not yet reported by a call: the NetDevice's close returns it once.
	if err := s.CloseQuiet(shutdown); err != e1 {
		t.Errorf("CloseQuiet = %v, want %v", err, e1)
	}
	if err := s.CloseQuiet(shutdown); err != nil || shutdowns != 1 {
		t.Errorf("second CloseQuiet = %v after %d shutdowns, want nil after 1", err, shutdowns)
	}
	nettest.ErrorMentions(t, s.Close(func() string { return "test: engine" }, shutdown), hal.ErrInvalidUsage, "test: engine: closed twice")

	// Reported by a call: Close returns it, CloseQuiet does not repeat it.
	var r EngineState
	r.Fail(e1)
	if r.Report(e2) != e2 || r.Report(e1) != e1 {
		t.Error("Report changed its argument")
	}
	if err := r.CloseQuiet(func() error { return e1 }); err != nil {
		t.Errorf("CloseQuiet after a call reported the failure = %v, want nil", err)
	}
	var c EngineState
	if err := c.Close(func() string { return "x" }, func() error { return e2 }); err != e2 {
		t.Errorf("Close = %v, want the shutdown's %v", err, e2)
	}
	if err := c.CloseQuiet(nil); err != nil {
		t.Errorf("CloseQuiet after Close returned its error = %v, want nil", err)
	}
}

func TestMarks(t *testing.T) {
	m := NewMarks(2)
	t1 := m.Mark(3, 0) // covers requests 1..3
	t2 := m.Mark(5, 1) // covers 1..5
	if c := m.Completed(2); c != 0 {
		t.Errorf("Completed(2) = %d, want 0 (ticket %d needs 3 requests)", c, t1)
	}
	if c := m.Completed(4); c != t1 {
		t.Errorf("Completed(4) = %d, want ticket %d", c, t1)
	}
	if c := m.Completed(1); c != t1 {
		t.Errorf("a stale Completed(1) = %d, want %d still", c, t1)
	}
	if c := m.Completed(5); c != t2 {
		t.Errorf("Completed(5) = %d, want ticket %d", c, t2)
	}
	if t3 := m.Mark(5, 5); m.Completed(5) != t3 {
		t.Errorf("a mark with nothing outstanding is not complete at once")
	}
}

func TestCopyMark(t *testing.T) {
	e := &fakeEngine{}
	tk, err := CopyMark(e, 0x100, 0x200, 64)
	if err != nil || tk != 7 {
		t.Fatalf("CopyMark = %d, %v; want the engine's ticket 7", tk, err)
	}
	if want := []call{{op: "copy", a: 0x100, b: 0x200, n: 64}}; fmt.Sprint(e.calls) != fmt.Sprint(want) {
		t.Errorf("engine saw %v, want %v", e.calls, want)
	}
}

func TestLostPeer(t *testing.T) {
	cause := errors.New("progress exchange stopped")
	nettest.ErrorMentions(t, LostPeer("test", 0, 4, 3, cause), hal.ErrRemote, "test: rank 0: rank 3 is lost: progress exchange stopped")
	for _, peer := range []int{-1, 0, 4} {
		if err := LostPeer("test", 0, 4, peer, cause); err != nil {
			t.Errorf("LostPeer of rank %d in a job of 4 seen from rank 0 = %v, want nil", peer, err)
		}
	}
}

func TestAwait(t *testing.T) {
	var n Notifier
	var mu sync.Mutex
	ready := false
	isReady := func() bool { mu.Lock(); defer mu.Unlock(); return ready }
	noErr := func() error { return nil }
	desc := func() string { return "test: engine to rank 1" }
	go func() {
		mu.Lock()
		ready = true
		mu.Unlock()
		n.Notify()
	}()
	if err := n.Await(Wait{Describe: desc, What: "ring", Timeout: 30 * time.Second, Ready: isReady, Err: noErr}); err != nil {
		t.Errorf("Await of a condition made true and notified: %v", err)
	}
	never := func() bool { return false }
	failed := errors.New("peer lost")
	if err := n.Await(Wait{Describe: desc, What: "ring", Timeout: 30 * time.Second, Ready: never, Err: func() error { return failed }}); err != failed {
		t.Errorf("Await of a failed waiter = %v, want %v", err, failed)
	}
	stop := make(chan struct{})
	close(stop)
	stopped := errors.New("stopped")
	if err := n.Await(Wait{Describe: desc, What: "ring", Timeout: 30 * time.Second, Ready: never, Err: noErr, Stop: stop, Stopped: stopped}); err != stopped {
		t.Errorf("Await of a stopped waiter = %v, want %v", err, stopped)
	}
	err := n.Await(Wait{Describe: desc, What: "request ring full", Timeout: time.Millisecond, Ready: never, Err: noErr})
	nettest.ErrorMentions(t, err, hal.ErrTimeout, "test: engine to rank 1: request ring full: no progress within 1ms")
}

func TestCloseQuietAll(t *testing.T) {
	e1 := errors.New("engine 1 failed")
	var order []int
	errs := CloseQuietAll([]int{0, 1, 2}, func(i int) error {
		order = append(order, i)
		if i == 1 {
			return e1
		}
		return nil
	})
	if fmt.Sprint(order) != "[0 1 2]" || len(errs) != 1 || errs[0] != e1 {
		t.Errorf("closed %v, errors %v; want [0 1 2] and [%v]", order, errs, e1)
	}
}

// TestUnexport: an unexported registration is refused afterwards, a buffer
// never exported is an error, and Unexport returns only after a receiver
// holding the host view (ResolveHost, ResolveSignal) has released it.
func TestUnexport(t *testing.T) {
	r := NewRegistry("test", "test-transport", format, hal.HandleOwner{Job: 9, Rank: 0, Nonce: 7}, 2, func() bool { return false })
	mem := make([]uint64, 8)
	hb := unsafe.Slice((*byte)(unsafe.Pointer(&mem[0])), 64)
	b := hostBuf{buf: buf{addr: 0x30000, size: 64}, host: hb}
	if _, err := r.Export(b); err != nil {
		t.Fatal(err)
	}
	_, _, hold, err := r.ResolveHost(EncodeAddr(1, 0), 64, 1)
	if err != nil {
		t.Fatal(err)
	}
	w, err := r.ResolveSignal(EncodeAddr(1, 8), EncodeAddr(1, 16))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Unexport(b) }()
	// Unexport takes the registration out of the table at once …
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, err := r.Resolve(EncodeAddr(1, 0), 8, 1)
		if err != nil {
			if !strings.Contains(err.Error(), "unknown registration id 1") {
				t.Fatalf("Resolve after Unexport: %v; want an unknown registration", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the registration is still resolvable 10 s after Unexport began")
		}
		time.Sleep(time.Millisecond)
	}
	// … but returns only once both holders have released it.
	hold.Release()
	select {
	case err := <-done:
		t.Fatalf("Unexport returned (%v) while a signal's words were still held", err)
	case <-time.After(50 * time.Millisecond):
	}
	w.Release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Unexport: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Unexport did not return 10 s after the holders released the registration")
	}
	nettest.ErrorMentions(t, r.Unexport(b), hal.ErrInvalidArgument, "not exported")
	nettest.ErrorMentions(t, r.Unexport(nil), hal.ErrInvalidArgument, "nil buffer")
}

// TestLocalHost: a sending engine's source is found in the host-visible
// registration that contains it, whatever the order of the exports;
// ranges across a registration's end, in a device-only registration or
// outside every one have no host view; an unexported registration is no
// longer found.
func TestLocalHost(t *testing.T) {
	r := NewRegistry("test", "test-transport", format, hal.HandleOwner{Job: 9, Rank: 0, Nonce: 7}, 2, func() bool { return false })
	bufs := map[uint64]hostBuf{}
	for _, a := range []uint64{0x50000, 0x10000, 0x30000} { // out of order
		mem := make([]uint64, 512)
		b := hostBuf{buf: buf{addr: a, size: 4096}, host: unsafe.Slice((*byte)(unsafe.Pointer(&mem[0])), 4096)}
		bufs[a] = b
		if _, err := r.Export(b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Export(buf{addr: 0x20000, size: 4096}); err != nil { // device-only
		t.Fatal(err)
	}
	for _, c := range []struct {
		addr, n, base uint64 // base 0: no host view
	}{
		{0x10000, 4096, 0x10000}, {0x30010, 16, 0x30000}, {0x50ff8, 8, 0x50000},
		{0x50ff8, 16, 0}, {0x20000, 8, 0}, {0x0fff0, 8, 0}, {0x40000, 8, 0}, {0x60000, 8, 0},
	} {
		host, hold := r.LocalHost(c.addr, c.n)
		switch {
		case c.base == 0 && host != nil:
			t.Errorf("LocalHost(%#x, %d): a host view; want none", c.addr, c.n)
		case c.base != 0 && (len(host) != int(c.n) || &host[0] != &bufs[c.base].host[c.addr-c.base]):
			t.Errorf("LocalHost(%#x, %d): %d bytes; want bytes %d… of the registration at %#x", c.addr, c.n, len(host), c.addr-c.base, c.base)
		}
		hold.Release()
	}
	if err := r.Unexport(bufs[0x30000]); err != nil {
		t.Fatal(err)
	}
	if host, hold := r.LocalHost(0x30010, 16); host != nil {
		hold.Release()
		t.Error("LocalHost finds an unexported registration")
	}
}
