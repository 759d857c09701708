package ucx

import (
	"fmt"

	"github.com/weftccl/weft/internal/errkind"
)

// The libraries Load opens: UCX's ABI-versioned sonames.
const (
	DefaultUCP = "libucp.so.0"
	DefaultUCS = "libucs.so.0"
)

// MinMajor.MinMinor is the oldest UCX that Load accepts: the structures of
// weft_ucp.h and ucp_am_send_nbx / ucp_worker_set_am_recv_handler are as
// there from UCX 1.12 on.
const (
	MinMajor = 1
	MinMinor = 12
)

// Features of a context (enum ucp_feature).
const (
	FeatureRMA    = 1 << 1
	FeatureAMO64  = 1 << 3
	FeatureWakeup = 1 << 4
	FeatureAM     = 1 << 6
)

// Memory types (ucs_memory_type_t), for Context.MemoryTypes and MemMap.
const (
	MemHost = 0
	MemCUDA = 1
	MemROCm = 3
)

// UCX status codes weft tests for (ucs_status_t).
const (
	StatusOK         = 0
	StatusInProgress = 1
	statusNoResource = -2
	statusNoMemory   = -4
	statusInvalid    = -5
	statusUnreach    = -6
	statusInvalAddr  = -7
	statusNotImpl    = -8
	statusBusy       = -15
	statusCanceled   = -16
	statusTimedOut   = -20
	statusUnsupp     = -22
	statusRejected   = -23
	statusNotConn    = -24
	statusReset      = -25
	statusFirstLink  = -40
	statusLastEP     = -89
)

// LoadError says why UCX could not be used. It wraps errkind.ErrNotSupported.
type LoadError struct {
	Library string
	Detail  string // dlerror text, a missing symbol, an old version
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("%s not found: %s", e.Library, e.Detail)
}

func (e *LoadError) Unwrap() error { return errkind.ErrNotSupported }

// Error is a failed UCX call.
type Error struct {
	Call   string // "ucp_put_nbx"
	Status int    // ucs_status_t
	Text   string // ucs_status_string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (UCX status %d)", e.Call, e.Text, e.Status)
}

// Unwrap returns the error kind of the status: a peer's failure
// (unreachable, connection reset, endpoint and link failures) is
// ErrRemote; a timeout ErrTimeout; an unsupported operation
// ErrNotSupported; an invalid parameter or address ErrInvalidArgument;
// the rest ErrSystem.
func (e *Error) Unwrap() error {
	switch s := e.Status; {
	case s == statusUnreach || s == statusReset || s == statusNotConn || s == statusRejected || s == statusCanceled ||
		(s <= statusFirstLink && s >= statusLastEP):
		return errkind.ErrRemote
	case s == statusTimedOut:
		return errkind.ErrTimeout
	case s == statusUnsupp || s == statusNotImpl:
		return errkind.ErrNotSupported
	case s == statusInvalid || s == statusInvalAddr:
		return errkind.ErrInvalidArgument
	}
	return errkind.ErrSystem
}

// IsPeerFailure reports whether status is a failure of the remote side
// (what Error.Unwrap maps to ErrRemote).
func IsPeerFailure(status int) bool {
	return (&Error{Status: status}).Unwrap() == errkind.ErrRemote
}
