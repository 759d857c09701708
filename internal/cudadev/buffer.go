package cudadev

import (
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/shm"
)

type bufferKind uint8

const (
	deviceMemory  bufferKind = iota // cuMemAlloc
	hostMemory                      // cuMemHostAlloc, mapped
	importedIPC                     // cuIpcOpenMemHandle of another process's buffer
	importedLocal                   // a buffer of this process, imported by handle
	view                            // part of another buffer (Slice)
	external                        // memory the embedding backend manages (NewExternalBuffer)
)

func (k bufferKind) String() string {
	return [...]string{"device", "host-pinned", "imported", "imported (same process)", "view", "external"}[k]
}

// Buffer is memory addressable by one Device: device memory, host-pinned
// memory mapped into the device, or a peer's buffer imported by handle.
type Buffer struct {
	dev  *Device
	kind bufferKind
	ptr  cuda.DevicePtr // device address of the first byte
	size int64

	host    []byte         // hostMemory: the host view
	hostPtr unsafe.Pointer // hostMemory: for cuMemFreeHost

	mapping *ipcMapping  // importedIPC
	parent  *Buffer      // view, importedLocal: the buffer whose memory this is
	release func() error // external: frees or unmaps the memory

	freed atomic.Bool
}

var _ hal.Buffer = (*Buffer)(nil)

// Addr is the device address of the first byte (for host-pinned buffers,
// the device's address of the mapped memory).
func (b *Buffer) Addr() uint64 { return uint64(b.ptr) }

// Ptr is Addr as a cuda.DevicePtr.
func (b *Buffer) Ptr() cuda.DevicePtr { return b.ptr }

// Size is the length in bytes.
func (b *Buffer) Size() int64 { return b.size }

// Host returns the host bytes of a host-pinned buffer, or nil.
func (b *Buffer) Host() []byte {
	if b.freed.Load() {
		return nil
	}
	return b.host
}

// Device returns the device the buffer belongs to.
func (b *Buffer) Device() *Device { return b.dev }

func (b *Buffer) String() string {
	return fmt.Sprintf("%s buffer %#x+%d on %s", b.kind, uint64(b.ptr), b.size, b.dev)
}

// live reports an error wrapping hal.ErrInvalidUsage when b, or the buffer
// it is part of, has been freed.
func (b *Buffer) live(op string) error {
	for p := b; p != nil; p = p.parent {
		if p.freed.Load() {
			return fmt.Errorf("%s: %s: used after Free: %w", op, b, hal.ErrInvalidUsage)
		}
	}
	return nil
}

// Slice returns the part of b of size bytes at offset off. It shares b's
// memory; freeing it only ends the view, and it must not be used after b
// is freed. Exporting a slice exports that part.
func (b *Buffer) Slice(off, size int64) (*Buffer, error) {
	if err := b.live("slice"); err != nil {
		return nil, err
	}
	if err := checkRange("slice", b, off, size); err != nil {
		return nil, err
	}
	if size == 0 {
		return nil, fmt.Errorf("slice %s: zero size: %w", b, hal.ErrInvalidArgument)
	}
	v := &Buffer{dev: b.dev, kind: view, ptr: b.ptr + cuda.DevicePtr(off), size: size, parent: b}
	if b.host != nil {
		v.host = b.host[off : off+size : off+size]
	}
	return v, nil
}

// Free releases the memory: cuMemFree, cuMemFreeHost, or, for an imported
// buffer, the IPC mapping once no other import of the same allocation uses
// it. Work weft queued on the device that may still use the memory (any
// stream of the device, any launch on a caller's stream) is waited for
// first, until the WEFT_TIMEOUT deadline: neither cuIpcCloseMemHandle nor
// cuMemFreeHost waits for the device, and cuMemFree waits without a
// deadline. If work is still running then, the error wraps hal.ErrTimeout
// and names the buffer, which stays allocated and mapped (Free may be
// called again). A second Free, or any use after Free, is
// hal.ErrInvalidUsage. Freeing a view (Slice) or an import of a buffer of
// this process releases nothing and waits for nothing.
func (b *Buffer) Free() error { return b.free(time.Time{}) }

