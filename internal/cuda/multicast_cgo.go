//go:build cgo

package cuda

/*
#include "driver.h"
*/
import "C"

// Multicast objects (NVLink SHARP): a multicast object spans the same range
// of memory on several GPUs of an NVSwitch fabric. It is a
// MemGenericAllocationHandle like a cuMemCreate allocation: exported and
// imported as a POSIX file descriptor (MemExportToFD, MemImportFromFD),
// mapped with MemAddressReserve, MemMap and MemSetAccess, released with
// MemRelease. The entry points exist from CUDA 12.1 on and are resolved at
// that version; with an older driver every call here fails with an *Error
// of code CUDA_ERROR_NOT_SUPPORTED that says so.

// MulticastAvailable reports whether the loaded driver has the multicast
// entry points (CUDA 12.1 and newer). It is false before Load.
func MulticastAvailable() bool { return loaded() && C.weft_cuda_has_multicast() != 0 }

// multicastReady returns nil when call can reach the driver: it is loaded
// (loading it if needed) and has the multicast entry points.
func multicastReady(call string) error {
	if err := ensure(call); err != nil {
		return err
	}
	if C.weft_cuda_has_multicast() == 0 {
		return &Error{Call: call, Code: ErrorNotSupported, Name: ErrorNotSupported.Name(),
			Description: "the driver has no " + call + " (multicast objects need a CUDA 12.1 or newer driver)"}
	}
	return nil
}

// MulticastGetGranularity returns the granularity (bytes) of a multicast
// object of numDevices devices and size bytes, exportable as handleTypes
// (HandleTypePosixFD): the minimum, or the recommended one for best
// performance (option MulticastGranularityMinimum or
// MulticastGranularityRecommended). A group's size, and the size and
// offsets of memory bound to it, are multiples of it.
func (c Context) MulticastGetGranularity(numDevices int, size int64, handleTypes int, option int) (int64, error) {
	const call = "cuMulticastGetGranularity"
	if err := multicastReady(call); err != nil {
		return 0, err
	}
	var g C.size_t
	err := newError(call, Result(C.weft_cuMulticastGetGranularity(c.c(), &g, C.uint(numDevices), C.size_t(size), C.ulonglong(handleTypes), C.int(option))))
	return int64(g), err
}

// MulticastCreate creates a multicast object for numDevices devices, size
// bytes long (a multiple of the granularity), exportable as handleTypes.
// Each member device joins with MulticastAddDevice.
func (c Context) MulticastCreate(numDevices int, size int64, handleTypes int) (MemGenericAllocationHandle, error) {
	const call = "cuMulticastCreate"
	if err := multicastReady(call); err != nil {
		return 0, err
	}
	var h C.CUmemGenericAllocationHandle
	err := newError(call, Result(C.weft_cuMulticastCreate(c.c(), &h, C.uint(numDevices), C.size_t(size), C.ulonglong(handleTypes))))
	return MemGenericAllocationHandle(h), err
}

// MulticastAddDevice adds dev to the multicast object mc. Every member must
// be added before memory is bound to the object.
func (c Context) MulticastAddDevice(mc MemGenericAllocationHandle, dev Device) error {
	const call = "cuMulticastAddDevice"
	if err := multicastReady(call); err != nil {
		return err
	}
	return newError(call, Result(C.weft_cuMulticastAddDevice(c.c(), C.CUmemGenericAllocationHandle(mc), C.CUdevice(dev))))
}

// MulticastBindMem binds size bytes of the cuMemCreate allocation mem,
// from memOffset, to the multicast object mc at mcOffset, for the device
// that owns mem. Offsets and size are multiples of the multicast
// granularity.
func (c Context) MulticastBindMem(mc MemGenericAllocationHandle, mcOffset int64, mem MemGenericAllocationHandle, memOffset, size int64) error {
	const call = "cuMulticastBindMem"
	if err := multicastReady(call); err != nil {
		return err
	}
	return newError(call, Result(C.weft_cuMulticastBindMem(c.c(), C.CUmemGenericAllocationHandle(mc), C.size_t(mcOffset),
		C.CUmemGenericAllocationHandle(mem), C.size_t(memOffset), C.size_t(size))))
}

// MulticastUnbind unbinds the memory of dev bound to mc at mcOffset, size
// bytes.
func (c Context) MulticastUnbind(mc MemGenericAllocationHandle, dev Device, mcOffset, size int64) error {
	const call = "cuMulticastUnbind"
	if err := multicastReady(call); err != nil {
		return err
	}
	return newError(call, Result(C.weft_cuMulticastUnbind(c.c(), C.CUmemGenericAllocationHandle(mc), C.CUdevice(dev), C.size_t(mcOffset), C.size_t(size))))
}
