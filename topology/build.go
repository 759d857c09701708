package topology

import (
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/weftccl/weft/topology/amdsmi"
	"github.com/weftccl/weft/topology/kfd"
	"github.com/weftccl/weft/topology/nvml"
	"github.com/weftccl/weft/topology/sysfs"
)

// builder assembles a System from inputs.
type builder struct {
	in  *inputs
	sys *System

	pci      map[string]*sysfs.PCIDevice
	rootID   map[string]string // "pci0000:00" -> "hb0"
	rootNUMA map[string]int
	swID     map[string]string // upstream port BDF -> "sw0"
	numaID   map[int]string    // node -> "numa0"
	gpuByBDF map[string]int    // BDF -> index in sys.GPUs
	nvsByBDF map[string]int    // BDF -> index in sys.NVSwitches
	entity   map[string]string // BDF -> GPU/NIC/NVSwitch ID
	kfdGPU   map[int]int       // KFD node id -> index in sys.GPUs
}

func build(in *inputs) *System {
	b := &builder{
		in:       in,
		sys:      &System{SchemaVersion: SchemaVersion, Hostname: in.hostname, SysfsRoot: in.root},
		pci:      map[string]*sysfs.PCIDevice{},
		rootID:   map[string]string{},
		rootNUMA: map[string]int{},
		swID:     map[string]string{},
		numaID:   map[int]string{},
		gpuByBDF: map[string]int{},
		nvsByBDF: map[string]int{},
		entity:   map[string]string{},
		kfdGPU:   map[int]int{},
	}
	b.sys.Sources = in.sources
	b.sys.Warnings = in.warnings
	b.cpu()
	b.numa()
	b.pciTree()
	b.gpus()
	b.nvswitches()
	b.nics()
	b.pciDevices()
	b.links()
	b.sys.Paths = computePaths(b.sys)
	b.p2p()
	b.notes()
	normalize(b.sys)
	return b.sys
}

// normalize replaces nil slices with empty ones so that the JSON form has
// [] rather than null: the schema promises arrays.
func normalize(s *System) {
	empty := func(p *[]string) {
		if *p == nil {
			*p = []string{}
		}
	}
	if s.NUMANodes == nil {
		s.NUMANodes = []NUMANode{}
	}
	for i := range s.NUMANodes {
		if s.NUMANodes[i].Distances == nil {
			s.NUMANodes[i].Distances = []int{}
		}
	}
	if s.PCIRoots == nil {
		s.PCIRoots = []PCIRoot{}
	}
	if s.PCISwitches == nil {
		s.PCISwitches = []PCISwitch{}
	}
	for i := range s.PCISwitches {
		empty(&s.PCISwitches[i].Ports)
	}
	if s.PCIDevices == nil {
		s.PCIDevices = []PCIDevice{}
	}
	if s.GPUs == nil {
		s.GPUs = []GPU{}
	}
	for i := range s.GPUs {
		empty(&s.GPUs[i].Sources)
	}
	if s.NVSwitches == nil {
		s.NVSwitches = []NVSwitch{}
	}
	if s.NICs == nil {
		s.NICs = []NIC{}
	}
	for i := range s.NICs {
		empty(&s.NICs[i].Netdevs)
		if s.NICs[i].Ports == nil {
			s.NICs[i].Ports = []NICPort{}
		}
	}
	if s.Links == nil {
		s.Links = []Link{}
	}
	if s.Paths == nil {
		s.Paths = []Path{}
	}
	for i := range s.Paths {
		empty(&s.Paths[i].Via)
	}
	if s.Sources == nil {
		s.Sources = []SourceStatus{}
	}
	empty(&s.Notes)
	empty(&s.Warnings)
}

func (b *builder) note(format string, args ...any) {
	b.sys.Notes = append(b.sys.Notes, fmt.Sprintf(format, args...))
}

