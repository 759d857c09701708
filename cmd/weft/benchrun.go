package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/env"
)

// collective is one implementation under test: weft, or the baseline.
type collective interface {
	name() string
	run(c *collCall, s hal.Stream) error
	synchronize(s hal.Stream) error
	close() error
}

// measurement of one implementation at one size. TimeUS < 0: the
// implementation does not take the call (N/A); Wrong < 0: not checked.
type measurement struct {
	TimeUS float64 `json:"time"`
	AlgBW  float64 `json:"alg_bw"`
	BusBW  float64 `json:"bus_bw"`
	Wrong  int64   `json:"nwrong"`
	// Iters and Replays are the timed iterations and graph replays used
	// (after the time budget's cut; budgetShape).
	Iters   int `json:"-"`
	Replays int `json:"-"`
}

type sizeResult struct {
	Size       int64        `json:"size"`
	Count      int64        `json:"count"`
	Type       string       `json:"type"`
	Redop      string       `json:"redop"`
	Root       string       `json:"root"`
	OutOfPlace measurement  `json:"out_of_place"`
	InPlace    measurement  `json:"in_place"`
	Baseline   *baselineRes `json:"baseline,omitempty"`
	Iterations int          `json:"actual_iterations"`
	Name       string       `json:"experiment_name"`
	// Plan is the weft plan that served the out-of-place call (PlanName).
	Plan string `json:"plan,omitempty"`
}

type baselineRes struct {
	Name       string      `json:"name"`
	OutOfPlace measurement `json:"out_of_place"`
	InPlace    measurement `json:"in_place"`
	// Speedup is baseline time over weft time (> 1: weft is faster).
	SpeedupOutOfPlace float64 `json:"speedup_out_of_place"`
	SpeedupInPlace    float64 `json:"speedup_in_place"`
}

// benchCount is NCCL's count argument for a size of bytes as nccl-tests
// sizes it (its *GetCollByteCount): the whole size for AllReduce,
// Broadcast, Reduce and SendRecv; for AllGather, ReduceScatter and
// AllToAll the per-rank share, rounded down to a multiple of 16 bytes, so
// that the n×count buffer is the size printed.
func benchCount(coll algorithms.Collective, bytes int64, t plan.DataType, n int) int64 {
	es := int64(t.Size())
	switch coll {
	case algorithms.AllGather, algorithms.ReduceScatter, algorithms.AllToAll:
		per := 16 / es
		return bytes / es / int64(n) / per * per
	}
	return bytes / es
}

