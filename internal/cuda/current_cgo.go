//go:build cgo

package cuda

/*
#include <stdlib.h>
#include "current.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/weftccl/weft/internal/errkind"
)

// CurrentDevice returns the device of the CUDA context current on the
// calling OS thread (cuCtxGetCurrent, cuCtxGetDevice), as the CUDA runtime
// leaves it after cudaSetDevice, and that context. ok is false when no
// context is current. The device value is the driver's CUdevice, which is
// the ordinal cuDeviceGet takes. The caller must stay on its OS thread
// (runtime.LockOSThread, or a cgo callback) for the answer to mean
// anything. Errors wrap errkind.ErrNotSupported without a driver.
func CurrentDevice() (dev Device, ctx Context, ok bool, err error) {
	if err := Load(); err != nil {
		return 0, 0, false, err
	}
	path := C.CString(DriverLibrary())
	defer C.free(unsafe.Pointer(path))
	if rc := C.weft_current_load(path); rc != 0 {
		return 0, 0, false, fmt.Errorf("resolve cuCtxGetCurrent/cuCtxGetDevice in %s (step %d): %w", DriverLibrary(), int(rc), errkind.ErrNotSupported)
	}
	var has, d C.int
	var c unsafe.Pointer
	if err := newError("cuCtxGetDevice", Result(C.weft_current_device(&has, &d, &c))); err != nil {
		return 0, 0, false, err
	}
	if has == 0 {
		return 0, 0, false, nil
	}
	return Device(d), Context(uintptr(c)), true, nil
}
