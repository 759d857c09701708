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

// The split plans' first hop: every rank writes its chunks to their
// owners. The Reduce plans run their puts in turn in one group (LL and
// windowed): no owner takes more than two writers at any step (ascending
// chunk order gave owner 0 every writer at the first step). The windowed
// Broadcast's root has a group per owner on 3 and 4 ranks, so its puts
// run at once, on no more blocks than RootedHB's. Every rank writes every
// chunk but its own exactly once, except the Reduce's root, which writes
// none.
func TestSplitPutsSpreadOverOwners(t *testing.T) {
	for n := algorithms.SplitMinRanks; n <= 8; n++ {
		for _, root := range []int{0, n / 2} {
			for _, b := range []struct {
				name  string
				build func(algorithms.Config, int) (*plan.Plan, error)
			}{{"LL", algorithms.ReduceSplitLL}, {"windowed", algorithms.ReduceSplitHB}} {
				seqs := make([][]int, n)
				for r := 0; r < n; r++ {
					p, err := b.build(algorithms.DefaultConfig(r, n, 132, true).WithLL128(true), root)
					if err != nil {
						t.Fatalf("%s n%d root %d rank %d: %v", b.name, n, root, r, err)
					}
					seqs[r] = putPeers(p, 0)
					if r == root { // the root keeps its input: it writes to no owner
						if len(seqs[r]) != 0 {
							t.Errorf("%s Reduce n%d root %d: the root puts to %v, want none", b.name, n, root, seqs[r])
						}
						continue
					}
					if b.name == "LL" { // an owner's sum goes to the root last
						seqs[r] = seqs[r][:len(seqs[r])-1]
					}
					checkOwners(t, fmt.Sprintf("%s Reduce n%d root %d rank %d", b.name, n, root, r), seqs[r], n, root, r)
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
							t.Errorf("%s Reduce n%d root %d: step %d: owner %d takes %d writers (puts %v)", b.name, n, root, i, q, w, seqs)
						}
					}
				}
			}
			if n > 4 { // past 4 ranks the root keeps one group (splitPerOwnerMaxRanks)
				continue
			}
			p, err := algorithms.BroadcastSplitHB(algorithms.DefaultConfig(root, n, 132, true), root)
			if err != nil {
				t.Fatalf("Broadcast n%d root %d: %v", n, root, err)
			}
			var puts []int
			for g := range p.Groups {
				ps := putPeers(p, g)
				if len(ps) != 1 {
					t.Errorf("Broadcast n%d root %d: group %d puts to %v: want one owner per group", n, root, g, ps)
				}
				puts = append(puts, ps...)
			}
			checkOwners(t, fmt.Sprintf("Broadcast n%d root %d", n, root), puts, n, root, root)
			if blocks := p.Blocks(); blocks > 128 {
				t.Errorf("Broadcast n%d root %d: %d blocks: want no more than RootedHB's 128", n, root, blocks)
			}
		}
	}
}

// checkOwners fails unless puts names every owner but rank (and the root)
// exactly once.
func checkOwners(t *testing.T, where string, puts []int, n, root, rank int) {
	t.Helper()
	want := n - 2
	if rank == root {
		want = n - 1
	}
	seen := map[int]bool{}
	for _, q := range puts {
		if q == root || q == rank || seen[q] {
			t.Fatalf("%s: puts to %v: want each owner but itself once", where, puts)
		}
		seen[q] = true
	}
	if len(puts) != want {
		t.Fatalf("%s: %d puts %v, want %d", where, len(puts), puts, want)
	}
}
