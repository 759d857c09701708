package hip

import (
	"errors"
	"fmt"

	"github.com/weftccl/weft/internal/errkind"
)

// Result is a hipError_t.
type Result int32

// hipError_t values (from the HIP runtime API) that weft tests for by value.
const (
	Success                       Result = 0
	ErrorInvalidValue             Result = 1
	ErrorOutOfMemory              Result = 2
	ErrorNotInitialized           Result = 3
	ErrorInsufficientDriver       Result = 35
	ErrorNoDevice                 Result = 100
	ErrorInvalidDevice            Result = 101
	ErrorInvalidImage             Result = 200
	ErrorPeerAccessUnsupported    Result = 217
	ErrorInvalidHandle            Result = 400
	ErrorNotFound                 Result = 500
	ErrorNotReady                 Result = 600
	ErrorPeerAccessAlreadyEnabled Result = 704
	ErrorNotSupported             Result = 801
	ErrorUnknown                  Result = 999
)

// resultNames is the fallback table of hipError_t names and descriptions,
// so that messages read well before the runtime is loaded and for codes a
// runtime does not name. Names are the HIP enumerators.
var resultNames = map[Result][2]string{
	0:    {"hipSuccess", "no error"},
	1:    {"hipErrorInvalidValue", "invalid argument"},
	2:    {"hipErrorOutOfMemory", "out of memory"},
	3:    {"hipErrorNotInitialized", "initialization error"},
	4:    {"hipErrorDeinitialized", "runtime shutting down"},
	9:    {"hipErrorInvalidConfiguration", "invalid launch configuration"},
	17:   {"hipErrorInvalidDevicePointer", "invalid device pointer"},
	35:   {"hipErrorInsufficientDriver", "driver version is insufficient for runtime version"},
	98:   {"hipErrorInvalidDeviceFunction", "invalid device function"},
	100:  {"hipErrorNoDevice", "no ROCm-capable device is detected"},
	101:  {"hipErrorInvalidDevice", "invalid device ordinal"},
	200:  {"hipErrorInvalidImage", "device kernel image is invalid"},
	201:  {"hipErrorInvalidContext", "invalid device context"},
	205:  {"hipErrorMapFailed", "mapping of buffer object failed"},
	209:  {"hipErrorNoBinaryForGpu", "no kernel image is available for execution on the device"},
	217:  {"hipErrorPeerAccessUnsupported", "peer access is not supported between these two devices"},
	218:  {"hipErrorInvalidKernelFile", "invalid kernel file"},
	300:  {"hipErrorInvalidSource", "device kernel image is invalid"},
	301:  {"hipErrorFileNotFound", "file not found"},
	400:  {"hipErrorInvalidHandle", "invalid resource handle"},
	401:  {"hipErrorIllegalState", "the operation cannot be performed in the present state"},
	500:  {"hipErrorNotFound", "named symbol not found"},
	600:  {"hipErrorNotReady", "device not ready"},
	700:  {"hipErrorIllegalAddress", "an illegal memory access was encountered"},
	701:  {"hipErrorLaunchOutOfResources", "too many resources requested for launch"},
	704:  {"hipErrorPeerAccessAlreadyEnabled", "peer access is already enabled"},
	705:  {"hipErrorPeerAccessNotEnabled", "peer access has not been enabled"},
	719:  {"hipErrorLaunchFailure", "unspecified launch failure"},
	801:  {"hipErrorNotSupported", "operation not supported"},
	900:  {"hipErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"},
	901:  {"hipErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"},
	999:  {"hipErrorUnknown", "unknown error"},
	1052: {"hipErrorRuntimeMemory", "HSA runtime memory call returned error"},
	1053: {"hipErrorRuntimeOther", "HSA runtime call returned error"},
}

// Name returns the HIP name of r ("hipErrorInvalidHandle"), from the
// runtime when it is loaded, else from the fallback table.
func (r Result) Name() string {
	if s := runtimeErrorName(r); s != "" {
		return s
	}
	if n, ok := resultNames[r]; ok {
		return n[0]
	}
	return fmt.Sprintf("hipError_t(%d)", int32(r))
}

// Description returns the runtime's text for r ("invalid resource handle").
func (r Result) Description() string {
	if s := runtimeErrorString(r); s != "" {
		return s
	}
	if n, ok := resultNames[r]; ok {
		return n[1]
	}
	return "unrecognized HIP error code"
}

func (r Result) String() string { return r.Name() }

