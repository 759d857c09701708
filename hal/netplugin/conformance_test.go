package netplugin

import (
	"context"
	"strings"
	"testing"

	"github.com/weftccl/weft/conformance"
)

// The port-mapped conformance cases pass over the plugin transport (the
// test plugin over loopback TCP) between hal/host devices treated as
// different nodes, in one process and across processes.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	t.Setenv(PluginVar, plugin(t))
	for _, ranks := range []int{2, 3} {
		rep, err := conformance.Run(context.Background(), conformance.Options{Backend: "host", Net: Name, Ranks: ranks, Quick: true,
			Run: []string{"port-mapped/"}, Require: []string{Name}})
		if err != nil {
			t.Fatal(err)
		}
		p := rep.Platforms[0]
		if p.Network != Name || len(p.Results) == 0 {
			t.Fatalf("%d ranks: network %q (%s), %d results", ranks, p.Network, p.NetworkReason, len(p.Results))
		}
		var ids []string
		for _, r := range p.Results {
			ids = append(ids, r.ID)
			if r.Status != conformance.Pass {
				t.Errorf("%d ranks: %s: %s: %s", ranks, r.ID, r.Status, r.Message)
			}
		}
		if !strings.Contains(strings.Join(ids, " "), "processes") {
			t.Errorf("%d ranks: no cross-process case ran: %v", ranks, ids)
		}
	}
}
