package host

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/shm"
)

// region is one mapping: an allocation of this device or an imported peer
// buffer. It implements hal.Buffer.
type region struct {
	dev      *Device
	data     []byte
	path     string // shared-memory file
	owner    bool   // allocated here: Free removes the file
	imported bool
	inUse    guard // launches and engine requests that use the mapping

	mu    sync.Mutex
	freed bool
}

func (r *region) Addr() uint64 {
	if len(r.data) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&r.data[0])))
}

func (r *region) Size() int64  { return int64(len(r.data)) }
func (r *region) Host() []byte { return r.data }

// Free unmaps the buffer (and removes its file when it was allocated here).
// Launches still queued or running that use it are aborted first (their
// stream reports an error wrapping hal.ErrInvalidUsage) and Free waits for
// them until WEFT_TIMEOUT from now; the buffer is then freed and Free
// returns an error wrapping hal.ErrInvalidUsage that says how many it
// aborted. If they are still running at the deadline, the buffer stays
// mapped and the error wraps hal.ErrTimeout. Freeing twice is
// hal.ErrInvalidUsage.
func (r *region) Free() error { return r.free(time.Now().Add(env.Timeout())) }

func (r *region) free(deadline time.Time) error {
	name := filepath.Base(r.path)
	r.mu.Lock()
	freed := r.freed
	r.mu.Unlock()
	if freed {
		return fmt.Errorf("host: free %s: buffer already freed: %w", name, hal.ErrInvalidUsage)
	}
	aborted, err := r.inUse.retire(deadline, "free "+name, "buffer "+name+" was freed while the launch used it")
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.freed = true
	r.dev.forget(r)
	err = syscall.Munmap(r.data)
	if r.owner {
		if e := os.Remove(r.path); e != nil && err == nil && !os.IsNotExist(e) {
			err = e
		}
	}
	if err != nil {
		return fmt.Errorf("host: free %s: %v: %w", name, err, hal.ErrSystem)
	}
	if aborted > 0 {
		return fmt.Errorf("host: free %s: freed while %d launch(es) or engine request(s) still used it; they were aborted: %w", name, aborted, hal.ErrInvalidUsage)
	}
	return nil
}

func shmDir() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

const filePrefix = "weft-"

// reclaim removes the shared-memory files of processes of this user that
// no longer exist, of any job: a rank killed by a signal cannot remove its
// own. The files' names carry their creator's pid and start time (package
// internal/shm), so a live process's files, or those of a process that
// reuses a dead one's pid, are never touched.
func reclaim() { shm.Reclaim(shmDir(), filePrefix) }

func (d *Device) mapFile(path string, size int64, create bool) (*region, error) {
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if create {
		if err := reserve(f, size); err != nil {
			os.Remove(path)
			return nil, err
		}
	} else {
		st, err := f.Stat()
		if err != nil {
			return nil, err
		}
		if st.Size() != size {
			return nil, fmt.Errorf("%s is %d bytes, the handle says %d", path, st.Size(), size)
		}
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		if create {
			os.Remove(path)
		}
		return nil, err
	}
	r := &region{dev: d, data: data, path: path, owner: create, imported: !create}
	d.remember(r)
	return r, nil
}

// errNoRoom is the ENOSPC of reserve.
var errNoRoom = errors.New("no space left")

// reserve sizes a new file to size bytes and allocates its pages now, as a
// GPU allocator does, so that memory that is not there fails the
// allocation instead of a store much later (a SIGBUS, or the OOM killer).
// File systems without fallocate get a sparse file.
func reserve(f *os.File, size int64) error {
	err := fallocate(f, size)
	switch err {
	case nil:
		return nil
	case syscall.ENOSPC:
		return errNoRoom
	case syscall.EOPNOTSUPP, syscall.ENOSYS, syscall.EINVAL:
		return f.Truncate(size)
	}
	return err
}

// roomFor fails with hal.ErrSystem when bytes more do not fit in the
// shared-memory directory or the host's available memory, naming what was
// asked and what is free.
func roomFor(what string, bytes int64) error {
	free, where, err := shm.Room(shmDir())
	if err != nil || uint64(bytes) <= free {
		return nil // a directory that statfs cannot read fails at the allocation
	}
	return fmt.Errorf("host: %s of %s: %s has %s free: %w", what, shm.Bytes(uint64(bytes)), where, shm.Bytes(free), hal.ErrSystem)
}