func benchRank(ctx context.Context, cfg *benchConfig, boot bootstrap.Bootstrap, localRank int, jobID string, out io.Writer) (err error) {
	rank, size := boot.Rank(), boot.Size()
	halName := cfg.halName
	if halName == "" {
		halName = env.String("WEFT_HAL")
	}
	if halName == "" {
		if halName, _, err = hal.Auto(); err != nil {
			return fmt.Errorf("bench: rank %d: %w", rank, err)
		}
	}
	dev, err := hal.Open(halName, hal.Config{Ordinal: localRank, Rank: rank, JobID: jobID})
	if err != nil {
		return fmt.Errorf("bench: rank %d: %w", rank, err)
	}
	defer dev.Close()
	if cfg.tune {
		return tuneRank(ctx, cfg, boot, dev, out)
	}
	info := dev.Info()
	opts := weft.Options{}
	if cfg.blocks > 0 || cfg.llMax > 0 || cfg.threads > 0 || cfg.unroll > 0 || cfg.pushWindow > 0 {
		c := algorithms.DefaultConfig(rank, size, info.Multiprocessors, info.Backend != "host")
		for _, s := range []*algorithms.Shape{&c.Mid, &c.Large} {
			if cfg.blocks > 0 {
				s.Blocks = cfg.blocks
			}
			if cfg.threads > 0 {
				s.Threads = cfg.threads
			}
			if cfg.unroll > 0 {
				s.Unroll = cfg.unroll
			}
		}
		if cfg.llMax > 0 {
			c.LLMaxBytes = cfg.llMax
		}
		if cfg.pushWindow > 0 {
			c.Large.Push, c.Large.Window = true, cfg.pushWindow
		}

		opts.Config = &c
	}
	comm, err := weft.NewComm(ctx, boot, dev, opts)
	if err != nil {
		return fmt.Errorf("bench: rank %d: %w", rank, err)
	}
	impls := []collective{weftColl{c: comm, raw: cfg.raw}}
	defer func() {
		for _, c := range impls {
			err = errors.Join(err, c.close())
		}
	}()
	if cfg.baseline == "nccl" {
		nc, err := newNCCLBaseline(ctx, boot, dev)
		if err != nil {
			return fmt.Errorf("bench: rank %d: baseline: %w", rank, err)
		}
		impls = append(impls, nc)
	}
	s, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer s.Close()
	maxBytes := max(cfg.maxB, 16)
	in, err := dev.Alloc(maxBytes)
	if err != nil {
		return fmt.Errorf("bench: rank %d: input buffer of %d bytes: %w", rank, maxBytes, err)
	}
	defer in.Free()
	outBuf, err := dev.Alloc(maxBytes)
	if err != nil {
		return fmt.Errorf("bench: rank %d: output buffer of %d bytes: %w", rank, maxBytes, err)
	}
	defer outBuf.Free()
	defer comm.Deregister(in)
	defer comm.Deregister(outBuf)

	if cfg.coll.Rooted() && cfg.root >= size {
		return fmt.Errorf("bench: -r %d: the root must be a rank below %d: %w", cfg.root, size, hal.ErrInvalidArgument)
	}
	hdr, err := gatherDevices(ctx, boot, dev, comm)
	if err != nil {
		return err
	}
	var plans []string
	if cfg.coll == algorithms.AllReduce {
		plans = append(comm.Plans(), "(from "+comm.PlanSource()+")")
	}
	printHeader(out, cfg, size, hdr, plans)
	var results []sizeResult
	var wrongTotal int64
	var busSum float64
	redop, root := "none", "-1"
	if cfg.coll.Reduces() {
		redop = cfg.op.String()
	}
	if cfg.coll.Rooted() {
		root = fmt.Sprint(cfg.root)
	}
	var chk *checker
	if cfg.check {
		chk = newChecker(dev, rank, size, benchCount(cfg.coll, cfg.sizes[len(cfg.sizes)-1], cfg.dtype, size))
	}
	if cfg.timeBudget > 0 && cfg.warmup >= 2 {
		fmt.Fprintf(out, "# timed iterations cut to fit %v per measurement (--time-budget) where '# cut' lines say\n#\n", cfg.timeBudget)
	}
	for _, bytes := range cfg.sizes {
		count := benchCount(cfg.coll, bytes, cfg.dtype, size)
		probe := layout(cfg.coll, in, outBuf, rank, count, cfg.dtype, false)
		bytes = max(probe.sendBytes(size), probe.recvBytes(size))
		res := sizeResult{Size: bytes, Count: count, Type: cfg.dtype.String(), Redop: redop, Root: root,
			Iterations: cfg.iters, Name: "weft-" + cfg.collective}
		var ms [][2]measurement
		for i, impl := range impls {
			var pair [2]measurement
			for k, inPlace := range []bool{false, true} {
				c := layout(cfg.coll, in, outBuf, rank, count, cfg.dtype, inPlace)
				c.op, c.root, c.scalar = cfg.op, cfg.root, premulScalar(cfg.op, cfg.dtype, rank)
				if i == 0 && !inPlace {
					res.Plan = impls[0].(weftColl).planName(&c)
				}
				m, err := measure(ctx, cfg, boot, dev, impl, s, &c, chk)
				if err != nil {
					return fmt.Errorf("bench: rank %d: %s %s: %w", rank, impl.name(), describe(&c), err)
				}
				// nccl-tests does not check NCCL's in-place AllToAll and
				// SendRecv (N/A): NCCL reads and writes the same buffer
				// concurrently there (measured on 2×H200: wrong elements
				// from 8 B up), while weft stages such sends.
				if i > 0 && inPlace && (cfg.coll == algorithms.AllToAll || cfg.coll == algorithms.SendRecv) {
					m.Wrong = -1
				}
				pair[k] = m
			}
			ms = append(ms, pair)
		}
		// The slowest rank's time is the collective's time.
		for i := range ms {
			for k := range ms[i] {
				t, wrong, err := worstAcrossRanks(ctx, boot, ms[i][k].TimeUS, ms[i][k].Wrong)
				if err != nil {
					return err
				}
				ms[i][k].TimeUS, ms[i][k].Wrong = t, wrong
				if t > 0 {
					ms[i][k].AlgBW = float64(bytes) / (t * 1e-6) / 1e9
				}
				ms[i][k].BusBW = ms[i][k].AlgBW * cfg.coll.BusFactor(size)
			}
		}
		res.OutOfPlace, res.InPlace = ms[0][0], ms[0][1]
		res.Iterations = res.OutOfPlace.Iters
		if note := cutNote(cfg, impls, ms); note != "" {
			fmt.Fprintf(out, "# cut %d B: %s\n", bytes, note)
		}
		wrongTotal += checked(res.OutOfPlace.Wrong) + checked(res.InPlace.Wrong)
		busSum += res.OutOfPlace.BusBW
		if len(ms) > 1 {
			b := &baselineRes{Name: impls[1].name(), OutOfPlace: ms[1][0], InPlace: ms[1][1]}
			b.SpeedupOutOfPlace = ratio(b.OutOfPlace.TimeUS, res.OutOfPlace.TimeUS)
			b.SpeedupInPlace = ratio(b.InPlace.TimeUS, res.InPlace.TimeUS)
			res.Baseline = b
			wrongTotal += checked(b.OutOfPlace.Wrong) + checked(b.InPlace.Wrong)
		}
		printRow(out, cfg, res)
		results = append(results, res)
	}
	avgBus := 0.0
	if len(cfg.sizes) > 0 {
		avgBus = busSum / float64(len(cfg.sizes))
	}
	status := "OK"
	if wrongTotal != 0 {
		status = "FAILED"
	}
	fmt.Fprintf(out, "# %-20s : %d %s\n", "Out of bounds values", wrongTotal, status)
	fmt.Fprintf(out, "# %-20s : %g\n", "Avg bus bandwidth", round2(avgBus))
	fmt.Fprintf(out, "#\n# Collective test concluded: weft %s\n", cfg.collective)
	if rank == 0 && cfg.jsonFile != "" {
		if err := writeJSON(cfg, hdr, results, wrongTotal, avgBus); err != nil {
			return err
		}
	}
	if rank == 0 && cfg.plotFile != "" {
		if err := writePlot(cfg.plotFile, newReport(cfg, hdr, results)); err != nil {
			return err
		}
	}
	if wrongTotal != 0 {
		return fmt.Errorf("bench: %d wrong elements: %w", wrongTotal, hal.ErrInternal)
	}
	return nil
}

