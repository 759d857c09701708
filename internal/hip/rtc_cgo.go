//go:build cgo

package hip

/*
#include <stdlib.h>
#include "rtc.h"
*/
import "C"

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/weftccl/weft/internal/errkind"
)

var (
	rtcMu    sync.Mutex
	rtcTried bool
	rtcErr   error
	rtcPath  string
	rtcMajor int
	rtcMinor int
)

// LoadRTC opens hipRTC (the first of RTCCandidates that loads). The first
// call's result is kept (unless LoadRTCFrom replaces it). The error is a
// *LoadError wrapping errkind.ErrNotSupported.
func LoadRTC() error {
	rtcMu.Lock()
	defer rtcMu.Unlock()
	if !rtcTried {
		rtcErr = loadRTC(RTCCandidates())
		rtcTried = true
	}
	return rtcErr
}

// LoadRTCFrom loads the first of paths that opens as hipRTC and makes it
// the compiler Compile uses, replacing the one loaded before; later
// LoadRTC calls return its result. It must not run concurrently with
// Compile.
func LoadRTCFrom(paths ...string) error {
	rtcMu.Lock()
	defer rtcMu.Unlock()
	rtcErr = loadRTC(paths)
	rtcTried = true
	return rtcErr
}

func loadRTC(paths []string) error {
	if len(paths) == 0 {
		return &LoadError{Detail: "no library to load", NotFound: true, Hint: "hipRTC not found"}
	}
	var last string
	for _, p := range paths {
		cp := C.CString(p)
		rc := C.weft_rtc_load(cp)
		C.free(unsafe.Pointer(cp))
		switch rc {
		case C.WEFT_LOAD_OK:
			var ma, mi C.int
			if r := RTCResult(C.weft_hiprtcVersion(&ma, &mi)); r != 0 {
				return &LoadError{Library: p, Detail: fmt.Sprintf("%s: hiprtcVersion: %s", p, r)}
			}
			rtcPath, rtcMajor, rtcMinor = p, int(ma), int(mi)
			return nil
		case C.WEFT_LOAD_DLOPEN:
			last = C.GoString(C.weft_rtc_load_error())
		default:
			return &LoadError{Library: p, Detail: C.GoString(C.weft_rtc_load_error()), Hint: "hipRTC lacks an entry point weft needs"}
		}
	}
	return &LoadError{
		Library:  paths[0],
		Detail:   last,
		NotFound: true,
		Hint:     "hipRTC not found (tried " + strings.Join(paths, ", ") + ")",
	}
}

// RTCVersion returns hipRTC's version (6, 3 for ROCm 6.3).
func RTCVersion() (major, minor int, err error) {
	if err := LoadRTC(); err != nil {
		return 0, 0, err
	}
	rtcMu.Lock()
	defer rtcMu.Unlock()
	return rtcMajor, rtcMinor, nil
}

// RTCPath returns the library LoadRTC opened, or "".
func RTCPath() string {
	if LoadRTC() != nil {
		return ""
	}
	rtcMu.Lock()
	defer rtcMu.Unlock()
	return rtcPath
}

// Compile compiles s with hipRTC into a code object for the offload
// target s.Arch, with --offload-arch=<target>, -O3 and -std=c++17
// followed by s.Options. Headers are offered to #include by name. A source
// with errors gives an *RTCError that carries the compiler log and wraps
// errkind.ErrInvalidArgument; a missing hipRTC, a *LoadError wrapping
// errkind.ErrNotSupported.
func Compile(s Source) ([]byte, error) {
	if err := LoadRTC(); err != nil {
		return nil, err
	}
	if s.Arch == "" {
		return nil, fmt.Errorf("compile %s: no offload target: %w", s.Name, errkind.ErrInvalidArgument)
	}
	var cmem []unsafe.Pointer
	defer func() {
		for _, p := range cmem {
			C.free(p)
		}
	}()
	cstr := func(v string) *C.char {
		p := C.CString(v)
		cmem = append(cmem, unsafe.Pointer(p))
		return p
	}
	// Arrays of C pointers in C memory, so nothing Go-owned is passed.
	carray := func(vs []string) **C.char {
		if len(vs) == 0 {
			return nil
		}
		arr := (**C.char)(C.malloc(C.size_t(len(vs)) * C.size_t(unsafe.Sizeof((*C.char)(nil)))))
		cmem = append(cmem, unsafe.Pointer(arr))
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
	opts := append([]string{"--offload-arch=" + s.Arch, "-O3", "-std=c++17"}, s.Options...)
	name := s.Name
	if name == "" {
		name = "weft_kernel.hip"
	}

	var code, clog *C.char
	var codeSize, logSize C.size_t
	var stage C.int
	r := RTCResult(C.weft_rtc_compile(cstr(s.Source), cstr(name),
		C.int(len(names)), carray(contents), carray(names),
		C.int(len(opts)), carray(opts),
		&code, &codeSize, &clog, &logSize, &stage))
	var logText string
	if clog != nil {
		logText = strings.TrimSpace(C.GoStringN(clog, C.int(logSize)))
		C.free(unsafe.Pointer(clog))
	}
	if r != 0 {
		call := [...]string{"hiprtc", "hiprtcCreateProgram", "hiprtcCompileProgram", "hiprtcGetCode"}[min(int(stage), 3)]
		var text string
		if t := C.weft_hiprtcGetErrorString(C.hiprtcResult(r)); t != nil {
			text = C.GoString(t)
		}
		return nil, &RTCError{Call: call, Program: name, Arch: s.Arch, Code: r, Text: text, Log: logText}
	}
	defer C.free(unsafe.Pointer(code))
	if logText != "" {
		Logger().Debug("hipRTC log", "kernel", name, "arch", s.Arch, "log", logText)
	}
	return C.GoBytes(unsafe.Pointer(code), C.int(codeSize)), nil
}
