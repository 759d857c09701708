package nvswitch

import (
	_ "embed"
	"fmt"
	"maps"
	"sync"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/cudadev"
)

var (
	_ hal.CopyEnginePreference = (*Device)(nil)
	_ hal.LL128Carrier         = (*Device)(nil)
)

// CopyEngineMinBytes is cudadev.NVLinkCopyEngineMinBytes: GPUs behind
// NVSwitch reach each other over NVLink, as hal/nvlink's do.
func (d *Device) CopyEngineMinBytes(nranks int) int64 {
	return cudadev.NVLinkCopyEngineMinBytes(nranks)
}

// CopyEngineMaxBytes is cudadev.NVLinkCopyEngineMaxBytes.
func (d *Device) CopyEngineMaxBytes(nranks int) int64 {
	return cudadev.NVLinkCopyEngineMaxBytes(nranks)
}

//go:embed device/weft_switch_hal.h
var switchHeader string

// SwitchHeaderName is the include name of SwitchHeader:
// #include "weft_switch_hal.h".
const SwitchHeaderName = "weft_switch_hal.h"

// DeviceHeaderName is the include name of DeviceHeader: #include "weft_hal.h".
const DeviceHeaderName = cudadev.DeviceHeaderName

// Device is one GPU opened by this process on its primary CUDA context.
// The GPU itself (streams, kernels, graphs, plan execution) is the embedded
// cudadev.Device; this backend adds memory that multicast groups can bind
// (virtual memory management allocations, exported as POSIX file
// descriptors), its link policy, the copy-engine engines and the
// switch-mapped capability. It implements hal.Device, hal.MemoryMapped,
// hal.PortMapped, hal.SwitchMapped, hal.GraphCapturer, hal.KernelCompiler
// and hal.Executor. Methods are safe for concurrent use.
type Device struct {
	*cudadev.Device

	dev       cuda.Device
	ctx       cuda.Context
	allocGran int64 // cuMemGetAllocationGranularity, recommended, POSIX fd

	mu     sync.Mutex
	allocs map[cuda.DevicePtr]*allocation // by base address

	mcGranOnce sync.Once
	mcGran     int64
	mcGranErr  error
}

var (
	_ hal.Device         = (*Device)(nil)
	_ hal.MemoryMapped   = (*Device)(nil)
	_ hal.PortMapped     = (*Device)(nil)
	_ hal.SwitchMapped   = (*Device)(nil)
	_ hal.GraphCapturer  = (*Device)(nil)
	_ hal.CaptureQuerier = (*Device)(nil)
	_ hal.KernelCompiler = (*Device)(nil)
	_ hal.Executor       = (*Device)(nil)
)

// Open opens GPU cfg.Ordinal (a CUDA ordinal) when WEFT_NVLS=1 and the GPU
// supports multicast: it retains the primary context and enables peer
// access with the other GPUs this process has open. It creates no
// multicast object. Errors wrap hal.ErrNotSupported (NVLink SHARP
// disabled, no driver, a GPU without multicast), hal.ErrInvalidArgument
// (ordinal out of range) or hal.ErrDevice.
func Open(cfg hal.Config) (*Device, error) {
	if !Enabled() {
		return nil, fmt.Errorf("open %s GPU %d: %s: %w", Name, cfg.Ordinal, DisabledReason, hal.ErrNotSupported)
	}
	core, err := cudadev.Open(cfg, cudadev.Options{Backend: Name, PeerAccess: true, LL128: true})
	if err != nil {
		return nil, err
	}
	if ok, why := multicastCapable(cfg.Ordinal); !ok {
		core.Close()
		return nil, fmt.Errorf("open %s GPU %d: %s: %w", Name, cfg.Ordinal, why, hal.ErrNotSupported)
	}
	d := &Device{Device: core, allocs: map[cuda.DevicePtr]*allocation{}}
	d.dev, d.ctx = core.CUDA()
	if d.allocGran, err = d.ctx.MemGetAllocationGranularity(cfg.Ordinal, cuda.HandleTypePosixFD, cuda.GranularityRecommended); err != nil {
		core.Close()
		return nil, fmt.Errorf("open %s GPU %d: %w", Name, cfg.Ordinal, err)
	}
	return d, nil
}

// Link reports CapMemoryMapped|CapPortMapped|CapSwitchMapped towards another
// GPU of this backend on the same host that this GPU can access
// (cuDeviceCanAccessPeer); towards the same GPU, memory- and port-mapped
// only (a multicast group spans distinct GPUs); nothing otherwise, with the
// reason. Whether two GPUs share an NVSwitch fabric shows when the second
// joins a group.
func (d *Device) Link(peer hal.Endpoint) hal.Link {
	p := d.Peer(peer)
	switch {
	case p.Unreachable != "":
		return hal.Link{Reason: p.Unreachable}
	case !p.PeerAccess:
		return hal.Link{Reason: p.Reason}
	case p.SameGPU:
		return hal.Link{Caps: hal.CapMemoryMapped | hal.CapPortMapped, Reason: "same GPU: a multicast group spans distinct GPUs"}
	}
	return hal.Link{Caps: hal.CapMemoryMapped | hal.CapPortMapped | hal.CapSwitchMapped, Reason: p.Reason}
}

// ExportPort is Export: a port destination is an exported buffer, and
// engines write to the importer's mapping.
func (d *Device) ExportPort(b hal.Buffer) (hal.Handle, error) { return d.Export(b) }

// ImportPort is Import: the buffer's Addr is the mapping in this GPU's
// address space, which engines take as a Put destination or Signal target.
func (d *Device) ImportPort(h hal.Handle) (hal.Buffer, error) { return d.Import(h) }

// NewEngine creates a copy engine (cudadev.CopyEngine) for the link to
// peer, which may be this GPU's own endpoint. Errors wrap
// hal.ErrNotSupported when the link is not port-mapped.
func (d *Device) NewEngine(peer hal.Endpoint) (hal.Engine, error) {
	l := d.Link(peer)
	if l.Caps&hal.CapPortMapped == 0 {
		return nil, fmt.Errorf("%s: engine of %s to %s GPU %d: %s: %w", Name, d, peer.Backend, peer.Ordinal, l.Reason, hal.ErrNotSupported)
	}
	name := fmt.Sprintf("GPU %d", peer.Ordinal)
	if peer.UUID == d.Endpoint().UUID {
		name = "itself"
	}
	if peer.PID != d.Endpoint().PID {
		name += fmt.Sprintf(" of pid %d", peer.PID)
	}
	return d.NewCopyEngine(name)
}

// SwitchHeader returns weft_switch_hal.h, the multimem primitives (include
// name SwitchHeaderName) that the kernels of switch plans use through the
// channel library's weft_switch.h.
func (d *Device) SwitchHeader() string { return switchHeader }

// Prepare is the core's Prepare with SwitchHeader added to the channel
// library, so that plans with a switch buffer compile.
func (d *Device) Prepare(spec hal.PlanSpec) (hal.Program, error) {
	lib := maps.Clone(spec.Library)
	if lib == nil {
		lib = map[string]string{}
	}
	lib[SwitchHeaderName] = switchHeader
	spec.Library = lib
	return d.Device.Prepare(spec)
}
