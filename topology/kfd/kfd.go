// Package kfd reads the topology the amdgpu kernel driver publishes for
// ROCm under /sys/class/kfd/kfd/topology: one node per CPU socket and per
// AMD GPU (or GPU partition), each with io_links that give the link type
// (PCIe or xGMI), the weight the runtime uses as distance, latency and
// bandwidth ranges and capability flags. It needs no ROCm library, so it
// is the AMD source that works in any container that can read sysfs.
//
// Field meanings and units follow the kernel's kfd_topology.c and
// kfd_crat.h (bandwidth in MB/s, latency in ns).
package kfd

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/topology/sysfs"
)

// Dir is the KFD topology directory relative to the sysfs root.
const Dir = "class/kfd/kfd/topology/nodes"

// LinkType is a CRAT io_link type (kfd_crat.h CRAT_IOLINK_TYPE_*).
type LinkType int

// io_link types weft distinguishes; others keep their number.
const (
	LinkHyperTransport LinkType = 1
	LinkPCIe           LinkType = 2
	LinkXGMI           LinkType = 11
)

func (t LinkType) String() string {
	switch t {
	case LinkHyperTransport:
		return "hypertransport"
	case LinkPCIe:
		return "pcie"
	case LinkXGMI:
		return "xgmi"
	}
	return fmt.Sprintf("type%d", int(t))
}

// io_link flag bits (kfd_crat.h CRAT_IOLINK_FLAGS_*).
const (
	FlagEnabled       = 1 << 0
	FlagNonCoherent   = 1 << 1
	FlagNoAtomics32   = 1 << 2
	FlagNoAtomics64   = 1 << 3
	FlagNoPeerDMA     = 1 << 4
	FlagBidirectional = 1 << 31
)

// IOLink is one directed io_link of a node.
type IOLink struct {
	Type             LinkType
	From, To         int // KFD node ids
	Weight           int // NUMA-style distance: 20 for PCIe, 15 per xGMI hop
	MinLatencyNS     int64
	MaxLatencyNS     int64
	MinBandwidthMBps int64
	MaxBandwidthMBps int64
	Flags            uint32
}

// P2P reports what the link's flags allow: peer DMA (reads and writes)
// and 64-bit atomics.
func (l IOLink) P2P() (dma, atomics bool) {
	return l.Flags&FlagNoPeerDMA == 0, l.Flags&FlagNoAtomics64 == 0
}

// Node is one KFD topology node.
type Node struct {
	ID       int
	GPUID    uint32 // 0 for a CPU node
	Name     string // the node's name file ("gfx942"), may be empty
	CPUCores int    // cpu_cores_count, >0 for CPU nodes
	SIMDs    int    // simd_count, >0 for GPU nodes
	VendorID uint16
	DeviceID uint16
	// BDF is the GPU's PCI address from domain and location_id; "" for
	// CPU nodes.
	BDF string
	// GFXTarget is the LLVM target ("gfx942") from gfx_target_version.
	GFXTarget string
	HiveID    uint64 // xGMI hive, 0 when not in one
	UniqueID  uint64
	// DRMRenderMinor is the /dev/dri/renderD<N> minor, -1 when absent.
	DRMRenderMinor int
	IOLinks        []IOLink
}

// IsGPU reports whether the node is a GPU (or GPU partition).
func (n Node) IsGPU() bool { return n.GPUID != 0 }

// maxProperties bounds a properties file; the kernel writes about 40 lines.
const maxProperties = 512

// Properties is a parsed KFD properties file, in file order.
type Properties struct {
	Keys   []string
	Values map[string]uint64
}

// Get returns the value of key and whether it was present.
func (p Properties) Get(key string) (uint64, bool) {
	v, ok := p.Values[key]
	return v, ok
}

// ParseProperties parses a KFD properties file: one "name value" pair per
// line with an unsigned decimal value, as kfd_topology.c writes them.
// Duplicate names, non-numeric values and lines that are not pairs are
// errors wrapping sysfs.ErrMalformed.
func ParseProperties(s string) (Properties, error) {
	p := Properties{Values: map[string]uint64{}}
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return Properties{}, fmt.Errorf("line %d %q: want \"name value\": %w", i+1, trunc(line), sysfs.ErrMalformed)
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			// Some kernels print negative 32-bit values for unset fields
			// (for example drm_render_minor -1).
			n, err2 := strconv.ParseInt(f[1], 10, 32)
			if err2 != nil {
				return Properties{}, fmt.Errorf("line %d: %s=%q is not a number: %w", i+1, trunc(f[0]), trunc(f[1]), sysfs.ErrMalformed)
			}
			v = uint64(uint32(int32(n)))
		}
		if _, dup := p.Values[f[0]]; dup {
			return Properties{}, fmt.Errorf("line %d: %s repeated: %w", i+1, trunc(f[0]), sysfs.ErrMalformed)
		}
		if len(p.Keys) == maxProperties {
			return Properties{}, fmt.Errorf("more than %d properties: %w", maxProperties, sysfs.ErrMalformed)
		}
		p.Keys = append(p.Keys, f[0])
		p.Values[f[0]] = v
	}
	return p, nil
}

