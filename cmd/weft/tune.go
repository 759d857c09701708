package main

// weft bench all_reduce --tune: sweep the AllReduce plans and launch
// shapes on this machine, choose a tier list, verify it, and write it to
// the tuning file that communicators read (docs/tuning.md).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
)

// tuneTolerance: a plan within this fraction of the fastest at a size
// counts as fast as it there. The tier list keeps the plan of the size
// before while it stays within the tolerance, so that noise between
// near-equal plans does not split tiers (each tier is one more compiled
// plan and, for 1PA, more scratch).
const tuneTolerance = 0.03

// tuneBudget bounds the timed calls of one measurement: iterations are cut
// so that iterations × graph replays × the default plan's time stays
// under it (at least 2 iterations), so large sizes do not dominate the
// sweep.
const tuneBudget = 100 * time.Millisecond

// parseCandidates reads --tune-candidates: tiers without bounds, each
// measured over its family's size range.
func parseCandidates(s string, gpu bool) ([]algorithms.Candidate, error) {
	ranges := map[string][2]int64{}
	for _, c := range algorithms.TuneCandidates(128, gpu) {
		ranges[c.Tier.Algo] = [2]int64{c.MinBytes, c.MaxBytes}
	}
	var cs []algorithms.Candidate
	for _, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		if strings.Contains(f, "@") {
			return nil, fmt.Errorf("--tune-candidates %q: candidates take no bound (the tuner chooses the bounds): %w", f, hal.ErrInvalidArgument)
		}
		t, err := algorithms.ParseTier(f)
		if err != nil {
			return nil, fmt.Errorf("--tune-candidates: %v: %w", err, hal.ErrInvalidArgument)
		}
		r := ranges[t.Algo]
		cs = append(cs, algorithms.Candidate{Tier: t, MinBytes: r[0], MaxBytes: r[1]})
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("--tune-candidates %q: no candidates: %w", s, hal.ErrInvalidArgument)
	}
	return cs, nil
}

// tuneRun is the state of one rank's sweep.
type tuneRun struct {
	ctx     context.Context
	cfg     *benchConfig
	boot    bootstrap.Bootstrap
	dev     hal.Device
	out     io.Writer
	s       hal.Stream
	in, buf hal.Buffer
	sizes   []int64 // bytes, each a positive multiple of the element size
	iters   []int   // timed iterations per size
}

