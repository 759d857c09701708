package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/weftccl/weft/bootstrap"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/topology"
	"github.com/weftccl/weft/topology/sysfs"
)

// topoMeasureOptions are the --measure flags.
type topoMeasureOptions struct {
	enabled bool
	backend string
	devices int
	size    string
	iters   int
	blocks  int
}

// peerMeter measures the link from one device to another. halMeter is the
// implementation; tests substitute others.
type peerMeter interface {
	// Devices names the devices: GPU IDs of the topology where the backend
	// reports a PCI address, else "<backend><ordinal>".
	Devices() []string
	// Measure times puts from device a into device b's memory.
	Measure(ctx context.Context, a, b int) topology.MeasuredPair
	Close() error
}

// measure chooses a backend, opens its devices and fills a Measurement.
// A nil result comes with the reason, which is not an error: the caller
// still prints the static topology.
func topoMeasure(ctx context.Context, sys *topology.System, o topoMeasureOptions, progress io.Writer) (*topology.Measurement, string) {
	bytes, err := parseSize(o.size)
	if err != nil || bytes < 16 {
		return nil, fmt.Sprintf("--measure-bytes %q: want a size of at least 16 bytes", o.size)
	}
	if o.iters < 1 || o.blocks < 1 {
		return nil, "--measure-iters and --measure-blocks must be positive"
	}
	name, why := topoBackend(o.backend)
	if name == "" {
		return nil, why
	}
	n := o.devices
	if n == 0 {
		n = topoDefaultDevices(sys, name)
	}
	if n < 2 {
		return nil, fmt.Sprintf("backend %s has %d device(s) here; a peer matrix needs two", name, n)
	}
	m, err := topoOpenMeter(name, n, sys, bytes, o.iters, o.blocks)
	if err != nil {
		return nil, err.Error()
	}
	defer m.Close()
	res := topoRunMeter(ctx, m, progress)
	res.Backend, res.Bytes, res.Iterations, res.Blocks = name, bytes, o.iters, o.blocks
	return res, ""
}

// topoBackend returns the backend to measure with, or "" and the reason
// there is none. Only a backend whose devices are GPUs qualifies unless
// named explicitly: hal/host is the CPU reference and says nothing about
// GPU links.
func topoBackend(explicit string) (string, string) {
	name := explicit
	if name == "" {
		name = env.String("WEFT_HAL")
	}
	if name != "" {
		a, err := hal.Probe(name)
		if err != nil {
			return "", err.Error()
		}
		if !a.Available {
			return "", fmt.Sprintf("backend %s is not available: %s", name, a.Reason)
		}
		return name, ""
	}
	var skipped []string
	for _, b := range hal.Backends() {
		if b.Name() == "host" {
			continue
		}
		a := b.Probe()
		if a.Available {
			return b.Name(), ""
		}
		skipped = append(skipped, b.Name()+": "+a.Reason)
	}
	if len(skipped) == 0 {
		return "", "no GPU backend with memory-mapped links is registered in this weft (the host backend is the CPU reference; --hal host measures it anyway)"
	}
	return "", "no GPU backend with memory-mapped links is available (" + strings.Join(skipped, "; ") + ")"
}

func topoDefaultDevices(sys *topology.System, backend string) int {
	vendor := map[string]string{"nvlink": topology.VendorNVIDIA, "pcie": topology.VendorNVIDIA, "xgmi": topology.VendorAMD}[backend]
	if vendor == "" {
		return 2
	}
	n := 0
	for _, g := range sys.GPUs {
		if g.Vendor == vendor {
			n++
		}
	}
	return n
}

// topoRunMeter measures every ordered pair, showing a progress bar when
// progress is a terminal.
func topoRunMeter(ctx context.Context, m peerMeter, progress io.Writer) *topology.Measurement {
	names := m.Devices()
	total := len(names) * (len(names) - 1)
	var bar *progressbar.ProgressBar
	if f, ok := progress.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(progress),
			progressbar.OptionSetDescription("measuring peer bandwidth"), progressbar.OptionShowCount(),
			progressbar.OptionClearOnFinish())
	}
	res := &topology.Measurement{}
	for a := range names {
		for b := range names {
			if a == b {
				continue
			}
			p := m.Measure(ctx, a, b)
			p.A, p.B = names[a], names[b]
			res.Pairs = append(res.Pairs, p)
			if bar != nil {
				bar.Add(1)
			}
		}
	}
	if bar != nil {
		bar.Finish()
	}
	return res
}

