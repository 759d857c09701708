package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

func TestChooseTiers(t *testing.T) {
	tier := func(s string) algorithms.Tier {
		t.Helper()
		tr, err := algorithms.ParseTier(s)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	cands := []algorithms.Candidate{
		{Tier: tier("1pa-LL16-1x1024")}, {Tier: tier("1pa-LL16-8x1024")}, {Tier: tier("1pa-LL8-8x1024")},
		{Tier: tier("2pa-64x1024-u4")}, {Tier: tier("2pa-128x512-u2")},
	}
	sizes := []int64{8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20}
	def := algorithms.DefaultConfig(0, 2, 132, true)
	for _, tc := range []struct {
		name  string
		times [][]float64
		want  string
	}{{
		name: "clear winners",
		times: [][]float64{
			{3.0, 3.5, 9, 0, 0, 0},
			{3.4, 3.6, 6, 20, 0, 0},
			{3.5, 4.0, 7, 22, 0, 0},
			{0, 0, 8, 15, 100, 900},
			{0, 0, 9, 16, 90, 800},
		},
		want: "1pa-LL16-1x1024@1K,1pa-LL16-8x1024@64K,2pa-64x1024-u4@1M,2pa-128x512-u2",
	}, {
		// 1pa-LL16-8x1024 is within 3% everywhere up to 64K: one tier,
		// although 1x1024 is the fastest at 8 B.
		name: "near-equal plans do not split tiers",
		times: [][]float64{
			{3.00, 3.70, 9, 0, 0, 0},
			{3.05, 3.60, 6, 0, 0, 0},
			{3.50, 4.00, 7, 0, 0, 0},
			{0, 0, 8, 15, 100, 900},
			{0, 0, 9, 15.2, 99, 901},
		},
		want: "1pa-LL16-8x1024@64K,2pa-64x1024-u4",
	}, {
		name:  "a sweep that ends on 1PA gets the defaults' largest plan",
		times: [][]float64{{3, 3, 0, 0, 0, 0}, {4, 4, 0, 0, 0, 0}, {5, 5, 0, 0, 0, 0}, nil, nil},
		want:  "1pa-LL16-1x1024@1K,2pa-128x512-u4",
	}} {
		tiers, measured := chooseTiers(cands, tc.times, sizes, def)
		if got := algorithms.FormatTiers(tiers); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
		if err := algorithms.ValidateTiers(tiers); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if tc.name == "clear winners" && fmt.Sprint(measured) != "[3 3 5 4 2 2]" {
			t.Errorf("measured %v", measured)
		}
	}
}

func TestTuneFlags(t *testing.T) {
	base := benchOptions{minBytes: "8", maxBytes: "1M", factor: 4, iters: 2, nproc: 1, dtype: "float", op: "sum", check: 1}
	for _, tc := range []struct {
		coll string
		edit func(*benchOptions)
		want string
	}{
		{"all_gather", func(o *benchOptions) { o.tune = true }, "has no tiers"},
		{"all_reduce", func(o *benchOptions) { o.tune, o.raw = true, true }, "without --raw"},
		{"all_reduce", func(o *benchOptions) { o.tune, o.blocks = true, 8 }, "chooses the launch shapes"},
		{"all_reduce", func(o *benchOptions) { o.tune, o.check = true, 0 }, "-c 0"},
		{"all_reduce", func(o *benchOptions) { o.tuneFile = "x.json" }, "go with --tune"},
	} {
		o := base
		tc.edit(&o)
		if _, err := o.validate(tc.coll); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.coll, err, tc.want)
		}
	}
	t.Setenv("WEFT_TUNING_FILE", "off")
	o := base
	o.tune = true
	if _, err := o.validate("all_reduce"); err == nil || !strings.Contains(err.Error(), "name the file") {
		t.Errorf("WEFT_TUNING_FILE=off without --tune-file: %v", err)
	}
	if _, err := parseCandidates("1pa-LL16-8x32@4K", false); err == nil {
		t.Error("a candidate with a bound: no error")
	}
}

