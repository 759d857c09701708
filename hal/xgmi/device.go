package xgmi

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/devcore"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/hip"
)

// Device is one AMD GPU opened by this process. Methods are safe for
// concurrent use.
type Device struct {
	cfg       hal.Config
	dev       hip.Device
	target    string // hipRTC offload target, "gfx942:sramecc+:xnack-"
	info      hal.DeviceInfo
	ep        hal.Endpoint
	log       *slog.Logger
	maxBlock  int // threads per block
	maxShared int // bytes of shared memory (LDS) per block
	wallKHz   int // rate of the device clock the header's deadlines read

	// visible maps the PCI bus id of every GPU visible to this process to
	// its HIP ordinal, for Link.
	visible map[string]hip.Device

	closed atomic.Bool

	kernelsOnce sync.Once
	kernels     *hip.KernelCache
	kernelsErr  error
}

var (
	_ hal.Device         = (*Device)(nil)
	_ hal.MemoryMapped   = (*Device)(nil)
	_ hal.PortMapped     = (*Device)(nil)
	_ hal.GraphCapturer  = (*Device)(nil)
	_ hal.KernelCompiler = (*Device)(nil)
	_ hal.Executor       = (*Device)(nil)
)

// openDevices are the devices this process has open: opening a second GPU
// enables peer access in both directions with the first. Memory of other
// processes is mapped with lazily enabled peer access instead.
var openDevices struct {
	sync.Mutex
	list []*Device
}

// Open opens GPU cfg.Ordinal (a HIP ordinal, as HIP_VISIBLE_DEVICES
// numbers them) and enables peer access with the other GPUs this process
// has open, where hipDeviceCanAccessPeer allows. Errors wrap
// hal.ErrNotSupported (no ROCm), hal.ErrInvalidArgument (ordinal out of
// range) or hal.ErrDevice.
func Open(cfg hal.Config) (*Device, error) {
	if err := hip.Load(); err != nil {
		return nil, fmt.Errorf("open xgmi GPU %d: %w", cfg.Ordinal, err)
	}
	n, err := hip.DeviceCount()
	if err == nil && (cfg.Ordinal < 0 || cfg.Ordinal >= n) {
		err = fmt.Errorf("ordinal out of range (%d AMD GPUs visible): %w", n, hal.ErrInvalidArgument)
	}
	d := &Device{cfg: cfg, dev: hip.Device(cfg.Ordinal), visible: map[string]hip.Device{}}
	if err == nil {
		err = d.query(n)
	}
	if err != nil {
		return nil, fmt.Errorf("open xgmi GPU %d: %w", cfg.Ordinal, err)
	}
	d.log = hip.Logger().With("backend", Name, "gpu", cfg.Ordinal, "rank", cfg.Rank)
	d.enablePeers()
	d.log.Info("opened", "name", d.info.Name, "target", d.target, "bus", d.ep.PCIBusID, "wall_clock_khz", d.wallKHz)
	return d, nil
}

// query fills in the device's identity and properties.
func (d *Device) query(count int) error {
	var err error
	var name, bus string
	var mem int64
	var cus int
	attr := func(a hip.DeviceAttribute, v *int) {
		if err == nil {
			*v, err = d.dev.Attribute(a)
		}
	}
	if name, err = d.dev.Name(); err != nil {
		return err
	}
	if d.target, err = d.dev.ArchName(); err != nil {
		return err
	}
	if bus, err = d.dev.PCIBusID(); err != nil {
		return err
	}
	if mem, err = d.dev.TotalMem(); err != nil {
		return err
	}
	attr(hip.AttrMultiprocessorCount, &cus)
	attr(hip.AttrMaxThreadsPerBlock, &d.maxBlock)
	attr(hip.AttrMaxSharedMemoryPerBlock, &d.maxShared)
	if err != nil {
		return err
	}
	d.wallKHz, _ = d.dev.Attribute(hip.AttrWallClockRate) // 0: the header's default
	uuid, hasUUID, err := d.dev.UUID()
	if err != nil {
		return err
	}
	for i := range count {
		b, err := hip.Device(i).PCIBusID()
		if err != nil {
			return err
		}
		d.visible[b] = hip.Device(i)
	}
	host, _ := os.Hostname()
	d.ep = hal.Endpoint{Backend: Name, Hostname: host, HostID: devcore.HostID(), Ordinal: d.cfg.Ordinal, PCIBusID: bus, PID: os.Getpid()}
	d.ep.Node = hal.NodeOf(d.ep.HostID, env.String("WEFT_NODE_ID"))
	if hasUUID && uuid != (hip.UUID{}) {
		d.ep.UUID = uuid.String()
	}
	d.info = hal.DeviceInfo{Backend: Name, Ordinal: d.cfg.Ordinal, Name: name, Arch: hip.BaseArch(d.target), UUID: d.ep.UUID,
		PCIBusID: bus, MemoryBytes: mem, Multiprocessors: cus, Driver: driverVersion(), Runtime: runtimeVersion()}
	return nil
}

