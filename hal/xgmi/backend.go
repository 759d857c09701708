package xgmi

import (
	"errors"
	"fmt"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/hip"
)

// Name is the backend's registry name.
const Name = "xgmi"

func init() { hal.Register(backend{}) }

type backend struct{}

func (backend) Name() string                            { return Name }
func (backend) Probe() hal.Availability                 { return Probe() }
func (backend) Open(cfg hal.Config) (hal.Device, error) { return Open(cfg) }

// Probe loads the HIP runtime and hipRTC (both are needed to run plans)
// and counts GPUs, creating nothing on them. Reasons say what is missing
// ("no ROCm: libamdhip64.so not found (tried …)", "no AMD GPU", "hipRTC
// not found …") or, when available, the GPUs and versions found.
func Probe() hal.Availability {
	if err := hip.Load(); err != nil {
		var le *hip.LoadError
		switch {
		case errors.As(err, &le) && le.NotFound:
			return hal.Availability{Reason: le.Hint}
		case errors.As(err, &le) && le.Hint == "no AMD GPU":
			return hal.Availability{Reason: "no AMD GPU"}
		}
		return hal.Availability{Reason: "no usable HIP runtime: " + err.Error()}
	}
	n, err := hip.DeviceCount()
	switch {
	case err != nil:
		return hal.Availability{Reason: "HIP runtime unusable: " + err.Error()}
	case n == 0:
		return hal.Availability{Reason: "no AMD GPU"}
	}
	if err := hip.LoadRTC(); err != nil {
		return hal.Availability{Reason: err.Error() + "; hipRTC compiles the kernels that run plans"}
	}
	return hal.Availability{Available: true, Reason: fmt.Sprintf("%d AMD GPU(s), %s, %s", n, driverVersion(), runtimeVersion())}
}

// driverVersion is "HIP driver 6.3.42134", or "HIP driver unknown".
func driverVersion() string {
	if v, err := hip.DriverVersion(); err == nil {
		return "HIP driver " + hip.FormatVersion(v)
	}
	return "HIP driver unknown"
}

// runtimeVersion is "HIP 6.3.42134, hipRTC 6.3".
func runtimeVersion() string {
	s := "HIP unknown"
	if v, err := hip.RuntimeVersion(); err == nil {
		s = "HIP " + hip.FormatVersion(v)
	}
	if ma, mi, err := hip.RTCVersion(); err == nil {
		return s + fmt.Sprintf(", hipRTC %d.%d", ma, mi)
	}
	return s + ", hipRTC not loaded"
}
