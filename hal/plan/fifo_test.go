package plan

import (
	"encoding/binary"
	"testing"
)

// TestFifoRoom: a pusher reads the tail only past the seen tail, raises
// the seen tail to what it read, never lowers it, and reports the tail
// when its wait gives up.
func TestFifoRoom(t *testing.T) {
	head := make([]byte, FifoHeadBytes)
	fifo := make([]byte, FifoBytes)
	setTail := func(v uint64) { binary.LittleEndian.PutUint64(fifo[FifoTail:], v) }
	seen := func() uint64 { return binary.LittleEndian.Uint64(head[FifoSeenTail:]) }
	reads := 0
	once := func(cond func() bool) bool { reads++; return cond() } // gives up after one look

	// Positions below seen + FifoSlots need no read, whatever the tail.
	setTail(0)
	for _, pos := range []uint64{0, FifoSlots - 1} {
		if ok, _ := FifoRoom(head, fifo, pos, once); !ok || reads != 0 {
			t.Fatalf("pos %d: ok %v after %d tail reads, want room without a read", pos, ok, reads)
		}
	}
	// Past it with the proxy behind: a read, no room, the tail reported.
	setTail(5)
	if ok, tail := FifoRoom(head, fifo, FifoSlots+5, once); ok || tail != 5 || reads != 1 || seen() != 0 {
		t.Fatalf("full FIFO: ok %v tail %d reads %d seen %d, want false 5 1 0", ok, tail, reads, seen())
	}
	// The proxy moved on: room, and the seen tail raised.
	setTail(700)
	if ok, _ := FifoRoom(head, fifo, FifoSlots+5, once); !ok || seen() != 700 {
		t.Fatalf("after the proxy moved: ok %v seen %d, want true 700", ok, seen())
	}
	// The next positions up to 700 + FifoSlots − 1 need no read.
	reads = 0
	if ok, _ := FifoRoom(head, fifo, 700+FifoSlots-1, once); !ok || reads != 0 {
		t.Fatalf("within the raised seen tail: ok %v reads %d", ok, reads)
	}
	// A pusher that read an older tail does not lower the seen tail.
	binary.LittleEndian.PutUint64(head[FifoSeenTail:], 900)
	setTail(800)
	if ok, _ := FifoRoom(head, fifo, 900+FifoSlots, once); ok || seen() != 900 {
		t.Fatalf("stale tail: ok %v seen %d, want false 900", ok, seen())
	}
	setTail(1000)
	if ok, _ := FifoRoom(head, fifo, 900+FifoSlots, once); !ok || seen() != 1000 {
		t.Fatalf("ok %v seen %d, want true 1000", ok, seen())
	}
}