// TestTuneHost runs the tuner over 3 goroutine ranks on hal/host, then a
// communicator that reads the file it wrote.
func TestTuneHost(t *testing.T) {
	const n = 3
	path := filepath.Join(t.TempDir(), "tuning.json")
	o := benchOptions{minBytes: "8", maxBytes: "256K", factor: 8, warmup: 1, iters: 2, check: 1, nproc: 1, dtype: "bfloat16", op: "sum",
		hal: "host", tune: true, tuneFile: path}
	cfg, err := o.validate("all_reduce")
	if err != nil {
		t.Fatal(err)
	}
	job := fmt.Sprintf("tune-%d", time.Now().UnixNano())
	out, errs := benchRanks(cfg, n, job)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v\n%s", r, err, out.String())
		}
	}
	tu, err := algorithms.LoadTuning(path)
	if err != nil {
		t.Fatal(err)
	}
	dev, err := hal.Open("host", hal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	name := dev.Info().Name
	dev.Close()
	e := tu.Lookup("host", name, n)
	if e == nil {
		t.Fatalf("no entry for host/%s/%d in %+v", name, n, tu)
	}
	tiers, err := e.Tiers()
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Sizes) != 6 || e.DataType != "bfloat16" || e.Command == "" || e.Date == "" {
		t.Errorf("entry %+v: want 6 sizes (8 B to 256 KiB by 8), bfloat16, the command and the date", e)
	}
	for _, s := range e.Sizes {
		if s.TimeUS <= 0 || s.DefaultUS <= 0 || s.Candidates == 0 || !strings.HasPrefix(s.Plan, "allreduce-") {
			t.Errorf("size %+v: want times, candidates and a plan", s)
		}
	}
	if !strings.Contains(out.String(), "# tune: chose "+algorithms.FormatTiers(tiers)) {
		t.Errorf("output does not name the chosen tiers %s:\n%s", algorithms.FormatTiers(tiers), out.String())
	}

	// A bench run reads the file: the header names it and each row's plan
	// is the tuned tier's.
	t.Setenv("WEFT_TUNING_FILE", path)
	o = benchOptions{minBytes: "8", maxBytes: "256K", factor: 8, warmup: 1, iters: 2, check: 1, nproc: 1, dtype: "float", op: "sum", hal: "host"}
	if cfg, err = o.validate("all_reduce"); err != nil {
		t.Fatal(err)
	}
	out, errs = benchRanks(cfg, n, job+"b")
	for r, err := range errs {
		if err != nil {
			t.Fatalf("bench with the tuning file: rank %d: %v", r, err)
		}
	}
	if !strings.Contains(out.String(), "(from tuning file "+path+")") {
		t.Errorf("bench header does not name the tuning file:\n%s", out.String())
	}
	for _, s := range e.Sizes {
		tier := tiers[algorithms.Select(tierChoices(tiers), s.Bytes)]
		if !strings.Contains(out.String(), "allreduce-"+tier.Name()) {
			t.Errorf("%d B: bench output does not name plan allreduce-%s:\n%s", s.Bytes, tier.Name(), out.String())
		}
	}
}

func tierChoices(tiers []algorithms.Tier) []algorithms.Choice {
	cs := make([]algorithms.Choice, len(tiers))
	for i, t := range tiers {
		cs[i].MaxBytes = t.MaxBytes
	}
	return cs
}

// tuneModel is a synthetic machine for the pruning tests: candidate c
// takes lat[c] + bytes/bw[c] µs.
func tuneModel(cands []algorithms.Candidate, sizes []int64, lat, bw []float64) [][]float64 {
	times := make([][]float64, len(cands))
	for ci, c := range cands {
		times[ci] = make([]float64, len(sizes))
		for i, b := range sizes {
			if b >= c.MinBytes && (c.MaxBytes == 0 || b <= c.MaxBytes) {
				times[ci][i] = lat[ci] + float64(b)/bw[ci]
			}
		}
	}
	return times
}

// prunedSearch measures full's times the way tuneRank does: candidates in
// order, sizes small to large, each candidate until the pruner stops it.
func prunedSearch(cands []algorithms.Candidate, order []int, full [][]float64) [][]float64 {
	p := newPruner(len(full[0]))
	got := make([][]float64, len(cands))
	for _, ci := range order {
		got[ci] = make([]float64, len(full[ci]))
		cp := p.candidate()
		for i, t := range full[ci] {
			if t == 0 {
				continue
			}
			got[ci][i] = t
			if !cp.next(i, t) {
				break
			}
		}
		p.record(got[ci])
	}
	return got
}

