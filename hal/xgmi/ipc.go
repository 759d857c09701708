package xgmi

import (
	"fmt"
	"os"
	"sync"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/hip"
	"github.com/weftccl/weft/internal/hipdev"
)

// DeviceHeaderName is the include name generated kernels use for
// DeviceHeader: #include "weft_hal.h".
const DeviceHeaderName = hipdev.DeviceHeaderName

// DeviceHeader returns weft_hal.h, the device-side primitives of this
// backend (system-scope release/acquire, atomics, fences, LL packet
// stores, clocks for deadlines) written for hipRTC: the HIP device core's
// (hipdev.DeviceHeader, internal/hipdev/device/weft_hal.h).
func (d *Device) DeviceHeader() string { return hipdev.DeviceHeader() }

// exports is the process-local registry of exported allocations: HIP
// opens an IPC handle in processes other than its exporter's, so Import of
// a handle from this process returns the exporter's memory directly (peer
// access between this process's GPUs is enabled by Open).
var exports struct {
	sync.Mutex
	m map[exportKey]*Buffer
}

type exportKey struct {
	device uint64 // hipdev.HashID of the exporter's PCI bus id
	base   uint64
}

func unregisterExport(b *Buffer) {
	exports.Lock()
	defer exports.Unlock()
	for k, v := range exports.m {
		if v == b {
			delete(exports.m, k)
		}
	}
}

// Export makes b importable by other processes of the job on this host
// (and by other devices of this process). b must be device memory
// allocated on d by Alloc. The handle (hipdev.ExportHandle) carries the
// host and job, so that an importer elsewhere refuses it. Errors wrap
// hal.ErrInvalidArgument (a buffer of another device, host-pinned or
// imported), hal.ErrInvalidUsage (freed) or hal.ErrDevice.
func (d *Device) Export(hb hal.Buffer) (hal.Handle, error) {
	b, err := d.buffer("export", hb)
	if err != nil {
		return nil, err
	}
	if b.kind != deviceMemory {
		return nil, fmt.Errorf("export %s: only device memory allocated on %s can be exported: %w", b, d, hal.ErrInvalidArgument)
	}
	base, allocSize, err := d.dev.MemGetAddressRange(b.ptr)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", b, err)
	}
	ipc, err := d.dev.IPCGetMemHandle(base)
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", b, err)
	}
	h := hipdev.ExportHandle{PID: uint32(os.Getpid()), Host: hipdev.HashID(d.ep.HostID), Job: hipdev.HashID(d.cfg.JobID),
		Device: hipdev.HashID(d.ep.PCIBusID), AllocBase: uint64(base), AllocSize: uint64(allocSize),
		Offset: uint64(b.ptr - base), Size: uint64(b.size), IPC: ipc}
	exports.Lock()
	if exports.m == nil {
		exports.m = map[exportKey]*Buffer{}
	}
	exports.m[exportKey{h.Device, h.AllocBase}] = b
	exports.Unlock()
	return h.Encode(), nil
}

// Import maps a buffer exported by Export — in another process of the job
// on this host, or in this process by any device — into d's address
// space. A handle of the wrong size, another backend or format version is
// hal.ErrInvalidArgument; one of another host, IPC namespace or job, or of
// a buffer its exporter (in this process) has freed, is
// hal.ErrInvalidUsage. Free the returned buffer to unmap it.
func (d *Device) Import(hh hal.Handle) (hal.Buffer, error) {
	if err := d.checkOpen("import"); err != nil {
		return nil, err
	}
	h, err := hipdev.DecodeExportHandle(hh)
	switch {
	case err != nil:
		return nil, fmt.Errorf("import on %s: %w", d, err)
	case h.Host != hipdev.HashID(d.ep.HostID):
		return nil, fmt.Errorf("import on %s: buffer was exported by pid %d on another host (or IPC namespace): %w", d, h.PID, hal.ErrInvalidUsage)
	case h.Job != hipdev.HashID(d.cfg.JobID):
		return nil, fmt.Errorf("import on %s: buffer was exported by pid %d of another job (this is job %q): %w", d, h.PID, d.cfg.JobID, hal.ErrInvalidUsage)
	}
	local := int(h.PID) == os.Getpid()
	if local {
		exports.Lock()
		root := exports.m[exportKey{h.Device, h.AllocBase}]
		exports.Unlock()
		if root != nil {
			return d.importLocal(h, root)
		}
		// Not exported here (or freed since): a process of the same pid in
		// another pid namespace is possible, so try IPC before giving up.
	}
	m, err := hipdev.OpenIPC(d.dev, h.IPC)
	switch {
	case err != nil && local:
		return nil, fmt.Errorf("import on %s: buffer exported by this process is no longer allocated: %w", d, hal.ErrInvalidUsage)
	case err != nil:
		return nil, fmt.Errorf("import on %s of a buffer of pid %d: %w", d, h.PID, err)
	case uint64(m.Size) < h.Offset+h.Size:
		m.Release()
		return nil, fmt.Errorf("import on %s: handle names %d bytes at offset %d but the allocation maps %d bytes: %w", d, h.Size, h.Offset, m.Size, hal.ErrInvalidArgument)
	}
	return &Buffer{dev: d, kind: importedIPC, ptr: m.Base + hip.DevicePtr(h.Offset), size: int64(h.Size), mapping: m}, nil
}

func (d *Device) importLocal(h hipdev.ExportHandle, root *Buffer) (*Buffer, error) {
	if err := root.live("import"); err != nil {
		return nil, err
	}
	if root.dev.dev != d.dev { // the same GPU opened twice needs no peer access
		ok, err := hip.CanAccessPeer(d.dev, root.dev.dev)
		if err == nil && !ok {
			err = fmt.Errorf("no peer access to GPU %d (hipDeviceCanAccessPeer=0): %w", root.dev.dev, hal.ErrNotSupported)
		}
		if err != nil {
			return nil, fmt.Errorf("import on %s: %w", d, err)
		}
	}
	return &Buffer{dev: d, kind: importedLocal, ptr: hip.DevicePtr(h.AllocBase + h.Offset), size: int64(h.Size), parent: root}, nil
}

// ExportPort is Export: a port destination is a HIP IPC export, and the
// importer's engines write to its mapping.
func (d *Device) ExportPort(b hal.Buffer) (hal.Handle, error) { return d.Export(b) }

// ImportPort is Import: the buffer's Addr is the mapping in this GPU's
// address space, the address engines take as a Put destination or a
// Signal target.
func (d *Device) ImportPort(h hal.Handle) (hal.Buffer, error) { return d.Import(h) }
