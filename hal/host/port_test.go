package host

import (
	"bytes"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
)

// portPair opens two devices of one job (two "processes"), allocates a
// window on b exported for ports and imported on a, and a source on a.
func portPair(t *testing.T, job string, size int64) (a, b *Device, src, window, remote hal.Buffer) {
	t.Helper()
	a, b = open(t, job, 0), open(t, job, 1)
	var err error
	if src, err = a.Alloc(size); err != nil {
		t.Fatal(err)
	}
	if window, err = b.Alloc(size); err != nil {
		t.Fatal(err)
	}
	h, err := b.ExportPort(window)
	if err != nil {
		t.Fatal(err)
	}
	if remote, err = a.ImportPort(h); err != nil {
		t.Fatal(err)
	}
	return a, b, src, window, remote
}

func newEngine(t *testing.T, d *Device, peer hal.Endpoint) *Engine {
	t.Helper()
	e, err := d.NewEngine(peer)
	if err != nil {
		t.Fatal(err)
	}
	return e.(*Engine)
}

func loadWord(b hal.Buffer, off int64) uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&b.Host()[off])))
}

// waitWord polls the 64-bit word at off of b until it reaches want.
func waitWord(t *testing.T, b hal.Buffer, off int64, want uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for loadWord(b, off) < want {
		if time.Now().After(deadline) {
			t.Fatalf("word at %d is %d, want %d", off, loadWord(b, off), want)
		}
		time.Sleep(10 * time.Microsecond)
	}
}

// drain waits until Completed reaches the ticket of a Mark.
func drain(t *testing.T, e hal.Engine) {
	t.Helper()
	tk, err := e.Mark()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := e.Completed()
		if err != nil {
			t.Fatal(err)
		}
		if c >= tk {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("completed %d, want %d", c, tk)
		}
		time.Sleep(10 * time.Microsecond)
	}
}

func TestLinkOffersPortMapped(t *testing.T) {
	a, b := open(t, "portlink", 0), open(t, "portlink", 1)
	for _, ep := range []hal.Endpoint{a.Endpoint(), b.Endpoint()} {
		if got, want := a.Link(ep).Caps, hal.CapMemoryMapped|hal.CapPortMapped|hal.CapSwitchMapped; got != want {
			t.Errorf("link to %+v: %s, want %s", ep, got, want)
		}
	}
	far := b.Endpoint()
	far.HostID = "elsewhere"
	if _, err := a.NewEngine(far); !errors.Is(err, hal.ErrNotSupported) {
		t.Errorf("engine to another host: %v, want ErrNotSupported", err)
	}
}