func trunc(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// ParseIOLink parses the properties of one io_link.
func ParseIOLink(s string) (IOLink, error) {
	p, err := ParseProperties(s)
	if err != nil {
		return IOLink{}, err
	}
	need := []string{"type", "node_from", "node_to"}
	for _, k := range need {
		if _, ok := p.Values[k]; !ok {
			return IOLink{}, fmt.Errorf("io_link has no %s: %w", k, sysfs.ErrMalformed)
		}
	}
	small := func(k string) (int64, error) {
		v := p.Values[k]
		if v > math.MaxInt32 {
			return 0, fmt.Errorf("io_link %s=%d out of range: %w", k, v, sysfs.ErrMalformed)
		}
		return int64(v), nil
	}
	var l IOLink
	var errs [9]error
	var typ, from, to, w int64
	typ, errs[0] = small("type")
	from, errs[1] = small("node_from")
	to, errs[2] = small("node_to")
	w, errs[3] = small("weight")
	l.MinLatencyNS, errs[4] = small("min_latency")
	l.MaxLatencyNS, errs[5] = small("max_latency")
	l.MinBandwidthMBps, errs[6] = small("min_bandwidth")
	l.MaxBandwidthMBps, errs[7] = small("max_bandwidth")
	flags := p.Values["flags"]
	if flags > math.MaxUint32 {
		errs[8] = fmt.Errorf("io_link flags %#x out of range: %w", flags, sysfs.ErrMalformed)
	}
	if err := errors.Join(errs[:]...); err != nil {
		return IOLink{}, err
	}
	l.Type, l.From, l.To, l.Weight, l.Flags = LinkType(typ), int(from), int(to), int(w), uint32(flags)
	return l, nil
}

// GFXTarget turns gfx_target_version (major*10000 + minor*100 + stepping)
// into the LLVM target name: 90402 → "gfx942", 90010 → "gfx90a",
// 110000 → "gfx1100". 0 gives "".
func GFXTarget(v uint64) string {
	if v == 0 || v > 999999 {
		return ""
	}
	major, minor, step := v/10000, (v/100)%100, v%100
	return fmt.Sprintf("gfx%d%d%x", major, minor, step)
}

// Read reads every node below the KFD topology directory of f, sorted by
// id. Without the directory (no amdgpu driver) the error wraps
// hal.ErrNotSupported; malformed files give errors naming them.
func Read(f *sysfs.FS) ([]Node, error) {
	if !f.Exists(Dir) {
		return nil, fmt.Errorf("no KFD topology at %s (amdgpu driver not loaded): %w", f.Path(Dir), hal.ErrNotSupported)
	}
	names, err := f.List(Dir)
	if err != nil {
		return nil, err
	}
	var nodes []Node
	var errs []error
	for _, name := range names {
		id, err := strconv.Atoi(name)
		if err != nil || id < 0 {
			continue
		}
		n, err := readNode(f, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	return nodes, errors.Join(errs...)
}

func readNode(f *sysfs.FS, id int) (Node, error) {
	rel := fmt.Sprintf("%s/%d", Dir, id)
	s, err := f.ReadAttr(rel + "/properties")
	if err != nil {
		return Node{}, err
	}
	p, err := ParseProperties(s)
	if err != nil {
		return Node{}, &sysfs.AttrError{File: f.Path(rel + "/properties"), Err: err}
	}
	n := Node{ID: id, DRMRenderMinor: -1}
	gs, err := f.ReadAttr(rel + "/gpu_id")
	if err != nil {
		return Node{}, err
	}
	g, err := strconv.ParseUint(strings.TrimSpace(gs), 10, 32)
	if err != nil {
		return Node{}, &sysfs.AttrError{File: f.Path(rel + "/gpu_id"), Err: fmt.Errorf("gpu_id %q: %w", trunc(gs), sysfs.ErrMalformed)}
	}
	n.GPUID = uint32(g)
	n.Name, _ = f.ReadAttr(rel + "/name")
	clamp := func(k string) int {
		v := p.Values[k]
		if v > math.MaxInt32 {
			return math.MaxInt32
		}
		return int(v)
	}
	n.CPUCores, n.SIMDs = clamp("cpu_cores_count"), clamp("simd_count")
	n.VendorID, n.DeviceID = uint16(p.Values["vendor_id"]), uint16(p.Values["device_id"])
	n.GFXTarget = GFXTarget(p.Values["gfx_target_version"])
	n.HiveID, n.UniqueID = p.Values["hive_id"], p.Values["unique_id"]
	if v, ok := p.Get("drm_render_minor"); ok && v < 1<<20 {
		n.DRMRenderMinor = int(v)
	}
	if n.IsGPU() {
		loc, ok := p.Get("location_id")
		if !ok {
			return Node{}, &sysfs.AttrError{File: f.Path(rel + "/properties"), Err: fmt.Errorf("GPU node has no location_id: %w", sysfs.ErrMalformed)}
		}
		dom := p.Values["domain"]
		if dom > 0xffff || loc > 0xffff {
			return Node{}, &sysfs.AttrError{File: f.Path(rel + "/properties"), Err: fmt.Errorf("domain %d / location_id %d out of range: %w", dom, loc, sysfs.ErrMalformed)}
		}
		// location_id is (bus << 8) | devfn with devfn = (device << 3) | function.
		n.BDF = fmt.Sprintf("%04x:%02x:%02x.%x", dom, loc>>8, (loc>>3)&0x1f, loc&7)
	}
	links, err := f.List(rel + "/io_links")
	if err != nil {
		return Node{}, err
	}
	for _, l := range links {
		lrel := rel + "/io_links/" + l + "/properties"
		ls, err := f.ReadAttr(lrel)
		if err != nil {
			return Node{}, err
		}
		link, err := ParseIOLink(ls)
		if err != nil {
			return Node{}, &sysfs.AttrError{File: f.Path(lrel), Err: err}
		}
		n.IOLinks = append(n.IOLinks, link)
	}
	sort.Slice(n.IOLinks, func(i, j int) bool { return n.IOLinks[i].To < n.IOLinks[j].To })
	return n, nil
}
