package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/nccl"
)

// ncclColl is the NCCL baseline: the system's libnccl.so.2 on the same
// devices, buffers and streams as weft, initialised through weft's
// bootstrap (rank 0's ncclUniqueId is broadcast to the others).
type ncclColl struct {
	comm    *nccl.Comm
	timeout time.Duration
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
	if err := nccl.Load(); err != nil {
		return nil, err
	}
	var id nccl.UniqueID
	if boot.Rank() == 0 {
		var err error
		if id, err = nccl.GetUniqueID(); err != nil {
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
	c, err := nccl.CommInitRank(cu.Context(), boot.Size(), id, boot.Rank())
	if err != nil {
		return nil, err
	}
	return &ncclColl{comm: c, timeout: env.Timeout()}, nil
}

func (n *ncclColl) name() string {
	v, _ := nccl.Version()
	return "nccl " + nccl.VersionString(v)
}

func native(s hal.Stream) (uintptr, error) {
	ns, ok := s.(interface{ Native() uintptr })
	if !ok {
		return 0, fmt.Errorf("stream of backend without a native CUDA stream: %w", hal.ErrNotSupported)
	}
	return ns.Native(), nil
}

func (n *ncclColl) allReduce(in, out hal.Buffer, count int64, t plan.DataType, op plan.RedOp, s hal.Stream) error {
	st, err := native(s)
	if err != nil {
		return err
	}
	return n.comm.AllReduce(in.Addr(), out.Addr(), int(count), nccl.DataType(t), nccl.RedOp(op), st)
}

func (n *ncclColl) synchronize(s hal.Stream) error {
	if err := s.Synchronize(time.Now().Add(n.timeout)); err != nil {
		return err
	}
	return n.comm.AsyncError()
}

func (n *ncclColl) close() error { return n.comm.Destroy() }