func (b *builder) cpu() {
	c := CPU{Arch: b.in.cpu.Arch, Vendor: b.in.cpu.Vendor, Family: b.in.cpu.Family, Model: b.in.cpu.Model}
	if c.Arch == "" {
		switch runtime.GOARCH {
		case "amd64":
			c.Arch = "x86_64"
		case "arm64":
			c.Arch = "arm64"
		case "ppc64", "ppc64le":
			c.Arch = "ppc64"
		default:
			c.Arch = runtime.GOARCH
		}
		b.note("sysfs has no cpu modalias; assuming this machine's architecture, %s", c.Arch)
	}
	c.InterSocketGBps = InterSocketGBps(c)
	b.sys.CPU = c
}

func (b *builder) numa() {
	nodes := b.in.numa
	if len(nodes) == 0 {
		nodes = []sysfs.NUMANode{{ID: 0}}
		b.note("sysfs lists no NUMA node; modelling one, node 0")
	}
	for _, n := range nodes {
		id := fmt.Sprintf("numa%d", n.ID)
		b.numaID[n.ID] = id
		b.sys.NUMANodes = append(b.sys.NUMANodes, NUMANode{
			ID: id, Node: n.ID, CPUs: sysfs.FormatCPUList(n.CPUs), CPUCount: len(n.CPUs),
			Affinity: sysfs.FormatCPUMask(n.CPUs), MemoryBytes: n.MemoryBytes, Distances: n.Distances,
		})
	}
}

// nodeOr maps a NUMA node number to a known node: itself when sysfs lists
// it, else the lowest node.
func (b *builder) nodeOr(n int) int {
	if _, ok := b.numaID[n]; ok {
		return n
	}
	return b.sys.NUMANodes[0].Node
}

// role classifies a bridge by its depth below the host bridge: a bridge on
// the root bus is a root port; below it, PCIe switches alternate an
// upstream port and its downstream ports. This is the rule NCCL applies
// when it climbs sysfs two levels at a time (ncclTopoGetXmlFromSys).
func role(d *sysfs.PCIDevice) string {
	if !d.IsBridge() {
		return "endpoint"
	}
	switch k := len(d.Ancestors); {
	case k == 0:
		return "root-port"
	case k%2 == 1:
		return "switch-upstream"
	default:
		return "switch-downstream"
	}
}

// attach returns the graph parent of a function below root with the given
// ancestors: the switch that owns the nearest downstream port, or the
// host bridge.
func (b *builder) attach(root string, anc []string) string {
	k := len(anc) - 1
	switch {
	case k <= 0:
		return b.rootID[root]
	case k%2 == 1:
		if id, ok := b.swID[anc[k]]; ok {
			return id
		}
	default:
		if id, ok := b.swID[anc[k-1]]; ok {
			return id
		}
	}
	return b.rootID[root]
}

// link returns the PCIe link of a function: the lower of its own and its
// upstream port's maximum speed and width.
func (b *builder) link(d *sysfs.PCIDevice) PCIeLink {
	speed, width := d.MaxLinkSpeed, d.MaxLinkWidth
	if up, ok := b.pci[d.Parent()]; ok {
		if up.MaxLinkSpeed > 0 && (speed == 0 || up.MaxLinkSpeed < speed) {
			speed = up.MaxLinkSpeed
		}
		if up.MaxLinkWidth > 0 && (width == 0 || up.MaxLinkWidth < width) {
			width = up.MaxLinkWidth
		}
	}
	return PCIeLink{LinkSpeedGTs: speed, LinkWidth: width, PCIeGBps: PCIeGBps(speed, width)}
}

