//go:build cgo

package conformance_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/weftccl/weft/conformance"
	_ "github.com/weftccl/weft/hal/ib"
	"github.com/weftccl/weft/internal/ibverbs/ibvtest"
)

// The port-mapped tests pass over hal/ib between hal/host devices, on
// weft's in-memory verbs provider (one process: the cross-process test is
// left out, the provider's queue pairs do not cross processes).
func TestNetIBFake(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	lib := ibvtest.Build(t)
	root := t.TempDir()
	target := filepath.Join(root, "devices", "virtual", "infiniband", "fakeib0")
	if err := os.MkdirAll(filepath.Join(target, "ports", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "class", "infiniband"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(root, "class", "infiniband", "fakeib0")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WEFT_IBVERBS_LIB", lib)
	t.Setenv("WEFT_SYSFS_ROOT", root)
	t.Setenv("FAKEVERBS_DEVICES", "fakeib0")
	t.Setenv("WEFT_IB_HCA", "")
	for _, ranks := range []int{2, 3} {
		rep, err := conformance.Run(context.Background(), conformance.Options{Backend: "host", Net: "ib", Ranks: ranks, Quick: true,
			Run: []string{"port-mapped/"}, Skip: []string{"port-mapped/put-signal-processes"}, Require: []string{"ib"}})
		if err != nil {
			t.Fatal(err)
		}
		p := rep.Platforms[0]
		if p.Network != "ib" || len(p.Results) == 0 {
			t.Fatalf("%d ranks: network %q (%s), %d results", ranks, p.Network, p.NetworkReason, len(p.Results))
		}
		for _, r := range p.Results {
			if r.Status != conformance.Pass {
				t.Errorf("%d ranks: %s: %s: %s", ranks, r.ID, r.Status, r.Message)
			}
		}
	}
}
