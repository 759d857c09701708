package main

// weft sim: predicted time and bus bandwidth of weft's plans on a cluster
// model (package sim), as nccl-tests-like tables and an SVG.

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/sim"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var simOpts struct {
	cluster, preset, families, dtype, plotPath, switching string
	minBytes, maxBytes                                    string
	factor                                                int64
	nodes, gpus, nicCount                                 int
	nvlinkGBps, nicGbps, nicLatency, oversub              float64
	nodesPerLeaf                                          int
	dump                                                  bool
}

var simCmd = &cobra.Command{
	Use:   "sim [collective...]",
	Short: "predict time and busbw of weft's plans on a modelled cluster (up to 16k GPUs)",
	Long: `sim executes the plans weft would run (the plan IR that algorithms builds)
over a model of a cluster and prints, per plan family and collective, an
nccl-tests-like table: size, count, type, time (µs), algbw and busbw (GB/s),
the plan that serves the size. The cluster comes from --cluster (YAML or
JSON), --preset (h100x2, h200x2, h200x4, socket2, dgx-h100:NODES) or the
flags --nodes, --gpus-per-node, --nvlink-gbps, --nic-count, --nic-gbps,
--nic-latency-us, --switching, --oversubscription, --nodes-per-leaf (a DGX
H100 cluster by default). The model and its calibration: docs/scale.md.
Collectives: all_reduce (default), all_gather, reduce_scatter.`,
	Example: `  weft sim all_reduce --preset dgx-h100:16 --family ring-ref -b 8 -e 1G -f 4
  weft sim all_reduce all_gather --cluster cluster.yaml --plot scale.svg
  weft sim --dump-cluster --nodes 128 --switching fattree --oversubscription 2`,
	RunE: runSim,
}

func init() {
	f := simCmd.Flags()
	f.StringVar(&simOpts.cluster, "cluster", "", "cluster description (YAML or JSON file)")
	f.StringVar(&simOpts.preset, "preset", "", "named cluster: h100x2, h200x2, h200x4, socket2, dgx-h100:NODES")
	f.StringVar(&simOpts.families, "family", "", "comma-separated plan families (default: all registered: "+strings.Join(sim.Families(), ", ")+")")
	f.StringVarP(&simOpts.dtype, "datatype", "d", "float", "data type")
	f.StringVarP(&simOpts.minBytes, "minbytes", "b", "8", "smallest size (bytes, K/M/G suffixes)")
	f.StringVarP(&simOpts.maxBytes, "maxbytes", "e", "16G", "largest size")
	f.Int64VarP(&simOpts.factor, "stepfactor", "f", 4, "size multiplier between rows (≥ 2)")
	f.StringVar(&simOpts.plotPath, "plot", "", "write busbw and time against size as SVG")
	f.IntVar(&simOpts.nodes, "nodes", 2, "nodes (without --cluster or --preset)")
	f.IntVar(&simOpts.gpus, "gpus-per-node", 8, "GPUs per node")
	f.Float64Var(&simOpts.nvlinkGBps, "nvlink-gbps", 478, "NVLink GB/s per direction per GPU")
	f.IntVar(&simOpts.nicCount, "nic-count", 8, "NICs per node")
	f.Float64Var(&simOpts.nicGbps, "nic-gbps", 400, "Gb/s per NIC per direction")
	f.Float64Var(&simOpts.nicLatency, "nic-latency-us", 4, "one-way put-with-signal latency between nodes (µs)")
	f.StringVar(&simOpts.switching, "switching", sim.Rail, "rail or fattree")
	f.Float64Var(&simOpts.oversub, "oversubscription", 1, "spine oversubscription factor (≥ 1)")
	f.IntVar(&simOpts.nodesPerLeaf, "nodes-per-leaf", 32, "nodes under one leaf switch (rail: per rail group)")
	f.BoolVar(&simOpts.dump, "dump-cluster", false, "print the cluster description as YAML and exit")
	rootCmd.AddCommand(simCmd)
}