func (b *builder) pciTree() {
	for i := range b.in.pci {
		d := &b.in.pci[i]
		b.pci[d.BDF] = d
	}
	// Host bridges, in name order, with the NUMA node of their functions.
	var roots []string
	for _, d := range b.in.pci {
		if _, ok := b.rootNUMA[d.Root]; !ok {
			b.rootNUMA[d.Root] = -1
			roots = append(roots, d.Root)
		}
		if b.rootNUMA[d.Root] < 0 && d.NUMANode >= 0 {
			b.rootNUMA[d.Root] = d.NUMANode
		}
	}
	sort.Strings(roots)
	for i, r := range roots {
		id := fmt.Sprintf("hb%d", i)
		b.rootID[r] = id
		n := b.rootNUMA[r]
		assumed := n < 0
		if n < 0 {
			n = b.nodeOr(-1)
			if len(b.sys.NUMANodes) > 1 {
				b.note("PCI host bridge %s reports no NUMA node; assuming node %d", r, n)
			}
		}
		b.rootNUMA[r] = b.nodeOr(n)
		b.sys.PCIRoots = append(b.sys.PCIRoots, PCIRoot{ID: id, Name: r, NUMANode: b.rootNUMA[r], NUMAAssumed: assumed})
	}
	// Switches: one per upstream port, numbered in BDF order (sysfs order).
	for i := range b.in.pci {
		d := &b.in.pci[i]
		if role(d) == "switch-upstream" {
			b.swID[d.BDF] = fmt.Sprintf("sw%d", len(b.swID))
		}
	}
	for i := range b.in.pci {
		d := &b.in.pci[i]
		id, ok := b.swID[d.BDF]
		if !ok {
			continue
		}
		sw := PCISwitch{ID: id, BDF: d.BDF, Vendor: hex16(d.Vendor), Device: hex16(d.Device),
			Parent: b.attach(d.Root, d.Ancestors), NUMANode: b.numaOf(d), PCIeLink: b.link(d)}
		for _, p := range b.in.pci {
			if p.IsBridge() && p.Parent() == d.BDF {
				sw.Ports = append(sw.Ports, p.BDF)
			}
		}
		b.sys.PCISwitches = append(b.sys.PCISwitches, sw)
	}
}

func (b *builder) numaOf(d *sysfs.PCIDevice) int {
	if d.NUMANode >= 0 {
		return b.nodeOr(d.NUMANode)
	}
	return b.rootNUMA[d.Root]
}

func hex16(v uint16) string { return fmt.Sprintf("0x%04x", v) }

func isNVIDIAGPU(d sysfs.PCIDevice) bool {
	return d.Vendor == 0x10de && (d.Class>>8 == 0x0300 || d.Class>>8 == 0x0302)
}

func isAMDGPU(d sysfs.PCIDevice) bool {
	c := d.Class >> 8
	return d.Vendor == 0x1002 && (c == 0x0300 || c == 0x0380 || c == 0x1200)
}

func isNVSwitch(d sysfs.PCIDevice) bool { return d.Vendor == 0x10de && d.Class == 0x068000 }

// gpuFromPCI fills the PCI-derived fields of a GPU.
func (b *builder) gpuFromPCI(g *GPU, bdf string) {
	g.BDF = bdf
	d, ok := b.pci[bdf]
	if !ok {
		return
	}
	g.Parent = b.attach(d.Root, d.Ancestors)
	g.NUMANode = b.numaOf(d)
	g.PCIeLink = b.link(d)
	g.Sources = append(g.Sources, "sysfs")
	if g.Name == "" {
		g.Name = pciName(d.Vendor, d.Device)
	}
}

func (b *builder) addGPU(g GPU) int {
	g.ID = fmt.Sprintf("gpu%d", len(b.sys.GPUs))
	if g.Parent == "" {
		// No PCI path: hang the GPU from its NUMA node, as NCCL attaches a
		// GPU without sysfs information to a CPU.
		g.Parent = b.numaID[b.nodeOr(g.NUMANode)]
		g.NUMANode = b.nodeOr(g.NUMANode)
		b.note("%s (%s) is not in the sysfs PCI tree; attached to NUMA node %d", strings.ToUpper(g.ID), g.BDF, g.NUMANode)
	}
	b.sys.GPUs = append(b.sys.GPUs, g)
	b.gpuByBDF[g.BDF] = len(b.sys.GPUs) - 1
	b.entity[g.BDF] = g.ID
	return len(b.sys.GPUs) - 1
}

