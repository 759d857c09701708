package hal

import (
	"fmt"

	"github.com/weftccl/weft/internal/errkind"
)

// Sentinel errors of the HAL contract. Every error a backend, channel or
// algorithm returns wraps exactly one of them, so callers test with
// errors.Is. They are defined in the leaf package internal/errkind, which
// the vendor bindings below the contract use, and are the same values
// here: errors.Is(err, hal.ErrDevice) holds for an error a binding wrapped
// with errkind.ErrDevice. Their ncclResult_t codes are NCCL's business
// (internal/sysnccl.ResultOf).
var (
	// ErrNotSupported: the backend or the hardware lacks the feature
	// (ncclInvalidUsage in NCCL terms is reserved for caller mistakes).
	ErrNotSupported = errkind.ErrNotSupported
	// ErrInvalidArgument: a caller passed a bad value (null buffer, count
	// overflow, unknown data type, out-of-range offset).
	ErrInvalidArgument = errkind.ErrInvalidArgument
	// ErrInvalidUsage: a valid value used in a wrong order or state
	// (freed buffer, handle of another job, mismatched collective).
	ErrInvalidUsage = errkind.ErrInvalidUsage
	// ErrSystem: an operating-system call failed (mmap, socket, memfd).
	ErrSystem = errkind.ErrSystem
	// ErrInternal: a weft bug.
	ErrInternal = errkind.ErrInternal
	// ErrRemote: a peer rank failed or disappeared.
	ErrRemote = errkind.ErrRemote
	// ErrDevice: the accelerator runtime reported an error.
	ErrDevice = errkind.ErrDevice
	// ErrTimeout: a wait passed its deadline.
	ErrTimeout = errkind.ErrTimeout
)

// ErrNotResident marks a plan that a backend refused at Prepare because its
// thread blocks cannot all be resident on the device at once (a plan's
// blocks wait for each other, so one never scheduled would spin until its
// deadline: devcore.CheckResident). It wraps ErrInvalidArgument. weft.Comm's
// Launch answers it, on every rank alike, by taking the next plan that can
// run the call.
var ErrNotResident = fmt.Errorf("plan not resident: %w", ErrInvalidArgument)

// TimeoutError describes a device- or host-side wait that passed its
// deadline. It wraps ErrTimeout. Fields a source cannot know are -1. It
// is errkind.TimeoutError (an alias: errors.As with either finds it).
type TimeoutError = errkind.TimeoutError
