package algorithms_test

import (
	"slices"
	"testing"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal/plan"
)

// TestP2PWindowsPairUp checks the peer windows for 1–300 ranks: every
// peer of a rank is in exactly one of its windows, at most plan.MaxPeers
// a window; p is in r's window j exactly when r is in p's window j, and
// Slots give r's place there; one window serves the copies to itself;
// Width bounds every rank's window; one window of every peer in rank
// order (the all-pairs layout) up to PeerPlansMaxRanks ranks.
func TestP2PWindowsPairUp(t *testing.T) {
	for n := 1; n <= 300; n++ {
		all := make([][]algorithms.PeerWindow, n)
		for r := range n {
			w, err := algorithms.P2PWindows(r, n)
			if err != nil {
				t.Fatalf("%d ranks, rank %d: %v", n, r, err)
			}
			all[r] = w
		}
		nw := len(all[0])
		if want := max(1, (n+plan.MaxPeers-1)/plan.MaxPeers); n <= algorithms.PeerPlansMaxRanks && nw != 1 || n > algorithms.PeerPlansMaxRanks && nw != want {
			t.Fatalf("%d ranks: %d windows", n, nw)
		}
		for r := range n {
			if len(all[r]) != nw {
				t.Fatalf("%d ranks: rank %d has %d windows, rank 0 %d", n, r, len(all[r]), nw)
			}
			seen := map[int]bool{}
			selfs := 0
			for j, w := range all[r] {
				if w.Index != j || len(w.Peers) > plan.MaxPeers || len(w.Peers) > w.Width || len(w.Slots) != len(w.Peers) || !slices.IsSorted(w.Peers) {
					t.Fatalf("%d ranks, rank %d, window %d: %+v", n, r, j, w)
				}
				if w.Width != all[0][j].Width {
					t.Fatalf("%d ranks, window %d: width %d on rank %d, %d on rank 0", n, j, w.Width, r, all[0][j].Width)
				}
				if w.Self {
					selfs++
				}
				for i, p := range w.Peers {
					if p == r || seen[p] {
						t.Fatalf("%d ranks, rank %d: peer %d twice or itself", n, r, p)
					}
					seen[p] = true
					back := all[p][j]
					at := slices.Index(back.Peers, r)
					if at < 0 || w.Slots[i] != at || back.SendArg(r) != 2*at+1 || back.RecvArg(r) != 2*at+2 {
						t.Fatalf("%d ranks, window %d: rank %d has peer %d at slot %d, but rank %d's window has rank %d at %d", n, j, r, p, w.Slots[i], p, r, at)
					}
					if n <= algorithms.PeerPlansMaxRanks && (p != w.Peers[i] || w.SendArg(p) != algorithms.SendArg(r, p) || w.SelfArg() != algorithms.SelfArg(n)) {
						t.Fatalf("%d ranks, rank %d: one window must be the all-pairs layout", n, r)
					}
				}
			}
			if len(seen) != n-1 || selfs != 1 {
				t.Fatalf("%d ranks, rank %d: %d peers over the windows, %d self windows", n, r, len(seen), selfs)
			}
		}
	}
}

// TestP2PWindowPlans builds the point-to-point plans of every window of
// every rank for 18, 33 and 64 ranks (memory channels) and checks that
// they connect: a transfer of rank r into the scratch of channel i's peer
// p writes the slot at which p's plan of the same window reads from r,
// every rank's plans of a window have the same name, scratch slots and
// semaphores (channels.Setup checks that they agree), and the groups'
// argument slots are those of PeerWindow.
func TestP2PWindowPlans(t *testing.T) {
	for _, n := range []int{18, 33, 64} {
		plans := make([][][]algorithms.Choice, n) // rank, window, choices
		wins := make([][]algorithms.PeerWindow, n)
		for r := range n {
			c := algorithms.DefaultConfig(r, n, 132, true)
			ws, err := algorithms.P2PWindows(r, n)
			if err != nil {
				t.Fatal(err)
			}
			wins[r] = ws
			for _, w := range ws {
				ch, err := algorithms.P2PWindowPlans(c, w)
				if err != nil {
					t.Fatalf("%d ranks, rank %d, window %d: %v", n, r, w.Index, err)
				}
				plans[r] = append(plans[r], ch)
			}
		}
		for r := range n {
			for j, w := range wins[r] {
				for k, ch := range plans[r][j] {
					p := ch.Plan
					ref := plans[0][j][k].Plan
					if p.Rank != r || p.NRanks != n || p.Name != ref.Name || p.ScratchSlots != ref.ScratchSlots || p.Semaphores != ref.Semaphores {
						t.Fatalf("%d ranks, rank %d, window %d: plan %s (rank %d of %d, %d slots, %d semaphores) against rank 0's %s (%d, %d)",
							n, r, j, p.Name, p.Rank, p.NRanks, p.ScratchSlots, p.Semaphores, ref.Name, ref.ScratchSlots, ref.Semaphores)
					}
					if len(p.Channels) != len(w.Peers) {
						t.Fatalf("%d ranks, rank %d, window %d: %d channels for %d peers", n, r, j, len(p.Channels), len(w.Peers))
					}
					for gi, g := range p.Groups {
						for _, op := range append(append([]plan.Op{}, g.Ops...), g.After...) {
							for _, d := range op.Dsts {
								if d.Buf != plan.Scratch || d.Chan < 0 {
									continue
								}
								peer := p.Channels[d.Chan].Peer
								if at := slices.Index(wins[peer][j].Peers, r); d.Slot != at {
									t.Fatalf("%d ranks, rank %d, window %d, group %d: writes slot %d of rank %d, which reads rank %d from slot %d", n, r, j, gi, d.Slot, peer, r, at)
								}
							}
						}
						if g.Arg > w.SelfArg() || g.Arg < 1 {
							t.Fatalf("%d ranks, rank %d, window %d: group %d has argument slot %d, window has %d", n, r, j, gi, g.Arg, w.SelfArg())
						}
					}
				}
			}
		}
	}
}

