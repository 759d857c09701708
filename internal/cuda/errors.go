package cuda

import (
	"errors"
	"fmt"

	"github.com/weftccl/weft/internal/errkind"
)

// Result is a CUresult.
type Result int32

// CUresult values (from cuda.h) that weft tests for by value.
const (
	Success                   Result = 0
	ErrorInvalidValue         Result = 1
	ErrorOutOfMemory          Result = 2
	ErrorNotInitialized       Result = 3
	ErrorNoDevice             Result = 100
	ErrorInvalidImage         Result = 200
	ErrorInvalidContext       Result = 201
	ErrorNoBinaryForGPU       Result = 209
	ErrorPeerAccessAlready    Result = 704 // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
	ErrorInvalidHandle        Result = 400
	ErrorIllegalState         Result = 401
	ErrorNotFound             Result = 500
	ErrorNotReady             Result = 600
	ErrorIllegalAddress       Result = 700
	ErrorPeerAccessUnsupport  Result = 217
	ErrorNotPermitted         Result = 800
	ErrorNotSupported         Result = 801
	ErrorSystemDriverMismatch Result = 803
	ErrorUnknown              Result = 999
)

// resultNames is the fallback table of CUresult names and descriptions, so
// that messages read well before the driver is loaded (and for codes a
// driver's cuGetErrorName does not know). Names and texts follow cuda.h.
var resultNames = map[Result][2]string{
	0:   {"CUDA_SUCCESS", "no error"},
	1:   {"CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	2:   {"CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	3:   {"CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	4:   {"CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
	34:  {"CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
	46:  {"CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable"},
	100: {"CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	101: {"CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	200: {"CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
	201: {"CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	205: {"CUDA_ERROR_MAP_FAILED", "mapping of buffer object failed"},
	206: {"CUDA_ERROR_UNMAP_FAILED", "unmapping of buffer object failed"},
	208: {"CUDA_ERROR_ALREADY_MAPPED", "resource already mapped"},
	209: {"CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
	211: {"CUDA_ERROR_NOT_MAPPED", "resource not mapped"},
	214: {"CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered"},
	217: {"CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices"},
	218: {"CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
	220: {"CUDA_ERROR_NVLINK_UNCORRECTABLE", "uncorrectable NVLink error detected during the execution"},
	222: {"CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain."},
	300: {"CUDA_ERROR_INVALID_SOURCE", "device kernel image is invalid"},
	301: {"CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
	304: {"CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
	400: {"CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	401: {"CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
	500: {"CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	600: {"CUDA_ERROR_NOT_READY", "device not ready"},
	700: {"CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
	701: {"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
	702: {"CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
	704: {"CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
	705: {"CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"},
	708: {"CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "cannot set while device is active in this process"},
	709: {"CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
	710: {"CUDA_ERROR_ASSERT", "device-side assert triggered"},
	711: {"CUDA_ERROR_TOO_MANY_PEERS", "peer mapping resources exhausted"},
	715: {"CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal instruction was encountered"},
	716: {"CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
	719: {"CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
	800: {"CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
	801: {"CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
	802: {"CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized"},
	803: {"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system has unsupported display driver / cuda driver combination"},
	900: {"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
	901: {"CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
	904: {"CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "capture contains a fork that was not joined to the primary stream"},
	905: {"CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "dependency created on uncaptured work in another stream"},
	906: {"CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "operation would make the legacy stream depend on a capturing blocking stream"},
	908: {"CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "attempt to terminate a thread-local capture sequence from another thread"},
	909: {"CUDA_ERROR_TIMEOUT", "wait operation timed out"},
	999: {"CUDA_ERROR_UNKNOWN", "unknown error"},
}

// Name returns the CUDA name of r ("CUDA_ERROR_INVALID_HANDLE"), from the
// driver when it is loaded, else from the fallback table.
func (r Result) Name() string {
	if s := driverErrorName(r); s != "" {
		return s
	}
	if n, ok := resultNames[r]; ok {
		return n[0]
	}
	return fmt.Sprintf("CUresult(%d)", int32(r))
}

// Description returns the driver's text for r ("invalid resource handle").
func (r Result) Description() string {
	if s := driverErrorString(r); s != "" {
		return s
	}
	if n, ok := resultNames[r]; ok {
		return n[1]
	}
	return "unrecognized CUDA error code"
}

func (r Result) String() string { return r.Name() }

// Error is a failed CUDA driver call. It wraps errkind.ErrDevice, and in
// addition errkind.ErrNotSupported for CUDA_ERROR_NOT_SUPPORTED and
// errkind.ErrInvalidArgument for CUDA_ERROR_INVALID_VALUE, so callers test it
// with errors.Is; errors.As recovers the call and code.
type Error struct {
	Call        string // "cuIpcOpenMemHandle"
	Code        Result
	Name        string // "CUDA_ERROR_INVALID_HANDLE"
	Description string // "invalid resource handle"
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (%s)", e.Call, e.Name, e.Description)
}

// Unwrap returns the HAL sentinels e wraps.
func (e *Error) Unwrap() []error {
	switch e.Code {
	case ErrorNotSupported, ErrorPeerAccessUnsupport:
		return []error{errkind.ErrDevice, errkind.ErrNotSupported}
	case ErrorInvalidValue:
		return []error{errkind.ErrDevice, errkind.ErrInvalidArgument}
	}
	return []error{errkind.ErrDevice}
}

// newError returns nil for Success and an *Error otherwise.
func newError(call string, r Result) error {
	if r == Success {
		return nil
	}
	return &Error{Call: call, Code: r, Name: r.Name(), Description: r.Description()}
}

// IsResult reports whether err is (or wraps) a CUDA error with code r.
func IsResult(err error, r Result) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == r
}

// LoadError says why a library could not be loaded. It wraps
// errkind.ErrNotSupported: a machine without a driver lacks the feature.
type LoadError struct {
	// Library is the library that was asked for ("libcuda.so.1").
	Library string
	// Detail is the loader's message (dlerror text, a missing entry point).
	Detail string
	// Hint says what the failure means ("no NVIDIA driver").
	Hint string
	// Err is a CUDA error behind the failure, if any (cuInit failed).
	Err error
}

func (e *LoadError) Error() string {
	s := e.Detail
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.Hint != "" {
		s += ": " + e.Hint
	}
	return s
}

func (e *LoadError) Unwrap() []error {
	if e.Err != nil {
		return []error{errkind.ErrNotSupported, e.Err}
	}
	return []error{errkind.ErrNotSupported}
}

// NVRTCResult is an nvrtcResult.
type NVRTCResult int32

// NVRTCErrorCompilation is NVRTC_ERROR_COMPILATION: the source has errors.
const NVRTCErrorCompilation NVRTCResult = 6

var nvrtcNames = []string{
	"NVRTC_SUCCESS",
	"NVRTC_ERROR_OUT_OF_MEMORY",
	"NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
	"NVRTC_ERROR_INVALID_INPUT",
	"NVRTC_ERROR_INVALID_PROGRAM",
	"NVRTC_ERROR_INVALID_OPTION",
	"NVRTC_ERROR_COMPILATION",
	"NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
	"NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
	"NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
	"NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
	"NVRTC_ERROR_INTERNAL_ERROR",
	"NVRTC_ERROR_TIME_FILE_WRITE_FAILED",
}

func (r NVRTCResult) String() string {
	if r >= 0 && int(r) < len(nvrtcNames) {
		return nvrtcNames[r]
	}
	return fmt.Sprintf("nvrtcResult(%d)", int32(r))
}

// NVRTCError is a failed NVRTC call. A compilation error
// (NVRTC_ERROR_COMPILATION) carries the program log and wraps
// errkind.ErrInvalidArgument (the source is wrong); every NVRTC error wraps
// errkind.ErrDevice.
type NVRTCError struct {
	Call    string // "nvrtcCompileProgram"
	Program string // program name
	Arch    string // target architecture
	Code    NVRTCResult
	Log     string // compiler output, if any
}

func (e *NVRTCError) Error() string {
	s := fmt.Sprintf("%s(%s, %s): %s", e.Call, e.Program, e.Arch, e.Code)
	if e.Log != "" {
		s += "\n" + e.Log
	}
	return s
}

func (e *NVRTCError) Unwrap() []error {
	if e.Code == NVRTCErrorCompilation {
		return []error{errkind.ErrDevice, errkind.ErrInvalidArgument}
	}
	return []error{errkind.ErrDevice}
}

// ResultError returns the error of a driver call that returned r (nil for
// Success), for code that calls the driver through other libraries.
func ResultError(call string, r Result) error { return newError(call, r) }
