package hal

import (
	"errors"
	"fmt"
)

// Sentinel errors of the HAL contract. Every error a backend, channel or
// algorithm returns wraps exactly one of them, so callers test with
// errors.Is. They map one to one onto ncclResult_t codes (see ResultCode).
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

// ResultCode returns the ncclResult_t value that err maps to:
// 0 success, 1 unhandled CUDA (device) error, 2 system error, 3 internal
// error, 4 invalid argument, 5 invalid usage, 6 remote error, 7 in
// progress. Timeouts map to 6 when a peer is named and to 2 otherwise,
// following NCCL's treatment of a lost peer as a remote error. Values are
// from nccl.h (NCCL 2.28).
func ResultCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrDevice):
		return 1
	case errors.Is(err, ErrInternal):
		return 3
	case errors.Is(err, ErrInvalidArgument):
		return 4
	case errors.Is(err, ErrInvalidUsage), errors.Is(err, ErrNotSupported):
		return 5
	case errors.Is(err, ErrRemote):
		return 6
	case errors.Is(err, ErrTimeout):
		var te *TimeoutError
		if errors.As(err, &te) && te.Peer >= 0 {
			return 6
		}
		return 2
	default:
		return 2
	}
}

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

func (e *TimeoutError) Unwrap() error { return ErrTimeout }
