package ucx_test

import (
	"context"
	"os"
	"testing"

	"github.com/weftccl/weft/conformance"
	"github.com/weftccl/weft/hal"
	_ "github.com/weftccl/weft/hal/host"
	"github.com/weftccl/weft/hal/ucx"
	"github.com/weftccl/weft/internal/env"
)

// TestMain lets this test binary serve as the conformance runner's worker
// process (the port-mapped case across processes).
func TestMain(m *testing.M) {
	conformance.MaybeWorker(hal.Lookup)
	os.Exit(m.Run())
}

// The port-mapped conformance tests (`weft conformance --hal host --net
// ucx`) pass over hal/ucx between hal/host devices treated as different
// nodes, in one process and across processes, with 2 and 3 ranks.
func TestConformanceOverUCX(t *testing.T) {
	if a := ucx.Probe(); !a.Available {
		if env.Required("ucx") {
			t.Fatalf("WEFT_REQUIRE names ucx, but it is unavailable: %s", a.Reason)
		}
		t.Skipf("UCX unavailable (apt-get install libucx0): %s", a.Reason)
	}
	t.Parallel()
	for _, ranks := range []int{2, 3} {
		rep, err := conformance.Run(context.Background(), conformance.Options{Backend: "host", Net: ucx.Name, Ranks: ranks, Quick: true,
			Run: []string{"port-mapped/"}, Require: []string{ucx.Name}})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Platforms) != 1 {
			t.Fatalf("%d ranks: %d platforms", ranks, len(rep.Platforms))
		}
		p := rep.Platforms[0]
		if p.Network != ucx.Name || !p.Available || len(p.Results) == 0 {
			t.Fatalf("%d ranks: network %q (%s), available %v, %d results", ranks, p.Network, p.NetworkReason, p.Available, len(p.Results))
		}
		processes := false
		for _, r := range p.Results {
			if r.Status != conformance.Pass {
				t.Errorf("%d ranks: %s: %s: %s", ranks, r.ID, r.Status, r.Message)
			}
			processes = processes || r.ID == "port-mapped/put-signal-processes"
			t.Logf("%d ranks: %s: %.2f s", ranks, r.ID, r.Seconds)
		}
		if !processes {
			t.Errorf("%d ranks: the cross-process case did not run", ranks)
		}
	}
}
