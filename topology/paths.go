package topology

import (
	"math"
	"sort"
	"strings"
)

// Path computation follows NCCL's ncclTopoSetPaths (src/graph/paths.cc):
// from each GPU and NIC a breadth-first search over the graph keeps, for
// every node, the route with the fewest links and, among those, the widest
// bottleneck. The class of a route is the worst class of its steps:
//
//   - an NVLink or xGMI link: NVL, or NVB when the step leaves an
//     intermediate GPU (the only way a route may cross a GPU, and only as
//     the second step of a GPU's route);
//   - a C2C link: C2C;
//   - a PCIe link between a device and a switch: PIX; between two
//     switches: PXB; touching a host bridge or a CPU: PHB;
//   - a host bridge's link to its NUMA node: NODE (crossing it means
//     going from one host bridge to another);
//   - the link between NUMA nodes: SYS.
//
// All NVSwitches form one fabric node, as in NCCL, so that the bandwidth
// of a GPU's route through the fabric is that of all its NVLinks. Routes
// never cross a NIC, and never cross an NVSwitch through its PCIe
// (management) link.

type nodeKind int

const (
	kindNUMA nodeKind = iota
	kindRoot
	kindSwitch
	kindGPU
	kindFabric
	kindNIC
)

type gedge struct {
	to    int
	typ   LinkType
	count int
	gbps  float64
}

type gnode struct {
	kind  nodeKind
	ids   []string // model IDs (several for the NVSwitch fabric)
	edges []gedge
}

type graph struct {
	nodes []gnode
	index map[string]int // model ID -> node
}

func kindOf(id string) nodeKind {
	switch {
	case strings.HasPrefix(id, "numa"):
		return kindNUMA
	case strings.HasPrefix(id, "hb"):
		return kindRoot
	case strings.HasPrefix(id, "sw"):
		return kindSwitch
	case strings.HasPrefix(id, "gpu"):
		return kindGPU
	case strings.HasPrefix(id, "nvs"):
		return kindFabric
	}
	return kindNIC
}

func newGraph(s *System) *graph {
	g := &graph{index: map[string]int{}}
	fabric := -1
	node := func(id string) int {
		if i, ok := g.index[id]; ok {
			return i
		}
		k := kindOf(id)
		if k == kindFabric && fabric >= 0 {
			g.nodes[fabric].ids = append(g.nodes[fabric].ids, id)
			g.index[id] = fabric
			return fabric
		}
		g.nodes = append(g.nodes, gnode{kind: k, ids: []string{id}})
		g.index[id] = len(g.nodes) - 1
		if k == kindFabric {
			fabric = len(g.nodes) - 1
		}
		return len(g.nodes) - 1
	}
	for _, id := range s.Endpoints() {
		node(id)
	}
	for _, l := range s.Links {
		a, b := node(l.A), node(l.B)
		if l.Type == LinkPCIe && (g.nodes[a].kind == kindFabric || g.nodes[b].kind == kindFabric) {
			continue // NVSwitch management link
		}
		g.connect(a, b, l)
		g.connect(b, a, l)
	}
	return g
}

// connect adds (or, for the NVSwitch fabric, merges into) the edge a→b.
func (g *graph) connect(a, b int, l Link) {
	for i := range g.nodes[a].edges {
		e := &g.nodes[a].edges[i]
		if e.to == b && e.typ == l.Type {
			e.count += l.Count
			e.gbps = round3(e.gbps + l.GBps)
			return
		}
	}
	g.nodes[a].edges = append(g.nodes[a].edges, gedge{to: b, typ: l.Type, count: l.Count, gbps: l.GBps})
}

type label struct {
	set   bool
	hops  int
	gbps  float64 // +Inf until a link with known bandwidth is crossed
	class PathClass
	count int // min NVLink/xGMI count, -1 once a non-NVLink link is crossed
	prev  int
	// viaNV records that the node was reached from the source GPU over one
	// NVLink/xGMI link: the only way a route may continue through a GPU.
	viaNV bool
}

func (a label) better(b label) bool {
	if a.gbps != b.gbps {
		return a.gbps > b.gbps
	}
	return a.class < b.class
}

func isNV(t LinkType) bool { return t == LinkNVLink || t == LinkXGMI }

// stepClass classifies crossing edge e from node u (of the route from src).
func (g *graph) stepClass(u int, e gedge, src int) PathClass {
	ku, kv := g.nodes[u].kind, g.nodes[e.to].kind
	switch e.typ {
	case LinkNVLink, LinkXGMI:
		if ku == kindGPU && u != src {
			return PathNVB
		}
		return PathNVL
	case LinkC2C:
		return PathC2C
	case LinkHost:
		return PathNODE
	case LinkSys:
		return PathSYS
	}
	switch {
	case ku == kindRoot || kv == kindRoot || ku == kindNUMA || kv == kindNUMA:
		return PathPHB
	case ku == kindSwitch && kv == kindSwitch:
		return PathPXB
	}
	return PathPIX
}

// search runs the breadth-first search from src.
func (g *graph) search(src int) []label {
	lab := make([]label, len(g.nodes))
	lab[src] = label{set: true, gbps: math.Inf(1), class: PathLOC, count: math.MaxInt, prev: -1}
	frontier := []int{src}
	for len(frontier) > 0 {
		var next []int
		for _, u := range frontier {
			lu := lab[u]
			if u != src {
				switch g.nodes[u].kind {
				case kindNIC:
					continue
				case kindGPU:
					if !(g.nodes[src].kind == kindGPU && lu.viaNV) {
						continue
					}
				}
			}
			for _, e := range g.nodes[u].edges {
				v := e.to
				if v == src {
					continue
				}
				if g.nodes[u].kind == kindGPU && u != src && !(isNV(e.typ) && g.nodes[v].kind == kindGPU) {
					continue
				}
				cand := label{set: true, hops: lu.hops + 1, gbps: lu.gbps, prev: u,
					class: max(lu.class, g.stepClass(u, e, src)), count: lu.count}
				if e.gbps > 0 && e.gbps < cand.gbps {
					cand.gbps = e.gbps
				}
				if isNV(e.typ) {
					cand.count = min(cand.count, e.count)
				} else {
					cand.count = -1
				}
				cand.viaNV = u == src && isNV(e.typ)
				lv := lab[v]
				switch {
				case !lv.set:
					lab[v] = cand
					next = append(next, v)
				case lv.hops == cand.hops && cand.better(lv):
					lab[v] = cand
				}
			}
		}
		sort.Ints(next)
		frontier = next
	}
	return lab
}

func computePaths(s *System) []Path {
	g := newGraph(s)
	ends := s.Endpoints()
	var out []Path
	for i, a := range ends {
		src := g.index[a]
		lab := g.search(src)
		for _, b := range ends[i+1:] {
			dst := g.index[b]
			l := lab[dst]
			p := Path{A: a, B: b}
			if !l.set {
				// Not reachable: every device hangs from a NUMA node and
				// all NUMA nodes are joined, so this means a malformed
				// model; report the farthest class without a route.
				p.Class = PathSYS
				out = append(out, p)
				continue
			}
			p.Class, p.Hops = l.class, l.hops
			if !math.IsInf(l.gbps, 1) {
				p.GBps = l.gbps
			}
			if l.count > 0 && l.count != math.MaxInt && (p.Class == PathNVL || p.Class == PathNVB) {
				p.LinkCount = l.count
			}
			var via []string
			for n := l.prev; n != src && n >= 0; n = lab[n].prev {
				via = append(append([]string(nil), g.nodes[n].ids...), via...)
			}
			p.Via = via
			out = append(out, p)
		}
	}
	return out
}