func badSim(err error) error {
	if errors.Is(err, sim.ErrInvalid) && !errors.Is(err, hal.ErrInvalidArgument) {
		return fmt.Errorf("%w: %w", err, hal.ErrInvalidArgument)
	}
	return err
}

func simCluster(cmd *cobra.Command) (sim.Cluster, error) {
	switch {
	case simOpts.cluster != "" && simOpts.preset != "":
		return sim.Cluster{}, fmt.Errorf("sim: --cluster and --preset exclude each other: %w", hal.ErrInvalidArgument)
	case simOpts.cluster != "":
		c, err := sim.ReadCluster(simOpts.cluster)
		if err != nil && !errors.Is(err, sim.ErrInvalid) {
			return c, fmt.Errorf("%w: %w", err, hal.ErrInvalidArgument)
		}
		return c, badSim(err)
	case simOpts.preset != "":
		c, err := sim.Preset(simOpts.preset)
		return c, badSim(err)
	}
	c := sim.DGXH100(simOpts.nodes)
	c.Name = fmt.Sprintf("%dx%d", simOpts.nodes, simOpts.gpus)
	c.GPUsPerNode = simOpts.gpus
	c.NVLink.GBps = simOpts.nvlinkGBps
	c.NIC = sim.NIC{Count: simOpts.nicCount, Gbps: simOpts.nicGbps, LatencyUs: simOpts.nicLatency}
	c.Switching.Kind, c.Switching.Oversubscription, c.Switching.NodesPerLeaf = simOpts.switching, simOpts.oversub, simOpts.nodesPerLeaf
	return c, badSim(c.Validate())
}

// simTable is one family's predictions of one collective.
type simTable struct {
	family string
	coll   algorithms.Collective
	rows   []sim.Row
}

func runSim(cmd *cobra.Command, args []string) error {
	cl, err := simCluster(cmd)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if simOpts.dump {
		b, err := cl.Marshal(false)
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	}
	dt, err := plan.ParseDataType(simOpts.dtype)
	if err != nil {
		return fmt.Errorf("sim: %v: %w", err, hal.ErrInvalidArgument)
	}
	lo, err1 := algorithms.ParseSize(simOpts.minBytes)
	hi, err2 := algorithms.ParseSize(simOpts.maxBytes)
	if err1 != nil || err2 != nil || lo < 1 || hi < lo || simOpts.factor < 2 {
		return fmt.Errorf("sim: sizes -b %s -e %s -f %d: want 1 ≤ min ≤ max and a factor ≥ 2: %w", simOpts.minBytes, simOpts.maxBytes, simOpts.factor, hal.ErrInvalidArgument)
	}
	if len(args) == 0 {
		args = []string{"all_reduce"}
	}
	var colls []algorithms.Collective
	for _, a := range args {
		c, err := algorithms.ParseCollective(a)
		if err != nil || (c != algorithms.AllReduce && c != algorithms.AllGather && c != algorithms.ReduceScatter) {
			return fmt.Errorf("sim: collective %q: want all_reduce, all_gather or reduce_scatter: %w", a, hal.ErrInvalidArgument)
		}
		colls = append(colls, c)
	}
	names := sim.Families()
	if simOpts.families != "" {
		names = strings.Split(simOpts.families, ",")
	}
	var fams []sim.Family
	for _, n := range names {
		f, err := sim.Lookup(strings.TrimSpace(n))
		if err != nil {
			return badSim(err)
		}
		fams = append(fams, f)
	}
	var tables []simTable
	for _, coll := range colls {
		for _, f := range fams {
			t, err := simulate(out, cl, f, coll, dt, sim.Sizes(lo, hi, simOpts.factor))
			if err != nil {
				return err
			}
			if t != nil {
				tables = append(tables, *t)
			}
		}
	}
	if simOpts.plotPath != "" {
		return writeSimPlot(simOpts.plotPath, cl, tables)
	}
	return nil
}

