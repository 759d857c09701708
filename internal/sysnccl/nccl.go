// Package sysnccl binds the system's NCCL (NVIDIA's library, not weft's
// NCCL drop-in nccl/), loaded with dlopen at run time, so that
// `weft bench --baseline nccl` measures NVIDIA's library in the same run as
// weft and weft's NCCL drop-in can forward what weft does not serve. The library is WEFT_NCCL_LIB, else libnccl.so.2; nothing of NCCL
// is needed to build.
//
// The binding covers the calls of NCCL 2.28 that weft benchmarks and
// forwards: communicator setup ([CommInitRank], [CommInitRankConfig],
// Destroy, Abort, AsyncError), every collective (AllReduce, AllGather,
// ReduceScatter, Broadcast, Reduce, AlltoAll), point-to-point Send and
// Recv, [GroupStart] / [GroupEnd], and PreMulSum operators
// (RedOpCreatePreMulSum, RedOpDestroy). Entry points that older releases
// lack (ncclAlltoAll before 2.28, ncclCommInitRankConfig, PreMulSum) are
// optional: [Has] reports them, and calling a missing one returns an
// error wrapping errkind.ErrNotSupported; AlltoAll then runs as a group of
// sends and receives instead.
//
// Counts are elements, as in nccl.h; addresses are device pointers as
// uint64 (a HAL buffer's Addr), streams CUstream values as uintptr. Calls
// between GroupStart and GroupEnd are issued together by GroupEnd.
// Communicators are bound to the CUDA context passed to
// [CommInitRank] (hal/nvlink's (*Device).Context()); streams are CUstream
// values as uintptr ((*nvlink.Stream).Native()).
//
// Errors are [*Error] values naming the call and NCCL's text, wrapping the
// error kind of the ncclResult_t (errkind.ErrDevice for
// ncclUnhandledCudaError, errkind.ErrInvalidArgument, …); [ResultOf] maps
// the other way, any weft error to the ncclResult_t that reports it. Built
// without cgo, every function returns an error wrapping
// errkind.ErrNotSupported.
//
// The entry points the binding resolves are listed once, in nccl_funcs.h,
// which weft's drop-in includes too for its forwarding to the system NCCL.
package sysnccl

import (
	"errors"
	"fmt"

	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/errkind"
)

// DataType is an ncclDataType_t (values from nccl.h).
type DataType int32

const (
	Int8     DataType = 0
	Uint8    DataType = 1
	Int32    DataType = 2
	Uint32   DataType = 3
	Int64    DataType = 4
	Uint64   DataType = 5
	Float16  DataType = 6
	Float32  DataType = 7
	Float64  DataType = 8
	Bfloat16 DataType = 9
	// Float8e4m3 and Float8e5m2 exist from NCCL 2.24 (on sm_90 and newer).
	Float8e4m3 DataType = 10
	Float8e5m2 DataType = 11
)

// Size is the element size in bytes.
func (t DataType) Size() int {
	switch t {
	case Int8, Uint8, Float8e4m3, Float8e5m2:
		return 1
	case Float16, Bfloat16:
		return 2
	case Int32, Uint32, Float32:
		return 4
	case Int64, Uint64, Float64:
		return 8
	}
	return 0
}

// RedOp is an ncclRedOp_t.
type RedOp int32

const (
	Sum  RedOp = 0
	Prod RedOp = 1
	Max  RedOp = 2
	Min  RedOp = 3
	Avg  RedOp = 4
)

// ScalarResidence says where the scalar of a PreMulSum operator lives
// (ncclScalarResidence_t).
type ScalarResidence int32

const (
	// ScalarDevice: the scalar is an element in device memory, read by
	// every collective that uses the operator.
	ScalarDevice ScalarResidence = 0
	// ScalarHostImmediate: the scalar is a host value, copied when the
	// operator is created.
	ScalarHostImmediate ScalarResidence = 1
)

// Config is the part of ncclConfig_t that CommInitRankConfig passes (the
// attributes NCCL 2.18 defined; newer ones keep NCCL's defaults). Zero
// values mean "NCCL's default" (NCCL_CONFIG_UNDEF_INT): NCCL_COMM_BLOCKING
// and the other NCCL_* variables still apply to them.
type Config struct {
	// NonBlocking makes calls on the communicator return ncclInProgress
	// instead of blocking; poll AsyncError until it is nil.
	NonBlocking    bool
	CGAClusterSize int
	MinCTAs        int
	MaxCTAs        int
	NetName        string
	SplitShare     bool
}

// UniqueIDBytes is NCCL_UNIQUE_ID_BYTES.
const UniqueIDBytes = 128

