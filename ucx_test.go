package weft_test

import (
	"fmt"
	"testing"

	"github.com/weftccl/weft/hal"
	_ "github.com/weftccl/weft/hal/ucx"
	"github.com/weftccl/weft/internal/env"
)

// TestCollectivesAcrossNodesUCX runs every collective and a group of
// sends and receives (netChild, as TestCollectivesAcrossNodes) with every
// byte between emulated nodes carried by hal/ucx, checking each element:
// 4 nodes of 2 ranks over UCX's TCP transport (on loopback, as a job on
// one host restricts it) and 2 nodes of 2 over its shared-memory
// transports (posix/sysv with cma). The two other pairings add no path
// of hal/ucx and a quarter minute of CI each. It skips where UCX is not
// installed, unless WEFT_REQUIRE names ucx (CI).
func TestCollectivesAcrossNodesUCX(t *testing.T) {
	n, err := hal.LookupNetwork("ucx")
	if err != nil {
		t.Fatal(err)
	}
	if a := n.Probe(); !a.Available {
		if env.Required("ucx") {
			t.Fatalf("WEFT_REQUIRE names ucx, but it is unavailable: %s", a.Reason)
		}
		t.Skipf("UCX unavailable (apt-get install libucx0): %s", a.Reason)
	}
	t.Parallel() // waits on processes and the network more than it computes
	for _, c := range []struct {
		tls   string
		nodes int
	}{{"tcp", 4}, {"shm", 2}} {
		t.Run(fmt.Sprintf("%s/%dx2", c.tls, c.nodes), func(t *testing.T) {
			t.Parallel()
			out, err, took := runNodes(t, 2*c.nodes, c.nodes, "net", "WEFT_NET=ucx", "UCX_TLS="+c.tls)
			if err != nil {
				t.Fatalf("%d ranks on %d nodes over UCX %s: %v\n%s", 2*c.nodes, c.nodes, c.tls, err, out)
			}
			t.Logf("%d ranks on %d nodes over UCX %s: %v", 2*c.nodes, c.nodes, c.tls, took)
		})
	}
}
