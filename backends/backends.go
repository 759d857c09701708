// Package backends is the one list of weft's hardware backends. Importing
// it for its side effects registers every backend of hal/ with the HAL —
// devices with hal.Register, networks (hal/ucx, hal/ib, hal/netplugin,
// hal/socket) with hal.RegisterNetwork — as database/sql drivers register
// themselves:
//
//	import _ "github.com/weftccl/weft/backends"
//
// after which hal.Open, hal.Auto and WEFT_HAL choose among them at run
// time. Every binary of weft (cmd/weft, the NCCL drop-in nccl/,
// examples/moe) imports this package, and no other package names a
// backend: channels, algorithms and the root package work on the contract
// (package hal) only. internal/archcheck enforces both rules.
//
// A backend whose hardware or library is absent still registers; its
// Probe then reports why it is unavailable, and the binary builds and runs
// on a machine without accelerators (hal/host is always available). A new
// backend is added here, in one line.
package backends

import (
	_ "github.com/weftccl/weft/hal/host"      // CPU reference backend (host shared memory)
	_ "github.com/weftccl/weft/hal/ib"        // InfiniBand / RoCE through verbs
	_ "github.com/weftccl/weft/hal/netplugin" // NCCL net plugins (WEFT_NET=plugin, NCCL_NET_PLUGIN)
	_ "github.com/weftccl/weft/hal/nvlink"    // NVIDIA GPUs over NVLink
	_ "github.com/weftccl/weft/hal/nvswitch"  // NVLink SHARP multicast
	_ "github.com/weftccl/weft/hal/pcie"      // GPUs over PCIe (peer BAR or host-staged)
	_ "github.com/weftccl/weft/hal/socket"    // TCP between nodes, the fallback network
	_ "github.com/weftccl/weft/hal/ucx"       // UCX (UCP) between nodes: RDMA, TCP, shared memory
	_ "github.com/weftccl/weft/hal/xgmi"      // AMD GPUs over Infinity Fabric (HIP)
)
