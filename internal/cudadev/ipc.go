package cudadev

import (
	_ "embed"
	"fmt"
	"os"
	"sync"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/devcore"
)

//go:embed device/weft_hal.h
var deviceHeader string

// DeviceHeaderName is the include name generated kernels use for
// DeviceHeader: #include "weft_hal.h".
const DeviceHeaderName = "weft_hal.h"

// DeviceHeader returns weft_hal.h, the device-side primitives of this
// backend.
func (d *Device) DeviceHeader() string { return deviceHeader }

// exports is the process-local registry of exported allocations. CUDA
// refuses to open an IPC handle in the process that made it, so Import of a
// handle from this process returns the exporter's memory directly (peer
// access between this process's GPUs is enabled by Open).
var exports struct {
	sync.Mutex
	m map[exportKey]*Buffer // allocation -> its root buffer
}

type exportKey struct {
	uuid cuda.UUID
	base cuda.DevicePtr
}

func registerExport(k exportKey, root *Buffer) {
	exports.Lock()
	defer exports.Unlock()
	if exports.m == nil {
		exports.m = map[exportKey]*Buffer{}
	}
	exports.m[k] = root
}

// registerExportIfAbsent registers mk() under k unless k has an entry.
func registerExportIfAbsent(k exportKey, mk func() *Buffer) {
	exports.Lock()
	defer exports.Unlock()
	if exports.m == nil {
		exports.m = map[exportKey]*Buffer{}
	}
	if _, ok := exports.m[k]; !ok {
		exports.m[k] = mk()
	}
}

func unregisterExport(root *Buffer) {
	exports.Lock()
	defer exports.Unlock()
	for k, b := range exports.m {
		if b == root {
			delete(exports.m, k)
		}
	}
}

func lookupExport(k exportKey) *Buffer {
	exports.Lock()
	defer exports.Unlock()
	return exports.m[k]
}

// ipcMaps holds one cuIpcOpenMemHandle mapping per (context, allocation):
// CUDA refuses to open the same handle twice in one context, so imports of
// buffers of one allocation share the mapping, counted. A second context
// (another GPU of this process) opens its own mapping, so that peer access
// is enabled for it too, or shares the first if CUDA refuses.
var ipcMaps = devcore.IPC[cuda.Context, cuda.IPCMemHandle, cuda.DevicePtr]{
	OpenHandle:  cuda.Context.IPCOpenMemHandle,
	Range:       cuda.Context.MemGetAddressRange,
	CloseHandle: cuda.Context.IPCCloseMemHandle,
}

// ipcMapping is one mapping of ipcMaps.
type ipcMapping = devcore.Mapping[cuda.Context, cuda.IPCMemHandle, cuda.DevicePtr]

// rootOf returns the buffer that owns b's allocation.
func rootOf(b *Buffer) *Buffer {
	for b.parent != nil {
		b = b.parent
	}
	return b
}

// Export makes b importable by other processes of the job on this host
// (and by other devices of this process). b must be device memory of d,
// allocated by Alloc, or a slice of it. Errors wrap hal.ErrInvalidArgument
// (a buffer of another device, freed, host-pinned or imported) or
// hal.ErrDevice.
func (d *Device) Export(b hal.Buffer) (hal.Handle, error) {
	nb, err := d.buffer("export", b)
	if err != nil {
		return nil, err
	}
	root := rootOf(nb)
	if root.kind != deviceMemory || root.dev != d {
		return nil, fmt.Errorf("export %s: only device memory allocated on %s can be exported (this is %s memory): %w", nb, d, root.kind, hal.ErrInvalidArgument)
	}
	base, allocSize, err := d.ctx.MemGetAddressRange(nb.ptr)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", nb, err)
	}
	ipc, err := d.ctx.IPCGetMemHandle(base)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", nb, err)
	}
	registerExport(exportKey{d.uuid, base}, root)
	return d.ipcHandle(base, allocSize, uint64(nb.ptr-base), uint64(nb.size), ipc).encode(), nil
}

