package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/topology"
	"github.com/weftccl/weft/topology/fixtures"
	"github.com/weftccl/weft/topology/ncclxml"
	"github.com/weftccl/weft/topology/render"
)

// topoOptions are the flags of `weft topo`.
type topoOptions struct {
	format    string
	sysfsRoot string
	fixture   string
	output    string
	measure   topoMeasureOptions
}

var topoOpts topoOptions

var topoCmd = &cobra.Command{
	Use:   "topo",
	Short: "show how GPUs, switches, NICs and CPUs are connected",
	Long: `topo discovers this machine's topology — NUMA nodes and CPUs, the PCI tree
with its switches, GPUs of either vendor (NVML, AMD SMI, the KFD sysfs
topology), NVSwitches and NICs (RDMA devices and network interfaces) — and
prints it with the class of the path between every pair of GPUs and NICs,
as nvidia-smi topo -m does (NV#, PIX, PXB, PHB, NODE, SYS …), with
bottleneck bandwidth, hop count and whether GPUs can access each other's
memory.

A source that is missing (no NVIDIA driver, no ROCm) is listed with the
reason; it is not an error. On a machine without GPUs the report says why
none was found.

Formats: text (default), json (schema docs/topology/schema.json), xml (the
topology file NCCL loads from NCCL_TOPO_FILE), dot (Graphviz) and svg (a
picture drawn by weft, no graphviz needed).

--measure adds a measured peer bandwidth and latency matrix, taken through
the HAL backend's memory-mapped capability (one process opens every device).`,
	Example: `  weft topo
  weft topo --format xml > topo.xml && NCCL_TOPO_FILE=topo.xml ...
  weft topo --format svg -o topo.svg
  weft topo --fixture dgx-h100
  weft topo --measure`,
	Args: cobra.NoArgs,
	RunE: runTopo,
}

func init() {
	f := topoCmd.Flags()
	o := &topoOpts
	f.StringVarP(&o.format, "format", "f", "text", "output format: text, json, xml, dot, svg")
	f.StringVar(&o.sysfsRoot, "sysfs-root", "", "read sysfs from this directory instead of WEFT_SYSFS_ROOT or /sys")
	f.StringVar(&o.fixture, "fixture", "", "describe a built-in example machine instead of this one: "+strings.Join(fixtures.Names(), ", "))
	f.StringVarP(&o.output, "output", "o", "", "write to this file instead of standard output")
	f.BoolVar(&o.measure.enabled, "measure", false, "measure peer bandwidth and latency between devices through the HAL")
	f.StringVar(&o.measure.backend, "hal", "", "HAL backend for --measure (default: WEFT_HAL, else the first available of nvlink, xgmi, pcie)")
	f.IntVar(&o.measure.devices, "devices", 0, "devices to measure (default: the backend's GPUs found by discovery; 2 for the host backend)")
	f.StringVar(&o.measure.size, "measure-bytes", "256M", "bytes per timed put (suffixes K, M, G)")
	f.IntVar(&o.measure.iters, "measure-iters", 10, "timed puts per pair")
	f.IntVar(&o.measure.blocks, "measure-blocks", 32, "thread blocks of the copy kernel")
	rootCmd.AddCommand(topoCmd)
}

func runTopo(cmd *cobra.Command, _ []string) error {
	o := &topoOpts
	render, ok := topoRenderers[o.format]
	if !ok {
		return fmt.Errorf("--format %q: want text, json, xml, dot or svg: %w", o.format, hal.ErrInvalidArgument)
	}
	if o.fixture != "" && o.sysfsRoot != "" {
		return fmt.Errorf("--fixture and --sysfs-root exclude each other: %w", hal.ErrInvalidArgument)
	}
	opts := topology.Options{SysfsRoot: o.sysfsRoot}
	if o.fixture != "" {
		fx, err := fixtures.Make(o.fixture)
		if err != nil {
			return err
		}
		defer os.RemoveAll(fx.Root)
		opts = fx.Options()
	}
	sys, err := topology.Discover(opts)
	if err != nil {
		return err
	}
	if o.fixture != "" {
		topoRelabel(sys, opts.SysfsRoot, "fixture:"+o.fixture)
	}
	if o.measure.enabled {
		if o.fixture != "" {
			fmt.Fprintln(cmd.ErrOrStderr(), "weft topo: --measure ignored: a fixture is not this machine")
		} else if m, why := topoMeasure(cmd.Context(), sys, o.measure, cmd.ErrOrStderr()); m != nil {
			sys.Measured = m
		} else {
			// Not an error: the static topology is still the answer.
			fmt.Fprintf(cmd.ErrOrStderr(), "weft topo: no measurement: %s\n", why)
			sys.Notes = append(sys.Notes, "no measurement: "+why)
		}
	}
	var w io.Writer = cmd.OutOrStdout()
	if o.output != "" {
		f, err := os.Create(o.output)
		if err != nil {
			return fmt.Errorf("--output: %v: %w", err, hal.ErrSystem)
		}
		defer f.Close()
		w = f
	}
	if err := render(w, sys); err != nil {
		return fmt.Errorf("write %s: %v: %w", o.format, err, hal.ErrSystem)
	}
	return nil
}

// topoRenderers maps --format to a writer.
var topoRenderers = map[string]func(io.Writer, *topology.System) error{
	"text": func(w io.Writer, s *topology.System) error {
		if err := render.Text(w, s); err != nil {
			return err
		}
		return topoWriteMeasurement(w, s)
	},
	"json": render.JSON,
	"xml":  ncclxml.Write,
	"dot":  render.DOT,
	"svg":  render.SVG,
}

// topoRelabel replaces a fixture's temporary directory in the texts of s
// by a stable name, so that output does not change from run to run.
func topoRelabel(s *topology.System, root, name string) {
	r := strings.NewReplacer(root, name)
	s.SysfsRoot = name
	for i := range s.Sources {
		s.Sources[i].Detail = r.Replace(s.Sources[i].Detail)
	}
	for i := range s.Notes {
		s.Notes[i] = r.Replace(s.Notes[i])
	}
	for i := range s.Warnings {
		s.Warnings[i] = r.Replace(s.Warnings[i])
	}
}
