package cudadev

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/devcore"
	"github.com/weftccl/weft/internal/env"
)

// Device is one GPU opened by this process on its primary CUDA context:
// the part of a CUDA backend that does not depend on how GPUs are linked.
// It implements every method of hal.Device except Link, and
// hal.MemoryMapped, hal.GraphCapturer, hal.KernelCompiler and
// hal.Executor; a backend embeds it and adds its link policy. Methods are
// safe for concurrent use.
type Device struct {
	cfg     hal.Config
	backend string // "nvlink", "pcie": in Info, Endpoint and messages
	ll128   bool   // Options.LL128
	ordinal int
	dev     cuda.Device
	ctx     cuda.Context
	uuid    cuda.UUID
	arch    string // NVRTC target, "sm_90a"
	info    hal.DeviceInfo
	ep      hal.Endpoint
	log     *slog.Logger

	maxThreadsPerBlock int
	maxSharedOptin     int
	// streamMemOps64: cuStreamWriteValue64 is usable
	// (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS).
	streamMemOps64 bool

	peerAccess bool // Options.PeerAccess

	// visible maps the UUID of every device visible to this process to its
	// CUDA device, for Peer.
	visible map[string]int

	closed atomic.Bool
	work   inflight    // streams and launch events Free and Close wait for
	watch  opsWatchdog // batches of stream operations with waits (streamops.go)

	kernelsOnce sync.Once
	kernels     *cuda.KernelCache
	kernelsErr  error
}

var (
	_ hal.MemoryMapped   = (*Device)(nil)
	_ hal.GraphCapturer  = (*Device)(nil)
	_ hal.CaptureQuerier = (*Device)(nil)
	_ hal.KernelCompiler = (*Device)(nil)
)

// Options are what a backend chooses when it opens a Device.
type Options struct {
	// Backend is the backend's registry name; it appears in Info, in the
	// Endpoint peers see, and in messages ("nvlink GPU 0 (rank 3)").
	Backend string
	// PeerAccess enables CUDA peer access, both ways, between this device
	// and every other open device of this process that set it too, where
	// cuDeviceCanAccessPeer allows.
	PeerAccess bool
	// LL128 lets Prepare compile plans of plan.LL128 lines: only where
	// every peer is reached over NVLink (hal.LL128Carrier).
	LL128 bool
}

// openDevices are the devices this process has open, so that opening a
// second GPU enables peer access in both directions with the first. Peer
// access with GPUs the process has not opened is not enabled: that would
// create a context on every GPU in every process, and memory of other
// processes is mapped with lazily enabled peer access anyway.
var openDevices struct {
	sync.Mutex
	list []*Device
}

// Open opens GPU cfg.Ordinal (a CUDA ordinal, as CUDA_VISIBLE_DEVICES
// numbers them) for backend opt.Backend: it retains the primary context
// and, with opt.PeerAccess, enables peer access with the other GPUs this
// process has open where cuDeviceCanAccessPeer allows. Errors wrap
// hal.ErrNotSupported (no driver), hal.ErrInvalidArgument (ordinal out of
// range) or hal.ErrDevice.
func Open(cfg hal.Config, opt Options) (*Device, error) {
	if err := cuda.Load(); err != nil {
		return nil, fmt.Errorf("open %s GPU %d: %w", opt.Backend, cfg.Ordinal, err)
	}
	n, err := cuda.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("open %s GPU %d: %w", opt.Backend, cfg.Ordinal, err)
	}
	if cfg.Ordinal < 0 || cfg.Ordinal >= n {
		return nil, fmt.Errorf("open %s GPU %d: ordinal out of range (%d CUDA devices visible): %w", opt.Backend, cfg.Ordinal, n, hal.ErrInvalidArgument)
	}
	d := &Device{cfg: cfg, backend: opt.Backend, ll128: opt.LL128, ordinal: cfg.Ordinal, peerAccess: opt.PeerAccess, visible: map[string]int{}}
	d.log = env.Logger("HAL").With("backend", opt.Backend, "gpu", cfg.Ordinal, "rank", cfg.Rank)
	if err := d.query(n); err != nil {
		return nil, fmt.Errorf("open %s GPU %d: %w", opt.Backend, cfg.Ordinal, err)
	}
	if d.ctx, err = d.dev.PrimaryCtxRetain(); err != nil {
		return nil, fmt.Errorf("open %s GPU %d: %w", opt.Backend, cfg.Ordinal, err)
	}
	d.enablePeers()
	d.log.Info("opened", "name", d.info.Name, "arch", d.arch, "uuid", d.ep.UUID, "bus", d.ep.PCIBusID, "stream_mem_ops_64", d.streamMemOps64)
	return d, nil
}

