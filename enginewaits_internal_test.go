package weft

import (
	"errors"
	"strings"
	"testing"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
)

// TestEngineWaits checks which communicators NewComm refuses on a GPU:
// those whose kernels would wait for the device's engine (across nodes a
// network without host windows; on one node links that are port-mapped
// only), unless
// WEFT_ENGINE_WAITS=1; never on hal/host, never nodes of one or several
// ranks over host windows (the flat port plans carry every channel over
// the network, the hierarchical ones split their windows), never
// memory-mapped links on one node.
func TestEngineWaits(t *testing.T) {
	gpu, host := hal.DeviceInfo{Backend: "nvlink", Arch: "sm_90"}, hal.DeviceInfo{Backend: "host"}
	cfg := func(nodes []int, hostWindows bool) algorithms.Config {
		c := algorithms.DefaultConfig(0, len(nodes), 132, true)
		c.Nodes, c.HostWindows, c.PortOnly = nodes, hostWindows, true
		return c
	}
	oneNode := func(n int, portOnly bool) algorithms.Config {
		c := algorithms.DefaultConfig(0, n, 132, true)
		c.PortOnly = portOnly
		return c
	}
	cases := []struct {
		name    string
		info    hal.DeviceInfo
		cfg     algorithms.Config
		allow   string // WEFT_ENGINE_WAITS
		refused string // a part of the refusal's message; "" when served
	}{
		{"one rank per node, host windows", gpu, cfg([]int{0, 1}, true), "", ""},
		{"one rank per node of four, host windows", gpu, cfg([]int{0, 1, 2, 3}, true), "", ""},
		{"two ranks per node", gpu, cfg([]int{0, 0, 1, 1}, true), "", ""},
		{"uneven nodes", gpu, cfg([]int{0, 1, 1}, true), "", ""},
		{"two ranks per node, device windows", gpu, cfg([]int{0, 0, 1, 1}, false), "", "host windows"},
		{"device windows", gpu, cfg([]int{0, 1}, false), "", "host windows"},
		{"device windows, allowed", gpu, cfg([]int{0, 1}, false), "1", ""},
		{"device windows, not allowed", gpu, cfg([]int{0, 1}, false), "0", "host windows"},
		{"18 ranks on 2 nodes", gpu, cfg(nodesOf(18, 9), true), "", ""},
		{"18 ranks on 2 nodes, device windows", gpu, cfg(nodesOf(18, 9), false), "", "host windows"},
		{"17 ranks on 17 nodes", gpu, cfg(nodesOf(17, 1), true), "", ""},
		{"hal/host, two ranks per node", host, cfg([]int{0, 0, 1, 1}, true), "", ""},
		{"hal/host, device windows", host, cfg([]int{0, 1}, false), "", ""},
		{"one node, memory-mapped links", gpu, oneNode(4, false), "", ""},
		{"one node, port-mapped links only", gpu, oneNode(2, true), "", "port-mapped only"},
		{"one node, port-mapped links only, allowed", gpu, oneNode(2, true), "1", ""},
		{"hal/host, one node, port-mapped links only", host, oneNode(2, true), "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("WEFT_ENGINE_WAITS", c.allow)
			err := engineWaits(c.info, c.cfg)
			switch {
			case c.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.refused != "" && err == nil:
				t.Fatalf("served, want a refusal naming %q", c.refused)
			case c.refused != "" && (!errors.Is(err, hal.ErrNotSupported) || !strings.Contains(err.Error(), c.refused) ||
				!strings.Contains(err.Error(), "WEFT_ENGINE_WAITS=1")):
				t.Fatalf("refusal %v: want hal.ErrNotSupported naming %q and the variable that allows it", err, c.refused)
			}
		})
	}
}

// nodesOf is the node of each of n ranks, per consecutive ranks a node.
func nodesOf(n, per int) []int {
	nodes := make([]int, n)
	for r := range nodes {
		nodes[r] = r / per
	}
	return nodes
}
