// Package ncclxml writes a System as the topology XML that NCCL loads from
// NCCL_TOPO_FILE, and reads such files back with the grammar NCCL's own
// parser accepts (src/graph/xml.cc), so that tests can check that NCCL
// would read what weft writes.
//
// The layout is the one NCCL's detection produces and NCCL_TOPO_DUMP_FILE
// shows: a <cpu> per NUMA node; below it a <pci> per PCIe switch (its
// upstream port; root ports and downstream ports are skipped, as NCCL
// skips them) and per GPU or NIC; a <gpu> inside its GPU's <pci> with one
// <nvlink> per NVLink peer (a GPU, or an NVSwitch with tclass 0x068000);
// a <nic> with one <net> per RDMA device or interface inside its NIC's
// <pci>. AMD GPUs get RCCL's <xgmi> elements, which NCCL ignores.
//
// Attributes that NCCL fills from its own run-time detection only when
// they are absent — gdr on GPUs, and latency, maxconn and gdr on nets
// (xmlInitAttrInt in src/graph/topo.cc) — are left out so that loading
// the file does not override what NCCL would detect.
package ncclxml

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/weftccl/weft/topology"
)

// Version is the <system version> NCCL requires (NCCL_TOPO_XML_VERSION).
const Version = 1

// Node is an XML element as NCCL's parser sees it: a name, attributes in
// order, and children. NCCL's XML has no text content.
type Node struct {
	Name  string
	Attrs []Attr
	Subs  []*Node
}

// Attr is one attribute.
type Attr struct{ Key, Value string }

// Get returns the value of attribute key.
func (n *Node) Get(key string) (string, bool) {
	for _, a := range n.Attrs {
		if a.Key == key {
			return a.Value, true
		}
	}
	return "", false
}

func (n *Node) set(key, value string) { n.Attrs = append(n.Attrs, Attr{key, sanitize(value)}) }

func (n *Node) add(name string) *Node {
	c := &Node{Name: name}
	n.Subs = append(n.Subs, c)
	return c
}

// sanitize keeps a value inside NCCL's reader: it has no entity decoding,
// stops a value at the quote that opened it and limits values to 255
// bytes (MAX_STR_LEN).
func sanitize(v string) string {
	v = strings.Map(func(r rune) rune {
		switch r {
		case '"', '\'', '<', '>', '&', '\n', '\r', '\t':
			return '_'
		}
		return r
	}, v)
	if len(v) > 255 {
		v = v[:255]
	}
	return v
}

// linkSpeed renders GT/s in the spelling of NCCL's kvDictPciGen
// ("16.0 GT/s PCIe", "2.5 GT/s PCIe"); "" when unknown, which NCCL reads
// as its default (Gen3).
func linkSpeed(gts float64) string {
	if gts <= 0 {
		return ""
	}
	return strconv.FormatFloat(gts, 'f', 1, 64) + " GT/s PCIe"
}

// Build turns a System into the XML tree.
func Build(s *topology.System) *Node {
	root := &Node{Name: "system"}
	root.set("version", strconv.Itoa(Version))
	if s.Hostname != "" {
		root.set("name", "weft:"+s.Hostname)
	}
	b := &builder{s: s, pci: map[string]*topology.PCIDevice{}, children: map[string][]string{}}
	for i := range s.PCIDevices {
		b.pci[s.PCIDevices[i].BDF] = &s.PCIDevices[i]
	}
	for _, sw := range s.PCISwitches {
		b.children[sw.Parent] = append(b.children[sw.Parent], sw.ID)
	}
	for _, g := range s.GPUs {
		b.children[g.Parent] = append(b.children[g.Parent], g.ID)
	}
	for _, n := range s.NICs {
		b.children[n.Parent] = append(b.children[n.Parent], n.ID)
	}
	cpu := func(numaid, affinity string) *Node {
		c := &Node{Name: "cpu"}
		c.set("numaid", numaid)
		if affinity != "" {
			c.set("affinity", affinity)
		}
		c.set("arch", s.CPU.Arch)
		if s.CPU.Vendor != "" {
			c.set("vendor", s.CPU.Vendor)
			c.set("familyid", strconv.Itoa(s.CPU.Family))
			c.set("modelid", strconv.Itoa(s.CPU.Model))
		}
		return c
	}
	for _, numa := range s.NUMANodes {
		aff := ""
		if numa.CPUCount > 0 {
			aff = numa.Affinity
		}
		c := cpu(strconv.Itoa(numa.Node), aff)
		ids := append([]string(nil), b.children[numa.ID]...) // devices without a PCI path
		for _, r := range s.PCIRoots {
			if r.NUMANode == numa.Node && !r.NUMAAssumed {
				ids = append(ids, b.children[r.ID]...)
			}
		}
		b.attach(c, ids)
		if len(c.Subs) > 0 {
			root.Subs = append(root.Subs, c)
		}
	}
	// Host bridges whose functions report no NUMA node: NCCL puts them
	// under a CPU with numaid -1 and no affinity, and so does weft.
	var ids []string
	for _, r := range s.PCIRoots {
		if r.NUMAAssumed {
			ids = append(ids, b.children[r.ID]...)
		}
	}
	if c := cpu("-1", ""); len(ids) > 0 {
		b.attach(c, ids)
		if len(c.Subs) > 0 {
			root.Subs = append(root.Subs, c)
		}
	}
	return root
}

