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

	"golang.org/x/term"

	"github.com/schollz/progressbar/v3"
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

// tunePrune is the margin of the pruning (pruner): a candidate that
// lost to the fastest candidate measured before it by more than this
// fraction at two consecutive sizes, without catching up, is not measured
// at larger sizes.
const tunePrune = 0.25

// pruner decides, candidate by candidate in measurement order and size by
// size from small to large, whether a candidate is still worth measuring.
// best[i] is the fastest candidate time at size i so far (µs; 0: none).
// A candidate stops after size i when it was more than tunePrune slower
// than best at sizes i−1 and i, both in its range, and its ratio to best
// did not shrink from i−1 to i: a plan that loses at small sizes but
// gains with size (more blocks: more start-up, more bandwidth) keeps
// being measured. What a candidate measured is kept; the candidate that
// is fastest at a size was never behind best there, so it is always
// measured at the next size of its range.
type pruner struct {
	best []float64
}

// candPrune is one candidate's state in a pruner.
type candPrune struct {
	p         *pruner
	lastI     int     // the last size measured, −1: none
	lastRatio float64 // its time over best there (0: no best)
}

func newPruner(sizes int) *pruner { return &pruner{best: make([]float64, sizes)} }

func (p *pruner) candidate() *candPrune { return &candPrune{p: p, lastI: -1} }

// record adds a measured candidate's times (µs per size; 0: not measured)
// to best.
func (p *pruner) record(times []float64) {
	for i, t := range times {
		if t > 0 && (p.best[i] == 0 || t < p.best[i]) {
			p.best[i] = t
		}
	}
}

// next reports whether the candidate, having taken t µs at size i, is
// measured at the sizes after i.
func (c *candPrune) next(i int, t float64) bool {
	r := 0.0
	if b := c.p.best[i]; b > 0 {
		r = t / b
	}
	lose := r > 1+tunePrune && c.lastI == i-1 && c.lastRatio > 1+tunePrune && r >= c.lastRatio
	c.lastI, c.lastRatio = i, r
	return !lose
}

// tuneOrder is the order in which the tuner measures cands: those whose
// plan is one of the default tiers first (they set a strong best for the
// pruning early), the others in their order. chooseTiers sees the
// candidates in cands' order whatever the measurement order.
func tuneOrder(cands []algorithms.Candidate, def algorithms.Config) []int {
	isDef := map[string]bool{}
	for _, t := range def.AllReduceTiers() {
		isDef[t.Name()] = true
	}
	var first, rest []int
	for i, c := range cands {
		if isDef[c.Tier.Name()] {
			first = append(first, i)
		} else {
			rest = append(rest, i)
		}
	}
	return append(first, rest...)
}

// tuneProgress shows the search: a bar with the time left on a terminal,
// else one line per candidate with the time spent and an estimate of the
// time left.
type tuneProgress struct {
	out   io.Writer
	bar   *progressbar.ProgressBar
	start time.Time
	total int
	done  int
}

func newTuneProgress(out io.Writer, total int) *tuneProgress {
	p := &tuneProgress{out: out, start: time.Now(), total: total}
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription("tune"), progressbar.OptionShowCount(), progressbar.OptionSetWidth(30),
			progressbar.OptionShowElapsedTimeOnFinish(), progressbar.OptionClearOnFinish())
	}
	return p
}

// step reports one candidate measured (sizes of them, pruned after the
// last when pruned) in took.
func (p *tuneProgress) step(name string, sizes int, pruned bool, took time.Duration) {
	p.done++
	if p.bar != nil {
		p.bar.Describe(name)
		p.bar.Add(1)
		return
	}
	el := time.Since(p.start)
	left := time.Duration(float64(el) / float64(p.done) * float64(p.total-p.done))
	note := ""
	if pruned {
		note = ", pruned"
	}
	fmt.Fprintf(p.out, "# tune: %3d/%d %-34s %2d sizes%-8s %8s  (elapsed %s, about %s left)\n", p.done, p.total, name, sizes, note,
		took.Round(time.Millisecond), el.Round(time.Second), left.Round(time.Second))
}

