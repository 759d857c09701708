package ncclnet

import (
	"fmt"
	"strings"

	"github.com/weftccl/weft/internal/errkind"
)

// ABI constants of ncclNet v8 (NCCL's ext-net/example/nccl/net.h).
const (
	// HandleSize is NCCL_NET_HANDLE_MAXSIZE: the bytes of a listen handle.
	HandleSize = 128
	// PtrHost, PtrCUDA and PtrDmaBuf are the NCCL_PTR_* flags of
	// Properties.PtrSupport and of RegMr's type.
	PtrHost   = 0x1
	PtrCUDA   = 0x2
	PtrDmaBuf = 0x4
	// MaxRequests is NCCL_NET_MAX_REQUESTS: the requests a comm must
	// accept in flight. Callers keep at most this many.
	MaxRequests = 32
	// Symbol is the table a plugin exports.
	Symbol = "ncclNetPlugin_v8"
)

// Result is an ncclResult_t a plugin returned (NCCL's err.h).
type Result int

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

var resultNames = map[Result]string{
	Success: "ncclSuccess", UnhandledCudaError: "ncclUnhandledCudaError", SystemError: "ncclSystemError",
	InternalError: "ncclInternalError", InvalidArgument: "ncclInvalidArgument", InvalidUsage: "ncclInvalidUsage",
	RemoteError: "ncclRemoteError", InProgress: "ncclInProgress",
}

func (r Result) String() string {
	if s, ok := resultNames[r]; ok {
		return s
	}
	return fmt.Sprintf("ncclResult %d", int(r))
}

// Error is a failed plugin call.
type Error struct {
	Plugin string // the plugin's name (its table's name field)
	Call   string // "isend"
	Code   Result
}

func (e *Error) Error() string {
	return fmt.Sprintf("net plugin %s: %s: %v (%d)", e.Plugin, e.Call, e.Code, int(e.Code))
}

// Unwrap returns the error kind of the code: ErrSystem for a system
// error, ErrRemote for a remote one, ErrInvalidArgument and
// ErrInvalidUsage for those, ErrDevice for a CUDA error, ErrInternal
// otherwise (a plugin's internal error, or an entry it left NULL).
func (e *Error) Unwrap() error {
	switch e.Code {
	case SystemError:
		return errkind.ErrSystem
	case RemoteError:
		return errkind.ErrRemote
	case InvalidArgument:
		return errkind.ErrInvalidArgument
	case InvalidUsage:
		return errkind.ErrInvalidUsage
	case UnhandledCudaError:
		return errkind.ErrDevice
	}
	return errkind.ErrInternal
}

// LoadError says why no plugin could be used. It wraps
// errkind.ErrNotSupported.
type LoadError struct {
	Name   string // NCCL_NET_PLUGIN's value
	Detail string // dlerror text for each name tried, or the missing symbol
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("cannot load NCCL net plugin %q: %s", e.Name, e.Detail)
}

func (e *LoadError) Unwrap() error { return errkind.ErrNotSupported }

// Candidates returns the library names NCCL tries for NCCL_NET_PLUGIN=name,
// in order: name itself, then libnccl-net-NAME.so unless name contains a
// '/' or already has the form lib….so. It returns nil for "" and "none"
// (no plugin).
func Candidates(name string) []string {
	if name == "" || strings.EqualFold(name, "none") {
		return nil
	}
	out := []string{name}
	if !strings.Contains(name, "/") && !(strings.HasPrefix(name, "lib") && strings.HasSuffix(name, ".so")) {
		out = append(out, "libnccl-net-"+name+".so")
	}
	return out
}

// Properties are a device's ncclNetProperties_v8_t.
type Properties struct {
	Name        string
	PCIPath     string
	GUID        uint64
	PtrSupport  int // PtrHost | PtrCUDA | PtrDmaBuf
	RegIsGlobal bool
	SpeedMbps   int
	Port        int
	LatencyUs   float32
	MaxComms    int
	MaxRecvs    int
}

// Handle is a listen handle, exchanged out of band.
type Handle [HandleSize]byte
