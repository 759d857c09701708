//go:build cgo

package main

import (
	"fmt"
	"os"
	"sync"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/env"
)

// devices are the HAL devices of the process, one per backend and
// ordinal, opened on first use (by ncclMemAlloc or a communicator) and kept
// for the life of the process: buffers that ncclMemAlloc returned belong to
// them, and every communicator of the process on that device shares them.
var devices = &deviceTable{open_: map[devKey]hal.Device{}, mem: map[uintptr]hal.Buffer{}}

type devKey struct {
	backend string
	ordinal int
}

type deviceTable struct {
	mu    sync.Mutex
	open_ map[devKey]hal.Device
	mem   map[uintptr]hal.Buffer // ncclMemAlloc'd buffers by address
}

// backend is WEFT_HAL, else the first available of nvlink, xgmi, pcie and
// host.
func backend() (string, error) {
	if b := env.String("WEFT_HAL"); b != "" {
		return b, nil
	}
	b, _, err := hal.Auto()
	return b, err
}

// current returns the backend and the device ordinal of the calling
// thread: on hal/nvlink the device of the current CUDA context (what
// cudaSetDevice chose; 0 when none is current), on hal/host 0 (one host
// device per process).
func current() (string, int, error) {
	b, err := backend()
	if err != nil {
		return "", 0, err
	}
	if b != "nvlink" {
		return b, 0, nil
	}
	dev, _, ok, err := cuda.CurrentDevice()
	if err != nil {
		return "", 0, err
	}
	if !ok {
		return b, 0, nil
	}
	return b, int(dev), nil
}

// jobID names the shared-memory objects of hal/host devices. Every process
// of the user uses the same name, so that the processes of a job import each
// other's buffers before any communicator (and its job id) exists; object
// names carry the process id, so jobs do not collide.
func jobID() string { return fmt.Sprintf("nccl-%d", os.Getuid()) }

// open returns the device (backend, ordinal), opening it on first use.
func (t *deviceTable) open(backend string, ordinal, rank int) (hal.Device, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := devKey{backend, ordinal}
	if d, ok := t.open_[k]; ok {
		return d, nil
	}
	d, err := hal.Open(backend, hal.Config{Ordinal: ordinal, Rank: rank, JobID: jobID()})
	if err != nil {
		return nil, err
	}
	t.open_[k] = d
	return d, nil
}

// alloc is ncclMemAlloc on the calling thread's device.
func (t *deviceTable) alloc(bytes int64) (uintptr, error) {
	b, ord, err := current()
	if err != nil {
		return 0, err
	}
	d, err := t.open(b, ord, -1)
	if err != nil {
		return 0, err
	}
	buf, err := d.Alloc(bytes)
	if err != nil {
		return 0, err
	}
	t.mu.Lock()
	t.mem[uintptr(buf.Addr())] = buf
	t.mu.Unlock()
	return uintptr(buf.Addr()), nil
}

// free is ncclMemFree.
func (t *deviceTable) free(p uintptr) error {
	t.mu.Lock()
	buf, ok := t.mem[p]
	delete(t.mem, p)
	t.mu.Unlock()
	if !ok {
		return fmt.Errorf("ptr %#x was not returned by ncclMemAlloc (or was freed): %w", p, hal.ErrInvalidArgument)
	}
	return buf.Free()
}

// contains reports whether [p, p+n) lies inside one ncclMemAlloc'd buffer.
func (t *deviceTable) contains(p uintptr, n int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for a, b := range t.mem {
		if p >= a && uint64(p-a)+uint64(n) <= uint64(b.Size()) {
			return true
		}
	}
	return false
}

// containing returns the ncclMemAlloc'd buffer that holds [p, p+n), or nil.
func (t *deviceTable) containing(p uintptr, n int64) hal.Buffer {
	t.mu.Lock()
	defer t.mu.Unlock()
	for a, b := range t.mem {
		if p >= a && uint64(p-a)+uint64(n) <= uint64(b.Size()) {
			return b
		}
	}
	return nil
}
