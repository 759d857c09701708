//go:build !cgo

package amdsmi

import (
	"fmt"

	"github.com/weftccl/weft/hal"
)

// Open returns the AMD SMI source. Without cgo it always fails with an
// error wrapping hal.ErrNotSupported.
func Open() Source {
	return Static{Err: fmt.Errorf("AMD SMI: weft built without cgo (CGO_ENABLED=0): %w", hal.ErrNotSupported)}
}

// OpenPath is Open for a library at an explicit path.
func OpenPath(path string) Source { return Open() }
