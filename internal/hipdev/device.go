package hipdev

import _ "embed"

//go:embed device/weft_hal.h
var deviceHeader string

// DeviceHeaderName is the include name generated kernels use for
// DeviceHeader: #include "weft_hal.h".
const DeviceHeaderName = "weft_hal.h"

// DeviceHeader returns weft_hal.h, the device-side primitives of HIP
// backends (system-scope release/acquire, atomics, fences, LL packet
// stores, clocks for deadlines) written for hipRTC: the HIP twin of
// internal/cudadev/device/weft_hal.h, with the same names.
func DeviceHeader() string { return deviceHeader }