// simulate prints one table; a family that does not apply to the cluster
// is reported in a comment line and skipped (nil table).
func simulate(out io.Writer, cl sim.Cluster, f sim.Family, coll algorithms.Collective, dt plan.DataType, sizes []int64) (*simTable, error) {
	p, err := sim.NewPredictor(cl, f, coll, dt)
	if err != nil {
		if errors.Is(err, sim.ErrInvalid) {
			return nil, badSim(err)
		}
		fmt.Fprintf(out, "# %s %v on %s (%d GPUs): not applicable: %v\n\n", f.Name, coll, cl.Name, cl.GPUs(), err)
		return nil, nil
	}
	fmt.Fprintf(out, "# weft sim: %v, family %s, cluster %s: %d nodes × %d GPUs (%d), %d ranks simulated (column sim: all of them for plans that are not translation-symmetric)\n",
		coll, f.Name, cl.Name, cl.Nodes, cl.GPUsPerNode, cl.GPUs(), p.Representatives())
	fmt.Fprintf(out, "#%14s %12s %8s %11s %9s %9s %6s  %s\n", "size", "count", "type", "time(us)", "algbw", "busbw", "sim", "plan")
	t := &simTable{family: f.Name, coll: coll}
	for _, b := range sizes {
		row, ok, err := p.Predict(b)
		if errors.Is(err, sim.ErrNotSimulated) {
			fmt.Fprintf(out, "# %d B: %v\n", b, err)
			continue
		}
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		t.rows = append(t.rows, row)
		fmt.Fprintf(out, " %14d %12d %8s %11.2f %9.2f %9.2f %6d  %s\n", row.Bytes, row.Count, dt, row.TimeUs, row.AlgBW, row.BusBW, row.Simulated, row.Plan)
	}
	fmt.Fprintln(out)
	return t, nil
}

// writeSimPlot draws every table: busbw (left) and time (right, log)
// against size, in the style of weft plot.
func writeSimPlot(path string, cl sim.Cluster, tables []simTable) error {
	if len(tables) == 0 {
		return fmt.Errorf("sim: nothing to plot: %w", hal.ErrInvalidArgument)
	}
	title := fmt.Sprintf("weft sim: %s, %d nodes × %d GPUs", cl.Name, cl.Nodes, cl.GPUsPerNode)
	panel := func(ylabel string, logY bool, y func(sim.Row) float64) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "message size (B)"
		p.Y.Label.Text = ylabel
		p.X.Scale, p.X.Tick.Marker = log2Scale{}, sizeTicks{}
		if logY {
			p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
		}
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = true, !logY
		for i, t := range tables {
			var xy plotter.XYs
			for _, r := range t.rows {
				xy = append(xy, plotter.XY{X: float64(r.Bytes), Y: y(r)})
			}
			if len(xy) == 0 {
				continue
			}
			l, pts, err := plotter.NewLinePoints(xy)
			if err != nil {
				return nil, fmt.Errorf("sim plot: %v: %w", err, hal.ErrInvalidArgument)
			}
			c := simColors[i%len(simColors)]
			l.Color, pts.Color, l.Width = c, c, vg.Points(1.5)
			pts.Shape, pts.Radius = draw.CircleGlyph{}, vg.Points(2)
			if i%2 == 1 {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
				pts.Shape = draw.BoxGlyph{}
			}
			p.Add(l, pts)
			p.Legend.Add(fmt.Sprintf("%v %s", t.coll, t.family), l, pts)
		}
		return p, nil
	}
	bus, err := panel("bus bandwidth (GB/s)", false, func(r sim.Row) float64 { return r.BusBW })
	if err != nil {
		return err
	}
	tm, err := panel("time (µs)", true, func(r sim.Row) float64 { return r.TimeUs })
	if err != nil {
		return err
	}
	return writePanels(path, bus, tm)
}

var simColors = append(append([]color.Color{}, plotColors...),
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff})