type builder struct {
	s        *topology.System
	pci      map[string]*topology.PCIDevice
	children map[string][]string // graph parent -> switches, GPUs, NICs
}

// attach adds the elements of ids below parent, ordered by bus id as NCCL
// keeps them (issue #820 in NCCL).
func (b *builder) attach(parent *Node, ids []string) {
	var subs []*Node
	for _, id := range ids {
		if n := b.element(id); n != nil {
			subs = append(subs, n)
		}
	}
	sort.SliceStable(subs, func(i, j int) bool {
		bi, _ := subs[i].Get("busid")
		bj, _ := subs[j].Get("busid")
		return bi < bj
	})
	parent.Subs = append(parent.Subs, subs...)
	// A NIC that is not itself a PCI function (virtio-net) hangs from the
	// CPU, as ncclTopoFillNet attaches it; hoist it out of its <pci>.
	for i, n := range parent.Subs {
		if n.Name == "pci" && len(n.Subs) == 1 && n.Subs[0].Name == "nic" && n.Attrs[0].Value == "" {
			parent.Subs[i] = n.Subs[0]
		}
	}
}

// pciNode makes the <pci> element of a function.
func (b *builder) pciNode(bdf string, link topology.PCIeLink, class string) *Node {
	n := &Node{Name: "pci"}
	n.set("busid", bdf)
	d := b.pci[bdf]
	if d != nil {
		class = d.Class
	}
	n.set("class", class)
	if d != nil {
		n.set("vendor", d.Vendor)
		n.set("device", d.Device)
		n.set("subsystem_vendor", d.SubsystemVendor)
		n.set("subsystem_device", d.SubsystemDevice)
	}
	n.set("link_speed", linkSpeed(link.LinkSpeedGTs))
	n.set("link_width", strconv.Itoa(link.LinkWidth))
	return n
}

// element returns the XML of a switch (with everything below it), GPU or
// NIC; nil for a switch with no GPU or NIC below, which NCCL would trim.
func (b *builder) element(id string) *Node {
	s := b.s
	for _, sw := range s.PCISwitches {
		if sw.ID == id {
			n := b.pciNode(sw.BDF, sw.PCIeLink, "0x060400")
			b.attach(n, b.children[id])
			if len(n.Subs) == 0 {
				return nil
			}
			return n
		}
	}
	for _, g := range s.GPUs {
		if g.ID == id {
			return b.gpu(g)
		}
	}
	for i, nic := range s.NICs {
		if nic.ID == id {
			return b.nic(i, nic)
		}
	}
	return nil
}

