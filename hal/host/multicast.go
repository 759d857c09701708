package host

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
)

// The switch-mapped capability in software. A multicast group is a small
// control file in shared memory (beside the buffers, so that separate
// processes of a job share it): the group's length and number of members,
// counters of members that have joined, bound and left, and one slot per
// member naming the shared-memory file of the buffer it bound. Joining
// takes a slot with a compare-and-swap on the joined counter; binding
// records the buffer and counts it.
//
// A member's multicast address is a reserved, inaccessible range of its
// address space (PROT_NONE), as long as the group: plain loads and stores
// through it fault, as the contract leaves them undefined. The plan
// interpreter recognises the range (Device.resolveMulticast) and performs
// what the switch would: a load-reduce reads every member's copy (each
// mapped in this process on first use) and reduces them in member order
// with the interpreter's reduction, a store writes every member's copy.

var _ hal.SwitchMapped = (*Device)(nil)

// Control file layout (little-endian; counters are 32-bit words updated
// atomically by every member's process).
const (
	mcMagic       = "WEFTMCG1"
	mcSize        = 8  // uint64: the group's length in bytes
	mcRanks       = 16 // uint32: members
	mcJoined      = 20 // uint32: members that joined (slot index + 1 of the last)
	mcBound       = 24 // uint32: members that bound a buffer
	mcLeft        = 28 // uint32: members that left
	mcHeaderBytes = 64
	mcSlotBytes   = 256 // per member: state, pid, name length, name
	mcSlotState   = 0   // uint32: slotJoined, slotBound or slotLeft
	mcSlotPID     = 4   // uint32
	mcSlotNameLen = 8   // uint32
	mcSlotName    = 12
	maxMembers    = 1024
)

const (
	slotJoined = 1
	slotBound  = 2
	slotLeft   = 3
)

// Multicast handle: magic, version, size, ranks, then the job id and the
// control file's name, each length-prefixed.
var mcHandleMagic = [8]byte{'W', 'E', 'F', 'T', 'H', 'M', 'C', '1'}

const mcHandleVersion = 1

// multicast is one device's membership of a group; it implements
// hal.Multicast.
type multicast struct {
	dev    *Device
	path   string
	ctl    []byte // the mapped control file
	size   int64
	ranks  int
	member int
	inUse  guard // launches that use the multicast view

	mu     sync.Mutex
	local  *region  // the buffer this member bound
	resv   []byte   // reserved range: the multicast address
	copies [][]byte // every member's copy, by member, once mapped
	peers  [][]byte // mappings of the other members' copies (unmapped at Close)
	closed bool
}

// MulticastGranularity is the page size: buffers from Alloc are whole
// mapped files, page-aligned and a whole number of pages long.
func (d *Device) MulticastGranularity() (int64, error) { return int64(os.Getpagesize()), nil }

// SwitchHeader is empty: hal/host executes switch plans in Go.
func (d *Device) SwitchHeader() string { return "" }

func ctlBytes(ranks int) int64 { return mcHeaderBytes + int64(ranks)*mcSlotBytes }

func (m *multicast) word(off int64) *uint32 { return (*uint32)(unsafe.Pointer(&m.ctl[off])) }
func (m *multicast) slot(i int) int64       { return mcHeaderBytes + int64(i)*mcSlotBytes }

// NewMulticast creates a group of ranks members, this device the first.
func (d *Device) NewMulticast(bytes int64, ranks int) (hal.Multicast, error) {
	if bytes <= 0 || bytes > 1<<40 {
		return nil, fmt.Errorf("host: new multicast group of %d bytes: want 1 byte to 1 TiB: %w", bytes, hal.ErrInvalidArgument)
	}
	if ranks < 1 || ranks > maxMembers {
		return nil, fmt.Errorf("host: new multicast group of %d members: want 1 to %d: %w", ranks, maxMembers, hal.ErrInvalidArgument)
	}
	gran, _ := d.MulticastGranularity()
	size := (bytes + gran - 1) / gran * gran
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, fmt.Errorf("host: new multicast group on a closed device: %w", hal.ErrInvalidUsage)
	}
	d.seq++
	name := fmt.Sprintf("%s%s-mc%d", filePrefix, d.tag, d.seq)
	d.mu.Unlock()
	path := filepath.Join(shmDir(), name)
	ctl, err := mapControl(path, ctlBytes(ranks), true)
	if err != nil {
		return nil, fmt.Errorf("host: new multicast group: %v: %w", err, hal.ErrSystem)
	}
	m := &multicast{dev: d, path: path, ctl: ctl, size: size, ranks: ranks}
	copy(ctl, mcMagic)
	binary.LittleEndian.PutUint64(ctl[mcSize:], uint64(size))
	binary.LittleEndian.PutUint32(ctl[mcRanks:], uint32(ranks))
	m.join(0)
	atomic.StoreUint32(m.word(mcJoined), 1)
	d.mu.Lock()
	d.mcs = append(d.mcs, m)
	d.mu.Unlock()
	return m, nil
}

