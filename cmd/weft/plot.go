package main

// weft plot and weft bench --plot: bus bandwidth and time against message
// size, weft beside the baseline, drawn from a bench run's results (or the
// JSON that `weft bench -J` writes) as SVG.

import (
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// benchReport is what a plot is drawn from: the parts of `weft bench -J`'s
// JSON (writeJSON) that say what was measured, where and when.
type benchReport struct {
	Config struct {
		NRanks     int    `json:"nranks"`
		Collective string `json:"collective"`
		Date       string `json:"date"`
		Baseline   string `json:"baseline"`
	} `json:"config"`
	Devices []deviceLine `json:"devices"`
	Results []sizeResult `json:"results"`
	// machineLine, when set, names the machine in the title instead of
	// Devices (cbench logs do not list their devices).
	machineLine string
}

var plotOpts struct {
	json, out                       string
	cbench, cbenchBase, machine, on string
}

var plotCmd = &cobra.Command{
	Use:   "plot -J results.json -o FILE.svg",
	Short: "draw busbw and time against size from the JSON that weft bench -J wrote",
	Long: `plot draws, from the JSON that weft bench -J writes, two panels side by side:
bus bandwidth (GB/s) and time (µs, log scale) against the message size (bytes,
log2 scale), for weft and for the baseline (NCCL) when the run measured one,
out of place. The title names the collective, the data type, the devices
(name, rank count, backend) and the date of the run. Sizes where an
implementation did not take the call (N/A) are left out of its curve.
weft bench --plot FILE.svg draws the same picture at the end of a run.

With --cbench it draws from examples/cbench's output instead (the C-ABI runs:
weft's log, and NCCL's with --cbench-baseline), one SVG per collective and data
type into the directory -o, named COLLECTIVE-TYPE.svg; --machine and --date
fill the titles (cbench's output names neither).`,
	Example: `  weft bench all_reduce -b 8 -e 1G -f 4 --nproc 2 --baseline nccl -J ar.json
  weft plot -J ar.json -o ar.svg
  weft plot --cbench cbench-weft-float.log --cbench-baseline cbench-nccl-float.log \
    --machine "2 × NVIDIA H100 80GB HBM3 (nvlink)" --date 2026-11-26 -o plots/`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, args []string) error {
		if plotOpts.cbench != "" {
			return plotCbench(cmd)
		}
		if plotOpts.json == "" || plotOpts.out == "" {
			return fmt.Errorf("plot: -J and -o are required: %w", hal.ErrInvalidArgument)
		}
		r, err := readReport(plotOpts.json)
		if err != nil {
			return err
		}
		return writePlot(plotOpts.out, r)
	},
}

func init() {
	f := plotCmd.Flags()
	f.StringVarP(&plotOpts.json, "json", "J", "", "results written by weft bench -J")
	f.StringVarP(&plotOpts.out, "output", "o", "", "SVG file to write (with --cbench: the directory)")
	f.StringVar(&plotOpts.cbench, "cbench", "", "examples/cbench output of weft (instead of -J)")
	f.StringVar(&plotOpts.cbenchBase, "cbench-baseline", "", "examples/cbench output of the baseline (NCCL), for --cbench")
	f.StringVar(&plotOpts.machine, "machine", "", "the machine, for the titles of --cbench plots")
	f.StringVar(&plotOpts.on, "date", "", "the date of the run, for the titles of --cbench plots")
	rootCmd.AddCommand(plotCmd)
}

// readReport reads and checks a `weft bench -J` file; errors wrap
// ErrInvalidArgument (malformed, no results) or ErrSystem (unreadable).
func readReport(path string) (*benchReport, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("plot: %v: %w", err, hal.ErrSystem)
	}
	var r benchReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("plot: %s: %v: %w", path, err, hal.ErrInvalidArgument)
	}
	if len(r.Results) == 0 {
		return nil, fmt.Errorf("plot: %s has no results: %w", path, hal.ErrInvalidArgument)
	}
	return &r, nil
}

// newReport is the report of a finished bench run on this rank (what
// writeJSON writes), for --plot.
func newReport(cfg *benchConfig, devs []deviceLine, results []sizeResult) *benchReport {
	r := &benchReport{Devices: devs, Results: results}
	r.Config.NRanks, r.Config.Collective, r.Config.Baseline = len(devs), cfg.collective, cfg.baseline
	r.Config.Date = time.Now().UTC().Format(time.RFC3339)
	return r
}

// collectiveName is nccl-tests' name of a collective as bench's config
// records it ("allreduce" → "all_reduce").
func collectiveName(c string) string {
	if coll, err := algorithms.ParseCollective(c); err == nil {
		switch coll {
		case algorithms.AllReduce:
			return "all_reduce"
		case algorithms.AllGather:
			return "all_gather"
		case algorithms.ReduceScatter:
			return "reduce_scatter"
		}
	}
	return c
}

// machine describes the devices of a run: "2 × NVIDIA H100 80GB HBM3
// (nvlink)", with every distinct name and backend.
func (r *benchReport) machine() string {
	if r.machineLine != "" {
		return r.machineLine
	}
	var names, backends []string
	seen := map[string]bool{}
	for _, d := range r.Devices {
		if !seen["n"+d.Name] {
			seen["n"+d.Name] = true
			names = append(names, d.Name)
		}
		if !seen["b"+d.Backend] {
			seen["b"+d.Backend] = true
			backends = append(backends, d.Backend)
		}
	}
	n := r.Config.NRanks
	if n == 0 {
		n = len(r.Devices)
	}
	return fmt.Sprintf("%d × %s (%s)", n, strings.Join(names, ", "), strings.Join(backends, ", "))
}

