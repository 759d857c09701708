package sysnccl

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
	cgo, err := apicheck.ExportedFuncs("nccl_cgo.go")
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

// TestStubErrors: in a build without cgo every call fails with
// ErrNotSupported; with cgo the same calls reach NCCL or report that it
// is missing, also as ErrNotSupported where no library is installed.
func TestStubErrors(t *testing.T) {
	if err := Load(); err == nil {
		t.Skip("NCCL is loaded: the calls below would run")
	}
	var c Comm
	calls := map[string]error{
		"Load":       Load(),
		"GroupStart": GroupStart(),
		"GroupEnd":   GroupEnd(),
	}
	_, calls["GetUniqueID"] = GetUniqueID()
	_, calls["CommInitRankConfig"] = CommInitRankConfig(0, 2, UniqueID{}, 0, Config{NonBlocking: true})
	if !cgoEnabled {
		calls["Reduce"] = c.Reduce(0, 0, 1, Float32, Sum, 0, 0)
		calls["AlltoAll"] = c.AlltoAll(0, 0, 1, Float32, 0)
		_, calls["RedOpCreatePreMulSum"] = c.RedOpCreatePreMulSum(0, Float32, ScalarHostImmediate)
		calls["RedOpDestroy"] = c.RedOpDestroy(5)
	}
	for name, err := range calls {
		if !errors.Is(err, errkind.ErrNotSupported) {
			t.Errorf("%s without NCCL = %v, want ErrNotSupported", name, err)
		}
	}
	if Has("ncclAlltoAll") {
		t.Error("Has is true without NCCL")
	}
}
