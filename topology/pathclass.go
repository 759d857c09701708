package topology

import (
	"fmt"
	"strings"

	"github.com/weftccl/weft/hal"
)

// PathClass is the class of the route between two devices, from the
// closest to the farthest. The names are those NCCL users know (NCCL's
// src/graph/topo.h PATH_* and nvidia-smi topo -m); the order is NCCL's,
// with nvidia-smi's NODE between PHB and SYS.
type PathClass int

// Path classes. The rules that assign them are in docs/topology.md.
const (
	// PathLOC: the device itself.
	PathLOC PathClass = iota
	// PathNVL: NVLink or xGMI only, directly or through NVSwitches.
	PathNVL
	// PathNVB: NVLink through one intermediate GPU.
	PathNVB
	// PathC2C: through a chip-to-chip link to the CPU.
	PathC2C
	// PathPIX: through at most one PCIe switch.
	PathPIX
	// PathPXB: through several PCIe switches, without a host bridge.
	PathPXB
	// PathPHB: through a PCIe host bridge (the CPU's root complex).
	PathPHB
	// PathNODE: between host bridges of one NUMA node.
	PathNODE
	// PathSYS: across the interconnect between NUMA nodes (UPI, xGMI).
	PathSYS
	// PathNET: through the network, between hosts. A single-host System
	// never has one; the class exists for multi-host models.
	PathNET
)

var pathClassNames = [...]string{"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PHB", "NODE", "SYS", "NET"}

func (c PathClass) String() string {
	if c >= 0 && int(c) < len(pathClassNames) {
		return pathClassNames[c]
	}
	return fmt.Sprintf("PathClass(%d)", int(c))
}

// ParsePathClass parses a class name (case-insensitive). The error wraps
// hal.ErrInvalidArgument.
func ParsePathClass(s string) (PathClass, error) {
	for i, n := range pathClassNames {
		if strings.EqualFold(s, n) {
			return PathClass(i), nil
		}
	}
	return 0, fmt.Errorf("path class %q (want one of %s): %w", s, strings.Join(pathClassNames[:], ", "), hal.ErrInvalidArgument)
}

// MarshalText encodes the class as its name.
func (c PathClass) MarshalText() ([]byte, error) {
	if c < 0 || int(c) >= len(pathClassNames) {
		return nil, fmt.Errorf("path class %d: %w", int(c), hal.ErrInvalidArgument)
	}
	return []byte(c.String()), nil
}

// UnmarshalText decodes a class name.
func (c *PathClass) UnmarshalText(b []byte) error {
	v, err := ParsePathClass(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// NCCL returns the NCCL path type name: NODE folds into PHB, as NCCL has
// no NODE level.
func (c PathClass) NCCL() string {
	if c == PathNODE {
		return "PHB"
	}
	return c.String()
}