// title is the first lines of both panels: collective, data type and
// operator, devices and date.
func (r *benchReport) title() string {
	first := r.Results[0]
	what := collectiveName(r.Config.Collective) + " " + first.Type
	if first.Redop != "" && first.Redop != "none" {
		what += " " + first.Redop
	}
	date := r.Config.Date
	if t, err := time.Parse(time.RFC3339, date); err == nil {
		date = t.Format("2006-01-02 15:04 MST")
	}
	return fmt.Sprintf("%s, out of place\n%s, %s", what, r.machine(), date)
}

// plotSeries is one curve of both panels.
type plotSeries struct {
	name       string
	busbw, tus plotter.XYs // x: bytes; y: GB/s, µs
}

// series returns weft's curve and the baseline's when the run measured
// one. Sizes where an implementation did not take the call are left out.
func (r *benchReport) series() []plotSeries {
	weft := plotSeries{name: "weft"}
	var base *plotSeries
	for _, res := range r.Results {
		if res.Size <= 0 {
			continue
		}
		x := float64(res.Size)
		if m := res.OutOfPlace; m.TimeUS > 0 {
			weft.busbw = append(weft.busbw, plotter.XY{X: x, Y: m.BusBW})
			weft.tus = append(weft.tus, plotter.XY{X: x, Y: m.TimeUS})
		}
		if b := res.Baseline; b != nil {
			if base == nil {
				base = &plotSeries{name: b.Name}
			}
			if m := b.OutOfPlace; m.TimeUS > 0 {
				base.busbw = append(base.busbw, plotter.XY{X: x, Y: m.BusBW})
				base.tus = append(base.tus, plotter.XY{X: x, Y: m.TimeUS})
			}
		}
	}
	out := []plotSeries{weft}
	if base != nil {
		out = append(out, *base)
	}
	return out
}

// sizeTicks puts major ticks on the powers of 2 of a log2 size axis,
// every second or fourth one when the range is wide, labelled as sizes
// ("8", "4K", "1G").
type sizeTicks struct{}

func (sizeTicks) Ticks(min, max float64) []plot.Tick {
	lo, hi := int(math.Floor(math.Log2(math.Max(min, 1)))), int(math.Ceil(math.Log2(math.Max(max, 1))))
	step := 1
	for (hi-lo)/step > 10 {
		step *= 2
	}
	var ts []plot.Tick
	for e := lo; e <= hi; e++ {
		v := math.Exp2(float64(e))
		if v < min || v > max {
			continue
		}
		t := plot.Tick{Value: v}
		if (e-lo)%step == 0 {
			t.Label = algorithms.FormatSize(int64(v))
		}
		ts = append(ts, t)
	}
	return ts
}

// log2Scale is a base-2 logarithmic axis scale.
type log2Scale struct{}

func (log2Scale) Normalize(min, max, x float64) float64 {
	lo, hi := math.Log2(min), math.Log2(max)
	return (math.Log2(x) - lo) / (hi - lo)
}

var plotColors = []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}}

// panel is one of the two plots: y against size for every series.
func (r *benchReport) panel(ylabel string, logY bool, y func(plotSeries) plotter.XYs) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = r.title()
	p.X.Label.Text = "message size (B)"
	p.Y.Label.Text = ylabel
	p.X.Scale, p.X.Tick.Marker = log2Scale{}, sizeTicks{}
	if logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, !logY
	for i, s := range r.series() {
		xy := y(s)
		if len(xy) == 0 {
			continue
		}
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %v: %w", s.name, err, hal.ErrInvalidArgument)
		}
		c := plotColors[i%len(plotColors)]
		l.Color, pts.Color = c, c
		l.Width = vg.Points(1.5)
		pts.Shape = draw.CircleGlyph{}
		pts.Radius = vg.Points(2)
		if i > 0 {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			pts.Shape = draw.BoxGlyph{}
		}
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
	}
	return p, nil
}

// writePlot draws r into an SVG file: bus bandwidth (left) and time
// (right, log scale) against size (log2 scale). Errors wrap
// ErrInvalidArgument (nothing to draw) or ErrSystem (the file).
func writePlot(path string, r *benchReport) error {
	xs := map[float64]bool{}
	for _, s := range r.series() {
		for _, p := range s.tus {
			xs[p.X] = true
		}
	}
	if len(xs) == 0 {
		return fmt.Errorf("plot %s: no measured size to draw: %w", path, hal.ErrInvalidArgument)
	}
	bus, err := r.panel("bus bandwidth (GB/s)", false, func(s plotSeries) plotter.XYs { return s.busbw })
	if err != nil {
		return err
	}
	tm, err := r.panel("time (µs)", true, func(s plotSeries) plotter.XYs { return s.tus })
	if err != nil {
		return err
	}
	// One size alone gives an empty log range; widen it to a factor 2 on
	// each side.
	if len(xs) == 1 {
		for x := range xs {
			for _, p := range []*plot.Plot{bus, tm} {
				p.X.Min, p.X.Max = x/2, x*2
			}
		}
	}
	return writePanels(path, bus, tm)
}

// writePanels draws the bus-bandwidth and time panels side by side (13 ×
// 5.5 inches) into the SVG file path. Errors wrap hal.ErrSystem.
func writePanels(path string, bus, tm *plot.Plot) error {
	const w, h = 13 * vg.Inch, 5.5 * vg.Inch
	c := vgsvg.New(w, h)
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(18), PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(12)}
	cv := plot.Align([][]*plot.Plot{{bus, tm}}, tiles, dc)
	bus.Draw(cv[0][0])
	tm.Draw(cv[0][1])
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %v: %w", err, hal.ErrSystem)
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot: write %s: %v: %w", path, err, hal.ErrSystem)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("plot: write %s: %v: %w", path, err, hal.ErrSystem)
	}
	return nil
}