// cutNote names, for a size where the time budget cut the timed calls,
// the iterations and graph replays each implementation used ("" where
// nothing was cut).
func cutNote(cfg *benchConfig, impls []collective, ms [][2]measurement) string {
	var parts []string
	cut := false
	for i, pair := range ms {
		for k, m := range pair {
			if m.TimeUS < 0 {
				continue
			}
			cut = cut || m.Iters < cfg.iters || m.Replays < cfg.graphs
			where := [2]string{"out-of-place", "in-place"}[k]
			if cfg.graphs > 0 {
				parts = append(parts, fmt.Sprintf("%s %s %d×%d", impls[i].name(), where, m.Iters, m.Replays))
			} else {
				parts = append(parts, fmt.Sprintf("%s %s %d", impls[i].name(), where, m.Iters))
			}
		}
	}
	if !cut {
		return ""
	}
	asked := fmt.Sprint(cfg.iters)
	if cfg.graphs > 0 {
		asked = fmt.Sprintf("%d×%d", cfg.iters, cfg.graphs)
	}
	return fmt.Sprintf("timed calls (iterations×replays) %s of %s", strings.Join(parts, ", "), asked)
}

// minIters is the fewest timed iterations the time budget leaves: 2 for
// the tuner (whose budget is small), else 1.
func (c *benchConfig) minIters() int {
	if c.tune {
		return 2
	}
	return 1
}

// checked is a #wrong figure as a count: -1 (not checked) counts as 0.
func checked(w int64) int64 { return max(w, 0) }