// Under a block budget (Config.Budget), past 65 ranks the two sides of a
// window have different peer counts; every send group of rank r to peer p
// still holds as many blocks as p's receive group from r in the same
// window and plan, and a launch of a window's plan stays within Max
// blocks where Max allows one block per group. 71 ranks: blocks of 14
// and 15 ranks, so a window between them has 15 peers on one side and 14
// on the other; plans only.
func TestP2PWindowPlansBudgetPairs(t *testing.T) {
	const n = 71
	for _, budget := range []algorithms.BlockBudget{{Max: 120, Min: 60, SMs: 132}, {Min: 40, SMs: 132}, {Max: 5}} {
		plans := make([][][]algorithms.Choice, n)
		wins := make([][]algorithms.PeerWindow, n)
		for r := range n {
			c := algorithms.DefaultConfig(r, n, 132, true)
			c.Budget = budget
			ws, err := algorithms.P2PWindows(r, n)
			if err != nil {
				t.Fatal(err)
			}
			wins[r] = ws
			for _, w := range ws {
				ch, err := algorithms.P2PWindowPlans(c, w)
				if err != nil {
					t.Fatalf("budget %v, rank %d, window %d: %v", budget, r, w.Index, err)
				}
				plans[r] = append(plans[r], ch)
			}
		}
		groupBlocks := func(p *plan.Plan, arg int) int {
			for _, g := range p.Groups {
				if g.Arg == arg {
					return g.Blocks
				}
			}
			return -1
		}
		pairs := 0
		for r := range n {
			for j, w := range wins[r] {
				for k, ch := range plans[r][j] {
					if budget.Max >= 2*w.Width+1 && ch.Plan.Blocks() > budget.Max {
						t.Errorf("budget %v: %s on rank %d holds %d blocks", budget, ch.Plan.Name, r, ch.Plan.Blocks())
					}
					for _, p := range w.Peers {
						send := groupBlocks(ch.Plan, w.SendArg(p))
						recv := groupBlocks(plans[p][j][k].Plan, wins[p][j].RecvArg(r))
						if send < 1 || send != recv {
							t.Fatalf("budget %v, window %d, %s: rank %d sends to %d with %d blocks, rank %d receives with %d",
								budget, j, ch.Plan.Name, r, p, send, p, recv)
						}
						pairs++
					}
				}
			}
		}
		if pairs == 0 {
			t.Fatalf("budget %v: no send/receive pair checked", budget)
		}
	}
}

// TestP2PWindowPlansStaged: across nodes where the network writes host
// windows, every point-to-point window plan — a window of peers on other
// nodes, or of this rank's own node only — carries every channel over the
// network and stages its sends into slots behind the window's receive
// slots, so no copy engine of the device moves a byte a kernel waits for
// (docs/network.md, "Streams and the network path"); without host windows
// nothing is staged.
func TestP2PWindowPlansStaged(t *testing.T) {
	const n, perNode = 24, 6
	nodes := make([]int, n)
	for r := range nodes {
		nodes[r] = r / perNode
	}
	for _, host := range []bool{true, false} {
		for _, rank := range []int{0, 7, 23} {
			c := algorithms.DefaultConfig(rank, n, 132, true)
			c.PortOnly, c.Nodes, c.HostWindows = true, nodes, host
			wins, err := algorithms.P2PWindows(rank, n)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range wins {
				choices, err := algorithms.P2PWindowPlans(c, w)
				if err != nil || len(choices) == 0 {
					t.Fatalf("host windows %v, rank %d, window %d: %d plans, %v", host, rank, w.Index, len(choices), err)
				}
				for _, ch := range choices {
					p := ch.Plan
					staged := false
					for _, g := range p.Groups {
						for _, o := range g.Ops {
							if o.Kind != plan.OpTransfer || !o.Port {
								continue
							}
							if o.Stage > 0 {
								staged = true
								if s := o.Stage - 1; s < w.Width || s >= 2*w.Width {
									t.Errorf("%s: staging slot %d outside the window's %d…%d", p.Name, s, w.Width, 2*w.Width-1)
								}
							}
						}
					}
					if host && (!staged || !p.StageSends || p.ScratchSlots != 2*w.Width) {
						t.Errorf("host windows, rank %d: %s: staged %v, StageSends %v, %d slots (window width %d); want staged sends and twice the width", rank, p.Name, staged, p.StageSends, p.ScratchSlots, w.Width)
					}
					if !host && (staged || p.ScratchSlots > w.Width) {
						t.Errorf("device windows, rank %d: %s: staged %v, %d slots; want neither", rank, p.Name, staged, p.ScratchSlots)
					}
					for i, pc := range p.Channels {
						if pc.Port && pc.Net != host {
							t.Errorf("rank %d: %s: channel %d to rank %d: Net %v, want %v", rank, p.Name, i, pc.Peer, pc.Net, host)
						}
					}
				}
			}
		}
	}
}
