package ib_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/ib"
)

func TestRegistered(t *testing.T) {
	n, err := hal.LookupNetwork(ib.Name)
	if err != nil || n.Name() != "ib" {
		t.Fatalf("LookupNetwork(ib) = %v, %v", n, err)
	}
}

// These machines have no RDMA device: the real /sys says so.
func TestProbeNoDevice(t *testing.T) {
	t.Setenv("WEFT_SYSFS_ROOT", "")
	n, _ := hal.LookupNetwork(ib.Name)
	a := n.Probe()
	t.Logf("probe: %+v", a)
	if a.Available {
		t.Skip("this machine has an RDMA device")
	}
	if want := "no RDMA device (checked /sys/class/infiniband)"; a.Reason != want {
		t.Errorf("Probe() reason %q, want %q", a.Reason, want)
	}
	_, err := n.Open(nil, hal.NetConfig{Rank: 0, NRanks: 1})
	if !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("Open(nil device) = %v", err)
	}
}

// Built without cgo, a machine with an RDMA device still cannot use it.
func TestProbeLibrary(t *testing.T) {
	a := ib.Probe(ib.Options{Library: "/nonexistent/libibverbs.so.1", SysfsRoot: fakeSysfs(t, "mlx5_0")})
	if a.Available || !strings.HasPrefix(a.Reason, "libibverbs not found: /nonexistent/libibverbs.so.1") {
		t.Errorf("Probe without the library = %+v", a)
	}
}
