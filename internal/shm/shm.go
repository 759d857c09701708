// Package shm names weft's shared-memory files after the process that
// creates them, reclaims the files of processes that no longer exist, and
// measures the room left for new ones.
//
// A file's name starts with a prefix ("weft-", "weft-pcie-") followed by
// its creator's tag: the process id, the process's start time (field 22 of
// /proc/PID/stat, clock ticks since boot) and the inode of its pid
// namespace, "PID-START-NS-". The start time tells a creator from a later
// process that reuses its pid; the namespace keeps a process from judging
// the files of a process it cannot see. Names carry nothing of the job: no
// secret, hash or nonce. A rank killed with SIGKILL leaves its files
// behind; the next weft process of the same user that calls [Reclaim]
// removes them.
//
// The package imports no hal package; callers wrap its errors.
package shm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// StartTime returns the start time of process pid: field 22 of
// /proc/PID/stat, in clock ticks since boot. It fails when the process does
// not exist.
func StartTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Field 2 (comm) is in parentheses and may hold spaces or ')': the
	// fields after it follow the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')' after the command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want at least 20", pid, len(f))
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// pidNamespace is the inode of the pid namespace of process pid ("self"
// for this one), 0 when unknown.
func pidNamespace(pid string) uint64 {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+pid+"/ns/pid", &st); err != nil {
		return 0
	}
	return st.Ino
}

// Tag returns "PID-START-NS" of process pid, which must be visible in this
// process's pid namespace (a process of the same host; pid 0 means this
// process).
func Tag(pid int) (string, error) {
	if pid == 0 {
		pid = os.Getpid()
	}
	st, err := StartTime(pid)
	if err != nil {
		return "", fmt.Errorf("tag of pid %d: %w", pid, err)
	}
	return fmt.Sprintf("%d-%d-%d", pid, st, pidNamespace("self")), nil
}

// creator is a parsed tag.
type creator struct {
	pid   int
	start uint64
	ns    uint64
}

// parseTag reads "PID-START-NS-" at the start of rest.
func parseTag(rest string) (creator, bool) {
	parts := strings.SplitN(rest, "-", 4)
	if len(parts) < 4 {
		return creator{}, false
	}
	pid, err1 := strconv.Atoi(parts[0])
	start, err2 := strconv.ParseUint(parts[1], 10, 64)
	ns, err3 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || pid <= 0 {
		return creator{}, false
	}
	return creator{pid, start, ns}, true
}

// ParseTag reads a tag "PID-START-NS" made by [Tag].
func ParseTag(tag string) (pid int, start, ns uint64, ok bool) {
	c, ok := parseTag(tag + "-")
	return c.pid, c.start, c.ns, ok
}

// Alive reports whether the process a tag names still runs: same pid and
// start time. A tag of another pid namespace counts as alive (it cannot be
// judged from here), and so does one that does not parse.
func Alive(tag string) bool {
	c, ok := parseTag(tag + "-")
	return !ok || c.alive(pidNamespace("self"))
}

func (c creator) alive(ns uint64) bool {
	if c.ns != ns || ns == 0 {
		return true
	}
	st, err := StartTime(c.pid)
	if err != nil {
		// A process we may not read (hidepid) is not known to be gone.
		return !errors.Is(err, os.ErrNotExist)
	}
	return st == c.start
}

// Reclaim removes the files of dir whose names start with prefix and a tag
// whose process is gone, that belong to this process's effective user, and
// that keep anything else (another user's, a live or unknown creator's, a
// name without a tag). It returns the names removed; an error only when dir
// cannot be read.
func Reclaim(dir, prefix string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	ns := pidNamespace("self")
	uid := uint32(os.Geteuid())
	alive := map[creator]bool{}
	var removed []string
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, prefix) || !e.Type().IsRegular() {
			continue
		}
		c, ok := parseTag(strings.TrimPrefix(name, prefix))
		if !ok {
			continue
		}
		live, seen := alive[c]
		if !seen {
			live = c.alive(ns)
			alive[c] = live
		}
		if live {
			continue
		}
		path := filepath.Join(dir, name)
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil || st.Uid != uid || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			continue
		}
		if err := os.Remove(path); err == nil {
			removed = append(removed, name)
		}
	}
	return removed, nil
}

