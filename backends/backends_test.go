package backends_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	_ "github.com/weftccl/weft/backends"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
)

// TestRegistered: importing the list registers every device backend and
// every network, and WEFT_HAL is then checked against the registry (hal
// installs the check in internal/env).
func TestRegistered(t *testing.T) {
	var devs, nets []string
	for _, b := range hal.Backends() {
		devs = append(devs, b.Name())
	}
	for _, n := range hal.Networks() {
		nets = append(nets, n.Name())
	}
	if diff := cmp.Diff([]string{"host", "nvlink", "nvswitch", "pcie", "xgmi"}, devs); diff != "" {
		t.Errorf("device backends (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ib", "plugin", "socket", "ucx"}, nets); diff != "" {
		t.Errorf("networks (-want +got):\n%s", diff)
	}
	t.Setenv("WEFT_HAL", "host")
	if err := env.Check("WEFT_HAL"); err != nil {
		t.Errorf("WEFT_HAL=host: %v", err)
	}
	t.Setenv("WEFT_HAL", "nosuch")
	if err := env.Check("WEFT_HAL"); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("WEFT_HAL=nosuch: %v, want ErrInvalidArgument", err)
	}
}
