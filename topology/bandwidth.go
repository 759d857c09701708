package topology

import "math"

// PCIeGBps returns the per-direction data rate in GB/s (10^9 bytes/s) of a
// PCIe link of width lanes at speed GT/s per lane, after line encoding:
// 8b/10b up to 5 GT/s (Gen1, Gen2), 128b/130b for 8 to 32 GT/s (Gen3 to
// Gen5), and FLIT mode with 242 of 256 bytes carrying data at 64 GT/s
// (Gen6). Gen4 x16 gives 31.5, Gen5 x16 63.0. 0 when either is unknown.
func PCIeGBps(speedGTs float64, width int) float64 {
	if speedGTs <= 0 || width <= 0 {
		return 0
	}
	var eff float64
	switch {
	case speedGTs <= 5:
		eff = 8.0 / 10
	case speedGTs <= 32:
		eff = 128.0 / 130
	default:
		eff = 242.0 / 256
	}
	return round3(speedGTs * eff / 8 * float64(width))
}

// NVLinkGBps returns the per-direction bandwidth of one NVLink of the
// given generation, as NVML reports link speed (nvidia-smi nvlink -s):
// 20 (NVLink 1), 25 (2 and 3), 26.5625 (4, Hopper) and 50 (5, Blackwell)
// GB/s. 0 for an unknown generation.
func NVLinkGBps(version int) float64 {
	switch version {
	case 1:
		return 20
	case 2, 3:
		return 25
	case 4:
		return 26.5625
	case 5:
		return 50
	}
	return 0
}

// InterSocketGBps is the per-direction bandwidth NCCL assumes between two
// NUMA nodes of a processor (src/graph/topo.h and ncclTopoGetInterCpuBw in
// src/graph/topo.cc): by Intel generation (Broadwell 6, Skylake 10,
// Sapphire Rapids 22, Emerald/Granite Rapids 40), AMD Zen generation (16,
// 24, 32), POWER9 32 and Arm 6 GB/s. Unknown processors get NCCL's
// Broadwell value, 6.
func InterSocketGBps(c CPU) float64 {
	switch c.Arch {
	case "ppc64":
		return 32
	case "arm64":
		return 6
	}
	switch c.Vendor {
	case "GenuineIntel":
		m := c.Model
		switch {
		case c.Family == 6 && (m >= 0xCF || m == 0xAD || m == 0xAE || m == 0xAF):
			return 40
		case c.Family == 6 && m >= 0x8F:
			return 22
		case c.Family == 6 && m >= 0x55:
			return 10
		}
		return 6
	case "AuthenticAMD", "HygonGenuine":
		switch c.Family {
		case 26:
			return 32
		case 25:
			return 24
		}
		return 16
	case "CentaurHauls", "  Shanghai  ":
		if c.Family == 7 && c.Model == 0x5B {
			return 9
		}
		return 6
	}
	return 6
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
