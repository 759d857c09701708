package weft_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/check"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// TestWindowAllReduceHost: memory windows (Comm.RegisterWindow, NCCL's
// ncclCommWindowRegister) on hal/host, 2 and 3 ranks. Each rank's window
// starts at a different offset inside its allocation (the heads differ,
// the offsets of a call inside the windows do not). Through a symmetric
// window an AllReduce at or above the copy-engine executor's bound (1 MiB
// here) runs zero-copy on it, one below the bound that Launch would
// give an HB plan runs Comm.AllReduce's zero-copy kernel tier, one that
// Launch gives an LL plan stays there (PlanName, PlanSMs and WindowCalls
// say which), out of place and in place, at offsets inside the window,
// every element checked; through a window registered without the
// symmetric promise and past the window's end the calls take Launch's
// plans and stay exact. A
// window one rank registers with nothing (unexportable memory) serves no
// rank zero-copy. A point-to-point receive into a window is exact.
func TestWindowAllReduceHost(t *testing.T) {
	t.Setenv("WEFT_TUNING_FILE", "off")
	t.Setenv("WEFT_ALGO", "")
	t.Setenv("WEFT_CE_ALLREDUCE_MIN_BYTES", "1M")
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("ranks%d", n), func(t *testing.T) {
			errs := runRanksOpts(t, "host", n, weft.Options{Timeout: 20 * time.Second}, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
				return windowCases(rank, c, dev, s, 1)
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// windowCases runs the window cases with every size and the window scaled
// by scale (1 on hal/host; on GPUs, whose LL plans reach further, 16, with
// the copy-engine bound at 16 MiB).
func windowCases(rank int, c *weft.Comm, dev hal.Device, s hal.Stream, scale int64) error {
	winBytes := int64(4<<20) * scale
	ceBound := int64(1<<20) * scale                   // WEFT_CE_ALLREDUCE_MIN_BYTES of the callers
	lead := uint64(4096 * (rank + 1))                 // the window's head inside the allocation differs by rank
	alloc, err := dev.Alloc(int64(lead) + 2*winBytes) // room past the window's end
	if err != nil {
		return err
	}
	defer alloc.Free()
	in, err := dev.Alloc(winBytes)
	if err != nil {
		return err
	}
	defer in.Free()
	head := alloc.Addr() + lead
	sym, err := c.RegisterWindow(head, winBytes, alloc, true)
	if err != nil {
		return err
	}
	if !sym.Symmetric() || !sym.Mapped() {
		return fmt.Errorf("symmetric window: Symmetric %v, Mapped %v, want both", sym.Symmetric(), sym.Mapped())
	}
	// run AllReduces count floats into the window at off from sendOff in
	// the window (fromIn: from the buffer in, outside every window) and
	// checks every element and how the call went: "ce" zero-copy on the
	// copy engines, "sm" through a zero-copy kernel tier, "" not through
	// the window.
	const fromIn = ^uint64(0)
	run := func(what string, count int64, off, sendOff uint64, want string) error {
		count *= scale
		es := int64(plan.Float32.Size())
		src, send, soff := in, in.Addr(), int64(0)
		if sendOff != fromIn {
			src, send, soff = alloc, head+sendOff, int64(lead+sendOff)
		}
		if err := dev.Write(src, soff, check.Input(plan.Float32, plan.Sum, rank, count)); err != nil {
			return err
		}
		call := weft.Call{Coll: algorithms.AllReduce, Send: send, Recv: head + off, Count: count, Type: plan.Float32, Op: plan.Sum}
		name, windowed, err := launchCounted(c, call, s)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		res := make([]byte, count*es)
		if err := dev.Read(res, alloc, int64(lead+off)); err != nil {
			return err
		}
		if wrong := check.Wrong(plan.Float32, res, check.AllReduce(plan.Float32, plan.Sum, c.Size(), count)); wrong != 0 {
			return fmt.Errorf("%s: %d of %d elements wrong", what, wrong, count)
		}
		got := ""
		if windowed {
			got = "sm"
			if name == "all_reduce-ce-host-issued" {
				got = "ce"
			}
		}
		zeroCopyTier := c.AllReducePlan(count, plan.Float32, plan.Sum)
		// Not through the window, Launch takes the copy engines only on 2
		// ranks from the bound, with the outputs exported at the call.
		exported := c.Size() == 2 && count*es >= ceBound
		if got != want || (got == "sm" && name != zeroCopyTier) || (got == "" && (name == "all_reduce-ce-host-issued") != exported) {
			return fmt.Errorf("%s: through the window %q (PlanName %q; the zero-copy tier %q), want %q", what, got, name, zeroCopyTier, want)
		}
		if b, m := c.PlanSMs(call); got == "ce" && (b < 1 || m != 0) {
			return fmt.Errorf("%s: PlanSMs = %d, %d, want the reduction kernel's blocks and none moving data", what, b, m)
		}
		return nil
	}
	// 1.5 MiB on the GPUs is LL through Launch but above the window's LL
	// bound (Config.WindowLLMaxBytes, 1 MiB): the zero-copy tier; on
	// hal/host, 96 KiB stays LL.
	midWant := ""
	if scale > 1 {
		midWant = "sm"
	}
	for _, k := range []struct {
		what         string
		count        int64
		off, sendOff uint64
		want         string
	}{
		{"LL through Launch, above the window's LL bound on GPUs", 24576, 0, uint64(winBytes / 2), midWant},
		{"out of place at the head", 300001, 0, fromIn, "ce"},
		{"out of place at an offset", 262144, 4096 + 16, fromIn, "ce"},
		{"in place at an offset", 270000, 32768, 32768, "ce"},
		// (110,000 floats: above hal/host's two-phase LL AllReduce from 3 ranks)
		{"below the copy-engine bound, HB through Launch", 110000, 0, uint64(winBytes / 2), "sm"},
		{"below the copy-engine bound, HB through Launch, in place", 100001, 8192, 8192, "sm"},
		{"below the copy-engine bound, the input outside every window", 110000, 0, fromIn, ""},
		{"LL through Launch", 1000, 0, fromIn, ""},
		{"past the window's end", 70000, uint64(winBytes - 4*60000*scale), fromIn, ""},
	} {
		if err := run(k.what, k.count, k.off, k.sendOff, k.want); err != nil {
			return err
		}
	}
	if err := windowGatherScatter(rank, c, dev, s, alloc, head, lead, scale); err != nil {
		return err
	}
	if err := c.DeregisterWindow(sym); err != nil {
		return err
	}
	if err := run("after the window's deregistration", 300001, 0, fromIn, ""); err != nil {
		return err
	}
	// Without the symmetric promise: mapped, but no zero-copy collective.
	plain, err := c.RegisterWindow(head, winBytes, alloc, false)
	if err != nil {
		return err
	}
	if err := run("through a window without the symmetric promise", 300001, 0, fromIn, ""); err != nil {
		return err
	}
	if err := c.DeregisterWindow(plain); err != nil {
		return err
	}
	// The last rank offers nothing: no rank may use the window.
	var offer hal.Buffer = alloc
	if rank == c.Size()-1 {
		offer = nil
	}
	partial, err := c.RegisterWindow(head, winBytes, offer, true)
	if err != nil {
		return err
	}
	if partial.Mapped() {
		return fmt.Errorf("a window one rank registered with nothing reports Mapped")
	}
	if err := run("through a window one rank registered with nothing", 300001, 0, fromIn, ""); err != nil {
		return err
	}
	if err := c.DeregisterWindow(partial); err != nil {
		return err
	}
	if err := c.DeregisterWindow(partial); err == nil {
		return fmt.Errorf("a second DeregisterWindow of the same window succeeded")
	}
	if _, err := c.RegisterWindow(head, alloc.Size()-int64(lead)+1, alloc, true); err == nil {
		return fmt.Errorf("a window past its allocation's end was registered")
	}
	return windowP2P(rank, c, dev, s)
}

// launchCounted launches call, waits for it and returns the plan PlanName
// named before it and whether it ran through symmetric windows.
func launchCounted(c *weft.Comm, call weft.Call, s hal.Stream) (name string, windowed bool, err error) {
	name = c.PlanName(call)
	before := c.WindowCalls()
	if err := c.Launch(call, s); err != nil {
		return name, false, err
	}
	if err := c.Synchronize(s); err != nil {
		return name, false, err
	}
	return name, c.WindowCalls() == before+1, nil
}

// windowGatherScatter runs AllGathers into and ReduceScatters from the
// symmetric window at head (inside alloc, lead bytes in), at sizes that
// Launch gives an HB plan (through the window: the direct plans) and an LL
// plan (not through it), out of place and in place, and checks every
// element and the plan.
func windowGatherScatter(rank int, c *weft.Comm, dev hal.Device, s hal.Stream, alloc hal.Buffer, head, lead uint64, scale int64) error {
	n := c.Size()
	es := int64(plan.Float32.Size())
	other, err := dev.Alloc(int64(n) * 100000 * scale * es)
	if err != nil {
		return err
	}
	defer other.Free()
	for _, k := range []struct {
		coll    algorithms.Collective
		count   int64 // per rank
		inPlace bool
		direct  bool
	}{
		{algorithms.AllGather, 100000, false, true},
		{algorithms.AllGather, 90001, true, true},
		{algorithms.AllGather, 100, false, false},
		{algorithms.ReduceScatter, 100000, false, true},
		{algorithms.ReduceScatter, 90001, true, true},
		{algorithms.ReduceScatter, 100, false, false},
	} {
		k.count *= scale
		what := fmt.Sprintf("%v of %d floats per rank, in place %v", k.coll, k.count, k.inPlace)
		seg := uint64(k.count * es)
		// The window holds the AllGather's output or the ReduceScatter's
		// input (n segments at the head); the other buffer is outside it.
		winOff, win, outside := int64(lead), head, other.Addr()
		send, recv := outside, win
		if k.coll == algorithms.ReduceScatter {
			send, recv = win, outside
		}
		if k.inPlace {
			if k.coll == algorithms.AllGather {
				send = win + uint64(rank)*seg
			} else {
				recv = win + uint64(rank)*seg
			}
		}
		in := check.Send(k.coll, plan.Float32, plan.Sum, n, rank, k.count)
		inBuf, inOff := other, int64(0)
		if send != outside {
			inBuf, inOff = alloc, winOff+int64(send-win)
		}
		if err := dev.Write(inBuf, inOff, in); err != nil {
			return err
		}
		call := weft.Call{Coll: k.coll, Send: send, Recv: recv, Count: k.count, Type: plan.Float32, Op: plan.Sum}
		name, windowed, err := launchCounted(c, call, s)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		want := check.Expected(k.coll, plan.Float32, plan.Sum, n, rank, 0, k.count)
		res := make([]byte, len(want))
		outBuf, outOff := alloc, winOff+int64(recv-win)
		if recv == outside {
			outBuf, outOff = other, 0
		}
		if err := dev.Read(res, outBuf, outOff); err != nil {
			return err
		}
		if wrong := check.Wrong(plan.Float32, res, want); wrong != 0 {
			return fmt.Errorf("%s: %d elements wrong", what, wrong)
		}
		if windowed != k.direct || strings.Contains(name, "-direct-") != k.direct {
			return fmt.Errorf("%s: through the window's direct plan %v (PlanName %q), want %v", what, windowed, name, k.direct)
		}
		if b, _ := c.PlanSMs(call); k.direct && b < 1 {
			return fmt.Errorf("%s: PlanSMs = %d blocks for a direct plan", what, b)
		}
	}
	return nil
}

// windowP2P sends 40,000 floats to the next rank, received into a
// symmetric window (a zero-copy receive: the window's registration is in
// the post table), and checks them.
func windowP2P(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
	n := c.Size()
	const count = 40000
	es := int64(plan.Float32.Size())
	win, err := dev.Alloc(2 * count * es)
	if err != nil {
		return err
	}
	defer win.Free()
	src, err := dev.Alloc(count * es)
	if err != nil {
		return err
	}
	defer src.Free()
	w, err := c.RegisterWindow(win.Addr(), win.Size(), win, true)
	if err != nil {
		return err
	}
	defer c.DeregisterWindow(w)
	if err := dev.Write(src, 0, check.Input(plan.Float32, plan.Sum, rank, count)); err != nil {
		return err
	}
	next, prev := (rank+1)%n, (rank+n-1)%n
	calls := []weft.P2P{
		{Peer: next, Send: true, Buf: src.Addr(), Bytes: count * es},
		{Peer: prev, Buf: win.Addr() + uint64(count*es), Bytes: count * es},
	}
	if err := c.LaunchP2P(calls, s); err != nil {
		return err
	}
	if err := c.Synchronize(s); err != nil {
		return err
	}
	got := make([]byte, count*es)
	if err := dev.Read(got, win, count*es); err != nil {
		return err
	}
	if wrong := check.Wrong(plan.Float32, got, check.Input(plan.Float32, plan.Sum, prev, count)); wrong != 0 {
		return fmt.Errorf("receive into a window: %d of %d elements wrong", wrong, count)
	}
	return nil
}

// TestWindowAllReduceNVLink: windowCases on 2 GPUs (internal/cudadev's
// exported allocations, the copy engines and the NVRTC-compiled reduction
// kernel) at 16 times the sizes of the hal/host test (the GPUs' LL plans
// reach 2 MiB), with the copy-engine bound at 16 MiB.
func TestWindowAllReduceNVLink(t *testing.T) {
	if requireGPUs(t) < 2 {
		t.Skip("needs 2 GPUs")
	}
	t.Setenv("WEFT_TUNING_FILE", "off")
	t.Setenv("WEFT_ALGO", "")
	t.Setenv("WEFT_CE_ALLREDUCE_MIN_BYTES", "16M")
	errs := runRanksOpts(t, "nvlink", 2, weft.Options{Timeout: 60 * time.Second}, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		return windowCases(rank, c, dev, s, 16)
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