// TestTunePruning: on a model machine where small shapes win small sizes
// and large shapes win large ones, the pruned search measures fewer
// points, keeps every point it measures as it was, measures the fastest
// candidate of every size, and chooses the same tiers as the full one.
func TestTunePruning(t *testing.T) {
	cands := algorithms.TuneCandidates(132, true)
	var sizes []int64
	for b := int64(8); b <= 512<<20; b *= 4 {
		sizes = append(sizes, b)
	}
	lat, bw := make([]float64, len(cands)), make([]float64, len(cands))
	for ci, c := range cands {
		s := c.Tier.Shape
		// More blocks and threads: more start-up, more bandwidth (bytes/µs).
		lat[ci] = 2 + 0.02*float64(s.Blocks) + 0.001*float64(s.Threads)
		bw[ci] = 2000 * float64(s.Blocks*s.Threads) / (float64(s.Blocks*s.Threads) + 20000)
		if c.Tier.Algo == algorithms.Algo1PA {
			bw[ci] /= 4 // packets carry half data, twice the traffic
			lat[ci] -= 0.5
		}
		if c.Tier.LL == plan.LL8 {
			bw[ci] *= 0.7
		}
		if s.Unroll == 4 {
			bw[ci] *= 1.05
		}
		if s.Push {
			lat[ci] += 3
			bw[ci] *= 1.1
		}
	}
	def := algorithms.DefaultConfig(0, 2, 132, true)
	full := tuneModel(cands, sizes, lat, bw)
	got := prunedSearch(cands, tuneOrder(cands, def), full)

	var nFull, nGot int
	for ci := range cands {
		for i := range sizes {
			if full[ci][i] > 0 {
				nFull++
			}
			if got[ci][i] > 0 {
				nGot++
				if got[ci][i] != full[ci][i] {
					t.Fatalf("candidate %d size %d: measured %v, want %v", ci, i, got[ci][i], full[ci][i])
				}
			}
		}
	}
	for i := range sizes {
		best := -1
		for ci := range cands {
			if full[ci][i] > 0 && (best < 0 || full[ci][i] < full[best][i]) {
				best = ci
			}
		}
		if got[best][i] == 0 {
			t.Errorf("size %d: the fastest candidate %s was pruned", sizes[i], cands[best].Tier.Name())
		}
	}
	if nGot >= nFull*3/4 {
		t.Errorf("pruned search measured %d of %d points; want fewer than 3/4", nGot, nFull)
	}
	wantTiers, _ := chooseTiers(cands, full, sizes, def)
	gotTiers, _ := chooseTiers(cands, got, sizes, def)
	if w, g := algorithms.FormatTiers(wantTiers), algorithms.FormatTiers(gotTiers); w != g {
		t.Errorf("pruned search chose %s, the full one %s", g, w)
	}
	t.Logf("measured %d of %d points; tiers %s", nGot, nFull, algorithms.FormatTiers(gotTiers))
}

// TestPrunerRules pins the rule: two consecutive losses by more than 25%,
// the second no smaller, stop a candidate; catching up does not.
func TestPrunerRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		best  []float64
		times []float64
		want  int // sizes measured
	}{
		{"loses and falls back", []float64{10, 10, 10, 10}, []float64{13, 14, 20, 30}, 2},
		{"catches up", []float64{10, 10, 10, 10}, []float64{20, 16, 13, 9}, 4},
		{"one loss", []float64{10, 10, 10, 10}, []float64{20, 10, 20, 10}, 4},
		{"within the margin", []float64{10, 10, 10, 10}, []float64{12.4, 12.5, 12.5, 12.5}, 4},
		{"no best yet", []float64{0, 0, 0, 0}, []float64{20, 30, 40, 50}, 4},
	} {
		p := newPruner(len(tc.best))
		copy(p.best, tc.best)
		cp := p.candidate()
		n := 0
		for i, v := range tc.times {
			n++
			if !cp.next(i, v) {
				break
			}
		}
		if n != tc.want {
			t.Errorf("%s: measured %d sizes, want %d", tc.name, n, tc.want)
		}
	}
}

// TestTuneOrder: the default tiers' plans are measured first, the rest
// in TuneCandidates' order.
func TestTuneOrder(t *testing.T) {
	cands := algorithms.TuneCandidates(132, true)
	def := algorithms.DefaultConfig(0, 2, 132, true)
	order := tuneOrder(cands, def)
	if len(order) != len(cands) {
		t.Fatalf("%d in the order, %d candidates", len(order), len(cands))
	}
	var first []string
	for _, ci := range order[:len(def.AllReduceTiers())] {
		first = append(first, cands[ci].Tier.Name())
	}
	var want []string
	for _, c := range cands {
		for _, d := range def.AllReduceTiers() {
			if d.Name() == c.Tier.Name() {
				want = append(want, c.Tier.Name())
			}
		}
	}
	if fmt.Sprint(first) != fmt.Sprint(want) || len(want) == 0 {
		t.Errorf("first measured %v, want the default plans %v", first, want)
	}
}
