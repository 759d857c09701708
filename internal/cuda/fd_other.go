//go:build !linux

package cuda

import (
	"fmt"

	"github.com/weftccl/weft/hal"
)

// DupFD needs pidfd_getfd, which only Linux has (see fd_linux.go).
func DupFD(pid, fd int) (int, error) {
	return -1, fmt.Errorf("fetch descriptor %d of pid %d: pidfd_getfd is Linux only: %w", fd, pid, hal.ErrNotSupported)
}

// PIDNamespace is "" where /proc/self/ns/pid does not exist.
func PIDNamespace() string { return "" }