func (m *multicast) join(i int) {
	m.member = i
	atomic.StoreUint32(m.word(m.slot(i)+mcSlotPID), uint32(os.Getpid()))
	atomic.StoreUint32(m.word(m.slot(i)+mcSlotState), slotJoined)
}

// ImportMulticast joins the group of a handle exported by a device of the
// same job.
func (d *Device) ImportMulticast(h hal.Handle) (hal.Multicast, error) {
	job, name, size, ranks, err := decodeMulticastHandle(h)
	if err != nil {
		return nil, err
	}
	if job != d.job {
		return nil, fmt.Errorf("host: import multicast group: handle belongs to job %q, this device to %q: %w", job, d.job, hal.ErrInvalidUsage)
	}
	path := filepath.Join(shmDir(), name)
	d.mu.Lock()
	closed := d.closed
	for _, m := range d.mcs {
		if m.path == path {
			d.mu.Unlock()
			return nil, fmt.Errorf("host: import multicast group %s: this device is already a member (member %d): %w", name, m.member, hal.ErrInvalidUsage)
		}
	}
	d.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("host: import multicast group on a closed device: %w", hal.ErrInvalidUsage)
	}
	ctl, err := mapControl(path, ctlBytes(ranks), false)
	if os.IsNotExist(err) {
		return nil, fmt.Errorf("host: import multicast group %s: the group no longer exists (its members closed it, or its creator exited): %w", name, hal.ErrInvalidUsage)
	}
	if err != nil {
		return nil, fmt.Errorf("host: import multicast group %s: %v: %w", name, err, hal.ErrInvalidArgument)
	}
	m := &multicast{dev: d, path: path, ctl: ctl, size: size, ranks: ranks}
	if string(ctl[:8]) != mcMagic || int64(binary.LittleEndian.Uint64(ctl[mcSize:])) != size || int(binary.LittleEndian.Uint32(ctl[mcRanks:])) != ranks {
		syscall.Munmap(ctl)
		return nil, fmt.Errorf("host: import multicast group %s: the group's control block does not match the handle: %w", name, hal.ErrInvalidArgument)
	}
	for {
		j := atomic.LoadUint32(m.word(mcJoined))
		switch {
		case atomic.LoadUint32(m.word(mcLeft)) > 0:
			syscall.Munmap(ctl)
			return nil, fmt.Errorf("host: import multicast group %s: the group is closing (a member has left): %w", name, hal.ErrInvalidUsage)
		case int(j) >= ranks:
			syscall.Munmap(ctl)
			return nil, fmt.Errorf("host: import multicast group %s: the group already has its %d members: %w", name, ranks, hal.ErrInvalidUsage)
		}
		if atomic.CompareAndSwapUint32(m.word(mcJoined), j, j+1) {
			m.join(int(j))
			break
		}
	}
	if atomic.LoadUint32(m.word(mcLeft)) > 0 {
		// A member left while this one joined: the group is being freed.
		m.Close()
		return nil, fmt.Errorf("host: import multicast group %s: the group is closing (a member has left): %w", name, hal.ErrInvalidUsage)
	}
	d.mu.Lock()
	d.mcs = append(d.mcs, m)
	d.mu.Unlock()
	return m, nil
}

// mapControl maps (or creates) a control file of n bytes.
func mapControl(path string, n int64, create bool) ([]byte, error) {
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
		if err := f.Truncate(n); err != nil {
			os.Remove(path)
			return nil, err
		}
	} else if st, err := f.Stat(); err != nil {
		return nil, err
	} else if st.Size() != n {
		return nil, fmt.Errorf("the control block is %d bytes, the handle says %d", st.Size(), n)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil && create {
		os.Remove(path)
	}
	return data, err
}

func (m *multicast) Size() int64 { return m.size }

// Handle describes the group for ImportMulticast on the other members.
func (m *multicast) Handle() (hal.Handle, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("host: multicast handle: the membership is closed: %w", hal.ErrInvalidUsage)
	}
	var buf bytes.Buffer
	buf.Write(mcHandleMagic[:])
	binary.Write(&buf, binary.LittleEndian, uint32(mcHandleVersion))
	binary.Write(&buf, binary.LittleEndian, m.size)
	binary.Write(&buf, binary.LittleEndian, uint32(m.ranks))
	for _, s := range []string{m.dev.job, filepath.Base(m.path)} {
		buf.WriteByte(byte(len(s)))
		buf.WriteString(s)
	}
	return buf.Bytes(), nil
}