func (b *builder) gpus() {
	// NVIDIA: NVML order when NVML answered, then PCI functions NVML did
	// not report.
	if b.in.nv != nil {
		for _, d := range b.in.nv.Devices {
			g := GPU{Vendor: VendorNVIDIA, Index: d.Index, Name: d.Name, UUID: d.UUID, Arch: d.Arch(),
				MemoryBytes: int64(min(d.MemoryBytes, 1<<62)), NUMANode: d.NUMANode, Sources: nil}
			b.gpuFromPCI(&g, d.BusID)
			if d.NUMANode >= 0 && g.Parent == "" {
				g.NUMANode = d.NUMANode
			}
			g.Sources = append(g.Sources, "nvml")
			if d.Fabric != nil {
				g.Fabric = &Fabric{ClusterUUID: d.Fabric.ClusterUUID, CliqueID: d.Fabric.CliqueID, State: d.Fabric.State}
			}
			b.addGPU(g)
		}
	}
	for _, d := range b.in.pci {
		if isNVIDIAGPU(d) {
			if _, seen := b.gpuByBDF[d.BDF]; !seen {
				g := GPU{Vendor: VendorNVIDIA, Index: -1}
				b.gpuFromPCI(&g, d.BDF)
				b.addGPU(g)
			}
		}
	}
	// AMD: KFD order (the ROCm device order), then AMD SMI, then PCI.
	for _, n := range b.in.kfd {
		if !n.IsGPU() {
			continue
		}
		if i, dup := b.gpuByBDF[n.BDF]; dup {
			b.kfdGPU[n.ID] = i
			b.note("KFD node %d shares %s with another node (GPU partition); counted once", n.ID, n.BDF)
			continue
		}
		g := GPU{Vendor: VendorAMD, Index: len(b.kfdGPU), Arch: n.GFXTarget, NUMANode: -1}
		b.gpuFromPCI(&g, n.BDF)
		if g.Name == "" || strings.HasPrefix(g.Name, "AMD device") {
			if n.Name != "" {
				g.Name = "AMD " + n.Name
			}
		}
		if n.UniqueID != 0 {
			g.UUID = fmt.Sprintf("0x%016x", n.UniqueID)
		}
		g.Sources = append(g.Sources, "kfd")
		b.kfdGPU[n.ID] = b.addGPU(g)
	}
	if b.in.amd != nil {
		for _, d := range b.in.amd.Devices {
			if i, ok := b.gpuByBDF[d.BusID]; ok {
				g := &b.sys.GPUs[i]
				g.Sources = append(g.Sources, "amdsmi")
				if d.UUID != "" {
					g.UUID = d.UUID
				}
				continue
			}
			g := GPU{Vendor: VendorAMD, Index: d.Index, UUID: d.UUID, NUMANode: -1}
			b.gpuFromPCI(&g, d.BusID)
			g.Sources = append(g.Sources, "amdsmi")
			b.addGPU(g)
		}
	}
	for _, d := range b.in.pci {
		if isAMDGPU(d) {
			if _, seen := b.gpuByBDF[d.BDF]; !seen {
				g := GPU{Vendor: VendorAMD, Index: -1}
				b.gpuFromPCI(&g, d.BDF)
				b.addGPU(g)
			}
		}
	}
}

func (b *builder) addNVSwitch(bdf string) int {
	s := NVSwitch{ID: fmt.Sprintf("nvs%d", len(b.sys.NVSwitches)), BDF: bdf, NUMANode: -1}
	if d, ok := b.pci[bdf]; ok {
		s.Parent = b.attach(d.Root, d.Ancestors)
		s.NUMANode = b.numaOf(d)
	}
	b.sys.NVSwitches = append(b.sys.NVSwitches, s)
	b.nvsByBDF[bdf] = len(b.sys.NVSwitches) - 1
	if bdf != "" {
		b.entity[bdf] = s.ID
	}
	return len(b.sys.NVSwitches) - 1
}

func (b *builder) nvswitches() {
	for _, d := range b.in.pci {
		if isNVSwitch(d) {
			b.addNVSwitch(d.BDF)
		}
	}
	if b.in.nv == nil {
		return
	}
	// NVML's remote ends name switches the PCI bus may not show; an
	// invisible one (empty bus id) becomes a single anonymous switch.
	for _, d := range b.in.nv.Devices {
		for _, l := range d.NvLinks {
			if l.RemoteType != nvml.RemoteSwitch {
				continue
			}
			if _, ok := b.nvsByBDF[l.RemoteBusID]; !ok {
				b.addNVSwitch(l.RemoteBusID)
			}
		}
	}
}

