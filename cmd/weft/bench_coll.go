package main

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/check"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// collCall is one collective call of a benchmark or soak, on buffers of
// this rank: the send data starts sendOff bytes into send and the result
// recvOff bytes into recv (in-place calls point both at one buffer).
// count is NCCL's count argument (algorithms.Collective.Segments).
// SendRecv is the ring of nccl-tests' sendrecv: every rank sends count
// elements to rank+1 and receives count elements from rank−1, in one
// group; p2p, when set, replaces it with any grouped pattern.
type collCall struct {
	coll             algorithms.Collective
	send, recv       hal.Buffer
	sendOff, recvOff int64
	count            int64
	dtype            plan.DataType
	op               plan.RedOp
	root             int
	scalar           uint64 // PreMulSum multiplier (element bits)
	inPlace          bool
	p2p              []p2pOp
	// matrix, for a drawn p2p pattern, holds the elements every rank
	// sends to every rank: matrix[src][dst].
	matrix [][]int64
}

// p2pOp is one send or receive of a group: bytes at off in the call's
// send (Send) or recv buffer.
type p2pOp struct {
	peer  int
	send  bool
	off   int64
	bytes int64
}

func (o p2pOp) String() string {
	dir := "recv←"
	if o.send {
		dir = "send→"
	}
	return fmt.Sprintf("%s%d %dB@%d", dir, o.peer, o.bytes, o.off)
}

// ring returns the p2p operations of nccl-tests' sendrecv for rank of n.
func ring(rank, n int, bytes int64) []p2pOp {
	return []p2pOp{{peer: (rank + 1) % n, send: true, bytes: bytes}, {peer: (rank + n - 1) % n, bytes: bytes}}
}

func (c *collCall) es() int64 { return int64(c.dtype.Size()) }

// sendBytes and recvBytes are the sizes of the call's send and receive
// regions for n ranks.
func (c *collCall) sendBytes(n int) int64 {
	s, _ := c.coll.Segments(n)
	return int64(s) * c.count * c.es()
}

func (c *collCall) recvBytes(n int) int64 {
	_, r := c.coll.Segments(n)
	return int64(r) * c.count * c.es()
}

// layout places a call of coll on buffers in and out, out of place or in
// place as NCCL defines it: the same buffer for AllReduce, Broadcast,
// Reduce, AllToAll and SendRecv; send = recv + rank×count for AllGather;
// recv = send + rank×count for ReduceScatter. In place, everything lies in
// out.
func layout(coll algorithms.Collective, in, out hal.Buffer, rank int, count int64, t plan.DataType, inPlace bool) collCall {
	c := collCall{coll: coll, send: in, recv: out, count: count, dtype: t, inPlace: inPlace}
	if !inPlace {
		return c
	}
	c.send = out
	switch coll {
	case algorithms.AllGather:
		c.sendOff = int64(rank) * count * int64(t.Size())
	case algorithms.ReduceScatter:
		c.recvOff = int64(rank) * count * int64(t.Size())
	}
	return c
}

// weftColl runs calls through weft: AllReduce through the zero-copy
// Comm.AllReduce unless raw, everything else through Comm.Launch and
// Comm.LaunchP2P.
type weftColl struct {
	c   *weft.Comm
	raw bool
}

func (w weftColl) name() string { return "weft" }

func (w weftColl) zeroCopy(c *collCall) bool {
	return c.coll == algorithms.AllReduce && !w.raw && c.sendOff == 0 && c.recvOff == 0 && c.op != plan.PreMulSum
}

func (w weftColl) run(c *collCall, s hal.Stream) error {
	if w.zeroCopy(c) {
		return w.c.AllReduce(c.send, c.recv, c.count, c.dtype, c.op, s)
	}
	if c.coll == algorithms.SendRecv {
		ops := c.p2p
		if ops == nil {
			ops = ring(w.c.Rank(), w.c.Size(), c.count*c.es())
		}
		p := make([]weft.P2P, len(ops))
		for i, o := range ops {
			buf := c.recv.Addr() + uint64(c.recvOff+o.off)
			if o.send {
				buf = c.send.Addr() + uint64(c.sendOff+o.off)
			}
			p[i] = weft.P2P{Peer: o.peer, Send: o.send, Buf: buf, Bytes: o.bytes}
		}
		return w.c.LaunchP2P(p, s)
	}
	return w.c.Launch(w.call(c), s)
}

func (w weftColl) call(c *collCall) weft.Call {
	return weft.Call{Coll: c.coll, Send: c.send.Addr() + uint64(c.sendOff), Recv: c.recv.Addr() + uint64(c.recvOff),
		Count: c.count, Type: c.dtype, Op: c.op, Root: c.root, Scalar: c.scalar}
}

