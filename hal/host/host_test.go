package host

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftccl/weft/hal"
)

func open(t *testing.T, job string, ordinal int) *Device {
	t.Helper()
	d, err := backend{}.Open(hal.Config{Ordinal: ordinal, JobID: job})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d.(*Device)
}

func TestExportImportShareBytes(t *testing.T) {
	a, b := open(t, "share", 0), open(t, "share", 1)
	buf, err := a.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	h, err := a.Export(buf)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := b.Import(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Write(buf, 100, []byte("weft")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if err := b.Read(got, peer, 100); err != nil || string(got) != "weft" {
		t.Fatalf("peer reads %q, %v; want \"weft\"", got, err)
	}
	if peer.Addr() == buf.Addr() {
		t.Fatal("the import shares the exporter's mapping; want a mapping of its own")
	}
	if err := peer.Free(); err != nil {
		t.Fatal(err)
	}
	if err := buf.Free(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Import(h); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Fatalf("import of a freed buffer: %v, want ErrInvalidUsage", err)
	}
}

func TestBadHandlesAndRanges(t *testing.T) {
	a, other := open(t, "bad", 0), open(t, "other-job", 0)
	buf, err := a.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := a.Export(buf)
	for _, tc := range []struct {
		name string
		h    hal.Handle
		dev  *Device
		want error
	}{
		{"truncated", h[:len(h)-1], a, hal.ErrInvalidArgument},
		{"too short", h[:10], a, hal.ErrInvalidArgument},
		{"foreign magic", append([]byte("WEFTNVL1"), h[8:]...), a, hal.ErrInvalidArgument},
		{"trailing bytes", append(append(hal.Handle{}, h...), 0), a, hal.ErrInvalidArgument},
		{"another job", h, other, hal.ErrInvalidUsage},
	} {
		if _, err := tc.dev.Import(tc.h); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := a.Write(buf, 60, make([]byte, 8)); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("write past the end: %v", err)
	}
	if err := a.Read(make([]byte, 1), buf, -1); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("read at -1: %v", err)
	}
	if _, err := a.Alloc(0); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("alloc 0: %v", err)
	}
	buf.Free()
	if err := a.Write(buf, 0, []byte{1}); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("write to a freed buffer: %v", err)
	}
	if err := buf.Free(); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("double free: %v", err)
	}
	if _, err := other.resolve(buf.Addr(), 1); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("resolve of an unmapped address: %v", err)
	}
}

func TestStreamOrderEventsGraphsDeadline(t *testing.T) {
	d := open(t, "stream", 0)
	hs, _ := d.NewStream()
	s := hs.(*Stream)
	defer s.Close()
	var order []int
	for i := 0; i < 3; i++ {
		s.enqueue(func() error { order = append(order, i); return nil })
	}
	if err := s.Synchronize(time.Time{}); err != nil || fmt.Sprint(order) != "[0 1 2]" {
		t.Fatalf("order %v, %v", order, err)
	}
	// Graph: recorded, not run, until launched; replayed twice.
	if err := d.BeginCapture(s); err != nil {
		t.Fatal(err)
	}
	n := 0
	s.enqueue(func() error { n++; return nil })
	g, err := d.EndCapture(s)
	if err != nil || n != 0 {
		t.Fatalf("capture ran the work (n=%d) or failed: %v", n, err)
	}
	start, _ := s.Record()
	g.Launch(s)
	g.Launch(s)
	end, _ := s.Record()
	if err := s.Synchronize(time.Time{}); err != nil || n != 2 {
		t.Fatalf("replays: n=%d, %v", n, err)
	}
	if el, err := end.Elapsed(start); err != nil || el < 0 {
		t.Fatalf("elapsed %v, %v", el, err)
	}
	// Deadline: a work item that outlasts it.
	release := make(chan struct{})
	s.enqueue(func() error { <-release; return nil })
	err = s.Synchronize(time.Now().Add(20 * time.Millisecond))
	close(release)
	if !errors.Is(err, hal.ErrTimeout) {
		t.Fatalf("synchronize past the deadline: %v, want ErrTimeout", err)
	}
	// Sticky errors.
	boom := errors.New("boom")
	s.enqueue(func() error { return boom })
	if err := s.Synchronize(time.Time{}); !errors.Is(err, boom) {
		t.Fatalf("sticky error: %v", err)
	}
}

func FuzzDecodeHandle(f *testing.F) {
	d, _ := backend{}.Open(hal.Config{JobID: "fuzz"})
	defer d.Close()
	buf, _ := d.Alloc(16)
	h, _ := d.(*Device).Export(buf)
	f.Add([]byte(h))
	f.Add([]byte("WEFTHST1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		job, name, size, err := decodeHandle(b)
		if err == nil && (size <= 0 || name == "" || bytes.ContainsAny([]byte(name), "/\x00") || job == "\x00") {
			t.Fatalf("accepted a bad handle: job %q name %q size %d", job, name, size)
		}
	})
}

// TestStreamAfter: work queued on a stream after After(prev) runs only once
// the work queued on prev before the call is done; later work on prev is
// not waited for; a closed prev orders nothing; another device's stream is
// refused.
func TestStreamAfter(t *testing.T) {
	d := open(t, "after", 0)
	h1, _ := d.NewStream()
	h2, _ := d.NewStream()
	s1, s2 := h1.(*Stream), h2.(*Stream)
	defer s2.Close()
	gate, later := make(chan struct{}), make(chan struct{})
	var ran atomic.Bool
	s1.enqueue(func() error { <-gate; return nil })
	if err := s2.After(s1); err != nil {
		t.Fatal(err)
	}
	s1.enqueue(func() error { <-later; return nil }) // after the After: not waited for
	s2.enqueue(func() error { ran.Store(true); return nil })
	time.Sleep(20 * time.Millisecond)
	if ran.Load() {
		t.Fatal("work after After(prev) ran before prev's earlier work finished")
	}
	close(gate)
	if err := s2.Synchronize(time.Now().Add(5 * time.Second)); err != nil || !ran.Load() {
		t.Fatalf("after prev's work finished: ran %v, %v", ran.Load(), err)
	}
	close(later)
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s2.After(s1); err != nil {
		t.Errorf("After a closed stream: %v, want nothing to order", err)
	}
	other := open(t, "after", 1)
	h3, _ := other.NewStream()
	defer h3.Close()
	if err := s2.After(h3); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("After a stream of another device: %v, want ErrInvalidArgument", err)
	}
}
