// Package render draws a topology.System for people and programs: a text
// report with a path matrix in the style of nvidia-smi topo -m, JSON in
// the documented schema (docs/topology/schema.json), Graphviz DOT, and a
// self-contained SVG laid out by weft itself (no graphviz needed).
// The NCCL topology XML is in package ncclxml.
package render

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/weftccl/weft/topology"
)

// JSON writes s as indented JSON (schema_version 1).
func JSON(w io.Writer, s *topology.System) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(s)
}

// Cell is the path matrix entry for a path, as nvidia-smi prints it: NV#
// for NVLink (# bonded links), XG# for xGMI, NVB# through one GPU, else
// the class name.
func Cell(s *topology.System, p topology.Path) string {
	switch p.Class {
	case topology.PathNVL:
		if xgmiPath(s, p) {
			return fmt.Sprintf("XG%d", p.LinkCount)
		}
		return fmt.Sprintf("NV%d", p.LinkCount)
	case topology.PathNVB:
		return fmt.Sprintf("NVB%d", p.LinkCount)
	}
	return p.Class.String()
}

func xgmiPath(s *topology.System, p topology.Path) bool {
	g, ok := s.GPU(p.A)
	return ok && g.Vendor == topology.VendorAMD
}

// legend explains the matrix entries, in nvidia-smi's words where it has
// them.
var legend = []string{
	"X    = Self",
	"SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
	"NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
	"PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
	"PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
	"PIX  = Connection traversing at most a single PCIe bridge",
	"C2C  = Connection traversing a chip-to-chip link to the CPU",
	"NVB# = Connection traversing a bonded set of # NVLinks through an intermediate GPU",
	"NV#  = Connection traversing a bonded set of # NVLinks (directly or through NVSwitches)",
	"XG#  = Connection traversing a bonded set of # xGMI (Infinity Fabric) links",
}

