//go:build cgo

package cuda

/*
#include <stdlib.h>
#include "nvrtc.h"
*/
import "C"

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/errkind"
)

var (
	nvrtcOnce    sync.Once
	nvrtcErr     error
	nvrtcLibPath string
	nvrtcMajor   int
	nvrtcMinor   int
)

// LoadNVRTC opens NVRTC (see NVRTCCandidates). It is safe to call many
// times; the first result is kept. The error is a *LoadError wrapping
// errkind.ErrNotSupported.
func LoadNVRTC() error {
	nvrtcOnce.Do(func() {
		var tried []string
		var last string
		for _, p := range NVRTCCandidates() {
			cp := C.CString(p)
			rc := C.weft_nvrtc_load(cp)
			C.free(unsafe.Pointer(cp))
			if rc == 0 {
				nvrtcLibPath = p
				var ma, mi C.int
				if r := C.weft_nvrtcVersion(&ma, &mi); r != 0 {
					nvrtcErr = &LoadError{Library: p, Detail: fmt.Sprintf("%s: nvrtcVersion: %s", p, NVRTCResult(r))}
					return
				}
				nvrtcMajor, nvrtcMinor = int(ma), int(mi)
				return
			}
			tried = append(tried, p)
			last = C.GoString(C.weft_nvrtc_load_error())
		}
		nvrtcErr = &LoadError{
			Library: tried[0],
			Detail:  last,
			Hint:    "NVRTC not found (tried " + strings.Join(tried, ", ") + "; set WEFT_NVRTC_LIB to its path)",
		}
	})
	return nvrtcErr
}

// NVRTCVersion returns NVRTC's version (13, 0 for CUDA 13.0).
func NVRTCVersion() (major, minor int, err error) {
	if err := LoadNVRTC(); err != nil {
		return 0, 0, err
	}
	return nvrtcMajor, nvrtcMinor, nil
}

// NVRTCPath returns the library LoadNVRTC opened.
func NVRTCPath() string {
	if LoadNVRTC() != nil {
		return ""
	}
	return nvrtcLibPath
}

// Compile compiles s with NVRTC into a cubin for s.Arch, with
// --gpu-architecture=<arch> and -std=c++17 followed by s.Options. Headers
// are offered to #include by name. A source with errors gives an
// *NVRTCError that carries the compiler log and wraps errkind.ErrInvalidArgument.
func Compile(s Source) ([]byte, error) {
	if err := LoadNVRTC(); err != nil {
		return nil, err
	}
	if s.Arch == "" {
		return nil, fmt.Errorf("compile %s: no target architecture: %w", s.Name, errkind.ErrInvalidArgument)
	}
	var cstrs []unsafe.Pointer
	defer func() {
		for _, p := range cstrs {
			C.free(p)
		}
	}()
	cstr := func(v string) *C.char {
		p := C.CString(v)
		cstrs = append(cstrs, unsafe.Pointer(p))
		return p
	}
	// Arrays of C pointers in C memory, so nothing Go-owned is passed.
	carray := func(vs []string) **C.char {
		if len(vs) == 0 {
			return nil
		}
		arr := (**C.char)(C.malloc(C.size_t(len(vs)) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))
		cstrs = append(cstrs, unsafe.Pointer(arr))
		sl := unsafe.Slice(arr, len(vs))
		for i, v := range vs {
			sl[i] = cstr(v)
		}
		return arr
	}
	names := make([]string, 0, len(s.Headers))
	for n := range s.Headers {
		names = append(names, n)
	}
	sort.Strings(names)
	contents := make([]string, len(names))
	for i, n := range names {
		contents[i] = s.Headers[n]
	}
	opts := append([]string{"--gpu-architecture=" + s.Arch, "-std=c++17"}, s.Options...)
	name := s.Name
	if name == "" {
		name = "weft_kernel.cu"
	}

	var cubin, clog *C.char
	var cubinSize, logSize C.size_t
	var stage C.int
	r := NVRTCResult(C.weft_nvrtc_compile(cstr(s.Source), cstr(name),
		C.int(len(names)), carray(contents), carray(names),
		C.int(len(opts)), carray(opts),
		&cubin, &cubinSize, &clog, &logSize, &stage))
	var logText string
	if clog != nil {
		logText = strings.TrimSpace(C.GoStringN(clog, C.int(logSize)))
		C.free(unsafe.Pointer(clog))
	}
	if r != 0 {
		call := [...]string{"nvrtc", "nvrtcCreateProgram", "nvrtcCompileProgram", "nvrtcGetCUBIN"}[min(int(stage), 3)]
		return nil, &NVRTCError{Call: call, Program: name, Arch: s.Arch, Code: r, Log: logText}
	}
	defer C.free(unsafe.Pointer(cubin))
	if logText != "" {
		env.Logger("HAL").Debug("NVRTC log", "kernel", name, "arch", s.Arch, "log", logText)
	}
	return C.GoBytes(unsafe.Pointer(cubin), C.int(cubinSize)), nil
}