// Room returns the bytes that a new file in dir can still take: the free
// space of dir's file system for an unprivileged user, and, when dir is
// memory-backed (tmpfs, as /dev/shm is), no more than the host's
// MemAvailable. what says which of the two was smaller.
func Room(dir string) (free uint64, what string, err error) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return 0, "", fmt.Errorf("statfs %s: %w", dir, err)
	}
	free = uint64(fs.Bavail) * uint64(fs.Bsize) // Bavail is int64 on FreeBSD
	what = dir
	const tmpfsMagic = 0x01021994
	if fs.Type == tmpfsMagic {
		if mem, err := MemAvailable(); err == nil && mem < free {
			free, what = mem, "host memory (MemAvailable)"
		}
	}
	return free, what, nil
}

// MemAvailable returns the host's MemAvailable from /proc/meminfo, in bytes.
func MemAvailable() (uint64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "MemAvailable:") {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, "MemAvailable:"))
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("/proc/meminfo: malformed line %q", line)
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/meminfo: %q: %w", line, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("/proc/meminfo has no MemAvailable line")
}

// Bytes formats n bytes for a message: "16 GiB", "11.6 GiB", "512 B".
func Bytes(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 || v == float64(uint64(v)) {
		return fmt.Sprintf("%d %s", uint64(v), units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// Prefixes are the name prefixes of weft's shared-memory files: hal/host
// buffers and multicast groups, hal/pcie inbox indexes and inboxes.
var Prefixes = []string{"weft-", "weft-pcie-"}

// Dir is where weft's shared-memory files live: /dev/shm, or the
// temporary directory where /dev/shm is absent.
func Dir() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// ReclaimAll is Reclaim of every prefix in Prefixes in Dir, and
// ReclaimLegacy: what a launcher runs once its ranks have ended, so that
// ranks killed by a signal leave nothing behind. It returns the names
// removed.
func ReclaimAll() []string {
	var all []string
	for _, p := range Prefixes {
		r, _ := Reclaim(Dir(), p)
		all = append(all, r...)
	}
	return append(all, ReclaimLegacy(Dir())...)
}

// Names of the scheme before tags (weft up to 2026-11), which carried the
// job: hal/host "weft-JOB-PID-ORDINAL-SEQ" and "weft-JOB-PID-ORDINAL-mcSEQ"
// (JOB is the job id as given, and may hold '-': the pid is the third
// field from the end), hal/pcie "weft-pcie-HASH-UUID-PID" (an inbox index)
// and the same followed by "-NONCE" (an inbox), with a 16-digit hex HASH
// and NONCE.
var (
	legacyHost = regexp.MustCompile(`^weft-(.+)-([0-9]+)-([0-9]+)-(mc)?[0-9]+$`)
	legacyPCIe = regexp.MustCompile(`^weft-pcie-[0-9a-f]{16}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-([0-9]+)(-[0-9a-f]{16})?$`)
)

// legacyPID returns the creator's pid in a name of the old scheme.
func legacyPID(name string) (int, bool) {
	if m := legacyPCIe.FindStringSubmatch(name); m != nil {
		pid, err := strconv.Atoi(m[1])
		return pid, err == nil && pid > 0
	}
	if strings.HasPrefix(name, "weft-pcie-") {
		return 0, false
	}
	m := legacyHost.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	// A name of the current scheme ("weft-PID-START-NS-SEQ") fits the
	// pattern too; its tag decides, in Reclaim. So does an old name whose
	// job id was one decimal number, which cannot be told from it.
	if _, ok := parseTag(strings.TrimPrefix(name, "weft-")); ok {
		return 0, false
	}
	pid, err := strconv.Atoi(m[2])
	return pid, err == nil && pid > 0
}

// ReclaimLegacy removes files of dir named in the scheme before tags
// whose creator pid no longer exists in this pid namespace and that belong
// to this process's effective user. Those names carry no start time, so a
// file whose pid a later process reuses stays (until that process is gone
// too), and one made in another pid namespace that shares dir can be told
// by nothing: it is removed if its pid does not exist here, which only a
// job started by an old weft and still running across namespaces would
// notice. It returns the names removed.
func ReclaimLegacy(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	uid := uint32(os.Geteuid())
	var removed []string
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "weft-") || !e.Type().IsRegular() {
			continue
		}
		pid, ok := legacyPID(name)
		if !ok {
			continue
		}
		if _, err := StartTime(pid); !errors.Is(err, os.ErrNotExist) {
			continue // running, or not known to be gone
		}
		path := filepath.Join(dir, name)
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil || st.Uid != uid || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
			continue
		}
		if os.Remove(path) == nil {
			removed = append(removed, name)
		}
	}
	return removed
}
