package nvswitch

import (
	"errors"
	"strings"
	"testing"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/cudadev"
)

// TestProbeDisabled: unless WEFT_NVLS is exactly 1 the backend is
// unavailable with the policy's reason, before any driver is touched, and
// Open refuses with the same reason.
func TestProbeDisabled(t *testing.T) {
	for _, v := range []string{"", "0", "true", "yes", " 1"} {
		t.Setenv("WEFT_NVLS", v)
		a := (backend{}).Probe()
		if a.Available || a.Reason != DisabledReason {
			t.Errorf("WEFT_NVLS=%q: Probe() = %+v, want unavailable with %q", v, a, DisabledReason)
		}
		_, err := hal.Open(Name, hal.Config{})
		if !errors.Is(err, hal.ErrNotSupported) || !strings.Contains(err.Error(), DisabledReason) {
			t.Errorf("WEFT_NVLS=%q: hal.Open = %v, want ErrNotSupported with the reason", v, err)
		}
		_, err = Open(hal.Config{})
		if !errors.Is(err, hal.ErrNotSupported) || !strings.Contains(err.Error(), DisabledReason) {
			t.Errorf("WEFT_NVLS=%q: Open = %v, want ErrNotSupported with the reason", v, err)
		}
	}
	if DisabledReason != "NVLink SHARP multicast disabled: WEFT_NVLS is not 1 (architecture.md §8)" {
		t.Errorf("reason %q", DisabledReason)
	}
}

// TestProbeEnabledWithoutDriver: with WEFT_NVLS=1 the next reasons are the
// CUDA core's. The variable is set only where no CUDA driver loads, so that
// this test never enables the hardware path on a GPU host.
func TestProbeEnabledWithoutDriver(t *testing.T) {
	if cuda.Load() == nil {
		t.Skip("a CUDA driver is installed: WEFT_NVLS=1 is not set by tests on GPU hosts")
	}
	t.Setenv("WEFT_NVLS", "1")
	a := (backend{}).Probe()
	core := cudadev.Probe()
	if a.Available || core.Available || a.Reason != core.Reason {
		t.Errorf("Probe() = %+v, want the core's %+v", a, core)
	}
	if !strings.HasPrefix(a.Reason, "no NVIDIA driver: ") && !strings.HasPrefix(a.Reason, "no usable NVIDIA driver") {
		t.Errorf("reason %q", a.Reason)
	}
	if _, err := Open(hal.Config{}); !errors.Is(err, hal.ErrNotSupported) {
		t.Errorf("Open without driver = %v, want ErrNotSupported", err)
	}
}

func TestRegistered(t *testing.T) {
	b, err := hal.Lookup(Name)
	if err != nil || b.Name() != "nvswitch" {
		t.Fatalf("Lookup(%q) = %v, %v", Name, b, err)
	}
}

// fakeDevice is a Device with an identity and no GPU, for Link.
func fakeDevice() *Device {
	return &Device{Device: cudadev.Fake(hal.Endpoint{Backend: Name, Hostname: "node1", HostID: "boot-a/ipc:[1]", Ordinal: 0, UUID: "GPU-aaaa", PID: 10})}
}

func TestLinkWithoutGPU(t *testing.T) {
	d := fakeDevice()
	ep := d.Endpoint()
	tests := []struct {
		name   string
		peer   hal.Endpoint
		caps   hal.Capability
		reason string
	}{
		{"other backend", hal.Endpoint{Backend: "nvlink", HostID: ep.HostID, UUID: "GPU-bbbb"}, 0, `peer uses backend "nvlink"`},
		{"other host", hal.Endpoint{Backend: Name, Hostname: "node2", HostID: "boot-b/ipc:[1]", UUID: "GPU-bbbb"}, 0, "different hosts (node1 and node2)"},
		{"same GPU", hal.Endpoint{Backend: Name, Hostname: "node1", HostID: ep.HostID, UUID: "GPU-aaaa", PID: 11},
			hal.CapMemoryMapped | hal.CapPortMapped, "a multicast group spans distinct GPUs"},
		{"invisible GPU", hal.Endpoint{Backend: Name, Hostname: "node1", HostID: ep.HostID, UUID: "GPU-cccc"}, 0, "not visible to this process"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := d.Link(tt.peer)
			if l.Caps != tt.caps || !strings.Contains(l.Reason, tt.reason) {
				t.Errorf("Link = %+v, want caps %v and a reason containing %q", l, tt.caps, tt.reason)
			}
		})
	}
	if _, err := d.NewEngine(hal.Endpoint{Backend: "host"}); !errors.Is(err, hal.ErrNotSupported) || !strings.Contains(err.Error(), `peer uses backend "host"`) {
		t.Errorf("NewEngine(host peer) = %v", err)
	}
}

// TestMulticastPolicy: the multicast calls refuse while WEFT_NVLS is not 1,
// even on a device opened earlier, before reaching the driver.
func TestMulticastPolicy(t *testing.T) {
	t.Setenv("WEFT_NVLS", "")
	d := fakeDevice()
	if _, err := d.NewMulticast(1<<21, 2); !errors.Is(err, hal.ErrNotSupported) || !strings.Contains(err.Error(), DisabledReason) {
		t.Errorf("NewMulticast = %v", err)
	}
	if _, err := d.ImportMulticast(validMulticast().encode()); !errors.Is(err, hal.ErrNotSupported) || !strings.Contains(err.Error(), DisabledReason) {
		t.Errorf("ImportMulticast = %v", err)
	}
	if _, err := d.MulticastGranularity(); !errors.Is(err, hal.ErrNotSupported) {
		t.Errorf("MulticastGranularity = %v", err)
	}
}

func TestSwitchHeaderEmbedded(t *testing.T) {
	d := fakeDevice()
	h := d.SwitchHeader()
	for _, name := range []string{"multimem_ld_reduce16", "multimem_st16", "multimem_ld_reduce4", "multimem_st4", "fence_proxy_alias", `#include "weft_hal.h"`} {
		if !strings.Contains(h, name) {
			t.Errorf("SwitchHeader lacks %s", name)
		}
	}
	if SwitchHeaderName != "weft_switch_hal.h" || DeviceHeaderName != "weft_hal.h" {
		t.Errorf("header names %q, %q", SwitchHeaderName, DeviceHeaderName)
	}
}
