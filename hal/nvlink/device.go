package nvlink

import (
	"fmt"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cudadev"
	"github.com/weftccl/weft/internal/env"
)

// DeviceHeaderName is the include name generated kernels use for
// DeviceHeader: #include "weft_hal.h".
const DeviceHeaderName = cudadev.DeviceHeaderName

// Device is one GPU opened by this process on its primary CUDA context.
// The GPU itself (memory, streams, kernels, CUDA IPC) is the embedded
// cudadev.Device; this backend adds its link policy and the copy-engine
// engines. It implements hal.Device, hal.MemoryMapped, hal.PortMapped,
// hal.GraphCapturer, hal.KernelCompiler and hal.Executor. Methods are safe
// for concurrent use.
type Device struct {
	*cudadev.Device
}

var (
	_ hal.Device         = (*Device)(nil)
	_ hal.MemoryMapped   = (*Device)(nil)
	_ hal.PortMapped     = (*Device)(nil)
	_ hal.GraphCapturer  = (*Device)(nil)
	_ hal.CaptureQuerier = (*Device)(nil)
	_ hal.KernelCompiler = (*Device)(nil)
	_ hal.Executor       = (*Device)(nil)
)

var (
	_ hal.CopyEnginePreference          = (*Device)(nil)
	_ hal.CopyEngineAllReducePreference = (*Device)(nil)
	_ hal.CopyEngineP2PPreference       = (*Device)(nil)
	_ hal.CopyEngineReducePreference    = (*Device)(nil)
	_ hal.RangeExporter                 = (*Device)(nil)
	_ hal.LL128Carrier                  = (*Device)(nil)
)

// CopyEngineReduceMinBytes is cudadev.NVLinkCopyEngineReduceMinBytes.
func (d *Device) CopyEngineReduceMinBytes(nranks int) int64 {
	return cudadev.NVLinkCopyEngineReduceMinBytes(nranks)
}

// CopyEngineReduceDirectMinBytes is
// cudadev.NVLinkCopyEngineReduceDirectMinBytes.
func (d *Device) CopyEngineReduceDirectMinBytes(nranks int) int64 {
	return cudadev.NVLinkCopyEngineReduceDirectMinBytes(nranks)
}

// CopyEngineP2PMinBytes is cudadev.NVLinkCopyEngineP2PMinBytes.
func (d *Device) CopyEngineP2PMinBytes(nranks int) int64 {
	return cudadev.NVLinkCopyEngineP2PMinBytes(nranks)
}

// CopyEngineMinBytes is cudadev.NVLinkCopyEngineMinBytes: 32 MiB on 2
// ranks, no default beyond (where it was measured and why: there).
func (d *Device) CopyEngineMinBytes(nranks int) int64 {
	return cudadev.NVLinkCopyEngineMinBytes(nranks)
}

// CopyEngineAllReduceMinBytes is cudadev.NVLinkCopyEngineAllReduceMinBytes:
// 1 GiB on 2 ranks, for Comm.AllReduce's registered buffers.
func (d *Device) CopyEngineAllReduceMinBytes(nranks int) int64 {
	return cudadev.NVLinkCopyEngineAllReduceMinBytes(nranks)
}

// CopyEngineMaxBytes is cudadev.NVLinkCopyEngineMaxBytes: 512 MiB on 2
// ranks (the SM plan beyond).
func (d *Device) CopyEngineMaxBytes(nranks int) int64 {
	return cudadev.NVLinkCopyEngineMaxBytes(nranks)
}

// Open opens GPU cfg.Ordinal (a CUDA ordinal, as CUDA_VISIBLE_DEVICES
// numbers them): it retains the primary context and enables peer access
// with the other GPUs this process has open where cuDeviceCanAccessPeer
// allows. Errors wrap hal.ErrNotSupported (no driver), hal.ErrInvalidArgument
// (ordinal out of range) or hal.ErrDevice.
func Open(cfg hal.Config) (*Device, error) {
	d, err := cudadev.Open(cfg, cudadev.Options{Backend: Name, PeerAccess: true, LL128: true})
	if err != nil {
		return nil, err
	}
	return &Device{d}, nil
}

// Link reports CapMemoryMapped|CapPortMapped towards a peer GPU on the same
// host (same HostID) that this GPU can access (cuDeviceCanAccessPeer), and
// towards the same GPU; nothing otherwise, with the reason.
func (d *Device) Link(peer hal.Endpoint) hal.Link {
	p := d.Peer(peer)
	switch {
	case p.Unreachable != "":
		return hal.Link{Reason: p.Unreachable}
	case !p.PeerAccess:
		return hal.Link{Reason: p.Reason}
	}
	return hal.Link{Caps: hal.CapMemoryMapped | hal.CapPortMapped, Reason: p.Reason}
}

// ExportPort is Export: on NVLink a port destination is a CUDA IPC export,
// and engines write to the importer's mapping.
func (d *Device) ExportPort(b hal.Buffer) (hal.Handle, error) { return d.Export(b) }

// ImportPort is Import: the buffer's Addr is the mapping in this GPU's
// address space, the address engines take as a Put destination or a Signal
// target.
func (d *Device) ImportPort(h hal.Handle) (hal.Buffer, error) { return d.Import(h) }

// NewEngine creates a copy engine (cudadev.CopyEngine: CUDA streams of
// asynchronous copies and stream-ordered semaphore writes) for the link to
// peer, which may be this GPU's own endpoint. An engine to a peer GPU has
// Lanes() streams (WEFT_CE_LANES; cudadev.Device.NewLaneEngine): large
// puts are cut over all but one and local copies take the last, signals
// and marks follow every lane's earlier work. An engine to this GPU
// itself has one. Errors wrap hal.ErrNotSupported when the link is not
// port-mapped, hal.ErrInvalidArgument for a malformed WEFT_CE_LANES.
func (d *Device) NewEngine(peer hal.Endpoint) (hal.Engine, error) {
	l := d.Link(peer)
	if l.Caps&hal.CapPortMapped == 0 {
		return nil, fmt.Errorf("nvlink: engine of %s to %s GPU %d: %s: %w", d, peer.Backend, peer.Ordinal, l.Reason, hal.ErrNotSupported)
	}
	name := fmt.Sprintf("GPU %d", peer.Ordinal)
	self := peer.UUID == d.Endpoint().UUID
	if self {
		name = "itself"
	}
	if peer.PID != d.Endpoint().PID {
		name += fmt.Sprintf(" of pid %d", peer.PID)
	}
	lanes, err := Lanes()
	if err != nil {
		return nil, fmt.Errorf("nvlink: engine of %s to %s: %w", d, name, err)
	}
	if self {
		lanes = 1
	}
	return d.NewLaneEngine(name, lanes)
}

// DefaultLanes is the number of streams of an engine to a peer GPU when
// WEFT_CE_LANES is unset: a put lane and a copy lane (docs/portchannel.md,
// "Copy engines", has the measurements it comes from).
const DefaultLanes = 2

// Lanes is the number of streams of an engine to a peer GPU: WEFT_CE_LANES
// (1 to 8), else DefaultLanes. Errors wrap hal.ErrInvalidArgument.
func Lanes() (int, error) {
	v, ok, err := env.Int("WEFT_CE_LANES")
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return DefaultLanes, nil
	case v < 1 || v > cudadev.MaxEngineLanes:
		return 0, fmt.Errorf("WEFT_CE_LANES=%d: want 1 to %d: %w", v, cudadev.MaxEngineLanes, hal.ErrInvalidArgument)
	}
	return v, nil
}
