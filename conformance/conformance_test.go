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
