// Package porttest checks a backend's port-mapped capability through the
// hal interfaces only, so that every CUDA backend (hal/nvlink, hal/pcie)
// runs the same checks on its engines: put → signal → the semaphore seen
// from the host → the data checked; a thousand puts in flight; Mark and
// Completed; a Copy ordered before the Put and Signal that follow it; an
// engine of a device to itself.
package porttest

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/weftccl/weft/hal"
)

// Deadline bounds every wait of the checks.
const Deadline = 30 * time.Second

// Run runs every check with engines of src to dst (src may be dst).
func Run(t *testing.T, src, dst hal.Device) {
	t.Run("PutSignal", func(t *testing.T) { PutSignal(t, src, dst) })
	t.Run("ManyPuts", func(t *testing.T) { ManyPuts(t, src, dst) })
	t.Run("MarkCompleted", func(t *testing.T) { MarkCompleted(t, src, dst) })
	t.Run("CopyBeforeSignal", func(t *testing.T) { CopyBeforeSignal(t, src, dst) })
	t.Run("LocalEngine", func(t *testing.T) { LocalEngine(t, dst) })
}

// Pattern returns n bytes that depend on seed and the index.
func Pattern(n int, seed uint32) []byte {
	b := make([]byte, n)
	for i := 0; i+4 <= n; i += 4 {
		binary.LittleEndian.PutUint32(b[i:], seed*2654435761+uint32(i))
	}
	return b
}

// link is a destination window and semaphores on dst, exported for ports
// and imported on src, with an engine of src to dst.
type link struct {
	src, dst       hal.Device
	window, sems   hal.Buffer // on dst
	rwindow, rsems hal.Buffer // imported on src
	engine         hal.Engine
}

// semaphore word i and count word i of the link are at sems + 16 i and
// sems + 16 i + 8.

func connect(t *testing.T, src, dst hal.Device, windowBytes int64) *link {
	t.Helper()
	spm, ok1 := src.(hal.PortMapped)
	dpm, ok2 := dst.(hal.PortMapped)
	if !ok1 || !ok2 {
		t.Fatalf("devices do not implement hal.PortMapped (%T, %T)", src, dst)
	}
	if l := src.Link(dst.Endpoint()); l.Caps&hal.CapPortMapped == 0 {
		t.Fatalf("link of %s %d to %d is not port-mapped: %+v", src.Info().Backend, src.Info().Ordinal, dst.Info().Ordinal, l)
	}
	l := &link{src: src, dst: dst}
	var err error
	if l.window, err = dst.Alloc(windowBytes); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.window.Free() })
	if l.sems, err = dst.Alloc(16 * 8); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.sems.Free() })
	hw, err := dpm.ExportPort(l.window)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := dpm.ExportPort(l.sems)
	if err != nil {
		t.Fatal(err)
	}
	if l.rwindow, err = spm.ImportPort(hw); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.rwindow.Free() })
	if l.rsems, err = spm.ImportPort(hs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.rsems.Free() })
	if l.rwindow.Size() != windowBytes || l.rsems.Size() != 16*8 {
		t.Fatalf("imported sizes %d and %d, want %d and %d", l.rwindow.Size(), l.rsems.Size(), windowBytes, 16*8)
	}
	if l.engine, err = spm.NewEngine(dst.Endpoint()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.engine.Close(); err != nil {
			t.Errorf("engine close: %v", err)
		}
	})
	return l
}

