package nvlink

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/env"
)

// Device is one GPU opened by this process on its primary CUDA context. It
// implements hal.Device, hal.MemoryMapped, hal.GraphCapturer and
// hal.KernelCompiler. Methods are safe for concurrent use.
type Device struct {
	cfg     hal.Config
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

	// visible maps the UUID of every device visible to this process to its
	// CUDA device, for Link.
	visible map[string]int

	closed atomic.Bool

	kernelsOnce sync.Once
	kernels     *cuda.KernelCache
	kernelsErr  error
}

var (
	_ hal.Device         = (*Device)(nil)
	_ hal.MemoryMapped   = (*Device)(nil)
	_ hal.GraphCapturer  = (*Device)(nil)
	_ hal.KernelCompiler = (*Device)(nil)
)

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
// numbers them): it retains the primary context and enables peer access
// with the other GPUs this process has open where cuDeviceCanAccessPeer
// allows. Errors wrap hal.ErrNotSupported (no driver), hal.ErrInvalidArgument
// (ordinal out of range) or hal.ErrDevice.
func Open(cfg hal.Config) (*Device, error) {
	if err := cuda.Load(); err != nil {
		return nil, fmt.Errorf("open nvlink GPU %d: %w", cfg.Ordinal, err)
	}
	n, err := cuda.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("open nvlink GPU %d: %w", cfg.Ordinal, err)
	}
	if cfg.Ordinal < 0 || cfg.Ordinal >= n {
		return nil, fmt.Errorf("open nvlink GPU %d: ordinal out of range (%d CUDA devices visible): %w", cfg.Ordinal, n, hal.ErrInvalidArgument)
	}
	d := &Device{cfg: cfg, ordinal: cfg.Ordinal, visible: map[string]int{}}
	d.log = env.Logger("HAL").With("backend", Name, "gpu", cfg.Ordinal, "rank", cfg.Rank)
	if err := d.query(n); err != nil {
		return nil, fmt.Errorf("open nvlink GPU %d: %w", cfg.Ordinal, err)
	}
	if d.ctx, err = d.dev.PrimaryCtxRetain(); err != nil {
		return nil, fmt.Errorf("open nvlink GPU %d: %w", cfg.Ordinal, err)
	}
	d.enablePeers()
	d.log.Info("opened", "name", d.info.Name, "arch", d.arch, "uuid", d.ep.UUID, "bus", d.ep.PCIBusID)
	return d, nil
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
		Backend:         Name,
		Ordinal:         d.ordinal,
		Name:            name,
		Arch:            cuda.ArchFamily(major, minor),
		UUID:            d.uuid.String(),
		PCIBusID:        bus,
		MemoryBytes:     mem,
		Multiprocessors: sms,
		Driver:          driverVersion(),
		Runtime:         runtime,
	}
	host, _ := os.Hostname()
	d.ep = hal.Endpoint{
		Backend:  Name,
		Hostname: host,
		HostID:   hostID(),
		Ordinal:  d.ordinal,
		UUID:     d.uuid.String(),
		PCIBusID: bus,
		PID:      os.Getpid(),
	}
	return nil
}

// enablePeers enables peer access between d and every other open device of
// this process, both ways, where the hardware allows it.
func (d *Device) enablePeers() {
	openDevices.Lock()
	defer openDevices.Unlock()
	for _, o := range openDevices.list {
		if o.dev == d.dev {
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

// Link reports CapMemoryMapped towards a peer GPU on the same host (same
// HostID) that this GPU can access (cuDeviceCanAccessPeer), or the same GPU.
func (d *Device) Link(peer hal.Endpoint) hal.Link {
	switch {
	case peer.Backend != Name:
		return hal.Link{Reason: fmt.Sprintf("peer uses backend %q, not %q", peer.Backend, Name)}
	case peer.HostID != d.ep.HostID:
		if peer.Hostname != d.ep.Hostname {
			return hal.Link{Reason: fmt.Sprintf("different hosts (%s and %s)", d.ep.Hostname, peer.Hostname)}
		}
		return hal.Link{Reason: "different hosts (same hostname, different boot id or IPC namespace)"}
	case peer.UUID == d.ep.UUID:
		return hal.Link{Caps: hal.CapMemoryMapped, Reason: "same GPU"}
	}
	idx, ok := d.visible[peer.UUID]
	if !ok {
		return hal.Link{Reason: fmt.Sprintf("peer GPU %s is not visible to this process (CUDA_VISIBLE_DEVICES differs between ranks?)", peer.UUID)}
	}
	other, err := cuda.DeviceGet(idx)
	if err != nil {
		return hal.Link{Reason: err.Error()}
	}
	can, err := cuda.CanAccessPeer(d.dev, other)
	if err != nil {
		return hal.Link{Reason: err.Error()}
	}
	if !can {
		return hal.Link{Reason: fmt.Sprintf("GPU %d cannot access GPU %d (cuDeviceCanAccessPeer=0)", d.ordinal, idx)}
	}
	return hal.Link{Caps: hal.CapMemoryMapped}
}

// Close releases the primary context. Buffers, streams, modules and graphs
// must be released first.
func (d *Device) Close() error {
	if d.closed.Swap(true) {
		return fmt.Errorf("close %s: already closed: %w", d, hal.ErrInvalidUsage)
	}
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
	return fmt.Sprintf("nvlink GPU %d (rank %d)", d.ordinal, d.cfg.Rank)
}

// Ordinal is the CUDA ordinal of the device.
func (d *Device) Ordinal() int { return d.ordinal }

// Context returns the CUcontext (the device's primary context) for code
// that calls CUDA libraries directly, such as internal/nccl.
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
