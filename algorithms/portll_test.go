package algorithms

import (
	"errors"
	"testing"

	"github.com/weftccl/weft/hal/plan"
)

// TestPortLLPlan: the LL port plans validate on every rank, agree across
// ranks on what channels.Setup compares, and have the shape portll.go
// describes: no semaphores, signals or flushes; one staged put per peer
// into this rank's slot of the peer, from a staging slot no peer writes;
// every receive slot read once. Without staged sends there is none.
func TestPortLLPlan(t *testing.T) {
	for _, coll := range []Collective{AllGather, AllToAll, ReduceScatter, AllReduce} {
		for _, n := range []int{2, 3, 5, 9} {
			nodes := make([]int, n)
			for r := range nodes {
				nodes[r] = r
			}
			var first *plan.Plan
			for r := 0; r < n; r++ {
				c := DefaultConfig(r, n, 4, false)
				c.PortOnly, c.Nodes, c.HostWindows = true, nodes, true
				p, err := PortLLPlan(c, coll)
				if err != nil {
					t.Fatalf("%v %d ranks, rank %d: %v", coll, n, r, err)
				}
				if first == nil {
					first = p
				} else if p.Name != first.Name || p.ScratchSlots != first.ScratchSlots || p.Scratch != first.Scratch || p.MaxBytes != first.MaxBytes {
					t.Errorf("%v %d ranks: rank %d has %s (%d slots), rank 0 %s (%d)", coll, n, r, p.Name, p.ScratchSlots, first.Name, first.ScratchSlots)
				}
				m := n - 1
				if p.Semaphores != 0 || p.ScratchSlots != 2*m || !p.StageSends || p.Scratch != plan.LL16 || p.MaxBytes != PortLLMaxBytes {
					t.Errorf("%s: %d semaphores, %d slots, staged %v, %v, bound %d", p.Name, p.Semaphores, p.ScratchSlots, p.StageSends, p.Scratch, p.MaxBytes)
				}
				puts := map[int]int{}
				reads := map[int]int{}
				for _, o := range p.Groups[0].Ops {
					switch {
					case o.Kind != plan.OpTransfer:
						t.Errorf("%s: %s: want transfers only", p.Name, p.OpString(o))
					case o.Port:
						d := o.Dsts[0]
						if d.Chan != o.Chan || d.Slot != slotOf(r, p.Channels[o.Chan].Peer) || o.Stage != 1+m+o.Chan {
							t.Errorf("%s: %s: stage %d, want the put of channel %d from slot %d into this rank's slot", p.Name, p.OpString(o), o.Stage, o.Chan, m+o.Chan)
						}
						puts[o.Chan]++
					default:
						for _, s := range o.Srcs {
							if s.Buf == plan.Scratch {
								reads[s.Slot]++
							}
						}
					}
				}
				for ci := 0; ci < m; ci++ {
					if puts[ci] != 1 || reads[ci] != 1 {
						t.Errorf("%s: channel %d: %d puts, slot read %d times; want 1 and 1", p.Name, ci, puts[ci], reads[ci])
					}
				}
			}
		}
	}
	c := DefaultConfig(0, 2, 4, false)
	c.PortOnly, c.Nodes = true, []int{0, 1}
	if _, err := PortLLPlan(c, AllGather); !errors.Is(err, ErrNoPlan) {
		t.Errorf("without host windows: %v, want ErrNoPlan", err)
	}
	c.HostWindows = true
	if _, err := PortLLPlan(c, Broadcast); !errors.Is(err, ErrNoPlan) {
		t.Errorf("Broadcast: %v, want ErrNoPlan", err)
	}
	c.PortLLMaxBytes = 0
	if cs, err := Plans(c, AllGather, 0); err != nil || len(cs) != 1 {
		t.Errorf("PortLLMaxBytes 0: %d choices, %v; want the windowed port plan alone", len(cs), err)
	}
}