// Error is a failed HIP runtime call. It wraps errkind.ErrDevice, and in
// addition errkind.ErrNotSupported for hipErrorNotSupported and
// hipErrorPeerAccessUnsupported and errkind.ErrInvalidArgument for
// hipErrorInvalidValue, so callers test it with errors.Is; errors.As
// recovers the call and code.
type Error struct {
	Call        string // "hipIpcOpenMemHandle"
	Code        Result
	Name        string // "hipErrorInvalidHandle"
	Description string // "invalid resource handle"
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (%s)", e.Call, e.Name, e.Description)
}

// Unwrap returns the HAL sentinels e wraps.
func (e *Error) Unwrap() []error {
	switch e.Code {
	case ErrorNotSupported, ErrorPeerAccessUnsupported:
		return []error{errkind.ErrDevice, errkind.ErrNotSupported}
	case ErrorInvalidValue:
		return []error{errkind.ErrDevice, errkind.ErrInvalidArgument}
	}
	return []error{errkind.ErrDevice}
}

// setDeviceFailed is WEFT_HIP_SETDEVICE_FAILED of weft_hip.h: the bit a
// trampoline sets when the hipSetDevice before its call failed.
const setDeviceFailed = 1 << 24

// newError returns nil for hipSuccess and an *Error naming call otherwise
// (hipSetDevice when the trampoline's device switch failed).
func newError(call string, r Result) error {
	if r == Success {
		return nil
	}
	if r&setDeviceFailed != 0 {
		call, r = "hipSetDevice (before "+call+")", r&^setDeviceFailed
	}
	return &Error{Call: call, Code: r, Name: r.Name(), Description: r.Description()}
}

// IsResult reports whether err is (or wraps) a HIP error with code r.
func IsResult(err error, r Result) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == r
}

// LoadError says why a library could not be loaded. It wraps
// errkind.ErrNotSupported: a machine without ROCm lacks the feature.
type LoadError struct {
	// Library is the library asked for ("libamdhip64.so.6"), the first
	// candidate when several were tried.
	Library string
	// Detail is the loader's message (dlerror text, a missing entry point).
	Detail string
	// Hint says what the failure means ("no ROCm: libamdhip64.so not
	// found (tried …)").
	Hint string
	// NotFound: no candidate could be opened at all.
	NotFound bool
	// Err is a HIP error behind the failure, if any (hipInit failed).
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

// RTCResult is a hiprtcResult.
type RTCResult int32

// RTCErrorCompilation is HIPRTC_ERROR_COMPILATION: the source has errors.
const RTCErrorCompilation RTCResult = 6

var rtcNames = []string{
	"HIPRTC_SUCCESS",
	"HIPRTC_ERROR_OUT_OF_MEMORY",
	"HIPRTC_ERROR_PROGRAM_CREATION_FAILURE",
	"HIPRTC_ERROR_INVALID_INPUT",
	"HIPRTC_ERROR_INVALID_PROGRAM",
	"HIPRTC_ERROR_INVALID_OPTION",
	"HIPRTC_ERROR_COMPILATION",
	"HIPRTC_ERROR_BUILTIN_OPERATION_FAILURE",
	"HIPRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
	"HIPRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
	"HIPRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
	"HIPRTC_ERROR_INTERNAL_ERROR",
}

func (r RTCResult) String() string {
	if r >= 0 && int(r) < len(rtcNames) {
		return rtcNames[r]
	}
	if r == 100 {
		return "HIPRTC_ERROR_LINKING"
	}
	return fmt.Sprintf("hiprtcResult(%d)", int32(r))
}

// RTCError is a failed hipRTC call. A compilation error
// (HIPRTC_ERROR_COMPILATION) carries the program log and wraps
// errkind.ErrInvalidArgument (the source is wrong); every hipRTC error wraps
// errkind.ErrDevice.
type RTCError struct {
	Call    string // "hiprtcCompileProgram"
	Program string // program name
	Arch    string // offload target
	Code    RTCResult
	Text    string // hiprtcGetErrorString, if the library gave one
	Log     string // compiler output, if any
}

func (e *RTCError) Error() string {
	s := fmt.Sprintf("%s(%s, %s): %s", e.Call, e.Program, e.Arch, e.Code)
	if e.Text != "" {
		s += " (" + e.Text + ")"
	}
	if e.Log != "" {
		s += "\n" + e.Log
	}
	return s
}

func (e *RTCError) Unwrap() []error {
	if e.Code == RTCErrorCompilation {
		return []error{errkind.ErrDevice, errkind.ErrInvalidArgument}
	}
	return []error{errkind.ErrDevice}
}
