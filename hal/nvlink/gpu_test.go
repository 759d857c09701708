package nvlink

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/cudadev/porttest"
	"github.com/weftccl/weft/internal/env"
)

// The GPU itself (memory, streams, kernels, IPC) is tested with the core,
// in internal/cudadev; these tests cover what the backend adds: probe,
// link policy, the port-mapped capability.

// requireOrSkip skips the test, or fails it when WEFT_REQUIRE names nvlink:
// a run on GPU hardware must not pass by skipping.
func requireOrSkip(t testing.TB, reason string) {
	t.Helper()
	if env.Required(Name) {
		t.Fatalf("WEFT_REQUIRE=%s but: %s", Name, reason)
	}
	t.Skip(reason)
}

// openTest opens GPU ordinal with a private kernel cache, skipping (with
// the probe's reason) where the backend is unavailable, and closes it at
// the end of the test. Tests that need more GPUs than the host has skip
// even under WEFT_REQUIRE: hosts with one GPU are legitimate.
func openTest(t *testing.T, ordinal int) *Device {
	t.Helper()
	if a := (backend{}).Probe(); !a.Available {
		requireOrSkip(t, "nvlink unavailable: "+a.Reason)
	}
	if n, _ := cuda.DeviceCount(); ordinal >= n {
		t.Skipf("needs %d GPUs, host has %d", ordinal+1, n)
	}
	if os.Getenv("WEFT_CACHE_DIR") == "" {
		t.Setenv("WEFT_CACHE_DIR", t.TempDir())
	}
	d, err := Open(hal.Config{Ordinal: ordinal, Rank: ordinal})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	return d
}

func TestProbe(t *testing.T) {
	a := (backend{}).Probe()
	t.Logf("probe: %+v", a)
	if a.Available {
		return
	}
	ok := false
	for _, p := range []string{"no NVIDIA driver: ", "no CUDA devices", "NVRTC not found", "no usable NVIDIA driver"} {
		ok = ok || strings.HasPrefix(a.Reason, p)
	}
	if !ok {
		t.Errorf("unexpected probe reason %q", a.Reason)
	}
	if _, err := hal.Open(Name, hal.Config{}); !errors.Is(err, hal.ErrNotSupported) {
		t.Errorf("hal.Open(nvlink) without GPU = %v, want ErrNotSupported", err)
	}
	if _, err := Open(hal.Config{}); !errors.Is(err, hal.ErrNotSupported) && !strings.Contains(a.Reason, "NVRTC") {
		t.Errorf("Open without driver = %v, want ErrNotSupported", err)
	}
	requireOrSkip(t, "nvlink unavailable: "+a.Reason)
}

func TestLink(t *testing.T) {
	d := openTest(t, 0)
	info := d.Info()
	if info.Backend != Name || d.Endpoint().Backend != Name || !strings.HasPrefix(d.String(), "nvlink GPU 0") {
		t.Errorf("info %+v, endpoint %+v, %s", info, d.Endpoint(), d)
	}
	if l := d.Link(d.Endpoint()); l.Caps != hal.CapMemoryMapped|hal.CapPortMapped {
		t.Errorf("Link(self) = %+v", l)
	}
	if n, _ := cuda.DeviceCount(); n >= 2 {
		d1 := openTest(t, 1)
		l := d.Link(d1.Endpoint())
		dev0, _ := d.CUDA()
		dev1, _ := d1.CUDA()
		can, _ := cuda.CanAccessPeer(dev0, dev1)
		if (l.Caps == hal.CapMemoryMapped|hal.CapPortMapped) != can {
			t.Errorf("Link(GPU 1) = %+v, cuDeviceCanAccessPeer = %v", l, can)
		}
	}
}

// TestPortSelf runs the port-mapped checks with engines of GPU 0 to itself.
func TestPortSelf(t *testing.T) {
	d := openTest(t, 0)
	porttest.Run(t, d, d)
}

// TestPortTwoGPUs runs the port-mapped checks between GPU 0 and GPU 1 of
// this process, both ways.
func TestPortTwoGPUs(t *testing.T) {
	d0 := openTest(t, 0)
	d1 := openTest(t, 1)
	if l := d0.Link(d1.Endpoint()); l.Caps&hal.CapPortMapped == 0 {
		t.Skipf("GPUs 0 and 1 are not linked: %s", l.Reason)
	}
	t.Run("0to1", func(t *testing.T) { porttest.Run(t, d0, d1) })
	t.Run("1to0", func(t *testing.T) { porttest.Run(t, d1, d0) })
}
