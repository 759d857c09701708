package pcie

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cudadev"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/shm"
)

// forceStaged makes every link host-staged, the device's link to itself
// included, so that tests run the inbox path on any number of GPUs.
var forceStaged bool

// Device is one GPU opened by this process on its primary CUDA context.
// The GPU itself (memory, streams, kernels, CUDA IPC) is the embedded
// cudadev.Device; this backend adds its link policy, port handles, copy
// engines for links with peer access and host-staged engines for the
// others, and the receive loop that serves the latter. It implements
// hal.Device, hal.MemoryMapped, hal.PortMapped, hal.GraphCapturer,
// hal.KernelCompiler and hal.Executor. Methods are safe for concurrent use.
type Device struct {
	*cudadev.Device
	p2p bool   // peer access allowed (WEFT_PCIE_P2P is not "0")
	job uint64 // hash of the job id, in port handles and inbox index entries
	tag string // this process's tag (internal/shm), in shared-memory names

	mu     sync.Mutex
	rx     *rxLoop
	closed bool

	portsMu sync.Mutex
	ports   atomic.Pointer[[]portRange] // buffers exported for ports; copy on write
}

// portRange is a buffer exported for ports: host-staged peers may write
// into it, and nothing else.
type portRange struct {
	addr uint64
	size int64
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

// p2pAllowed reads WEFT_PCIE_P2P: anything but "0" allows peer access.
func p2pAllowed() bool { return env.String("WEFT_PCIE_P2P") != "0" }

// Open opens GPU cfg.Ordinal (a CUDA ordinal). Unless WEFT_PCIE_P2P=0 it
// enables peer access with the other GPUs this process has open where
// cuDeviceCanAccessPeer allows. It first removes the shared-memory files
// of this user's weft processes that no longer exist (reclaim). Errors
// wrap hal.ErrNotSupported (no driver), hal.ErrInvalidArgument (ordinal
// out of range), hal.ErrSystem (this process's tag unreadable) or
// hal.ErrDevice.
func Open(cfg hal.Config) (*Device, error) {
	tag, err := shm.Tag(0)
	if err != nil {
		return nil, fmt.Errorf("open %s GPU %d: %v: %w", Name, cfg.Ordinal, err, hal.ErrSystem)
	}
	reclaim()
	p2p := p2pAllowed()
	cd, err := cudadev.Open(cfg, cudadev.Options{Backend: Name, PeerAccess: p2p})
	if err != nil {
		return nil, err
	}
	d := &Device{Device: cd, p2p: p2p, job: cudadev.HostHash("job:" + cfg.JobID), tag: tag}
	empty := []portRange{}
	d.ports.Store(&empty)
	return d, nil
}

// staged reports whether the link classified as p is host-staged, and why.
func (d *Device) staged(p cudadev.PeerLink) (bool, string) {
	switch {
	case forceStaged:
		return true, "forced by a test"
	case p.SameGPU:
		return false, ""
	case !d.p2p:
		return true, "peer access turned off (WEFT_PCIE_P2P=0)"
	case !p.PeerAccess:
		return true, p.Reason
	}
	return false, ""
}

// Link reports, towards a GPU of the same host: CapMemoryMapped and
// CapPortMapped (copy engine) when this GPU can access the peer's memory
// (cuDeviceCanAccessPeer) and WEFT_PCIE_P2P is not "0", and towards
// itself; otherwise CapPortMapped alone, host-staged through shared
// memory, with the reason peer access is missing. Nothing towards other
// hosts and backends.
func (d *Device) Link(peer hal.Endpoint) hal.Link {
	p := d.Peer(peer)
	if p.Unreachable != "" {
		return hal.Link{Reason: p.Unreachable}
	}
	if staged, why := d.staged(p); staged {
		return hal.Link{Caps: hal.CapPortMapped, Reason: "host-staged through shared memory: " + why}
	}
	if p.SameGPU {
		return hal.Link{Caps: hal.CapMemoryMapped | hal.CapPortMapped, Reason: "same GPU"}
	}
	return hal.Link{Caps: hal.CapMemoryMapped | hal.CapPortMapped, Reason: "peer access"}
}

// ExportPort makes b a destination of peers' engines. The handle carries
// the buffer's address and size in this GPU's address space, which
// host-staged peers name, and, for device memory allocated here, its CUDA
// IPC handle, which peers with peer access map. Errors as
// hal.MemoryMapped.Export; host-pinned buffers export for host-staged
// peers only.
func (d *Device) ExportPort(b hal.Buffer) (hal.Handle, error) {
	nb, err := d.Own("export port", b)
	if err != nil {
		return nil, err
	}
	ep := d.Endpoint()
	h := portHandle{pid: uint32(ep.PID), job: d.job, host: cudadev.HostHash(ep.HostID), uuid: d.UUID(),
		ordinal: uint32(d.Ordinal()), addr: nb.Addr(), size: uint64(nb.Size())}
	if nb.Exportable() {
		if h.ipc, err = d.Export(nb); err != nil {
			return nil, err
		}
		h.flags |= flagIPC
	}
	if _, err := d.receiveLoop(); err != nil {
		return nil, fmt.Errorf("export port of %s: %w", nb, err)
	}
	d.addPort(portRange{nb.Addr(), nb.Size()})
	return h.encode(), nil
}

// ImportPort makes a buffer a peer exported with ExportPort addressable by
// this device's engines. Over a link with peer access (or from this GPU)
// it maps the buffer (CUDA IPC) and Addr is the mapping; over a
// host-staged link Addr is the exporter's own address, which only this
// device's host-staged engines take, and Host is nil. A malformed handle
// is hal.ErrInvalidArgument; one of another job or host hal.ErrInvalidUsage.
func (d *Device) ImportPort(hh hal.Handle) (hal.Buffer, error) {
	h, err := decodePortHandle(hh)
	if err != nil {
		return nil, fmt.Errorf("import port on %s: %w", d, err)
	}
	ep := d.Endpoint()
	if h.host != cudadev.HostHash(ep.HostID) {
		return nil, fmt.Errorf("import port on %s: buffer was exported by pid %d on another host (or IPC namespace): %w", d, h.pid, hal.ErrInvalidUsage)
	}
	if h.job != d.job {
		return nil, fmt.Errorf("import port on %s: buffer was exported by pid %d of another job (JobID differs): %w", d, h.pid, hal.ErrInvalidUsage)
	}
	peer := hal.Endpoint{Backend: Name, Hostname: ep.Hostname, HostID: ep.HostID, UUID: h.uuid.String(), Ordinal: int(h.ordinal), PID: int(h.pid)}
	if staged, _ := d.staged(d.Peer(peer)); staged {
		return &remoteBuffer{dev: d, addr: h.addr, size: int64(h.size), peer: peer}, nil
	}
	if h.flags&flagIPC == 0 {
		return nil, fmt.Errorf("import port on %s: the exporter's buffer is not device memory, which a link with peer access maps: %w", d, hal.ErrInvalidArgument)
	}
	b, err := d.Import(h.ipc)
	if err != nil {
		return nil, fmt.Errorf("import port on %s: %w", d, err)
	}
	if b.Size() != int64(h.size) {
		b.Free()
		return nil, fmt.Errorf("import port on %s: port handle names %d bytes, its IPC handle %d: %w", d, h.size, b.Size(), hal.ErrInvalidArgument)
	}
	return b, nil
}

// NewEngine creates the engine of the link to peer: a copy engine
// (cudadev.CopyEngine) where this GPU reaches the peer's memory (peer
// access, or the GPU itself), else a host-staged engine. Errors wrap
// hal.ErrNotSupported when the link is not port-mapped.
func (d *Device) NewEngine(peer hal.Endpoint) (hal.Engine, error) {
	p := d.Peer(peer)
	if p.Unreachable != "" {
		return nil, fmt.Errorf("pcie: engine of %s to %s GPU %d: %s: %w", d, peer.Backend, peer.Ordinal, p.Unreachable, hal.ErrNotSupported)
	}
	if staged, _ := d.staged(p); staged {
		return d.newStagedEngine(peer)
	}
	name := fmt.Sprintf("GPU %d", peer.Ordinal)
	if p.SameGPU {
		name = "itself"
	}
	if peer.PID != d.Endpoint().PID {
		name += fmt.Sprintf(" of pid %d", peer.PID)
	}
	return d.NewCopyEngine(name)
}

func (d *Device) addPort(r portRange) {
	d.portsMu.Lock()
	defer d.portsMu.Unlock()
	list := append(append([]portRange(nil), *d.ports.Load()...), r)
	d.ports.Store(&list)
}

// validPort reports whether n bytes at addr lie in one buffer exported
// for ports: where a host-staged peer may write.
func (d *Device) validPort(addr uint64, n int64) bool {
	for _, r := range *d.ports.Load() {
		if addr >= r.addr && n >= 0 && addr-r.addr <= uint64(r.size) && uint64(n) <= uint64(r.size)-(addr-r.addr) {
			return true
		}
	}
	return false
}

// receiveLoop returns the device's receive loop, starting it on first use.
func (d *Device) receiveLoop() (*rxLoop, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("%s is closed: %w", d, hal.ErrInvalidUsage)
	}
	if d.rx == nil {
		rx, err := d.startReceiveLoop()
		if err != nil {
			return nil, err
		}
		d.rx = rx
	}
	return d.rx, nil
}

