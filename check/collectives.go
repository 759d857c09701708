package check

import (
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal/plan"
)

// Send returns rank's whole send buffer for coll among nranks ranks:
// Segments(nranks).send × count elements of type t, where count is NCCL's
// count argument (see [algorithms.Collective.Segments]).
//
// Values follow [InputN]'s rules for t, op and nranks (the same as
// [Input]'s up to 8 ranks), so reductions stay exact:
//   - AllReduce, Reduce: InputN(t, op, nranks, rank, count).
//   - ReduceScatter: InputN(t, op, nranks, rank, nranks×count); segment s holds the
//     elements of global index s×count … (s+1)×count−1, so every segment
//     of every rank is a different (rank, s)-dependent stream.
//   - AllToAll: the same layout with the Sum values (the op is not used);
//     segment s is what rank sends to rank s.
//   - AllGather, Broadcast, SendRecv: Input(t, Sum, rank, count).
//
// Collectives that do not reduce use the dense Sum values whatever op and
// nranks are: they spread over more distinct values than Prod's ±1, ±2,
// and nothing is summed.
func Send(coll algorithms.Collective, t plan.DataType, op plan.RedOp, nranks, rank int, count int64) []byte {
	send, _ := coll.Segments(nranks)
	if !coll.Reduces() {
		return Input(t, plan.Sum, rank, int64(send)*count)
	}
	return InputN(t, op, nranks, rank, int64(send)*count)
}

// Expected returns the receive buffer rank must hold after coll, for
// inputs made by [Send]: Segments(nranks).recv × count elements, exact.
//   - AllReduce: AllReduce(t, op, nranks, count).
//   - Reduce: the same at root; nil elsewhere (NCCL leaves the receive
//     buffer of other ranks untouched, so nothing is checked).
//   - ReduceScatter: segment rank of the reduction of every rank's send.
//   - AllGather: segment r is rank r's send.
//   - Broadcast: root's send.
//   - AllToAll: segment r is segment rank of rank r's send.
//   - SendRecv: the send of rank−1 (mod nranks), for the ring in which
//     every rank sends to rank+1 and receives from rank−1, as nccl-tests'
//     sendrecv does. Other patterns compose [Send] themselves.
//
// A checked buffer is never nil, also when it is empty (count 0); nil
// means "not checked", and is also returned for an unknown collective or
// a rank or root out of range.
func Expected(coll algorithms.Collective, t plan.DataType, op plan.RedOp, nranks, rank, root int, count int64) []byte {
	if nranks < 1 || rank < 0 || rank >= nranks {
		return nil
	}
	es := int64(t.Size())
	seg := func(b []byte, s int) []byte { return b[int64(s)*count*es : int64(s+1)*count*es] }
	switch coll {
	case algorithms.AllReduce:
		return AllReduce(t, op, nranks, count)
	case algorithms.Reduce:
		if rank != root {
			return nil
		}
		return AllReduce(t, op, nranks, count)
	case algorithms.ReduceScatter:
		// Send's streams are Input over nranks×count indices, so the
		// reduction of segment rank is a slice of the whole reduction.
		out := make([]byte, count*es)
		copy(out, seg(AllReduce(t, op, nranks, int64(nranks)*count), rank))
		return out
	case algorithms.AllGather:
		out := make([]byte, 0, int64(nranks)*count*es)
		for r := 0; r < nranks; r++ {
			out = append(out, Send(coll, t, op, nranks, r, count)...)
		}
		return out
	case algorithms.Broadcast:
		if root < 0 || root >= nranks {
			return nil
		}
		return Send(coll, t, op, nranks, root, count)
	case algorithms.AllToAll:
		out := make([]byte, 0, int64(nranks)*count*es)
		for r := 0; r < nranks; r++ {
			out = append(out, seg(Send(coll, t, op, nranks, r, count), rank)...)
		}
		return out
	case algorithms.SendRecv:
		return Send(coll, t, op, nranks, (rank+nranks-1)%nranks, count)
	}
	return nil
}