// naturalLess orders "mlx5_2" before "mlx5_10".
func naturalLess(a, b string) bool {
	pa, na := splitNum(a)
	pb, nb := splitNum(b)
	if pa != pb {
		return pa < pb
	}
	if na != nb {
		return na < nb
	}
	return a < b
}

func splitNum(s string) (string, int) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	n, err := strconv.Atoi(s[i:])
	if err != nil {
		return s, -1
	}
	return s[:i], n
}

func (b *builder) nics() {
	rdma := append([]sysfs.RDMADevice(nil), b.in.rdma...)
	sort.SliceStable(rdma, func(i, j int) bool { return naturalLess(rdma[i].Name, rdma[j].Name) })
	used := map[string]bool{}
	var nics []NIC
	for _, r := range rdma {
		if r.BDF == "" {
			b.note("RDMA device %s has no PCI function (software RDMA); not listed as a NIC", r.Name)
			continue
		}
		n := NIC{Name: r.Name, BDF: r.BDF, Bus: "pci", RDMA: true, GUID: fmt.Sprintf("0x%016x", r.NodeGUID)}
		if r.NodeGUID == 0 {
			n.GUID = ""
		}
		nd := map[string]bool{}
		for _, p := range r.Ports {
			n.Ports = append(n.Ports, NICPort{Port: p.Port, LinkLayer: p.LinkLayer, State: p.State, RateGbps: p.RateGbps, Netdev: p.Netdev})
			if p.State == "ACTIVE" && p.RateGbps > n.SpeedGbps {
				n.SpeedGbps = p.RateGbps
			}
			if p.Netdev != "" {
				nd[p.Netdev] = true
			}
		}
		for _, x := range r.Netdevs {
			nd[x] = true
		}
		for x := range nd {
			n.Netdevs = append(n.Netdevs, x)
		}
		sort.Strings(n.Netdevs)
		used[r.BDF] = true
		nics = append(nics, n)
	}
	byBDF := map[string]int{}
	for _, d := range b.in.nets {
		if used[d.BDF] {
			// Fill the speed of an RDMA NIC whose ports gave none.
			for i := range nics {
				if nics[i].BDF == d.BDF && nics[i].SpeedGbps == 0 && d.SpeedMbps > 0 {
					nics[i].SpeedGbps = float64(d.SpeedMbps) / 1000
				}
			}
			continue
		}
		if _, isGPU := b.gpuByBDF[d.BDF]; isGPU {
			continue
		}
		if i, ok := byBDF[d.BDF]; ok {
			nics[i].Netdevs = append(nics[i].Netdevs, d.Name)
			continue
		}
		n := NIC{Name: d.Name, BDF: d.BDF, Bus: d.Bus, Netdevs: []string{d.Name}, SpeedGbps: float64(d.SpeedMbps) / 1000}
		byBDF[d.BDF] = len(nics)
		nics = append(nics, n)
	}
	for i := range nics {
		n := &nics[i]
		n.ID = fmt.Sprintf("nic%d", i)
		n.NUMANode = -1
		if d, ok := b.pci[n.BDF]; ok {
			n.Parent = b.attach(d.Root, d.Ancestors)
			n.NUMANode = b.numaOf(d)
			n.PCIeLink = b.link(d)
		} else {
			n.NUMANode = b.nodeOr(-1)
			n.Parent = b.numaID[n.NUMANode]
		}
		b.entity[n.BDF] = n.ID
	}
	b.sys.NICs = nics
}

func (b *builder) pciDevices() {
	for i := range b.in.pci {
		d := &b.in.pci[i]
		p := PCIDevice{
			BDF: d.BDF, Class: fmt.Sprintf("0x%06x", d.Class), ClassName: className(d.Class),
			Vendor: hex16(d.Vendor), Device: hex16(d.Device),
			SubsystemVendor: hex16(d.SubVendor), SubsystemDevice: hex16(d.SubDevice),
			Role: role(d), NUMANode: b.numaOf(d), Driver: d.Driver, Entity: b.entity[d.BDF],
			PCIeLink: b.link(d),
		}
		if p.Role == "switch-upstream" {
			p.Parent = b.swID[d.BDF]
		} else {
			p.Parent = b.attach(d.Root, d.Ancestors)
		}
		b.sys.PCIDevices = append(b.sys.PCIDevices, p)
	}
}