func (b *Buffer) free(deadline time.Time) error {
	if b.freed.Swap(true) {
		return fmt.Errorf("free %s: already freed: %w", b, hal.ErrInvalidUsage)
	}
	ctx := b.dev.ctx
	switch b.kind {
	case deviceMemory, hostMemory, importedIPC, external:
		if err := b.dev.quiesce(deadline, "free "+b.String()); err != nil {
			b.freed.Store(false)
			return err
		}
	}
	switch b.kind {
	case deviceMemory:
		unregisterExport(b)
		if err := ctx.MemFree(b.ptr); err != nil {
			return fmt.Errorf("free %s: %w", b, err)
		}
	case hostMemory:
		b.host = nil
		if err := ctx.MemFreeHost(b.hostPtr); err != nil {
			return fmt.Errorf("free %s: %w", b, err)
		}
	case importedIPC:
		if err := b.mapping.Release(); err != nil {
			return fmt.Errorf("free %s: %w", b, err)
		}
	case external:
		if err := b.release(); err != nil {
			return fmt.Errorf("free %s: %w", b, err)
		}
	}
	return nil
}

// NewExternalBuffer returns a buffer of d for size bytes of device memory
// at ptr that the embedding backend allocated or mapped itself (hal/nvswitch:
// virtual memory management allocations, which multicast groups bind).
// Every method of d accepts it; Free calls release once. Export refuses it
// (not CUDA IPC memory): the backend exports such buffers itself.
func (d *Device) NewExternalBuffer(ptr cuda.DevicePtr, size int64, release func() error) *Buffer {
	return &Buffer{dev: d, kind: external, ptr: ptr, size: size, release: release}
}

// Alloc allocates bytes of zeroed device memory.
func (d *Device) Alloc(bytes int64) (hal.Buffer, error) { return d.AllocDevice(bytes) }

// AllocDevice is Alloc returning the concrete type.
func (d *Device) AllocDevice(bytes int64) (*Buffer, error) {
	if err := d.checkOpen("alloc"); err != nil {
		return nil, err
	}
	if bytes <= 0 {
		return nil, fmt.Errorf("alloc %d bytes on %s: size must be positive: %w", bytes, d, hal.ErrInvalidArgument)
	}
	if err := d.roomOnDevice(bytes); err != nil {
		return nil, err
	}
	p, err := d.ctx.MemAlloc(bytes)
	if err != nil {
		return nil, fmt.Errorf("alloc %d bytes on %s: %w", bytes, d, err)
	}
	// cuMemsetD8 runs on the legacy stream, which does not order against
	// weft's non-blocking streams: wait for it before returning.
	err = d.ctx.MemsetD8(p, 0, bytes)
	if err == nil {
		err = d.legacyStream().Synchronize()
	}
	if err != nil {
		d.ctx.MemFree(p)
		return nil, fmt.Errorf("zero %d bytes on %s: %w", bytes, d, err)
	}
	return &Buffer{dev: d, kind: deviceMemory, ptr: p, size: bytes}, nil
}

// AllocHost allocates zeroed host memory, pinned and mapped into the
// device's address space (cuMemHostAlloc with DEVICEMAP|PORTABLE). Host()
// returns the host view; Addr() the device address.
func (d *Device) AllocHost(bytes int64) (hal.Buffer, error) { return d.AllocHostPinned(bytes) }

// AllocHostPinned is AllocHost returning the concrete type.
func (d *Device) AllocHostPinned(bytes int64) (*Buffer, error) {
	if err := d.checkOpen("alloc host"); err != nil {
		return nil, err
	}
	if bytes <= 0 {
		return nil, fmt.Errorf("alloc %d host bytes for %s: size must be positive: %w", bytes, d, hal.ErrInvalidArgument)
	}
	if err := roomOnHost(bytes, fmt.Sprintf("for GPU %d (%s)", d.ordinal, d.info.Name)); err != nil {
		return nil, err
	}
	hp, err := d.ctx.MemHostAlloc(bytes, cuda.MemHostAllocDeviceMap|cuda.MemHostAllocPortable)
	if err != nil {
		return nil, fmt.Errorf("alloc %d host bytes for %s: %w", bytes, d, err)
	}
	dp, err := d.ctx.MemHostGetDevicePointer(hp)
	if err != nil {
		d.ctx.MemFreeHost(hp)
		return nil, fmt.Errorf("map %d host bytes into %s: %w", bytes, d, err)
	}
	host := unsafe.Slice((*byte)(hp), bytes)
	clear(host)
	return &Buffer{dev: d, kind: hostMemory, ptr: dp, size: bytes, host: host, hostPtr: hp}, nil
}

// MemoryFree returns the device memory of d's GPU that is free now and its
// total, in bytes (cuMemGetInfo). Errors wrap hal.ErrDevice.
func (d *Device) MemoryFree() (free, total int64, err error) {
	if err := d.checkOpen("memory info"); err != nil {
		return 0, 0, err
	}
	free, total, err = d.ctx.MemGetInfo()
	if err != nil {
		return 0, 0, fmt.Errorf("memory info of %s: %w", d, err)
	}
	return free, total, nil
}