// UniqueID is an ncclUniqueId: made by one rank with GetUniqueID and sent
// to the others out of band.
type UniqueID [UniqueIDBytes]byte

// Result is an ncclResult_t.
type Result int32

const (
	Success            Result = 0
	UnhandledCudaError Result = 1
	SystemError        Result = 2
	InternalError      Result = 3
	InvalidArgument    Result = 4
	InvalidUsage       Result = 5
	RemoteError        Result = 6
	InProgress         Result = 7
)

var resultNames = [...]string{"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
	"ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress"}

// IsInProgress reports whether err is an NCCL call's ncclInProgress, the
// state of a non-blocking communicator whose operation is still running.
func IsInProgress(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == InProgress
}

// ResultOf returns the ncclResult_t that err maps to: Success for nil,
// UnhandledCudaError for errkind.ErrDevice, InternalError,
// InvalidArgument, InvalidUsage (also for errkind.ErrNotSupported: NCCL
// has no code of its own for a missing feature), RemoteError, and
// SystemError for the rest. A timeout (errkind.ErrTimeout) is RemoteError
// when its errkind.TimeoutError names a peer and SystemError otherwise,
// following NCCL's treatment of a lost peer as a remote error. Values are
// from nccl.h (NCCL 2.28). weft's drop-in (nccl/) returns it from every
// export, and `weft` exits with 1 plus it.
func ResultOf(err error) Result {
	switch {
	case err == nil:
		return Success
	case errors.Is(err, errkind.ErrDevice):
		return UnhandledCudaError
	case errors.Is(err, errkind.ErrInternal):
		return InternalError
	case errors.Is(err, errkind.ErrInvalidArgument):
		return InvalidArgument
	case errors.Is(err, errkind.ErrInvalidUsage), errors.Is(err, errkind.ErrNotSupported):
		return InvalidUsage
	case errors.Is(err, errkind.ErrRemote):
		return RemoteError
	case errors.Is(err, errkind.ErrTimeout):
		var te *errkind.TimeoutError
		if errors.As(err, &te) && te.Peer >= 0 {
			return RemoteError
		}
		return SystemError
	default:
		return SystemError
	}
}

// String is the result's name in nccl.h ("ncclInvalidUsage").
func (r Result) String() string {
	if r >= 0 && int(r) < len(resultNames) {
		return resultNames[r]
	}
	return fmt.Sprintf("ncclResult_t(%d)", int32(r))
}

// Error is a failed NCCL call. It wraps the HAL sentinel of its result.
type Error struct {
	Call string // "ncclAllReduce"
	Code Result
	Text string // ncclGetErrorString, plus ncclGetLastError where known
}

func (e *Error) Error() string {
	if e.Text == "" {
		return fmt.Sprintf("%s: %s", e.Call, e.Code)
	}
	return fmt.Sprintf("%s: %s (%s)", e.Call, e.Code, e.Text)
}

func (e *Error) Unwrap() error {
	switch e.Code {
	case UnhandledCudaError:
		return errkind.ErrDevice
	case InternalError:
		return errkind.ErrInternal
	case InvalidArgument:
		return errkind.ErrInvalidArgument
	case InvalidUsage:
		return errkind.ErrInvalidUsage
	case RemoteError:
		return errkind.ErrRemote
	}
	return errkind.ErrSystem
}

// LoadError says why NCCL could not be loaded; it wraps errkind.ErrNotSupported.
type LoadError struct {
	Library string
	Detail  string
}

func (e *LoadError) Error() string {
	return e.Detail + ": NCCL not available (set WEFT_NCCL_LIB to libnccl.so.2)"
}

func (e *LoadError) Unwrap() error { return errkind.ErrNotSupported }

// MissingError is the error of a call to an entry point that the loaded
// NCCL does not export; it wraps errkind.ErrNotSupported.
type MissingError struct {
	Call    string
	Library string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("%s: not exported by %s (an older NCCL)", e.Call, e.Library)
}

func (e *MissingError) Unwrap() error { return errkind.ErrNotSupported }

// Library is the library Load opens: WEFT_NCCL_LIB, else libnccl.so.2.
func Library() string {
	if p := env.String("WEFT_NCCL_LIB"); p != "" {
		return p
	}
	return "libnccl.so.2"
}

// VersionString formats an ncclGetVersion code (22803) as "2.28.3".
func VersionString(code int) string {
	if code >= 10000 {
		return fmt.Sprintf("%d.%d.%d", code/10000, code/100%100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/1000, code/100%10, code%100)
}
