package host

import (
	"testing"

	"github.com/weftccl/weft/hal"
)

// Devices of one host with different WEFT_NODE_ID are emulated nodes: they
// stop sharing memory, and the link says why.
func TestNodesShareNoLink(t *testing.T) {
	t.Setenv("WEFT_NODE_ID", "a")
	a := open(t, "node-test", 0)
	t.Setenv("WEFT_NODE_ID", "b")
	b := open(t, "node-test", 1)
	t.Setenv("WEFT_NODE_ID", "a")
	c := open(t, "node-test", 2)
	for _, tc := range []struct {
		from, to *Device
		caps     hal.Capability
		reason   string
	}{
		{a, b, 0, "different node (node a vs node b)"},
		{b, a, 0, "different node (node b vs node a)"},
		{a, c, hal.CapMemoryMapped | hal.CapPortMapped | hal.CapSwitchMapped, ""},
		{a, a, hal.CapMemoryMapped | hal.CapPortMapped | hal.CapSwitchMapped, ""},
	} {
		l := tc.from.Link(tc.to.Endpoint())
		if l.Caps != tc.caps || l.Reason != tc.reason {
			t.Errorf("link node %s → node %s: %v %q, want %v %q", tc.from.Endpoint().Node, tc.to.Endpoint().Node, l.Caps, l.Reason, tc.caps, tc.reason)
		}
	}
	if got := b.Endpoint().Node; got != "b" {
		t.Errorf("Endpoint().Node = %q, want b", got)
	}
	t.Setenv("WEFT_NODE_ID", "")
	if d := open(t, "node-test", 3); d.Endpoint().Node != d.Endpoint().HostID {
		t.Errorf("without WEFT_NODE_ID, Node = %q, want the host id %q", d.Endpoint().Node, d.Endpoint().HostID)
	}
}
