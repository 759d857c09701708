package algorithms

import (
	"fmt"
	"strings"
	"testing"

	"github.com/weftccl/weft/hal/plan"
)

// checkReleases checks the rule that lets an engine apply a release
// without waiting for the releaser's puts (plan.Op.Ack on a signal,
// hal.AckSignaler): plans[r] is rank r's plan of one collective, and
// every semaphore word that some rank signals with a release is waited
// on, by the rank it lands on, only with waits that order (Ack: credits
// and "free" waits), never with a wait that guards data the signalling
// rank put. want: at least one release in the plans.
func checkReleases(t *testing.T, plans []*plan.Plan, want bool) {
	t.Helper()
	type word struct{ from, to, sem int }
	released, dataWaits := map[word]bool{}, map[word]bool{}
	for r, p := range plans {
		for _, g := range p.Groups {
			for _, o := range append(append(append([]plan.Op{}, g.Before...), g.Ops...), g.After...) {
				if o.Kind != plan.OpSignal && o.Kind != plan.OpWait {
					continue
				}
				peer := p.Channels[o.Chan].Peer
				for b := 0; b < g.Blocks; b++ {
					switch {
					case o.Kind == plan.OpSignal && o.Ack:
						released[word{r, peer, o.Sem + b}] = true
					case o.Kind == plan.OpWait && !o.Ack:
						dataWaits[word{peer, r, o.Sem + b}] = true
					}
				}
			}
		}
	}
	if want && len(released) == 0 {
		t.Errorf("%s: no release (Ack signal)", plans[0].Name)
	}
	for w := range released {
		if dataWaits[w] {
			t.Errorf("%s: rank %d releases semaphore %d of rank %d, which rank %d waits on without Ack (a data wait: it needs the puts before the signal)",
				plans[0].Name, w.from, w.sem, w.to, w.to)
		}
	}
}