// halMeter measures with a HAL backend in this process: every device is
// opened once; for a pair, both devices set up a two-rank plan through
// package channels (an in-process exchange stands in for the bootstrap),
// register their output buffers, and the writer launches a put of its
// input into the peer's output, timed by stream events.
type halMeter struct {
	backend string
	devs    []hal.Device
	names   []string
	bytes   int64
	iters   int
	blocks  int
}

func topoOpenMeter(backend string, n int, sys *topology.System, bytes int64, iters, blocks int) (*halMeter, error) {
	m := &halMeter{backend: backend, bytes: bytes, iters: iters, blocks: blocks}
	job := fmt.Sprintf("weft-topo-%d", os.Getpid())
	for i := 0; i < n; i++ {
		d, err := hal.Open(backend, hal.Config{Ordinal: i, Rank: i, JobID: job})
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("open %s device %d: %w", backend, i, err)
		}
		_, mm := d.(hal.MemoryMapped)
		_, ex := d.(hal.Executor)
		if !mm || !ex {
			d.Close()
			m.Close()
			return nil, fmt.Errorf("backend %s offers no memory-mapped capability with plan execution", backend)
		}
		m.devs = append(m.devs, d)
		m.names = append(m.names, topoDeviceName(sys, backend, i, d.Info()))
	}
	return m, nil
}

// topoDeviceName maps a HAL device to the topology's GPU ID by PCI address
// (CUDA's ordinal order need not be NVML's).
func topoDeviceName(sys *topology.System, backend string, ordinal int, info hal.DeviceInfo) string {
	if bdf, err := sysfs.ParseBDF(info.PCIBusID); err == nil {
		for _, g := range sys.GPUs {
			if g.BDF == bdf {
				return g.ID
			}
		}
	}
	return fmt.Sprintf("%s%d", backend, ordinal)
}

func (m *halMeter) Devices() []string { return m.names }

func (m *halMeter) Close() error {
	var errs []error
	for _, d := range m.devs {
		errs = append(errs, d.Close())
	}
	m.devs = nil
	return errors.Join(errs...)
}

// topoPutPlan is rank's plan: one channel to the other rank and a put of the
// whole input into the peer's output, split over blocks.
func topoPutPlan(rank, blocks int) *plan.Plan {
	return &plan.Plan{
		Name: "topo-measure-put", Rank: rank, NRanks: 2,
		Channels: []plan.Channel{{Peer: 1 - rank}},
		Groups:   []plan.Group{{Blocks: blocks, Ops: []plan.Op{plan.Transfer(plan.All, 1, []plan.Ref{plan.R(0, plan.Output)}, plan.L(plan.Input))}}},
		Threads:  1024,
	}
}

func (m *halMeter) Measure(ctx context.Context, a, b int) topology.MeasuredPair {
	boots := bootstrap.NewLocal(2)
	var wg sync.WaitGroup
	var res topology.MeasuredPair
	errs := make([]error, 2)
	for rank, dev := range []hal.Device{m.devs[a], m.devs[b]} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := m.rank(ctx, boots[rank], dev)
			errs[rank] = err
			if rank == 0 {
				res = r
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		res.Error = err.Error()
	}
	return res
}

// rank runs one side of a pair; rank 0 writes, rank 1 only lends its
// output buffer. Both call the collective setup steps in the same order.
func (m *halMeter) rank(ctx context.Context, ex bootstrap.Bootstrap, dev hal.Device) (res topology.MeasuredPair, err error) {
	rank := ex.Rank()
	p := topoPutPlan(rank, m.blocks)
	resources, err := channels.Setup(ctx, ex, dev, p, 0, 0)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, resources.Close()) }()
	in, err := dev.Alloc(m.bytes)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, in.Free()) }()
	out, err := dev.Alloc(m.bytes)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, out.Free()) }()
	reg, err := channels.Register(ctx, ex, dev, out)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, reg.Close()) }()
	if rank == 0 {
		res, err = m.time(dev, resources, in, out, reg.Peers[1])
	}
	// The peer keeps its buffers mapped until the writer is done.
	if _, berr := ex.AllGather(ctx, nil); berr != nil && err == nil {
		err = berr
	}
	return res, err
}