// nvlinkGBps is one link's per-direction bandwidth: NVML's reported speed,
// or the generation's nominal rate.
func nvlinkGBps(l nvml.NvLink) float64 {
	if l.SpeedMBps > 0 {
		return float64(l.SpeedMBps) / 1000
	}
	return NVLinkGBps(l.Version)
}

func (b *builder) links() {
	s := b.sys
	add := func(l Link) { s.Links = append(s.Links, l) }
	for _, r := range s.PCIRoots {
		add(Link{A: r.ID, B: b.numaID[r.NUMANode], Type: LinkHost, Count: 1})
	}
	for i := range s.NUMANodes {
		for j := i + 1; j < len(s.NUMANodes); j++ {
			add(Link{A: s.NUMANodes[i].ID, B: s.NUMANodes[j].ID, Type: LinkSys, Count: 1, GBps: s.CPU.InterSocketGBps})
		}
	}
	for _, sw := range s.PCISwitches {
		add(Link{A: sw.ID, B: sw.Parent, Type: LinkPCIe, Count: 1, GBps: sw.PCIeGBps})
	}
	for _, g := range s.GPUs {
		add(Link{A: g.ID, B: g.Parent, Type: LinkPCIe, Count: 1, GBps: g.PCIeGBps})
	}
	for _, n := range s.NVSwitches {
		if n.Parent != "" {
			d := b.pci[n.BDF]
			add(Link{A: n.ID, B: n.Parent, Type: LinkPCIe, Count: 1, GBps: b.link(d).PCIeGBps})
		}
	}
	for _, n := range s.NICs {
		add(Link{A: n.ID, B: n.Parent, Type: LinkPCIe, Count: 1, GBps: n.PCIeGBps})
	}
	b.nvlinks()
	b.xgmi()
}

type pairKey struct{ a, b string }

func (b *builder) nvlinks() {
	if b.in.nv == nil {
		return
	}
	s := b.sys
	type bundle struct {
		count int
		gbps  float64
		typ   LinkType
	}
	bundles := map[pairKey]*bundle{}
	var order []pairKey
	gpuGPU := map[pairKey]map[string]int{} // per unordered GPU pair: count seen from each side
	for _, d := range b.in.nv.Devices {
		gi, ok := b.gpuByBDF[d.BusID]
		if !ok {
			continue
		}
		g := &s.GPUs[gi]
		for _, l := range d.NvLinks {
			var remote string
			switch l.RemoteType {
			case nvml.RemoteSwitch:
				remote = s.NVSwitches[b.nvsByBDF[l.RemoteBusID]].ID
			case nvml.RemoteIBMNPU:
				remote = b.numaID[g.NUMANode]
			default:
				ri, ok := b.gpuByBDF[l.RemoteBusID]
				if !ok {
					b.note("%s NVLink %d leads to %q, which is not a known GPU; ignored", strings.ToUpper(g.ID), l.Link, l.RemoteBusID)
					continue
				}
				remote = s.GPUs[ri].ID
			}
			g.NVLinks++
			g.NVLinkGBps = round3(g.NVLinkGBps + nvlinkGBps(l))
			k := pairKey{g.ID, remote}
			if strings.HasPrefix(remote, "gpu") {
				u := k
				if gpuIndex(remote) < gpuIndex(g.ID) {
					u = pairKey{remote, g.ID}
				}
				if gpuGPU[u] == nil {
					gpuGPU[u] = map[string]int{}
				}
				gpuGPU[u][g.ID]++
				if u != k {
					continue // counted from the lower-numbered GPU
				}
			}
			if bundles[k] == nil {
				bundles[k] = &bundle{typ: LinkNVLink}
				order = append(order, k)
			}
			bundles[k].count++
			bundles[k].gbps += nvlinkGBps(l)
		}
		if d.C2C != nil {
			k := pairKey{g.ID, b.numaID[g.NUMANode]}
			bundles[k] = &bundle{count: d.C2C.Links, gbps: float64(d.C2C.Links*d.C2C.BandwidthMBps) / 1000, typ: LinkC2C}
			order = append(order, k)
		}
	}
	for u, sides := range gpuGPU {
		if len(sides) == 2 && sides[u.a] != sides[u.b] {
			b.note("%s reports %d NVLinks to %s, which reports %d", strings.ToUpper(u.a), sides[u.a], strings.ToUpper(u.b), sides[u.b])
		}
	}
	for _, k := range order {
		bd := bundles[k]
		s.Links = append(s.Links, Link{A: k.a, B: k.b, Type: bd.typ, Count: bd.count, GBps: round3(bd.gbps)})
		if bd.typ == LinkNVLink && strings.HasPrefix(k.b, "nvs") {
			for i := range s.NVSwitches {
				if s.NVSwitches[i].ID == k.b {
					s.NVSwitches[i].Links += bd.count
				}
			}
		}
	}
}

