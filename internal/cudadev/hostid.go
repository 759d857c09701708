package cudadev

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// readHostID returns the identity of this machine and IPC namespace under
// procRoot ("/proc"): the kernel's boot id, which differs between machines
// and reboots, plus the inode of the IPC namespace, which differs between
// containers that share a kernel. Two processes can share CUDA IPC memory
// only when both match.
func readHostID(procRoot string) (string, error) {
	boot, err := os.ReadFile(filepath.Join(procRoot, "sys/kernel/random/boot_id"))
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	ns, err := os.Readlink(filepath.Join(procRoot, "self/ns/ipc"))
	if err != nil {
		return "", fmt.Errorf("read IPC namespace: %w", err)
	}
	return strings.TrimSpace(string(boot)) + "/" + ns, nil
}

// hostID is this process's HostID, computed once. When /proc cannot be read
// the hostname and pid stand in: the process then links to no other.
var hostID = sync.OnceValue(func() string {
	id, err := readHostID("/proc")
	if err != nil {
		h, _ := os.Hostname()
		return fmt.Sprintf("unknown:%s:%d", h, os.Getpid())
	}
	return id
})
