package hip

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/env"
)

// libraryCandidates lists name in the loader's default paths, then under
// $ROCM_PATH/lib (when set) and /opt/rocm/lib.
func libraryCandidates(names ...string) []string {
	out := append([]string(nil), names...)
	var dirs []string
	if r := os.Getenv("ROCM_PATH"); r != "" {
		dirs = append(dirs, filepath.Join(r, "lib"))
	}
	dirs = append(dirs, "/opt/rocm/lib")
	for _, d := range dirs {
		for _, n := range names {
			out = append(out, filepath.Join(d, n))
		}
	}
	return out
}

// Candidates lists the runtime libraries Load tries, in order:
// libamdhip64.so.7, .so.6, .so.5 and .so in the loader's default paths,
// then the same names under $ROCM_PATH/lib and /opt/rocm/lib.
func Candidates() []string {
	return libraryCandidates("libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so")
}

// RTCCandidates lists the hipRTC libraries LoadRTC tries, in the order of
// Candidates.
func RTCCandidates() []string {
	return libraryCandidates("libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so.5", "libhiprtc.so")
}

// FormatVersion formats a HIP version number (hipRuntimeGetVersion,
// hipDriverGetVersion: major × 10,000,000 + minor × 100,000 + patch) as
// "6.3.42134".
func FormatVersion(v int) string {
	return fmt.Sprintf("%d.%d.%d", v/10000000, v/100000%100, v%100000)
}

// Source is a translation unit to compile for one offload target: the
// input of [Compile] and the key of the kernel cache (Arch is the target,
// "gfx942:sramecc+:xnack-").
type Source = cuda.Source

// KernelCache is internal/cuda's on-disk cache of compiled kernels, which
// keeps HIP code objects as well (keys include the compiler version, so
// NVRTC and hipRTC entries never collide).
type KernelCache = cuda.KernelCache

// CompilerVersion is the hipRTC identity that kernel cache keys include:
// "hiprtc-6.3/hip-6.3.42134" (the runtime's version as well, because
// hiprtcVersion gives no patch level).
func CompilerVersion() (string, error) {
	ma, mi, err := RTCVersion()
	if err != nil {
		return "", err
	}
	v := fmt.Sprintf("hiprtc-%d.%d", ma, mi)
	if rt, err := RuntimeVersion(); err == nil {
		v += "/hip-" + FormatVersion(rt)
	}
	return v, nil
}

// NewKernelCache returns a cache of code objects compiled by Compile, in
// internal/cuda's DefaultCacheDir (WEFT_CACHE_DIR, else
// $XDG_CACHE_HOME/weft or ~/.cache/weft). Errors are those of LoadRTC.
func NewKernelCache() (*KernelCache, error) {
	cv, err := CompilerVersion()
	if err != nil {
		return nil, err
	}
	return &KernelCache{Dir: cuda.DefaultCacheDir(), CompilerVersion: cv, Compile: Compile}, nil
}

// BaseArch returns the processor of an offload target:
// "gfx942:sramecc+:xnack-" → "gfx942".
func BaseArch(target string) string {
	base, _, _ := strings.Cut(target, ":")
	return base
}

// Logger is the logger of the HAL subsystem (WEFT_DEBUG_SUBSYS=HAL).
func Logger() *slog.Logger { return env.Logger("HAL") }
