package nvswitch

import (
	"context"
	"strings"
	"testing"

	"github.com/weftccl/weft/conformance"
)

// TestConformanceDisabled: `weft conformance --hal nvswitch` with WEFT_NVLS
// unset reports the platform unavailable with the probe's reason and every
// test NotSupported with that reason, and the run does not fail.
func TestConformanceDisabled(t *testing.T) {
	t.Setenv("WEFT_NVLS", "")
	rep, err := conformance.Run(context.Background(), conformance.Options{Backend: Name, Require: []string{}, NoProcesses: true, Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Platforms) != 1 {
		t.Fatalf("%d platforms, want 1", len(rep.Platforms))
	}
	p := rep.Platforms[0]
	if p.Backend != Name || p.Available || p.Reason != DisabledReason {
		t.Errorf("platform %s: available %v, reason %q; want unavailable with %q", p.Backend, p.Available, p.Reason, DisabledReason)
	}
	if len(p.Results) == 0 {
		t.Fatal("no results")
	}
	for _, r := range p.Results {
		if r.Status != conformance.NotSupported || !strings.Contains(r.Message, DisabledReason) {
			t.Errorf("%s: %s %q, want not-supported with the probe's reason", r.ID, r.Status, r.Message)
		}
	}
	if rep.Failed() {
		t.Error("the report counts as failed")
	}

	// Required by WEFT_REQUIRE, the same run fails: a required backend
	// must not pass by being unavailable.
	rep, err = conformance.Run(context.Background(), conformance.Options{Backend: Name, Require: []string{Name}, NoProcesses: true, Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Failed() {
		t.Error("a required, unavailable nvswitch did not fail the run")
	}
}