// WaitWord polls the 64-bit word at off of b on d until it reaches want,
// failing the test at the deadline with the value it saw.
func WaitWord(t *testing.T, d hal.Device, b hal.Buffer, off int64, want uint64) {
	t.Helper()
	w := make([]byte, 8)
	deadline := time.Now().Add(Deadline)
	for {
		if err := d.Read(w, b, off); err != nil {
			t.Fatal(err)
		}
		v := binary.LittleEndian.Uint64(w)
		if v >= want {
			if v != want {
				t.Fatalf("word at offset %d is %d, want %d", off, v, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("word at offset %d is %d after %v, want %d", off, v, Deadline, want)
		}
		time.Sleep(20 * time.Microsecond)
	}
}

func readWord(t *testing.T, d hal.Device, b hal.Buffer, off int64) uint64 {
	t.Helper()
	w := make([]byte, 8)
	if err := d.Read(w, b, off); err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint64(w)
}

func source(t *testing.T, d hal.Device, data []byte) hal.Buffer {
	t.Helper()
	b, err := d.Alloc(int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free() })
	if err := d.Write(b, 0, data); err != nil {
		t.Fatal(err)
	}
	return b
}

func checkData(t *testing.T, d hal.Device, b hal.Buffer, off int64, want []byte) {
	t.Helper()
	got := make([]byte, len(want))
	if err := d.Read(got, b, off); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%d bytes at offset %d differ from byte %d on (got %#x, want %#x)", len(want), off, i, got[i], want[i])
	}
}

// waitTicket waits (hal.AwaitTicket) until Completed reaches ticket.
func waitTicket(t *testing.T, e hal.Engine, ticket uint64) {
	t.Helper()
	if err := hal.AwaitTicket(e, ticket, time.Now().Add(Deadline)); err != nil {
		t.Fatal(err)
	}
}

// PutSignal puts 9 MiB + 12 bytes (several staging slots, an odd tail) at
// an offset, signals with a count, waits for the semaphore from the host
// and checks the count and the data; a second put and signal advance the
// semaphore to 2.
func PutSignal(t *testing.T, src, dst hal.Device) {
	const n = 9<<20 + 12
	l := connect(t, src, dst, n+4096)
	data := Pattern(n, 1)
	sb := source(t, src, data)
	if err := l.engine.Put(l.rwindow.Addr()+4096, sb.Addr(), n); err != nil {
		t.Fatal(err)
	}
	if err := l.engine.Signal(l.rsems.Addr(), l.rsems.Addr()+8, 42); err != nil {
		t.Fatal(err)
	}
	WaitWord(t, dst, l.sems, 0, 1)
	if c := readWord(t, dst, l.sems, 8); c != 42 {
		t.Errorf("count word = %d, want 42", c)
	}
	checkData(t, dst, l.window, 4096, data)

	data2 := Pattern(4096, 2)
	sb2 := source(t, src, data2)
	if err := l.engine.Put(l.rwindow.Addr(), sb2.Addr(), 4096); err != nil {
		t.Fatal(err)
	}
	if err := l.engine.Signal(l.rsems.Addr(), 0, 7); err != nil {
		t.Fatal(err)
	}
	WaitWord(t, dst, l.sems, 0, 2)
	if c := readWord(t, dst, l.sems, 8); c != 42 {
		t.Errorf("count word = %d after a signal without count, want 42 still", c)
	}
	checkData(t, dst, l.window, 0, data2)
}

// ManyPuts issues 1000 puts of 4 KiB (and a few of odd sizes) without
// waiting, with a signal every 100, then checks every byte.
func ManyPuts(t *testing.T, src, dst hal.Device) {
	const puts, size = 1000, 4096
	l := connect(t, src, dst, puts*size)
	data := Pattern(puts*size, 3)
	sb := source(t, src, data)
	for i := 0; i < puts; i++ {
		off := uint64(i * size)
		if i%7 == 3 { // two pieces, of 1000 and 3096 bytes
			if err := l.engine.Put(l.rwindow.Addr()+off, sb.Addr()+off, 1000); err != nil {
				t.Fatal(err)
			}
			if err := l.engine.Put(l.rwindow.Addr()+off+1000, sb.Addr()+off+1000, size-1000); err != nil {
				t.Fatal(err)
			}
		} else if err := l.engine.Put(l.rwindow.Addr()+off, sb.Addr()+off, size); err != nil {
			t.Fatal(err)
		}
		if i%100 == 99 {
			if err := l.engine.Signal(l.rsems.Addr()+16, l.rsems.Addr()+24, uint64(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	WaitWord(t, dst, l.sems, 16, puts/100)
	if c := readWord(t, dst, l.sems, 24); c != puts-1 {
		t.Errorf("count word = %d, want %d", c, puts-1)
	}
	checkData(t, dst, l.window, 0, data)
}

// MarkCompleted checks tickets: they start at 1 and increase by one, a
// mark with nothing queued completes, and a mark after puts completes once
// the source may be reused — checked by overwriting the source after the
// ticket completed and seeing the first data arrive.
func MarkCompleted(t *testing.T, src, dst hal.Device) {
	const n = 6 << 20
	l := connect(t, src, dst, n)
	t1, err := l.engine.Mark()
	if err != nil {
		t.Fatal(err)
	}
	if t1 != 1 {
		t.Errorf("first ticket = %d, want 1", t1)
	}
	waitTicket(t, l.engine, t1)
	data := Pattern(n, 4)
	sb := source(t, src, data)
	if err := l.engine.Put(l.rwindow.Addr(), sb.Addr(), n); err != nil {
		t.Fatal(err)
	}
	t2, err := l.engine.Mark()
	if err != nil {
		t.Fatal(err)
	}
	t3, err := l.engine.Mark() // nothing queued since t2
	if err != nil {
		t.Fatal(err)
	}
	if t2 != 2 || t3 != 3 {
		t.Errorf("tickets %d, %d, want 2, 3", t2, t3)
	}
	waitTicket(t, l.engine, t3)
	// The source is free: overwrite it; the destination must get the
	// first data once signalled.
	if err := src.Write(sb, 0, Pattern(n, 5)); err != nil {
		t.Fatal(err)
	}
	if err := l.engine.Signal(l.rsems.Addr(), 0, 0); err != nil {
		t.Fatal(err)
	}
	WaitWord(t, dst, l.sems, 0, 1)
	checkData(t, dst, l.window, 0, data)
	for i := uint64(4); i < 10; i++ { // marks keep counting
		tk, err := l.engine.Mark()
		if err != nil || tk != i {
			t.Fatalf("Mark = %d, %v; want %d", tk, err, i)
		}
	}
	waitTicket(t, l.engine, 9)
}

// CopyBeforeSignal queues Copy(b ← a) on the engine, then a put of b and
// a signal: the destination must see a's data, so the copy ran before the
// put and the signal.
func CopyBeforeSignal(t *testing.T, src, dst hal.Device) {
	const n = 5<<20 + 8
	l := connect(t, src, dst, n)
	data := Pattern(n, 6)
	a := source(t, src, data)
	b := source(t, src, Pattern(n, 7))
	if err := l.engine.Copy(b.Addr(), a.Addr(), n); err != nil {
		t.Fatal(err)
	}
	if err := l.engine.Put(l.rwindow.Addr(), b.Addr(), n); err != nil {
		t.Fatal(err)
	}
	if err := l.engine.Signal(l.rsems.Addr(), l.rsems.Addr()+8, n); err != nil {
		t.Fatal(err)
	}
	WaitWord(t, dst, l.sems, 0, 1)
	checkData(t, dst, l.window, 0, data)
	checkData(t, src, b, 0, data)
	if c := readWord(t, dst, l.sems, 8); c != n {
		t.Errorf("count word = %d, want %d", c, n)
	}
}

// LocalEngine uses an engine of d to itself: Copy then Signal of a local
// semaphore, which is seen after the copied data.
func LocalEngine(t *testing.T, d hal.Device) {
	pm := d.(hal.PortMapped)
	if l := d.Link(d.Endpoint()); l.Caps&hal.CapPortMapped == 0 {
		t.Fatalf("link of a device to itself is not port-mapped: %+v", l)
	}
	e, err := pm.NewEngine(d.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	}()
	const n = 3<<20 + 4
	data := Pattern(n, 8)
	a := source(t, d, data)
	b := source(t, d, make([]byte, n))
	sems := source(t, d, make([]byte, 16))
	for round := uint64(1); round <= 3; round++ {
		if err := e.Copy(b.Addr(), a.Addr(), n); err != nil {
			t.Fatal(err)
		}
		if err := e.Signal(sems.Addr(), sems.Addr()+8, round*10); err != nil {
			t.Fatal(err)
		}
		WaitWord(t, d, sems, 0, round)
		if c := readWord(t, d, sems, 8); c != round*10 {
			t.Errorf("round %d: count = %d", round, c)
		}
		checkData(t, d, b, 0, data)
		if err := d.Write(b, 0, make([]byte, n)); err != nil {
			t.Fatal(err)
		}
	}
	tk, err := e.Mark()
	if err != nil {
		t.Fatal(err)
	}
	waitTicket(t, e, tk)
	if _, err := e.Completed(); err != nil {
		t.Error(err)
	}
}