func TestEnginePutSignal(t *testing.T) {
	const size = 1 << 20
	a, b, src, window, remote := portPair(t, "portput", size+64)
	e := newEngine(t, a, b.Endpoint())
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i*7 + 3)
	}
	copy(src.Host(), want)
	sem, cnt := int64(size), int64(size+8)
	if err := e.Put(remote.Addr(), src.Addr(), size); err != nil {
		t.Fatal(err)
	}
	if err := e.Signal(remote.Addr()+uint64(sem), remote.Addr()+uint64(cnt), 42); err != nil {
		t.Fatal(err)
	}
	waitWord(t, window, sem, 1)
	if !bytes.Equal(window.Host()[:size], want) {
		t.Fatal("data incomplete when the signal was observed")
	}
	if got := loadWord(window, cnt); got != 42 {
		t.Fatalf("count word %d, want 42", got)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// Many requests: each put writes a distinct value to one slot and the next
// signal bumps the semaphore; when the semaphore reads k, slots < k hold
// their values. The ring wraps many times.
func TestEngineOrderingManyRequests(t *testing.T) {
	const n = 8 * engineRing
	a, b, src, window, remote := portPair(t, "portorder", 8*n+8)
	e := newEngine(t, a, b.Endpoint())
	sem := int64(8 * n)
	s := src.Host()
	for i := 0; i < n; i++ {
		*(*uint64)(unsafe.Pointer(&s[8*i])) = uint64(i) + 1
	}
	checked := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(10 * time.Second)
		for {
			k := loadWord(window, sem)
			for i := uint64(0); i < k; i++ {
				if got := loadWord(window, int64(8*i)); got != i+1 {
					checked <- errors.New("slot not written before its signal")
					return
				}
			}
			if k == n {
				checked <- nil
				return
			}
			if time.Now().After(deadline) {
				checked <- errors.New("timed out")
				return
			}
		}
	}()
	for i := 0; i < n; i++ {
		if err := e.Put(remote.Addr()+uint64(8*i), src.Addr()+uint64(8*i), 8); err != nil {
			t.Fatal(err)
		}
		if err := e.Signal(remote.Addr()+uint64(sem), 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-checked; err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// Copy on the own endpoint's engine, then a local signal: the copy is done
// when the signal is seen.
func TestEngineCopyThenSignal(t *testing.T) {
	a := open(t, "portcopy", 0)
	buf, err := a.Alloc(3<<20 + 8)
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, a, a.Endpoint())
	h := buf.Host()
	for i := 0; i < 1<<20; i++ {
		h[i] = byte(i % 251)
	}
	sem := int64(3 << 20)
	for round := 1; round <= 2; round++ {
		dst := uint64(round) << 20
		if err := e.Copy(buf.Addr()+dst, buf.Addr(), 1<<20); err != nil {
			t.Fatal(err)
		}
		if err := e.Signal(buf.Addr()+uint64(sem), 0, 0); err != nil {
			t.Fatal(err)
		}
		waitWord(t, buf, sem, uint64(round))
		if !bytes.Equal(h[dst:dst+1<<20], h[:1<<20]) {
			t.Fatalf("round %d: copy incomplete when the signal was observed", round)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestEngineTickets(t *testing.T) {
	a, b, src, window, remote := portPair(t, "porttickets", 1<<20)
	e := newEngine(t, a, b.Endpoint())
	// No requests: a ticket is complete at once.
	for want := uint64(1); want <= 3; want++ {
		tk, err := e.Mark()
		if err != nil || tk != want {
			t.Fatalf("mark %d: ticket %d, %v", want, tk, err)
		}
		if c, err := e.Completed(); err != nil || c != want {
			t.Fatalf("completed %d, %v; want %d", c, err, want)
		}
	}
	// A flush makes the source reusable: overwriting it afterwards does not
	// change what the peer received.
	copy(src.Host(), bytes.Repeat([]byte{0xab}, 1<<20))
	for i := 0; i < 16; i++ {
		if err := e.Put(remote.Addr(), src.Addr(), 1<<20); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Mark(); err != nil { // many outstanding marks
			t.Fatal(err)
		}
	}
	drain(t, e)
	copy(src.Host(), make([]byte, 1<<20))
	if !bytes.Equal(window.Host(), bytes.Repeat([]byte{0xab}, 1<<20)) {
		t.Fatal("peer data changed after the flush")
	}
	// Tickets never go back and never pass the last Mark.
	last, _ := e.Mark()
	for i := 0; i < 100; i++ {
		e.Put(remote.Addr(), src.Addr(), 4096)
		tk, _ := e.Mark()
		c, err := e.Completed()
		if err != nil || c > tk || c < last-1 {
			t.Fatalf("ticket %d, completed %d, last %d, %v", tk, c, last, err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := e.Completed(); err != nil || c != last+100 {
		t.Fatalf("after close: completed %d, %v; want %d", c, err, last+100)
	}
}

func TestEngineBadAddress(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  func(e hal.Engine, remote, src hal.Buffer) error
	}{
		{"put to an unmapped address", func(e hal.Engine, remote, src hal.Buffer) error {
			return e.Put(8, src.Addr(), 8)
		}},
		{"put past the end", func(e hal.Engine, remote, src hal.Buffer) error {
			return e.Put(remote.Addr()+4000, src.Addr(), 200)
		}},
		{"copy from an unmapped address", func(e hal.Engine, remote, src hal.Buffer) error {
			return e.Copy(src.Addr(), 64, 8)
		}},
		{"signal to an unmapped address", func(e hal.Engine, remote, src hal.Buffer) error {
			return e.Signal(16, 0, 0)
		}},
		{"unaligned semaphore", func(e hal.Engine, remote, src hal.Buffer) error {
			return e.Signal(remote.Addr()+4, 0, 0)
		}},
		{"unaligned count word", func(e hal.Engine, remote, src hal.Buffer) error {
			return e.Signal(remote.Addr(), remote.Addr()+3, 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, src, window, remote := portPair(t, "portbad", 4096)
			e := newEngine(t, a, b.Endpoint())
			if err := tc.req(e, remote, src); err != nil {
				t.Fatalf("queueing returned %v; the error belongs to the worker", err)
			}
			// A later request is skipped: the semaphore stays 0.
			deadline := time.Now().Add(5 * time.Second)
			var err error
			for err == nil {
				e.Signal(remote.Addr()+8, 0, 0)
				_, err = e.Completed()
				if time.Now().After(deadline) {
					t.Fatal("no error reported")
				}
			}
			if !errors.Is(err, hal.ErrInvalidArgument) {
				t.Fatalf("completed: %v, want ErrInvalidArgument", err)
			}
			for _, call := range []func() error{
				func() error { return e.Put(remote.Addr(), src.Addr(), 8) },
				func() error { _, err := e.Mark(); return err },
				func() error { _, err := e.Completed(); return err },
				e.Close,
			} {
				if got := call(); !errors.Is(got, hal.ErrInvalidArgument) {
					t.Errorf("later call: %v, want the recorded error", got)
				}
			}
			if got := loadWord(window, 8); got != 0 {
				t.Errorf("a signal after the failed request ran (semaphore %d)", got)
			}
		})
	}
	t.Run("negative size", func(t *testing.T) {
		a := open(t, "portneg", 0)
		e := newEngine(t, a, a.Endpoint())
		defer e.Close()
		if err := e.Put(0, 0, -1); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Fatalf("put of -1 bytes: %v", err)
		}
		if err := e.Copy(0, 0, -1); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Fatalf("copy of -1 bytes: %v", err)
		}
	})
}

func TestEngineClose(t *testing.T) {
	a, b, src, window, remote := portPair(t, "portclose", 1<<20)
	e := newEngine(t, a, b.Endpoint())
	copy(src.Host(), bytes.Repeat([]byte{7}, 1<<20))
	for i := 0; i < 3*engineRing; i++ { // more than the ring: issuers block, then resume
		if err := e.Put(remote.Addr(), src.Addr(), 1<<20); err != nil {
			t.Fatal(err)
		}
	}
	e.Signal(remote.Addr(), 0, 0)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// Close drained: the last signal has been applied.
	if got := loadWord(window, 0); got != 0x0707070707070708 {
		t.Fatalf("word 0 is %#x after close; want the data plus one signal", got)
	}
	if err := e.Put(remote.Addr(), src.Addr(), 8); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Fatalf("put after close: %v", err)
	}
	if _, err := e.Mark(); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Fatalf("mark after close: %v", err)
	}
	if err := e.Close(); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Fatalf("second close: %v", err)
	}
}

func TestEngineCloseDeadline(t *testing.T) {
	t.Setenv("WEFT_TIMEOUT", "1ms")
	a := open(t, "portstall", 0)
	buf, err := a.Alloc(8 << 20)
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, a, a.Endpoint())
	for i := 0; i < 128; i++ { // 512 MiB of copies: far more than 1 ms
		e.Copy(buf.Addr(), buf.Addr()+4<<20, 4<<20)
	}
	if err := e.Close(); !errors.Is(err, hal.ErrTimeout) {
		t.Fatalf("close with work left at the deadline: %v, want ErrTimeout", err)
	}
	// The worker finishes and exits on its own; wait for it before the
	// device (and its mappings) goes away.
	deadline := time.Now().Add(10 * time.Second)
	for {
		e.mu.Lock()
		stopped := e.stopped
		e.mu.Unlock()
		if stopped {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("worker did not exit after close")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestEngineOnClosedDevice(t *testing.T) {
	a := open(t, "portclosed", 0)
	a.Close()
	if _, err := a.NewEngine(a.Endpoint()); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Fatalf("engine on a closed device: %v", err)
	}
}

func TestEngineNoAllocation(t *testing.T) {
	a, b, src, _, remote := portPair(t, "portalloc", 4096)
	e := newEngine(t, a, b.Endpoint())
	defer e.Close()
	// AllocsPerRun runs with GOMAXPROCS=1: yield so the worker runs.
	allocs := testing.AllocsPerRun(1000, func() {
		e.Put(remote.Addr(), src.Addr(), 64)
		e.Signal(remote.Addr()+1024, remote.Addr()+1032, 1)
		tk, _ := e.Mark()
		for c, _ := e.Completed(); c < tk; c, _ = e.Completed() {
			runtime.Gosched()
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per put+signal+mark+completed, want 0", allocs)
	}
}
