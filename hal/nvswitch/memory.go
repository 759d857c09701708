package nvswitch

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/cudadev"
)

// allocation is one virtual-memory allocation of Alloc: physical memory of
// cuMemCreate (bindable to multicast groups, exportable as a POSIX file
// descriptor) mapped at base.
type allocation struct {
	dev  *Device
	h    cuda.MemGenericAllocationHandle
	base cuda.DevicePtr
	size int64 // a multiple of the allocation granularity
	id   uint64

	mu    sync.Mutex
	fd    int // exported descriptor, kept open until free; -1 before the first Export
	tag   int // its tag (cuda.NewFDTag), open as long as fd
	tagID uint64
}

// Alloc allocates bytes of zeroed device memory: a cuMemCreate allocation
// (pinned device memory, POSIX file descriptor shareable), rounded up to
// the allocation granularity (2 MiB on Hopper), mapped and made accessible
// to this GPU. Such memory can be bound to a multicast group
// (Multicast.Bind), which memory of cuMemAlloc cannot; Export shares it by
// file descriptor instead of CUDA IPC. Errors wrap hal.ErrInvalidArgument
// (bytes ≤ 0) or hal.ErrDevice (out of memory).
func (d *Device) Alloc(bytes int64) (hal.Buffer, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("alloc %d bytes on %s: size must be positive: %w", bytes, d, hal.ErrInvalidArgument)
	}
	if bytes > maxExtent {
		return nil, fmt.Errorf("alloc %d bytes on %s: too large: %w", bytes, d, hal.ErrInvalidArgument)
	}
	a := &allocation{dev: d, size: roundUp(bytes, d.allocGran), id: randomID(), fd: -1, tag: -1}
	var err error
	if a.h, err = d.ctx.MemCreate(a.size, int(d.dev), cuda.HandleTypePosixFD); err != nil {
		return nil, fmt.Errorf("alloc %d bytes on %s: %w", bytes, d, err)
	}
	if a.base, err = d.mapHandle(a.h, a.size, d.allocGran); err != nil {
		d.ctx.MemRelease(a.h)
		return nil, fmt.Errorf("alloc %d bytes on %s: %w", bytes, d, err)
	}
	// cuMemsetD8 runs on the legacy stream, which does not order against
	// weft's non-blocking streams: wait for it before returning.
	err = d.ctx.MemsetD8(a.base, 0, a.size)
	if err == nil {
		err = cuda.Stream{Ctx: d.ctx}.Synchronize()
	}
	if err != nil {
		a.release()
		return nil, fmt.Errorf("zero %d bytes on %s: %w", bytes, d, err)
	}
	d.mu.Lock()
	d.allocs[a.base] = a
	d.mu.Unlock()
	return d.NewExternalBuffer(a.base, bytes, a.free), nil
}

// mapHandle reserves size bytes of address space aligned to align, maps h
// (an allocation or a multicast object) there and makes it readable and
// writable by this GPU.
func (d *Device) mapHandle(h cuda.MemGenericAllocationHandle, size, align int64) (cuda.DevicePtr, error) {
	p, err := d.ctx.MemAddressReserve(size, align)
	if err != nil {
		return 0, err
	}
	if err := d.ctx.MemMap(p, size, h); err != nil {
		d.ctx.MemAddressFree(p, size)
		return 0, err
	}
	if err := d.ctx.MemSetAccess(p, size, []int{int(d.dev)}); err != nil {
		d.ctx.MemUnmap(p, size)
		d.ctx.MemAddressFree(p, size)
		return 0, err
	}
	return p, nil
}

// unmap undoes mapHandle and releases h.
func (d *Device) unmap(p cuda.DevicePtr, size int64, h cuda.MemGenericAllocationHandle) error {
	return errors.Join(d.ctx.MemUnmap(p, size), d.ctx.MemAddressFree(p, size), d.ctx.MemRelease(h))
}

// free is the Free of the allocation's buffer.
func (a *allocation) free() error {
	a.dev.mu.Lock()
	delete(a.dev.allocs, a.base)
	a.dev.mu.Unlock()
	return a.release()
}

func (a *allocation) release() error {
	err := a.dev.unmap(a.base, a.size, a.h)
	a.mu.Lock()
	if a.fd >= 0 {
		err = errors.Join(err, syscall.Close(a.fd), syscall.Close(a.tag))
		a.fd, a.tag = -1, -1
	}
	a.mu.Unlock()
	return err
}

// exportFD returns the allocation's shareable descriptor and its tag,
// exporting them on first use. They stay open until the buffer is freed,
// so that importers can fetch them.
func (a *allocation) exportFD() (fd, tag int, tagID uint64, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fd < 0 {
		if a.tag, a.tagID, err = cuda.NewFDTag(); err != nil {
			return -1, -1, 0, err
		}
		if a.fd, err = a.dev.ctx.MemExportToFD(a.h); err != nil {
			syscall.Close(a.tag)
			a.fd, a.tag = -1, -1
			return -1, -1, 0, err
		}
	}
	return a.fd, a.tag, a.tagID, nil
}

// allocationOf returns the allocation of Alloc that holds all of b and b's
// offset in it, or nil when b is other memory (host-pinned, imported).
func (d *Device) allocationOf(b *cudadev.Buffer) (*allocation, int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for base, a := range d.allocs {
		if b.Ptr() >= base && int64(b.Ptr()-base)+b.Size() <= a.size {
			return a, int64(b.Ptr() - base)
		}
	}
	return nil, 0
}