// tuneRank runs `weft bench all_reduce --tune` on one rank.
func tuneRank(ctx context.Context, cfg *benchConfig, boot bootstrap.Bootstrap, dev hal.Device, out io.Writer) (err error) {
	rank, n := boot.Rank(), boot.Size()
	info := dev.Info()
	gpu := info.Backend != "host"
	cands := algorithms.TuneCandidates(info.Multiprocessors, gpu)
	if cfg.tuneCandidates != "" {
		if cands, err = parseCandidates(cfg.tuneCandidates, gpu); err != nil {
			return err
		}
	}
	r := &tuneRun{ctx: ctx, cfg: cfg, boot: boot, dev: dev, out: out}
	es := int64(cfg.dtype.Size())
	for _, b := range cfg.sizes {
		if b >= es {
			r.sizes = append(r.sizes, b)
			r.iters = append(r.iters, cfg.iters)
		}
	}
	if len(r.sizes) == 0 {
		return fmt.Errorf("tune: no size of -b %d to -e %d holds an element of %v: %w", cfg.minB, cfg.maxB, cfg.dtype, hal.ErrInvalidArgument)
	}
	if r.s, err = dev.NewStream(); err != nil {
		return err
	}
	defer r.s.Close()
	top := r.sizes[len(r.sizes)-1]
	if r.in, err = dev.Alloc(top); err != nil {
		return fmt.Errorf("tune: rank %d: input buffer of %d bytes: %w", rank, top, err)
	}
	defer r.in.Free()
	if r.buf, err = dev.Alloc(top); err != nil {
		return fmt.Errorf("tune: rank %d: output buffer of %d bytes: %w", rank, top, err)
	}
	defer r.buf.Free()

	// The defaults first: the reference column, and the times that size
	// the iteration counts of every later measurement.
	def := algorithms.DefaultConfig(rank, n, info.Multiprocessors, gpu)
	defTimes, defPlans, err := r.sweep(def, nil)
	if err != nil {
		return fmt.Errorf("tune: rank %d: default plans: %w", rank, err)
	}
	if defPlans == nil {
		return fmt.Errorf("tune: the links of this job are port-mapped only; the zero-copy AllReduce tiers do not apply: %w", hal.ErrNotSupported)
	}
	for i, t := range defTimes {
		calls := float64(max(cfg.graphs, 1)) * t * 1e-6
		r.iters[i] = max(2, min(cfg.iters, int(tuneBudget.Seconds()/max(calls, 1e-9))))
	}
	fmt.Fprintf(out, "# tune: %d candidates over %d sizes, %v, %d ranks on %s (%s)\n", len(cands), len(r.sizes), cfg.dtype, n, info.Name, info.Backend)

	times := make([][]float64, len(cands)) // µs; 0: not measured
	for ci, c := range cands {
		cc := def
		defTiers := def.AllReduceTiers()
		var ok bool
		if cc.AllReduce, ok = algorithms.CandidateTiers(c, r.sizes, defTiers[len(defTiers)-1]); !ok {
			continue
		}
		start := time.Now()
		times[ci], _, err = r.sweep(cc, func(b int64) bool { return b >= c.MinBytes && (c.MaxBytes == 0 || b <= c.MaxBytes) })
		if err != nil {
			return fmt.Errorf("tune: rank %d: candidate %s: %w", rank, c.Tier.Name(), err)
		}
		fmt.Fprintf(out, "# tune: %3d/%d %-34s %s\n", ci+1, len(cands), c.Tier.Name(), time.Since(start).Round(time.Millisecond))
	}

	tiers, winners := chooseTiers(cands, times, r.sizes, def)
	fmt.Fprintf(out, "# tune: chose %s\n", algorithms.FormatTiers(tiers))

	// Verify: a communicator with the chosen tiers, beside the defaults
	// (and NCCL with --baseline nccl), every element checked.
	tc := def
	tc.AllReduce = tiers
	tunedTimes, tunedPlans, err := r.sweep(tc, nil)
	if err != nil {
		return fmt.Errorf("tune: rank %d: chosen tiers: %w", rank, err)
	}
	var ncclTimes []float64
	if cfg.baseline == "nccl" {
		if ncclTimes, err = r.sweepNCCL(); err != nil {
			return fmt.Errorf("tune: rank %d: baseline: %w", rank, err)
		}
	}
	entry := algorithms.TuningEntry{Backend: info.Backend, Device: info.Name, NRanks: n, DataType: cfg.dtype.String(),
		Date: time.Now().UTC().Format(time.RFC3339), Command: "weft " + strings.Join(os.Args[1:], " ")}
	for _, t := range tiers {
		entry.AllReduce = append(entry.AllReduce, t.String())
	}
	printTuneTable(out, r.sizes, defPlans, defTimes, tunedPlans, tunedTimes, ncclTimes)
	var slower []string
	for i, b := range r.sizes {
		if tunedTimes[i] > defTimes[i]*(1+tuneTolerance) {
			slower = append(slower, algorithms.FormatSize(b))
		}
	}
	if len(slower) > 0 {
		fmt.Fprintf(out, "# tune: in the check the tuned plans were more than %.0f%% slower than the defaults at %s: the sweep's measurements were noisy there (raise -n or -G and tune again)\n",
			tuneTolerance*100, strings.Join(slower, ", "))
	}
	for i, b := range r.sizes {
		entry.Sizes = append(entry.Sizes, algorithms.TunedSize{Bytes: b, Plan: tunedPlans[i], TimeUS: round2(tunedTimes[i]),
			DefaultPlan: defPlans[i], DefaultUS: round2(defTimes[i]), Candidates: winners[i]})
	}
	if rank != 0 {
		return nil
	}
	t, err := algorithms.LoadTuning(cfg.tuneFile)
	if errors.Is(err, os.ErrNotExist) {
		t, err = &algorithms.Tuning{}, nil
	}
	if err != nil {
		return fmt.Errorf("tune: %w", err)
	}
	t.Put(entry)
	if err := algorithms.SaveTuning(cfg.tuneFile, t); err != nil {
		return fmt.Errorf("tune: write %s: %v: %w", cfg.tuneFile, err, hal.ErrSystem)
	}
	fmt.Fprintf(out, "# tune: wrote the entry for %s, %s, %d ranks to %s\n", info.Backend, info.Name, n, cfg.tuneFile)
	return nil
}

// sweep creates a communicator with configuration c and times its
// zero-copy AllReduce, out of place, at every size that want accepts (nil:
// all), checking every element. It returns the slowest rank's time per size
// (0 where not measured) and the plan that served each size (nil when
// the communicator has no zero-copy AllReduce plans).
func (r *tuneRun) sweep(c algorithms.Config, want func(int64) bool) (times []float64, plans []string, err error) {
	comm, err := weft.NewComm(r.ctx, r.boot, r.dev, weft.Options{Config: &c})
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		err = errors.Join(err, comm.Deregister(r.in), comm.Deregister(r.buf), comm.Close())
	}()
	if len(comm.Plans()) > 0 {
		plans = make([]string, len(r.sizes))
	}
	times = make([]float64, len(r.sizes))
	impl := weftColl{c: comm}
	for i, b := range r.sizes {
		if want != nil && !want(b) {
			continue
		}
		if plans != nil {
			plans[i] = comm.AllReducePlan(b/int64(r.cfg.dtype.Size()), r.cfg.dtype, r.cfg.op)
		}
		if times[i], err = r.time(impl, b, i); err != nil {
			return nil, nil, fmt.Errorf("%d bytes: %w", b, err)
		}
	}
	return times, plans, nil
}

