// Package amdsmi reads AMD GPU topology through the AMD SMI library
// (libamd_smi.so from ROCm), loaded with dlopen at run time so that weft
// builds and runs on machines without ROCm: the GPUs, and for every pair
// the link type (PCIe or xGMI), hop count, weight, minimum and maximum
// bandwidth, whether P2P is possible, and the P2P capabilities (coherence,
// 32/64-bit atomics, DMA) of the link.
//
// The binding needs cgo; a build without cgo compiles a Source that
// reports hal.ErrNotSupported. The KFD sysfs reader (package kfd) gives
// the same links without any library and is the fallback.
package amdsmi

import "fmt"

// Source reads a Snapshot.
type Source interface {
	// Snapshot loads and initialises AMD SMI, reads every GPU and pair and
	// shuts it down. Errors wrap hal.ErrNotSupported when the library is
	// absent or finds no GPU driver, hal.ErrDevice when a call fails.
	Snapshot() (Snapshot, error)
}

// Static is a Source returning a fixed Snapshot (fixtures, tests).
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

// Snapshot is what AMD SMI reports.
type Snapshot struct {
	Library string // the file that was loaded
	Devices []Device
	// Pairs holds one entry per pair A < B (indices into Devices).
	Pairs []Pair
}

// Device is one GPU (or GPU partition) processor handle.
type Device struct {
	Index int
	BusID string // canonical PCI address
	UUID  string
}

// LinkType is amdsmi_link_type_t.
type LinkType int

// Link types (amdsmi.h; the older amdsmi_io_link_type_t used the same
// numbers for PCIe and xGMI).
const (
	LinkInternal LinkType = 0
	LinkPCIe     LinkType = 1
	LinkXGMI     LinkType = 2
	LinkNA       LinkType = 3
	LinkUnknown  LinkType = 4
)

func (t LinkType) String() string {
	switch t {
	case LinkInternal:
		return "internal"
	case LinkPCIe:
		return "pcie"
	case LinkXGMI:
		return "xgmi"
	case LinkNA:
		return "n/a"
	}
	return "unknown"
}

// Tristate is a capability AMD SMI may leave undefined.
type Tristate int8

// Tristate values; amdsmi_p2p_capability_t uses 1, 0 and UINT8_MAX.
const (
	Unknown Tristate = -1
	No      Tristate = 0
	Yes     Tristate = 1
)

func tristate(v uint8) Tristate {
	switch v {
	case 0:
		return No
	case 1:
		return Yes
	}
	return Unknown
}

// Pair is what AMD SMI says about two GPUs.
type Pair struct {
	A, B   int
	Type   LinkType
	Hops   int
	Weight int
	// Bandwidths are per direction in MB/s; 0 when AMD SMI reports none
	// (PCIe links).
	MinBandwidthMBps, MaxBandwidthMBps int64
	// Accessible is amdsmi_is_P2P_accessible.
	Accessible bool
	// Capabilities from amdsmi_topo_get_p2p_status (AMD SMI 6.2 and later);
	// Unknown when the library lacks the call.
	Coherent, Atomics32, Atomics64, DMA, Bidirectional Tristate
}

// decodeBDF decodes amdsmi_get_gpu_bdf_id's value: domain in bits 63..32,
// partition in 31..28, bus 15..8, device 7..3, function 2..0.
func decodeBDF(id uint64) string {
	dom := id >> 32
	bus, dev, fn := (id>>8)&0xff, (id>>3)&0x1f, id&7
	if dom > 0xffff {
		return fmt.Sprintf("%08x:%02x:%02x.%x", dom, bus, dev, fn)
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", dom, bus, dev, fn)
}