// enablePeers enables peer access between d and every other open device of
// this process, both ways, where the hardware allows it.
func (d *Device) enablePeers() {
	openDevices.Lock()
	defer openDevices.Unlock()
	for _, o := range openDevices.list {
		for _, p := range [][2]*Device{{d, o}, {o, d}} {
			if p[0].dev == p[1].dev {
				continue
			}
			if ok, err := hip.CanAccessPeer(p[0].dev, p[1].dev); err != nil || !ok {
				p[0].log.Info("no peer access", "peer_gpu", p[1].dev, "err", err)
			} else if err := p[0].dev.EnablePeerAccess(p[1].dev); err != nil {
				p[0].log.Warn("enable peer access failed", "peer_gpu", p[1].dev, "err", err)
			}
		}
	}
	openDevices.list = append(openDevices.list, d)
}

// Info describes the device. Arch is the processor ("gfx942"); kernels
// are compiled for the full offload target (Target).
func (d *Device) Info() hal.DeviceInfo { return d.info }

// Endpoint identifies the device to peers; PCIBusID is its identity.
func (d *Device) Endpoint() hal.Endpoint { return d.ep }

// Target is the hipRTC offload target kernels are compiled for, with its
// features ("gfx942:sramecc+:xnack-").
func (d *Device) Target() string { return d.target }

// Link reports CapMemoryMapped|CapPortMapped towards the same GPU and
// towards a GPU of the same host (same HostID) that this GPU can access
// (hipDeviceCanAccessPeer); nothing otherwise, with the reason.
func (d *Device) Link(peer hal.Endpoint) hal.Link {
	const both = hal.CapMemoryMapped | hal.CapPortMapped
	switch {
	case peer.Backend != Name:
		return hal.Link{Reason: fmt.Sprintf("peer uses backend %q, not %q", peer.Backend, Name)}
	case peer.HostID != d.ep.HostID:
		return hal.Link{Reason: fmt.Sprintf("different hosts or IPC namespaces (%s and %s)", d.ep.Hostname, peer.Hostname)}
	case d.ep.OtherNode(peer) != "":
		return hal.Link{Reason: d.ep.OtherNode(peer)}
	case peer.PCIBusID == d.ep.PCIBusID:
		return hal.Link{Caps: both, Reason: "same GPU"}
	}
	o, ok := d.visible[peer.PCIBusID]
	if !ok {
		return hal.Link{Reason: fmt.Sprintf("peer GPU %s is not visible to this process (HIP_VISIBLE_DEVICES differs between ranks?)", peer.PCIBusID)}
	}
	can, err := hip.CanAccessPeer(d.dev, o)
	switch {
	case err != nil:
		return hal.Link{Reason: fmt.Sprintf("GPU %d to GPU %d: %v", d.dev, o, err)}
	case !can:
		return hal.Link{Reason: fmt.Sprintf("GPU %d cannot access GPU %d (hipDeviceCanAccessPeer=0)", d.dev, o)}
	}
	return hal.Link{Caps: both, Reason: fmt.Sprintf("peer access to GPU %d", o)}
}

// Close forgets the device. Buffers, streams, engines, modules and graphs
// must be released first.
func (d *Device) Close() error {
	if d.closed.Swap(true) {
		return fmt.Errorf("close %s: already closed: %w", d, hal.ErrInvalidUsage)
	}
	openDevices.Lock()
	defer openDevices.Unlock()
	for i, o := range openDevices.list {
		if o == d {
			openDevices.list = append(openDevices.list[:i], openDevices.list[i+1:]...)
			break
		}
	}
	return nil
}

// String names the device in messages: "xgmi GPU 0 (rank 3)".
func (d *Device) String() string { return fmt.Sprintf("xgmi GPU %d (rank %d)", d.dev, d.cfg.Rank) }

func (d *Device) checkOpen(op string) error {
	if d.closed.Load() {
		return fmt.Errorf("%s: %s: device is closed: %w", op, d, hal.ErrInvalidUsage)
	}
	return nil
}