// Every collective has a valid port-channel plan on every rank, for every
// root, and the ranks of a collective agree on its name and semaphores
// (channels.Setup refuses plans that differ); their "free" signals are
// releases that no data wait depends on (checkReleases).
func TestPortPlansOfEveryCollective(t *testing.T) {
	for n := 2; n <= 6; n++ {
		for _, coll := range Collectives {
			roots := []int{0}
			if coll.Rooted() {
				roots = []int{0, n - 1}
			}
			for _, root := range roots {
				name, sems := "", 0
				var plans []*plan.Plan
				for r := 0; r < n; r++ {
					c := DefaultConfig(r, n, 4, false)
					p, err := PortPlanRoot(c, coll, root)
					if err != nil || p == nil {
						t.Fatalf("%d ranks, %v root %d, rank %d: %v, %v", n, coll, root, r, p, err)
					}
					if !p.HasPorts() {
						t.Errorf("%s: no port channels", p.Name)
					}
					if r == 0 {
						name, sems = p.Name, p.Semaphores
					} else if p.Name != name || p.Semaphores != sems {
						t.Errorf("%d ranks, %v root %d: rank %d has %s (%d semaphores), rank 0 %s (%d)", n, coll, root, r, p.Name, p.Semaphores, name, sems)
					}
					plans = append(plans, p)
				}
				checkReleases(t, plans, true)
			}
		}
	}
	var p2p []*plan.Plan
	for r := 0; r < 3; r++ {
		p, err := P2PPort(DefaultConfig(r, 3, 4, false))
		if err != nil {
			t.Fatal(err)
		}
		p2p = append(p2p, p)
	}
	checkReleases(t, p2p, true)
	c := DefaultConfig(0, 3, 4, false)
	p, err := P2PPort(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, peer := range []int{1, 2} {
		if g := p.Groups[SendArg(0, peer)-1]; g.Arg != SendArg(0, peer) {
			t.Errorf("send group to %d has slot %d, want %d", peer, g.Arg, SendArg(0, peer))
		}
		if g := p.Groups[RecvArg(0, peer)-1]; g.Arg != RecvArg(0, peer) {
			t.Errorf("receive group from %d has slot %d, want %d", peer, g.Arg, RecvArg(0, peer))
		}
	}
	if got, want := fmt.Sprint(p.Groups[SelfArg(3)-1].Arg), fmt.Sprint(SelfArg(3)); got != want {
		t.Errorf("self group slot %s, want %s", got, want)
	}
}

// The hierarchical AllReduce, AllGather and ReduceScatter are chosen on ≥ 2
// nodes of ≥ 2 ranks, for the operators they run (a floating Avg as
// PreMulSum, not an integer one); their plans validate on
// every rank, and the ranks of a plan agree on its name, semaphores and
// scratch slots (channels.Setup refuses plans that differ).
func TestHierarchicalSelection(t *testing.T) {
	for _, coll := range []Collective{AllReduce, AllGather, ReduceScatter} {
		for _, nodes := range [][]int{{0, 0, 1, 1}, {0, 0, 0, 1, 1, 1}, {0, 1, 0, 1}, {0, 0, 1, 1, 2, 2}} {
			var first *plan.Plan
			var plans []*plan.Plan
			for r := range nodes {
				c := DefaultConfig(r, len(nodes), 4, false)
				c.PortOnly, c.Nodes = true, nodes
				cs, err := Plans(c, coll, 0)
				if err != nil {
					t.Fatalf("%v nodes %v rank %d: %v", coll, nodes, r, err)
				}
				if len(cs) != 2 || cs[0].Staged != coll.Reduces() || !strings.Contains(cs[0].Plan.Name, "-2ph-") {
					t.Fatalf("%v nodes %v rank %d: choices %v, want 2PH then the flat port plan", coll, nodes, r, cs)
				}
				if i := SelectFor(cs, 1<<20, plan.Float32, plan.Sum); i != 0 {
					t.Errorf("%v: Sum selects %s", coll, cs[i].Plan.Name)
				}
				// A floating Avg runs on 2PH as PreMulSum with 1/n
				// (Choice.Runs); an integer one needs the single sum of the
				// flat plan, 2PH having no final division.
				if i := SelectFor(cs, 1<<20, plan.Float32, plan.Avg); i != 0 {
					t.Errorf("%v: float Avg selects %s", coll, cs[i].Plan.Name)
				}
				if want := map[bool]int{true: 1, false: 0}[coll.Reduces()]; SelectFor(cs, 1<<20, plan.Int32, plan.Avg) != want {
					t.Errorf("%v: int32 Avg selects %s", coll, cs[SelectFor(cs, 1<<20, plan.Int32, plan.Avg)].Plan.Name)
				}
				p := cs[0].Plan
				// Split windows: the counterparts write network windows
				// over port channels that the network carries.
				if p.NetSlot <= 0 || p.NetSlot >= p.ScratchSlots {
					t.Errorf("%v nodes %v rank %d: %s has network slots from %d of %d", coll, nodes, r, p.Name, p.NetSlot, p.ScratchSlots)
				}
				for i, ch := range p.Channels {
					if ch.Port != ch.Net {
						t.Errorf("%v nodes %v rank %d: channel %d %+v: a port channel goes over the network, a memory channel does not", coll, nodes, r, i, ch)
					}
				}
				plans = append(plans, p)
				if first == nil {
					first = p
				} else if p.Name != first.Name || p.Semaphores != first.Semaphores || p.ScratchSlots != first.ScratchSlots {
					t.Errorf("%v nodes %v: rank %d has %s (%d semaphores, %d slots), rank 0 %s (%d, %d)", coll, nodes, r,
						p.Name, p.Semaphores, p.ScratchSlots, first.Name, first.Semaphores, first.ScratchSlots)
				}
			}
			checkReleases(t, plans, true)
		}
		// On a GPU's shape (32 blocks) a second hierarchical plan of
		// hierBlocks blocks and smaller windows serves up to
		// hierSmallMaxBytes, then the HB one, then the flat plan.
		gc := DefaultConfig(1, 4, 132, true)
		gc.PortOnly, gc.Nodes, gc.HostWindows = true, []int{0, 0, 1, 1}, true
		gcs, err := Plans(gc, coll, 0)
		// Small messages: the hierarchical LL plan first (hier_ll.go), one
		// frame per counterpart (L for ReduceScatter).
		if err != nil || !strings.HasPrefix(gcs[0].Plan.Name, coll.String()) || !strings.Contains(gcs[0].Plan.Name, "-2ph-") ||
			gcs[0].Plan.Scratch == plan.Simple || gcs[0].MaxBytes != gc.PortLLMaxBytes || gcs[0].Plan.NetSlot == 0 || gcs[0].Staged != coll.Reduces() {
			t.Errorf("%v on a GPU's shape: first choice %+v, %v; want the hierarchical LL plan up to %d bytes", coll, gcs[0], err, gc.PortLLMaxBytes)
		}
		if err != nil || len(gcs) < 3 {
			t.Errorf("%v on a GPU's shape: %d choices, %v; want the small and the large hierarchical plans, then the flat one", coll, len(gcs), err)
		} else {
			small, large := gcs[len(gcs)-3], gcs[len(gcs)-2]
			if !strings.Contains(small.Plan.Name, "-2ph-") || !strings.Contains(large.Plan.Name, "-2ph-") || small.MaxBytes != hierSmallMaxBytes || large.MaxBytes != 0 ||
				small.Plan.Blocks() > hierBlocks || large.Plan.Blocks() <= hierBlocks {
				t.Errorf("%v on a GPU's shape: %s (up to %d) then %s (up to %d); want 2PH of at most %d blocks up to %d, then 2PH of more",
					coll, small.Plan.Name, small.MaxBytes, large.Plan.Name, large.MaxBytes, hierBlocks, hierSmallMaxBytes)
			}
		}
		for _, nodes := range [][]int{nil, {0, 0, 0, 1}, {0, 1, 2, 3}, {0, 0, 0, 0}} {
			c := DefaultConfig(0, 4, 4, false)
			c.PortOnly, c.Nodes, c.HostWindows = true, nodes, true
			cs, err := Plans(c, coll, 0)
			// Across nodes over host windows, staged sends (every rank
			// alone on its node, or not, the flat port plans carrying
			// every channel over the network): the LL port plan first
			// (portll.go), and for AllReduce the one-hop plan next.
			alone := nodes != nil
			var want []int64 // the choices' bounds
			switch {
			case alone && coll == AllReduce:
				want = []int64{PortLLMaxBytes, PortOneShotMaxBytes, 0}
			case alone:
				want = []int64{PortLLMaxBytes, 0}
			default:
				want = []int64{0}
			}
			if err != nil || len(cs) != len(want) {
				t.Errorf("%v nodes %v: %d choices, %v; want %d", coll, nodes, len(cs), err, len(want))
				continue
			}
			for i, ch := range cs {
				if ch.MaxBytes != want[i] {
					t.Errorf("%v nodes %v: choice %d %s up to %d bytes, want %d", coll, nodes, i, ch.Plan.Name, ch.MaxBytes, want[i])
				}
				// Across nodes over host windows every channel of the
				// flat plans goes over the network (no copy engine
				// reaches a peer of the node: docs/network.md).
				for _, pc := range ch.Plan.Channels {
					if pc.Net != alone {
						t.Errorf("%v nodes %v: %s channel %+v: Net %v, want %v", coll, nodes, ch.Plan.Name, pc, pc.Net, alone)
					}
				}
			}
			if alone && (!strings.Contains(cs[0].Plan.Name, "-port-LL16-") || cs[0].Plan.Scratch != plan.LL16) {
				t.Errorf("%v nodes %v: first choice %s, want the LL port plan", coll, nodes, cs[0].Plan.Name)
			}
			if alone && coll == AllReduce && !strings.HasPrefix(cs[1].Plan.Name, "all_reduce-1pa-port-") {
				t.Errorf("nodes %v: second choice %s, want the one-hop plan", nodes, cs[1].Plan.Name)
			}
		}
	}
}