func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// measure times one implementation on one call and checks its result
// with k (nil: not checked). An implementation that does not take the
// call (ErrNotSupported) gives N/A.
//
// With cfg.timeBudget > 0 and at least 2 warm-up calls, the warm-up calls
// are timed too, and the timed iterations (and then the graph replays)
// are cut so that iterations × replays × the slowest rank's warm-up time
// per call stays within the budget (budgetShape); the counts used are in
// the result's Iters and Replays.
func measure(ctx context.Context, cfg *benchConfig, boot bootstrap.Bootstrap, dev hal.Device, impl collective, s hal.Stream,
	c *collCall, k *checker) (measurement, error) {
	run := func() error { return impl.run(c, s) }
	if cfg.blocking {
		run = func() error {
			if err := impl.run(c, s); err != nil {
				return err
			}
			return impl.synchronize(s)
		}
	}
	na := measurement{TimeUS: -1, Wrong: -1}
	var warm [2]hal.Event
	timeWarmup := cfg.timeBudget > 0 && cfg.warmup >= 2
	for i := 0; i < cfg.warmup; i++ {
		if err := run(); err != nil {
			if i == 0 && unsupported(c, err) {
				return na, boot.Barrier(ctx)
			}
			return measurement{}, err
		}
		// The first call may compile and load; time the others.
		if timeWarmup && (i == 0 || i == cfg.warmup-1) {
			e, err := s.Record()
			if err != nil {
				return measurement{}, err
			}
			defer e.Close()
			warm[min(i, 1)] = e
		}
	}
	if err := impl.synchronize(s); err != nil {
		return measurement{}, err
	}
	iters, replays := cfg.iters, cfg.graphs
	if timeWarmup {
		el, err := warm[1].Elapsed(warm[0])
		if err != nil {
			return measurement{}, err
		}
		// Every rank must make the same number of calls: all use the
		// slowest rank's estimate. The exchange is also the barrier.
		per, _, err := worstAcrossRanks(ctx, boot, float64(el)/float64(cfg.warmup-1), 0)
		if err != nil {
			return measurement{}, err
		}
		iters, replays = budgetShape(time.Duration(per), cfg.iters, cfg.graphs, cfg.minIters(), cfg.timeBudget)
	} else if err := boot.Barrier(ctx); err != nil {
		return measurement{}, err
	}
	m := measurement{Iters: iters, Replays: replays}
	start, err := s.Record()
	if err != nil {
		return m, err
	}
	ops := iters
	if replays > 0 {
		gc, ok := dev.(hal.GraphCapturer)
		if !ok {
			return m, fmt.Errorf("-G: backend %s cannot capture graphs: %w", dev.Info().Backend, hal.ErrNotSupported)
		}
		if err := gc.BeginCapture(s); err != nil {
			return m, err
		}
		var runErr error
		for i := 0; i < iters && runErr == nil; i++ {
			runErr = impl.run(c, s)
		}
		g, err := gc.EndCapture(s)
		if err := errors.Join(runErr, err); err != nil {
			if cfg.warmup == 0 && unsupported(c, runErr) {
				return na, boot.Barrier(ctx)
			}
			return m, err
		}
		defer g.Close()
		// The start event was recorded before the capture; record a fresh
		// one so the capture's host time is not counted.
		start.Close()
		if start, err = s.Record(); err != nil {
			return m, err
		}
		for j := 0; j < replays; j++ {
			if err := g.Launch(s); err != nil {
				return m, err
			}
		}
		ops *= replays
	} else {
		for i := 0; i < iters; i++ {
			if err := run(); err != nil {
				if i == 0 && cfg.warmup == 0 && unsupported(c, err) {
					return na, boot.Barrier(ctx)
				}
				return m, err
			}
		}
	}
	end, err := s.Record()
	if err != nil {
		return m, err
	}
	if err := impl.synchronize(s); err != nil {
		return m, err
	}
	el, err := end.Elapsed(start)
	if err != nil {
		return m, err
	}
	start.Close()
	end.Close()
	m.TimeUS = float64(el) / float64(time.Microsecond) / float64(ops)
	m.Wrong = -1
	if k != nil {
		if m.Wrong, err = checkOnce(k, impl, s, c); err != nil {
			return m, err
		}
	}
	return m, nil
}

// budgetShape returns the timed iterations and graph replays (0: no
// graph) for calls of about per each so that iters × max(replays, 1) ×
// per stays within budget: iterations are cut first, down to minIters,
// then replays, down to 1. Neither grows above what was asked; per ≤ 0
// or budget ≤ 0 cuts nothing.
func budgetShape(per time.Duration, iters, replays, minIters int, budget time.Duration) (int, int) {
	if per <= 0 || budget <= 0 {
		return iters, replays
	}
	calls := int(min(budget/per, time.Duration(math.MaxInt32))) // calls that fit
	if replays == 0 {
		return max(min(iters, calls), min(minIters, iters)), 0
	}
	it := max(min(iters, calls/replays), min(minIters, iters))
	return it, max(min(replays, calls/it), 1)
}

