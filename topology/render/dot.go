package render

import (
	"fmt"
	"io"
	"strings"

	"github.com/weftccl/weft/topology"
)

// Colors of link types, shared by DOT and SVG.
var linkColors = map[topology.LinkType]string{
	topology.LinkNVLink: "#76b900",
	topology.LinkXGMI:   "#d62728",
	topology.LinkC2C:    "#ff7f0e",
	topology.LinkPCIe:   "#4a6fa5",
	topology.LinkHost:   "#7f7f7f",
	topology.LinkSys:    "#9467bd",
}

// Fill colors of device kinds.
var kindColors = map[string]string{
	"numa": "#eeeeee",
	"hb":   "#f7f7f7",
	"sw":   "#dce6f2",
	"gpu":  "#d9f2c4",
	"nvs":  "#fff2b3",
	"nic":  "#f9d7c4",
}

func kindPrefix(id string) string {
	for _, p := range []string{"numa", "hb", "sw", "gpu", "nvs", "nic"} {
		if strings.HasPrefix(id, p) {
			return p
		}
	}
	return ""
}

// nodeLines is the text of a device box, first line bold in SVG.
func nodeLines(s *topology.System, id string) []string {
	up := strings.ToUpper(id)
	for _, n := range s.NUMANodes {
		if n.ID == id {
			l := []string{fmt.Sprintf("NUMA %d", n.Node)}
			if n.CPUs != "" {
				l = append(l, "CPUs "+n.CPUs)
			}
			return l
		}
	}
	for _, r := range s.PCIRoots {
		if r.ID == id {
			return []string{"Host bridge", r.Name}
		}
	}
	for _, sw := range s.PCISwitches {
		if sw.ID == id {
			return []string{"PCIe switch " + up, sw.BDF, pcie(sw.PCIeLink)}
		}
	}
	for _, g := range s.GPUs {
		if g.ID == id {
			return []string{up, strings.TrimPrefix(strings.TrimPrefix(g.Name, "NVIDIA "), "AMD "), g.BDF}
		}
	}
	for _, n := range s.NVSwitches {
		if n.ID == id {
			bdf := n.BDF
			if bdf == "" {
				bdf = "not on host PCI bus"
			}
			return []string{"NVSwitch " + up, bdf}
		}
	}
	for _, n := range s.NICs {
		if n.ID == id {
			return []string{up + " " + n.Name, n.BDF, gbits(n.SpeedGbps)}
		}
	}
	return []string{up}
}

// linkLabel describes a link for an edge label.
func linkLabel(l topology.Link) string {
	switch l.Type {
	case topology.LinkNVLink:
		return fmt.Sprintf("NV%d %s GB/s", l.Count, num(l.GBps))
	case topology.LinkXGMI:
		return fmt.Sprintf("xGMI %s GB/s", num(l.GBps))
	case topology.LinkC2C:
		return fmt.Sprintf("C2C %s GB/s", num(l.GBps))
	case topology.LinkSys:
		return fmt.Sprintf("SYS %s GB/s", num(l.GBps))
	case topology.LinkPCIe:
		if l.GBps == 0 {
			return ""
		}
		return fmt.Sprintf("%s GB/s", num(l.GBps))
	}
	return ""
}

func dotQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// DOT writes s as a Graphviz graph: one cluster per NUMA node holding its
// host bridges, switches, GPUs and NICs, NVSwitches apart, edges colored by
// link type and labelled with count and bandwidth.
func DOT(w io.Writer, s *topology.System) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "graph %s {\n", dotQuote("weft topology: "+s.Hostname))
	fmt.Fprintln(ew, "  graph [rankdir=TB, fontname=\"Helvetica\", splines=true, nodesep=0.3];")
	fmt.Fprintln(ew, "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];")
	fmt.Fprintln(ew, "  edge [fontname=\"Helvetica\", fontsize=8];")
	numaOf := map[string]int{}
	for _, r := range s.PCIRoots {
		numaOf[r.ID] = r.NUMANode
	}
	for _, sw := range s.PCISwitches {
		numaOf[sw.ID] = sw.NUMANode
	}
	for _, g := range s.GPUs {
		numaOf[g.ID] = g.NUMANode
	}
	for _, n := range s.NICs {
		numaOf[n.ID] = n.NUMANode
	}
	node := func(id string) {
		shape := "box"
		switch kindPrefix(id) {
		case "gpu":
			shape = "box3d"
		case "nvs":
			shape = "octagon"
		case "hb":
			shape = "ellipse"
		}
		fmt.Fprintf(ew, "    %s [label=%s, shape=%s, fillcolor=%s];\n", dotQuote(id),
			dotQuote(strings.Join(nodeLines(s, id), "\n")), shape, dotQuote(kindColors[kindPrefix(id)]))
	}
	for _, n := range s.NUMANodes {
		fmt.Fprintf(ew, "  subgraph %s {\n    label=%s; style=dashed; color=\"#999999\";\n", dotQuote("cluster_"+n.ID), dotQuote(fmt.Sprintf("NUMA node %d", n.Node)))
		node(n.ID)
		for _, ids := range [][]string{ids(s.PCIRoots, func(r topology.PCIRoot) (string, int) { return r.ID, r.NUMANode }),
			ids(s.PCISwitches, func(r topology.PCISwitch) (string, int) { return r.ID, r.NUMANode }),
			ids(s.GPUs, func(r topology.GPU) (string, int) { return r.ID, r.NUMANode }),
			ids(s.NICs, func(r topology.NIC) (string, int) { return r.ID, r.NUMANode })} {
			for _, id := range ids {
				if numaOf[id] == n.Node {
					node(id)
				}
			}
		}
		fmt.Fprintln(ew, "  }")
	}
	for _, n := range s.NVSwitches {
		node(n.ID)
	}
	for _, l := range s.Links {
		style := "solid"
		if l.Type == topology.LinkSys {
			style = "dashed"
		}
		width := 1.0
		if l.Type == topology.LinkNVLink || l.Type == topology.LinkXGMI {
			width = 2
		}
		fmt.Fprintf(ew, "  %s -- %s [color=%s, style=%s, penwidth=%g, label=%s];\n", dotQuote(l.A), dotQuote(l.B),
			dotQuote(linkColors[l.Type]), style, width, dotQuote(linkLabel(l)))
	}
	fmt.Fprintln(ew, "}")
	return ew.err
}

func ids[T any](xs []T, f func(T) (string, int)) []string {
	var out []string
	for _, x := range xs {
		id, _ := f(x)
		out = append(out, id)
	}
	return out
}