func (b *builder) gpu(g topology.GPU) *Node {
	class := "0x030200"
	n := b.pciNode(g.BDF, g.PCIeLink, class)
	x := n.add("gpu")
	if g.Index >= 0 {
		x.set("dev", strconv.Itoa(g.Index))
	}
	if g.Vendor == topology.VendorNVIDIA {
		var maj, min int
		if _, err := fmt.Sscanf(g.Arch, "sm_%1d%d", &maj, &min); err == nil {
			x.set("sm", strconv.Itoa(maj*10+min))
		}
	} else if g.Arch != "" {
		x.set("gcn", g.Arch)
	}
	if g.Index >= 0 {
		x.set("rank", strconv.Itoa(g.Index))
	}
	// NVLink and xGMI peers, one element per far end, in link order.
	for _, l := range b.s.Links {
		var other string
		switch g.ID {
		case l.A:
			other = l.B
		case l.B:
			other = l.A
		default:
			continue
		}
		switch l.Type {
		case topology.LinkNVLink, topology.LinkXGMI:
			tag := "nvlink"
			if l.Type == topology.LinkXGMI {
				tag = "xgmi"
			}
			target, tclass := b.target(other)
			e := x.add(tag)
			e.set("target", target)
			e.set("count", strconv.Itoa(l.Count))
			e.set("tclass", tclass)
		case topology.LinkC2C:
			e := x.add("c2c")
			perLink := 0
			if l.Count > 0 {
				perLink = int(l.GBps * 1000 / float64(l.Count))
			}
			e.set("bw", strconv.Itoa(perLink))
			e.set("count", strconv.Itoa(l.Count))
		}
	}
	return n
}

// invisibleSwitch is the remote bus id NVML gives for an NVSwitch the VM
// does not see, as NCCL's own dump on the 4×H200 host shows it; NCCL then
// finds no sysfs path for it and assumes an NVSwitch (ncclTopoGetXmlFromGpu
// in src/graph/xml.cc).
const invisibleSwitch = "fffffff:ff:ff.0"

// target returns the bus id and PCI class of an NVLink's far end: a GPU
// (class 0x030200), an NVSwitch (0x068000) or the CPU (0x068001, NVLink to
// POWER9).
func (b *builder) target(id string) (string, string) {
	for _, g := range b.s.GPUs {
		if g.ID == id {
			if d := b.pci[g.BDF]; d != nil {
				return g.BDF, d.Class
			}
			return g.BDF, "0x030200"
		}
	}
	for _, n := range b.s.NVSwitches {
		if n.ID == id {
			if n.BDF == "" {
				return invisibleSwitch, "0x068000"
			}
			return n.BDF, "0x068000"
		}
	}
	return invisibleSwitch, "0x068001"
}

func (b *builder) nic(index int, nic topology.NIC) *Node {
	n := b.pciNode(nic.BDF, nic.PCIeLink, "0x020000")
	if nic.Bus != "pci" {
		// Marked for attach to hoist: an empty busid never comes from sysfs.
		n = &Node{Name: "pci", Attrs: []Attr{{"busid", ""}}}
	}
	x := n.add("nic")
	net := x.add("net")
	net.set("name", nic.Name)
	net.set("dev", strconv.Itoa(index))
	speed := int(nic.SpeedGbps * 1000)
	if speed > 0 {
		net.set("speed", strconv.Itoa(speed))
	}
	port := 0 // NCCL's socket transport reports port 0
	for _, p := range nic.Ports {
		if p.State == "ACTIVE" {
			port = p.Port
			break
		}
	}
	net.set("port", strconv.Itoa(port))
	if nic.GUID != "" {
		net.set("guid", nic.GUID)
	}
	return n
}

// Write writes s as NCCL topology XML. There is no <?xml?> declaration:
// NCCL's parser does not accept one.
func Write(w io.Writer, s *topology.System) error {
	bw := bufio.NewWriter(w)
	write(bw, Build(s), 0)
	return bw.Flush()
}

func write(w *bufio.Writer, n *Node, indent int) {
	pad := strings.Repeat(" ", indent)
	w.WriteString(pad + "<" + n.Name)
	for _, a := range n.Attrs {
		w.WriteString(" " + a.Key + "=\"" + a.Value + "\"")
	}
	if len(n.Subs) == 0 {
		w.WriteString("/>\n")
		return
	}
	w.WriteString(">\n")
	for _, c := range n.Subs {
		write(w, c, indent+2)
	}
	w.WriteString(pad + "</" + n.Name + ">\n")
}
