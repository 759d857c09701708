//go:build !linux

package host

import (
	"os"
	"syscall"
)

// fallocate is ENOSYS where the syscall package has no fallocate: reserve
// then sizes a sparse file.
func fallocate(*os.File, int64) error { return syscall.ENOSYS }
