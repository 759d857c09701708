package conformance

import (
	"errors"
	"fmt"

	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/check"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

func init() {
	Register(Case{ID: "memory-mapped/stream-reduce", Capability: hal.CapMemoryMapped, MinRanks: 2,
		Title: "host-queued reductions (hal.StreamReduce): the previous rank's operand copied into a mapped landing buffer, its flag waited for on a lane, then out = a ⊕ landing, and in place into either operand, exact for every type and base operator, odd lengths and unaligned addresses; a copy on SMs (the module's copy kernel) of odd lengths and offsets; Avg and partial elements refused",
		Run:   testStreamReduce})
}

// streamReduceKinds are the types and operators the case reduces: every
// type once, every base operator at least twice (each is a kernel to
// compile on a GPU).
var streamReduceKinds = []struct {
	t  plan.DataType
	op plan.RedOp
}{
	{plan.Float32, plan.Sum}, {plan.BFloat16, plan.Sum}, {plan.Float16, plan.Max}, {plan.Int32, plan.Min},
	{plan.Uint8, plan.Prod}, {plan.Float64, plan.Sum}, {plan.Int64, plan.Max}, {plan.Float8E4M3, plan.Sum},
	{plan.Int8, plan.Min}, {plan.Uint32, plan.Prod}, {plan.Uint64, plan.Sum}, {plan.Float8E5M2, plan.Max},
}

// testStreamReduce: operand a holds rank 0's contribution of check.Input
// and operand b rank 1's, so that every result is check.AllReduce of two
// ranks. Rank r copies its b into the next rank's landing buffer (lane 0)
// and writes that rank's flag; each rank waits for its flag on lane 1,
// resets it and reduces out = a ⊕ landing there. Then, on the stream, the
// in-place forms: a = a ⊕ b and, from fresh operands, b = a ⊕ b. Counts
// include 0, odd lengths and one at an address off 16-byte alignment (the
// kernel's element path).
func testStreamReduce(t *T) error {
	so, ok := t.Dev.(hal.StreamOps)
	if !ok {
		return t.NotSupported("the device does not implement hal.StreamOps")
	}
	if err := so.StreamOpsSupport(); err != nil {
		return t.NotSupported("%v", err)
	}
	rg := newRing(t.Rank, t.Size)
	const maxCount = 1<<16 + 3 // elements
	const maxBytes = 8*maxCount + 8
	bufs := make([]hal.Buffer, 3) // a, b, out
	for i := range bufs {
		var err error
		if bufs[i], err = t.Alloc(maxBytes); err != nil {
			return err
		}
	}
	a, b, out := bufs[0], bufs[1], bufs[2]
	landing, flag, lreg, freg, err := landingWithFlag(t, maxBytes)
	if err != nil {
		return err
	}
	s, err := t.Stream()
	if err != nil {
		return err
	}
	for i, k := range streamReduceKinds {
		mod, fn, err := channels.StreamReduceKernel(t.Dev, k.t, k.op)
		if err != nil {
			return t.Errorf("the kernel for %v %v: %w", k.t, k.op, err)
		}
		if mod != nil {
			t.Cleanup(mod.Close)
		}
		if i == 0 {
			if err := streamCopyOnSMs(t, so, s, mod, a, b); err != nil {
				return err
			}
		}
		es := int64(k.t.Size())
		red := func(dst, src, src2 uint64, bytes int64, lane uint8) hal.StreamOp {
			return hal.StreamOp{Kind: hal.StreamReduce, Dst: dst, Src: src, Src2: src2, Bytes: bytes, Type: k.t, Op: k.op,
				Kernel: fn, Blocks: 4, Threads: 128, Lane: lane}
		}
		for _, count := range []int64{0, 1, 7, 4099, maxCount} {
			for _, off := range []int64{0, es} { // off: the operands and result start off 16-byte alignment
				if off != 0 && count != 4099 {
					continue
				}
				what := fmt.Sprintf("%v %v of %d elements at offset %d", k.t, k.op, count, off)
				n := count * es
				opA, opB := check.Input(k.t, k.op, 0, count), check.Input(k.t, k.op, 1, count)
				want := check.AllReduce(k.t, k.op, 2, count)
				load := func() error {
					for _, w := range []struct {
						buf hal.Buffer
						v   []byte
					}{{a, opA}, {b, opB}, {out, fill(n, poison)}} {
						if err := t.Write(w.buf, off, w.v); err != nil {
							return err
						}
					}
					return nil
				}
				result := func(buf hal.Buffer, form string) error {
					got, err := t.Read(buf, off, n)
					if err != nil {
						return err
					}
					if wrong := check.Wrong(k.t, got, want); wrong != 0 {
						return t.Errorf("%s, %s: %d of %d elements wrong (%s)", what, form, wrong, count, diff("result", got, want))
					}
					return nil
				}
				if err := load(); err != nil {
					return err
				}
				if err := t.Barrier(); err != nil {
					return err
				}
				A, B, O, L := a.Addr()+uint64(off), b.Addr()+uint64(off), out.Addr()+uint64(off), landing.Addr()+uint64(off)
				ops := []hal.StreamOp{
					{Kind: hal.StreamCopy, Dst: lreg.Peers[rg.next].Addr() + uint64(off), Src: B, Bytes: n},
					{Kind: hal.StreamWrite, Dst: freg.Peers[rg.next].Addr(), Value: 1},
					{Kind: hal.StreamWaitEq, Dst: flag.Addr(), Value: 1, Lane: 1},
					{Kind: hal.StreamWrite, Dst: flag.Addr(), Value: 0, Lane: 1},
					red(O, A, L, n, 1),
				}
				if err := so.QueueOps(s, ops); err != nil {
					return t.Errorf("%s: queue: %w", what, err)
				}
				if err := t.Sync(s); err != nil {
					return err
				}
				if err := result(out, "out = a ⊕ landed b"); err != nil {
					return err
				}
				if err := t.Barrier(); err != nil { // nobody copies into a landing buffer still read
					return err
				}
				if err := so.QueueOps(s, []hal.StreamOp{red(A, A, B, n, 0)}); err != nil {
					return t.Errorf("%s: queue: %w", what, err)
				}
				if err := t.Sync(s); err != nil {
					return err
				}
				if err := result(a, "a = a ⊕ b"); err != nil {
					return err
				}
				if err := load(); err != nil {
					return err
				}
				if err := so.QueueOps(s, []hal.StreamOp{red(B, A, B, n, 0)}); err != nil {
					return t.Errorf("%s: queue: %w", what, err)
				}
				if err := t.Sync(s); err != nil {
					return err
				}
				if err := result(b, "b = a ⊕ b"); err != nil {
					return err
				}
			}
		}
	}

	// Bad input is refused at the call, naming what is wrong.
	for _, bad := range []struct {
		what string
		op   hal.StreamOp
	}{
		{"Avg", hal.StreamOp{Kind: hal.StreamReduce, Dst: out.Addr(), Src: a.Addr(), Src2: b.Addr(), Bytes: 8, Type: plan.Float32, Op: plan.Avg}},
		{"a partial element", hal.StreamOp{Kind: hal.StreamReduce, Dst: out.Addr(), Src: a.Addr(), Src2: b.Addr(), Bytes: 6, Type: plan.Float32, Op: plan.Sum}},
		{"an unknown type", hal.StreamOp{Kind: hal.StreamReduce, Dst: out.Addr(), Src: a.Addr(), Src2: b.Addr(), Bytes: 8, Type: 99, Op: plan.Sum}},
	} {
		if err := so.QueueOps(s, []hal.StreamOp{bad.op}); !errors.Is(err, hal.ErrInvalidArgument) {
			return t.Errorf("a reduction with %s: %v, want ErrInvalidArgument", bad.what, err)
		}
	}
	return t.Sync(s)
}

// streamCopyOnSMs: hal.StreamCopy with the copy kernel of a reduction
// module (channels.StreamCopyKernel; hal/host copies itself) moves every
// byte of odd lengths at aligned and unaligned addresses, and nothing
// past them.
func streamCopyOnSMs(t *T, so hal.StreamOps, s hal.Stream, mod hal.Module, src, dst hal.Buffer) error {
	fn, err := channels.StreamCopyKernel(mod)
	if err != nil {
		return t.Errorf("the copy kernel: %w", err)
	}
	for _, c := range []struct{ off, n int64 }{{0, 0}, {0, 1}, {0, 4099}, {3, 4099}, {0, 1 << 16}, {5, 1<<16 + 3}} {
		want := pattern(seed(t.Rank, int(c.n)), c.n)
		if err := t.Write(src, c.off, want); err != nil {
			return err
		}
		if err := t.Write(dst, 0, fill(dst.Size(), poison)); err != nil {
			return err
		}
		op := hal.StreamOp{Kind: hal.StreamCopy, Dst: dst.Addr() + uint64(c.off), Src: src.Addr() + uint64(c.off), Bytes: c.n,
			Kernel: fn, Blocks: 3, Threads: 96, Lane: 1}
		if err := so.QueueOps(s, []hal.StreamOp{op}); err != nil {
			return t.Errorf("copy of %d bytes at offset %d on SMs: queue: %w", c.n, c.off, err)
		}
		if err := t.Sync(s); err != nil {
			return err
		}
		got, err := t.Read(dst, 0, dst.Size())
		if err != nil {
			return err
		}
		if d := diff(fmt.Sprintf("copy of %d bytes at offset %d on SMs", c.n, c.off), got[c.off:c.off+c.n], want); d != "" {
			return t.Errorf("%s", d)
		}
		if d := diff("bytes around the copy", append(append([]byte{}, got[:c.off]...), got[c.off+c.n:]...), fill(dst.Size()-c.n, poison)); d != "" {
			return t.Errorf("copy of %d bytes at offset %d on SMs: %s", c.n, c.off, d)
		}
	}
	return nil
}
