package channels

import (
	"embed"
	"io/fs"
	"path"
)

//go:embed device/*.h
var deviceFS embed.FS

// DeviceLibrary returns the channel device library: the C++ headers
// (include name -> source) that generated plan kernels include, and the
// device API that hand-written kernels include (weft_gin.h; see
// ConnectDevice and docs/device-api.md). They are
// written against the backend's HAL device header (weft_hal.h) and compile
// under NVRTC and hipRTC with no toolkit headers.
func DeviceLibrary() map[string]string {
	out := map[string]string{}
	entries, _ := fs.ReadDir(deviceFS, "device")
	for _, e := range entries {
		b, _ := deviceFS.ReadFile(path.Join("device", e.Name()))
		out[e.Name()] = string(b)
	}
	return out
}
