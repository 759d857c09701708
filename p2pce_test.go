package weft_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/nvlink"
	"github.com/weftccl/weft/hal/plan"
)

// ceP2PBound is the copy-engine point-to-point bound the hal/host tests
// set (WEFT_CE_P2P_MIN_BYTES): above the LL point-to-point plans, so that
// groups mix LL, windowed and copy-engine operations.
const ceP2PBound = 64 << 10

// TestCEP2PHost: with WEFT_CE_P2P_MIN_BYTES set, operations at or above
// the bound are moved by the copy-engine path (the communicator counts
// them) and the rest by the kernels, in one group: sendrecv rings both
// ways, a gather and a scatter pattern, several rounds to one peer, copies
// to itself, zero-byte and unaligned sizes; every receive is checked byte
// by byte, twice (the flags are left as found).
func TestCEP2PHost(t *testing.T) { testCEP2P(t, "host", []int{2, 3}, ceP2PBound) }

// TestCEP2PNVLink is TestCEP2PHost on the GPUs with a 1 MiB bound: copy
// engines copy into the peers' buffers (the same process: the exported
// addresses themselves, peer access enabled).
func TestCEP2PNVLink(t *testing.T) {
	testCEP2P(t, nvlink.Name, []int{max(requireGPUs(t), 2)}, 1<<20)
}

