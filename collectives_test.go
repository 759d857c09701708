package weft_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/check"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/nvlink"
	_ "github.com/weftccl/weft/hal/nvswitch"
	_ "github.com/weftccl/weft/hal/pcie"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/env"
)

// collCase is one collective call checked element by element.
type collCase struct {
	coll    algorithms.Collective
	t       plan.DataType
	op      plan.RedOp
	root    int
	count   int64
	inPlace bool
	// devScalar passes PreMulSum's scalar in device memory (Call.ScalarPtr,
	// ncclScalarDevice) instead of Call.Scalar.
	devScalar bool
}

func (k collCase) String() string {
	place := "out"
	if k.inPlace {
		place = "in"
	}
	return fmt.Sprintf("%v/%v/%v/root%d/count%d/%s-place", k.coll, k.t, k.op, k.root, k.count, place)
}

// runColl runs k on one rank and returns the number of wrong elements.
func runColl(rank int, c *weft.Comm, dev hal.Device, s hal.Stream, k collCase) (int64, error) {
	n := c.Size()
	es := int64(k.t.Size())
	sendSeg, recvSeg := k.coll.Segments(n)
	send := check.Send(k.coll, k.t, k.op, n, rank, k.count)
	want := check.Expected(k.coll, k.t, k.op, n, rank, k.root, k.count)
	sendBytes, recvBytes := int64(sendSeg)*k.count*es, int64(recvSeg)*k.count*es
	size := max(sendBytes, recvBytes, 16)
	sb, rb, err := caseBuffers(dev, size)
	if err != nil {
		return 0, err
	}
	if k.inPlace {
		rb = sb
	}
	// Poison what the call may write, so that an element it does not
	// write counts as wrong (the buffers are reused across cases).
	poison := make([]byte, size)
	for i := range poison {
		poison[i] = 0xA5
	}
	if err := dev.Write(rb, 0, poison); err != nil {
		return 0, err
	}
	call := weft.Call{Coll: k.coll, Send: sb.Addr(), Recv: rb.Addr(), Count: k.count, Type: k.t, Op: k.op, Root: k.root}
	if k.op == plan.PreMulSum {
		call.Scalar = check.PreMulScalar(k.t, rank) // each rank its own
		if k.devScalar {
			sc, err := dev.Alloc(16)
			if err != nil {
				return 0, err
			}
			defer sc.Free()
			var bits [8]byte
			for i := range bits {
				bits[i] = byte(call.Scalar >> (8 * i))
			}
			if err := dev.Write(sc, 0, bits[:k.t.Size()]); err != nil {
				return 0, err
			}
			call.Scalar, call.ScalarPtr = 0, sc.Addr()
		}
	}
	// In place as NCCL defines it: AllGather sends from its segment of the
	// receive buffer, ReduceScatter receives into its segment of the send
	// buffer.
	sendOff, recvOff := int64(0), int64(0)
	if k.inPlace {
		switch k.coll {
		case algorithms.AllGather:
			sendOff = int64(rank) * k.count * es
		case algorithms.ReduceScatter:
			recvOff = int64(rank) * k.count * es
		}
	}
	call.Send += uint64(sendOff)
	call.Recv += uint64(recvOff)
	if err := dev.Write(sb, sendOff, send); err != nil {
		return 0, err
	}
	if err := c.Launch(call, s); err != nil {
		return 0, err
	}
	if err := c.Synchronize(s); err != nil {
		return 0, err
	}
	if want == nil {
		return 0, nil
	}
	got := make([]byte, len(want))
	if err := dev.Read(got, rb, recvOff); err != nil {
		return 0, err
	}
	return check.Wrong(k.t, got, want), nil
}

// rankBuffers are one device's send and receive buffers, reused by
// runColl across cases: freeing device memory synchronises the whole
// device, so buffers freed after every case would make a rank wait, in
// cuMemFree, for a peer's kernel on the same GPU that waits for this
// rank's next launch. Outgrown buffers are kept until releaseCaseBuffers
// for the same reason.
type rankBuffers struct {
	send, recv hal.Buffer
	retired    []hal.Buffer
}

var (
	caseBufMu sync.Mutex
	caseBufs  = map[hal.Device]*rankBuffers{}
)