func decodeMulticastHandle(h hal.Handle) (job, name string, size int64, ranks int, err error) {
	bad := func(why string) error {
		return fmt.Errorf("host: import multicast group: malformed handle (%d bytes): %s: %w", len(h), why, hal.ErrInvalidArgument)
	}
	if len(h) < 8+4+8+4+2 {
		return "", "", 0, 0, bad("too short")
	}
	if !bytes.Equal(h[:8], mcHandleMagic[:]) {
		return "", "", 0, 0, bad("not a host-backend multicast handle")
	}
	le := binary.LittleEndian
	if v := le.Uint32(h[8:]); v != mcHandleVersion {
		return "", "", 0, 0, bad(fmt.Sprintf("version %d, want %d", v, mcHandleVersion))
	}
	size = int64(le.Uint64(h[12:]))
	ranks = int(le.Uint32(h[20:]))
	if size <= 0 || size > 1<<40 || size%int64(os.Getpagesize()) != 0 {
		return "", "", 0, 0, bad(fmt.Sprintf("size %d", size))
	}
	if ranks < 1 || ranks > maxMembers {
		return "", "", 0, 0, bad(fmt.Sprintf("%d members", ranks))
	}
	rest := h[24:]
	var strs [2]string
	for i := range strs {
		if len(rest) < 1 || len(rest) < 1+int(rest[0]) {
			return "", "", 0, 0, bad("truncated")
		}
		strs[i] = string(rest[1 : 1+rest[0]])
		rest = rest[1+rest[0]:]
	}
	if len(rest) != 0 {
		return "", "", 0, 0, bad("trailing bytes")
	}
	if !strings.HasPrefix(strs[1], filePrefix) || strings.ContainsAny(strs[1], "/\x00") {
		return "", "", 0, 0, bad("bad group name")
	}
	return strs[0], strs[1], size, ranks, nil
}

// Bind backs this member's copy with b, once every member has joined.
func (m *multicast) Bind(b hal.Buffer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
		return fmt.Errorf("host: bind multicast group: the membership is closed: %w", hal.ErrInvalidUsage)
	case m.local != nil:
		return fmt.Errorf("host: bind multicast group: member %d has already bound a buffer: %w", m.member, hal.ErrInvalidUsage)
	}
	if j := int(atomic.LoadUint32(m.word(mcJoined))); j < m.ranks {
		return fmt.Errorf("host: bind multicast group: %d of its %d members have joined; bind after every member has: %w", j, m.ranks, hal.ErrInvalidUsage)
	}
	r, err := m.dev.owned(b, "bind multicast group")
	if err != nil {
		return err
	}
	if r.imported {
		return fmt.Errorf("host: bind multicast group: the buffer was imported from a peer; bind local memory: %w", hal.ErrInvalidArgument)
	}
	if r.Size() < m.size {
		return fmt.Errorf("host: bind multicast group: a %d-byte buffer for a %d-byte group: %w", r.Size(), m.size, hal.ErrInvalidArgument)
	}
	name := filepath.Base(r.path)
	if len(name) > mcSlotBytes-mcSlotName {
		return fmt.Errorf("host: bind multicast group: buffer name %q too long: %w", name, hal.ErrInternal)
	}
	resv, err := syscall.Mmap(-1, 0, int(m.size), syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return fmt.Errorf("host: bind multicast group: reserve %d bytes of addresses: %v: %w", m.size, err, hal.ErrSystem)
	}
	s := m.slot(m.member)
	copy(m.ctl[s+mcSlotName:], name)
	atomic.StoreUint32(m.word(s+mcSlotNameLen), uint32(len(name)))
	atomic.StoreUint32(m.word(s+mcSlotState), slotBound)
	atomic.AddUint32(m.word(mcBound), 1)
	m.local, m.resv = r, resv
	return nil
}

// Addr is the reserved range's first byte, 0 before Bind and after Close.
func (m *multicast) Addr() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.resv == nil {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(&m.resv[0])))
}

