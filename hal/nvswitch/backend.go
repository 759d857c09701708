package nvswitch

import (
	"fmt"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/cudadev"
	"github.com/weftccl/weft/internal/env"
)

// Name is the backend's registry name.
const Name = "nvswitch"

// DisabledReason is the probe's reason, and the error text of Open and of
// the multicast calls, when the host policy keeps NVLink SHARP off.
const DisabledReason = "NVLink SHARP multicast disabled: WEFT_NVLS is not 1 (architecture.md §8)"

func init() { hal.Register(backend{}) }

type backend struct{}

func (backend) Name() string { return Name }

// Enabled reports whether this process may use NVLink SHARP multicast:
// WEFT_NVLS=1 exactly (architecture.md §8). Multicast objects can take a
// shared host's GPUs out of service, so the hardware path is opt-in and the
// variable is never set on shared machines.
func Enabled() bool { return env.String("WEFT_NVLS") == "1" }

// Probe reports the backend unavailable unless WEFT_NVLS=1, then for the
// reasons of the CUDA core (no NVIDIA driver, no CUDA devices, no NVRTC), a
// driver older than CUDA 12.1 (no multicast entry points), or no GPU with
// CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED. It creates no context and no
// multicast object.
func (backend) Probe() hal.Availability {
	if !Enabled() {
		return hal.Availability{Reason: DisabledReason}
	}
	if a := cudadev.Probe(); !a.Available {
		return a
	}
	if !cuda.MulticastAvailable() {
		return hal.Availability{Reason: fmt.Sprintf("driver %s has no multicast objects (CUDA 12.1 or newer needed)", cudadev.DriverVersion())}
	}
	n, err := cuda.DeviceCount()
	if err != nil {
		return hal.Availability{Reason: "CUDA driver unusable: " + err.Error()}
	}
	var with int
	for i := 0; i < n; i++ {
		if ok, _ := multicastCapable(i); ok {
			with++
		}
	}
	if with == 0 {
		return hal.Availability{Reason: fmt.Sprintf("no GPU supports multicast (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED=0 on all %d): NVLink SHARP needs GPUs on an NVSwitch fabric", n)}
	}
	return hal.Availability{Available: true, Reason: fmt.Sprintf("%d of %d CUDA device(s) support multicast, driver %s", with, n, cudadev.DriverVersion())}
}

func (backend) Open(cfg hal.Config) (hal.Device, error) { return Open(cfg) }

// multicastCapable reports whether CUDA ordinal i supports multicast and
// the virtual memory management that multicast groups bind (POSIX file
// descriptor handles); reason says what it lacks.
func multicastCapable(i int) (ok bool, reason string) {
	d, err := cuda.DeviceGet(i)
	if err != nil {
		return false, err.Error()
	}
	for _, a := range []struct {
		attr cuda.DeviceAttribute
		name string
	}{
		{cuda.AttrMulticastSupported, "CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED"},
		{cuda.AttrVirtualMemoryManagement, "CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED"},
		{cuda.AttrHandleTypePosixFD, "CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED"},
	} {
		v, err := d.Attribute(a.attr)
		if err != nil {
			return false, fmt.Sprintf("%s: %v", a.name, err)
		}
		if v == 0 {
			return false, a.name + "=0"
		}
	}
	return true, ""
}
