package weft_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// p2pLLMax is the LL point-to-point bound of hal/host's default
// configuration (algorithms.DefaultConfig).
func p2pLLMax(t *testing.T) int64 {
	t.Helper()
	m := algorithms.DefaultConfig(0, 2, 4, false).P2PLLMaxBytes
	if m <= 0 {
		t.Fatalf("hal/host default configuration has no LL point-to-point plan (P2PLLMaxBytes %d)", m)
	}
	return m
}

// p2pBytes is the payload src sends to dst in round k of iteration it:
// distinct for every source, destination, round, iteration and byte.
func p2pBytes(src, dst, k, it int, n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(src*59 + dst*31 + k*17 + it*101 + i*7 + i>>9)
	}
	return b
}

// p2pOp is one operation of a test group with its buffer.
type p2pOp struct {
	peer int
	send bool
	k    int // round: the k-th operation to or from the peer
	n    int64
	buf  hal.Buffer
}

// runP2PGroup allocates a buffer per operation, fills the sends for
// iteration it, launches the group, synchronises and checks every receive
// byte by byte.
func runP2PGroup(rank int, c *weft.Comm, dev hal.Device, s hal.Stream, ops []p2pOp, it int) error {
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
			if err := dev.Write(ops[i].buf, 0, p2pBytes(rank, ops[i].peer, ops[i].k, it, ops[i].n)); err != nil {
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
	return checkP2PRecvs(rank, dev, ops, it)
}

func checkP2PRecvs(rank int, dev hal.Device, ops []p2pOp, it int) error {
	for _, o := range ops {
		if o.send {
			continue
		}
		got := make([]byte, o.n)
		if err := dev.Read(got, o.buf, 0); err != nil {
			return err
		}
		if d := cmp.Diff(p2pBytes(o.peer, rank, o.k, it, o.n), got); d != "" {
			return fmt.Errorf("iteration %d, round %d: receive of %d bytes from rank %d differs:\n%.300s", it, o.k, o.n, o.peer, d)
		}
	}
	return nil
}

func freeOps(ops []p2pOp) {
	for _, o := range ops {
		if o.buf != nil {
			o.buf.Free()
		}
	}
}

// captureP2P captures the group of ops (buffers allocated) into a graph
// on s.
func captureP2P(gc hal.GraphCapturer, c *weft.Comm, s hal.Stream, ops []p2pOp) (hal.Graph, error) {
	var group []weft.P2P
	for _, o := range ops {
		group = append(group, weft.P2P{Peer: o.peer, Send: o.send, Buf: o.buf.Addr(), Bytes: o.n})
	}
	if err := gc.BeginCapture(s); err != nil {
		return nil, err
	}
	if err := c.LaunchP2P(group, s); err != nil {
		return nil, err
	}
	return gc.EndCapture(s)
}

// TestP2PPlanChoice: an operation up to the LL bound is served by the LL
// point-to-point plan, a larger one by the mid-size windowed plan up to its
// bound, a larger one still by the windowed plan, whatever the data type
// (the choice is by bytes), and WEFT_ALGO=hb's configuration leaves the LL
// plans out.
func TestP2PPlanChoice(t *testing.T) {
	m := p2pLLMax(t)
	w := algorithms.DefaultConfig(0, 2, 4, false).P2PLLWideMaxBytes
	if w <= m {
		t.Fatalf("hal/host default configuration has no wide LL point-to-point plan (P2PLLWideMaxBytes %d, P2PLLMaxBytes %d)", w, m)
	}
	sm := algorithms.DefaultConfig(0, 2, 4, false).P2PLLSmallMaxBytes
	if sm <= 0 || sm >= m {
		t.Fatalf("hal/host default configuration has no one-block LL point-to-point plan (P2PLLSmallMaxBytes %d, P2PLLMaxBytes %d)", sm, m)
	}
	mm := algorithms.DefaultConfig(0, 2, 4, false).P2PMidMaxBytes
	if mm <= w || mm%(1<<10) != 0 || mm >= 1<<20 {
		t.Fatalf("hal/host default configuration has no mid-size windowed point-to-point plan between %d bytes and 1 MiB (P2PMidMaxBytes %d)", w, mm)
	}
	wide, small, mid := fmt.Sprintf("-to%dK", w>>10), fmt.Sprintf("-1x32-to%dK", sm>>10), fmt.Sprintf("-to%dK", mm>>10)
	errs := runRanks(t, "host", 2, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		for _, typ := range plan.DataTypes {
			es := int64(typ.Size())
			for _, tc := range []struct {
				count      int64
				want, tail string
			}{
				{0, "sendrecv-LL16-", small},
				{1, "sendrecv-LL16-", small},
				{sm / es, "sendrecv-LL16-", small},
				{sm/es + 1, "sendrecv-LL16-", ""},
				{m / es, "sendrecv-LL16-", ""},
				{m/es + 1, "sendrecv-LL16-", wide},
				{w / es, "sendrecv-LL16-", wide},
				{w/es + 1, "sendrecv-hb-", mid},
				{mm / es, "sendrecv-hb-", mid},
				{mm/es + 1, "sendrecv-hb-", ""},
				{64 << 20 / es, "sendrecv-hb-", ""},
			} {
				name := c.PlanName(weft.Call{Coll: weft.SendRecv, Count: tc.count, Type: typ})
				ok := strings.HasPrefix(name, tc.want) && strings.HasSuffix(name, tc.tail)
				if tc.tail == "" {
					ok = ok && !strings.HasSuffix(name, wide) && !strings.HasSuffix(name, small) && !strings.HasSuffix(name, mid)
				}
				if !ok {
					return fmt.Errorf("%v × %d: plan %q, want %s…%s", typ, tc.count, name, tc.want, tc.tail)
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
	cfg := algorithms.DefaultConfig(0, 2, 4, false)
	cfg.Algo = "hb"
	choices, err := algorithms.Plans(cfg, algorithms.SendRecv, 0)
	if err != nil || len(choices) != 2 || !strings.HasSuffix(choices[0].Plan.Name, mid) || !strings.HasPrefix(choices[1].Plan.Name, "sendrecv-hb-") || strings.HasSuffix(choices[1].Plan.Name, mid) {
		t.Errorf("WEFT_ALGO=hb: point-to-point plans %v, %v; want the two windowed plans only", choices, err)
	}
}

// TestP2PLLSizes: one send to and one receive from every peer (self
// included) per group, at sizes around the LL bound and the LL packet and
// 16-byte boundaries, on 2, 3 and 4 ranks, each size three times in a row
// (both scratch halves and a reuse of the first).
func TestP2PLLSizes(t *testing.T) {
	t.Parallel() // computes while the socket-bound parallel tests wait
	m := p2pLLMax(t)
	sizes := []int64{0, 1, 7, 8, 9, 15, 16, 17, 4095, m - 1, m, m + 1, 2*m + 3}
	for _, n := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("ranks%d", n), func(t *testing.T) {
			errs := runRanks(t, "host", n, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
				for _, size := range sizes {
					var ops []p2pOp
					for p := 0; p < n; p++ {
						ops = append(ops, p2pOp{peer: p, send: true, n: size}, p2pOp{peer: p, n: size})
					}
					for it := 0; it < 3; it++ {
						if err := runP2PGroup(rank, c, dev, s, ops, it); err != nil {
							freeOps(ops)
							return fmt.Errorf("%d bytes: %w", size, err)
						}
					}
					freeOps(ops)
				}
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// TestP2PMixedRounds: grouped patterns whose sizes differ by peer and by
// round, on both sides of the LL bound, zero and self sends included, so
// that a round mixes LL and windowed operations (two launches) and a
// peer's k-th operation may take another plan than its (k+1)-th.
func TestP2PMixedRounds(t *testing.T) {
	m := p2pLLMax(t)
	menu := []int64{0, 1, 1000, m, m + 1, 3*m + 5, 40_000}
	size := func(src, dst, k int) int64 { return menu[(src*3+dst*5+k*2)%len(menu)] }
	for _, n := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("ranks%d", n), func(t *testing.T) {
			errs := runRanks(t, "host", n, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
				var ops []p2pOp
				for k := 0; k < 4; k++ {
					for p := 0; p < n; p++ {
						ops = append(ops, p2pOp{peer: p, send: true, k: k, n: size(rank, p, k)}, p2pOp{peer: p, k: k, n: size(p, rank, k)})
					}
				}
				defer freeOps(ops)
				for it := 0; it < 2; it++ {
					if err := runP2PGroup(rank, c, dev, s, ops, it); err != nil {
						return err
					}
				}
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// TestP2PLLRunAhead: a rank enqueues many LL groups to one peer without
// synchronising, so a sender may run launches ahead of its receiver: the
// credit taken at the start of a launch keeps it from overwriting a
// scratch half the receiver has not read. Every group's data is checked
// after the last one.
func TestP2PLLRunAhead(t *testing.T) {
	const groups = 9
	errs := runRanks(t, "host", 2, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		peer := 1 - rank
		var all [][]p2pOp
		defer func() {
			for _, ops := range all {
				freeOps(ops)
			}
		}()
		// Counts that differ between launches k and k+2 (which share a
		// scratch half), as the plan's span must allow (whether a block
		// keeps its packets is checked exactly by hal/plan TestSpanRange;
		// here it depends on timing).
		sizes := [groups]int64{16000, 16000, 9, 9, 16384, 7000, 1, 12000, 300}
		for g := 0; g < groups; g++ {
			n := sizes[g]
			var ops []p2pOp
			// Rank 0 only sends, rank 1 only receives: nothing in the data
			// flow holds the sender back.
			if rank == 0 {
				ops = []p2pOp{{peer: peer, send: true, k: g, n: n}}
			} else {
				ops = []p2pOp{{peer: peer, k: g, n: n}}
			}
			b, err := dev.Alloc(n)
			if err != nil {
				return err
			}
			ops[0].buf = b
			all = append(all, ops)
			if rank == 0 {
				if err := dev.Write(b, 0, p2pBytes(rank, peer, g, 0, n)); err != nil {
					return err
				}
			}
			if err := c.LaunchP2P([]weft.P2P{{Peer: peer, Send: ops[0].send, Buf: b.Addr(), Bytes: n}}, s); err != nil {
				return err
			}
		}
		if err := c.Synchronize(s); err != nil {
			return err
		}
		for _, ops := range all {
			if err := checkP2PRecvs(rank, dev, ops, 0); err != nil {
				return err
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

// TestP2PLLGraphReplay: a group captured once into a graph and replayed,
// with new send data before each replay and eager groups to the same
// peers in between, delivers each replay's data: the replayed launches
// take fresh LL flags and alternate scratch halves from the device's own
// launch counters, as a CUDA graph replay does.
func TestP2PLLGraphReplay(t *testing.T) {
	const n = 3
	errs := runRanks(t, "host", n, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		gc, ok := dev.(hal.GraphCapturer)
		if !ok {
			return fmt.Errorf("hal/host device %T captures no graphs", dev)
		}
		next, prev := (rank+1)%n, (rank+n-1)%n
		captured := []p2pOp{{peer: next, send: true, n: 3001}, {peer: prev, n: 3001}, {peer: rank, send: true, n: 17}, {peer: rank, n: 17}}
		eager := []p2pOp{{peer: next, send: true, k: 1, n: 555}, {peer: prev, k: 1, n: 555}}
		defer freeOps(captured)
		defer freeOps(eager)
		for i := range captured {
			b, err := dev.Alloc(captured[i].n)
			if err != nil {
				return err
			}
			captured[i].buf = b
		}
		g, err := captureP2P(gc, c, s, captured)
		if err != nil {
			return err
		}
		for it := 0; it < 5; it++ {
			for _, o := range captured {
				if o.send {
					if err := dev.Write(o.buf, 0, p2pBytes(rank, o.peer, o.k, it, o.n)); err != nil {
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
			if err := checkP2PRecvs(rank, dev, captured, it); err != nil {
				return fmt.Errorf("replay %d: %w", it, err)
			}
			if it%2 == 0 { // an eager group between replays moves the counters on
				if err := runP2PGroup(rank, c, dev, s, eager, it); err != nil {
					return fmt.Errorf("eager group after replay %d: %w", it, err)
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

// TestP2PLLInPlace: LL sends whose buffer is also a receive buffer of the
// same group (nccl-tests' in-place sendrecv) leave with the data the buffer
// held before the group.
func TestP2PLLInPlace(t *testing.T) {
	const n, k = 3, 5000
	errs := runRanks(t, "host", n, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		b, err := dev.Alloc(k)
		if err != nil {
			return err
		}
		defer b.Free()
		next, prev := (rank+1)%n, (rank+n-1)%n
		for it := 0; it < 3; it++ {
			if err := dev.Write(b, 0, p2pBytes(rank, next, 0, it, k)); err != nil {
				return err
			}
			if err := c.LaunchP2P([]weft.P2P{{Peer: next, Send: true, Buf: b.Addr(), Bytes: k}, {Peer: prev, Buf: b.Addr(), Bytes: k}}, s); err != nil {
				return err
			}
			if err := c.Synchronize(s); err != nil {
				return err
			}
			got := make([]byte, k)
			if err := dev.Read(got, b, 0); err != nil {
				return err
			}
			if d := cmp.Diff(p2pBytes(prev, rank, 0, it, k), got); d != "" {
				return fmt.Errorf("iteration %d: received data differs from rank %d's:\n%.300s", it, prev, d)
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

// TestP2PLLMismatch: an LL send whose size differs from the receive is
// reported by the receiver as a count mismatch naming the sender (from the
// packets' header); the sender, which waits for nothing in that launch,
// completes.
func TestP2PLLMismatch(t *testing.T) {
	t.Parallel() // waits out the 5 s timeout, twice (the launch, then Close's wait for the release rank 1 owes)
	errs := runRanksOpts(t, "host", 2, weft.Options{Timeout: 5 * time.Second}, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		b, err := dev.Alloc(4096)
		if err != nil {
			return err
		}
		defer b.Free()
		op := weft.P2P{Peer: 1, Send: true, Buf: b.Addr(), Bytes: 1000}
		if rank == 1 {
			op = weft.P2P{Peer: 0, Buf: b.Addr(), Bytes: 2000}
		}
		if err := c.LaunchP2P([]weft.P2P{op}, s); err != nil {
			return err
		}
		return c.Synchronize(s)
	})
	if err := errs[1]; err == nil || !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "rank 0") {
		t.Errorf("rank 1: got %v, want a count mismatch with rank 0 (ErrInvalidUsage)", err)
	}
	if err := errs[0]; err != nil {
		t.Errorf("rank 0 (LL sender): got %v, want success", err)
	}
}

// TestP2PLLUnevenPeers: ranks 0 and 1 exchange LL groups more often than
// ranks 0 and 2, so rank 0 launches the LL plan more often than rank 2:
// each peer's send and receive groups count only their own launches
// (plan.Plan.StateBytes), so flags and halves still match.
func TestP2PLLUnevenPeers(t *testing.T) {
	errs := runRanks(t, "host", 3, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		for it := 0; it < 7; it++ {
			pair := [2]int{0, 1}
			if it%3 == 2 {
				pair = [2]int{0, 2}
			}
			if rank != pair[0] && rank != pair[1] {
				continue
			}
			peer := pair[0] + pair[1] - rank
			n := int64(100 + 37*it)
			ops := []p2pOp{{peer: peer, send: true, n: n}, {peer: peer, n: n}}
			err := runP2PGroup(rank, c, dev, s, ops, it)
			freeOps(ops)
			if err != nil {
				return fmt.Errorf("group %d with rank %d: %w", it, peer, err)
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
