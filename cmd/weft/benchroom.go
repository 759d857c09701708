package main

import (
	"fmt"

	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/shm"
)

// benchBuffers is the number of buffers of the largest size that every
// rank of a sweep allocates (input and output; benchRank).
const benchBuffers = 2

// benchCheckRoom fails at once, before any rank starts, when the sweep's
// buffers cannot fit: on hal/host every rank's buffers are files in the
// shared-memory directory, so nproc ranks need benchBuffers × maxB × nproc
// bytes of it (and of host memory). Other backends allocate device memory,
// whose allocator checks what each device has free. The error wraps
// hal.ErrSystem and names what the sweep needs and what is free.
//
// A rank of a job skips the check (the launcher made it, and the job's
// other ranks may have allocated already), as does --tune.
func benchCheckRoom(coll string, cfg *benchConfig, nproc int) error {
	if _, inJob, _ := bootstrap.FromEnv(); inJob || cfg.tune {
		return nil
	}
	name := cfg.halName
	if name == "" {
		name = env.String("WEFT_HAL")
	}
	if name == "" {
		name, _, _ = hal.Auto()
	}
	if name != "host" {
		return nil
	}
	per := uint64(max(cfg.maxB, 16))
	need := per * benchBuffers * uint64(nproc)
	free, where, err := shm.Room(shm.Dir())
	if err != nil || need <= free {
		return nil
	}
	return fmt.Errorf("bench %s: %d buffers of %s per rank × %d ranks need %s of %s; %s free: %w",
		coll, benchBuffers, shm.Bytes(per), nproc, shm.Bytes(need), where, shm.Bytes(free), hal.ErrSystem)
}
