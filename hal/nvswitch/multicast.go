package nvswitch

import (
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
)

// policy returns the error of a multicast call made while the host policy
// keeps NVLink SHARP off (architecture.md §8), or nil.
func policy(op string, d *Device) error {
	if Enabled() {
		return nil
	}
	return fmt.Errorf("%s on %s: %s: %w", op, d, DisabledReason, hal.ErrNotSupported)
}

// MulticastGranularity is the recommended multicast granularity
// (cuMulticastGetGranularity, CU_MULTICAST_GRANULARITY_RECOMMENDED, for a
// group of every GPU visible to this process), and at least the allocation
// granularity: a group's size, and the size and offset of memory bound to
// it, are multiples of it. Errors wrap hal.ErrNotSupported (NVLink SHARP
// disabled) or hal.ErrDevice.
func (d *Device) MulticastGranularity() (int64, error) {
	if err := policy("multicast granularity", d); err != nil {
		return 0, err
	}
	d.mcGranOnce.Do(func() {
		n, err := cuda.DeviceCount()
		if err != nil {
			d.mcGranErr = err
			return
		}
		g, err := d.ctx.MulticastGetGranularity(max(n, 1), d.allocGran, cuda.HandleTypePosixFD, cuda.MulticastGranularityRecommended)
		if err != nil {
			d.mcGranErr = fmt.Errorf("multicast granularity of %s: %w", d, err)
			return
		}
		d.mcGran = max(g, d.allocGran)
	})
	return d.mcGran, d.mcGranErr
}

// Multicast is this GPU's membership of a multicast group: a multicast
// object of cuMulticastCreate that this GPU has joined
// (cuMulticastAddDevice), and once bound, the group mapped at Addr.
type Multicast struct {
	dev     *Device
	h       cuda.MemGenericAllocationHandle
	handle  hal.Handle // as the creator exported it
	size    int64
	gran    int64
	ranks   int
	creator bool
	fd      int // the creator's exported descriptor, open until Close; -1 in importers
	tag     int // its tag (cuda.NewFDTag)

	mu     sync.Mutex
	bound  bool
	va     cuda.DevicePtr
	closed bool
}

var _ hal.Multicast = (*Multicast)(nil)

// NewMulticast creates a multicast group of ranks GPUs, bytes long rounded
// up to the granularity (the larger of MulticastGranularity and the
// recommended granularity of a group of ranks), and adds this GPU to it.
// The group's file descriptor stays open in this process until Close, for
// the other members' ImportMulticast. Errors wrap hal.ErrInvalidArgument
// (bytes ≤ 0, ranks < 1), hal.ErrNotSupported (WEFT_NVLS is not 1, or the
// driver refuses multicast) or hal.ErrDevice.
func (d *Device) NewMulticast(bytes int64, ranks int) (hal.Multicast, error) {
	if err := policy("new multicast group", d); err != nil {
		return nil, err
	}
	if bytes <= 0 || bytes > maxExtent || ranks < 1 || ranks > 1<<16 {
		return nil, fmt.Errorf("new multicast group on %s: %d bytes, %d ranks: %w", d, bytes, ranks, hal.ErrInvalidArgument)
	}
	gran, err := d.MulticastGranularity()
	if err != nil {
		return nil, err
	}
	g, err := d.ctx.MulticastGetGranularity(ranks, bytes, cuda.HandleTypePosixFD, cuda.MulticastGranularityRecommended)
	if err != nil {
		return nil, fmt.Errorf("new multicast group of %d ranks on %s: %w", ranks, d, err)
	}
	gran = max(gran, g)
	size := roundUp(bytes, gran)
	h, err := d.ctx.MulticastCreate(ranks, size, cuda.HandleTypePosixFD)
	if err != nil {
		return nil, fmt.Errorf("new multicast group of %d ranks, %d bytes on %s: %w", ranks, size, d, err)
	}
	m := &Multicast{dev: d, h: h, size: size, gran: gran, ranks: ranks, creator: true, fd: -1, tag: -1}
	if err := d.ctx.MulticastAddDevice(h, d.dev); err != nil {
		d.ctx.MemRelease(h)
		return nil, fmt.Errorf("add %s to its new multicast group: %w", d, err)
	}
	var tagID uint64
	if m.tag, tagID, err = cuda.NewFDTag(); err != nil {
		d.ctx.MemRelease(h)
		return nil, fmt.Errorf("export multicast group of %s: %w", d, err)
	}
	if m.fd, err = d.ctx.MemExportToFD(h); err != nil {
		syscall.Close(m.tag)
		d.ctx.MemRelease(h)
		return nil, fmt.Errorf("export multicast group of %s: %w", d, err)
	}
	hd := d.origin(kindMulticast)
	hd.fd, hd.tagFD, hd.tagID = int32(m.fd), int32(m.tag), tagID
	hd.ranks, hd.id, hd.extent, hd.offset = uint32(ranks), randomID(), uint64(size), uint64(gran)
	m.handle = hd.encode()
	return m, nil
}