// planName names the plan that serves c, with the blocks it occupies for
// calls through Launch.
func (w weftColl) planName(c *collCall) string {
	if w.zeroCopy(c) {
		return w.c.AllReducePlan(c.count, c.dtype, c.op)
	}
	name := w.c.PlanName(w.call(c))
	if name == "" {
		return ""
	}
	blocks, moving := w.c.PlanSMs(w.call(c))
	return fmt.Sprintf("%s(sm=%d/%d)", name, blocks, moving)
}

func (w weftColl) synchronize(s hal.Stream) error { return w.c.Synchronize(s) }
func (w weftColl) close() error                   { return w.c.Close() }

// poison is the byte written over receive regions before a checked call,
// so that an element the collective does not write counts as wrong.
const poison = 0xA5

// poisonChunk is the size in bytes of the poison pattern written per
// Device.Write: receive regions are poisoned in pieces this large, so a
// 1 GiB region needs no 1 GiB host buffer.
const poisonChunk = 16 << 20

var poisonBytes = bytes.Repeat([]byte{poison}, poisonChunk)

// writePoison fills bytes bytes of buf from off with the poison byte.
func writePoison(dev hal.Device, buf hal.Buffer, off, n int64) error {
	for done := int64(0); done < n; done += poisonChunk {
		if err := dev.Write(buf, off+done, poisonBytes[:min(poisonChunk, n-done)]); err != nil {
			return err
		}
	}
	return nil
}

// prepare writes rank's send data of c (check.Send) and poisons the
// receive region, in the order that leaves in-place send data intact.
func prepare(dev hal.Device, c *collCall, rank, n int) error {
	return prepareWith(dev, c, check.Send(c.coll, c.dtype, c.op, n, rank, c.count), n)
}

// prepareWith is prepare with the send data given.
func prepareWith(dev hal.Device, c *collCall, send []byte, n int) error {
	if err := writePoison(dev, c.recv, c.recvOff, c.recvBytes(n)); err != nil {
		return err
	}
	if len(send) == 0 {
		return nil
	}
	return dev.Write(c.send, c.sendOff, send)
}

// verify reads the receive region of c and counts the elements that
// differ from check.Expected; the second result is the first wrong
// element's index, or -1. Regions nothing is expected in (Reduce on a
// rank other than the root) count 0.
func verify(dev hal.Device, c *collCall, rank, n int) (wrong, first int64, err error) {
	want := check.Expected(c.coll, c.dtype, c.op, n, rank, c.root, c.count)
	return verifyWith(dev, c, want, nil)
}

// verifyWith is verify with the expected bytes given; got, when at least
// len(want) long, is reused for the read-back.
func verifyWith(dev hal.Device, c *collCall, want, got []byte) (wrong, first int64, err error) {
	if len(want) == 0 {
		return 0, -1, nil
	}
	if int64(cap(got)) < int64(len(want)) {
		got = make([]byte, len(want))
	}
	got = got[:len(want)]
	if err := dev.Read(got, c.recv, c.recvOff); err != nil {
		return 0, -1, err
	}
	if wrong = wrongElems(c.dtype, c.op, got, want); wrong == 0 {
		return 0, -1, nil
	}
	return wrong, firstWrong(c.dtype, got, want), nil
}

// compareChunk is the piece of a buffer one goroutine compares at a time
// (bytes; a multiple of every element size).
const compareChunk = 1 << 20

// wrongElems counts wrong elements (check.Wrong: bitwise, the values are
// exact), comparing pieces of compareChunk bytes on every CPU: a piece
// that is bytewise equal (the common case) costs one memcmp.
func wrongElems(t plan.DataType, op plan.RedOp, got, want []byte) int64 {
	n := min(len(got), len(want))
	missing := check.Wrong(t, got[n:], want[n:])
	var total atomic.Int64
	parallelChunks(int64(n), func(lo, hi int64) bool {
		if !bytes.Equal(got[lo:hi], want[lo:hi]) {
			total.Add(check.Wrong(t, got[lo:hi], want[lo:hi]))
		}
		return true
	})
	return total.Load() + missing
}

// firstWrong is the index of the first element of got that differs from
// want, or -1.
func firstWrong(t plan.DataType, got, want []byte) int64 {
	es := int64(t.Size())
	n := int64(min(len(got), len(want))) / es * es
	for lo := int64(0); lo < n; lo += compareChunk {
		hi := min(lo+compareChunk, n)
		if bytes.Equal(got[lo:hi], want[lo:hi]) {
			continue
		}
		for i := lo; i < hi; i += es {
			if !bytes.Equal(got[i:i+es], want[i:i+es]) {
				return i / es
			}
		}
	}
	return -1
}

