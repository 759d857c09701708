package main

import (
	"errors"
	"fmt"

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

// prepare writes rank's send data of c (check.Send) and poisons the
// receive region, in the order that leaves in-place send data intact.
func prepare(dev hal.Device, c *collCall, rank, n int) error {
	if rb := c.recvBytes(n); rb > 0 {
		p := make([]byte, rb)
		for i := range p {
			p[i] = poison
		}
		if err := dev.Write(c.recv, c.recvOff, p); err != nil {
			return err
		}
	}
	data := check.Send(c.coll, c.dtype, c.op, n, rank, c.count)
	if len(data) == 0 {
		return nil
	}
	return dev.Write(c.send, c.sendOff, data)
}

// verify reads the receive region of c and counts the elements that
// differ from check.Expected; the second result is the first wrong
// element's index, or -1. Regions nothing is expected in (Reduce on a
// rank other than the root) count 0.
func verify(dev hal.Device, c *collCall, rank, n int) (wrong, first int64, err error) {
	want := check.Expected(c.coll, c.dtype, c.op, n, rank, c.root, c.count)
	if want == nil || len(want) == 0 {
		return 0, -1, nil
	}
	got := make([]byte, len(want))
	if err := dev.Read(got, c.recv, c.recvOff); err != nil {
		return 0, -1, err
	}
	return wrongElems(c.dtype, c.op, got, want), firstWrong(c.dtype, got, want), nil
}

// wrongElems counts wrong elements (check.Wrong: bitwise, the values are
// exact).
func wrongElems(t plan.DataType, op plan.RedOp, got, want []byte) int64 {
	return check.Wrong(t, got, want)
}

func firstWrong(t plan.DataType, got, want []byte) int64 {
	es := t.Size()
	for i := 0; i+es <= len(want) && i+es <= len(got); i += es {
		for k := 0; k < es; k++ {
			if got[i+k] != want[i+k] {
				return int64(i / es)
			}
		}
	}
	return -1
}

// unsupported reports whether err says that an implementation does not
// take call c: ErrNotSupported, or for in-place AllToAll (which NCCL
// does not define) also ErrInvalidArgument. The table shows N/A.
func unsupported(c *collCall, err error) bool {
	return errors.Is(err, hal.ErrNotSupported) ||
		c.inPlace && c.coll == algorithms.AllToAll && errors.Is(err, hal.ErrInvalidArgument)
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
