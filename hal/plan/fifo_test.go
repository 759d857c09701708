package plan

import (
	"encoding/binary"
	"testing"
	"unsafe"
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

// LL put triggers (TriggerLL): the words carry the position, so a word of
// the slot's previous lap or an unwritten one is told apart; addresses
// past 48 bits and lengths past 32 do not fit; PacketsFlagged sees a
// packet whose flag has not landed.
func TestLLTriggerWords(t *testing.T) {
	for _, pos := range []uint64{0, 5, FifoSlots - 1, 1<<16 - 1, 1 << 40} {
		a, b, c, ok := LLTriggerWords(pos, 0x7f00_1234_5678, 0x7e00_0000_0010, 4112, 77)
		if !ok {
			t.Fatalf("pos %d: does not fit", pos)
		}
		src, dst, n, flag, ok := DecodeLLTrigger(pos, a, b, c)
		if !ok || src != 0x7f00_1234_5678 || dst != 0x7e00_0000_0010 || n != 4112 || flag != 77 {
			t.Fatalf("pos %d: decoded %#x %#x %d %d %v", pos, src, dst, n, flag, ok)
		}
		// The same slot one lap earlier, and a slot never written.
		pa, pb, pc, _ := LLTriggerWords(pos-FifoSlots, 1, 2, 3, 4)
		if _, _, _, _, ok := DecodeLLTrigger(pos, pa, b, c); ok {
			t.Errorf("pos %d: A of the previous lap accepted", pos)
		}
		if _, _, _, _, ok := DecodeLLTrigger(pos, a, pb, pc); ok {
			t.Errorf("pos %d: B of the previous lap accepted", pos)
		}
		if _, _, _, _, ok := DecodeLLTrigger(pos, 0, 0, 0); ok && (pos+1)&0xFFFF != 0 {
			t.Errorf("pos %d: zero words accepted", pos)
		}
	}
	if _, _, _, ok := LLTriggerWords(0, 1<<48, 0, 16, 1); ok {
		t.Error("a 49-bit source fits")
	}
	if _, _, _, ok := LLTriggerWords(0, 0, 0, 1<<32, 1); ok {
		t.Error("a 4 GiB put fits")
	}
	var words [6]uint64
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	for i := range words {
		words[i] = 9<<32 | uint64(i)
	}
	if !PacketsFlagged(mem, 9) {
		t.Error("every word flagged 9: not seen")
	}
	words[3] = 8<<32 | 3
	if PacketsFlagged(mem, 9) {
		t.Error("word 3 carries flag 8: taken as landed")
	}
}
