package conformance

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/topology"
)

// Quality floors (issue 4). NVLink on H100/H200: a put must reach 80 % of
// the thread-copy figure measured on the 4×H200 host (368 GB/s with 132
// blocks of 1024 threads, 16-byte stores: ../shared/design/gpu-host-facts.md)
// and a signal→wait round trip must take at most 3 µs. Elsewhere a put is
// compared with the link's peak from package topology, or, without one,
// with a copy inside one device measured the same way; hal/host's floors
// are deliberately lenient, since CI machines are small and shared.
const (
	hopperThreadCopyGBps = 368.0
	hopperPutFraction    = 0.8
	hopperRoundTripUs    = 3.0
	topologyPutFraction  = 0.5
	accelRoundTripUs     = 10.0
	hostPutFraction      = 0.25
	hostRoundTripUs      = 2000.0
)

func init() {
	mm := hal.CapMemoryMapped
	Register(Case{ID: "memory-mapped/put-bandwidth", Capability: mm, Mode: Pairs, Quality: true,
		Title: "put bandwidth of every link, against the link's floor",
		Run:   testPutBandwidth})
	Register(Case{ID: "memory-mapped/signal-latency", Capability: mm, Mode: Pairs, Quality: true,
		Title: "signal→wait round-trip latency of every link, against its floor",
		Run:   testSignalLatency})
}

// hopper reports whether the device is an H100 or H200 on the nvlink backend.
func hopper(info hal.DeviceInfo) bool {
	return info.Backend == "nvlink" && (strings.Contains(info.Name, "H100") || strings.Contains(info.Name, "H200"))
}

func software(info hal.DeviceInfo) bool { return info.Backend == "host" || info.PCIBusID == "" }

// timeLaunches runs launch iters times after warm-up launches and returns
// the median time of one launch, from events around it.
func timeLaunches(t *T, s hal.Stream, iters int, before, launch func() error) (time.Duration, error) {
	var times []time.Duration
	for i := -2; i < iters; i++ {
		if before != nil {
			if err := before(); err != nil {
				return 0, err
			}
		}
		e0, err := s.Record()
		if err != nil {
			return 0, t.Errorf("record: %w", err)
		}
		if err := launch(); err != nil {
			e0.Close()
			return 0, err
		}
		e1, err := s.Record()
		if err != nil {
			e0.Close()
			return 0, t.Errorf("record: %w", err)
		}
		err = t.Sync(s)
		var d time.Duration
		if err == nil {
			d, err = e1.Elapsed(e0)
		}
		e0.Close()
		e1.Close()
		if err != nil {
			return 0, err
		}
		if i >= 0 {
			times = append(times, d)
		}
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}

func testPutBandwidth(t *T) error {
	info := t.Dev.Info()
	size, iters, threads := int64(256*mib), 20, 1024
	blocks := max(info.Multiprocessors, 1)
	if t.Quick() {
		size, iters = 64*mib, 5
	}
	if software(info) {
		size, iters, threads = 16*mib, 5, 64
		if t.Quick() {
			size = 4 * mib
		}
		blocks = min(blocks, 8)
	}
	all, err := t.AllGather([]byte(info.PCIBusID))
	if err != nil {
		return err
	}
	peerBus := string(all[1-t.Rank])
	ops := []plan.Op{}
	if t.Rank == 0 {
		ops = []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{plan.R(0, plan.Output)}, plan.L(plan.Input))}
	}
	p := &plan.Plan{Name: "conf-put-bw", Rank: t.Rank, NRanks: 2, Channels: []plan.Channel{{Peer: 1 - t.Rank}}, Threads: threads,
		Groups: []plan.Group{{Blocks: blocks, Ops: ops}}}
	// The receiver only lends its memory: it prepares nothing.
	f, err := newFixture(t, p, fixtureSpec{in: size, out: size, register: registerOutput, noProgram: t.Rank != 0})
	if err != nil {
		return err
	}
	if t.Rank != 0 {
		return nil
	}
	in, out, s := f.in, f.out, f.s
	if err := t.Write(in, 0, pattern(seed(t.Rank, 0), size)); err != nil {
		return err
	}
	put, err := timeLaunches(t, s, iters, nil, func() error { return f.launch(f.args(size, 0, 0)) })
	if err != nil {
		return err
	}
	if err := f.finish(); err != nil {
		return err
	}
	gbps := func(d time.Duration) float64 { return float64(size) / d.Seconds() / 1e9 }
	fig := Figure{Name: fmt.Sprintf("put %d→%d", t.Link[0], t.Link[1]), Value: gbps(put), Unit: "GB/s", Better: "higher"}

	// The same copy inside one device, with the same blocks and threads.
	lp := copyPlan("conf-copy-bw", blocks, threads)
	lres, err := t.SetupLocal(lp)
	if err != nil {
		return err
	}
	lprog, err := t.Prepare(lp, lres, plan.Uint8)
	if err != nil {
		return err
	}
	local, err := timeLaunches(t, s, iters, nil, func() error {
		return t.Launch(lprog, s, &plan.Args{Count: size, Input: in.Addr(), Output: out.Addr()})
	})
	if err != nil {
		return err
	}
	if err := t.Finish(s, lres); err != nil {
		return err
	}
	copyFig := Figure{Name: fmt.Sprintf("copy on %d", t.Link[0]), Value: gbps(local), Unit: "GB/s"}

	switch peak := linkPeak(info, peerBus); {
	case hopper(info):
		fig.Floor = hopperPutFraction * hopperThreadCopyGBps
		fig.Basis = fmt.Sprintf("%.0f%% of the %.0f GB/s thread-copy figure of H200 NVLink (gpu-host-facts.md)", 100*hopperPutFraction, hopperThreadCopyGBps)
	case peak > 0:
		fig.Floor = topologyPutFraction * peak
		fig.Basis = fmt.Sprintf("%.0f%% of the link's %.0f GB/s peak (topology)", 100*topologyPutFraction, peak)
	default:
		fig.Floor = hostPutFraction * copyFig.Value
		fig.Basis = fmt.Sprintf("%.0f%% of a copy inside the device, measured the same way", 100*hostPutFraction)
	}
	t.Figure(fig)
	t.Figure(copyFig)
	return nil
}