// checkOnce writes the inputs of c, poisons its output, runs it once and
// counts the output elements that differ from the exact result (k).
func checkOnce(k *checker, impl collective, s hal.Stream, c *collCall) (int64, error) {
	if err := k.prepare(c); err != nil {
		return 0, err
	}
	if err := impl.run(c, s); err != nil {
		return 0, err
	}
	if err := impl.synchronize(s); err != nil {
		return 0, err
	}
	w, _, err := k.verify(c)
	return w, err
}

// worstAcrossRanks returns the largest time and the sum of wrong elements
// over all ranks (−1, not checked, when any rank did not check).
func worstAcrossRanks(ctx context.Context, boot bootstrap.Bootstrap, t float64, wrong int64) (float64, int64, error) {
	b, _ := json.Marshal([2]float64{t, float64(wrong)})
	all, err := boot.AllGather(ctx, b)
	if err != nil {
		return 0, 0, err
	}
	worst := math.Inf(-1)
	var total int64
	for r, x := range all {
		var v [2]float64
		if err := json.Unmarshal(x, &v); err != nil {
			return 0, 0, fmt.Errorf("bench: rank %d sent malformed results: %v: %w", r, err, hal.ErrRemote)
		}
		worst = max(worst, v[0])
		if v[1] < 0 {
			total = -1
		} else if total >= 0 {
			total += int64(v[1])
		}
	}
	return worst, total, nil
}

type deviceLine struct {
	Rank      int    `json:"rank"`
	Pid       int    `json:"pid"`
	Host      string `json:"host"`
	Device    int    `json:"device"`
	BusID     string `json:"bus_id"`
	Name      string `json:"name"`
	Backend   string `json:"backend"`
	WeftBytes int64  `json:"weft_memory_bytes"`
}

func gatherDevices(ctx context.Context, boot bootstrap.Bootstrap, dev hal.Device, comm *weft.Comm) ([]deviceLine, error) {
	info := dev.Info()
	host, _ := os.Hostname()
	me := deviceLine{Rank: boot.Rank(), Pid: os.Getpid(), Host: host, Device: info.Ordinal, BusID: info.PCIBusID,
		Name: info.Name, Backend: info.Backend, WeftBytes: comm.MemoryBytes()}
	b, _ := json.Marshal(me)
	all, err := boot.AllGather(ctx, b)
	if err != nil {
		return nil, err
	}
	lines := make([]deviceLine, len(all))
	for i, x := range all {
		if err := json.Unmarshal(x, &lines[i]); err != nil {
			return nil, fmt.Errorf("bench: rank %d sent a malformed device line: %v: %w", i, err, hal.ErrRemote)
		}
	}
	return lines, nil
}

func printHeader(w io.Writer, cfg *benchConfig, n int, devs []deviceLine, plans []string) {
	step := fmt.Sprintf("%d(factor)", cfg.stepFactor)
	if cfg.stepBytes > 0 {
		step = fmt.Sprintf("%d(bytes)", cfg.stepBytes)
	}
	fmt.Fprintf(w, "# weft bench %s\n", cfg.collective)
	fmt.Fprintf(w, "# nRanks %d minBytes %d maxBytes %d step: %s warmup iters: %d iters: %d validation: %d graph: %d\n",
		n, cfg.minB, cfg.maxB, step, cfg.warmup, cfg.iters, b2i(cfg.check), cfg.graphs)
	fmt.Fprintf(w, "#\n# Using devices\n")
	var maxMem int64
	for _, d := range devs {
		fmt.Fprintf(w, "#  Rank %2d Pid %6d on %10s device %2d [%s] %s (%s)\n", d.Rank, d.Pid, d.Host, d.Device, d.BusID, d.Name, d.Backend)
		maxMem = max(maxMem, d.WeftBytes)
	}
	fmt.Fprintf(w, "# weft device memory per rank (scratch, semaphores, state): %.2f MiB at most\n", float64(maxMem)/(1<<20))
	if len(plans) > 0 {
		fmt.Fprintf(w, "# weft plans: %s\n", strings.Join(plans, ", "))
	}
	fmt.Fprintf(w, "# plan: the weft plan that served the out-of-place call of each size; (sm=B/D): thread blocks (SMs) a Launch plan occupied / those moving data\n")
	fmt.Fprintf(w, "#\n")
	planHdr := func(s string) string { return "  " + s }
	base := cfg.baseline != ""
	if base {
		fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %-34s  %-34s  %-30s  %-30s  %s\n", "", "", "", "", "",
			"weft out-of-place", "weft in-place", cfg.baseline+" out-of-place", cfg.baseline+" in-place", "speedup")
		fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %7s  %6s  %6s  %5s  %5s\n",
			"size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong",
			"time", "busbw", "#wrong", "time", "busbw", "#wrong", "oop", "ip"+planHdr("plan"))
		fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %7s  %6s  %6s  %5s  %5s\n",
			"(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "",
			"(us)", "(GB/s)", "", "(us)", "(GB/s)", "", "(x)", "(x)")
		return
	}
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "", "")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s%s\n", "size", "count", "type", "redop", "root",
		"time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", planHdr("plan"))
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "",
		"(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// num formats a value in width characters the way nccl-tests does: two
