package algorithms

import (
	"errors"
	"testing"

	"github.com/weftccl/weft/hal/plan"
)

// TestPortLLPlan: the LL port plans validate on every rank, agree across
// ranks on what channels.Setup compares, and have the shape portll.go
// describes: no flushes; one staged put per peer written to, into this
// rank's slot of the peer, from a staging slot no peer writes; every slot
// read once; releases and credits exactly where data moves one way.
// Without staged sends there is none.
func TestPortLLPlan(t *testing.T) {
	for _, coll := range Collectives[:SendRecv+1] {
		for _, n := range []int{2, 3, 5, 9} {
			nodes := make([]int, n)
			for r := range nodes {
				nodes[r] = r
			}
			roots := []int{0}
			if coll.Rooted() {
				roots = []int{0, n - 1}
			}
			for _, root := range roots {
				var first *plan.Plan
				for r := 0; r < n; r++ {
					c := DefaultConfig(r, n, 4, false)
					c.PortOnly, c.Nodes, c.HostWindows = true, nodes, true
					p, err := PortLLPlan(c, coll, root)
					if err != nil {
						t.Fatalf("%v %d ranks, rank %d: %v", coll, n, r, err)
					}
					if first == nil {
						first = p
					} else if p.Name != first.Name || p.ScratchSlots != first.ScratchSlots || p.Scratch != first.Scratch || p.MaxBytes != first.MaxBytes || p.Semaphores != first.Semaphores {
						t.Errorf("%v %d ranks: rank %d has %s (%d slots), rank 0 %s (%d)", coll, n, r, p.Name, p.ScratchSlots, first.Name, first.ScratchSlots)
					}
					m := n - 1
					if p.ScratchSlots != 2*m || !p.StageSends || p.Scratch != plan.LL16 || p.MaxBytes != PortLLMaxBytes {
						t.Errorf("%s: %d slots, staged %v, %v, bound %d", p.Name, p.ScratchSlots, p.StageSends, p.Scratch, p.MaxBytes)
					}
					puts, reads, releases, credits := map[int]int{}, map[int]int{}, map[int]int{}, map[int]int{}
					for _, g := range p.Groups {
						for _, o := range append(append([]plan.Op{}, g.Before...), g.Ops...) {
							switch {
							case o.Kind == plan.OpSignal && o.Ack:
								releases[o.Chan]++
							case o.Kind == plan.OpWait && o.Ack && o.Credits == portLLDepth:
								credits[o.Chan]++
							case o.Kind != plan.OpTransfer:
								t.Errorf("%s: %s: want transfers, releases and credits only", p.Name, p.OpString(o))
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
					}
					for ci := 0; ci < m; ci++ {
						peer := p.Channels[ci].Peer
						// What this rank sends to peer and receives from it.
						send, recv := true, true
						switch coll {
						case Broadcast:
							send, recv = r == root, peer == root
						case Reduce:
							send, recv = peer == root, r == root
						}
						want := func(b bool) int { return map[bool]int{true: 1}[b] }
						oneWay := coll == Broadcast || coll == Reduce || coll == SendRecv
						if puts[ci] != want(send) || reads[ci] != want(recv) || releases[ci] != want(recv && oneWay) || credits[ci] != want(send && oneWay) {
							t.Errorf("%s (root %d): channel %d (peer %d): %d puts, %d reads, %d releases, %d credits; want %d, %d, %d, %d",
								p.Name, root, ci, peer, puts[ci], reads[ci], releases[ci], credits[ci], want(send), want(recv), want(recv && oneWay), want(send && oneWay))
						}
					}
				}
			}
		}
	}
	c := DefaultConfig(0, 2, 4, false)
	c.PortOnly, c.Nodes = true, []int{0, 1}
	if _, err := PortLLPlan(c, AllGather, 0); !errors.Is(err, ErrNoPlan) {
		t.Errorf("without host windows: %v, want ErrNoPlan", err)
	}
	c.HostWindows = true
	if _, err := PortLLPlan(c, Broadcast, 2); err == nil {
		t.Error("Broadcast from rank 2 of 2: no error")
	}
	c.PortLLMaxBytes = 0
	if cs, err := Plans(c, AllGather, 0); err != nil || len(cs) != 1 {
		t.Errorf("PortLLMaxBytes 0: %d choices, %v; want the windowed port plan alone", len(cs), err)
	}
}
