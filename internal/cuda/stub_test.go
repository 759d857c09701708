package cuda

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/internal/apicheck"
)

// TestStubMatchesCgo keeps the !cgo build's API identical to the cgo one,
// so that CGO_ENABLED=0 builds of code using this package keep compiling.
func TestStubMatchesCgo(t *testing.T) {
	cgo, err := apicheck.ExportedFuncs("driver_cgo.go", "nvrtc_cgo.go", "multicast_cgo.go", "current_cgo.go")
	if errors.Is(err, apicheck.ErrNoSource) {
		t.Skipf("test binary run outside its package directory: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	stub, err := apicheck.ExportedFuncs("stub_nocgo.go", "current_nocgo.go")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cgo, stub); diff != "" {
		t.Errorf("stub_nocgo.go differs from the cgo API (-cgo +stub):\n%s", diff)
	}
}
