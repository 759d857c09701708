package topology

import (
	"fmt"
	"strings"
)

// SchemaVersion is the version of System's JSON form
// (docs/topology/schema.json). It changes only when a field is removed or
// changes meaning; new optional fields keep the version.
const SchemaVersion = 1

// System is one host's topology: processors and memory, the PCI tree, GPUs
// of either vendor, NVSwitches, NICs, the links between them and the path
// between every pair of GPUs and NICs.
//
// Every device has an ID ("numa0", "hb0", "sw0", "gpu0", "nvs0", "nic0")
// that Links and Paths refer to. GPUs are numbered in NVML order (the
// order of nvidia-smi and CUDA_DEVICE_ORDER=PCI_BUS_ID), then AMD GPUs in
// KFD order; NICs by RDMA device name, then by interface name.
type System struct {
	SchemaVersion int    `json:"schema_version"`
	Hostname      string `json:"hostname"`
	// SysfsRoot is the sysfs tree that was read ("/sys" on a live system).
	SysfsRoot   string      `json:"sysfs_root"`
	CPU         CPU         `json:"cpu"`
	NUMANodes   []NUMANode  `json:"numa_nodes"`
	PCIRoots    []PCIRoot   `json:"pci_roots"`
	PCISwitches []PCISwitch `json:"pci_switches"`
	PCIDevices  []PCIDevice `json:"pci_devices"`
	GPUs        []GPU       `json:"gpus"`
	NVSwitches  []NVSwitch  `json:"nvswitches"`
	NICs        []NIC       `json:"nics"`
	Links       []Link      `json:"links"`
	// Paths has one entry per unordered pair of GPUs and NICs, A before B
	// in the order GPUs, NICs.
	Paths []Path `json:"paths"`
	// Sources says which discovery sources were used and why others were
	// not.
	Sources []SourceStatus `json:"sources"`
	// Notes are facts a reader needs: why no GPU was found, assumptions
	// made (a PCI root without a NUMA node), inferred values.
	Notes []string `json:"notes"`
	// Warnings are problems met while reading (a malformed sysfs file,
	// named); discovery continued without the affected device.
	Warnings []string `json:"warnings"`
	// Measured is set by weft topo --measure.
	Measured *Measurement `json:"measured,omitempty"`
}

// CPU describes the host processors.
type CPU struct {
	Arch   string `json:"arch"`   // "x86_64", "arm64", "ppc64"
	Vendor string `json:"vendor"` // CPUID vendor string, "" off x86
	Family int    `json:"family"` // CPUID display family, 0 off x86
	Model  int    `json:"model"`  // CPUID display model, 0 off x86
	// InterSocketGBps is the per-direction bandwidth weft assumes between
	// NUMA nodes, from NCCL's table for the processor (src/graph/topo.h).
	InterSocketGBps float64 `json:"inter_socket_gbps"`
}

// NUMANode is a NUMA node with its CPUs; NCCL calls it a CPU.
type NUMANode struct {
	ID   string `json:"id"` // "numa0"
	Node int    `json:"node"`
	// CPUs is the kernel's CPU list ("0-55,112-167").
	CPUs     string `json:"cpus"`
	CPUCount int    `json:"cpu_count"`
	// Affinity is the same set as a CPU mask ("ffffffff,00000000"), the
	// form of NCCL's affinity attribute.
	Affinity    string `json:"affinity"`
	MemoryBytes int64  `json:"memory_bytes"`
	// Distances are the SLIT distances to each node (10 = local).
	Distances []int `json:"distances"`
}

// PCIRoot is a PCI host bridge (root complex), "pci0000:00" in sysfs.
type PCIRoot struct {
	ID       string `json:"id"`   // "hb0"
	Name     string `json:"name"` // "pci0000:00"
	NUMANode int    `json:"numa_node"`
	// NUMAAssumed is set when no function below the bridge reports a NUMA
	// node (numa_node -1, common in VMs) and NUMANode is weft's assumption.
	NUMAAssumed bool `json:"numa_assumed"`
}

// PCISwitch is a PCIe switch: its upstream port and downstream ports.
type PCISwitch struct {
	ID       string   `json:"id"`  // "sw0"
	BDF      string   `json:"bdf"` // upstream port
	Vendor   string   `json:"vendor"`
	Device   string   `json:"device"`
	Parent   string   `json:"parent"` // ID of the switch or host bridge above
	NUMANode int      `json:"numa_node"`
	Ports    []string `json:"ports"` // downstream port BDFs
	PCIeLink
}

// PCIeLink is the upstream PCIe link of a device: the lower of the
// device's and its upstream port's maximum speed and width, as NCCL reads
// them (max_link_speed and max_link_width, not the current values, which
// drop when GPUs idle).
type PCIeLink struct {
	LinkSpeedGTs float64 `json:"link_speed_gts"` // per lane, 0 when unknown
	LinkWidth    int     `json:"link_width"`     // lanes, 0 when unknown
	// PCIeGBps is the per-direction data rate of the link after line
	// encoding, 0 when unknown.
	PCIeGBps float64 `json:"pcie_gbps"`
}

