package cuda

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/weftccl/weft/internal/errkind"
)

// fdChildEnv makes the test binary, re-executed, the exporting process of
// TestDupFDBetweenProcesses instead of running tests.
const fdChildEnv = "WEFT_TEST_DUPFD_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(fdChildEnv) == "1" {
		os.Exit(fdChild())
	}
	if os.Getenv(fakeDriverEnv) == "1" {
		os.Exit(fakeDriverChild())
	}
	os.Exit(m.Run())
}

// fdChild opens a file, writes to it, unlinks it (so that only the
// descriptor reaches it), leaves its offset at 5, prints "pid fd" and waits
// for its standard input to close.
func fdChild() int {
	f, err := os.CreateTemp("", "weft-dupfd-*")
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	os.Remove(f.Name())
	if _, err := f.WriteString("weft pidfd_getfd"); err != nil {
		fmt.Println("error", err)
		return 1
	}
	if _, err := f.Seek(5, io.SeekStart); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println(os.Getpid(), f.Fd())
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// TestDupFDBetweenProcesses fetches a descriptor of another process: a
// child (this test binary re-executed) holds an unlinked file; the
// duplicate reads its bytes, from the offset the child left, so it is the
// child's open file itself. Then the error cases: a descriptor the child
// does not have, a process that is gone.
func TestDupFDBetweenProcesses(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fdChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stdin.Close()
		cmd.Wait()
		t.Fatalf("child: %q, %v", line, err)
	}
	var pid, fd int
	if _, err := fmt.Sscan(line, &pid, &fd); err != nil || pid != cmd.Process.Pid {
		stdin.Close()
		cmd.Wait()
		t.Fatalf("child said %q (pid %d): %v", line, cmd.Process.Pid, err)
	}

	nfd, err := DupFD(pid, fd)
	if errors.Is(err, errkind.ErrNotSupported) {
		stdin.Close()
		cmd.Wait()
		t.Skipf("kernel without pidfd_getfd: %v", err)
	}
	if err != nil {
		stdin.Close()
		cmd.Wait()
		t.Fatalf("DupFD(%d, %d): %v", pid, fd, err)
	}
	if flags, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(nfd), syscall.F_GETFD, 0); e == 0 && flags&syscall.FD_CLOEXEC == 0 {
		t.Error("the fetched descriptor is not close-on-exec")
	}
	f := os.NewFile(uintptr(nfd), "dup")
	got, err := io.ReadAll(f)
	f.Close()
	if err != nil || string(got) != "pidfd_getfd" {
		t.Errorf("read through the fetched descriptor: %q, %v; want %q (the child's file from its offset 5)", got, err, "pidfd_getfd")
	}

	// A descriptor number the child has not opened.
	if _, err := DupFD(pid, 1<<20-1); !errors.Is(err, errkind.ErrInvalidUsage) || !strings.Contains(err.Error(), "pidfd_getfd") {
		t.Errorf("DupFD of a closed descriptor = %v, want ErrInvalidUsage naming pidfd_getfd", err)
	}

	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("child: %v", err)
	}
	// The child is reaped: its pid names no process (pids are not reused
	// this quickly).
	if _, err := DupFD(pid, fd); !errors.Is(err, errkind.ErrRemote) || !strings.Contains(err.Error(), "pidfd_open") {
		t.Errorf("DupFD of an exited process = %v, want ErrRemote naming pidfd_open", err)
	}
}

func TestDupFDErrors(t *testing.T) {
	if _, err := DupFD(0, 3); !errors.Is(err, errkind.ErrInvalidArgument) {
		t.Errorf("DupFD(pid 0) = %v", err)
	}
	if _, err := DupFD(1, -1); !errors.Is(err, errkind.ErrInvalidArgument) {
		t.Errorf("DupFD(fd -1) = %v", err)
	}
	tests := []struct {
		errno    syscall.Errno
		sentinel error
		text     string
	}{
		{syscall.EPERM, errkind.ErrSystem, "ptrace permission denied: set kernel.yama.ptrace_scope=0 or run the ranks as one user"},
		{syscall.ESRCH, errkind.ErrRemote, "the exporting process is gone"},
		{syscall.EBADF, errkind.ErrInvalidUsage, "has no such descriptor"},
		{syscall.ENOSYS, errkind.ErrNotSupported, "Linux 5.6"},
		{syscall.EMFILE, errkind.ErrSystem, "ulimit -n"},
		{syscall.EINVAL, errkind.ErrSystem, "invalid argument"},
	}
	for _, tt := range tests {
		err := fdError("pidfd_getfd", 42, 7, tt.errno)
		if !errors.Is(err, tt.sentinel) || !strings.Contains(err.Error(), tt.text) || !strings.HasPrefix(err.Error(), "pidfd_getfd (descriptor 7 of pid 42): ") {
			t.Errorf("fdError(%v) = %q, want %v and %q", tt.errno, err, tt.sentinel, tt.text)
		}
	}
}

func TestPIDNamespace(t *testing.T) {
	ns := PIDNamespace()
	if _, err := os.Stat("/proc/self/ns/pid"); err == nil && !strings.HasPrefix(ns, "pid:[") {
		t.Errorf("PIDNamespace() = %q", ns)
	}
}

// TestFDTag: a tag's identity is stable, distinct from another tag's and
// from another file's, and survives the trip through DupFD; once the tag is
// closed its number, reused, has another identity.
func TestFDTag(t *testing.T) {
	fd, id, err := NewFDTag()
	if err != nil {
		t.Fatal(err)
	}
	fd2, id2, err := NewFDTag()
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd2)
	if id == id2 {
		t.Errorf("two tags share identity %#x", id)
	}
	dup, err := DupFD(os.Getpid(), fd)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := FDIdentity(dup); err != nil || got != id {
		t.Errorf("identity through DupFD = %#x, %v; want %#x", got, err, id)
	}
	syscall.Close(dup)
	syscall.Close(fd)
	f, err := os.CreateTemp(t.TempDir(), "reuse")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, _ := FDIdentity(int(f.Fd())); got == id {
		t.Errorf("a file has the closed tag's identity %#x", id)
	}
}