func (p *tuneProgress) finish() {
	if p.bar != nil {
		p.bar.Finish()
	}
}

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
	check   *checker
	// measured counts the measurements made (candidate × size).
	measured int
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

	r.check = newChecker(dev, rank, n, top/es)
	t0 := time.Now()

	// The defaults first: the reference column, and the times that size
	// the iteration counts of every later measurement.
	def := algorithms.DefaultConfig(rank, n, info.Multiprocessors, gpu)
	defTimes, defPlans, err := r.sweep(def, nil, nil)
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
	prune := newPruner(len(r.sizes))
	progress := newTuneProgress(out, len(cands))
	npruned := 0
	for _, ci := range tuneOrder(cands, def) {
		c := cands[ci]
		cc := def
		defTiers := def.AllReduceTiers()
		var ok bool
		if cc.AllReduce, ok = algorithms.CandidateTiers(c, r.sizes, defTiers[len(defTiers)-1]); !ok {
			progress.step(c.Tier.Name(), 0, false, 0)
			continue
		}
		start := time.Now()
		cp := prune.candidate()
		pruned := false
		var sizes int
		times[ci], _, err = r.sweep(cc, func(i int) bool {
			b := r.sizes[i]
			return !pruned && b >= c.MinBytes && (c.MaxBytes == 0 || b <= c.MaxBytes)
		}, func(i int, t float64) {
			sizes++
			pruned = !cp.next(i, t)
		})
		if err != nil {
			progress.finish()
			return fmt.Errorf("tune: rank %d: candidate %s: %w", rank, c.Tier.Name(), err)
		}
		prune.record(times[ci])
		pruned = pruned && sizes < inRange(c, r.sizes)
		if pruned {
			npruned++
		}
		progress.step(c.Tier.Name(), sizes, pruned, time.Since(start))
	}
	progress.finish()
	search := time.Since(t0)
	tiers, winners := chooseTiers(cands, times, r.sizes, def)
	fmt.Fprintf(out, "# tune: chose %s\n", algorithms.FormatTiers(tiers))

	// Verify: a communicator with the chosen tiers, beside the defaults
	// (and NCCL with --baseline nccl), every element checked.
	tc := def
	tc.AllReduce = tiers
	tunedTimes, tunedPlans, err := r.sweep(tc, nil, nil)
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
	fmt.Fprintf(out, "# tune: search %s (%d of %d candidate-size measurements, %d candidates pruned), with the check of the chosen tiers %s\n",
		search.Round(100*time.Millisecond), r.measured, tuneMeasurements(cands, r.sizes), npruned, time.Since(t0).Round(100*time.Millisecond))
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
// zero-copy AllReduce, out of place, from the smallest size to the
// largest, at every size i that want accepts (nil: all; asked again after
// every measurement, so that it can stop a candidate), checking every
// element; done, when not nil, sees each size's time (µs). It returns the
// slowest rank's time per size (0 where not measured) and the plan that
// served each size (nil when the communicator has no zero-copy AllReduce
// plans).
func (r *tuneRun) sweep(c algorithms.Config, want func(i int) bool, done func(i int, t float64)) (times []float64, plans []string, err error) {
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
		if want != nil && !want(i) {
			continue
		}
		if plans != nil {
			plans[i] = comm.AllReducePlan(b/int64(r.cfg.dtype.Size()), r.cfg.dtype, r.cfg.op)
		}
		if times[i], err = r.time(impl, b, i); err != nil {
			return nil, nil, fmt.Errorf("%d bytes: %w", b, err)
		}
		if want != nil {
			r.measured++
		}
		if done != nil {
			done(i, times[i])
		}
	}
	return times, plans, nil
}

// inRange counts the sizes c is measured at when nothing is pruned.
func inRange(c algorithms.Candidate, sizes []int64) int {
	n := 0
	for _, b := range sizes {
		if b >= c.MinBytes && (c.MaxBytes == 0 || b <= c.MaxBytes) {
			n++
		}
	}
	return n
}

// tuneMeasurements counts the candidate-size measurements of a search
// without pruning.
func tuneMeasurements(cands []algorithms.Candidate, sizes []int64) int {
	n := 0
	for _, c := range cands {
		n += inRange(c, sizes)
	}
	return n
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
	cfg.iters, cfg.timeBudget = r.iters[i], tuneBudget
	c := layout(algorithms.AllReduce, r.in, r.buf, r.boot.Rank(), bytes/int64(cfg.dtype.Size()), cfg.dtype, false)
	c.op, c.scalar = cfg.op, premulScalar(cfg.op, cfg.dtype, r.boot.Rank())
	m, err := measure(r.ctx, &cfg, r.boot, r.dev, impl, r.s, &c, r.check)
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
