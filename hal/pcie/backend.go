package pcie

import (
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cudadev"
)

// Name is the backend's registry name.
const Name = "pcie"

func init() { hal.Register(backend{}) }

type backend struct{}

func (backend) Name() string { return Name }

// Probe loads the CUDA driver and NVRTC and counts devices, as hal/nvlink
// does ("no NVIDIA driver: …", "no CUDA devices", "NVRTC not found: …"),
// and says which ways of linking GPUs are open: peer access unless
// WEFT_PCIE_P2P=0, host staging when /dev/shm is writable.
func (backend) Probe() hal.Availability {
	a := cudadev.Probe()
	if !a.Available {
		return a
	}
	p2p := "peer access where cuDeviceCanAccessPeer allows"
	if !p2pAllowed() {
		p2p = "peer access off (WEFT_PCIE_P2P=0)"
	}
	staging := "host staging through " + shmDir
	if err := shmUsable(); err != nil {
		staging = "no host staging (" + err.Error() + ")"
	}
	a.Reason += "; " + p2p + ", " + staging
	return a
}

func (backend) Open(cfg hal.Config) (hal.Device, error) { return Open(cfg) }