// Fake returns a Device with the identity ep and no GPU behind it, for
// tests of backends' link policy: Peer works for peers that need no CUDA
// call to classify, every other method fails or must not be called.
func Fake(ep hal.Endpoint) *Device {
	return &Device{backend: ep.Backend, ordinal: ep.Ordinal, ep: ep, visible: map[string]int{}}
}

// query fills in the device's identity and properties.
func (d *Device) query(count int) error {
	var err error
	if d.dev, err = cuda.DeviceGet(d.ordinal); err != nil {
		return err
	}
	name, err := d.dev.Name()
	if err != nil {
		return err
	}
	major, minor, err := d.dev.ComputeCapability()
	if err != nil {
		return err
	}
	if d.uuid, err = d.dev.UUID(); err != nil {
		return err
	}
	bus, err := d.dev.PCIBusID()
	if err != nil {
		return err
	}
	mem, err := d.dev.TotalMem()
	if err != nil {
		return err
	}
	sms, err := d.dev.Attribute(cuda.AttrMultiprocessorCount)
	if err != nil {
		return err
	}
	if d.maxThreadsPerBlock, err = d.dev.Attribute(cuda.AttrMaxThreadsPerBlock); err != nil {
		return err
	}
	if d.maxSharedOptin, err = d.dev.Attribute(cuda.AttrMaxSharedMemoryPerBlockOptin); err != nil {
		return err
	}
	// A driver that does not know the attribute leaves the fallback on.
	if v, err := d.dev.Attribute(cuda.AttrCanUse64BitStreamMemOps); err == nil {
		d.streamMemOps64 = v != 0
	}
	for i := 0; i < count; i++ {
		other, err := cuda.DeviceGet(i)
		if err != nil {
			return err
		}
		u, err := other.UUID()
		if err != nil {
			return err
		}
		d.visible[u.String()] = i
	}
	d.arch = cuda.Arch(major, minor)
	runtime := "NVRTC not loaded"
	if ma, mi, err := cuda.NVRTCVersion(); err == nil {
		runtime = fmt.Sprintf("NVRTC %d.%d", ma, mi)
	}
	d.info = hal.DeviceInfo{
		Backend:         d.backend,
		Ordinal:         d.ordinal,
		Name:            name,
		Arch:            cuda.ArchFamily(major, minor),
		UUID:            d.uuid.String(),
		PCIBusID:        bus,
		MemoryBytes:     mem,
		Multiprocessors: sms,
		Driver:          DriverVersion(),
		Runtime:         runtime,
	}
	host, _ := os.Hostname()
	d.ep = hal.Endpoint{
		Backend:  d.backend,
		Hostname: host,
		HostID:   devcore.HostID(),
		Ordinal:  d.ordinal,
		UUID:     d.uuid.String(),
		PCIBusID: bus,
		PID:      os.Getpid(),
	}
	d.ep.Node = hal.NodeOf(d.ep.HostID, env.String("WEFT_NODE_ID"))
	return nil
}