// parallelChunks calls f on the pieces [lo, hi) of [0, n) of compareChunk
// bytes, from one goroutine per CPU; it stops handing out pieces when f
// returns false.
func parallelChunks(n int64, f func(lo, hi int64) bool) {
	var next atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	workers := min(int64(runtime.GOMAXPROCS(0)), (n+compareChunk-1)/compareChunk)
	for w := int64(0); w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				lo := next.Add(compareChunk) - compareChunk
				if lo >= n {
					return
				}
				if !f(lo, min(lo+compareChunk, n)) {
					stop.Store(true)
				}
			}
		}()
	}
	wg.Wait()
}

// checker prepares and checks the calls of a sweep (bench, tune). Each
// rank's send data (check.Send) and expected result (check.Expected) are
// computed once per call shape and kept: the out-of-place and in-place
// calls of weft and the baseline at one size share them, and for the
// collectives whose data for count elements is the first count elements
// of the data for more (prefixStable), they are computed once for the
// sweep's largest count and sliced for every smaller one. The read-back
// buffer is kept too.
type checker struct {
	dev     hal.Device
	rank, n int
	// maxCount is the largest count of the sweep: the count that a
	// prefix-stable collective's data is computed for.
	maxCount int64

	key        checkKey
	send, want []byte // for key; want nil: nothing to check on this rank
	got        []byte
}

type checkKey struct {
	coll  algorithms.Collective
	dtype plan.DataType
	op    plan.RedOp
	root  int
	count int64
}

// newChecker returns a checker for rank of n whose largest call has
// maxCount elements (NCCL's count argument).
func newChecker(dev hal.Device, rank, n int, maxCount int64) *checker {
	return &checker{dev: dev, rank: rank, n: n, maxCount: maxCount, key: checkKey{count: -1}}
}

// prefixStable reports whether coll's send data and expected result for
// count elements are the first count elements of those for any larger
// count (check.Send and check.Expected are element-wise in the index for
// these; AllGather, ReduceScatter and AllToAll lay out per-rank segments
// of count elements, which move when count changes).
func prefixStable(coll algorithms.Collective) bool {
	switch coll {
	case algorithms.AllReduce, algorithms.Reduce, algorithms.Broadcast, algorithms.SendRecv:
		return true
	}
	return false
}

// data returns the send data and the expected result of c on this rank
// (want nil: nothing to check here).
func (k *checker) data(c *collCall) (send, want []byte) {
	key := checkKey{coll: c.coll, dtype: c.dtype, op: c.op, root: c.root, count: c.count}
	stable := prefixStable(c.coll)
	hit := key == k.key
	if stable {
		// Data computed for a larger count serves this one too.
		have := k.key
		have.count = c.count
		hit = have == key && k.key.count >= c.count
		key.count = max(c.count, k.maxCount)
	}
	if !hit {
		k.send, k.want = nil, nil // let the old ones go before allocating
		k.key = key
		k.send = check.Send(key.coll, key.dtype, key.op, k.n, k.rank, key.count)
		k.want = check.Expected(key.coll, key.dtype, key.op, k.n, k.rank, key.root, key.count)
	}
	send, want = k.send, k.want
	if stable {
		sb, rb := c.sendBytes(k.n), c.recvBytes(k.n)
		send = send[:sb]
		if want != nil {
			want = want[:rb]
		}
	}
	return send, want
}

// prepare writes c's send data and poisons its receive region.
func (k *checker) prepare(c *collCall) error {
	send, _ := k.data(c)
	return prepareWith(k.dev, c, send, k.n)
}

// verify counts the wrong elements of c's result and finds the first.
func (k *checker) verify(c *collCall) (wrong, first int64, err error) {
	_, want := k.data(c)
	if int64(cap(k.got)) < int64(len(want)) {
		k.got = nil
		k.got = make([]byte, len(want))
	}
	return verifyWith(k.dev, c, want, k.got)
}

// unsupported reports whether err says that an implementation does not
// take call c (ErrNotSupported). The table shows N/A.
func unsupported(c *collCall, err error) bool {
	return errors.Is(err, hal.ErrNotSupported)
}

// describe names a call in error and failure reports.
func describe(c *collCall) string {
	s := fmt.Sprintf("%s count=%d type=%s", c.coll, c.count, c.dtype)
	if c.coll.Reduces() {
		s += " op=" + c.op.String()
	}
	if c.coll.Rooted() {
		s += fmt.Sprintf(" root=%d", c.root)
	}
	if c.inPlace {
		s += " in-place"
	}
	if c.matrix != nil {
		s = fmt.Sprintf("sendrecv type=%s group=%v matrix=%v", c.dtype, c.p2p, c.matrix)
	}
	return s
}
