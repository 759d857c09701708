// Package nvml reads NVIDIA GPU topology through NVML
// (github.com/NVIDIA/go-nvml, which loads libnvidia-ml.so.1 with dlopen at
// run time): devices, NVLink state, version, speed and remote end, P2P
// status between every pair, the common PCI ancestor NVML reports, C2C
// links and NVLink fabric membership (cluster UUID, clique).
//
// Everything is read in one pass into a [Snapshot], plain data that the
// topology package turns into its model; [Static] serves a fixed Snapshot
// for tests and fixtures. When the library or the driver is missing,
// [Open]'s Snapshot fails with an error wrapping hal.ErrNotSupported whose
// text says why — a reason to show, not a failure of discovery.
package nvml

import (
	"fmt"
	"strings"
)

// Source reads a Snapshot.
type Source interface {
	// Snapshot initialises NVML, reads every device and pair, and shuts
	// NVML down again. Errors wrap hal.ErrNotSupported when NVML is absent
	// or finds no driver, hal.ErrDevice when NVML fails on a device.
	Snapshot() (Snapshot, error)
}

// Static is a Source that returns a fixed Snapshot (fixtures, tests).
type Static struct {
	S   Snapshot
	Err error
}

// Snapshot returns s.S, or s.Err when set.
func (s Static) Snapshot() (Snapshot, error) {
	if s.Err != nil {
		return Snapshot{}, s.Err
	}
	return s.S, nil
}

// Snapshot is what NVML reports about the machine.
type Snapshot struct {
	DriverVersion string // "580.159"
	Devices       []Device
	// Pairs holds one entry per pair of devices A < B (NVML indices).
	Pairs []Pair
}

// Device is one GPU.
type Device struct {
	Index int    // NVML index (the order of nvidia-smi, usually PCI order)
	Name  string // "NVIDIA H200"
	UUID  string // "GPU-…"
	BusID string // canonical PCI address, "0000:18:00.0"
	// CCMajor and CCMinor are the CUDA compute capability (9, 0).
	CCMajor, CCMinor int
	MemoryBytes      uint64
	// NUMANode is NVML's NUMA node for the GPU (-1 when NVML cannot say;
	// sysfs numa_node is the fallback).
	NUMANode int
	// NvLinks lists the links that are up and support P2P, in link order.
	NvLinks []NvLink
	// C2C is the chip-to-chip link to the CPU (Grace Hopper), nil when none.
	C2C *C2C
	// Fabric is the NVLink fabric membership, nil when the GPU reports none.
	Fabric *Fabric
}

// RemoteType is what an NVLink connects to (nvmlIntNvLinkDeviceType_t).
type RemoteType int

// Remote device types.
const (
	RemoteGPU     RemoteType = 0
	RemoteIBMNPU  RemoteType = 1
	RemoteSwitch  RemoteType = 2
	RemoteUnknown RemoteType = 255
)

func (t RemoteType) String() string {
	switch t {
	case RemoteGPU:
		return "gpu"
	case RemoteIBMNPU:
		return "ibmnpu"
	case RemoteSwitch:
		return "nvswitch"
	}
	return "unknown"
}

// NvLink is one active link.
type NvLink struct {
	Link    int // link number on the GPU
	Version int // NVLink generation (4 on Hopper)
	// SpeedMBps is the per-direction rate NVML reports
	// (NVML_FI_DEV_NVLINK_GET_SPEED, 26562 on Hopper), 0 when unknown.
	SpeedMBps int
	// RemoteBusID is the canonical PCI address of the far end; "" when the
	// far end is not visible (an NVSwitch outside this VM).
	RemoteBusID string
	RemoteType  RemoteType
	Atomics     bool // NVML_NVLINK_CAP_P2P_ATOMICS
}

// C2C describes a chip-to-chip link.
type C2C struct {
	Links int
	// BandwidthMBps is the maximum bandwidth of one link, per direction.
	BandwidthMBps int
}

// Fabric is a GPU's NVLink fabric membership (nvmlGpuFabricInfo_t).
type Fabric struct {
	ClusterUUID string // 36-character UUID, "" when all zero
	CliqueID    uint32
	State       string // "not-supported", "not-started", "in-progress", "completed"
}

// Pair is what NVML says about two GPUs.
type Pair struct {
	A, B int // NVML indices, A < B
	// P2P capabilities (nvmlDeviceGetP2PStatus, OK or not).
	Read, Write, Atomics, NVLink bool
	// Reason is the first non-OK P2P status, "" when all are OK.
	Reason string
	// Ancestor is nvmlDeviceGetTopologyCommonAncestor.
	Ancestor Ancestor
}

// Ancestor is NVML's topology level (nvmlGpuTopologyLevel_t).
type Ancestor int

// Levels, closest first.
const (
	AncestorInternal   Ancestor = 0
	AncestorSingle     Ancestor = 10
	AncestorMultiple   Ancestor = 20
	AncestorHostBridge Ancestor = 30
	AncestorNode       Ancestor = 40
	AncestorSystem     Ancestor = 50
	AncestorUnknown    Ancestor = -1
)

// String gives the nvidia-smi topo -m name of the level.
func (a Ancestor) String() string {
	switch a {
	case AncestorInternal:
		return "X"
	case AncestorSingle:
		return "PIX"
	case AncestorMultiple:
		return "PXB"
	case AncestorHostBridge:
		return "PHB"
	case AncestorNode:
		return "NODE"
	case AncestorSystem:
		return "SYS"
	}
	return "unknown"
}

// Arch returns the sm_XY name of a compute capability ("sm_90").
func (d Device) Arch() string {
	if d.CCMajor == 0 {
		return ""
	}
	return fmt.Sprintf("sm_%d%d", d.CCMajor, d.CCMinor)
}

// p2pStatusNames follows nvmlGpuP2PStatus_t.
var p2pStatusNames = []string{"ok", "chipset not supported", "GPU not supported", "IOH topology not supported", "disabled by regkey", "not supported", "unknown"}

func p2pStatusName(s int) string {
	if s >= 0 && s < len(p2pStatusNames) {
		return p2pStatusNames[s]
	}
	return fmt.Sprintf("status %d", s)
}

func fabricStateName(s uint8) string {
	switch s {
	case 0:
		return "not-supported"
	case 1:
		return "not-started"
	case 2:
		return "in-progress"
	case 3:
		return "completed"
	}
	return fmt.Sprintf("state-%d", s)
}

// formatUUID renders 16 bytes as a UUID, "" when all are zero.
func formatUUID(b [16]byte) string {
	zero := true
	for _, c := range b {
		if c != 0 {
			zero = false
		}
	}
	if zero {
		return ""
	}
	h := fmt.Sprintf("%x", b[:])
	return strings.Join([]string{h[0:8], h[8:12], h[12:16], h[16:20], h[20:32]}, "-")
}