// enablePeers enables peer access between d and every other open device of
// this process, both ways, where the hardware allows it.
func (d *Device) enablePeers() {
	openDevices.Lock()
	defer openDevices.Unlock()
	for _, o := range openDevices.list {
		if o.dev == d.dev || !d.peerAccess || !o.peerAccess {
			continue
		}
		for _, pair := range [][2]*Device{{d, o}, {o, d}} {
			a, b := pair[0], pair[1]
			ok, err := cuda.CanAccessPeer(a.dev, b.dev)
			if err != nil || !ok {
				a.log.Info("no peer access", "peer_gpu", b.ordinal, "err", err)
				continue
			}
			if err := a.ctx.EnablePeerAccess(b.ctx); err != nil {
				a.log.Warn("enable peer access failed", "peer_gpu", b.ordinal, "err", err)
			}
		}
	}
	openDevices.list = append(openDevices.list, d)
}

// Info describes the device.
func (d *Device) Info() hal.DeviceInfo { return d.info }

// Endpoint identifies the device to peers.
func (d *Device) Endpoint() hal.Endpoint { return d.ep }

// PeerLink classifies a peer endpoint for a backend's link policy.
type PeerLink struct {
	// Unreachable says why this backend cannot link to the peer at all
	// (another backend, another host); empty when it can.
	Unreachable string
	// SameGPU: the peer is this GPU (possibly opened by another process).
	SameGPU bool
	// Visible: the peer's GPU is visible to this process, as CUDA device
	// Ordinal.
	Visible bool
	Ordinal int
	// PeerAccess: cuDeviceCanAccessPeer says this GPU can map the peer's
	// memory (always true for SameGPU).
	PeerAccess bool
	// Reason explains a false Visible or PeerAccess.
	Reason string
}

// LL128 reports whether LL128 lines (plan.LL128) reach peer as single
// writes (hal.LL128Carrier): only for a device opened with Options.LL128
// (hal/nvlink, hal/nvswitch), to another GPU of this host that it maps
// over a link with native peer-to-peer atomics (cuDeviceGetP2PAttribute:
// NVLink; PCIe peer-to-peer has none). Not to the same GPU: nothing
// promises that a line's stores land in its own memory together.
func (d *Device) LL128(peer hal.Endpoint) bool {
	if !d.ll128 {
		return false
	}
	p := d.Peer(peer)
	if p.Unreachable != "" || !p.PeerAccess || p.SameGPU {
		return false
	}
	other, err := cuda.DeviceGet(p.Ordinal)
	if err != nil {
		return false
	}
	native, err := cuda.P2PNativeAtomics(d.dev, other)
	return err == nil && native
}

// Peer classifies the link to peer: reachable when peer is a device of the
// same backend on the same host (same HostID); the same GPU; another GPU
// visible to this process, with or without peer access.
func (d *Device) Peer(peer hal.Endpoint) PeerLink {
	switch {
	case peer.Backend != d.backend:
		return PeerLink{Unreachable: fmt.Sprintf("peer uses backend %q, not %q", peer.Backend, d.backend)}
	case peer.HostID != d.ep.HostID:
		if peer.Hostname != d.ep.Hostname {
			return PeerLink{Unreachable: fmt.Sprintf("different hosts (%s and %s)", d.ep.Hostname, peer.Hostname)}
		}
		return PeerLink{Unreachable: "different hosts (same hostname, different boot id or IPC namespace)"}
	case d.ep.OtherNode(peer) != "":
		return PeerLink{Unreachable: d.ep.OtherNode(peer)}
	case peer.UUID == d.ep.UUID:
		return PeerLink{SameGPU: true, Visible: true, Ordinal: d.ordinal, PeerAccess: true, Reason: "same GPU"}
	}
	idx, ok := d.visible[peer.UUID]
	if !ok {
		return PeerLink{Reason: fmt.Sprintf("peer GPU %s is not visible to this process (CUDA_VISIBLE_DEVICES differs between ranks?)", peer.UUID)}
	}
	pl := PeerLink{Visible: true, Ordinal: idx}
	other, err := cuda.DeviceGet(idx)
	if err != nil {
		pl.Reason = err.Error()
		return pl
	}
	can, err := cuda.CanAccessPeer(d.dev, other)
	if err != nil {
		pl.Reason = err.Error()
		return pl
	}
	if !can {
		pl.Reason = fmt.Sprintf("GPU %d cannot access GPU %d (cuDeviceCanAccessPeer=0)", d.ordinal, idx)
		return pl
	}
	pl.PeerAccess = true
	return pl
}