// caseBuffers returns dev's send and receive buffers, each of at least
// size bytes.
func caseBuffers(dev hal.Device, size int64) (send, recv hal.Buffer, err error) {
	caseBufMu.Lock()
	defer caseBufMu.Unlock()
	b := caseBufs[dev]
	if b == nil {
		b = &rankBuffers{}
		caseBufs[dev] = b
	}
	if b.send == nil || b.send.Size() < size {
		if b.send != nil {
			b.retired = append(b.retired, b.send, b.recv)
		}
		size = max(size, 1<<20)
		if b.send, err = dev.Alloc(size); err != nil {
			b.send = nil
			return nil, nil, err
		}
		if b.recv, err = dev.Alloc(size); err != nil {
			b.send.Free()
			b.send = nil
			return nil, nil, err
		}
	}
	return b.send, b.recv, nil
}

// releaseCaseBuffers frees dev's case buffers (when no peer runs a
// collective any more).
func releaseCaseBuffers(c *weft.Comm, dev hal.Device) {
	caseBufMu.Lock()
	defer caseBufMu.Unlock()
	b := caseBufs[dev]
	if b == nil {
		return
	}
	delete(caseBufs, dev)
	for _, x := range append(b.retired, b.send, b.recv) {
		if x != nil {
			c.Deregister(x)
			x.Free()
		}
	}
}

// runCases runs every case on n goroutine ranks of hal/host, one
// communicator for all of them, and reports each wrong result by case and
// rank.
func runCases(t *testing.T, n int, cases []collCase) {
	t.Helper()
	runCasesOn(t, "host", n, cases)
}

func runCasesOn(t *testing.T, backend string, n int, cases []collCase) {
	t.Helper()
	runCasesThen(t, backend, n, cases, nil)
}

// runCasesThen is runCasesOn with, on every rank after its cases, after
// (nil: nothing more).
func runCasesThen(t *testing.T, backend string, n int, cases []collCase, after func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error) {
	t.Helper()
	errs := runRanksOpts(t, backend, n, weft.Options{Timeout: 20 * time.Second}, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		defer releaseCaseBuffers(c, dev)
		for _, k := range cases {
			wrong, err := runColl(rank, c, dev, s, k)
			if err != nil {
				return fmt.Errorf("%v: %w", k, err)
			}
			if wrong != 0 {
				return fmt.Errorf("%v: %d wrong elements on rank %d", k, wrong, rank)
			}
		}
		if after != nil {
			return after(rank, c, dev, s)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("%d ranks, rank %d: %v", n, r, err)
		}
	}
}

// TestCollectivesTypesOps: every collective × data type × operator ×
// in/out of place on 2 ranks (half the type × operator pairs on 3), at an odd count that the LL plans serve and one that
// crosses several windows of the HB plans (hal/host windows are 16 KiB).
func TestCollectivesTypesOps(t *testing.T) {
	t.Parallel() // CPU work that overlaps the waiting process tests
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("ranks%d", n), func(t *testing.T) {
			var cases []collCase
			for _, coll := range algorithms.Collectives {
				if coll == algorithms.SendRecv {
					continue
				}
				ops := []plan.RedOp{plan.Sum}
				if coll.Reduces() {
					ops = plan.RedOps
				}
				for ti, typ := range plan.DataTypes {
					for oi, op := range ops {
						if n > 2 && (ti+oi)%2 != 0 { // every pair on 2 ranks, half of them on 3
							continue
						}
						for _, count := range []int64{37, 70001} {
							for _, in := range []bool{false, true} {
								root := 0
								if coll.Rooted() {
									root = n - 1
								}
								cases = append(cases, collCase{coll: coll, t: typ, op: op, root: root, count: count, inPlace: in})
							}
						}
					}
				}
			}
			runCases(t, n, cases)
		})
	}
}

// TestCollectivesRanksSizes: 1 to 8 ranks, sizes from 0 through the LL/HB
// threshold to many windows, every root.
func TestCollectivesRanksSizes(t *testing.T) {
	t.Parallel() // computes while the socket-bound parallel tests wait
	for _, n := range []int{1, 2, 4, 5, 8} {
		t.Run(fmt.Sprintf("ranks%d", n), func(t *testing.T) {
			var cases []collCase
			for _, coll := range algorithms.Collectives {
				if coll == algorithms.SendRecv {
					continue
				}
				roots := []int{0}
				if coll.Rooted() {
					roots = nil
					for r := 0; r < n; r++ {
						roots = append(roots, r)
					}
				}
				for _, root := range roots {
					for _, count := range []int64{0, 1, 5, 16383, 16384, 16385, 70001} {
						cases = append(cases, collCase{coll: coll, t: plan.Float32, op: plan.Sum, root: root, count: count, inPlace: count%2 == 1})
					}
				}
			}
			runCases(t, n, cases)
		})
	}
}

