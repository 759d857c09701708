// Package fakesys builds fake sysfs trees for tests: PCI hierarchies with
// bridges and switches, NUMA nodes, network and RDMA devices and the KFD
// topology of AMD GPUs, laid out with the same directories and relative
// symbolic links as the kernel's, so that package sysfs (and the kfd
// reader) read a fake tree exactly as they read /sys.
//
// A Tree reports failures through the testing.TB it was made with.
package fakesys

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// TB is the part of testing.TB a Tree uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Tree is a fake sysfs rooted at Root.
type Tree struct {
	Root  string
	tb    TB
	paths map[string]string // BDF or "pciDDDD:BB" -> path below Root
}

// New makes an empty tree in root (usually t.TempDir()).
func New(tb TB, root string) *Tree {
	return &Tree{Root: root, tb: tb, paths: map[string]string{}}
}

// WriteFile writes content (plus a newline, as the kernel does) to rel,
// creating directories. Use it for attributes no helper covers and for
// malformed values.
func (t *Tree) WriteFile(rel, content string) {
	t.tb.Helper()
	p := filepath.Join(t.Root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.tb.Fatalf("fakesys: %v", err)
	}
	if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
		t.tb.Fatalf("fakesys: %v", err)
	}
}

// Remove deletes rel (a file, a link or a directory tree).
func (t *Tree) Remove(rel string) {
	t.tb.Helper()
	if err := os.RemoveAll(filepath.Join(t.Root, filepath.FromSlash(rel))); err != nil {
		t.tb.Fatalf("fakesys: %v", err)
	}
}

// Link makes rel a symbolic link to target, relative to rel's directory as
// sysfs links are. target is a path below Root.
func (t *Tree) Link(rel, target string) {
	t.tb.Helper()
	p := filepath.Join(t.Root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.tb.Fatalf("fakesys: %v", err)
	}
	r, err := filepath.Rel(filepath.Dir(p), filepath.Join(t.Root, filepath.FromSlash(target)))
	if err != nil {
		t.tb.Fatalf("fakesys: %v", err)
	}
	_ = os.Remove(p)
	if err := os.Symlink(r, p); err != nil {
		t.tb.Fatalf("fakesys: %v", err)
	}
}

func (t *Tree) mkdir(rel string) {
	t.tb.Helper()
	if err := os.MkdirAll(filepath.Join(t.Root, filepath.FromSlash(rel)), 0o755); err != nil {
		t.tb.Fatalf("fakesys: %v", err)
	}
}

// CPU writes devices/system/cpu/modalias and online. modalias is the full
// kernel string; use X86Modalias to build one.
func (t *Tree) CPU(modalias, online string) {
	t.tb.Helper()
	t.WriteFile("devices/system/cpu/modalias", modalias)
	t.WriteFile("devices/system/cpu/online", online)
}

// X86Modalias is the cpu modalias of an x86 processor: vendor is the
// kernel's X86_VENDOR_* number (0 Intel, 2 AMD).
func X86Modalias(vendor, family, model int) string {
	return fmt.Sprintf("cpu:type:x86,ven%04Xfam%04Xmod%04X:feature:,0000,0001,0002", vendor, family, model)
}

// NUMA adds devices/system/node/node<id> with its cpulist, meminfo
// (memKB) and distance ("10 21").
func (t *Tree) NUMA(id int, cpulist string, memKB int64, distance string) {
	t.tb.Helper()
	rel := fmt.Sprintf("devices/system/node/node%d", id)
	t.WriteFile(rel+"/cpulist", cpulist)
	t.WriteFile(rel+"/meminfo", fmt.Sprintf("Node %d MemTotal:       %d kB\nNode %d MemFree:        %d kB", id, memKB, id, memKB/2))
	t.WriteFile(rel+"/distance", distance)
}

// Dev describes a PCI function.
type Dev struct {
	BDF string
	// Parent is the BDF of the upstream bridge, or a host bridge name
	// ("pci0000:00") for a function on a root bus.
	Parent               string
	Class                uint32 // 0x060400 bridge, 0x030200 3D controller, …
	Vendor, Device       uint16
	SubVendor, SubDevice uint16
	NUMA                 int    // numa_node; -1 for unknown
	Speed                string // max_link_speed ("16.0 GT/s PCIe"); "" for none
	Width                int    // max_link_width; 0 for none
	Driver               string // bound driver, "" for none
}

// PCI adds a function: its directory below its parent, its attributes and
// the bus/pci/devices link. Parents must be added first.
func (t *Tree) PCI(d Dev) {
	t.tb.Helper()
	parent, ok := t.paths[d.Parent]
	if !ok {
		if !strings.HasPrefix(d.Parent, "pci") {
			t.tb.Fatalf("fakesys: parent %q of %s not added yet", d.Parent, d.BDF)
		}
		parent = "devices/" + d.Parent
		t.paths[d.Parent] = parent
	}
	rel := parent + "/" + d.BDF
	t.paths[d.BDF] = rel
	t.WriteFile(rel+"/class", fmt.Sprintf("0x%06x", d.Class))
	t.WriteFile(rel+"/vendor", fmt.Sprintf("0x%04x", d.Vendor))
	t.WriteFile(rel+"/device", fmt.Sprintf("0x%04x", d.Device))
	t.WriteFile(rel+"/subsystem_vendor", fmt.Sprintf("0x%04x", d.SubVendor))
	t.WriteFile(rel+"/subsystem_device", fmt.Sprintf("0x%04x", d.SubDevice))
	t.WriteFile(rel+"/numa_node", fmt.Sprint(d.NUMA))
	if d.Speed != "" {
		t.WriteFile(rel+"/max_link_speed", d.Speed)
		t.WriteFile(rel+"/current_link_speed", d.Speed)
	}
	if d.Width != 0 {
		t.WriteFile(rel+"/max_link_width", fmt.Sprint(d.Width))
		t.WriteFile(rel+"/current_link_width", fmt.Sprint(d.Width))
	}
	if d.Driver != "" {
		t.mkdir("bus/pci/drivers/" + d.Driver)
		t.Link(rel+"/driver", "bus/pci/drivers/"+d.Driver)
	}
	t.Link("bus/pci/devices/"+d.BDF, rel)
}

