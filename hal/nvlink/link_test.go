package nvlink

import (
	"strings"
	"testing"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cudadev"
)

// fakeDevice is a Device with an identity and no GPU, for Link.
func fakeDevice() *Device {
	return &Device{cudadev.Fake(hal.Endpoint{Backend: Name, Hostname: "node1", HostID: "boot-a/ipc:[1]", Ordinal: 0, UUID: "GPU-aaaa", PID: 10})}
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
		{"other backend", hal.Endpoint{Backend: "host", HostID: ep.HostID}, 0, `peer uses backend "host"`},
		{"pcie peer", hal.Endpoint{Backend: "pcie", HostID: ep.HostID, UUID: "GPU-bbbb"}, 0, `peer uses backend "pcie"`},
		{"other host", hal.Endpoint{Backend: Name, Hostname: "node2", HostID: "boot-b/ipc:[1]", UUID: "GPU-bbbb"}, 0, "different hosts (node1 and node2)"},
		{"other container", hal.Endpoint{Backend: Name, Hostname: "node1", HostID: "boot-a/ipc:[2]", UUID: "GPU-bbbb"}, 0, "different hosts"},
		{"same GPU", hal.Endpoint{Backend: Name, Hostname: "node1", HostID: ep.HostID, UUID: "GPU-aaaa", PID: 11}, hal.CapMemoryMapped | hal.CapPortMapped, "same GPU"},
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
	if _, err := d.NewEngine(hal.Endpoint{Backend: "host"}); err == nil || !strings.Contains(err.Error(), `peer uses backend "host"`) {
		t.Errorf("NewEngine(host peer) = %v", err)
	}
}
