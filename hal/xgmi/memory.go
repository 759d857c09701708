package xgmi

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/hip"
	"github.com/weftccl/weft/internal/hipdev"
)

type bufferKind uint8

const (
	deviceMemory  bufferKind = iota // hipExtMallocWithFlags, fine-grained
	hostMemory                      // hipHostMalloc, mapped and coherent
	importedIPC                     // hipIpcOpenMemHandle of another process's buffer
	importedLocal                   // a buffer of this process, imported by handle
)

func (k bufferKind) String() string {
	return [...]string{"device", "host-pinned", "imported", "imported (same process)"}[k]
}

// Buffer is memory addressable by one Device: device memory, host memory
// mapped into the device, or a peer's buffer imported by handle.
type Buffer struct {
	dev     *Device
	kind    bufferKind
	ptr     hip.DevicePtr // device address of the first byte
	size    int64
	host    []byte             // hostMemory: the host view
	hostPtr unsafe.Pointer     // hostMemory: for hipHostFree
	mapping *hipdev.IPCMapping // importedIPC
	parent  *Buffer            // importedLocal: the exporter's buffer
	freed   atomic.Bool
}

var _ hal.Buffer = (*Buffer)(nil)

// Addr is the device address of the first byte.
func (b *Buffer) Addr() uint64 { return uint64(b.ptr) }

// Size is the length in bytes.
func (b *Buffer) Size() int64 { return b.size }

// Host returns the host bytes of a host-pinned buffer, or nil.
func (b *Buffer) Host() []byte {
	if b.freed.Load() {
		return nil
	}
	return b.host
}

func (b *Buffer) String() string {
	return fmt.Sprintf("%s buffer %#x+%d on %s", b.kind, uint64(b.ptr), b.size, b.dev)
}

// live reports an error wrapping hal.ErrInvalidUsage when b, or the buffer
// it maps, has been freed.
func (b *Buffer) live(op string) error {
	for p := b; p != nil; p = p.parent {
		if p.freed.Load() {
			return fmt.Errorf("%s: %s: used after Free: %w", op, b, hal.ErrInvalidUsage)
		}
	}
	return nil
}

// Free releases the memory (hipFree, hipHostFree), or the IPC mapping of
// an imported buffer once no other import of its allocation uses it. A
// second Free, or any use after Free, is hal.ErrInvalidUsage.
func (b *Buffer) Free() error {
	if b.freed.Swap(true) {
		return fmt.Errorf("free %s: already freed: %w", b, hal.ErrInvalidUsage)
	}
	var err error
	switch b.kind {
	case deviceMemory:
		unregisterExport(b)
		err = b.dev.dev.Free(b.ptr)
	case hostMemory:
		b.host = nil
		err = b.dev.dev.HostFree(b.hostPtr)
	case importedIPC:
		err = b.mapping.Release()
	}
	if err != nil {
		return fmt.Errorf("free %s: %w", b, err)
	}
	return nil
}

// Alloc allocates bytes of zeroed fine-grained device memory. Errors wrap
// hal.ErrInvalidArgument (bytes ≤ 0) or hal.ErrDevice (out of memory).
func (d *Device) Alloc(bytes int64) (hal.Buffer, error) {
	if err := d.checkOpen("alloc"); err != nil {
		return nil, err
	}
	if bytes <= 0 {
		return nil, fmt.Errorf("alloc %d bytes on %s: size must be positive: %w", bytes, d, hal.ErrInvalidArgument)
	}
	p, err := d.dev.Malloc(bytes, hip.MallocFinegrained)
	if err != nil {
		return nil, fmt.Errorf("alloc %d bytes on %s: %w", bytes, d, err)
	}
	if err := d.dev.Memset(p, 0, bytes); err != nil {
		d.dev.Free(p)
		return nil, fmt.Errorf("zero %d bytes on %s: %w", bytes, d, err)
	}
	return &Buffer{dev: d, kind: deviceMemory, ptr: p, size: bytes}, nil
}

// AllocHost allocates zeroed host memory, pinned, mapped into the device's
// address space and coherent (hipHostMalloc with
// Mapped|Coherent|Portable). Host() returns the host view; Addr() the
// device address.
func (d *Device) AllocHost(bytes int64) (hal.Buffer, error) {
	if err := d.checkOpen("alloc host"); err != nil {
		return nil, err
	}
	if bytes <= 0 {
		return nil, fmt.Errorf("alloc %d host bytes for %s: size must be positive: %w", bytes, d, hal.ErrInvalidArgument)
	}
	hp, err := d.dev.HostMalloc(bytes, hip.HostMallocMapped|hip.HostMallocCoherent|hip.HostMallocPortable)
	if err != nil {
		return nil, fmt.Errorf("alloc %d host bytes for %s: %w", bytes, d, err)
	}
	dp, err := d.dev.HostGetDevicePointer(hp)
	if err != nil {
		d.dev.HostFree(hp)
		return nil, fmt.Errorf("map %d host bytes into %s: %w", bytes, d, err)
	}
	host := unsafe.Slice((*byte)(hp), bytes)
	clear(host)
	return &Buffer{dev: d, kind: hostMemory, ptr: dp, size: bytes, host: host, hostPtr: hp}, nil
}

// buffer returns b as a live *Buffer of d; errors wrap
// hal.ErrInvalidArgument (another device's or backend's buffer) or
// hal.ErrInvalidUsage (freed).
func (d *Device) buffer(op string, b hal.Buffer) (*Buffer, error) {
	nb, ok := b.(*Buffer)
	if !ok || nb == nil {
		return nil, fmt.Errorf("%s on %s: buffer %T is not an xgmi buffer: %w", op, d, b, hal.ErrInvalidArgument)
	}
	if nb.dev != d {
		return nil, fmt.Errorf("%s on %s: %s belongs to another device: %w", op, d, nb, hal.ErrInvalidArgument)
	}
	return nb, nb.live(op)
}

// access checks a range of bytes at off in b for op.
func (d *Device) access(op string, hb hal.Buffer, off int64, n int) (*Buffer, error) {
	b, err := d.buffer(op, hb)
	if err == nil && (off < 0 || off > b.size || int64(n) > b.size-off) {
		err = fmt.Errorf("%s of %d bytes at offset %d: out of range of %s: %w", op, n, off, b, hal.ErrInvalidArgument)
	}
	return b, err
}

// Write copies src into dst at byte offset off and returns when the data
// is visible to work on any stream. It does not wait for work queued on
// weft's streams: synchronize them first if kernels may still use dst.
func (d *Device) Write(dst hal.Buffer, off int64, src []byte) error {
	b, err := d.access("write", dst, off, len(src))
	switch {
	case err != nil || len(src) == 0:
		return err
	case b.host != nil:
		copy(b.host[off:], src)
	default:
		if err := d.dev.MemcpyHtoD(b.ptr+hip.DevicePtr(off), src); err != nil {
			return fmt.Errorf("write %d bytes at offset %d of %s: %w", len(src), off, b, err)
		}
	}
	return nil
}

// Read copies len(dst) bytes from src at byte offset off, synchronously.
func (d *Device) Read(dst []byte, src hal.Buffer, off int64) error {
	b, err := d.access("read", src, off, len(dst))
	switch {
	case err != nil || len(dst) == 0:
		return err
	case b.host != nil:
		copy(dst, b.host[off:])
	default:
		if err := d.dev.MemcpyDtoH(dst, b.ptr+hip.DevicePtr(off)); err != nil {
			return fmt.Errorf("read %d bytes at offset %d of %s: %w", len(dst), off, b, err)
		}
	}
	return nil
}
