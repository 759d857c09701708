package weft_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/nvlink"
	"github.com/weftccl/weft/hal/plan"
)

// Zero-copy point-to-point on hal/host: receives into registered buffers
// (Comm.Register) and into unregistered ones, mixed in one group, at sizes
// around the LL/HB boundary scaled by every element size, at offsets
// inside the registration (odd ones included), checked byte by byte.
// hal/host's TestPostedDirect checks that the direct path is the one taken.

// regRecv places receive i of a group: into the registration at a
// distinct offset, or into a buffer of its own.
type regRecv struct {
	registered bool
	off        int64
}

func TestP2PRegistered(t *testing.T) {
	t.Parallel() // waits in its peers' polls more than it computes
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("ranks%d", n), func(t *testing.T) { testP2PRegistered(t, "host", n) })
	}
}

// TestP2PRegisteredNVLink is TestP2PRegistered on the GPUs, where the
// sender's blocks store over NVLink into the mapped receive buffer.
func TestP2PRegisteredNVLink(t *testing.T) {
	testP2PRegistered(t, nvlink.Name, max(requireGPUs(t), 2))
}

func testP2PRegistered(t *testing.T, backend string, n int) {
	m := p2pLLMax(t)
	const regBytes = 8 << 20
	// Counts of every element size around the LL bound (LL plan below,
	// windowed plan with posts above), and one of several windows.
	sizes := []int64{1, 200_003}
	for _, typ := range []plan.DataType{plan.Uint8, plan.BFloat16, plan.Float32, plan.Float64} {
		es := int64(typ.Size())
		for _, count := range []int64{m / es, m/es + 1, 3*m/es + 5} {
			sizes = append(sizes, count*es)
		}
	}
	errs := runRanks(t, backend, n, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		reg, err := dev.Alloc(regBytes)
		if err != nil {
			return err
		}
		defer reg.Free()
		// Rank 0 registers a second buffer alone: the others take
		// part with nothing, and registration ids stay in step.
		var extra hal.Buffer
		if rank == 0 {
			if extra, err = dev.Alloc(4096); err != nil {
				return err
			}
			defer extra.Free()
		}
		if err := c.Register(extra); err != nil {
			return fmt.Errorf("register nothing/extra: %w", err)
		}
		if extra != nil {
			defer c.Deregister(extra)
		}
		if err := c.Register(reg); err != nil {
			return err
		}
		defer c.Deregister(reg)
		for si, size := range sizes {
			for it := 0; it < 2; it++ {
				var ops []p2pOp
				for p := 0; p < n; p++ {
					ops = append(ops, p2pOp{peer: p, send: true, n: size})
				}
				// Receive from peer p: registered for alternating
				// peers (changing with the iteration), at an offset
				// that is odd for odd peers.
				places := make([]regRecv, n)
				for p := 0; p < n; p++ {
					places[p] = regRecv{registered: (p+it+si)%2 == 0, off: int64(p)*(regBytes/int64(n)) + int64(p%2)*3}
				}
				var views []hal.Buffer
				for p := 0; p < n; p++ {
					o := p2pOp{peer: p, n: size}
					if places[p].registered {
						o.buf = subBuffer{reg, places[p].off, size}
						views = append(views, o.buf)
					}
					ops = append(ops, o)
				}
				err := runRegGroup(rank, c, dev, s, ops, it)
				for i := range ops {
					if !isView(ops[i].buf, views) && ops[i].buf != nil {
						ops[i].buf.Free()
					}
				}
				if err != nil {
					return fmt.Errorf("%d bytes, iteration %d, receives %+v: %w", size, it, places, err)
				}
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func isView(b hal.Buffer, views []hal.Buffer) bool {
	for _, v := range views {
		if b == v {
			return true
		}
	}
	return false
}

// subBuffer is bytes [off, off+n) of a buffer, for the test's reads and
// writes; Free does nothing (the parent is freed once).
type subBuffer struct {
	parent hal.Buffer
	off, n int64
}

func (b subBuffer) Addr() uint64 { return b.parent.Addr() + uint64(b.off) }
func (b subBuffer) Size() int64  { return b.n }
func (b subBuffer) Host() []byte {
	if h := b.parent.Host(); h != nil {
		return h[b.off : b.off+b.n]
	}
	return nil
}
func (b subBuffer) Free() error { return nil }

// TestP2PPostRefused: the sender deregisters the buffer its receiver
// posts (Deregister is not collective), so its post table has no entry
// for it: the post is refused, both sides take the windowed path of the
// same launch, and the data arrives; later launches (the receiver keeps
// posting) too.
func TestP2PPostRefused(t *testing.T) {
	size := 3*p2pLLMax(t) + 7
	errs := runRanks(t, "host", 2, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		reg, err := dev.Alloc(1 << 20)
		if err != nil {
			return err
		}
		defer reg.Free()
		if err := c.Register(reg); err != nil {
			return err
		}
		if rank == 0 { // the sender forgets the registration
			if err := c.Deregister(reg); err != nil {
				return err
			}
		}
		for it := 0; it < 3; it++ {
			ops := []p2pOp{{peer: 1 - rank, send: rank == 0, n: size}}
			if rank == 1 {
				ops[0].buf = subBuffer{reg, 16 * int64(it), size}
			}
			err := runRegGroup(rank, c, dev, s, ops, it)
			if rank == 0 {
				freeOps(ops)
			}
			if err != nil {
				return fmt.Errorf("iteration %d: %w", it, err)
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestP2PRegisteredGraph: a group with a registered and an unregistered
// receive, captured once and replayed with new data each time, eager
// groups in between; no host exchange happens per replay.
func TestP2PRegisteredGraph(t *testing.T) { testP2PRegisteredGraph(t, "host", 3) }

// TestP2PRegisteredGraphNVLink is TestP2PRegisteredGraph on the GPUs, in
// CUDA graphs.
func TestP2PRegisteredGraphNVLink(t *testing.T) {
	testP2PRegisteredGraph(t, nvlink.Name, max(requireGPUs(t), 2))
}

func testP2PRegisteredGraph(t *testing.T, backend string, n int) {
	size := 2*p2pLLMax(t) + 33
	errs := runRanks(t, backend, n, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		gc, ok := dev.(hal.GraphCapturer)
		if !ok {
			return fmt.Errorf("hal/host device %T captures no graphs", dev)
		}
		reg, err := dev.Alloc(1 << 20)
		if err != nil {
			return err
		}
		defer reg.Free()
		if err := c.Register(reg); err != nil {
			return err
		}
		next, prev := (rank+1)%n, (rank+n-1)%n
		plain, err := dev.Alloc(size)
		if err != nil {
			return err
		}
		defer plain.Free()
		captured := []p2pOp{
			{peer: next, send: true, n: size}, {peer: prev, n: size, buf: subBuffer{reg, 48, size}},
			{peer: prev, send: true, k: 1, n: size}, {peer: next, k: 1, n: size, buf: plain},
		}
		for i := range captured {
			if captured[i].buf == nil {
				b, err := dev.Alloc(size)
				if err != nil {
					return err
				}
				defer b.Free()
				captured[i].buf = b
			}
		}
		g, err := captureP2P(gc, c, s, captured)
		if err != nil {
			return err
		}
		defer g.Close()
		for it := 0; it < 4; it++ {
			for _, o := range captured {
				if o.send {
					if err := writeAt(dev, o.buf, p2pBytes(rank, o.peer, o.k, it, o.n)); err != nil {
						return err
					}
				}
			}
			if err := g.Launch(s); err != nil {
				return err
			}
			if err := c.Synchronize(s); err != nil {
				return err
			}
			if err := checkRegRecvs(rank, dev, captured, it); err != nil {
				return fmt.Errorf("replay %d: %w", it, err)
			}
			eager := []p2pOp{{peer: next, send: true, k: 2, n: size + 16}, {peer: prev, k: 2, n: size + 16, buf: subBuffer{reg, 1 << 19, size + 16}}}
			if err := runRegGroup(rank, c, dev, s, eager, it); err != nil {
				return fmt.Errorf("eager group after replay %d: %w", it, err)
			}
			eager[0].buf.Free()
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// writeAt and readAt are Device.Write and Read at offset 0 of b, which
// may be a view inside a registration (subBuffer).
func writeAt(dev hal.Device, b hal.Buffer, data []byte) error {
	if v, ok := b.(subBuffer); ok {
		return dev.Write(v.parent, v.off, data)
	}
	return dev.Write(b, 0, data)
}

func readAt(dev hal.Device, dst []byte, b hal.Buffer) error {
	if v, ok := b.(subBuffer); ok {
		return dev.Read(dst, v.parent, v.off)
	}
	return dev.Read(dst, b, 0)
}

// runRegGroup is runP2PGroup for operations whose buffers may be views
// inside a registration.
func runRegGroup(rank int, c *weft.Comm, dev hal.Device, s hal.Stream, ops []p2pOp, it int) error {
	var group []weft.P2P
	for i := range ops {
		if ops[i].buf == nil {
			b, err := dev.Alloc(max(ops[i].n, 1))
			if err != nil {
				return err
			}
			ops[i].buf = b
		}
		if ops[i].send {
			if err := writeAt(dev, ops[i].buf, p2pBytes(rank, ops[i].peer, ops[i].k, it, ops[i].n)); err != nil {
				return err
			}
		}
		group = append(group, weft.P2P{Peer: ops[i].peer, Send: ops[i].send, Buf: ops[i].buf.Addr(), Bytes: ops[i].n})
	}
	if err := c.LaunchP2P(group, s); err != nil {
		return err
	}
	if err := c.Synchronize(s); err != nil {
		return err
	}
	return checkRegRecvs(rank, dev, ops, it)
}

func checkRegRecvs(rank int, dev hal.Device, ops []p2pOp, it int) error {
	for _, o := range ops {
		if o.send {
			continue
		}
		got := make([]byte, o.n)
		if err := readAt(dev, got, o.buf); err != nil {
			return err
		}
		if d := cmp.Diff(p2pBytes(o.peer, rank, o.k, it, o.n), got); d != "" {
			return fmt.Errorf("iteration %d, round %d: receive of %d bytes from rank %d differs:\n%.300s", it, o.k, o.n, o.peer, d)
		}
	}
	return nil
}