func (d *Device) rxLoopIfRunning() *rxLoop {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rx
}

// Close stops the receive loop (inboxes still open are closed: their
// senders fail with hal.ErrRemote) and releases the GPU. Engines, buffers
// and streams must be released first.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return fmt.Errorf("close %s: already closed: %w", d, hal.ErrInvalidUsage)
	}
	d.closed = true
	rx := d.rx
	d.rx = nil
	d.mu.Unlock()
	var errs []error
	if rx != nil {
		errs = append(errs, rx.close())
	}
	return errors.Join(append(errs, d.Device.Close())...)
}

// remoteBuffer is a buffer of a host-staged peer: its address and size in
// the peer's address space, which this device's host-staged engines name
// in their descriptors. It is not addressable here.
type remoteBuffer struct {
	dev   *Device
	addr  uint64
	size  int64
	peer  hal.Endpoint
	freed atomic.Bool
}

func (b *remoteBuffer) Addr() uint64 { return b.addr }
func (b *remoteBuffer) Size() int64  { return b.size }
func (b *remoteBuffer) Host() []byte { return nil }

// Free forgets the import; a second Free is hal.ErrInvalidUsage.
func (b *remoteBuffer) Free() error {
	if b.freed.Swap(true) {
		return fmt.Errorf("free host-staged import %#x+%d of GPU %d of pid %d on %s: already freed: %w", b.addr, b.size, b.peer.Ordinal, b.peer.PID, b.dev, hal.ErrInvalidUsage)
	}
	return nil
}

// reclaim removes the files of this backend left by processes of this
// user that no longer exist, of any job (a rank killed by a signal cannot
// remove its own), in both the current naming scheme and the one before
// tags (internal/shm.ReclaimLegacy).
func reclaim() {
	shm.Reclaim(shmDir, filePrefix)
	shm.ReclaimLegacy(shmDir)
}

// shmUsable reports whether host staging can create files in shmDir.
func shmUsable() error {
	st, err := os.Stat(shmDir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", shmDir)
	}
	tag, err := shm.Tag(0)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(shmDir, filePrefix+tag+"-probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
