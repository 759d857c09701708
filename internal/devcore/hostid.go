package devcore

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// ReadHostID returns the identity of this machine and IPC namespace under
// procRoot ("/proc"): the kernel's boot id, which differs between machines
// and reboots, plus the inode of the IPC namespace, which differs between
// containers that share a kernel. Two processes can share GPU IPC memory
// (CUDA or HIP) only when both match.
func ReadHostID(procRoot string) (string, error) {
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

// HostID is this process's hal.Endpoint.HostID (ReadHostID of /proc),
// computed once. When /proc cannot be read, the hostname and pid stand in
// ("unknown:node7:4242"): the process then links to no other.
var HostID = sync.OnceValue(func() string {
	id, err := ReadHostID("/proc")
	if err != nil {
		h, _ := os.Hostname()
		return fmt.Sprintf("unknown:%s:%d", h, os.Getpid())
	}
	return id
})

// HashID condenses an identity (a HostID, a job id, a PCI bus id) into the
// 64 bits an exported handle carries: the first 8 bytes of its SHA-256,
// little-endian.
func HashID(id string) uint64 {
	sum := sha256.Sum256([]byte(id))
	return binary.LittleEndian.Uint64(sum[:8])
}