// DevicePath returns the directory of a PCI function added with PCI.
func (t *Tree) DevicePath(bdf string) string {
	t.tb.Helper()
	p, ok := t.paths[bdf]
	if !ok {
		t.tb.Fatalf("fakesys: PCI function %s not added", bdf)
	}
	return p
}

// Net describes a network interface.
type Net struct {
	Name      string
	BDF       string // owning PCI function; "" for a virtual interface
	Speed     int    // Mb/s; 0 leaves the file out (reading it fails as on a down link)
	OperState string
	Address   string
	Type      int // 1 Ethernet, 32 InfiniBand
}

// NetDev adds class/net/<name>, below its PCI function or, without one,
// below devices/virtual/net.
func (t *Tree) NetDev(n Net) {
	t.tb.Helper()
	var rel string
	if n.BDF == "" {
		rel = "devices/virtual/net/" + n.Name
	} else {
		rel = t.DevicePath(n.BDF) + "/net/" + n.Name
		t.Link(rel+"/device", t.DevicePath(n.BDF))
	}
	t.mkdir(rel)
	if n.Speed != 0 {
		t.WriteFile(rel+"/speed", fmt.Sprint(n.Speed))
	}
	if n.OperState != "" {
		t.WriteFile(rel+"/operstate", n.OperState)
	}
	if n.Address != "" {
		t.WriteFile(rel+"/address", n.Address)
	}
	t.WriteFile(rel+"/type", fmt.Sprint(n.Type))
	t.Link("class/net/"+n.Name, rel)
}

// IBPort describes one port of an RDMA device.
type IBPort struct {
	LinkLayer string // "InfiniBand" or "Ethernet"
	State     string // "4: ACTIVE"
	Rate      string // "400 Gb/sec (4X NDR)"
	Netdev    string // RoCE netdev (gid_attrs/ndevs/0)
}

// RDMA adds class/infiniband/<name> below PCI function bdf, with
// node_guid ("0c42:a103:0016:054e") and ports numbered from 1.
func (t *Tree) RDMA(name, bdf, guid string, ports ...IBPort) {
	t.tb.Helper()
	rel := t.DevicePath(bdf) + "/infiniband/" + name
	t.WriteFile(rel+"/node_guid", guid)
	t.WriteFile(rel+"/node_type", "1: CA")
	t.Link(rel+"/device", t.DevicePath(bdf))
	for i, p := range ports {
		prel := fmt.Sprintf("%s/ports/%d", rel, i+1)
		t.WriteFile(prel+"/link_layer", p.LinkLayer)
		t.WriteFile(prel+"/state", p.State)
		t.WriteFile(prel+"/phys_state", "5: LinkUp")
		t.WriteFile(prel+"/rate", p.Rate)
		if p.Netdev != "" {
			t.WriteFile(prel+"/gid_attrs/ndevs/0", p.Netdev)
		}
	}
	t.Link("class/infiniband/"+name, rel)
}

// KFDNode adds node id of the KFD topology
// (class/kfd/kfd/topology/nodes/<id>): its properties text ("key value"
// lines), gpu_id (0 for a CPU node), name, and one io_links entry per
// element of ioLinks (each a properties text; see KFDLink).
func (t *Tree) KFDNode(id int, gpuID uint32, name, properties string, ioLinks ...string) {
	t.tb.Helper()
	base := "devices/virtual/kfd/kfd"
	if !exists(filepath.Join(t.Root, "class/kfd/kfd")) {
		t.mkdir(base + "/topology/nodes")
		t.Link("class/kfd/kfd", base)
	}
	rel := fmt.Sprintf("%s/topology/nodes/%d", base, id)
	t.WriteFile(rel+"/properties", properties)
	t.WriteFile(rel+"/gpu_id", fmt.Sprint(gpuID))
	t.WriteFile(rel+"/name", name)
	t.mkdir(rel + "/io_links")
	for i, l := range ioLinks {
		t.WriteFile(path.Join(rel, "io_links", fmt.Sprint(i), "properties"), l)
	}
}

// KFDLink renders the properties of one KFD io_link. linkType is the CRAT
// type (2 PCIe, 11 xGMI); bandwidths are in MB/s.
func KFDLink(linkType, from, to, weight int, minBW, maxBW int, flags uint32) string {
	return fmt.Sprintf("type %d\nversion_major 0\nversion_minor 0\nnode_from %d\nnode_to %d\nweight %d\nmin_latency 0\nmax_latency 0\nmin_bandwidth %d\nmax_bandwidth %d\nrecommended_transfer_size 0\nflags %d",
		linkType, from, to, weight, minBW, maxBW, flags)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