// Text writes the human report: machine summary, devices, discovery
// sources, the path matrix with legend, bandwidth and P2P matrices, notes
// and warnings.
func Text(w io.Writer, s *topology.System) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "Host %s (sysfs %s)\n", s.Hostname, s.SysfsRoot)
	fmt.Fprintf(ew, "CPU: %s", s.CPU.Arch)
	if s.CPU.Vendor != "" {
		fmt.Fprintf(ew, " %s family %d model %d", strings.TrimSpace(s.CPU.Vendor), s.CPU.Family, s.CPU.Model)
	}
	fmt.Fprintf(ew, ", %d NUMA node(s)", len(s.NUMANodes))
	if len(s.NUMANodes) > 1 {
		fmt.Fprintf(ew, ", %.0f GB/s between sockets (NCCL's model)", s.CPU.InterSocketGBps)
	}
	fmt.Fprintln(ew)

	section(ew, "NUMA nodes")
	tw := table(ew)
	fmt.Fprintln(tw, "  NODE\tCPUS\tCOUNT\tMEMORY")
	for _, n := range s.NUMANodes {
		fmt.Fprintf(tw, "  %d\t%s\t%d\t%s\n", n.Node, n.CPUs, n.CPUCount, bytesIEC(n.MemoryBytes))
	}
	tw.Flush()

	section(ew, "GPUs")
	if len(s.GPUs) == 0 {
		fmt.Fprintln(ew, "  none")
	} else {
		tw = table(ew)
		fmt.Fprintln(tw, "  ID\tNAME\tARCH\tMEMORY\tBDF\tNUMA\tPCIE\tLINKS\tUUID")
		for _, g := range s.GPUs {
			links := "-"
			if g.NVLinks > 0 {
				kind := "NVLink"
				if g.Vendor == topology.VendorAMD {
					kind = "xGMI"
				}
				links = fmt.Sprintf("%d %s, %s GB/s", g.NVLinks, kind, num(g.NVLinkGBps))
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", strings.ToUpper(g.ID), g.Name, dash(g.Arch),
				bytesIEC(g.MemoryBytes), g.BDF, g.NUMANode, pcie(g.PCIeLink), links, dash(g.UUID))
		}
		tw.Flush()
	}
	if len(s.NVSwitches) > 0 {
		section(ew, "NVSwitches")
		tw = table(ew)
		fmt.Fprintln(tw, "  ID\tBDF\tNUMA\tGPU LINKS")
		for _, n := range s.NVSwitches {
			bdf, numa := n.BDF, fmt.Sprint(n.NUMANode)
			if bdf == "" {
				bdf, numa = "(not visible on this host's PCI bus)", "-"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\n", strings.ToUpper(n.ID), bdf, numa, n.Links)
		}
		tw.Flush()
	}

	section(ew, "NICs")
	if len(s.NICs) == 0 {
		fmt.Fprintln(ew, "  none")
	} else {
		tw = table(ew)
		fmt.Fprintln(tw, "  ID\tNAME\tBDF\tNUMA\tPCIE\tTYPE\tSPEED\tINTERFACES")
		for _, n := range s.NICs {
			typ := "Ethernet"
			if n.RDMA {
				typ = "RDMA"
				var ll []string
				for _, p := range n.Ports {
					ll = append(ll, fmt.Sprintf("port %d %s %s", p.Port, p.LinkLayer, p.State))
				}
				if len(ll) > 0 {
					typ += " (" + strings.Join(ll, ", ") + ")"
				}
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", strings.ToUpper(n.ID), n.Name, n.BDF, n.NUMANode,
				pcie(n.PCIeLink), typ, gbits(n.SpeedGbps), dash(strings.Join(n.Netdevs, ",")))
		}
		tw.Flush()
	}

	section(ew, "PCI devices (bridges left out)")
	tw = table(ew)
	fmt.Fprintln(tw, "  BDF\tCLASS\tID\tNUMA\tLINK\tDRIVER\tIS")
	for _, d := range s.PCIDevices {
		if d.Role != "endpoint" {
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s:%s\t%d\t%s\t%s\t%s\n", d.BDF, d.ClassName, strings.TrimPrefix(d.Vendor, "0x"),
			strings.TrimPrefix(d.Device, "0x"), d.NUMANode, pcie(d.PCIeLink), dash(d.Driver), strings.ToUpper(dash(d.Entity)))
	}
	tw.Flush()
	if len(s.PCISwitches) > 0 {
		fmt.Fprintf(ew, "  %d PCIe switch(es):", len(s.PCISwitches))
		for _, sw := range s.PCISwitches {
			fmt.Fprintf(ew, " %s=%s", strings.ToUpper(sw.ID), sw.BDF)
		}
		fmt.Fprintln(ew)
	}

	section(ew, "Discovery sources")
	tw = table(ew)
	for _, src := range s.Sources {
		state := "used"
		if !src.Available {
			state = "not used"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", src.Name, state, src.Detail)
	}
	tw.Flush()

	if ends := s.Endpoints(); len(ends) > 0 {
		section(ew, "Path matrix")
		matrix(ew, s, ends, func(p topology.Path) string { return Cell(s, p) }, true)
		fmt.Fprintln(ew, "\nLegend:")
		fmt.Fprintln(ew)
		for _, l := range legend {
			fmt.Fprintln(ew, "  "+l)
		}
		if len(s.NICs) > 0 {
			fmt.Fprintln(ew, "\nNIC Legend:")
			fmt.Fprintln(ew)
			for _, n := range s.NICs {
				fmt.Fprintf(ew, "  %s: %s\n", strings.ToUpper(n.ID), n.Name)
			}
		}
		if len(ends) > 1 {
			section(ew, "Bottleneck bandwidth (GB/s per direction; hops)")
			matrix(ew, s, ends, func(p topology.Path) string {
				return fmt.Sprintf("%s/%d", num(p.GBps), p.Hops)
			}, false)
		}
		if len(s.GPUs) > 1 {
			section(ew, "GPU peer access (R read, W write, A atomics; source)")
			var gpus []string
			for _, g := range s.GPUs {
				gpus = append(gpus, g.ID)
			}
			matrix(ew, s, gpus, func(p topology.Path) string {
				if p.P2P == nil {
					return "-"
				}
				c := ""
				for _, f := range []struct {
					on bool
					ch string
				}{{p.P2P.Read, "R"}, {p.P2P.Write, "W"}, {p.P2P.Atomics, "A"}} {
					if f.on {
						c += f.ch
					}
				}
				if c == "" {
					c = "none"
				}
				return c + " (" + p.P2P.Source + ")"
			}, false)
		}
	}

	if len(s.Notes) > 0 {
		section(ew, "Notes")
		for _, n := range s.Notes {
			fmt.Fprintln(ew, "  - "+n)
		}
	}
	if len(s.Warnings) > 0 {
		section(ew, "Warnings")
		for _, n := range s.Warnings {
			fmt.Fprintln(ew, "  - "+n)
		}
	}
	return ew.err
}

// matrix prints a square matrix over ids; affinity adds nvidia-smi's CPU
// and NUMA affinity columns.
func matrix(w io.Writer, s *topology.System, ids []string, cell func(topology.Path) string, affinity bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "\t")
	for _, id := range ids {
		fmt.Fprint(tw, strings.ToUpper(id)+"\t")
	}
	if affinity {
		fmt.Fprint(tw, "CPU Affinity\tNUMA Affinity\t")
	}
	fmt.Fprintln(tw)
	for _, a := range ids {
		fmt.Fprint(tw, strings.ToUpper(a)+"\t")
		for _, b := range ids {
			if a == b {
				fmt.Fprint(tw, "X\t")
				continue
			}
			p, _ := s.Path(a, b)
			fmt.Fprint(tw, cell(p)+"\t")
		}
		if affinity {
			numa := s.NUMAOf(a)
			cpus := "N/A"
			for _, n := range s.NUMANodes {
				if n.Node == numa && n.CPUs != "" {
					cpus = n.CPUs
				}
			}
			fmt.Fprintf(tw, "%s\t%d\t", cpus, numa)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

func section(w io.Writer, title string) { fmt.Fprintf(w, "\n%s\n", title) }

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// num prints a bandwidth without trailing zeros ("478.116", "64", "-").
func num(v float64) string {
	if v == 0 {
		return "-"
	}
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.1f", v), "0"), ".")
}

func gbits(v float64) string {
	if v == 0 {
		return "-"
	}
	return num(v) + " Gb/s"
}

func pcie(l topology.PCIeLink) string {
	if l.LinkSpeedGTs == 0 || l.LinkWidth == 0 {
		return "-"
	}
	return fmt.Sprintf("Gen%d x%d", pcieGen(l.LinkSpeedGTs), l.LinkWidth)
}

func pcieGen(gts float64) int {
	switch {
	case gts <= 2.5:
		return 1
	case gts <= 5:
		return 2
	case gts <= 8:
		return 3
	case gts <= 16:
		return 4
	case gts <= 32:
		return 5
	}
	return 6
}

func bytesIEC(b int64) string {
	if b <= 0 {
		return "-"
	}
	const gib = 1 << 30
	if b >= gib {
		return fmt.Sprintf("%.1f GiB", float64(b)/gib)
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

// errWriter keeps the first write error so that Text can report it.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, nil
}