// Close releases the primary context. Buffers, streams, modules and graphs
// should be released first. Work weft queued on the device that still runs
// (a kernel waiting for a peer that never signals) is waited for until the
// WEFT_TIMEOUT deadline, since destroying the context under it would fault
// it and cuCtxDestroy itself waits without a deadline; if it is still
// running then, Close returns an error wrapping hal.ErrTimeout, the device
// stays open and Close may be called again.
func (d *Device) Close() error { return d.close(time.Time{}) }

func (d *Device) close(deadline time.Time) error {
	if d.closed.Swap(true) {
		return fmt.Errorf("close %s: already closed: %w", d, hal.ErrInvalidUsage)
	}
	if err := d.quiesce(deadline, "close "+d.String()); err != nil {
		d.closed.Store(false)
		return err
	}
	d.destroyEvents()
	d.destroyWatchEvents()
	openDevices.Lock()
	for i, o := range openDevices.list {
		if o == d {
			openDevices.list = append(openDevices.list[:i], openDevices.list[i+1:]...)
			break
		}
	}
	openDevices.Unlock()
	if err := d.dev.PrimaryCtxRelease(); err != nil {
		return fmt.Errorf("close %s: %w", d, err)
	}
	return nil
}

// String names the device in messages: "nvlink GPU 0 (rank 3)".
func (d *Device) String() string {
	return fmt.Sprintf("%s GPU %d (rank %d)", d.backend, d.ordinal, d.cfg.Rank)
}

// UUID is the GPU's UUID.
func (d *Device) UUID() cuda.UUID { return d.uuid }

// Backend is the registry name of the backend that opened the device.
func (d *Device) Backend() string { return d.backend }

// Config is the configuration the device was opened with.
func (d *Device) Config() hal.Config { return d.cfg }

// Logger is the device's logger (subsystem HAL).
func (d *Device) Logger() *slog.Logger { return d.log }

// StreamMemOps64 reports whether cuStreamWriteValue64 is usable on the
// device (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS).
func (d *Device) StreamMemOps64() bool { return d.streamMemOps64 }

// Ordinal is the CUDA ordinal of the device.
func (d *Device) Ordinal() int { return d.ordinal }

// Context returns the CUcontext (the device's primary context) for code
// that calls CUDA libraries directly, such as internal/sysnccl.
func (d *Device) Context() uintptr { return uintptr(d.ctx) }

// CUDA returns the device's CUDA device and context.
func (d *Device) CUDA() (cuda.Device, cuda.Context) { return d.dev, d.ctx }

// Arch is the NVRTC target kernels are compiled for ("sm_90a").
func (d *Device) Arch() string { return d.arch }

// MaxThreadsPerBlock is the largest block a kernel may be launched with.
func (d *Device) MaxThreadsPerBlock() int { return d.maxThreadsPerBlock }

// MaxSharedMemoryPerBlock is the most dynamic shared memory a kernel may
// use (the opt-in limit; Function.Launch raises the kernel's limit as
// needed).
func (d *Device) MaxSharedMemoryPerBlock() int { return d.maxSharedOptin }

// Multiprocessors is the SM count.
func (d *Device) Multiprocessors() int { return d.info.Multiprocessors }

func (d *Device) checkOpen(op string) error {
	if d.closed.Load() {
		return fmt.Errorf("%s: %s: device is closed: %w", op, d, hal.ErrInvalidUsage)
	}
	return nil
}
