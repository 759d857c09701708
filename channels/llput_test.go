package channels

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// putRecorder is an engine that records its puts.
type putRecorder struct {
	hal.Engine
	puts [][3]uint64 // dst, src, bytes
}

func (e *putRecorder) Put(dst, src uint64, bytes int64) error {
	e.puts = append(e.puts, [3]uint64{dst, src, uint64(bytes)})
	return nil
}

// An LL put (plan.TriggerLL), pushed without a fence, is taken only once
// its words carry its position and every packet of its source its flag;
// until then it stays at the tail. One that never lands fails the FIFO
// after its timeout with an error naming it; a source outside the plan's
// host scratch fails it at once.
func TestProxyLLPut(t *testing.T) {
	words := make([]uint64, plan.FifoBytes/8)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), plan.FifoBytes)
	scratchWords := make([]uint64, 64)
	scratch := unsafe.Slice((*byte)(unsafe.Pointer(&scratchWords[0])), 512)
	base := uint64(uintptr(unsafe.Pointer(&scratch[0])))
	e := &putRecorder{}
	f, err := newFifo("ll-plan", mem, []hal.Engine{e}, []int{1}, 0, nil, 200*time.Millisecond, NewProxy(nil, 0).log)
	if err != nil {
		t.Fatal(err)
	}
	f.llViews = []llView{{base: base, host: scratch}}
	const flag = 7
	src, dst, n := base+64, uint64(0x7000_0000_0040), uint64(32)
	a, b, c, ok := plan.LLTriggerWords(0, src, dst, n, flag)
	if !ok {
		t.Fatal("the test's addresses do not fit an LL trigger")
	}
	put := func(off int64, v uint64) { atomic.StoreUint64(f.word(plan.SlotOffset(0)+off), v) }
	// The tag first, A still from an earlier lap, packets unwritten.
	stale, _, _, _ := plan.LLTriggerWords(0+plan.FifoSlots*3, src, dst, n, flag)
	put(0, stale)
	put(8, b)
	put(16, c)
	put(24, plan.TriggerTag(0, plan.TriggerPut|plan.TriggerAlone|plan.TriggerLL, 0))
	f.poll()
	if f.tail != 0 || len(e.puts) != 0 {
		t.Fatalf("stale word A: tail %d, puts %v; want the trigger left at the tail", f.tail, e.puts)
	}
	put(0, a)
	for i := 8; i < 11; i++ { // 3 of the 4 words flagged
		scratchWords[i] = flag<<32 | uint64(i)
	}
	f.poll()
	if f.tail != 0 || len(e.puts) != 0 {
		t.Fatalf("a packet not landed: tail %d, puts %v; want the trigger left at the tail", f.tail, e.puts)
	}
	scratchWords[11] = flag<<32 | 11
	f.poll()
	if f.tail != 1 || len(e.puts) != 1 || e.puts[0] != [3]uint64{dst, src, n} {
		t.Fatalf("landed: tail %d, puts %v; want one put of %d bytes from %#x to %#x", f.tail, e.puts, n, src, dst)
	}
	if err := f.Err(); err != nil {
		t.Fatal(err)
	}

	// Position 1: never lands.
	a, b, c, _ = plan.LLTriggerWords(1, src, dst, n, flag+1)
	atomic.StoreUint64(f.word(plan.SlotOffset(1)), a)
	atomic.StoreUint64(f.word(plan.SlotOffset(1)+8), b)
	atomic.StoreUint64(f.word(plan.SlotOffset(1)+16), c)
	atomic.StoreUint64(f.word(plan.SlotOffset(1)+24), plan.TriggerTag(1, plan.TriggerPut|plan.TriggerAlone|plan.TriggerLL, 0))
	deadline := time.Now().Add(5 * time.Second)
	for f.Err() == nil && time.Now().Before(deadline) {
		f.poll()
		time.Sleep(time.Millisecond)
	}
	if err := f.Err(); err == nil || !errors.Is(err, hal.ErrTimeout) || !strings.Contains(err.Error(), "LL put at FIFO position 1") {
		t.Fatalf("an LL put that never lands: %v; want a timeout naming it", err)
	}

	// A source outside the scratch.
	g, err := newFifo("ll-plan-2", make([]byte, plan.FifoBytes), []hal.Engine{e}, []int{1}, 0, nil, time.Second, f.log)
	if err != nil {
		t.Fatal(err)
	}
	g.llViews = f.llViews
	a, b, c, _ = plan.LLTriggerWords(0, base+1024, dst, n, flag)
	atomic.StoreUint64(g.word(plan.SlotOffset(0)), a)
	atomic.StoreUint64(g.word(plan.SlotOffset(0)+8), b)
	atomic.StoreUint64(g.word(plan.SlotOffset(0)+16), c)
	atomic.StoreUint64(g.word(plan.SlotOffset(0)+24), plan.TriggerTag(0, plan.TriggerPut|plan.TriggerAlone|plan.TriggerLL, 0))
	g.poll()
	if err := g.Err(); err == nil || !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "host-memory scratch") {
		t.Fatalf("a source outside the scratch: %v; want ErrInvalidUsage saying so", err)
	}
}