func testSignalLatency(t *T) error {
	info := t.Dev.Info()
	rounds, iters := 256, 9
	if t.Quick() || software(info) {
		rounds, iters = 64, 5
	}
	var ops []plan.Op
	for i := 0; i < rounds; i++ {
		if t.Rank == 0 {
			ops = append(ops, plan.Signal(0, 0), plan.Wait(0, 0))
		} else {
			ops = append(ops, plan.Wait(0, 0), plan.Signal(0, 0))
		}
	}
	p := &plan.Plan{Name: "conf-pingpong", Rank: t.Rank, NRanks: 2, Channels: []plan.Channel{{Peer: 1 - t.Rank}}, Threads: 32,
		Semaphores: 1, Groups: []plan.Group{{Blocks: 1, Ops: ops}}}
	f, err := newFixture(t, p, fixtureSpec{in: 16}) // input and output in place
	if err != nil {
		return err
	}
	s := f.s
	launch := func() error { return f.launch(f.args(1, 0, 0)) }
	var d time.Duration
	if t.Rank == 0 {
		d, err = timeLaunches(t, s, iters, t.Barrier, launch)
	} else {
		for i := -2; i < iters && err == nil; i++ {
			if err = t.Barrier(); err == nil {
				if err = launch(); err == nil {
					err = t.Sync(s)
				}
			}
		}
	}
	if err != nil {
		return err
	}
	if err := f.finish(); err != nil {
		return err
	}
	if t.Rank != 0 {
		return nil
	}
	fig := Figure{Name: fmt.Sprintf("round trip %d↔%d", t.Link[0], t.Link[1]), Value: float64(d.Nanoseconds()) / 1e3 / float64(rounds), Unit: "µs", Better: "lower"}
	switch {
	case hopper(info):
		fig.Floor, fig.Basis = hopperRoundTripUs, "NVLink on H100/H200 (issue 4)"
	case software(info):
		fig.Floor, fig.Basis = hostRoundTripUs, "software backend, lenient for shared CI machines"
	default:
		fig.Floor, fig.Basis = accelRoundTripUs, "default floor for accelerators"
	}
	t.Figure(fig)
	return nil
}

var (
	topoOnce sync.Once
	topoSys  *topology.System
)

// linkPeak is the per-direction peak bandwidth in GB/s of the path between
// the two devices of a pair, from topology discovery, or 0 when unknown.
func linkPeak(info hal.DeviceInfo, peer string) float64 {
	if software(info) || peer == "" {
		return 0
	}
	topoOnce.Do(func() { topoSys, _ = topology.Discover(topology.Options{}) })
	if topoSys == nil {
		return 0
	}
	id := func(bus string) string {
		for _, g := range topoSys.GPUs {
			if normBus(g.BDF) == normBus(bus) {
				return g.ID
			}
		}
		return ""
	}
	a, b := id(info.PCIBusID), id(peer)
	if a == "" || b == "" {
		return 0
	}
	if p, ok := topoSys.Path(a, b); ok {
		return p.GBps
	}
	return 0
}

// normBus normalises a PCI bus id ("00000000:1B:00.0" → "0000:1b:00.0").
func normBus(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if i := strings.Index(s, ":"); i > 4 {
		s = s[i-4:]
	}
	return s
}