func (d *Device) alloc(bytes int64, what string) (hal.Buffer, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("host: %s of %d bytes: size must be positive: %w", what, bytes, hal.ErrInvalidArgument)
	}
	if bytes > 1<<40 {
		return nil, fmt.Errorf("host: %s of %d bytes: larger than 1 TiB: %w", what, bytes, hal.ErrInvalidArgument)
	}
	if err := roomFor(what, bytes); err != nil {
		return nil, err
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, fmt.Errorf("host: %s on a closed device: %w", what, hal.ErrInvalidUsage)
	}
	d.seq++
	name := fmt.Sprintf("%s%s-%d", filePrefix, d.tag, d.seq)
	d.mu.Unlock()
	r, err := d.mapFile(filepath.Join(shmDir(), name), bytes, true)
	if errors.Is(err, errNoRoom) {
		free, where, _ := shm.Room(shmDir())
		return nil, fmt.Errorf("host: %s of %s: %s has %s free: %w", what, shm.Bytes(uint64(bytes)), where, shm.Bytes(free), hal.ErrSystem)
	}
	if err != nil {
		return nil, fmt.Errorf("host: %s of %d bytes: %v: %w", what, bytes, err, hal.ErrSystem)
	}
	return r, nil
}

// Alloc allocates bytes of zeroed shared memory, all of it reserved now.
// Errors: hal.ErrInvalidArgument for a size not in (0, 1 TiB];
// hal.ErrSystem when the shared-memory directory or the host's available
// memory has less room than bytes (the message names both), or a file
// operation fails; hal.ErrInvalidUsage on a closed device.
func (d *Device) Alloc(bytes int64) (hal.Buffer, error) { return d.alloc(bytes, "alloc") }

// AllocHost is Alloc: all host memory is device memory here.
func (d *Device) AllocHost(bytes int64) (hal.Buffer, error) { return d.alloc(bytes, "host alloc") }

func (d *Device) remember(r *region) {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := sort.Search(len(d.regions), func(i int) bool { return d.regions[i].Addr() >= r.Addr() })
	d.regions = append(d.regions, nil)
	copy(d.regions[i+1:], d.regions[i:])
	d.regions[i] = r
}

func (d *Device) forget(r *region) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, x := range d.regions {
		if x == r {
			d.regions = append(d.regions[:i], d.regions[i+1:]...)
			return
		}
	}
}

// resolve returns the bytes [addr, addr+n) of a live mapping of this device:
// the software analogue of a GPU's page tables. An address no mapping
// covers is an error, as a fault would be on a GPU.
func (d *Device) resolve(addr uint64, n int64) ([]byte, error) {
	b, _, err := d.resolveRegion(addr, n)
	return b, err
}

// resolveRegion is resolve, also returning the mapping, whose inUse guard
// keeps the bytes mapped while work uses them.
func (d *Device) resolveRegion(addr uint64, n int64) ([]byte, *region, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	i := sort.Search(len(d.regions), func(i int) bool { return d.regions[i].Addr() > addr }) - 1
	if i >= 0 {
		r := d.regions[i]
		off := int64(addr - r.Addr())
		if off+n <= r.Size() {
			return r.data[off : off+n : off+n], r, nil
		}
	}
	return nil, nil, fmt.Errorf("host: address %#x (+%d bytes) is not mapped on device %d: %w", addr, n, d.cfg.Ordinal, hal.ErrInvalidArgument)
}

func (d *Device) owned(b hal.Buffer, what string) (*region, error) {
	r, ok := b.(*region)
	if !ok || r.dev != d {
		return nil, fmt.Errorf("host: %s: buffer belongs to another device: %w", what, hal.ErrInvalidArgument)
	}
	r.mu.Lock()
	freed := r.freed
	r.mu.Unlock()
	if freed {
		return nil, fmt.Errorf("host: %s: buffer was freed: %w", what, hal.ErrInvalidUsage)
	}
	return r, nil
}

func checkRange(what string, off, n, size int64) error {
	if off < 0 || n < 0 || off > size || n > size-off {
		return fmt.Errorf("host: %s: range [%d, %d) outside a %d-byte buffer: %w", what, off, off+n, size, hal.ErrInvalidArgument)
	}
	return nil
}

// Write copies src into dst at byte offset off.
func (d *Device) Write(dst hal.Buffer, off int64, src []byte) error {
	r, err := d.owned(dst, "write")
	if err != nil {
		return err
	}
	if err := checkRange("write", off, int64(len(src)), r.Size()); err != nil {
		return err
	}
	copy(r.data[off:], src)
	return nil
}

