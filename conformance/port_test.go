package conformance_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft/conformance"
	"github.com/weftccl/weft/conformance/internal/mutant"
	"github.com/weftccl/weft/hal"
)

// portCatches lists, for every port-mapped mutant, the tests that must fail
// on it.
var portCatches = map[mutant.Kind][]string{
	mutant.PortSignalOvertakesPut: {"port-mapped/put-signal", "port-mapped/put-signal-processes", "port-mapped/many-requests",
		"port-mapped/engine-copy", "port-mapped/release", "port-mapped/channel-put-signal-wait", "port-mapped/channel-fifo-full"},
	mutant.PortFlushEarly: {"port-mapped/flush", "port-mapped/channel-put-signal-wait"},
	mutant.PortLostPut: {"port-mapped/put-signal", "port-mapped/flush", "port-mapped/many-requests", "port-mapped/release",
		"port-mapped/channel-put-signal-wait", "port-mapped/channel-fifo-full"},
	mutant.PortStalledEngine: {"port-mapped/put-signal", "port-mapped/put-signal-processes", "port-mapped/flush",
		"port-mapped/many-requests", "port-mapped/engine-copy", "port-mapped/release", "port-mapped/channel-put-signal-wait",
		"port-mapped/channel-fifo-full", "port-mapped/channel-deadline"},
}

// namesRank matches a deadline error that says which rank waited.
var namesRank = regexp.MustCompile(`rank \d+: .*timed out`)

// TestPortMutants runs, on every port-mapped mutant, the device section and
// the tests written to catch it (the rest of the port-mapped section passes
// on these mutants or fails only slowly): each of those must be reported
// Fail, and a stalled engine must end every one of them with a deadline
// error naming the rank that waited.
func TestPortMutants(t *testing.T) {
	for _, k := range mutant.PortKinds {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			b := mutant.Backend(k)
			start := time.Now()
			// A short wait deadline: the stalled engine makes every port test
			// wait for it. The others need one longer than mutant.Delay.
			timeout := time.Second
			if k == mutant.PortStalledEngine {
				timeout = 500 * time.Millisecond
			}
			rep, err := conformance.Run(context.Background(), conformance.Options{Backends: []hal.Backend{b}, Ranks: 2, Quick: true,
				Timeout: timeout, Run: append([]string{"device/"}, portCatches[k]...)})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s(%v)", summary(rep), time.Since(start))
			if !rep.Failed() {
				t.Fatalf("the suite passes mutant %s", k)
			}
			for _, id := range portCatches[k] {
				r, ok := rep.Result(b.Name(), id)
				if !ok || r.Status != conformance.Fail {
					t.Errorf("%s on mutant %s: %s %s, want fail", id, k, r.Status, r.Message)
					continue
				}
				if k == mutant.PortStalledEngine && !namesRank.MatchString(r.Message) {
					t.Errorf("%s on mutant %s: %q is not a deadline error naming the rank", id, k, r.Message)
				}
			}
			for _, r := range rep.Platforms[0].Results {
				if strings.HasPrefix(r.ID, "device/") && r.Status != conformance.Pass {
					t.Errorf("%s on mutant %s: %s %s, want pass", r.ID, k, r.Status, r.Message)
				}
			}
		})
	}
}
