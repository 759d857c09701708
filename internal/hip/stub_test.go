package hip

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/internal/apicheck"
	"github.com/weftccl/weft/internal/errkind"
)

// TestStubMatchesCgo keeps the !cgo build's API identical to the cgo one,
// so that CGO_ENABLED=0 builds of code using this package keep compiling.
func TestStubMatchesCgo(t *testing.T) {
	cgo, err := apicheck.ExportedFuncs("hip_cgo.go", "rtc_cgo.go")
	if errors.Is(err, apicheck.ErrNoSource) {
		t.Skipf("test binary run outside its package directory: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	stub, err := apicheck.ExportedFuncs("stub_nocgo.go")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cgo, stub); diff != "" {
		t.Errorf("stub_nocgo.go differs from the cgo API (-cgo +stub):\n%s", diff)
	}
}

// TestErrorSentinels checks the HAL sentinels each kind of error wraps.
func TestErrorSentinels(t *testing.T) {
	for _, c := range []struct {
		err  error
		want []error
	}{
		{newError("hipMalloc", ErrorOutOfMemory), []error{errkind.ErrDevice}},
		{newError("hipMemcpy", ErrorInvalidValue), []error{errkind.ErrDevice, errkind.ErrInvalidArgument}},
		{newError("hipDeviceEnablePeerAccess", ErrorPeerAccessUnsupported), []error{errkind.ErrDevice, errkind.ErrNotSupported}},
		{newError("hipFoo", ErrorNotSupported), []error{errkind.ErrDevice, errkind.ErrNotSupported}},
		{&LoadError{Detail: "x"}, []error{errkind.ErrNotSupported}},
		{&RTCError{Code: RTCErrorCompilation}, []error{errkind.ErrDevice, errkind.ErrInvalidArgument}},
		{&RTCError{Code: 1}, []error{errkind.ErrDevice}},
	} {
		for _, s := range []error{errkind.ErrDevice, errkind.ErrInvalidArgument, errkind.ErrNotSupported} {
			want := false
			for _, w := range c.want {
				want = want || w == s
			}
			if errors.Is(c.err, s) != want {
				t.Errorf("errors.Is(%v, %v) = %v, want %v", c.err, s, !want, want)
			}
		}
	}
	if newError("hipFree", Success) != nil {
		t.Error("newError(hipSuccess) is not nil")
	}
}
