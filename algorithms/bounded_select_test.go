package algorithms_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal/plan"
)

// planFamily names the family of a plan by its name.
func planFamily(name string) string {
	for _, f := range []string{"-2ph-", "-port-", "-tree", "-bruck", "-ring", "-chain"} {
		if strings.Contains(name, f) {
			if f == "-chain" {
				return "ring" // Broadcast and Reduce: the ring family's chains
			}
			return strings.Trim(f, "-")
		}
	}
	return "all-pairs"
}

// Selection by rank count (issue 21 item 2): all-pairs up to 8 ranks on
// one node (AllReduce and ReduceScatter from 4 ranks with the windowed
// ring from Config.RingMinBytes), the plans with bounded peers beyond (for every rank of 9, 12,
// 16, 33, 64 and 300 ranks: tree and Bruck first, rings for the largest
// messages, rings for AllGather and ReduceScatter past Bruck's 256 ranks),
// AllToAll and point-to-point all-pairs up to 17 ranks; each plan with at
// most plan.MaxPeers channels.
func TestPlansSelectByRankCount(t *testing.T) {
	for _, n := range []int{2, 8, 9, 12, 16, 17, 33, 64, 300} {
		for _, r := range []int{0, n / 2, n - 1} {
			c := algorithms.DefaultConfig(r, n, 132, true)
			for _, coll := range algorithms.Collectives {
				cs, err := algorithms.Plans(c, coll, n-1)
				peerPlans := coll == algorithms.AllToAll || coll == algorithms.SendRecv
				if peerPlans && n > algorithms.PeerPlansMaxRanks {
					if !errors.Is(err, algorithms.ErrTooManyRanks) {
						t.Errorf("n=%d %v: error %v, want ErrTooManyRanks", n, coll, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("n=%d rank %d %v: %v", n, r, coll, err)
				}
				small, large := planFamily(cs[0].Plan.Name), planFamily(cs[len(cs)-1].Plan.Name)
				want := [2]string{"all-pairs", "all-pairs"}
				ring := n >= 4 && n <= algorithms.AllPairsMaxRanks && (coll == algorithms.AllReduce || coll == algorithms.ReduceScatter)
				if ring {
					want[1] = "ring" // from Config.RingMinBytes
				}
				if n > algorithms.AllPairsMaxRanks && !peerPlans {
					switch coll {
					case algorithms.AllReduce:
						want = [2]string{"tree", "ring"}
					case algorithms.AllGather, algorithms.ReduceScatter:
						want = [2]string{"bruck", "ring"}
						if n > 256 {
							want[0] = "ring"
						}
					default:
						want = [2]string{"ring", "ring"}
					}
				}
				if [2]string{small, large} != want {
					t.Errorf("n=%d %v: %s … %s, want %s … %s plans", n, coll, cs[0].Plan.Name, cs[len(cs)-1].Plan.Name, want[0], want[1])
				}
				for _, ch := range cs {
					if len(ch.Plan.Channels) > plan.MaxPeers {
						t.Errorf("n=%d %v: %s has %d channels", n, coll, ch.Plan.Name, len(ch.Plan.Channels))
					}
					split := coll == algorithms.Reduce && strings.Contains(ch.Plan.Name, "-split-") // the root adds its input last
					if want := coll.Reduces() && (want[0] != "all-pairs" || ring && planFamily(ch.Plan.Name) == "ring" || split); ch.Staged != want {
						t.Errorf("n=%d %v: %s staged %v, want %v", n, coll, ch.Plan.Name, ch.Staged, want)
					}
				}
			}
		}
	}
}

// WEFT_ALGO's bounded families force their plans at any rank count, even
// where all-pairs would serve; a collective without a plan of the family
// keeps its own; "bruck" past 256 ranks takes the ring.
func TestPlansForcedBoundedFamily(t *testing.T) {
	for _, tc := range []struct {
		algo string
		n    int
		coll algorithms.Collective
		want string
	}{
		{"ring", 4, algorithms.AllReduce, "ring"},
		{"ring", 12, algorithms.AllGather, "ring"},
		{"ring", 3, algorithms.Broadcast, "ring"},
		{"tree", 4, algorithms.AllReduce, "tree"},
		{"tree", 4, algorithms.AllGather, "all-pairs"},
		{"tree", 12, algorithms.AllGather, "bruck"}, // then ring for large segments
		{"bruck", 5, algorithms.ReduceScatter, "bruck"},
		{"bruck", 300, algorithms.AllGather, "ring"},
		{"bruck", 4, algorithms.AllToAll, "all-pairs"},
	} {
		c := algorithms.DefaultConfig(0, tc.n, 8, false)
		c.Algo = tc.algo
		cs, err := algorithms.Plans(c, tc.coll, 0)
		if err != nil {
			t.Fatalf("%s n=%d %v: %v", tc.algo, tc.n, tc.coll, err)
		}
		for i, ch := range cs {
			if got := planFamily(ch.Plan.Name); got != tc.want && !(tc.algo == "tree" && i > 0) {
				t.Errorf("WEFT_ALGO=%s n=%d %v: %s, want a %s plan", tc.algo, tc.n, tc.coll, ch.Plan.Name, tc.want)
			}
		}
	}
}

// Across nodes (port-mapped links): 16 ranks on 4 nodes take the
// hierarchical plans (AllReduce, AllGather, ReduceScatter, Broadcast) and the flat
// port-channel plans, which reduce in a chain past 8 ranks (Staged);
// 12 ranks per node on 2 nodes exceed the hierarchical plans' operands
// and take the flat plans; 32 ranks on 4 nodes have no flat plan, the
// hierarchical ones serve alone, and the others are ErrTooManyRanks.
func TestPlansAcrossNodesAtScale(t *testing.T) {
	for _, shape := range []struct{ nodes, per int }{{4, 4}, {2, 8}, {2, 12}, {4, 8}} {
		n := shape.nodes * shape.per
		for _, r := range []int{0, n - 1} {
			c := algorithms.DefaultConfig(r, n, 8, false)
			c.PortOnly = true
			for i := 0; i < n; i++ {
				c.Nodes = append(c.Nodes, i/shape.per)
			}
			for _, coll := range algorithms.Collectives {
				name := fmt.Sprintf("%dx%d rank %d %v", shape.nodes, shape.per, r, coll)
				cs, err := algorithms.Plans(c, coll, 0)
				hier := (coll == algorithms.AllReduce || coll == algorithms.AllGather || coll == algorithms.ReduceScatter || coll == algorithms.Broadcast) && shape.per <= plan.MaxOperands
				if n > algorithms.PeerPlansMaxRanks && !hier {
					if !errors.Is(err, algorithms.ErrTooManyRanks) {
						t.Errorf("%s: error %v, want ErrTooManyRanks", name, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				first := cs[0]
				if coll == algorithms.Broadcast && n <= algorithms.PeerPlansMaxRanks {
					// The flat plan below HierBroadcastMinBytes.
					first = cs[algorithms.SelectFor(cs, algorithms.HierBroadcastMinBytes, plan.Float32, plan.Sum)]
					if below := cs[algorithms.SelectFor(cs, algorithms.HierBroadcastMinBytes-1, plan.Float32, plan.Sum)]; hier && planFamily(below.Plan.Name) != "port" {
						t.Errorf("%s: %s below HierBroadcastMinBytes, want the flat port plan", name, below.Plan.Name)
					}
				}
				if got := planFamily(first.Plan.Name); hier != (got == "2ph") {
					t.Errorf("%s: first plan %s (hierarchical expected: %v)", name, first.Plan.Name, hier)
				}
				last := cs[len(cs)-1]
				if n <= algorithms.PeerPlansMaxRanks && planFamily(last.Plan.Name) != "port" {
					t.Errorf("%s: last plan %s, want the flat port-channel plan", name, last.Plan.Name)
				}
				if coll.Reduces() && n > algorithms.AllPairsMaxRanks && !last.Staged {
					t.Errorf("%s: %s combines %d ranks in a chain but is not Staged", name, last.Plan.Name, n)
				}
			}
		}
	}
}

// TestFloatAvgSelectsBySize: a floating Avg takes the plan that Sum takes
// at every size (Choice.Runs: a staged plan runs it as PreMulSum with
// 1/n), so it never falls back to a slower plan or to one whose bound the
// message exceeds; an integer Avg does the same wherever the plan divides
// at its end (Plan.PostDiv) and otherwise takes a plan that holds the
// message. GPU and hal/host configurations, 2 to 12 ranks, AllReduce,
// ReduceScatter and Reduce, 8 B to 1 GiB.
func TestFloatAvgSelectsBySize(t *testing.T) {
	for _, gpu := range []bool{true, false} {
		for _, n := range []int{2, 3, 4, 8, 12} {
			sms := 132
			if !gpu {
				sms = 2
			}
			c := algorithms.DefaultConfig(0, n, sms, gpu).WithLL128(gpu)
			for _, coll := range []algorithms.Collective{algorithms.AllReduce, algorithms.ReduceScatter, algorithms.Reduce} {
				cs, err := algorithms.Plans(c, coll, n-1)
				if err != nil {
					t.Fatalf("gpu=%v n=%d %v: %v", gpu, n, coll, err)
				}
				for bytes := int64(8); bytes <= 1<<30; bytes *= 4 {
					sum := algorithms.SelectFor(cs, bytes, plan.Float32, plan.Sum)
					if avg := algorithms.SelectFor(cs, bytes, plan.Float32, plan.Avg); avg != sum {
						t.Errorf("gpu=%v n=%d %v %d bytes: float Avg selects %s, Sum %s", gpu, n, coll, bytes, cs[avg].Plan.Name, cs[sum].Plan.Name)
					}
					i := algorithms.SelectFor(cs, bytes, plan.Int32, plan.Avg)
					if ch := cs[i]; !ch.Serves(plan.Int32, plan.Avg) || ch.MaxBytes > 0 && bytes > ch.MaxBytes {
						t.Errorf("gpu=%v n=%d %v %d bytes: int32 Avg selects %s (bound %d), which cannot run it", gpu, n, coll, bytes, ch.Plan.Name, ch.MaxBytes)
					} else if cs[sum].Plan.PostDiv && i != sum {
						t.Errorf("gpu=%v n=%d %v %d bytes: int32 Avg selects %s, Sum %s, which divides at its end", gpu, n, coll, bytes, ch.Plan.Name, cs[sum].Plan.Name)
					}
				}
			}
		}
	}
}