func testCEP2P(t *testing.T, backend string, ranks []int, bound int64) {
	t.Setenv("WEFT_CE_P2P_MIN_BYTES", fmt.Sprint(bound))
	big, small := bound+4093, int64(3001)
	for _, n := range ranks {
		patterns := []struct {
			name  string
			ops   func(rank int) []p2pOp
			moved func(rank int) int64 // copy-engine operations per group on rank
		}{
			{"ring", func(rank int) []p2pOp {
				next, prev := (rank+1)%n, (rank+n-1)%n
				return []p2pOp{{peer: next, send: true, n: big}, {peer: prev, n: big}, {peer: prev, send: true, n: small}, {peer: next, n: small}}
			}, func(int) int64 { return 2 }},
			{"gather-to-1", func(rank int) []p2pOp {
				ops := []p2pOp{{peer: 1, send: true, n: big}}
				if rank == 1 {
					for p := 0; p < n; p++ {
						ops = append(ops, p2pOp{peer: p, n: big})
					}
				}
				return ops
			}, func(rank int) int64 {
				if rank == 1 {
					return int64(n) // n−1 receives and the copy to itself
				}
				return 1
			}},
			{"scatter-from-0", func(rank int) []p2pOp {
				var ops []p2pOp
				if rank == 0 {
					for p := 0; p < n; p++ {
						ops = append(ops, p2pOp{peer: p, send: true, n: big + int64(p)})
					}
				}
				return append(ops, p2pOp{peer: 0, n: big + int64(rank)})
			}, func(rank int) int64 {
				if rank == 0 {
					return int64(n)
				}
				return 1
			}},
			{"rounds", func(rank int) []p2pOp {
				var ops []p2pOp
				for k := 0; k < 3; k++ {
					for p := 0; p < n; p++ {
						if p == rank {
							continue
						}
						sz := []int64{big, small, 2*big + 1}[k]
						ops = append(ops, p2pOp{peer: p, send: true, k: k, n: sz}, p2pOp{peer: p, k: k, n: sz})
					}
				}
				return append(ops, p2pOp{peer: rank, send: true, n: 0}, p2pOp{peer: rank, n: 0})
			}, func(int) int64 { return 4 * int64(n-1) }},
		}
		for _, pat := range patterns {
			t.Run(fmt.Sprintf("ranks%d/%s", n, pat.name), func(t *testing.T) {
				errs := runRanks(t, backend, n, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
					ops := pat.ops(rank)
					defer freeOps(ops)
					for it := 0; it < 2; it++ {
						before := c.CopyEngineP2POps()
						if err := runP2PGroup(rank, c, dev, s, ops, it); err != nil {
							return fmt.Errorf("iteration %d: %w", it, err)
						}
						if got, want := c.CopyEngineP2POps()-before, pat.moved(rank); got != want {
							return fmt.Errorf("iteration %d: %d operations on copy engines, want %d", it, got, want)
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
}

// TestCEP2PInPlace: a large send whose buffer is also the receive buffer
// of the same group (nccl-tests' in-place sendrecv) is refused by the
// rank holding both, so the kernels stage it: every rank receives what
// its peer's buffer held before the group; non-overlapping operations of
// the same group still go to the copy engines.
func TestCEP2PInPlace(t *testing.T) {
	t.Setenv("WEFT_CE_P2P_MIN_BYTES", fmt.Sprint(ceP2PBound))
	const n, k = 3, ceP2PBound + 512
	errs := runRanks(t, "host", n, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		next, prev := (rank+1)%n, (rank+n-1)%n
		b, err := dev.Alloc(k)
		if err != nil {
			return err
		}
		defer b.Free()
		other := []p2pOp{{peer: next, send: true, k: 1, n: k}, {peer: prev, k: 1, n: k}}
		defer freeOps(other)
		for it := 0; it < 2; it++ {
			if err := dev.Write(b, 0, p2pBytes(rank, next, 0, it, k)); err != nil {
				return err
			}
			var group []weft.P2P
			for i := range other {
				if other[i].buf == nil {
					if other[i].buf, err = dev.Alloc(k); err != nil {
						return err
					}
				}
				if other[i].send {
					if err := dev.Write(other[i].buf, 0, p2pBytes(rank, next, 1, it, k)); err != nil {
						return err
					}
				}
				group = append(group, weft.P2P{Peer: other[i].peer, Send: other[i].send, Buf: other[i].buf.Addr(), Bytes: k})
			}
			group = append(group, weft.P2P{Peer: next, Send: true, Buf: b.Addr(), Bytes: k}, weft.P2P{Peer: prev, Buf: b.Addr(), Bytes: k})
			before := c.CopyEngineP2POps()
			if err := c.LaunchP2P(group, s); err != nil {
				return err
			}
			if err := c.Synchronize(s); err != nil {
				return err
			}
			got := make([]byte, k)
			if err := dev.Read(got, b, 0); err != nil {
				return err
			}
			if want := p2pBytes(prev, rank, 0, it, k); string(got) != string(want) {
				return fmt.Errorf("iteration %d: in-place receive from rank %d differs", it, prev)
			}
			if err := checkP2PRecvs(rank, dev, other, it); err != nil {
				return fmt.Errorf("iteration %d: %w", it, err)
			}
			if moved := c.CopyEngineP2POps() - before; moved != 2 {
				return fmt.Errorf("iteration %d: %d operations on copy engines, want 2 (the in-place pair refused)", it, moved)
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

// TestCEP2PGraphReplay: a copy-engine group captured once and replayed,
// with new send data before each replay and eager copy-engine groups to
// the same peers between replays, delivers each replay's data: the flags
// are constants reset by their waiters, and the captured copies go to the
// buffers described at capture.
func TestCEP2PGraphReplay(t *testing.T) { testCEP2PGraphReplay(t, "host", 3, ceP2PBound) }

// TestCEP2PGraphReplayNVLink is TestCEP2PGraphReplay on the GPUs (CUDA
// graphs) with a 1 MiB bound.
func TestCEP2PGraphReplayNVLink(t *testing.T) {
	testCEP2PGraphReplay(t, nvlink.Name, max(requireGPUs(t), 2), 1<<20)
}

// ceP2PFlood is how many eager groups, each into its own allocation, the
// graph replay test runs between two replays: more than the 32 peer
// allocations a communicator keeps mapped (ceP2PMaxImports).
const ceP2PFlood = 36

func testCEP2PGraphReplay(t *testing.T, backend string, n int, bound int64) {
	t.Setenv("WEFT_CE_P2P_MIN_BYTES", fmt.Sprint(bound))
	errs := runRanks(t, backend, n, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		gc, ok := dev.(hal.GraphCapturer)
		if !ok {
			return fmt.Errorf("device %T captures no graphs", dev)
		}
		next, prev := (rank+1)%n, (rank+n-1)%n
		big := bound + 100
		captured := []p2pOp{{peer: next, send: true, n: big}, {peer: prev, n: big}, {peer: rank, send: true, n: big}, {peer: rank, n: big}}
		eager := []p2pOp{{peer: prev, send: true, k: 1, n: big}, {peer: next, k: 1, n: big}}
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
		defer g.Close()
		for it := 0; it < 4; it++ {
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
			if it%2 == 0 {
				if err := runP2PGroup(rank, c, dev, s, eager, it); err != nil {
					return fmt.Errorf("eager group after replay %d: %w", it, err)
				}
			}
			if it == 1 {
				// More eager groups into distinct live allocations than
				// the mappings a communicator keeps: the captured
				// mapping, pinned, must outlive them.
				flood := make([][]p2pOp, ceP2PFlood)
				for i := range flood {
					flood[i] = []p2pOp{{peer: prev, send: true, k: 2, n: big}, {peer: next, k: 2, n: big}}
					defer freeOps(flood[i])
					if err := runP2PGroup(rank, c, dev, s, flood[i], it); err != nil {
						return fmt.Errorf("eager group %d of %d after replay %d: %w", i, ceP2PFlood, it, err)
					}
				}
			}
		}
		if want := int64(3 + 2*2 + 2*ceP2PFlood); c.CopyEngineP2POps() != want {
			return fmt.Errorf("%d operations on copy engines, want %d (3 captured, 2 per eager group)", c.CopyEngineP2POps(), want)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestCEP2PMismatch: a large send whose receive has another (large) size
// is reported on both ranks at the call, naming the peer, as
// hal.ErrInvalidUsage, with nothing queued.
func TestCEP2PMismatch(t *testing.T) {
	t.Setenv("WEFT_CE_P2P_MIN_BYTES", fmt.Sprint(ceP2PBound))
	errs := runRanksOpts(t, "host", 2, weft.Options{Timeout: 20 * time.Second}, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		b, err := dev.Alloc(4 * ceP2PBound)
		if err != nil {
			return err
		}
		defer b.Free()
		op := weft.P2P{Peer: 1, Send: true, Buf: b.Addr(), Bytes: 2 * ceP2PBound}
		if rank == 1 {
			op = weft.P2P{Peer: 0, Buf: b.Addr(), Bytes: 3 * ceP2PBound}
		}
		return c.LaunchP2P([]weft.P2P{op}, s)
	})
	for r, err := range errs {
		peer := fmt.Sprintf("rank %d", 1-r)
		if err == nil || !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), peer) || !strings.Contains(err.Error(), "same size") {
			t.Errorf("rank %d: got %v, want a size mismatch naming %s (ErrInvalidUsage)", r, err, peer)
		}
	}
}

// TestCEP2POff: WEFT_CE_P2P_MIN_BYTES=0 (hal/host's default: no
// preference) leaves every operation to the kernels.
func TestCEP2POff(t *testing.T) {
	errs := runRanks(t, "host", 2, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		ops := []p2pOp{{peer: 1 - rank, send: true, n: 4 * ceP2PBound}, {peer: 1 - rank, n: 4 * ceP2PBound}}
		defer freeOps(ops)
		if err := runP2PGroup(rank, c, dev, s, ops, 0); err != nil {
			return err
		}
		if got := c.CopyEngineP2POps(); got != 0 {
			return fmt.Errorf("%d operations on copy engines without WEFT_CE_P2P_MIN_BYTES", got)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestCEP2PCollectivesHost: with WEFT_CE_P2P_MIN_BYTES set, a Broadcast
// on two ranks (every root, in and out of place) at or above 2× the bound
// and an out-of-place AllToAll at or above it run through Launch as groups
// of sends and receives on the copy engines, element by element right; an
// in-place AllToAll keeps its kernels, and on three ranks so do Broadcasts
// (the split plan) and AllToAlls (the SM plan: copy engines lost past two
// ranks). PlanName and PlanSMs say so.
func TestCEP2PCollectivesHost(t *testing.T) {
	t.Setenv("WEFT_CE_P2P_MIN_BYTES", fmt.Sprint(ceP2PBound))
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("ranks%d", n), func(t *testing.T) {
			const count = ceP2PBound + 1001 // float32 elements (per peer for AllToAll): 4× the bound in bytes
			var cases []collCase
			for root := 0; root < n; root++ {
				for _, in := range []bool{false, true} {
					cases = append(cases, collCase{coll: algorithms.Broadcast, t: plan.Float32, op: plan.Sum, root: root, count: count, inPlace: in})
				}
			}
			for _, in := range []bool{false, true} {
				cases = append(cases, collCase{coll: algorithms.AllToAll, t: plan.Float32, op: plan.Sum, count: count, inPlace: in})
			}
			// AllToAll segments of 3/4 of the bound (copy engines: from
			// half of it) and just under half of it (kernels).
			const mid, low = ceP2PBound * 3 / 16, ceP2PBound/8 - 1
			cases = append(cases, collCase{coll: algorithms.AllToAll, t: plan.Float32, op: plan.Sum, count: mid},
				collCase{coll: algorithms.AllToAll, t: plan.Float32, op: plan.Sum, count: low})
			runCasesThen(t, "host", n, cases, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
				// Per rank on two ranks: each out-of-place AllToAll on
				// copy engines 2(n−1) operations and the copy to itself;
				// each Broadcast root n−1 sends (+1 copy out of place),
				// each other rank 1 receive. Past two ranks both keep
				// their kernels (ceP2PServes).
				want := int64(0)
				if n == 2 {
					want = 2*int64(2*(n-1)+1) + int64(2*(n-1)+1) + 2*int64(n-1)
				}
				if got := c.CopyEngineP2POps(); got != want {
					return fmt.Errorf("%d operations on copy engines, want %d", got, want)
				}
				b := weft.Call{Coll: algorithms.Broadcast, Send: 1 << 20, Recv: 2 << 20, Count: count, Type: plan.Float32}
				a := b
				a.Coll = algorithms.AllToAll
				small := b
				small.Count = ceP2PBound/2 - 1 // just under 2× the bound in bytes: a Broadcast keeps its kernels
				aMid, aLow := a, a
				aMid.Count, aLow.Count = mid, low
				if got := c.PlanName(aLow); strings.HasSuffix(got, "-ce-host-issued") {
					return fmt.Errorf("PlanName of an AllToAll of %d-byte segments = %q: below half the bound", low*4, got)
				}
				for _, k := range []struct {
					call weft.Call
					name string
				}{{b, "broadcast-ce-host-issued"}, {a, "alltoall-ce-host-issued"}, {aMid, "alltoall-ce-host-issued"}} {
					if k.call.Coll == algorithms.Broadcast && n > 2 {
						if got := c.PlanName(k.call); !strings.Contains(got, "broadcast-split-") {
							return fmt.Errorf("PlanName of a %d-byte Broadcast on %d ranks = %q, want the split plan", k.call.Count*4, n, got)
						}
						continue
					}
					if k.call.Coll == algorithms.AllToAll && n > 2 {
						if got := c.PlanName(k.call); strings.HasSuffix(got, "-ce-host-issued") {
							return fmt.Errorf("PlanName of an AllToAll on %d ranks = %q, want the SM plan", n, got)
						}
						continue
					}
					if got := c.PlanName(k.call); got != k.name {
						return fmt.Errorf("PlanName(%v) = %q, want %q", k.call.Coll, got, k.name)
					}
					// The copy kernel's blocks where the rank copies to
					// itself (the out-of-place Broadcast's root, every
					// rank of the AllToAll); none moving data.
					want := 0
					if k.call.Coll == algorithms.AllToAll || rank == k.call.Root {
						want = 32
					}
					if blocks, moving := c.PlanSMs(k.call); blocks != want || moving != 0 {
						return fmt.Errorf("PlanSMs(%v) on rank %d = %d, %d; want %d, 0", k.call.Coll, rank, blocks, moving, want)
					}
				}
				if got := c.PlanName(small); strings.HasSuffix(got, "-ce-host-issued") {
					return fmt.Errorf("PlanName of a %d-byte Broadcast = %q: below the bound", small.Count*4, got)
				}
				return nil
			})
		})
	}
}

// TestCEReduceHost: with WEFT_CE_REDUCE_MIN_BYTES set, a Reduce at or
// above the bound runs on the host-issued copy-engine executor (several
// 16 KiB windows on hal/host), for every root, in and out of place, each
// base operator and several types, element by element right; calls below
// the bound, and Avg, keep the kernel plans. PlanName and PlanSMs say so.
// On two ranks, from WEFT_CE_REDUCE_DIRECT_MIN_BYTES and out of place, the
// pushes go straight into the root's output (counted); in place, below
// that bound and on three ranks, into the landing slots. Past two ranks
// the bound does not apply (ceReduceServes): the three-rank cases run
// under WEFT_ALGO=ce, every size but Avg on the engines, and
// WEFT_ALGO unset leaves a Reduce above the bound to the split plan.
func TestCEReduceHost(t *testing.T) { testCEReduce(t, "host", []int{2, 3}, 8<<10, 1) }

// TestCEReduceBySizeTwoRanksHost: past two ranks the copy-engine Reduce's
// bound does not apply (the root's link would carry every rank's
// message): with WEFT_CE_REDUCE_MIN_BYTES set, a Reduce above it on three
// ranks takes the split plan, and so does a Broadcast above the
// copy-engine point-to-point bound.
func TestCEReduceBySizeTwoRanksHost(t *testing.T) {
	t.Setenv("WEFT_CE_REDUCE_MIN_BYTES", "8K")
	t.Setenv("WEFT_CE_P2P_MIN_BYTES", "8K")
	errs := runRanks(t, "host", 3, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		for _, coll := range []algorithms.Collective{algorithms.Reduce, algorithms.Broadcast} {
			call := weft.Call{Coll: coll, Send: 1 << 20, Recv: 2 << 20, Count: 1 << 20, Type: plan.Float32, Op: plan.Sum, Root: 1}
			if got, want := c.PlanName(call), coll.String()+"-split-r1"; !strings.HasPrefix(got, want) {
				return fmt.Errorf("PlanName(4 MiB %v on 3 ranks) = %q, want %s…", coll, got, want)
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

// TestCEReduceDirectBoundMismatch: ranks given different bounds for the
// Reduce into the root's output (Options.Config, as
// WEFT_CE_REDUCE_DIRECT_MIN_BYTES would) fail NewComm with ErrInvalidUsage
// naming the rank and its bound: a pair must pick one form.
func TestCEReduceDirectBoundMismatch(t *testing.T) {
	errs := runRanksWith(t, "host", 2, func(r int, dev hal.Device) weft.Options {
		c := algorithms.DefaultConfig(r, 2, dev.Info().Multiprocessors, false)
		if r == 1 {
			c.CEReduceDirectMinBytes = 1 << 20
		}
		return weft.Options{Config: &c}
	}, func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "root's output") || !strings.Contains(err.Error(), "rank 1 1048576 bytes") {
			t.Errorf("rank %d: %v; want ErrInvalidUsage naming rank 1's bound for the Reduce into the root's output", r, err)
		}
	}
}

// TestCEReduceNVLink is TestCEReduceHost on the GPUs with a 1 MiB bound
// and 2,000 times the counts: several 32 MiB windows.
func TestCEReduceNVLink(t *testing.T) {
	testCEReduce(t, nvlink.Name, []int{max(requireGPUs(t), 2)}, 1<<20, 2000)
}

// testCEReduce runs TestCEReduceHost's cases on backend with the bound
// (bytes) and the counts scaled by scale.
func testCEReduce(t *testing.T, backend string, ranks []int, bound int64, scale int64) {
	t.Setenv("WEFT_CE_REDUCE_MIN_BYTES", fmt.Sprint(bound))
	// Into the root's output from 40,000 bytes × scale: the Float32 cases
	// of every root and the Float64 ones of the types' cases.
	t.Setenv("WEFT_CE_REDUCE_DIRECT_MIN_BYTES", fmt.Sprint(40000*scale))
	for _, n := range ranks {
		t.Run(fmt.Sprintf("ranks%d", n), func(t *testing.T) {
			forced := n > 2
			if forced {
				t.Setenv("WEFT_ALGO", "ce")
			}
			var cases []collCase
			for root := 0; root < n; root++ {
				for _, in := range []bool{false, true} {
					cases = append(cases, collCase{coll: algorithms.Reduce, t: plan.Float32, op: plan.Sum, root: root, count: 20011 * scale, inPlace: in})
				}
			}
			for i, tp := range []plan.DataType{plan.BFloat16, plan.Int32, plan.Float64, plan.Uint8} {
				for _, op := range []plan.RedOp{plan.Sum, plan.Prod, plan.Max, plan.Min, plan.Avg} {
					cases = append(cases, collCase{coll: algorithms.Reduce, t: tp, op: op, root: i % n, count: 9000 * scale})
				}
			}
			cases = append(cases, collCase{coll: algorithms.Reduce, t: plan.Float32, op: plan.Sum, root: n - 1, count: 100}) // below the bound
			runCasesThen(t, backend, n, cases, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
				if !weft.CEActive(c) {
					return fmt.Errorf("the copy-engine executor's landing slots were never set up (in-place Reduces take them)")
				}
				// A captured Reduce at the direct bound, replayed.
				if err := ceReduceGraphReplay(rank, c, dev, s, 12000*scale); err != nil {
					return err
				}
				// On two ranks every out-of-place Reduce at the direct
				// bound but Avg pushes into the root's output: one per
				// root, Float64's four operators and the captured one.
				want := int64(0)
				if n == 2 {
					want = int64(n + 4 + 1)
				}
				if got := c.ExportedCalls(); got != want {
					return fmt.Errorf("%d Reduces pushed into the root's output, want %d", got, want)
				}
				big := weft.Call{Coll: algorithms.Reduce, Send: 1 << 20, Recv: 2 << 20, Count: bound / 4, Type: plan.Float32, Op: plan.Max, Root: 1}
				if got := c.PlanName(big); got != "reduce-ce-host-issued" {
					return fmt.Errorf("PlanName(%d-byte Reduce) = %q, want reduce-ce-host-issued", bound, got)
				}
				blocks, moving := c.PlanSMs(big)
				if want := 0; moving != 0 || (rank != 1 && blocks != want) || (rank == 1 && blocks == 0) {
					return fmt.Errorf("PlanSMs(%d-byte Reduce to rank 1) on rank %d = %d, %d: want 0 moving, blocks only on the root", bound, rank, blocks, moving)
				}
				for _, k := range []weft.Call{{Coll: algorithms.Reduce, Count: 100, Type: plan.Float32, Op: plan.Sum}, {Coll: algorithms.Reduce, Count: bound / 4, Type: plan.Float32, Op: plan.Avg}} {
					if forced && k.Op != plan.Avg {
						continue // every size on the engines
					}
					if got := c.PlanName(k); got == "reduce-ce-host-issued" {
						return fmt.Errorf("PlanName(%d-element %v Reduce) = %q: kernels expected", k.Count, k.Op, got)
					}
				}
				return nil
			})
		})
	}
}

// ceReduceGraphReplay captures one Reduce of count floats (Max, to the
// last rank, out of place) and replays it three times with new inputs,
// checking the root's output every time.
func ceReduceGraphReplay(rank int, c *weft.Comm, dev hal.Device, s hal.Stream, count int64) error {
	gc, ok := dev.(hal.GraphCapturer)
	if !ok {
		return nil
	}
	n := c.Size()
	root, es := n-1, int64(plan.Float32.Size())
	in, err := dev.Alloc(count * es)
	if err != nil {
		return err
	}
	defer in.Free()
	out, err := dev.Alloc(count * es)
	if err != nil {
		return err
	}
	defer out.Free()
	call := weft.Call{Coll: algorithms.Reduce, Send: in.Addr(), Recv: out.Addr(), Count: count, Type: plan.Float32, Op: plan.Max, Root: root}
	g, err := captureLaunch(gc, c, call, s)
	if err != nil {
		return fmt.Errorf("capturing a Reduce: %w", err)
	}
	defer g.Close()
	return replayMaxCheck(c, dev, s, g, in, out, n, rank, count, rank == root, "Reduce replay")
}
