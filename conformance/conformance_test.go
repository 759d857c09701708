package conformance_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft/conformance"
	"github.com/weftccl/weft/conformance/internal/mutant"
	"github.com/weftccl/weft/hal"
	_ "github.com/weftccl/weft/hal/host"
)

// TestMain lets the test binary serve as the suite's worker process, for
// the registered backends and for the mutants.
func TestMain(m *testing.M) {
	conformance.MaybeWorker(resolve)
	os.Exit(m.Run())
}

func resolve(name string) (hal.Backend, error) {
	if b, ok := mutant.Lookup(name); ok {
		return b, nil
	}
	return hal.Lookup(name)
}

func summary(rep *conformance.Report) string {
	var b strings.Builder
	for _, p := range rep.Platforms {
		for _, r := range p.Results {
			b.WriteString(p.Backend + " " + r.ID + ": " + string(r.Status))
			if r.Message != "" {
				b.WriteString(": " + r.Message)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// TestHost runs the suite on the unmodified reference backend: nothing may
// fail.
func TestHost(t *testing.T) {
	start := time.Now()
	rep, err := conformance.Run(context.Background(), conformance.Options{Backend: "host", Ranks: 3, Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s(%v)", summary(rep), time.Since(start))
	if rep.Failed() {
		t.Errorf("the suite reports failures on hal/host:\n%s", summary(rep))
	}
}

// catches lists, for every mutant, the tests that must fail on it: the
// ones written to catch the guarantee it breaks.
var catches = map[mutant.Kind][]string{
	mutant.SignalOvertakesData: {"memory-mapped/put-signal-wait", "memory-mapped/flush", "memory-mapped/many-channels", "memory-mapped/put-signal-wait-processes"},
	mutant.FlushEarly:          {"memory-mapped/flush"},
	mutant.TornPackets:         {"memory-mapped/ll16", "memory-mapped/ll8"},
	mutant.LostSignal:          {"memory-mapped/put-signal-wait", "memory-mapped/relaxed", "memory-mapped/get"},
	mutant.StaleRead:           {"memory-mapped/put-signal-wait", "memory-mapped/get", "memory-mapped/many-channels"},
	mutant.WrongExport:         {"memory-mapped/export-import", "memory-mapped/export-import-processes", "memory-mapped/put-signal-wait"},
}

// TestMutants runs the suite on every mutant: each must be reported Fail,
// by the tests written to catch it.
func TestMutants(t *testing.T) {
	for _, k := range mutant.Kinds {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			b := mutant.Backend(k)
			start := time.Now()
			rep, err := conformance.Run(context.Background(), conformance.Options{Backends: []hal.Backend{b}, Ranks: 2, Quick: true,
				Timeout: 2 * time.Second, Skip: []string{"memory-mapped/put-bandwidth", "memory-mapped/signal-latency"}})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s(%v)", summary(rep), time.Since(start))
			if !rep.Failed() {
				t.Fatalf("the suite passes mutant %s", k)
			}
			for _, id := range catches[k] {
				r, ok := rep.Result(b.Name(), id)
				if !ok || r.Status != conformance.Fail {
					t.Errorf("%s on mutant %s: %s %s, want fail", id, k, r.Status, r.Message)
				}
			}
			// The mutant's wrappers themselves keep the contract: what
			// fails is the broken guarantee, not the plumbing.
			for _, r := range rep.Platforms[0].Results {
				if strings.HasPrefix(r.ID, "device/") && r.Status != conformance.Pass {
					t.Errorf("%s on mutant %s: %s %s, want pass", r.ID, k, r.Status, r.Message)
				}
			}
		})
	}
}
