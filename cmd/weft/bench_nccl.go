package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/sysnccl"
)

// ncclColl is the NCCL baseline: the system's libnccl.so.2 on the same
// devices, buffers and streams as weft, initialised through weft's
// bootstrap (rank 0's ncclUniqueId is broadcast to the others).
type ncclColl struct {
	comm    *sysnccl.Comm
	timeout time.Duration
	// premul holds the PreMulSum operators made so far, by type and
	// scalar bits (ncclRedOpCreatePreMulSum with a host scalar).
	premul map[[2]uint64]sysnccl.RedOp
}

func newNCCLBaseline(ctx context.Context, boot bootstrap.Bootstrap, dev hal.Device) (collective, error) {
	cu, ok := dev.(interface{ Context() uintptr })
	if !ok {
		return nil, fmt.Errorf("the NCCL baseline needs an NVIDIA device (--hal nvlink); this run uses %s: %w", dev.Info().Backend, hal.ErrNotSupported)
	}
	// NVLink SHARP stays off on shared hosts (architecture.md §8).
	if env.String("WEFT_NVLS") != "1" {
		os.Setenv("NCCL_NVLS_ENABLE", "0")
	}
	if err := sysnccl.Load(); err != nil {
		return nil, err
	}
	var id sysnccl.UniqueID
	if boot.Rank() == 0 {
		var err error
		if id, err = sysnccl.GetUniqueID(); err != nil {
			return nil, err
		}
	}
	b, err := boot.Broadcast(ctx, 0, id[:])
	if err != nil {
		return nil, fmt.Errorf("broadcast ncclUniqueId: %w", err)
	}
	if len(b) != len(id) {
		return nil, fmt.Errorf("ncclUniqueId of %d bytes from rank 0, want %d: %w", len(b), len(id), hal.ErrRemote)
	}
	copy(id[:], b)
	c, err := sysnccl.CommInitRank(cu.Context(), boot.Size(), id, boot.Rank())
	if err != nil {
		return nil, err
	}
	return &ncclColl{comm: c, timeout: env.Timeout(), premul: map[[2]uint64]sysnccl.RedOp{}}, nil
}

func (n *ncclColl) name() string {
	v, _ := sysnccl.Version()
	return "nccl " + sysnccl.VersionString(v)
}

func native(s hal.Stream) (uintptr, error) {
	ns, ok := s.(interface{ Native() uintptr })
	if !ok {
		return 0, fmt.Errorf("stream of backend without a native CUDA stream: %w", hal.ErrNotSupported)
	}
	return ns.Native(), nil
}

// redOp is NCCL's operator for op: the same value for sum … avg, an
// operator made once per type and scalar for PreMulSum.
func (n *ncclColl) redOp(c *collCall) (sysnccl.RedOp, error) {
	if c.op != plan.PreMulSum {
		return sysnccl.RedOp(c.op), nil
	}
	k := [2]uint64{uint64(c.dtype), c.scalar}
	if op, ok := n.premul[k]; ok {
		return op, nil
	}
	op, err := n.comm.RedOpCreatePreMulSum(c.scalar, sysnccl.DataType(c.dtype), sysnccl.ScalarHostImmediate)
	if err != nil {
		return 0, err
	}
	n.premul[k] = op
	return op, nil
}

func (n *ncclColl) run(c *collCall, s hal.Stream) error {
	st, err := native(s)
	if err != nil {
		return err
	}
	send, recv := c.send.Addr()+uint64(c.sendOff), c.recv.Addr()+uint64(c.recvOff)
	count, dt := int(c.count), sysnccl.DataType(c.dtype)
	var op sysnccl.RedOp
	if c.coll.Reduces() {
		if op, err = n.redOp(c); err != nil {
			return err
		}
	}
	switch c.coll {
	case algorithms.AllReduce:
		return n.comm.AllReduce(send, recv, count, dt, op, st)
	case algorithms.AllGather:
		return n.comm.AllGather(send, recv, count, dt, st)
	case algorithms.ReduceScatter:
		return n.comm.ReduceScatter(send, recv, count, dt, op, st)
	case algorithms.Broadcast:
		return n.comm.Broadcast(send, recv, count, dt, c.root, st)
	case algorithms.Reduce:
		return n.comm.Reduce(send, recv, count, dt, op, c.root, st)
	case algorithms.AllToAll:
		return n.comm.AlltoAll(send, recv, count, dt, st)
	case algorithms.SendRecv:
		ops := c.p2p
		if ops == nil {
			ops = ring(n.comm.Rank(), n.comm.Size(), c.count*c.es())
		}
		if err := sysnccl.GroupStart(); err != nil {
			return err
		}
		for _, o := range ops {
			if o.send {
				err = n.comm.Send(c.send.Addr()+uint64(c.sendOff+o.off), int(o.bytes), sysnccl.Uint8, o.peer, st)
			} else {
				err = n.comm.Recv(c.recv.Addr()+uint64(c.recvOff+o.off), int(o.bytes), sysnccl.Uint8, o.peer, st)
			}
			if err != nil {
				break
			}
		}
		return errors.Join(err, sysnccl.GroupEnd())
	}
	return fmt.Errorf("nccl baseline: %v: %w", c.coll, hal.ErrNotSupported)
}

func (n *ncclColl) synchronize(s hal.Stream) error {
	if err := s.Synchronize(time.Now().Add(n.timeout)); err != nil {
		return err
	}
	return n.comm.AsyncError()
}

func (n *ncclColl) close() error {
	var err error
	for _, op := range n.premul {
		err = errors.Join(err, n.comm.RedOpDestroy(op))
	}
	return errors.Join(err, n.comm.Destroy())
}