func gpuIndex(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "gpu"))
	return n
}

// xgmi adds AMD GPU–GPU links from the KFD io_links (one xGMI hop, weight
// 15 per kfd_crat.c) and from AMD SMI (link type xGMI, one hop).
func (b *builder) xgmi() {
	s := b.sys
	gbps := map[pairKey]float64{}
	var order []pairKey
	put := func(i, j int, bw float64) {
		if i == j {
			return
		}
		if i > j {
			i, j = j, i
		}
		k := pairKey{s.GPUs[i].ID, s.GPUs[j].ID}
		old, seen := gbps[k]
		if !seen {
			order = append(order, k)
		}
		if bw > old {
			gbps[k] = bw
		} else {
			gbps[k] = old
		}
	}
	for _, n := range b.in.kfd {
		from, ok := b.kfdGPU[n.ID]
		if !ok {
			continue
		}
		for _, l := range n.IOLinks {
			to, ok := b.kfdGPU[l.To]
			if !ok || l.Type != kfd.LinkXGMI || l.Weight > 15 || l.Flags&kfd.FlagEnabled == 0 && l.Flags != 0 {
				continue
			}
			put(from, to, float64(l.MaxBandwidthMBps)/1000)
		}
	}
	if b.in.amd != nil {
		idx := map[int]int{}
		for _, d := range b.in.amd.Devices {
			if i, ok := b.gpuByBDF[d.BusID]; ok {
				idx[d.Index] = i
			}
		}
		for _, p := range b.in.amd.Pairs {
			i, ok1 := idx[p.A]
			j, ok2 := idx[p.B]
			if ok1 && ok2 && p.Type == amdsmi.LinkXGMI && p.Hops == 1 {
				put(i, j, float64(p.MaxBandwidthMBps)/1000)
			}
		}
	}
	for _, k := range order {
		s.Links = append(s.Links, Link{A: k.a, B: k.b, Type: LinkXGMI, Count: 1, GBps: round3(gbps[k])})
		for i := range s.GPUs {
			if s.GPUs[i].ID == k.a || s.GPUs[i].ID == k.b {
				s.GPUs[i].NVLinks++
				s.GPUs[i].NVLinkGBps = round3(s.GPUs[i].NVLinkGBps + gbps[k])
			}
		}
	}
}

