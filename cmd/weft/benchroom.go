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
// bytes of it (and of host memory). On a backend whose devices report
// their free memory (the CUDA backends), rank r uses device r: each of the
// first nproc devices is opened here, asked, and closed, and must have
// benchBuffers × maxB free. The error wraps hal.ErrSystem and names what
// the sweep needs and what is free. A device that cannot be opened here is
// left to its rank, whose allocator checks the same.
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
	per := uint64(max(cfg.maxB, 16))
	if name != "host" {
		return deviceRoom(coll, name, per*benchBuffers, nproc)
	}
	need := per * benchBuffers * uint64(nproc)
	free, where, err := shm.Room(shm.Dir())
	if err != nil || need <= free {
		return nil
	}
	return fmt.Errorf("bench %s: %d buffers of %s per rank × %d ranks need %s of %s; %s free: %w",
		coll, benchBuffers, shm.Bytes(per), nproc, shm.Bytes(need), where, shm.Bytes(free), hal.ErrSystem)
}

// memoryReporter is a device that reports its free memory in bytes
// (internal/cudadev.Device.MemoryFree, so hal/nvlink and hal/pcie).
type memoryReporter interface {
	MemoryFree() (free, total int64, err error)
}

// deviceRoom checks that each of devices 0..nproc-1 of backend name has
// need bytes free.
func deviceRoom(coll, name string, need uint64, nproc int) error {
	for i := 0; i < nproc; i++ {
		d, err := hal.Open(name, hal.Config{Ordinal: i, Rank: i})
		if err != nil {
			return nil // the rank reports it
		}
		mr, ok := d.(memoryReporter)
		var free int64
		if ok {
			free, _, err = mr.MemoryFree()
		}
		info := d.Info()
		d.Close()
		if !ok {
			return nil
		}
		if err == nil && need > uint64(free) {
			return fmt.Errorf("bench %s: %d buffers of %s per rank need %s on %s GPU %d (%s) of rank %d; %s free: %w",
				coll, benchBuffers, shm.Bytes(need/benchBuffers), shm.Bytes(need), name, i, info.Name, i, shm.Bytes(uint64(free)), hal.ErrSystem)
		}
	}
	return nil
}
