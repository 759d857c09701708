//go:build !linux

package cuda

import (
	"fmt"

	"github.com/weftccl/weft/internal/errkind"
)

// DupFD needs pidfd_getfd, which only Linux has (see fd_linux.go).
func DupFD(pid, fd int) (int, error) {
	return -1, fmt.Errorf("fetch descriptor %d of pid %d: pidfd_getfd is Linux only: %w", fd, pid, errkind.ErrNotSupported)
}

// PIDNamespace is "" where /proc/self/ns/pid does not exist.
func PIDNamespace() string { return "" }

// NewFDTag needs Linux (see fd_linux.go).
func NewFDTag() (fd int, id uint64, err error) {
	return -1, 0, fmt.Errorf("descriptor tags are Linux only: %w", errkind.ErrNotSupported)
}

// FDIdentity needs Linux (see fd_linux.go).
func FDIdentity(fd int) (uint64, error) {
	return 0, fmt.Errorf("descriptor identities are Linux only: %w", errkind.ErrNotSupported)
}