// p2p fills Path.P2P for every GPU pair.
func (b *builder) p2p() {
	s := b.sys
	nvPair := map[pairKey]nvml.Pair{}
	if b.in.nv != nil {
		byIndex := map[int]string{}
		for _, g := range s.GPUs {
			if g.Vendor == VendorNVIDIA && g.Index >= 0 {
				byIndex[g.Index] = g.ID
			}
		}
		for _, p := range b.in.nv.Pairs {
			nvPair[pairKey{byIndex[p.A], byIndex[p.B]}] = p
			nvPair[pairKey{byIndex[p.B], byIndex[p.A]}] = p
		}
	}
	amdPair := map[pairKey]amdsmi.Pair{}
	if b.in.amd != nil {
		byIndex := map[int]string{}
		for _, d := range b.in.amd.Devices {
			if i, ok := b.gpuByBDF[d.BusID]; ok {
				byIndex[d.Index] = s.GPUs[i].ID
			}
		}
		for _, p := range b.in.amd.Pairs {
			amdPair[pairKey{byIndex[p.A], byIndex[p.B]}] = p
			amdPair[pairKey{byIndex[p.B], byIndex[p.A]}] = p
		}
	}
	kfdLink := map[pairKey]kfd.IOLink{}
	for _, n := range b.in.kfd {
		from, ok := b.kfdGPU[n.ID]
		if !ok {
			continue
		}
		for _, l := range n.IOLinks {
			if to, ok := b.kfdGPU[l.To]; ok {
				kfdLink[pairKey{s.GPUs[from].ID, s.GPUs[to].ID}] = l
			}
		}
	}
	for i := range s.Paths {
		p := &s.Paths[i]
		ga, okA := s.GPU(p.A)
		gb, okB := s.GPU(p.B)
		if !okA || !okB {
			continue
		}
		k := pairKey{p.A, p.B}
		switch {
		case ga.Vendor != gb.Vendor:
			p.P2P = &P2P{Source: "inferred", Reason: "GPUs of different vendors"}
		case ga.Vendor == VendorNVIDIA && hasKey(nvPair, k):
			np := nvPair[k]
			p.P2P = &P2P{Read: np.Read, Write: np.Write, Atomics: np.Atomics, Source: "nvml", Reason: np.Reason}
			// NVML's common ancestor is a PCIe-only view; compare it where
			// the path is PCIe too.
			if want, ok := ancestorClass[np.Ancestor]; ok && p.Class >= PathPIX && p.Class != want {
				b.note("NVML places the common ancestor of %s and %s at %s; weft's PCI model says %s",
					strings.ToUpper(p.A), strings.ToUpper(p.B), np.Ancestor, p.Class)
			}
		case ga.Vendor == VendorAMD && hasKey(amdPair, k):
			ap := amdPair[k]
			dma := ap.Accessible && ap.DMA != amdsmi.No
			p.P2P = &P2P{Read: dma, Write: dma, Atomics: dma && ap.Atomics64 == amdsmi.Yes, Source: "amdsmi"}
			if !ap.Accessible {
				p.P2P.Reason = "amdsmi_is_P2P_accessible is false"
			}
		case ga.Vendor == VendorAMD && hasKey(kfdLink, k):
			dma, atomics := kfdLink[k].P2P()
			p.P2P = &P2P{Read: dma, Write: dma, Atomics: dma && atomics, Source: "kfd"}
			if !dma {
				p.P2P.Reason = "KFD io_link flags exclude peer DMA"
			}
		default:
			p.P2P = inferredP2P(p.Class)
		}
	}
}

// ancestorClass maps NVML's topology levels to path classes.
var ancestorClass = map[nvml.Ancestor]PathClass{
	nvml.AncestorSingle: PathPIX, nvml.AncestorMultiple: PathPXB, nvml.AncestorHostBridge: PathPHB,
	nvml.AncestorNode: PathNODE, nvml.AncestorSystem: PathSYS,
}

func hasKey[V any](m map[pairKey]V, k pairKey) bool {
	_, ok := m[k]
	return ok
}

// inferredP2P applies NCCL's default P2P level (PXB, ncclTopoCheckP2p in
// src/graph/paths.cc): P2P through at most PCIe switches or NVLink;
// atomics only over NVLink.
func inferredP2P(c PathClass) *P2P {
	p := &P2P{Source: "inferred"}
	if c <= PathPXB && c != PathC2C {
		p.Read, p.Write = true, true
		p.Atomics = c <= PathNVB
	} else {
		p.Reason = fmt.Sprintf("path class %s is beyond NCCL's default P2P level PXB", c)
	}
	return p
}

func (b *builder) notes() {
	if len(b.sys.GPUs) > 0 {
		return
	}
	var why []string
	why = append(why, fmt.Sprintf("no NVIDIA or AMD GPU function (class 0300, 0302, 0380 or 1200) among the %d PCI functions in %s", len(b.in.pci), b.in.root))
	for _, src := range b.sys.Sources {
		if src.Name != "sysfs" && !src.Available {
			why = append(why, src.Name+": "+src.Detail)
		}
	}
	b.sys.Notes = append([]string{"no GPU found: " + strings.Join(why, "; ")}, b.sys.Notes...)
}