// origin returns the handle fields that tie an export to this process,
// host, job and PID namespace.
func (d *Device) origin(kind uint16) handle {
	return handle{
		kind:     kind,
		pid:      uint32(os.Getpid()),
		hostHash: cudadev.HostHash(d.Endpoint().HostID),
		jobHash:  cudadev.HostHash(d.Config().JobID),
		pidNS:    cudadev.HostHash(cuda.PIDNamespace()),
		uuid:     d.UUID(),
	}
}

// checkOrigin refuses, with hal.ErrInvalidUsage, a handle exported on
// another host, by another job, or in another PID namespace (where its pid
// names another process).
func (d *Device) checkOrigin(op string, h *handle) error {
	o := d.origin(h.kind)
	switch {
	case h.hostHash != o.hostHash:
		return fmt.Errorf("%s on %s: exported by pid %d on another host (or IPC namespace): %w", op, d, h.pid, hal.ErrInvalidUsage)
	case h.jobHash != o.jobHash:
		return fmt.Errorf("%s on %s: exported by pid %d for another job: %w", op, d, h.pid, hal.ErrInvalidUsage)
	case h.pidNS != o.pidNS:
		return fmt.Errorf("%s on %s: exported by pid %d in another PID namespace, where its descriptor cannot be fetched by pid: %w", op, d, h.pid, hal.ErrInvalidUsage)
	}
	return nil
}

// importHandle fetches the descriptor a handle names (fetchFD) and
// imports the allocation or multicast object behind it.
func (d *Device) importHandle(op string, h *handle) (cuda.MemGenericAllocationHandle, error) {
	fd, err := fetchFD(h)
	if err != nil {
		return 0, fmt.Errorf("%s on %s: %w", op, d, err)
	}
	defer syscall.Close(fd)
	mh, err := d.ctx.MemImportFromFD(fd)
	if err != nil {
		return 0, fmt.Errorf("%s on %s of pid %d's %s: %w", op, d, h.pid, h.uuid, err)
	}
	return mh, nil
}

// fetchFD returns a duplicate of the descriptor a handle names, after
// checking by its tag that the exporter still holds it (a closed
// descriptor's number is soon reused for another file). The caller closes
// it.
func fetchFD(h *handle) (int, error) {
	fd, err := cuda.DupFD(int(h.pid), int(h.fd))
	if err != nil {
		return -1, err
	}
	// The tag is fetched after the descriptor: if it is still the
	// exporter's, the descriptor was too when it was fetched.
	tag, err := cuda.DupFD(int(h.pid), int(h.tagFD))
	if err != nil {
		syscall.Close(fd)
		return -1, err
	}
	id, err := cuda.FDIdentity(tag)
	syscall.Close(tag)
	if err == nil && id != h.tagID {
		err = fmt.Errorf("pid %d no longer exports it (a buffer freed, or a group left, since the handle was made): %w", h.pid, hal.ErrInvalidUsage)
	}
	if err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// Export makes b importable by other processes of the job on this host and
// by other devices of this process. b must be memory of Alloc on d, or a
// part of it: the handle carries the allocation's POSIX file descriptor
// (fetched by the importer with pidfd_getfd), this process's pid, and b's
// offset and size. Other buffers go to the core's Export, which refuses
// them. Errors wrap hal.ErrInvalidArgument (another device's or a
// host-pinned buffer), hal.ErrInvalidUsage (freed) or hal.ErrDevice.
func (d *Device) Export(b hal.Buffer) (hal.Handle, error) {
	nb, err := d.Own("export", b)
	if err != nil {
		return nil, err
	}
	a, off := d.allocationOf(nb)
	if a == nil {
		return d.Device.Export(b)
	}
	fd, tag, tagID, err := a.exportFD()
	if err != nil {
		return nil, fmt.Errorf("export %s: %w", nb, err)
	}
	h := d.origin(kindBuffer)
	h.fd, h.tagFD, h.tagID = int32(fd), int32(tag), tagID
	h.id, h.extent, h.offset, h.size = a.id, uint64(a.size), uint64(off), uint64(nb.Size())
	return h.encode(), nil
}

// Import maps a buffer that Export made, in another process on this host or
// in this one, into d's address space: it fetches the exporter's
// descriptor (pidfd_getfd), imports the allocation and maps all of it.
// Free the returned buffer to unmap it. A handle of the wrong size, of
// another format version or inconsistent is hal.ErrInvalidArgument; one of
// another host, job or PID namespace, or whose exporter has freed the
// buffer, hal.ErrInvalidUsage; a fetch the kernel forbids, hal.ErrSystem
// (the message says how to allow it). CUDA IPC handles of the device core
// are passed to its Import.
func (d *Device) Import(hh hal.Handle) (hal.Buffer, error) {
	if !isHandle(hh) {
		return d.Device.Import(hh)
	}
	h, err := decodeHandle(hh, kindBuffer)
	if err != nil {
		return nil, fmt.Errorf("import on %s: %w", d, err)
	}
	if err := d.checkOrigin("import", h); err != nil {
		return nil, err
	}
	extent := int64(h.extent)
	if extent%d.allocGran != 0 {
		return nil, fmt.Errorf("import on %s: allocation of %d bytes is not a multiple of this GPU's granularity %d: %w", d, extent, d.allocGran, hal.ErrInvalidArgument)
	}
	mh, err := d.importHandle("import", h)
	if err != nil {
		return nil, err
	}
	base, err := d.mapHandle(mh, extent, d.allocGran)
	if err != nil {
		d.ctx.MemRelease(mh)
		return nil, fmt.Errorf("import on %s of pid %d's buffer: %w", d, h.pid, err)
	}
	release := func() error { return d.unmap(base, extent, mh) }
	return d.NewExternalBuffer(base+cuda.DevicePtr(h.offset), int64(h.size), release), nil
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

// randomID names an allocation or a multicast group in handles.
func randomID() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}