// mapped returns every member's copy, mapping the other members' on first
// use; every member must have bound.
func (m *multicast) mapped() ([][]byte, error) {
	if m.copies != nil {
		return m.copies, nil
	}
	if bound := int(atomic.LoadUint32(m.word(mcBound))); bound < m.ranks {
		return nil, fmt.Errorf("host: multicast group: %d of its %d members have bound memory; use the group after every member has: %w", bound, m.ranks, hal.ErrInvalidUsage)
	}
	copies := make([][]byte, m.ranks)
	var maps [][]byte
	fail := func(err error) ([][]byte, error) {
		for _, b := range maps {
			syscall.Munmap(b)
		}
		return nil, err
	}
	for i := range copies {
		s := m.slot(i)
		if atomic.LoadUint32(m.word(s+mcSlotState)) != slotBound {
			return fail(fmt.Errorf("host: multicast group: member %d has left or not bound: %w", i, hal.ErrInvalidUsage))
		}
		if i == m.member {
			copies[i] = m.local.data[:m.size]
			continue
		}
		n := atomic.LoadUint32(m.word(s + mcSlotNameLen))
		name := string(m.ctl[s+mcSlotName : s+mcSlotName+int64(n)])
		f, err := os.OpenFile(filepath.Join(shmDir(), name), os.O_RDWR, 0)
		if err != nil {
			return fail(fmt.Errorf("host: multicast group: map the copy of member %d: %v (was it freed before the group was closed?): %w", i, err, hal.ErrInvalidUsage))
		}
		b, err := syscall.Mmap(int(f.Fd()), 0, int(m.size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		f.Close()
		if err != nil {
			return fail(fmt.Errorf("host: multicast group: map the copy of member %d: %v: %w", i, err, hal.ErrSystem))
		}
		maps = append(maps, b)
		copies[i] = b
	}
	m.copies, m.peers = copies, maps
	return copies, nil
}

// Close unbinds and leaves the group; the last member to leave removes its
// control file. Launches that still use the group's multicast view are
// aborted first and Close waits for them as region.Free does (until
// WEFT_TIMEOUT from now), with the same errors.
func (m *multicast) Close() error { return m.close(time.Now().Add(env.Timeout())) }

func (m *multicast) close(deadline time.Time) error {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return fmt.Errorf("host: close multicast group: already closed: %w", hal.ErrInvalidUsage)
	}
	aborted, err := m.inUse.retire(deadline, "close multicast group", "its multicast group was closed while the launch used it")
	if err != nil {
		return err
	}
	if err := m.leave(); err != nil {
		return err
	}
	if aborted > 0 {
		return fmt.Errorf("host: close multicast group: closed while %d launch(es) still used it; they were aborted: %w", aborted, hal.ErrInvalidUsage)
	}
	return nil
}

func (m *multicast) leave() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return fmt.Errorf("host: close multicast group: already closed: %w", hal.ErrInvalidUsage)
	}
	m.closed = true
	for _, b := range m.peers {
		syscall.Munmap(b)
	}
	if m.resv != nil {
		syscall.Munmap(m.resv)
	}
	m.peers, m.copies, m.resv, m.local = nil, nil, nil, nil
	atomic.StoreUint32(m.word(m.slot(m.member)+mcSlotState), slotLeft)
	left := atomic.AddUint32(m.word(mcLeft), 1)
	var err error
	if left >= atomic.LoadUint32(m.word(mcJoined)) {
		if e := os.Remove(m.path); e != nil && !os.IsNotExist(e) {
			err = fmt.Errorf("host: close multicast group: %v: %w", e, hal.ErrSystem)
		}
	}
	if e := syscall.Munmap(m.ctl); e != nil && err == nil {
		err = fmt.Errorf("host: close multicast group: %v: %w", e, hal.ErrSystem)
	}
	m.ctl = nil
	m.mu.Unlock()
	m.dev.forgetMulticast(m)
	return err
}

func (d *Device) forgetMulticast(m *multicast) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, x := range d.mcs {
		if x == m {
			d.mcs = append(d.mcs[:i], d.mcs[i+1:]...)
			return
		}
	}
}

// resolveMulticast returns, for bytes [addr, addr+n) of a multicast
// address of this device, the same bytes of every member's copy, in member
// order: what a load-reduce reads and a store writes. An address no bound
// group covers is an error, as a fault would be on a GPU.
func (d *Device) resolveMulticast(addr uint64, n int64) ([][]byte, error) {
	b, _, err := d.resolveMulticastGroup(addr, n)
	return b, err
}

// resolveMulticastGroup is resolveMulticast, also returning the group,
// whose inUse guard keeps the copies mapped while work uses them.
func (d *Device) resolveMulticastGroup(addr uint64, n int64) ([][]byte, *multicast, error) {
	d.mu.Lock()
	mcs := append([]*multicast(nil), d.mcs...)
	d.mu.Unlock()
	for _, m := range mcs {
		m.mu.Lock()
		if m.resv == nil {
			m.mu.Unlock()
			continue
		}
		base := uint64(uintptr(unsafe.Pointer(&m.resv[0])))
		if addr < base || addr+uint64(n) > base+uint64(m.size) {
			m.mu.Unlock()
			continue
		}
		copies, err := m.mapped()
		m.mu.Unlock()
		if err != nil {
			return nil, nil, err
		}
		off := int64(addr - base)
		out := make([][]byte, len(copies))
		for i, c := range copies {
			out[i] = c[off : off+n : off+n]
		}
		return out, m, nil
	}
	return nil, nil, fmt.Errorf("host: address %#x (+%d bytes) is not a multicast address of device %d: %w", addr, n, d.cfg.Ordinal, hal.ErrInvalidArgument)
}