// PCIDevice is one PCI function.
type PCIDevice struct {
	BDF             string `json:"bdf"`
	Class           string `json:"class"` // "0x030200"
	ClassName       string `json:"class_name"`
	Vendor          string `json:"vendor"` // "0x10de"
	Device          string `json:"device"`
	SubsystemVendor string `json:"subsystem_vendor"`
	SubsystemDevice string `json:"subsystem_device"`
	// Role is "endpoint", "root-port", "switch-upstream" or
	// "switch-downstream".
	Role string `json:"role"`
	// Parent is the ID of the switch or host bridge the function hangs
	// from in the graph.
	Parent   string `json:"parent"`
	NUMANode int    `json:"numa_node"`
	Driver   string `json:"driver"`
	// Entity is the ID of the GPU, NIC or NVSwitch this function is, "" for
	// other functions.
	Entity string `json:"entity"`
	PCIeLink
}

// Vendors of GPUs.
const (
	VendorNVIDIA = "nvidia"
	VendorAMD    = "amd"
)

// GPU is one GPU of either vendor.
type GPU struct {
	ID     string `json:"id"` // "gpu0"
	Vendor string `json:"vendor"`
	// Index is the vendor library's index (NVML index, KFD node order);
	// -1 when only sysfs saw the GPU.
	Index       int    `json:"index"`
	Name        string `json:"name"`
	UUID        string `json:"uuid"`
	Arch        string `json:"arch"` // "sm_90", "gfx942"
	MemoryBytes int64  `json:"memory_bytes"`
	BDF         string `json:"bdf"`
	NUMANode    int    `json:"numa_node"`
	Parent      string `json:"parent"`
	// NVLinks is the number of active NVLink or xGMI links.
	NVLinks int `json:"nvlinks"`
	// NVLinkGBps is the per-direction bandwidth of all of them.
	NVLinkGBps float64 `json:"nvlink_gbps"`
	Fabric     *Fabric `json:"fabric,omitempty"`
	// Sources lists what described this GPU ("sysfs", "nvml", "kfd",
	// "amdsmi").
	Sources []string `json:"sources"`
	PCIeLink
}

// Fabric is NVLink fabric membership (multi-node NVLink).
type Fabric struct {
	ClusterUUID string `json:"cluster_uuid"`
	CliqueID    uint32 `json:"clique_id"`
	State       string `json:"state"`
}

// NVSwitch is an NVLink switch. Hosts that hand only some GPUs of an HGX
// board to a VM do not show the switches on the PCI bus; weft then models
// one switch with an empty BDF, as NCCL does.
type NVSwitch struct {
	ID       string `json:"id"`  // "nvs0"
	BDF      string `json:"bdf"` // "" when not visible
	Parent   string `json:"parent"`
	NUMANode int    `json:"numa_node"`
	// Links is the number of GPU NVLinks that end on this switch.
	Links int `json:"links"`
}

// NIC is a network adapter: an RDMA device, or a PCI network interface
// without one.
type NIC struct {
	ID   string `json:"id"`   // "nic0"
	Name string `json:"name"` // RDMA device ("mlx5_0") or interface ("eth0")
	BDF  string `json:"bdf"`
	// Bus is "pci" when the NIC is the PCI function itself, or the bus
	// between them ("virtio" for virtio-net, which NCCL attaches to the
	// CPU rather than to the PCI function).
	Bus string `json:"bus"`
	// RDMA is true for InfiniBand and RoCE devices.
	RDMA     bool      `json:"rdma"`
	GUID     string    `json:"guid"` // node GUID, "0x0c42a10300160540"; "" without RDMA
	Ports    []NICPort `json:"ports"`
	Netdevs  []string  `json:"netdevs"`
	NUMANode int       `json:"numa_node"`
	Parent   string    `json:"parent"`
	// SpeedGbps is the fastest active port's rate (RDMA) or the
	// interface's speed, 0 when unknown.
	SpeedGbps float64 `json:"speed_gbps"`
	PCIeLink
}

// NICPort is one port of an RDMA NIC.
type NICPort struct {
	Port      int     `json:"port"`
	LinkLayer string  `json:"link_layer"` // "InfiniBand", "Ethernet"
	State     string  `json:"state"`      // "ACTIVE", "DOWN"
	RateGbps  float64 `json:"rate_gbps"`
	Netdev    string  `json:"netdev"`
}

// LinkType is the kind of a Link.
type LinkType string

// Link types.
const (
	LinkNVLink LinkType = "nvlink" // NVIDIA NVLink, GPU–GPU or GPU–NVSwitch
	LinkXGMI   LinkType = "xgmi"   // AMD Infinity Fabric, GPU–GPU
	LinkC2C    LinkType = "c2c"    // chip-to-chip, GPU–CPU (Grace Hopper)
	LinkPCIe   LinkType = "pcie"   // a device's upstream PCIe link
	// LinkHost joins a PCI host bridge to its NUMA node. It carries no
	// bandwidth limit in weft's model.
	LinkHost LinkType = "host"
	// LinkSys is the inter-socket interconnect (UPI, Infinity Fabric
	// between sockets) between two NUMA nodes.
	LinkSys LinkType = "sys"
)

