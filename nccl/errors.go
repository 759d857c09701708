//go:build cgo

package main

import (
	"errors"
	"fmt"
	"sync"

	"github.com/weftccl/weft/internal/sysnccl"
)

// result is an ncclResult_t.
type result int32

const (
	ncclSuccess            result = 0
	ncclUnhandledCudaError result = 1
	ncclSystemError        result = 2
	ncclInternalError      result = 3
	ncclInvalidArgument    result = 4
	ncclInvalidUsage       result = 5
	ncclRemoteError        result = 6
	ncclInProgress         result = 7
	numResults                    = 8
)

// errorStrings are ncclGetErrorString's answers, weft's wording.
var errorStrings = [numResults]string{
	"no error",
	"unhandled CUDA error (see ncclGetLastError; NCCL_DEBUG=INFO logs more)",
	"unhandled system error (see ncclGetLastError; NCCL_DEBUG=INFO logs more)",
	"internal error in weft's NCCL layer (see ncclGetLastError)",
	"invalid argument (see ncclGetLastError)",
	"invalid usage (see ncclGetLastError)",
	"a remote rank failed or the network failed (see ncclGetLastError)",
	"operation in progress",
}

func errorString(r result) string {
	if r >= 0 && r < numResults {
		return errorStrings[r]
	}
	return "unknown result code"
}

// codeOf maps a weft error to an ncclResult_t (sysnccl.ResultOf), nil to
// ncclSuccess.
func codeOf(err error) result {
	if err == nil {
		return ncclSuccess
	}
	var re *realError
	if errors.As(err, &re) {
		return re.code
	}
	return result(sysnccl.ResultOf(err))
}

// lastError is ncclGetLastError's text: the most recent failure of any
// call in the process, as NCCL keeps it.
var lastError struct {
	sync.Mutex
	text string
}

func setLastError(text string) {
	lastError.Lock()
	lastError.text = text
	lastError.Unlock()
}

func getLastError() string {
	lastError.Lock()
	defer lastError.Unlock()
	return lastError.text
}

// fail records a last-error text and returns code.
func fail(code result, format string, a ...any) result {
	setLastError(fmt.Sprintf(format, a...))
	return code
}

// failErr records err as the last error and returns its code.
func failErr(fn string, err error) result {
	if err == nil {
		return ncclSuccess
	}
	setLastError(fn + ": " + err.Error())
	return codeOf(err)
}