// ImportMulticast joins the group whose Handle another member exported (in
// another process of the job on this host, or in this one): it fetches the
// creator's descriptor (pidfd_getfd), imports the multicast object and
// adds this GPU. A malformed handle, or one of another backend, is
// hal.ErrInvalidArgument; a group of another host, job or PID namespace,
// or one closed since, hal.ErrInvalidUsage; a group the driver refuses to
// add this GPU to (full, or this GPU a member already) wraps the driver's
// error and hal.ErrInvalidUsage.
func (d *Device) ImportMulticast(hh hal.Handle) (hal.Multicast, error) {
	if err := policy("import multicast group", d); err != nil {
		return nil, err
	}
	h, err := decodeHandle(hh, kindMulticast)
	if err != nil {
		return nil, fmt.Errorf("import multicast group on %s: %w", d, err)
	}
	if err := d.checkOrigin("import multicast group", h); err != nil {
		return nil, err
	}
	if int64(h.extent)%d.allocGran != 0 || int64(h.offset)%d.allocGran != 0 {
		return nil, fmt.Errorf("import multicast group on %s: %d bytes, granularity %d, not multiples of this GPU's granularity %d: %w",
			d, h.extent, h.offset, d.allocGran, hal.ErrInvalidArgument)
	}
	mh, err := d.importHandle("import multicast group", h)
	if err != nil {
		return nil, err
	}
	if err := d.ctx.MulticastAddDevice(mh, d.dev); err != nil {
		d.ctx.MemRelease(mh)
		return nil, fmt.Errorf("join the multicast group of %d ranks of pid %d on %s (full, or this GPU a member already?): %w (%w)",
			h.ranks, h.pid, d, hal.ErrInvalidUsage, err)
	}
	return &Multicast{dev: d, h: mh, handle: append(hal.Handle(nil), hh...), size: int64(h.extent), gran: int64(h.offset), ranks: int(h.ranks), fd: -1, tag: -1}, nil
}

// Handle is the group's exportable description: the creator's descriptor
// and pid, host, job and PID-namespace identities, size, granularity and
// member count (HandleSize bytes). Every member returns the creator's.
func (m *Multicast) Handle() (hal.Handle, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("multicast group handle on %s: group left: %w", m.dev, hal.ErrInvalidUsage)
	}
	return append(hal.Handle(nil), m.handle...), nil
}

// Size is the group's length in bytes.
func (m *Multicast) Size() int64 { return m.size }

// Bind binds the first Size bytes of b — memory of this device's Alloc (a
// cuMemCreate allocation), at an offset in its allocation that is a
// multiple of the granularity — to the group (cuMulticastBindMem), then
// maps the group at Addr (cuMemAddressReserve, cuMemMap, cuMemSetAccess).
// Every member must have joined first. Errors wrap hal.ErrInvalidUsage (a
// second Bind, a left group; a group the driver finds incomplete),
// hal.ErrInvalidArgument (a buffer of another device, not of Alloc,
// misaligned or smaller than Size) or hal.ErrDevice.
func (m *Multicast) Bind(b hal.Buffer) error {
	d := m.dev
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
		return fmt.Errorf("bind on %s: multicast group left: %w", d, hal.ErrInvalidUsage)
	case m.bound:
		return fmt.Errorf("bind on %s: the group is bound already: %w", d, hal.ErrInvalidUsage)
	}
	nb, err := d.Own("bind", b)
	if err != nil {
		return err
	}
	a, off := d.allocationOf(nb)
	switch {
	case a == nil:
		return fmt.Errorf("bind %s: a multicast group binds memory of Alloc on %s (a cuMemCreate allocation): %w", nb, d, hal.ErrInvalidArgument)
	case off%m.gran != 0:
		return fmt.Errorf("bind %s: offset %d in its allocation is not a multiple of the multicast granularity %d: %w", nb, off, m.gran, hal.ErrInvalidArgument)
	case nb.Size() < m.size:
		return fmt.Errorf("bind %s: %d bytes, the group has %d (allocate Multicast.Size bytes): %w", nb, nb.Size(), m.size, hal.ErrInvalidArgument)
	case a.size-off < m.size:
		return fmt.Errorf("bind %s: its allocation has %d bytes from offset %d, the group %d: %w", nb, a.size-off, off, m.size, hal.ErrInvalidArgument)
	}
	if err := d.ctx.MulticastBindMem(m.h, 0, a.h, off, m.size); err != nil {
		if cuda.IsResult(err, cuda.ErrorIllegalState) {
			err = fmt.Errorf("%w (%w)", hal.ErrInvalidUsage, err)
		}
		return fmt.Errorf("bind %s to the multicast group of %d ranks (have all joined?): %w", nb, m.ranks, err)
	}
	va, err := d.mapHandle(m.h, m.size, m.gran)
	if err != nil {
		d.ctx.MulticastUnbind(m.h, d.dev, 0, m.size)
		return fmt.Errorf("map the multicast group on %s: %w", d, err)
	}
	m.bound, m.va = true, va
	return nil
}

// Addr is the group's multicast address on this GPU, 0 before Bind. Only
// the multimem primitives of SwitchHeader may access it.
func (m *Multicast) Addr() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return uint64(m.va)
}

// Close unbinds this GPU's memory (cuMulticastUnbind), unmaps the group,
// releases this process's reference to the multicast object (the driver
// frees it when the last member has) and, in the creator, closes the
// exported descriptor. Errors name the failing call; a second Close is
// hal.ErrInvalidUsage.
func (m *Multicast) Close() error {
	d := m.dev
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("leave multicast group on %s: already left: %w", d, hal.ErrInvalidUsage)
	}
	m.closed = true
	var errs []error
	if m.bound {
		errs = append(errs, d.ctx.MulticastUnbind(m.h, d.dev, 0, m.size), d.ctx.MemUnmap(m.va, m.size), d.ctx.MemAddressFree(m.va, m.size))
		m.bound, m.va = false, 0
	}
	errs = append(errs, d.ctx.MemRelease(m.h))
	if m.fd >= 0 {
		if err := errors.Join(syscall.Close(m.fd), syscall.Close(m.tag)); err != nil {
			errs = append(errs, fmt.Errorf("close the group's descriptors %d and %d: %w", m.fd, m.tag, err))
		}
		m.fd, m.tag = -1, -1
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("leave multicast group on %s: %w", d, err)
	}
	return nil
}
