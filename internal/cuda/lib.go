package cuda

import (
	"fmt"
	"path/filepath"

	"github.com/weftccl/weft/internal/env"
)

// DriverLibrary is the library Load opens: WEFT_CUDA_LIB, else
// libcuda.so.1.
func DriverLibrary() string {
	if p := env.String("WEFT_CUDA_LIB"); p != "" {
		return p
	}
	return "libcuda.so.1"
}

// NVRTCCandidates lists the libraries LoadNVRTC tries, in order:
// WEFT_NVRTC_LIB alone when set, else libnvrtc.so.13, .so.12 and .so in the
// loader's default paths, then the same names in /usr/local/cuda/lib64.
func NVRTCCandidates() []string {
	if p := env.String("WEFT_NVRTC_LIB"); p != "" {
		return []string{p}
	}
	names := []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}
	out := append([]string(nil), names...)
	for _, n := range names {
		out = append(out, filepath.Join("/usr/local/cuda/lib64", n))
	}
	return out
}

// ComputeCapability returns the major and minor compute capability.
func (d Device) ComputeCapability() (major, minor int, err error) {
	if major, err = d.Attribute(AttrComputeCapabilityMajor); err != nil {
		return 0, 0, err
	}
	minor, err = d.Attribute(AttrComputeCapabilityMinor)
	return major, minor, err
}

// CompilerVersion is the NVRTC identity that kernel cache keys include
// ("nvrtc-13.0").
func CompilerVersion() (string, error) {
	ma, mi, err := NVRTCVersion()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("nvrtc-%d.%d", ma, mi), nil
}