// TestCollectivesLarge: 64 MiB messages through the windowed plans.
func TestCollectivesLarge(t *testing.T) {
	t.Parallel() // CPU work that overlaps the waiting process tests
	if testing.Short() {
		t.Skip("64 MiB collectives: not in -short")
	}
	const count = 16 << 20 // float32: 64 MiB
	runCases(t, 2, []collCase{
		{coll: algorithms.AllReduce, t: plan.Float32, op: plan.Sum, count: count},
		{coll: algorithms.ReduceScatter, t: plan.Float32, op: plan.Sum, count: count / 2, inPlace: true},
		{coll: algorithms.AllGather, t: plan.Float32, op: plan.Sum, count: count / 2},
	})
}

// TestCollectivesNVLink runs the collectives on the GPUs of the machine
// (one goroutine rank per GPU): every collective and data type, the
// operators on float, bfloat16 and int32 (sum and max on the others), LL
// and HB plans (several windows), in and out of place, one rank per GPU
// (two sharing a one-GPU host's). It skips without GPUs, unless
// WEFT_REQUIRE names nvlink.
func TestCollectivesNVLink(t *testing.T) {
	n := max(requireGPUs(t), 2) // with one GPU, two ranks share it
	var cases []collCase
	for _, coll := range algorithms.Collectives {
		if coll == algorithms.SendRecv {
			continue
		}
		for _, typ := range plan.DataTypes {
			ops := []plan.RedOp{plan.Sum}
			if coll.Reduces() {
				ops = []plan.RedOp{plan.Sum, plan.Max}
				if typ == plan.Float32 || typ == plan.BFloat16 || typ == plan.Int32 {
					ops = plan.RedOps
				}
			}
			for _, op := range ops {
				for _, count := range []int64{37, 70001, 3<<20 + 5} {
					for _, in := range []bool{false, true} {
						cases = append(cases, collCase{coll: coll, t: typ, op: op, root: n - 1, count: count, inPlace: in})
					}
				}
			}
		}
	}
	runCasesOn(t, nvlink.Name, n, cases)
}

// requireGPUs returns the number of GPUs nvlink can use; it skips the test
// without GPUs, unless WEFT_REQUIRE names nvlink.
func requireGPUs(t *testing.T) int {
	t.Helper()
	a, err := hal.Probe(nvlink.Name)
	if err != nil || !a.Available {
		if env.Required(nvlink.Name) {
			t.Fatalf("WEFT_REQUIRE=nvlink but the backend is unavailable: %v %s", err, a.Reason)
		}
		t.Skipf("nvlink backend unavailable: %s", a.Reason)
	}
	n, err := cuda.DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestP2P: grouped sends and receives — a ring, all-to-all-v with uneven
// sizes (including zero and the own rank), several operations to the same
// peer in one group — checked byte by byte.
func TestP2P(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("ranks%d", n), func(t *testing.T) { testP2P(t, "host", n) })
	}
}

// TestP2PNVLink is TestP2P on the GPUs.
func TestP2PNVLink(t *testing.T) {
	testP2P(t, nvlink.Name, max(requireGPUs(t), 2)) // with one GPU, two ranks share it
}

