//go:build !cgo

package nvml

import (
	"fmt"

	"github.com/weftccl/weft/hal"
)

// Open returns the NVML source. This weft was built without cgo, so the
// source always fails with an error wrapping hal.ErrNotSupported.
func Open() Source {
	return Static{Err: fmt.Errorf("NVML: weft built without cgo (CGO_ENABLED=0): %w", hal.ErrNotSupported)}
}