// Link joins two devices.
type Link struct {
	A    string   `json:"a"`
	B    string   `json:"b"`
	Type LinkType `json:"type"`
	// Count is the number of bonded links (NVLinks between two GPUs).
	Count int `json:"count"`
	// GBps is the per-direction bandwidth of all Count links together,
	// 0 when unknown or not limiting (host links).
	GBps float64 `json:"gbps"`
}

// Path is the route between two devices and its properties.
type Path struct {
	A     string    `json:"a"`
	B     string    `json:"b"`
	Class PathClass `json:"class"`
	// Hops is the number of links of weft's graph the route crosses
	// (GPU–NVSwitch–GPU is 2; a GPU and a NIC on one PCIe switch are 2).
	Hops int `json:"hops"`
	// GBps is the bottleneck per-direction bandwidth along the route, 0
	// when unknown.
	GBps float64 `json:"gbps"`
	// LinkCount is the NVLink or xGMI link count of an NVL or NVB path
	// (the 18 of nvidia-smi's NV18), 0 for other classes.
	LinkCount int `json:"link_count"`
	// Via lists the IDs of the devices between A and B.
	Via []string `json:"via"`
	// P2P is set for pairs of GPUs.
	P2P *P2P `json:"p2p,omitempty"`
}

// P2P says whether one GPU can access another's memory directly.
type P2P struct {
	Read    bool `json:"read"`
	Write   bool `json:"write"`
	Atomics bool `json:"atomics"`
	// Source is where the answer came from: "nvml", "amdsmi", "kfd", or
	// "inferred" (from the path class, with NCCL's default P2P level PXB).
	Source string `json:"source"`
	// Reason explains a missing capability.
	Reason string `json:"reason,omitempty"`
}

// SourceStatus is one discovery source's outcome.
type SourceStatus struct {
	Name      string `json:"name"` // "sysfs", "nvml", "kfd", "amdsmi"
	Available bool   `json:"available"`
	// Detail says what the source found, or why it was not available.
	Detail string `json:"detail"`
}

// GPU returns the GPU with the given ID.
func (s *System) GPU(id string) (GPU, bool) {
	for _, g := range s.GPUs {
		if g.ID == id {
			return g, true
		}
	}
	return GPU{}, false
}

// Path returns the path between a and b in either direction.
func (s *System) Path(a, b string) (Path, bool) {
	for _, p := range s.Paths {
		if (p.A == a && p.B == b) || (p.A == b && p.B == a) {
			return p, true
		}
	}
	return Path{}, false
}

// Endpoints returns the IDs of GPUs then NICs: the rows of the path
// matrix.
func (s *System) Endpoints() []string {
	var ids []string
	for _, g := range s.GPUs {
		ids = append(ids, g.ID)
	}
	for _, n := range s.NICs {
		ids = append(ids, n.ID)
	}
	return ids
}

// NUMAOf returns the NUMA node of an endpoint, -1 when unknown.
func (s *System) NUMAOf(id string) int {
	for _, g := range s.GPUs {
		if g.ID == id {
			return g.NUMANode
		}
	}
	for _, n := range s.NICs {
		if n.ID == id {
			return n.NUMANode
		}
	}
	return -1
}

// Label is a short human name for a device ID: "GPU0", "NIC1 (mlx5_1)".
func (s *System) Label(id string) string {
	for _, n := range s.NICs {
		if n.ID == id {
			return fmt.Sprintf("%s (%s)", strings.ToUpper(id), n.Name)
		}
	}
	return strings.ToUpper(id)
}

// Measurement is a measured peer bandwidth and latency matrix (weft topo
// --measure), taken through a HAL backend's memory-mapped capability.
type Measurement struct {
	Backend string `json:"backend"`
	// Bytes is the size of one bandwidth transfer, Iterations how many were
	// timed per pair, Blocks the thread blocks of the copy.
	Bytes      int64 `json:"bytes"`
	Iterations int   `json:"iterations"`
	Blocks     int   `json:"blocks"`
	// Pairs has one entry per ordered pair of devices: A writes into B.
	Pairs []MeasuredPair `json:"pairs"`
}

// MeasuredPair is one direction between two devices.
type MeasuredPair struct {
	A string `json:"a"` // writer: a GPU ID, or the backend's device name
	B string `json:"b"` // the device whose memory is written
	// GBps is the achieved put bandwidth, 10^9 bytes/s.
	GBps float64 `json:"gbps"`
	// LatencyUS is the mean launch-to-completion time of a 16-byte put in
	// microseconds, kernel launch included.
	LatencyUS float64 `json:"latency_us"`
	// Error says why the pair was not measured.
	Error string `json:"error,omitempty"`
}