func testP2P(t *testing.T, backend string, n int) {
	errs := runRanks(t, backend, n, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		// bytesFrom is what src sends to dst in the all-to-all-v.
		bytesFrom := func(src, dst int) int64 { return int64((src*7+dst*13)%5) * 9973 }
		payload := func(src, dst int, k int64) []byte {
			b := make([]byte, k)
			for i := range b {
				b[i] = byte(src*31 + dst*17 + i*7)
			}
			return b
		}
		type op struct {
			peer int
			send bool
			k    int64
			buf  hal.Buffer
		}
		var ops []op
		for p := 0; p < n; p++ {
			ops = append(ops, op{peer: p, send: true, k: bytesFrom(rank, p)}, op{peer: p, k: bytesFrom(p, rank)})
		}
		// A ring, twice in the same group (second round).
		for round := 0; round < 2; round++ {
			ops = append(ops, op{peer: (rank + 1) % n, send: true, k: 1000 + int64(round)}, op{peer: (rank + n - 1) % n, k: 1000 + int64(round)})
		}
		var p2p []weft.P2P
		for i := range ops {
			b, err := dev.Alloc(max(ops[i].k, 1))
			if err != nil {
				return err
			}
			defer b.Free()
			ops[i].buf = b
			if ops[i].send {
				if err := dev.Write(b, 0, payload(rank, ops[i].peer, ops[i].k)); err != nil {
					return err
				}
			}
			p2p = append(p2p, weft.P2P{Peer: ops[i].peer, Send: ops[i].send, Buf: b.Addr(), Bytes: ops[i].k})
		}
		if err := c.LaunchP2P(p2p, s); err != nil {
			return err
		}
		if err := c.Synchronize(s); err != nil {
			return err
		}
		for _, o := range ops {
			if o.send {
				continue
			}
			got := make([]byte, o.k)
			if err := dev.Read(got, o.buf, 0); err != nil {
				return err
			}
			want := payload(o.peer, rank, o.k)
			for i := range got {
				if got[i] != want[i] {
					return fmt.Errorf("receive of %d bytes from rank %d: byte %d is %d, want %d", o.k, o.peer, i, got[i], want[i])
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

// TestP2PMismatch: a send whose size differs from the receive is reported
// by both sides as a count mismatch naming the peer, not computed (sizes
// of the large windowed plan; TestP2PLLMismatch has the LL plan's).
func TestP2PMismatch(t *testing.T) {
	t.Parallel() // waits on sockets and deadlines more than it computes
	errs := runRanksOpts(t, "host", 2, weft.Options{Timeout: 5 * time.Second}, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		b, err := dev.Alloc(1 << 20)
		if err != nil {
			return err
		}
		defer b.Free()
		op := weft.P2P{Peer: 1, Send: true, Buf: b.Addr(), Bytes: 300_000}
		if rank == 1 {
			op = weft.P2P{Peer: 0, Buf: b.Addr(), Bytes: 400_000}
		}
		if err := c.LaunchP2P([]weft.P2P{op}, s); err != nil {
			return err
		}
		return c.Synchronize(s)
	})
	// The receiver sees the mismatch; the sender, whose receiver gave up,
	// times out waiting for it, naming it.
	if err := errs[1]; err == nil || !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "rank 0") {
		t.Errorf("rank 1: got %v, want a count mismatch with rank 0 (ErrInvalidUsage)", err)
	}
	if err := errs[0]; err == nil || !strings.Contains(err.Error(), "rank 1") {
		t.Errorf("rank 0: got %v, want an error naming rank 1", err)
	}
}

// TestP2PInPlace: each rank sends a buffer to rank+1 and receives into the
// same buffer from rank−1 in one group (nccl-tests' in-place sendrecv): the
// send must leave with the data the buffer held before the group.
func TestP2PInPlace(t *testing.T) {
	const k = 100_003
	for _, n := range []int{2, 3} {
		errs := runRanks(t, "host", n, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
			b, err := dev.Alloc(k)
			if err != nil {
				return err
			}
			defer b.Free()
			fill := func(r int) []byte {
				v := make([]byte, k)
				for i := range v {
					v[i] = byte(r*41 + i*3 + i>>8)
				}
				return v
			}
			for iter := 0; iter < 3; iter++ {
				if err := dev.Write(b, 0, fill(rank+iter)); err != nil {
					return err
				}
				ops := []weft.P2P{{Peer: (rank + 1) % n, Send: true, Buf: b.Addr(), Bytes: k}, {Peer: (rank + n - 1) % n, Buf: b.Addr(), Bytes: k}}
				if err := c.LaunchP2P(ops, s); err != nil {
					return err
				}
				if err := c.Synchronize(s); err != nil {
					return err
				}
				got := make([]byte, k)
				if err := dev.Read(got, b, 0); err != nil {
					return err
				}
				if d := cmp.Diff(fill((rank+n-1)%n+iter), got); d != "" {
					return fmt.Errorf("iteration %d: received data differs from rank %d's:\n%.400s", iter, (rank+n-1)%n, d)
				}
			}
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Errorf("%d ranks, rank %d: %v", n, r, err)
			}
		}
	}
}