// sweepNCCL times NCCL's AllReduce at every size.
func (r *tuneRun) sweepNCCL() (times []float64, err error) {
	nc, err := newNCCLBaseline(r.ctx, r.boot, r.dev)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, nc.close()) }()
	times = make([]float64, len(r.sizes))
	for i, b := range r.sizes {
		if times[i], err = r.time(nc, b, i); err != nil {
			return nil, fmt.Errorf("%d bytes: %w", b, err)
		}
	}
	return times, nil
}

// time measures one implementation at sizes[i] with that size's
// iteration count and returns the slowest rank's time; a wrong element on
// any rank is an error naming the size.
func (r *tuneRun) time(impl collective, bytes int64, i int) (float64, error) {
	cfg := *r.cfg
	cfg.iters = r.iters[i]
	c := layout(algorithms.AllReduce, r.in, r.buf, r.boot.Rank(), bytes/int64(cfg.dtype.Size()), cfg.dtype, false)
	c.op, c.scalar = cfg.op, cfg.scalar
	m, err := measure(r.ctx, &cfg, r.boot, r.dev, impl, r.s, &c)
	if err != nil {
		return 0, err
	}
	t, wrong, err := worstAcrossRanks(r.ctx, r.boot, m.TimeUS, m.Wrong)
	if err != nil {
		return 0, err
	}
	if wrong > 0 {
		return 0, fmt.Errorf("%s: %d wrong elements: %w", impl.name(), wrong, hal.ErrInternal)
	}
	return t, nil
}

// chooseTiers turns the measured times (times[candidate][size], 0: not
// measured) into a tier list with as few tiers as the measurements allow:
// at every size the plan used is within tuneTolerance of the fastest
// there ("near-best"), and where the plan must change, the next one is the
// near-best plan that stays near-best over the most sizes that follow
// (for covering consecutive sizes with runs, taking the longest run at
// each step gives the fewest runs). A tier ends at the last size it
// serves; the last tier is unbounded, and when the sweep ends on a 1PA
// plan the defaults' largest plan follows it. measured[i] is how many
// candidates were measured at size i.
func chooseTiers(cands []algorithms.Candidate, times [][]float64, sizes []int64, def algorithms.Config) (tiers []algorithms.Tier, measured []int) {
	best := make([]float64, len(sizes)) // fastest time per size; 0: none
	measured = make([]int, len(sizes))
	for i := range sizes {
		for ci := range cands {
			if t := times[ci]; t != nil && t[i] > 0 {
				measured[i]++
				if best[i] == 0 || t[i] < best[i] {
					best[i] = t[i]
				}
			}
		}
	}
	near := func(ci, i int) bool {
		return times[ci] != nil && times[ci][i] > 0 && times[ci][i] <= best[i]*(1+tuneTolerance)
	}
	for i := 0; i < len(sizes); {
		if best[i] == 0 {
			i++
			continue
		}
		pick, end := -1, i
		for ci := range cands {
			if !near(ci, i) {
				continue
			}
			j := i
			for j+1 < len(sizes) && near(ci, j+1) {
				j++
			}
			if pick < 0 || j > end || j == end && times[ci][i] < times[pick][i] {
				pick, end = ci, j
			}
		}
		t := cands[pick].Tier
		t.MaxBytes = sizes[end]
		tiers = append(tiers, t)
		i = end + 1
	}
	if len(tiers) == 0 || tiers[len(tiers)-1].Algo == algorithms.Algo1PA {
		defTiers := def.AllReduceTiers()
		tiers = append(tiers, defTiers[len(defTiers)-1])
	}
	tiers[len(tiers)-1].MaxBytes = 0
	return tiers, measured
}

func printTuneTable(w io.Writer, sizes []int64, defPlans []string, defTimes []float64, plans []string, times, nccl []float64) {
	fmt.Fprintf(w, "#\n# %10s  %-34s  %9s  %-34s  %9s  %6s", "size", "default plan", "time", "tuned plan", "time", "gain")
	if nccl != nil {
		fmt.Fprintf(w, "  %9s  %7s", "nccl", "speedup")
	}
	fmt.Fprintf(w, "\n# %10s  %-34s  %9s  %-34s  %9s  %6s", "(B)", "", "(us)", "", "(us)", "(x)")
	if nccl != nil {
		fmt.Fprintf(w, "  %9s  %7s", "(us)", "(x)")
	}
	fmt.Fprintln(w)
	for i, b := range sizes {
		fmt.Fprintf(w, "%12d  %-34s  %9s  %-34s  %9s  %6s", b, defPlans[i], num(defTimes[i], 9), plans[i], num(times[i], 9), num(ratio(defTimes[i], times[i]), 6))
		if nccl != nil {
			fmt.Fprintf(w, "  %9s  %7s", num(nccl[i], 9), num(ratio(nccl[i], times[i]), 7))
		}
		fmt.Fprintln(w)
	}
}
