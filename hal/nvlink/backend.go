package nvlink

import (
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cudadev"
)

// Name is the backend's registry name.
const Name = "nvlink"

func init() { hal.Register(backend{}) }

type backend struct{}

func (backend) Name() string { return Name }

// Probe loads the CUDA driver and NVRTC (both are needed to run plans) and
// counts devices. It creates no context.
func (backend) Probe() hal.Availability { return cudadev.Probe() }

func (backend) Open(cfg hal.Config) (hal.Device, error) { return Open(cfg) }
