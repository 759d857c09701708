package cudadev

import (
	"errors"
	"fmt"
	"strings"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
)

// Probe loads the CUDA driver and NVRTC (both are needed to run plans) and
// counts devices, for the Probe of a CUDA backend. It creates no context.
// Reasons name what is missing: "no NVIDIA driver: …", "no CUDA devices",
// "NVRTC not found: …".
func Probe() hal.Availability {
	if err := cuda.Load(); err != nil {
		return hal.Availability{Reason: driverReason(err)}
	}
	n, err := cuda.DeviceCount()
	if err != nil {
		return hal.Availability{Reason: "CUDA driver unusable: " + err.Error()}
	}
	if n == 0 {
		return hal.Availability{Reason: "no CUDA devices"}
	}
	if err := cuda.LoadNVRTC(); err != nil {
		return hal.Availability{Reason: nvrtcReason(err)}
	}
	ma, mi, _ := cuda.NVRTCVersion()
	return hal.Availability{Available: true, Reason: fmt.Sprintf("%d CUDA device(s), driver %s, NVRTC %d.%d", n, DriverVersion(), ma, mi)}
}

// driverReason turns a cuda.Load error into a probe reason.
func driverReason(err error) string {
	var le *cuda.LoadError
	if errors.As(err, &le) {
		switch {
		case le.Err == nil && le.Hint == "no NVIDIA driver":
			return "no NVIDIA driver: " + le.Detail
		case cuda.IsResult(err, cuda.ErrorNoDevice):
			return "no CUDA devices"
		}
	}
	return "no usable NVIDIA driver: " + err.Error()
}

// nvrtcReason turns a cuda.LoadNVRTC error into a probe reason.
func nvrtcReason(err error) string {
	detail := err.Error()
	var le *cuda.LoadError
	if errors.As(err, &le) {
		detail = le.Detail
		if le.Hint != "" {
			detail += " " + strings.TrimPrefix(le.Hint, "NVRTC not found ")
		}
	}
	return "NVRTC not found: " + detail + "; NVRTC compiles the kernels that run plans"
}

// DriverVersion is the driver's CUDA version for messages: "CUDA 13.0", or
// "unknown".
func DriverVersion() string {
	v, err := cuda.DriverVersion()
	if err != nil {
		return "unknown"
	}
	return fmt.Sprintf("CUDA %d.%d", v/1000, v%1000/10)
}
