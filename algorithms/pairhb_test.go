package algorithms_test

import (
	"strings"
	"testing"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal/plan"
)

// TestPairHBShape: past two ranks on GPUs the windowed plans with two
// groups per rank (AllGather, ReduceScatter, AllToAll) take PairHB's
// 64 × 512 threads, the three-group windowed AllReduce keeps HB's
// 32 × 1024; on two ranks, and on hal/host, every windowed plan keeps HB.
func TestPairHBShape(t *testing.T) {
	// The last all-pairs windowed plan (before the rings of AllReduce and
	// ReduceScatter from RingMinBytes).
	lastPlan := func(cfg algorithms.Config, coll algorithms.Collective) *plan.Plan {
		t.Helper()
		cs, err := algorithms.Plans(cfg, coll, 0)
		if err != nil {
			t.Fatalf("%v on %d ranks: %v", coll, cfg.NRanks, err)
		}
		if strings.Contains(cs[len(cs)-1].Plan.Name, "-ring-") {
			cs = cs[:len(cs)-1]
		}
		return cs[len(cs)-1].Plan
	}
	last := func(cfg algorithms.Config, coll algorithms.Collective) string { return lastPlan(cfg, coll).Name }
	for _, tc := range []struct {
		n    int
		gpu  bool
		pair string
	}{{4, true, "-hb-64x512-"}, {8, true, "-hb-64x512-"}, {2, true, "-hb-32x1024-"}, {4, false, "-hb-2x32-"}} {
		cfg := algorithms.DefaultConfig(0, tc.n, 132, tc.gpu)
		for _, coll := range []algorithms.Collective{algorithms.AllGather, algorithms.ReduceScatter, algorithms.AllToAll} {
			if got := last(cfg, coll); !strings.Contains(got, tc.pair) {
				t.Errorf("%d ranks (GPU %v), %v: windowed plan %s, want %s", tc.n, tc.gpu, coll, got, tc.pair)
			}
		}
		ar := "-hb-32x1024-"
		if !tc.gpu {
			ar = "-hb-2x32-"
		}
		if got := last(cfg, algorithms.AllReduce); !strings.Contains(got, ar) {
			t.Errorf("%d ranks (GPU %v), AllReduce: windowed plan %s, want %s", tc.n, tc.gpu, got, ar)
		}
		// From 4 ranks on GPUs AllToAll cuts a segment of a window or
		// more into plan.PipelineWindows windows; AllGather does not.
		want := 0
		if tc.gpu && tc.n >= 4 {
			want = plan.PipelineWindows
		}
		for _, g := range lastPlan(cfg, algorithms.AllToAll).Groups {
			if g.Pipeline != want {
				t.Errorf("%d ranks (GPU %v), AllToAll: group pipeline %d, want %d", tc.n, tc.gpu, g.Pipeline, want)
			}
		}
		for _, g := range lastPlan(cfg, algorithms.AllGather).Groups {
			if g.Pipeline != 0 {
				t.Errorf("%d ranks (GPU %v), AllGather: group pipeline %d, want 0", tc.n, tc.gpu, g.Pipeline)
			}
		}
	}
}
