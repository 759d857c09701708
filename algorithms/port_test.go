package algorithms

import (
	"testing"

	"github.com/weftccl/weft/hal/plan"
)

// TestPortPlansOneWriterPerSemaphore checks the engine rule the ack
// channels rely on (hal.Engine: a semaphore word is signalled by one
// engine only): in every port plan with ack channels, each (peer,
// semaphore) word is signalled through one channel, and the receive-side
// signals ("free", "done") go through the ack channels, not through the
// engines that carry this rank's puts.
func TestPortPlansOneWriterPerSemaphore(t *testing.T) {
	builders := map[string]func(Config) (*plan.Plan, error){
		"all_gather": AllGatherPort, "alltoall": AllToAllPort, "reduce_scatter": ReduceScatterPort, "all_reduce": AllReducePort,
	}
	for _, gpu := range []bool{false, true} {
		for _, n := range []int{2, 3, 7, 8, 12, PeerPlansMaxRanks} {
			for name, build := range builders {
				c := DefaultConfig(1, n, 132, gpu)
				p, err := build(c)
				if err != nil {
					t.Fatalf("%s, %d ranks: %v", name, n, err)
				}
				m := n - 1
				sets := 2 // data and ack channels
				if name == "all_reduce" {
					sets = 3 // reduce-scatter puts, all-gather puts, acks
				}
				sets = min(sets, plan.MaxPeers/m) // what a GPU plan holds
				if len(p.Channels) > plan.MaxPeers {
					t.Fatalf("%s, %d ranks: %d channels, a GPU plan holds %d", name, n, len(p.Channels), plan.MaxPeers)
				}
				if len(p.Channels) != sets*m {
					t.Fatalf("%s, %d ranks: %d channels, want %d (%d sets)", name, n, len(p.Channels), sets*m, sets)
				}
				for i := m; i < len(p.Channels); i++ {
					if p.Channels[i] != p.Channels[i%m] || !p.Channels[i].Port {
						t.Fatalf("%s: channel %d is %+v and channel %d is %+v, want the same port channel", name, i%m, p.Channels[i%m], i, p.Channels[i])
					}
				}
				ack0 := (sets - 1) * m // the ack channels are the last set
				type word struct{ peer, sem int }
				writer := map[word]int{}
				putChans := map[int]bool{}
				for _, g := range p.Groups {
					for _, o := range append(append([]plan.Op{}, g.Ops...), g.After...) {
						if o.Kind == plan.OpTransfer && o.Port && len(o.Dsts) == 1 && o.Dsts[0].Remote() {
							putChans[o.Chan] = true
						}
						if o.Kind != plan.OpSignal {
							continue
						}
						for b := 0; b < g.Blocks; b++ {
							w := word{p.Channels[o.Chan].Peer, o.Sem + b}
							if ch, ok := writer[w]; ok && ch != o.Chan {
								t.Fatalf("%s, %d ranks: semaphore %d of rank %d is signalled through channels %d and %d", name, n, w.sem, w.peer, ch, o.Chan)
							}
							writer[w] = o.Chan
						}
					}
				}
				for w, ch := range writer {
					if sets > 1 && ch >= ack0 && putChans[ch] {
						t.Errorf("%s, %d ranks: ack channel %d (semaphore %d) also carries puts", name, n, ch, w.sem)
					}
				}
				for ch := range putChans {
					if sets > 1 && ch >= ack0 {
						t.Errorf("%s, %d ranks: a put goes through ack channel %d", name, n, ch)
					}
				}
				if len(writer) == 0 {
					t.Errorf("%s, %d ranks: no signals", name, n)
				}
			}
		}
	}
}

// TestPortWindows: the gather plans and the two-phase AllReduce take
// gatherWindow's window (32 MiB on 2 GPUs, at least Port.Window), and
// the AllReduce keeps Port's blocks and doubles its threads.
func TestPortWindows(t *testing.T) {
	for _, tc := range []struct {
		n           int
		gpu         bool
		window      int64
		blocks, thr int
	}{
		{2, true, 32 << 20, 4, 1024},
		{3, true, 16 << 20, 4, 1024},
		{8, true, 8 << 20, 4, 1024},
		{2, false, 64 << 10, 2, 64},
	} {
		c := DefaultConfig(0, tc.n, 132, tc.gpu)
		for _, build := range []func(Config) (*plan.Plan, error){AllGatherPort, AllToAllPort, AllReducePort} {
			p, err := build(c)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range p.Groups {
				if g.Window != tc.window {
					t.Errorf("%s (%d ranks, gpu %v): window %d, want %d", p.Name, tc.n, tc.gpu, g.Window, tc.window)
				}
			}
			if p.Name[:10] == "all_reduce" && (p.Groups[0].Blocks != tc.blocks || p.Threads != tc.thr) {
				t.Errorf("%s: %d blocks of %d threads, want %d of %d", p.Name, p.Groups[0].Blocks, p.Threads, tc.blocks, tc.thr)
			}
		}
	}
}