// time launches the put plan: a warm-up, iters timed puts of m.bytes, and
// iters puts of 16 bytes for the latency.
func (m *halMeter) time(dev hal.Device, r *channels.Resources, in, out, peerOut hal.Buffer) (res topology.MeasuredPair, err error) {
	prog, err := dev.(hal.Executor).Prepare(hal.PlanSpec{Plan: r.Plan, Bindings: r.Bindings, DataType: plan.Float32,
		RedOp: plan.Sum, Library: channels.DeviceLibrary()})
	if err != nil {
		return res, err
	}
	defer prog.Close()
	s, err := dev.NewStream()
	if err != nil {
		return res, err
	}
	defer s.Close()
	// After a failure (a put that missed the deadline) the launches queued
	// may still run: give them another WEFT_TIMEOUT to finish before the
	// caller unmaps the buffers they write, which would otherwise abort
	// them (a backend never unmaps memory under a running launch).
	defer func() {
		if err != nil {
			s.Synchronize(time.Now().Add(env.Timeout()))
		}
	}()
	run := func(bytes int64, iters int) (time.Duration, error) {
		args := &plan.Args{Count: bytes / 4, Input: in.Addr(), Output: out.Addr(), PeerOutput: []uint64{peerOut.Addr()}}
		if err := prog.Launch(s, args); err != nil { // warm-up
			return 0, err
		}
		start, err := s.Record()
		if err != nil {
			return 0, err
		}
		defer start.Close()
		for i := 0; i < iters; i++ {
			if err := prog.Launch(s, args); err != nil {
				return 0, err
			}
		}
		end, err := s.Record()
		if err != nil {
			return 0, err
		}
		defer end.Close()
		if err := end.Synchronize(time.Time{}); err != nil {
			return 0, err
		}
		if err := r.Check(); err != nil {
			return 0, err
		}
		return end.Elapsed(start)
	}
	d, err := run(m.bytes, m.iters)
	if err != nil {
		return res, err
	}
	if d > 0 {
		res.GBps = float64(m.bytes) * float64(m.iters) / d.Seconds() / 1e9
	}
	d, err = run(16, m.iters)
	if err != nil {
		return res, err
	}
	res.LatencyUS = d.Seconds() * 1e6 / float64(m.iters)
	return res, nil
}

// topoWriteMeasurement prints the measured matrices after the text report.
func topoWriteMeasurement(w io.Writer, s *topology.System) error {
	m := s.Measured
	if m == nil || len(m.Pairs) == 0 {
		return nil
	}
	var names []string
	seen := map[string]bool{}
	for _, p := range m.Pairs {
		for _, n := range []string{p.A, p.B} {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	sort.SliceStable(names, func(i, j int) bool { return names[i] < names[j] })
	get := func(a, b string) topology.MeasuredPair {
		for _, p := range m.Pairs {
			if p.A == a && p.B == b {
				return p
			}
		}
		return topology.MeasuredPair{Error: "not measured"}
	}
	table := func(title string, cell func(topology.MeasuredPair) string) {
		fmt.Fprintf(w, "\n%s\n", title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprint(tw, "writer \\ memory of\t")
		for _, n := range names {
			fmt.Fprint(tw, strings.ToUpper(n)+"\t")
		}
		fmt.Fprintln(tw)
		for _, a := range names {
			fmt.Fprint(tw, strings.ToUpper(a)+"\t")
			for _, b := range names {
				if a == b {
					fmt.Fprint(tw, "X\t")
					continue
				}
				p := get(a, b)
				if p.Error != "" {
					fmt.Fprint(tw, "error\t")
					continue
				}
				fmt.Fprint(tw, cell(p)+"\t")
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	table(fmt.Sprintf("Measured put bandwidth (GB/s; %s backend, %d MiB × %d, %d blocks)", m.Backend, m.Bytes>>20, m.Iterations, m.Blocks),
		func(p topology.MeasuredPair) string { return fmt.Sprintf("%.1f", p.GBps) })
	table("Measured 16-byte put latency (µs, kernel launch included)",
		func(p topology.MeasuredPair) string { return fmt.Sprintf("%.1f", p.LatencyUS) })
	for _, p := range m.Pairs {
		if p.Error != "" {
			fmt.Fprintf(w, "  %s → %s: %s\n", strings.ToUpper(p.A), strings.ToUpper(p.B), p.Error)
		}
	}
	return nil
}
