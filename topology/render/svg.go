package render

import (
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/weftccl/weft/topology"
)

// SVG geometry, in pixels.
const (
	colW     = 150 // width of one leaf column
	boxW     = 132
	lineH    = 14
	rowGap   = 56 // vertical space between rows
	margin   = 24
	titleH   = 40
	legendH  = 22
	arcSpace = 90 // room below the GPU row for GPU–GPU arcs
)

type svgNode struct {
	id     string
	x, y   float64 // center of the top edge
	h      float64
	row    int
	lines  []string
	parent string
}

// SVG writes a picture of s: NUMA nodes on top, then host bridges and PCIe
// switches, GPUs and NICs on one row, NVSwitches below; PCIe edges follow
// the tree, NVLink and xGMI edges run between GPUs (arcs) or down to the
// NVSwitches; every edge is colored by type and PCIe and NVLink edges are
// labelled with their bandwidth. The layout is computed here so that no
// graphviz is needed.
func SVG(w io.Writer, s *topology.System) error {
	l := layout(s)
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif" font-size="11">`+"\n",
		l.width, l.height, l.width, l.height)
	fmt.Fprintf(ew, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	title := "weft topo: " + s.Hostname
	if len(s.GPUs) == 0 {
		title += " (no GPU found)"
	}
	fmt.Fprintf(ew, `<text x="%d" y="26" font-size="16" font-weight="bold">%s</text>`+"\n", margin, esc(title))

	// Edges first, boxes on top.
	used := map[topology.LinkType]bool{}
	for _, lk := range s.Links {
		a, okA := l.nodes[lk.A]
		b, okB := l.nodes[lk.B]
		if !okA || !okB {
			continue
		}
		used[lk.Type] = true
		color := linkColors[lk.Type]
		label := linkLabel(lk)
		switch {
		case lk.Type == topology.LinkSys:
			// Between NUMA boxes on the top row.
			left, right := a, b
			if left.x > right.x {
				left, right = right, left
			}
			y := left.y + left.h/2
			fmt.Fprintf(ew, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="6,4"/>`+"\n",
				left.x+boxW/2, y, right.x-boxW/2, y, color)
			edgeLabel(ew, (left.x+right.x)/2, y-4, label, color)
		case (lk.Type == topology.LinkNVLink || lk.Type == topology.LinkXGMI) && a.row == b.row:
			// GPU–GPU: an arc below the GPU row.
			x1, x2 := a.x, b.x
			y := a.y + a.h
			depth := 16 + 0.22*math.Abs(x2-x1)
			depth = math.Min(depth, arcSpace-10)
			fmt.Fprintf(ew, `<path d="M %.1f %.1f Q %.1f %.1f %.1f %.1f" fill="none" stroke="%s" stroke-width="2" stroke-opacity="0.8"/>`+"\n",
				x1, y, (x1+x2)/2, y+2*depth, x2, y, color)
		default:
			upper, lower := a, b
			if upper.row > lower.row {
				upper, lower = lower, upper
			}
			x1, y1 := upper.x, upper.y+upper.h
			x2, y2 := lower.x, lower.y
			width, opacity := 1.5, 1.0
			if lk.Type == topology.LinkNVLink || lk.Type == topology.LinkXGMI || lk.Type == topology.LinkC2C {
				width = 2.5
			}
			if lower.row > upper.row+1 && lk.Type == topology.LinkPCIe {
				// An NVSwitch's management link crosses the GPU row: keep it faint.
				width, opacity = 1, 0.35
			}
			fmt.Fprintf(ew, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f" stroke-opacity="%.2f"/>`+"\n",
				x1, y1, x2, y2, color, width, opacity)
			if lk.Type == topology.LinkNVLink {
				if l.nvsEdges <= 8 {
					edgeLabel(ew, x1+(x2-x1)*0.2, y1+(y2-y1)*0.2+4, fmt.Sprintf("NV%d", lk.Count), color)
				}
			} else if label != "" {
				edgeLabel(ew, (x1+x2)/2, (y1+y2)/2, label, color)
			}
		}
	}
	for _, id := range l.order {
		n := l.nodes[id]
		fill := kindColors[kindPrefix(id)]
		dash := ""
		if strings.HasPrefix(id, "nvs") {
			for _, v := range s.NVSwitches {
				if v.ID == id && v.BDF == "" {
					dash = ` stroke-dasharray="4,3"`
				}
			}
		}
		fmt.Fprintf(ew, `<g><title>%s</title><rect x="%.1f" y="%.1f" width="%d" height="%.1f" rx="6" fill="%s" stroke="#555555"%s/>`,
			esc(strings.Join(n.lines, " | ")), n.x-boxW/2, n.y, boxW, n.h, fill, dash)
		for i, line := range n.lines {
			weight := ""
			if i == 0 {
				weight = ` font-weight="bold"`
			}
			fmt.Fprintf(ew, `<text x="%.1f" y="%.1f" text-anchor="middle"%s>%s</text>`, n.x, n.y+float64(i+1)*lineH+1, weight, esc(line))
		}
		fmt.Fprintln(ew, "</g>")
	}
	// Legend.
	x := float64(margin)
	y := l.height - legendH + 6
	var types []string
	for t := range used {
		types = append(types, string(t))
	}
	sort.Strings(types)
	for _, t := range types {
		c := linkColors[topology.LinkType(t)]
		fmt.Fprintf(ew, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/>`, x, y-4, x+24, y-4, c)
		fmt.Fprintf(ew, `<text x="%.1f" y="%.1f">%s</text>`+"\n", x+30, y, esc(legendName(topology.LinkType(t))))
		x += 150
	}
	fmt.Fprintln(ew, "</svg>")
	return ew.err
}

func legendName(t topology.LinkType) string {
	switch t {
	case topology.LinkNVLink:
		return "NVLink (NV#: links)"
	case topology.LinkXGMI:
		return "xGMI"
	case topology.LinkC2C:
		return "C2C"
	case topology.LinkPCIe:
		return "PCIe (GB/s)"
	case topology.LinkHost:
		return "host bridge"
	case topology.LinkSys:
		return "inter-socket"
	}
	return string(t)
}

func edgeLabel(w io.Writer, x, y float64, label, color string) {
	if label == "" {
		return
	}
	fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="9" fill="%s" stroke="#ffffff" stroke-width="3" paint-order="stroke">%s</text>`+"\n",
		x, y, color, esc(label))
}

func esc(s string) string { return html.EscapeString(s) }

type svgLayout struct {
	nvsEdges      int // GPU–NVSwitch links; their labels are left out when many
	nodes         map[string]*svgNode
	order         []string
	width, height float64
}

// layout places devices. Rows: 0 NUMA nodes, 1 host bridges, then one row
// per switch level, then GPUs and NICs together, then NVSwitches. Leaves
// of the tree take one column each, in tree order; a parent is centred
// over its children. Host bridges and switches with no GPU, NIC or
// NVSwitch below are left out.
func layout(s *topology.System) *svgLayout {
	children := map[string][]string{}
	parentOf := map[string]string{}
	add := func(parent, id string) {
		if parent == "" {
			return
		}
		children[parent] = append(children[parent], id)
		parentOf[id] = parent
	}
	for _, r := range s.PCIRoots {
		add(fmt.Sprintf("numa%d", r.NUMANode), r.ID)
	}
	for _, sw := range s.PCISwitches {
		add(sw.Parent, sw.ID)
	}
	for _, g := range s.GPUs {
		add(g.Parent, g.ID)
	}
	for _, n := range s.NICs {
		add(n.Parent, n.ID)
	}
	// interesting: has a GPU, NIC or NVSwitch at or below it.
	nvsUnder := map[string]bool{}
	for _, n := range s.NVSwitches {
		for p := n.Parent; p != ""; p = parentOf[p] {
			nvsUnder[p] = true
		}
	}
	var interesting func(id string) bool
	interesting = func(id string) bool {
		switch kindPrefix(id) {
		case "gpu", "nic", "numa":
			return true
		}
		if nvsUnder[id] {
			return true
		}
		for _, c := range children[id] {
			if interesting(c) {
				return true
			}
		}
		return false
	}
	depth := map[string]int{}
	maxDepth := 1
	var leaves []string
	var visit func(id string, d int)
	visit = func(id string, d int) {
		depth[id] = d
		if d > maxDepth && (kindPrefix(id) == "sw" || kindPrefix(id) == "hb") {
			maxDepth = d
		}
		var kids []string
		for _, c := range children[id] {
			if interesting(c) {
				kids = append(kids, c)
			}
		}
		sort.SliceStable(kids, func(i, j int) bool { return rank(kids[i]) < rank(kids[j]) })
		children[id] = kids
		if len(kids) == 0 {
			leaves = append(leaves, id)
		}
		for _, c := range kids {
			visit(c, d+1)
		}
	}
	for _, n := range s.NUMANodes {
		visit(n.ID, 0)
	}
	l := &svgLayout{nodes: map[string]*svgNode{}}
	for _, lk := range s.Links {
		if lk.Type == topology.LinkNVLink && (kindPrefix(lk.A) == "nvs" || kindPrefix(lk.B) == "nvs") {
			l.nvsEdges++
		}
	}
	devRow := maxDepth + 1
	rowOf := func(id string) int {
		switch kindPrefix(id) {
		case "gpu", "nic":
			return devRow
		}
		return depth[id]
	}
	cols := float64(len(leaves))
	if n := float64(len(s.NVSwitches)); n > cols {
		cols = n
	}
	l.width = math.Max(2*margin+cols*colW, 640)
	offset := (l.width - 2*margin - float64(len(leaves))*colW) / 2
	for i, id := range leaves {
		l.nodes[id] = &svgNode{id: id, x: margin + offset + (float64(i)+0.5)*colW}
	}
	var place func(id string) float64
	place = func(id string) float64 {
		if n, ok := l.nodes[id]; ok {
			return n.x
		}
		kids := children[id]
		xs := make([]float64, len(kids))
		for i, k := range kids {
			xs[i] = place(k)
		}
		x := (xs[0] + xs[len(xs)-1]) / 2
		l.nodes[id] = &svgNode{id: id, x: x}
		return x
	}
	for _, n := range s.NUMANodes {
		place(n.ID)
	}
	// Row heights from the tallest box of each row.
	rows := devRow + 2
	rowH := make([]float64, rows)
	for id, n := range l.nodes {
		n.row = rowOf(id)
		n.lines = nodeLines(s, id)
		n.h = float64(len(n.lines))*lineH + 8
		rowH[n.row] = math.Max(rowH[n.row], n.h)
	}
	for i, n := range s.NVSwitches {
		sn := &svgNode{id: n.ID, row: devRow + 1, lines: nodeLines(s, n.ID)}
		sn.h = float64(len(sn.lines))*lineH + 8
		k := float64(len(s.NVSwitches))
		sn.x = margin + (l.width-2*margin)*(float64(i)+0.5)/k
		l.nodes[n.ID] = sn
		rowH[devRow+1] = math.Max(rowH[devRow+1], sn.h)
	}
	y := float64(titleH)
	rowY := make([]float64, rows)
	for r := 0; r < rows; r++ {
		rowY[r] = y
		if rowH[r] > 0 {
			y += rowH[r] + rowGap
			if r == devRow && hasGPUArcs(s) {
				y += arcSpace - rowGap/2
			}
		}
	}
	for _, n := range l.nodes {
		n.y = rowY[n.row]
	}
	l.height = y + legendH
	for id := range l.nodes {
		l.order = append(l.order, id)
	}
	sort.Strings(l.order)
	return l
}

// rank orders children: switches, then GPUs, then NICs, then by ID number.
func rank(id string) string {
	k := map[string]string{"hb": "0", "sw": "1", "gpu": "2", "nic": "3"}[kindPrefix(id)]
	n := strings.TrimLeft(id, "abcdefghijklmnopqrstuvwxyz")
	return fmt.Sprintf("%s%06s", k, n)
}

func hasGPUArcs(s *topology.System) bool {
	for _, l := range s.Links {
		if (l.Type == topology.LinkNVLink || l.Type == topology.LinkXGMI) &&
			strings.HasPrefix(l.A, "gpu") && strings.HasPrefix(l.B, "gpu") {
			return true
		}
	}
	return false
}
