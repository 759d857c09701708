// Package errkind holds weft's error kinds: the sentinel errors that every
// error of weft wraps exactly once, and [TimeoutError], the description of
// a wait that passed its deadline.
//
// It is a leaf: it imports nothing of weft, so that the vendor bindings
// below the HAL contract (internal/cuda, internal/hip, internal/ibverbs,
// internal/sysnccl) and discovery (topology/sysfs) can return errors of
// the contract's kinds without importing the contract. Package hal
// re-exports every name here as the same value ([hal.ErrNotSupported] is
// ErrNotSupported), so callers test with errors.Is against either.
//
// How the kinds map onto NCCL's ncclResult_t codes is NCCL's vocabulary,
// not the contract's: it lives with the NCCL binding
// (internal/sysnccl.ResultOf).
package errkind

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error a backend, binding, channel or algorithm
// returns wraps exactly one of them, so callers test with errors.Is.
var (
	// ErrNotSupported: the backend or the hardware lacks the feature
	// (ncclInvalidUsage in NCCL terms is reserved for caller mistakes).
	ErrNotSupported = errors.New("not supported")
	// ErrInvalidArgument: a caller passed a bad value (null buffer, count
	// overflow, unknown data type, out-of-range offset).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrInvalidUsage: a valid value used in a wrong order or state
	// (freed buffer, handle of another job, mismatched collective).
	ErrInvalidUsage = errors.New("invalid usage")
	// ErrSystem: an operating-system call failed (mmap, socket, memfd).
	ErrSystem = errors.New("system error")
	// ErrInternal: a weft bug.
	ErrInternal = errors.New("internal error")
	// ErrRemote: a peer rank failed or disappeared.
	ErrRemote = errors.New("remote error")
	// ErrDevice: the accelerator runtime reported an error.
	ErrDevice = errors.New("device error")
	// ErrTimeout: a wait passed its deadline.
	ErrTimeout = errors.New("timeout")
)

// TimeoutError describes a device- or host-side wait that passed its
// deadline. It wraps ErrTimeout. Fields a source cannot know are -1.
type TimeoutError struct {
	Rank      int    // rank that waited
	Peer      int    // peer rank it waited for, or -1
	Channel   int    // channel index within the plan, or -1
	Semaphore int    // semaphore index, or -1
	Block     int    // thread block, or -1
	What      string // "semaphore", "LL packet", "barrier", ...
	Expected  uint64 // value waited for
	Observed  uint64 // last value seen
}

// Error words the wait: "rank 0: semaphore wait timed out on peer rank 1
// (channel 2, semaphore 3, block 0): expected 5, observed 4".
func (e *TimeoutError) Error() string {
	s := fmt.Sprintf("rank %d: %s wait timed out", e.Rank, e.What)
	if e.Peer >= 0 {
		s += fmt.Sprintf(" on peer rank %d", e.Peer)
	}
	if e.Channel >= 0 {
		s += fmt.Sprintf(" (channel %d", e.Channel)
		if e.Semaphore >= 0 {
			s += fmt.Sprintf(", semaphore %d", e.Semaphore)
		}
		if e.Block >= 0 {
			s += fmt.Sprintf(", block %d", e.Block)
		}
		s += ")"
	}
	s += fmt.Sprintf(": expected %d, observed %d", e.Expected, e.Observed)
	return s
}

// Unwrap returns ErrTimeout.
func (e *TimeoutError) Unwrap() error { return ErrTimeout }