// decimals while they fit, then fewer.
func num(v float64, width int) string {
	s := fmt.Sprintf("%*.2f", width, v)
	if len(s) > width {
		s = fmt.Sprintf("%*.1f", width, v)
	}
	if len(s) > width {
		s = fmt.Sprintf("%*.0f", width, v)
	}
	return s
}

func wrongStr(w int64) string {
	if w < 0 {
		return "N/A"
	}
	return fmt.Sprint(w)
}

// numNA is num, or N/A for a call the implementation does not take.
func numNA(v float64, width int, m measurement) string {
	if m.TimeUS < 0 {
		return fmt.Sprintf("%*s", width, "N/A")
	}
	return num(v, width)
}

func printRow(w io.Writer, cfg *benchConfig, r sizeResult) {
	fmt.Fprintf(w, "%12d  %12d  %8s  %6s  %6s", r.Size, r.Count, r.Type, r.Redop, r.Root)
	for _, m := range []measurement{r.OutOfPlace, r.InPlace} {
		fmt.Fprintf(w, "  %7s  %6s  %6s  %6s", numNA(m.TimeUS, 7, m), numNA(m.AlgBW, 6, m), numNA(m.BusBW, 6, m), wrongStr(m.Wrong))
	}
	if b := r.Baseline; b != nil {
		for _, m := range []measurement{b.OutOfPlace, b.InPlace} {
			fmt.Fprintf(w, "  %7s  %6s  %6s", numNA(m.TimeUS, 7, m), numNA(m.BusBW, 6, m), wrongStr(m.Wrong))
		}
		fmt.Fprintf(w, "  %5s  %5s", num(b.SpeedupOutOfPlace, 5), num(b.SpeedupInPlace, 5))
	}
	p := r.Plan
	if p == "" {
		p = "-"
	}
	fmt.Fprintf(w, "  %s", p)
	fmt.Fprintln(w)
}

func writeJSON(cfg *benchConfig, devs []deviceLine, results []sizeResult, wrong int64, avgBus float64) error {
	doc := map[string]any{
		"config": map[string]any{
			"nranks": len(devs), "minimum_bytes": cfg.minB, "maximum_bytes": cfg.maxB, "step_factor": cfg.stepFactor,
			"step_bytes": cfg.stepBytes, "warmup_iters": cfg.warmup, "iterations": cfg.iters, "validation": b2i(cfg.check),
			"graph": cfg.graphs, "baseline": cfg.baseline, "collective": cfg.collective, "date": time.Now().UTC().Format(time.RFC3339),
			"root": cfg.root, "blocking": b2i(cfg.blocking), "raw": cfg.raw,
		},
		"devices":               devs,
		"results":               results,
		"out_of_bounds":         map[string]any{"count": wrong, "okay": wrong == 0},
		"average_bus_bandwidth": map[string]any{"bandwidth": avgBus, "okay": "unchecked"},
		"errors":                []string{},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(cfg.jsonFile, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("bench: write %s: %v: %w", cfg.jsonFile, err, hal.ErrSystem)
	}
	return nil
}
