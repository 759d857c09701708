package cuda

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/weftccl/weft/internal/errkind"
)

// POSIX file descriptors between the processes of a job. A shareable
// handle of a cuMemCreate allocation or a multicast object
// (HandleTypePosixFD) is a file descriptor of the exporting process; an
// importer fetches a duplicate of it with pidfd_open and pidfd_getfd
// (Linux 5.6), given the exporter's pid and descriptor number, so that no
// socket has to carry it (SCM_RIGHTS). The kernel allows this when the
// caller may ptrace the exporter (PTRACE_MODE_ATTACH_REALCREDS): the same
// user, and, under Yama, kernel.yama.ptrace_scope=0 or CAP_SYS_PTRACE.

// System call numbers of pidfd_open and pidfd_getfd. Both architectures
// weft builds for use the numbers of the common table that every Linux
// architecture shares from Linux 5.1 on (include/uapi/asm-generic/unistd.h
// for arm64, arch/x86/entry/syscalls/syscall_64.tbl for amd64): 434 and
// 438. Go's frozen syscall package does not define them.
const (
	sysPidfdOpen  = 434
	sysPidfdGetfd = 438
)

// DupFD returns a new descriptor, in this process and close-on-exec, for
// the open file that descriptor fd names in process pid (pidfd_open, then
// pidfd_getfd). The caller closes it. Errors wrap errkind.ErrSystem for a
// permission problem (EPERM: ptrace access is denied; the message says how
// to allow it), errkind.ErrRemote when pid no longer exists, errkind.ErrInvalidUsage
// when pid has no descriptor fd (closed since), and errkind.ErrNotSupported on
// kernels without pidfd_getfd.
func DupFD(pid, fd int) (int, error) {
	if pid <= 0 || fd < 0 {
		return -1, fmt.Errorf("fetch descriptor %d of pid %d: %w", fd, pid, errkind.ErrInvalidArgument)
	}
	pidfd, _, e := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if e != 0 {
		return -1, fdError("pidfd_open", pid, fd, e)
	}
	defer syscall.Close(int(pidfd))
	nfd, _, e := syscall.Syscall(sysPidfdGetfd, pidfd, uintptr(fd), 0)
	if e != 0 {
		return -1, fdError("pidfd_getfd", pid, fd, e)
	}
	return int(nfd), nil
}

// fdError names the call and says what errno means for the job.
func fdError(call string, pid, fd int, e syscall.Errno) error {
	what := fmt.Sprintf("%s (descriptor %d of pid %d)", call, fd, pid)
	switch e {
	case syscall.EPERM:
		return fmt.Errorf("%s: %v: ptrace permission denied: set kernel.yama.ptrace_scope=0 or run the ranks as one user (ptrace_scope is %s): %w",
			what, e, ptraceScope(), errkind.ErrSystem)
	case syscall.ESRCH:
		return fmt.Errorf("%s: %v: the exporting process is gone: %w", what, e, errkind.ErrRemote)
	case syscall.EBADF:
		return fmt.Errorf("%s: %v: the exporting process has no such descriptor (closed since, or freed what it exported): %w", what, e, errkind.ErrInvalidUsage)
	case syscall.ENOSYS:
		return fmt.Errorf("%s: %v: the kernel lacks pidfd_open/pidfd_getfd (Linux 5.6 or newer needed): %w", what, e, errkind.ErrNotSupported)
	case syscall.EMFILE, syscall.ENFILE:
		return fmt.Errorf("%s: %v: out of file descriptors (raise ulimit -n): %w", what, e, errkind.ErrSystem)
	}
	return fmt.Errorf("%s: %v: %w", what, e, errkind.ErrSystem)
}

// ptraceScope reads kernel.yama.ptrace_scope for messages.
func ptraceScope() string {
	b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "absent: no Yama"
		}
		return "unreadable"
	}
	return strings.TrimSpace(string(b))
}

// PIDNamespace identifies this process's PID namespace ("pid:[4026531836]"),
// or "" when /proc cannot tell. Exporter and importer of a descriptor must
// share it, since the importer names the exporter by pid.
func PIDNamespace() string {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return ns
}

// NewFDTag returns a descriptor that vouches for an export: the read end of
// a new pipe (close-on-exec), and its identity (FDIdentity). An exporter
// keeps it open exactly as long as the descriptor it exports and names both
// in its handle; an importer that fetches the tag and finds the same
// identity knows that the exported descriptor number was not closed and
// reused for another file since (descriptor numbers are reused at once).
func NewFDTag() (fd int, id uint64, err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return -1, 0, fmt.Errorf("pipe2: %v: %w", err, errkind.ErrSystem)
	}
	syscall.Close(p[1])
	if id, err = FDIdentity(p[0]); err != nil {
		syscall.Close(p[0])
		return -1, 0, err
	}
	return p[0], id, nil
}

// FDIdentity identifies the open file of descriptor fd: a hash of its
// device and inode, which no other open file shares.
func FDIdentity(fd int) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("fstat descriptor %d: %v: %w", fd, err, errkind.ErrSystem)
	}
	// FNV-1a over the 16 bytes of device and inode.
	h := uint64(14695981039346656037)
	for _, v := range []uint64{uint64(st.Dev), uint64(st.Ino)} {
		for i := 0; i < 8; i++ {
			h ^= (v >> (8 * i)) & 0xff
			h *= 1099511628211
		}
	}
	return h, nil
}
