package host

import (
	"os"
	"syscall"
)

// fallocate allocates the first size bytes of f (fallocate(2), mode 0).
func fallocate(f *os.File, size int64) error {
	return syscall.Fallocate(int(f.Fd()), 0, 0, size)
}
