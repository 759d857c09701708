package weft_test

import (
	"fmt"
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
// window an AllReduce at or above the copy-engine executor's bound runs
// zero-copy (PlanName, PlanSMs and WindowCalls say so), out of place and
// in place, at offsets inside the window, every element checked; below
// the bound, through a window registered without the symmetric promise,
// and past the window's end it takes the other plans and stays exact. A
// window one rank registers with nothing (unexportable memory) serves no
// rank zero-copy. A point-to-point receive into a window is exact.
func TestWindowAllReduceHost(t *testing.T) {
	t.Setenv("WEFT_TUNING_FILE", "off")
	t.Setenv("WEFT_ALGO", "")
	t.Setenv("WEFT_CE_ALLREDUCE_MIN_BYTES", "64K")
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("ranks%d", n), func(t *testing.T) {
			errs := runRanksOpts(t, "host", n, weft.Options{Timeout: 20 * time.Second}, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
				return windowCases(rank, c, dev, s)
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

func windowCases(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
	const winBytes = 1 << 20
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
	// run AllReduces count floats from in (or, in place, from the window)
	// into the window at off and checks every element and whether the
	// call went zero-copy through the window.
	run := func(what string, count int64, off uint64, inPlace, wantWindowed bool) error {
		es := int64(plan.Float32.Size())
		src, send := in, in.Addr()
		if inPlace {
			src, send = alloc, head+off
		}
		soff := int64(0)
		if inPlace {
			soff = int64(lead + off)
		}
		if err := dev.Write(src, soff, check.Input(plan.Float32, plan.Sum, rank, count)); err != nil {
			return err
		}
		call := weft.Call{Coll: algorithms.AllReduce, Send: send, Recv: head + off, Count: count, Type: plan.Float32, Op: plan.Sum}
		name := c.PlanName(call)
		before := c.WindowCalls()
		if err := c.Launch(call, s); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := c.Synchronize(s); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		got := make([]byte, count*es)
		if err := dev.Read(got, alloc, int64(lead+off)); err != nil {
			return err
		}
		if wrong := check.Wrong(plan.Float32, got, check.AllReduce(plan.Float32, plan.Sum, c.Size(), count)); wrong != 0 {
			return fmt.Errorf("%s: %d of %d elements wrong", what, wrong, count)
		}
		windowed := c.WindowCalls() == before+1
		if windowed != wantWindowed || (name == "all_reduce-ce-host-issued") != wantWindowed {
			return fmt.Errorf("%s: zero-copy through the window %v (PlanName %q), want %v", what, windowed, name, wantWindowed)
		}
		if wantWindowed {
			if b, m := c.PlanSMs(call); b < 1 || m != 0 {
				return fmt.Errorf("%s: PlanSMs = %d, %d, want the reduction kernel's blocks and none moving data", what, b, m)
			}
		}
		return nil
	}
	for _, k := range []struct {
		what     string
		count    int64
		off      uint64
		inPlace  bool
		windowed bool
	}{
		{"out of place at the head", 70001, 0, false, true},
		{"out of place at an offset", 50000, 4096 + 16, false, true},
		{"in place at an offset", 65536, 32768, true, true},
		{"below the copy-engine bound", 1000, 0, false, false},
		{"past the window's end", 70000, winBytes - 4*60000, false, false},
	} {
		if err := run(k.what, k.count, k.off, k.inPlace, k.windowed); err != nil {
			return err
		}
	}
	if err := c.DeregisterWindow(sym); err != nil {
		return err
	}
	if err := run("after the window's deregistration", 70001, 0, false, false); err != nil {
		return err
	}
	// Without the symmetric promise: mapped, but no zero-copy collective.
	plain, err := c.RegisterWindow(head, winBytes, alloc, false)
	if err != nil {
		return err
	}
	if err := run("through a window without the symmetric promise", 70001, 0, false, false); err != nil {
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
	if err := run("through a window one rank registered with nothing", 70001, 0, false, false); err != nil {
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
// kernel), with the copy-engine bound lowered to 64 KiB so that the
// windows' AllReduces of 200–280 KB run zero-copy.
func TestWindowAllReduceNVLink(t *testing.T) {
	if requireGPUs(t) < 2 {
		t.Skip("needs 2 GPUs")
	}
	t.Setenv("WEFT_TUNING_FILE", "off")
	t.Setenv("WEFT_ALGO", "")
	t.Setenv("WEFT_CE_ALLREDUCE_MIN_BYTES", "64K")
	errs := runRanksOpts(t, "nvlink", 2, weft.Options{Timeout: 60 * time.Second}, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		return windowCases(rank, c, dev, s)
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