// roomOnDevice fails at once, with an error wrapping hal.ErrSystem that
// names the size asked and what the GPU has free, when bytes cannot fit in
// the device's free memory: "allocate 200 GiB on GPU 0 (NVIDIA H100 80GB
// HBM3): 79.1 GiB free". A driver that cannot say leaves it to cuMemAlloc.
func (d *Device) roomOnDevice(bytes int64) error {
	free, total, err := d.ctx.MemGetInfo()
	if err != nil || bytes <= free {
		return nil
	}
	return fmt.Errorf("allocate %s on GPU %d (%s): %s free of %s: %w",
		shm.Bytes(uint64(bytes)), d.ordinal, d.info.Name, shm.Bytes(uint64(free)), shm.Bytes(uint64(total)), hal.ErrSystem)
}

// roomOnHost fails at once with hal.ErrSystem when bytes of pinned host
// memory exceed the host's MemAvailable: page-locking memory that is not
// there pushes the host into the OOM killer instead of failing.
func roomOnHost(bytes int64, what string) error {
	avail, err := shm.MemAvailable()
	if err != nil || uint64(bytes) <= avail {
		return nil
	}
	return fmt.Errorf("allocate %s of pinned host memory %s: the host has %s available (MemAvailable): %w",
		shm.Bytes(uint64(bytes)), what, shm.Bytes(avail), hal.ErrSystem)
}

// legacyStream is the context's NULL stream, on which the synchronous
// memory calls run.
func (d *Device) legacyStream() cuda.Stream { return cuda.Stream{Ctx: d.ctx} }

// Own returns b as a buffer of d that is still live; errors wrap
// hal.ErrInvalidArgument (another device's or backend's buffer) or
// hal.ErrInvalidUsage (freed). op names the caller in messages.
func (d *Device) Own(op string, b hal.Buffer) (*Buffer, error) { return d.buffer(op, b) }

// Exportable reports whether Export accepts b: device memory allocated on
// its device by Alloc, or a slice of it.
func (b *Buffer) Exportable() bool {
	root := rootOf(b)
	return root.kind == deviceMemory && root.dev == b.dev
}

// buffer returns b as a *Buffer of d that is still live.
func (d *Device) buffer(op string, b hal.Buffer) (*Buffer, error) {
	nb, ok := b.(*Buffer)
	if !ok || nb == nil {
		return nil, fmt.Errorf("%s on %s: buffer %T is not a %s buffer: %w", op, d, b, d.backend, hal.ErrInvalidArgument)
	}
	if nb.dev != d {
		return nil, fmt.Errorf("%s on %s: %s belongs to another device: %w", op, d, nb, hal.ErrInvalidArgument)
	}
	if err := nb.live(op); err != nil {
		return nil, err
	}
	return nb, nil
}

func checkRange(op string, b *Buffer, off, n int64) error {
	if off < 0 || n < 0 || off > b.size || n > b.size-off {
		return fmt.Errorf("%s of %d bytes at offset %d: out of range of %s (%d bytes): %w", op, n, off, b, b.size, hal.ErrInvalidArgument)
	}
	return nil
}

// Write copies src into dst at byte offset off and returns when the data is
// in place. It does not wait for work queued on weft's streams: synchronize
// them first if kernels may still use dst.
func (d *Device) Write(dst hal.Buffer, off int64, src []byte) error {
	b, err := d.buffer("write", dst)
	if err != nil {
		return err
	}
	if err := checkRange("write", b, off, int64(len(src))); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	if b.host != nil {
		copy(b.host[off:], src)
		return nil
	}
	// cuMemcpyHtoD from pageable memory may return before the DMA lands;
	// the legacy-stream synchronize makes the data visible to kernels on
	// any stream launched afterwards.
	if err := d.ctx.MemcpyHtoD(b.ptr+cuda.DevicePtr(off), src); err != nil {
		return fmt.Errorf("write %d bytes at offset %d of %s: %w", len(src), off, b, err)
	}
	if err := d.legacyStream().Synchronize(); err != nil {
		return fmt.Errorf("write %d bytes at offset %d of %s: %w", len(src), off, b, err)
	}
	return nil
}

// Read copies len(dst) bytes from src at byte offset off, synchronously.
func (d *Device) Read(dst []byte, src hal.Buffer, off int64) error {
	b, err := d.buffer("read", src)
	if err != nil {
		return err
	}
	if err := checkRange("read", b, off, int64(len(dst))); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	if b.host != nil {
		copy(dst, b.host[off:])
		return nil
	}
	if err := d.ctx.MemcpyDtoH(dst, b.ptr+cuda.DevicePtr(off)); err != nil {
		return fmt.Errorf("read %d bytes at offset %d of %s: %w", len(dst), off, b, err)
	}
	return nil
}
