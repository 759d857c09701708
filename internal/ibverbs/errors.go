package ibverbs

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/errkind"
)

// DefaultLibrary is the library Load opens when WEFT_IBVERBS_LIB is unset.
const DefaultLibrary = "libibverbs.so.1"

// Library is the verbs library Load opens: WEFT_IBVERBS_LIB, else
// libibverbs.so.1.
func Library() string {
	if p := env.String("WEFT_IBVERBS_LIB"); p != "" {
		return p
	}
	return DefaultLibrary
}

// LoadError says why a verbs library could not be used. It wraps
// errkind.ErrNotSupported.
type LoadError struct {
	Library string
	Detail  string // dlerror text, or the missing symbol
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("libibverbs not found: %s: %s", e.Library, e.Detail)
}

func (e *LoadError) Unwrap() error { return errkind.ErrNotSupported }

// Error is a failed verbs call.
type Error struct {
	Call   string // "ibv_reg_mr"
	Device string // RDMA device, "" when none applies
	Errno  syscall.Errno
}

func (e *Error) Error() string {
	s := e.Call
	if e.Device != "" {
		s += " on " + e.Device
	}
	return fmt.Sprintf("%s: %v (errno %d)", s, e.Errno, int(e.Errno))
}

// Unwrap returns the errno and the sentinel it maps to.
func (e *Error) Unwrap() []error {
	kind := errkind.ErrSystem
	switch e.Errno {
	case syscall.ENOSYS, syscall.EOPNOTSUPP:
		kind = errkind.ErrNotSupported
	case syscall.EINVAL:
		kind = errkind.ErrInvalidArgument
	}
	return []error{e.Errno, kind}
}

func newError(call, dev string, rc int) error {
	if rc == 0 {
		return nil
	}
	return &Error{Call: call, Device: dev, Errno: syscall.Errno(rc)}
}

// IsErrno reports whether err is a verbs error with errno n.
func IsErrno(err error, n syscall.Errno) bool {
	var e *Error
	return errors.As(err, &e) && e.Errno == n
}

// Work-completion statuses (enum ibv_wc_status).
const (
	WCSuccess        = 0
	WCLocLenErr      = 1
	WCLocQPOpErr     = 2
	WCLocProtErr     = 4
	WCWRFlushErr     = 5
	WCRemInvReqErr   = 9
	WCRemAccessErr   = 10
	WCRemOpErr       = 11
	WCRetryExcErr    = 12
	WCRNRRetryExcErr = 13
	WCFatalErr       = 19
	WCGeneralErr     = 21
)

// statusNames is the fallback of StatusString when no library is loaded:
// the strings of rdma-core's ibv_wc_status_str.
var statusNames = []string{
	"success", "local length error", "local QP operation error", "local EE context operation error",
	"local protection error", "Work Request Flushed Error", "memory management operation error",
	"bad response error", "local access error", "remote invalid request error", "remote access error",
	"remote operation error", "transport retry counter exceeded", "RNR retry counter exceeded",
	"local RDD violation error", "remote invalid RD request", "aborted error", "invalid EE context number",
	"invalid EE context state", "fatal error", "response timeout error", "general error",
}

func fallbackStatus(s int) string {
	if s >= 0 && s < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("unknown status %d", s)
}
