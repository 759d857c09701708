package algorithms_test

import (
	"fmt"
	"testing"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal/plan"
)

// putPeers lists, in op order, the peer of every transfer of group g that
// writes exactly one remote buffer (a put to one peer; multi-destination
// transfers spread their stores over every peer at once).
func putPeers(p *plan.Plan, g int) []int {
	var peers []int
	for _, o := range p.Groups[g].Ops {
		if o.Kind != plan.OpTransfer {
			continue
		}
		remote := -1
		for _, d := range o.Dsts {
			if d.Chan >= 0 {
				if remote >= 0 {
					remote = -2
					break
				}
				remote = d.Chan
			}
		}
		if remote >= 0 {
			peers = append(peers, p.Channels[remote].Peer)
		}
	}
	return peers
}

// Windowed groups run their ops one after the other on all their blocks,
// so the order of a group's puts decides whose NVLink ingress the ranks
// load together. In the all-pairs plans that put one segment per peer
// (but AllReduceHB, which keeps ascending order: plans.go), the i-th put
// of each rank goes to a different peer (each rank's i-th put goes to
// rank+i+1): no GPU takes n−1 writers while another idles.
func TestPutsSpreadOverPeers(t *testing.T) {
	builders := map[string]func(algorithms.Config) (*plan.Plan, error){
		"AllToAllHB":      algorithms.AllToAllHB,
		"ReduceScatterHB": algorithms.ReduceScatterHB,
		"AllReduce2PALL": func(c algorithms.Config) (*plan.Plan, error) {
			return algorithms.AllReduce2PALL(c, c.WideLL, 1<<20)
		},
		"AllReduce2PAPush": func(c algorithms.Config) (*plan.Plan, error) {
			return algorithms.AllReduce2PAPush(c, algorithms.Shape{Blocks: 8, Threads: 256, Window: 1 << 20})
		},
	}
	for name, build := range builders {
		for n := 3; n <= 8; n++ {
			seqs := make([][]int, n)
			for r := 0; r < n; r++ {
				p, err := build(algorithms.DefaultConfig(r, n, 132, true))
				if err != nil {
					t.Fatalf("%s n%d rank %d: %v", name, n, r, err)
				}
				seqs[r] = putPeers(p, 0)
				if len(seqs[r]) != n-1 {
					t.Fatalf("%s n%d rank %d: %d single-peer puts in the first group %v, want %d", name, n, r, len(seqs[r]), seqs[r], n-1)
				}
			}
			for i := 0; i < n-1; i++ {
				into := make([]int, n)
				for r := 0; r < n; r++ {
					into[seqs[r][i]]++
				}
				for q, w := range into {
					if w != 1 {
						t.Errorf("%s n%d: put %d of every rank: rank %d receives %d of them (puts %v), want 1", name, n, i, q, w, seqs)
					}
				}
			}
		}
	}
}

// The split Reduce's first hop: every rank writes its chunks to their
// owners. At each step no owner takes more than two writers (ascending
// chunk order gave owner 0 every writer at the first step), and every
// rank still writes every chunk but its own exactly once.
func TestSplitReducePutsSpreadOverOwners(t *testing.T) {
	for n := algorithms.SplitMinRanks; n <= 8; n++ {
		for _, root := range []int{0, n / 2} {
			seqs := make([][]int, n)
			for r := 0; r < n; r++ {
				p, err := algorithms.ReduceSplitHB(algorithms.DefaultConfig(r, n, 132, true), root)
				if err != nil {
					t.Fatalf("n%d root %d rank %d: %v", n, root, r, err)
				}
				seqs[r] = putPeers(p, 0)
				want := n - 2 // the owners but itself
				if r == root {
					want = n - 1
				}
				seen := map[int]bool{}
				for _, q := range seqs[r] {
					if q == root || q == r || seen[q] {
						t.Fatalf("n%d root %d rank %d: puts to %v: want each owner but itself once", n, root, r, seqs[r])
					}
					seen[q] = true
				}
				if len(seqs[r]) != want {
					t.Fatalf("n%d root %d rank %d: %d puts %v, want %d", n, root, r, len(seqs[r]), seqs[r], want)
				}
			}
			for i := 0; i < n-1; i++ {
				into := map[int]int{}
				for r := 0; r < n; r++ {
					if i < len(seqs[r]) {
						into[seqs[r][i]]++
					}
				}
				for q, w := range into {
					if w > 2 {
						t.Errorf("n%d root %d: step %d: owner %d takes %d writers (puts %s)", n, root, i, q, w, fmt.Sprint(seqs))
					}
				}
			}
		}
	}
}
