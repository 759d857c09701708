package weft

import (
	"fmt"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// Call is one collective call on buffers given by address in the device's
// address space (hal.Buffer.Addr; for hal/nvlink any device pointer, also
// memory weft did not allocate). This is the form the NCCL C ABI uses.
//
// Count is NCCL's count argument: elements per rank for AllReduce,
// Broadcast and Reduce; the send count of AllGather (Recv holds
// NRanks × Count); the receive count of ReduceScatter (Send holds
// NRanks × Count); the elements sent to each peer by AllToAll (both
// buffers hold NRanks × Count). In place is Send == Recv for AllReduce,
// Broadcast, Reduce and AllToAll, Send == Recv + Rank × Count × size for
// AllGather, and Recv == Send + Rank × Count × size for ReduceScatter, as
// in NCCL. In-place AllToAll costs one more local copy of the NRanks ×
// Count elements, on the same stream, into a staging buffer that the
// communicator keeps (grown to the largest such call) until Close;
// buffers that overlap otherwise are refused (ErrInvalidArgument).
// Send of Broadcast and Recv of Reduce matter at the root only.
type Call struct {
	Coll       algorithms.Collective
	Send, Recv uint64
	Count      int64
	Type       plan.DataType
	Op         plan.RedOp // collectives that reduce
	Root       int        // Broadcast and Reduce
	// Scalar (the element's bits, little-endian) or, when ScalarPtr is not
	// 0, the element at device address ScalarPtr, is the PreMulSum
	// multiplier.
	Scalar    uint64
	ScalarPtr uint64
}

// P2P is one point-to-point operation of a group: Bytes bytes sent from
// Buf to rank Peer (Send) or received from Peer into Buf. A send to or a
// receive from the own rank pairs with the rank's matching receive or send
// of the same group (a local copy).
type P2P struct {
	Peer  int
	Send  bool
	Buf   uint64
	Bytes int64
}

var _ = hal.ErrNotSupported

// Launch enqueues one collective call on stream s. It is collective: every
// rank makes the same call (same collective, count, type, operator and
// root) in the same order. Buffers need no registration: plans move data
// through the communicator's scratch buffers.
//
// Errors: ErrInvalidArgument for a zero address with a non-zero count, a
// negative count, an unknown type, operator or root, or an operator the
// collective does not take; ErrNotSupported for what weft does not serve
// (the NCCL layer forwards those); a lost peer (ErrRemote) as soon as it
// is known. Failures inside the launch are reported by Synchronize and
// AsyncError.
func (c *Comm) Launch(call Call, s hal.Stream) error {
	return c.launchCall(call, s)
}

// LaunchP2P enqueues the point-to-point operations of one group on stream
// s as one fused launch, so that any pattern of sends and receives
// (rings, all-to-all-v, gather, scatter) progresses without deadlock. The
// matching operations of the peers must be launched too, each rank with
// its own group; a send and its receive must have the same byte count.
func (c *Comm) LaunchP2P(ops []P2P, s hal.Stream) error {
	return c.launchP2P(ops, s)
}

// PlanName names the plan that Launch uses for call ("all_gather-LL16",
// …; for SendRecv, LaunchP2P's plan), or "" for a call Launch refuses. It
// is local: it sets nothing up.
func (c *Comm) PlanName(call Call) string { return c.planName(call) }

// PlanSMs reports, for the plan PlanName names, the thread blocks a launch
// occupies (at most one SM each) and how many of them move data; the
// others only push port-channel triggers and wait (plan.Plan.DataBlocks).
// Both are 0 for a call Launch refuses.
func (c *Comm) PlanSMs(call Call) (blocks, moving int) {
	if p := c.planFor(call); p != nil {
		return p.Blocks(), p.DataBlocks()
	}
	return 0, 0
}

// AsyncError returns, without waiting, the first failure any launch has
// recorded or the loss of a peer (an error wrapping hal.ErrRemote that
// names the rank), or nil. It is what ncclCommGetAsyncError reports.
func (c *Comm) AsyncError() error {
	if v := c.stall.verdict.Load(); v != nil {
		return fmt.Errorf("weft: rank %d: %w", c.cfg.Rank, v)
	}
	if err := c.boot.Err(); err != nil {
		return fmt.Errorf("weft: rank %d: %w", c.cfg.Rank, err)
	}
	return c.Check()
}

// Abort makes every wait of running and later launches give up at once,
// so that streams drain; the communicator is unusable afterwards except
// for Close. It does not block.
func (c *Comm) Abort() { c.abort() }
