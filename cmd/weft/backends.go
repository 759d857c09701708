package main

// The backends this binary can use register themselves on import.
import (
	_ "github.com/weftccl/weft/hal/host"
	_ "github.com/weftccl/weft/hal/ib"
	_ "github.com/weftccl/weft/hal/nvlink"
	_ "github.com/weftccl/weft/hal/nvswitch"
	_ "github.com/weftccl/weft/hal/pcie"
	_ "github.com/weftccl/weft/hal/socket"
	_ "github.com/weftccl/weft/hal/xgmi"
)
