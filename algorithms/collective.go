package algorithms

import (
	"fmt"
	"strings"
)

// Collective names a collective operation.
type Collective uint8

const (
	AllReduce Collective = iota
	AllGather
	ReduceScatter
	Broadcast
	Reduce
	AllToAll
	// SendRecv is point-to-point: grouped sends and receives.
	SendRecv
)

// Collectives lists every collective, in a stable order.
var Collectives = []Collective{AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll, SendRecv}

// String is the nccl-tests name: all_reduce, all_gather, reduce_scatter,
// broadcast, reduce, alltoall, sendrecv.
func (c Collective) String() string {
	switch c {
	case AllReduce:
		return "all_reduce"
	case AllGather:
		return "all_gather"
	case ReduceScatter:
		return "reduce_scatter"
	case Broadcast:
		return "broadcast"
	case Reduce:
		return "reduce"
	case AllToAll:
		return "alltoall"
	case SendRecv:
		return "sendrecv"
	}
	return fmt.Sprintf("collective(%d)", uint8(c))
}

// ParseCollective accepts the nccl-tests names with or without underscores
// and the camel-case names (allreduce, AllGather, all_to_all, …).
func ParseCollective(s string) (Collective, error) {
	k := strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
	for _, c := range Collectives {
		if strings.ReplaceAll(c.String(), "_", "") == k {
			return c, nil
		}
	}
	if k == "alltoall" || k == "a2a" {
		return AllToAll, nil
	}
	return 0, fmt.Errorf("unknown collective %q (want all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall or sendrecv)", s)
}

// Reduces reports whether the collective combines values with an operator.
func (c Collective) Reduces() bool { return c == AllReduce || c == ReduceScatter || c == Reduce }

// Rooted reports whether the collective has a root rank.
func (c Collective) Rooted() bool { return c == Broadcast || c == Reduce }

// Segments returns how many count-element segments the send and receive
// buffers of one rank hold, for n ranks. count is NCCL's count argument:
// elements per rank for AllGather (sendcount) and ReduceScatter
// (recvcount), elements per peer for AllToAll, elements otherwise.
func (c Collective) Segments(n int) (send, recv int) {
	switch c {
	case AllGather:
		return 1, n
	case ReduceScatter:
		return n, 1
	case AllToAll:
		return n, n
	}
	return 1, 1
}

// BusFactor converts algorithm bandwidth into bus bandwidth for n ranks,
// as nccl-tests does (doc/PERFORMANCE.md there): AllReduce 2(n−1)/n;
// AllGather, ReduceScatter and AllToAll (n−1)/n; Broadcast, Reduce and
// SendRecv 1. nccl-tests measures the algorithm bandwidth of AllGather and
// ReduceScatter on the n×count buffer and of AllToAll on the whole
// n×count buffer.
func (c Collective) BusFactor(n int) float64 {
	switch c {
	case AllReduce:
		return 2 * float64(n-1) / float64(n)
	case AllGather, ReduceScatter, AllToAll:
		return float64(n-1) / float64(n)
	}
	return 1
}