// ExportRange is hal.RangeExporter: the handle of the cuMemAlloc (or
// cudaMalloc) allocation of this GPU that holds [addr, addr+n) — memory
// weft did not allocate, such as an NCCL client's buffers — and addr's
// offset in it. The handle names the whole allocation, so a peer imports
// each allocation once however many buffers it holds. In this process an
// Import of the handle returns the address itself (peer access is
// enabled between this process's GPUs). Errors wrap hal.ErrInvalidArgument
// (n not positive, an address of another GPU or of no allocation, a range
// past the allocation's end) or hal.ErrNotSupported (memory CUDA IPC does
// not export: virtual-memory-management or stream-ordered pool
// allocations).
func (d *Device) ExportRange(addr uint64, n int64) (hal.Handle, int64, error) {
	if err := d.checkOpen("export range"); err != nil {
		return nil, 0, err
	}
	if n <= 0 {
		return nil, 0, fmt.Errorf("export range %#x on %s: %d bytes: the length must be positive: %w", addr, d, n, hal.ErrInvalidArgument)
	}
	p := cuda.DevicePtr(addr)
	if ord, err := d.ctx.PointerDeviceOrdinal(p); err != nil || ord != d.ordinal {
		return nil, 0, fmt.Errorf("export range %#x (+%d bytes) on %s: not memory of this GPU (owner %d, %v): %w", addr, n, d, ord, err, hal.ErrInvalidArgument)
	}
	base, allocSize, err := d.ctx.MemGetAddressRange(p)
	if err != nil {
		return nil, 0, fmt.Errorf("export range %#x on %s: %v: %w", addr, d, err, hal.ErrInvalidArgument)
	}
	off := int64(p - base)
	if n > allocSize-off {
		return nil, 0, fmt.Errorf("export range %#x (+%d bytes) on %s: runs past the end of its %d-byte allocation at %#x: %w", addr, n, d, allocSize, uint64(base), hal.ErrInvalidArgument)
	}
	ipc, err := d.ctx.IPCGetMemHandle(base)
	if err != nil {
		return nil, 0, fmt.Errorf("export range %#x on %s: %v: %w", addr, d, err, hal.ErrNotSupported)
	}
	// The same-process import resolves the allocation through the export
	// registry: an allocation of this device's Alloc is there once
	// exported; another gets an entry that is never freed (the memory is
	// the caller's), which a later allocation at the same base reuses.
	registerExportIfAbsent(exportKey{d.uuid, base}, func() *Buffer { return d.NewExternalBuffer(base, allocSize, nil) })
	return d.ipcHandle(base, allocSize, 0, uint64(allocSize), ipc).encode(), off, nil
}

// ipcHandle is the handle of size bytes at offset in the allocation of
// allocSize bytes at base, exported from this process as ipc.
func (d *Device) ipcHandle(base cuda.DevicePtr, allocSize int64, offset, size uint64, ipc cuda.IPCMemHandle) handle {
	return handle{
		kind:      kindCUDAIPC,
		pid:       uint32(os.Getpid()),
		hostHash:  HostHash(d.ep.HostID),
		uuid:      d.uuid,
		allocBase: uint64(base),
		allocSize: uint64(allocSize),
		offset:    offset,
		size:      size,
		ipc:       ipc,
	}
}

// Import maps a buffer exported by Export — in another process on this
// host, or in this process by any device — into d's address space. A
// handle of the wrong size, of another backend or of another format
// version is hal.ErrInvalidArgument; one exported on another host, or
// whose buffer its exporter (in this process) has freed, is
// hal.ErrInvalidUsage. Free the returned buffer to unmap it.
func (d *Device) Import(hh hal.Handle) (hal.Buffer, error) {
	if err := d.checkOpen("import"); err != nil {
		return nil, err
	}
	h, err := decodeHandle(hh)
	if err != nil {
		return nil, fmt.Errorf("import on %s: %w", d, err)
	}
	if h.hostHash != HostHash(d.ep.HostID) {
		return nil, fmt.Errorf("import on %s: buffer was exported by pid %d on another host (or IPC namespace): %w", d, h.pid, hal.ErrInvalidUsage)
	}
	if int(h.pid) == os.Getpid() {
		if root := lookupExport(exportKey{h.uuid, cuda.DevicePtr(h.allocBase)}); root != nil {
			return d.importLocal(h, root)
		}
		// Not exported here (or freed since): a process of the same pid in
		// another pid namespace is possible, so try IPC before giving up.
	}
	m, err := ipcMaps.Open(d.ctx, h.ipc)
	if err != nil {
		if int(h.pid) == os.Getpid() {
			return nil, fmt.Errorf("import on %s: buffer exported by this process is no longer allocated: %w", d, hal.ErrInvalidUsage)
		}
		return nil, fmt.Errorf("import on %s of a buffer of pid %d, %s: %w", d, h.pid, cudaUUID(h.uuid), err)
	}
	if uint64(m.Size) < h.offset+h.size {
		m.Release()
		return nil, fmt.Errorf("import on %s: handle names %d bytes at offset %d but the allocation maps %d bytes: %w", d, h.size, h.offset, m.Size, hal.ErrInvalidArgument)
	}
	return &Buffer{dev: d, kind: importedIPC, ptr: m.Base + cuda.DevicePtr(h.offset), size: int64(h.size), mapping: m}, nil
}

func (d *Device) importLocal(h *handle, root *Buffer) (*Buffer, error) {
	if err := root.live("import"); err != nil {
		return nil, err
	}
	if root.dev != d && root.dev.dev != d.dev { // the same GPU opened twice needs no peer access
		ok, err := cuda.CanAccessPeer(d.dev, root.dev.dev)
		if err != nil {
			return nil, fmt.Errorf("import on %s: %w", d, err)
		}
		if !ok {
			return nil, fmt.Errorf("import on %s of a buffer of GPU %d: no peer access (cuDeviceCanAccessPeer=0): %w", d, root.dev.ordinal, hal.ErrNotSupported)
		}
	}
	return &Buffer{dev: d, kind: importedLocal, ptr: cuda.DevicePtr(h.allocBase + h.offset), size: int64(h.size), parent: root}, nil
}

func cudaUUID(u cuda.UUID) string { return u.String() }
