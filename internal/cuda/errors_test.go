package cuda

import (
	"errors"
	"fmt"
	"testing"

	"github.com/weftccl/weft/internal/errkind"
)

func TestErrorMessageAndWrapping(t *testing.T) {
	tests := []struct {
		call      string
		code      Result
		want      string
		sentinels []error
		not       []error
	}{
		{"cuIpcOpenMemHandle", ErrorInvalidHandle, "cuIpcOpenMemHandle: CUDA_ERROR_INVALID_HANDLE (invalid resource handle)",
			[]error{errkind.ErrDevice}, []error{errkind.ErrNotSupported, errkind.ErrInvalidArgument}},
		{"cuMemAlloc", ErrorOutOfMemory, "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory)",
			[]error{errkind.ErrDevice}, []error{errkind.ErrInvalidArgument}},
		{"cuMemCreate", ErrorNotSupported, "cuMemCreate: CUDA_ERROR_NOT_SUPPORTED (operation not supported)",
			[]error{errkind.ErrDevice, errkind.ErrNotSupported}, []error{errkind.ErrInvalidArgument}},
		{"cuMemsetD8", ErrorInvalidValue, "cuMemsetD8: CUDA_ERROR_INVALID_VALUE (invalid argument)",
			[]error{errkind.ErrDevice, errkind.ErrInvalidArgument}, []error{errkind.ErrNotSupported}},
		{"cuLaunchKernel", Result(12345), "cuLaunchKernel: CUresult(12345) (unrecognized CUDA error code)",
			[]error{errkind.ErrDevice}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			err := newError(tt.call, tt.code)
			if err == nil {
				t.Fatal("newError returned nil")
			}
			// The driver's text may differ in wording from the fallback
			// table only when a driver is loaded; compare exactly otherwise.
			if !loaded() && err.Error() != tt.want {
				t.Errorf("Error() = %q, want %q", err.Error(), tt.want)
			}
			wrapped := fmt.Errorf("GPU 0: %w", err)
			for _, s := range tt.sentinels {
				if !errors.Is(wrapped, s) {
					t.Errorf("errors.Is(%v, %v) = false", wrapped, s)
				}
			}
			for _, s := range tt.not {
				if errors.Is(wrapped, s) {
					t.Errorf("errors.Is(%v, %v) = true", wrapped, s)
				}
			}
			if !IsResult(wrapped, tt.code) {
				t.Errorf("IsResult(%v, %d) = false", wrapped, tt.code)
			}
			var ce *Error
			if !errors.As(wrapped, &ce) || ce.Call != tt.call || ce.Code != tt.code {
				t.Errorf("errors.As gave %+v", ce)
			}
		})
	}
	if newError("cuInit", Success) != nil {
		t.Error("newError(Success) != nil")
	}
}

func TestFallbackNames(t *testing.T) {
	for code, n := range resultNames {
		if n[0] == "" || n[1] == "" {
			t.Errorf("code %d has an empty name or description", code)
		}
	}
	if got := ErrorPeerAccessAlready.Name(); got != "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED" {
		t.Errorf("Name() = %q", got)
	}
}

func TestLoadErrorWrapsNotSupported(t *testing.T) {
	e := &LoadError{Library: "libcuda.so.1", Detail: "libcuda.so.1: cannot open shared object file: No such file or directory", Hint: "no NVIDIA driver"}
	want := "libcuda.so.1: cannot open shared object file: No such file or directory: no NVIDIA driver"
	if e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
	if !errors.Is(e, errkind.ErrNotSupported) {
		t.Error("LoadError does not wrap errkind.ErrNotSupported")
	}
	inner := newError("cuInit", ErrorNoDevice)
	e2 := &LoadError{Library: "libcuda.so.1", Detail: "libcuda.so.1", Hint: "no CUDA devices", Err: inner}
	if !errors.Is(e2, errkind.ErrNotSupported) || !IsResult(e2, ErrorNoDevice) {
		t.Errorf("LoadError with cause: Is/As failed for %v", e2)
	}
}

func TestNVRTCError(t *testing.T) {
	e := &NVRTCError{Call: "nvrtcCompileProgram", Program: "k.cu", Arch: "sm_90a", Code: NVRTCErrorCompilation,
		Log: `k.cu(3): error: identifier "x" is undefined`}
	want := "nvrtcCompileProgram(k.cu, sm_90a): NVRTC_ERROR_COMPILATION\n" + `k.cu(3): error: identifier "x" is undefined`
	if e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
	if !errors.Is(e, errkind.ErrInvalidArgument) || !errors.Is(e, errkind.ErrDevice) {
		t.Error("compilation error should wrap ErrInvalidArgument and ErrDevice")
	}
	e.Code = 11
	if errors.Is(e, errkind.ErrInvalidArgument) {
		t.Error("internal NVRTC error should not wrap ErrInvalidArgument")
	}
	if NVRTCResult(99).String() != "nvrtcResult(99)" {
		t.Errorf("unknown code string = %q", NVRTCResult(99).String())
	}
}

func TestArch(t *testing.T) {
	tests := []struct {
		major, minor int
		want, family string
	}{
		{9, 0, "sm_90a", "sm_90"},
		{8, 0, "sm_80", "sm_80"},
		{8, 9, "sm_89", "sm_89"},
		{10, 0, "sm_100a", "sm_100"},
		{12, 0, "sm_120a", "sm_120"},
		{7, 5, "sm_75", "sm_75"},
	}
	for _, tt := range tests {
		if got := Arch(tt.major, tt.minor); got != tt.want {
			t.Errorf("Arch(%d, %d) = %q, want %q", tt.major, tt.minor, got, tt.want)
		}
		if got := ArchFamily(tt.major, tt.minor); got != tt.family {
			t.Errorf("ArchFamily(%d, %d) = %q, want %q", tt.major, tt.minor, got, tt.family)
		}
	}
}

func TestUUIDString(t *testing.T) {
	u := UUID{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}
	if got, want := u.String(), "GPU-12345678-9abc-def0-0123-456789abcdef"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