// Read copies len(dst) bytes from src at byte offset off.
func (d *Device) Read(dst []byte, src hal.Buffer, off int64) error {
	r, err := d.owned(src, "read")
	if err != nil {
		return err
	}
	if err := checkRange("read", off, int64(len(dst)), r.Size()); err != nil {
		return err
	}
	copy(dst, r.data[off:])
	return nil
}

// Handle format: magic, version, size, then the job id and the file name,
// each length-prefixed. Everything little-endian.
var handleMagic = [8]byte{'W', 'E', 'F', 'T', 'H', 'S', 'T', '1'}

const (
	handleVersion = 1
	maxNameLen    = 255
)

// Export returns the handle of a buffer allocated by this device.
func (d *Device) Export(b hal.Buffer) (hal.Handle, error) {
	r, err := d.owned(b, "export")
	if err != nil {
		return nil, err
	}
	if r.imported {
		return nil, fmt.Errorf("host: export: buffer was imported from a peer; export the original: %w", hal.ErrInvalidArgument)
	}
	var buf bytes.Buffer
	buf.Write(handleMagic[:])
	binary.Write(&buf, binary.LittleEndian, uint32(handleVersion))
	binary.Write(&buf, binary.LittleEndian, r.Size())
	for _, s := range []string{d.job, filepath.Base(r.path)} {
		buf.WriteByte(byte(len(s)))
		buf.WriteString(s)
	}
	return buf.Bytes(), nil
}

// ExportRange is hal.RangeExporter: the handle of the allocation of this
// device that holds [addr, addr+n) and addr's offset in it. Errors wrap
// hal.ErrInvalidArgument: n not positive, no allocation holds the range,
// or it lies in a buffer imported from a peer.
func (d *Device) ExportRange(addr uint64, n int64) (hal.Handle, int64, error) {
	if n <= 0 {
		return nil, 0, fmt.Errorf("host: export range %#x: %d bytes: the length must be positive: %w", addr, n, hal.ErrInvalidArgument)
	}
	_, r, err := d.resolveRegion(addr, n)
	if err != nil {
		return nil, 0, fmt.Errorf("host: export range: %w", err)
	}
	h, err := d.Export(r)
	if err != nil {
		return nil, 0, err
	}
	return h, int64(addr - r.Addr()), nil
}

// Import maps a buffer exported by a device of the same job.
func (d *Device) Import(h hal.Handle) (hal.Buffer, error) {
	job, name, size, err := decodeHandle(h)
	if err != nil {
		return nil, err
	}
	if job != d.job {
		return nil, fmt.Errorf("host: import: handle belongs to job %q, this device to %q: %w", job, d.job, hal.ErrInvalidUsage)
	}
	r, err := d.mapFile(filepath.Join(shmDir(), name), size, false)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("host: import %s: the exported buffer no longer exists (freed, or its process exited): %w", name, hal.ErrInvalidUsage)
		}
		return nil, fmt.Errorf("host: import %s: %v: %w", name, err, hal.ErrSystem)
	}
	return r, nil
}

// decodeHandle parses a handle, rejecting anything malformed.
func decodeHandle(h hal.Handle) (job, name string, size int64, err error) {
	bad := func(why string) error {
		return fmt.Errorf("host: import: malformed handle (%d bytes): %s: %w", len(h), why, hal.ErrInvalidArgument)
	}
	if len(h) < 8+4+8+2 {
		return "", "", 0, bad("too short")
	}
	if !bytes.Equal(h[:8], handleMagic[:]) {
		return "", "", 0, bad("not a host-backend handle")
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != handleVersion {
		return "", "", 0, bad(fmt.Sprintf("version %d, want %d", v, handleVersion))
	}
	size = int64(binary.LittleEndian.Uint64(h[12:]))
	if size <= 0 || size > 1<<40 {
		return "", "", 0, bad(fmt.Sprintf("size %d", size))
	}
	rest := h[20:]
	var strs [2]string
	for i := range strs {
		if len(rest) < 1 || len(rest) < 1+int(rest[0]) {
			return "", "", 0, bad("truncated")
		}
		strs[i] = string(rest[1 : 1+rest[0]])
		rest = rest[1+rest[0]:]
	}
	if len(rest) != 0 {
		return "", "", 0, bad("trailing bytes")
	}
	if !strings.HasPrefix(strs[1], filePrefix) || strings.ContainsAny(strs[1], "/\x00") || strs[1] == "" {
		return "", "", 0, bad("bad buffer name")
	}
	return strs[0], strs[1], size, nil
}

// DeviceHeader is empty: hal/host executes plans in Go.
func (d *Device) DeviceHeader() string { return "" }
