package netcore

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/weftccl/weft/hal"
)

// Registry is a NetDevice's table of registrations: the buffers it
// exported (peers put into them and signal words in them, naming them by
// the remote addresses of [EncodeAddr]) and the peers' registrations it
// imported (which its engines check every remote address against).
// It is safe for concurrent use.
type Registry struct {
	name   string // backend, the prefix of error messages
	kind   string // what a foreign address is not: "socket-transport"
	me     hal.HandleOwner
	nranks int
	format HandleFormat
	closed func() bool

	mu      sync.RWMutex
	regs    map[uint32]*registration
	lastReg uint32
	imports map[importKey]*importEntry
	// hosts are the registrations with a host view, by address, for
	// LocalHost's search on every put of a sending engine.
	hosts []*registration
}

type registration struct {
	addr uint64
	size int64
	// host is the buffer's host view when the CPU may write it directly
	// (hal/host memory, host-mapped device memory) and it is 8-byte
	// aligned, so that words in it take atomic stores; nil otherwise.
	host []byte
	// held is read-locked by every receiver writing the host view
	// (ResolveHost's release), so that Unexport, which write-locks it
	// once the registration is out of the table, returns only when no
	// CPU store into the buffer is under way and none can start.
	held sync.RWMutex
}

type importKey struct {
	rank int
	reg  uint32
}

type importEntry struct {
	size  int64
	nonce uint64
	refs  int
}

// NewRegistry returns the table of the NetDevice me (its job hash, rank
// and nonce) in a job of nranks ranks. name prefixes error messages (the
// backend: "socket"); kind names the backend's addresses in the error of
// Resolve ("socket-transport"); format is the backend's handle; closed
// reports whether the NetDevice is
// closed, when Export and Import fail with hal.ErrInvalidUsage.
func NewRegistry(name, kind string, format HandleFormat, me hal.HandleOwner, nranks int, closed func() bool) *Registry {
	return &Registry{name: name, kind: kind, format: format, me: me, nranks: nranks, closed: closed,
		regs: map[uint32]*registration{}, imports: map[importKey]*importEntry{}}
}

// Export registers b and returns its handle (format's, naming this
// NetDevice, a registration id from 1 to MaxReg and the size). Errors wrap hal.ErrInvalidArgument (nil or empty buffer, larger than
// MaxBytes, MaxReg registrations already) or hal.ErrInvalidUsage (closed).
func (r *Registry) Export(b hal.Buffer) (hal.Handle, error) {
	if b == nil || b.Size() <= 0 || b.Size() > MaxBytes {
		size := int64(0)
		if b != nil {
			size = b.Size()
		}
		return nil, fmt.Errorf("%s: rank %d: export a buffer of %d bytes: want 1 byte to 1 TiB: %w", r.name, r.me.Rank, size, hal.ErrInvalidArgument)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed() {
		return nil, fmt.Errorf("%s: rank %d: export on a closed NetDevice: %w", r.name, r.me.Rank, hal.ErrInvalidUsage)
	}
	if r.lastReg == MaxReg {
		return nil, fmt.Errorf("%s: rank %d: export: %d registrations, the most one NetDevice holds: %w", r.name, r.me.Rank, MaxReg, hal.ErrInvalidArgument)
	}
	r.lastReg++
	x := &registration{addr: b.Addr(), size: b.Size()}
	if h := b.Host(); int64(len(h)) == b.Size() && uintptr(unsafe.Pointer(&h[0]))%8 == 0 {
		x.host = h
		i, _ := slices.BinarySearchFunc(r.hosts, x.addr, func(y *registration, a uint64) int { return cmp.Compare(y.addr, a) })
		r.hosts = slices.Insert(r.hosts, i, x)
	}
	r.regs[r.lastReg] = x
	return r.format.Encode(Handle{Job: r.me.Job, Nonce: r.me.Nonce, Rank: r.me.Rank, Reg: r.lastReg, Size: b.Size()}), nil
}

// Import decodes a peer's handle h (the registration's owner, id and
// size), checks it with [hal.CheckImport], records the import and returns the buffer whose Addr is
// EncodeAddr(reg, 0) (Host is nil). Importing the same registration twice
// counts references; each buffer's Free drops one. Errors wrap
// hal.ErrInvalidUsage (another job, another incarnation of this rank, a
// registration already imported from another incarnation or with another
// size, closed) or hal.ErrInvalidArgument (a malformed handle, a rank
// outside the job).
func (r *Registry) Import(raw hal.Handle) (hal.Buffer, error) {
	x, err := r.format.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: rank %d: import: %v: %w", r.name, r.me.Rank, err, hal.ErrInvalidArgument)
	}
	owner, reg, size := x.Owner(), x.Reg, x.Size
	if err := hal.CheckImportAs(r.name, owner, r.me, r.nranks); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed() {
		return nil, fmt.Errorf("%s: rank %d: import on a closed NetDevice: %w", r.name, r.me.Rank, hal.ErrInvalidUsage)
	}
	k := importKey{owner.Rank, reg}
	if e := r.imports[k]; e != nil {
		if e.nonce != owner.Nonce || e.size != size {
			return nil, fmt.Errorf("%s: rank %d: import: registration %d of rank %d is already imported from another incarnation or with another size: %w", r.name, r.me.Rank, reg, owner.Rank, hal.ErrInvalidUsage)
		}
		e.refs++
	} else {
		r.imports[k] = &importEntry{size: size, nonce: owner.Nonce, refs: 1}
	}
	return &remoteBuffer{r: r, key: k, size: size}, nil
}

// remoteBuffer is an imported registration.
type remoteBuffer struct {
	r     *Registry
	key   importKey
	size  int64
	freed atomic.Bool
}

func (b *remoteBuffer) Addr() uint64 { return EncodeAddr(b.key.reg, 0) }
func (b *remoteBuffer) Size() int64  { return b.size }
func (b *remoteBuffer) Host() []byte { return nil }
func (b *remoteBuffer) String() string {
	return fmt.Sprintf("registration %d of rank %d", b.key.reg, b.key.rank)
}

// Free forgets the import; engines refuse its addresses afterwards.
func (b *remoteBuffer) Free() error {
	if b.freed.Swap(true) {
		return fmt.Errorf("%s: free %v: already freed: %w", b.r.name, b, hal.ErrInvalidUsage)
	}
	b.r.mu.Lock()
	defer b.r.mu.Unlock()
	if e := b.r.imports[b.key]; e != nil {
		if e.refs--; e.refs == 0 {
			delete(b.r.imports, b.key)
		}
	}
	return nil
}

// CheckRemote checks that [a, a+n) lies in a registration imported from
// rank peer of incarnation nonce. what names the address in the error
// ("put destination"), which wraps hal.ErrInvalidArgument (not a remote
// address, not imported from peer, out of bounds) or hal.ErrInvalidUsage
// (an earlier incarnation's registration).
func (r *Registry) CheckRemote(peer int, nonce uint64, a, n uint64, what string) error {
	reg, off, ok := DecodeAddr(a)
	if !ok {
		return fmt.Errorf("%s %#x is not the address of a buffer imported with ImportPort: %w", what, a, hal.ErrInvalidArgument)
	}
	r.mu.RLock()
	e := r.imports[importKey{peer, reg}]
	r.mu.RUnlock()
	switch {
	case e == nil:
		return fmt.Errorf("%s %#x names registration %d, which is not imported from rank %d (freed, or another rank's): %w", what, a, reg, peer, hal.ErrInvalidArgument)
	case e.nonce != nonce:
		return fmt.Errorf("%s %#x names registration %d of an earlier incarnation of rank %d: %w", what, a, reg, peer, hal.ErrInvalidUsage)
	case off+n > uint64(e.size) || off+n < off:
		return fmt.Errorf("%s %#x: bytes [%d, %d) beyond registration %d of rank %d (%d bytes): %w", what, a, off, off+n, reg, peer, e.size, hal.ErrInvalidArgument)
	}
	return nil
}

// CheckPut checks an engine's Put to rank peer (incarnation nonce): a
// non-negative size, and a destination range inside a registration
// imported from peer. desc prefixes the error ("socket: rank 0: engine to
// rank 1"), which wraps hal.ErrInvalidArgument or CheckRemote's.
func (r *Registry) CheckPut(desc string, peer int, nonce, dst uint64, bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("%s: put of %d bytes: %w", desc, bytes, hal.ErrInvalidArgument)
	}
	if bytes > 0 {
		if err := r.CheckRemote(peer, nonce, dst, uint64(bytes), "put destination"); err != nil {
			return fmt.Errorf("%s: %w", desc, err)
		}
	}
	return nil
}

// CheckSignal checks an engine's Signal to rank peer (incarnation
// nonce): the semaphore word, and the count word unless cnt is 0, lie in
// registrations imported from peer. desc prefixes the error.
func (r *Registry) CheckSignal(desc string, peer int, nonce, sem, cnt uint64) error {
	if err := r.CheckRemote(peer, nonce, sem, 8, "semaphore"); err != nil {
		return fmt.Errorf("%s: signal: %w", desc, err)
	}
	if cnt != 0 {
		if err := r.CheckRemote(peer, nonce, cnt, 8, "count word"); err != nil {
			return fmt.Errorf("%s: signal: %w", desc, err)
		}
	}
	return nil
}

// CheckCopy checks an engine's Copy: a non-negative size between two
// local addresses (neither carries AddrTag). desc prefixes the error,
// which wraps hal.ErrInvalidArgument.
func CheckCopy(desc string, dst, src uint64, bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("%s: copy of %d bytes: %w", desc, bytes, hal.ErrInvalidArgument)
	}
	if dst&AddrTag != 0 || src&AddrTag != 0 {
		return fmt.Errorf("%s: copy %#x -> %#x: a copy takes local addresses, not remote ones: %w", desc, src, dst, hal.ErrInvalidArgument)
	}
	return nil
}

// Resolve turns a remote address naming one of this NetDevice's
// registrations into the device address of [a, a+n), whose start must be
// align-byte aligned (align 0 or 1: any). The error (no sentinel: the
// caller wraps it, a peer's frame or a local engine's argument) says what
// is wrong.
func (r *Registry) Resolve(a, n, align uint64) (uint64, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	x, d, err := r.lookup(a, n, align)
	if x == nil {
		return 0, err
	}
	return d, nil
}

// lookup finds the registration of [a, a+n) and its device address;
// under r.mu. A nil registration comes with the error.
func (r *Registry) lookup(a, n, align uint64) (*registration, uint64, error) {
	reg, off, ok := DecodeAddr(a)
	if !ok {
		return nil, 0, fmt.Errorf("address %#x is not a %s address", a, r.kind)
	}
	x := r.regs[reg]
	if x == nil {
		return nil, 0, fmt.Errorf("unknown registration id %d (never exported, or unexported)", reg)
	}
	if off+n > uint64(x.size) || off+n < off {
		return nil, 0, fmt.Errorf("bytes [%d, %d) beyond registration %d of %d bytes", off, off+n, reg, x.size)
	}
	d := x.addr + off
	if align > 1 && d%align != 0 {
		return nil, 0, fmt.Errorf("word at offset %d of registration %d is not %d-byte aligned", off, reg, align)
	}
	return x, d, nil
}

// ResolveHost is Resolve that also returns the host view of [a, a+n) when
// the registration's buffer has one (ExportPort of hal/host memory or of
// host-mapped device memory), for a receiver that stores with the CPU
// instead of the device's engine; nil otherwise. Whether a registration
// has a host view is fixed at Export, so every word of it is written the
// same way. With a host view the registration is held until the Hold is
// released (Unexport waits for it; release it as soon as the stores are
// done, and do not resolve again before); without one the Hold is empty.
// The error is Resolve's.
func (r *Registry) ResolveHost(a, n, align uint64) (dev uint64, host []byte, hold Hold, err error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	x, d, err := r.lookup(a, n, align)
	if x == nil {
		return 0, nil, Hold{}, err
	}
	if x.host == nil {
		return d, nil, Hold{}, nil
	}
	x.held.RLock()
	off := d - x.addr
	return d, x.host[off : off+n : off+n], Hold{x}, nil
}

// Hold is a registration held against Unexport while the CPU reads or
// writes its host view (ResolveHost, ResolveSignal, LocalHost); the zero
// Hold holds nothing.
type Hold struct{ x *registration }

// Release ends the hold (once).
func (h Hold) Release() {
	if h.x != nil {
		h.x.held.RUnlock()
	}
}

// SignalWords is a peer's signal resolved (ResolveSignal): the device
// addresses of the semaphore and of the count word (Cnt 0: none), and
// their host views where the CPU may store them (ResolveHost). Release
// ends the hold on host-visible words (a no-op otherwise).
type SignalWords struct {
	Sem, Cnt         uint64
	SemHost, CntHost []byte
	sem, cnt         Hold
}

// Release lets Unexport of the words' registrations proceed; call it once
// the words are stored.
func (w SignalWords) Release() {
	w.sem.Release()
	w.cnt.Release()
}

// ResolveSignal resolves a peer's signal: the semaphore word at sem and,
// unless cnt is 0 (no count word), the count word at cnt, each 8 bytes
// and 8-byte aligned in one of this NetDevice's registrations, and both
// host-visible or neither: a receiver stores the words of a host-visible
// window with the CPU and the others with the device's engine, and each
// word has one writer. Host-visible words are held as by ResolveHost
// until Release. The error (no sentinel) is Resolve's, or names the mix.
func (r *Registry) ResolveSignal(sem, cnt uint64) (SignalWords, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var w SignalWords
	xs, ds, err := r.lookup(sem, 8, 8)
	if xs == nil {
		return w, err
	}
	w.Sem = ds
	var xc *registration
	if cnt != 0 {
		if xc, w.Cnt, err = r.lookup(cnt, 8, 8); xc == nil {
			return SignalWords{}, err
		}
		if (xs.host == nil) != (xc.host == nil) {
			return SignalWords{}, fmt.Errorf("semaphore %#x and count word %#x lie in a host-visible and a device-only window", sem, cnt)
		}
	}
	if xs.host == nil {
		return w, nil
	}
	// Holding a registration twice is fine: no Unexport can be waiting
	// for it while r.mu is held (it takes the registration out first).
	xs.held.RLock()
	w.sem = Hold{xs}
	if xc != nil {
		xc.held.RLock()
		w.cnt = Hold{xc}
	}
	o := ds - xs.addr
	w.SemHost = xs.host[o : o+8 : o+8]
	if xc != nil {
		o = w.Cnt - xc.addr
		w.CntHost = xc.host[o : o+8 : o+8]
	}
	return w, nil
}

// LocalHost returns the host view of [addr, addr+n), an address range of
// this device, when it lies in one of this NetDevice's registrations that
// has one (a plan's scratch in host memory), held as by ResolveHost; nil
// and the empty Hold otherwise. A sending engine reads such a source with
// the CPU instead of staging it with the device's engine. A binary search
// of the host-visible registrations: it runs on every put.
func (r *Registry) LocalHost(addr, n uint64) ([]byte, Hold) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	// The last registration starting at or below addr (exports do not
	// overlap, except the same buffer exported twice, which holds alike).
	i, found := slices.BinarySearchFunc(r.hosts, addr, func(y *registration, a uint64) int { return cmp.Compare(y.addr, a) })
	if !found {
		i--
	}
	if i < 0 || addr+n < addr {
		return nil, Hold{}
	}
	x := r.hosts[i]
	if addr+n > x.addr+uint64(x.size) {
		return nil, Hold{}
	}
	x.held.RLock()
	off := addr - x.addr
	return x.host[off : off+n : off+n], Hold{x}
}

// Unexport removes the registration of b (ExportPort's buffer, matched by
// address and size), after which peers' frames naming it are refused as
// naming an unknown registration, and returns once no receiver is
// storing into it with the CPU (a put read from a socket into it is
// bounded by the connection's read deadline). The owner calls it before
// freeing b. Errors wrap hal.ErrInvalidArgument when b is not exported
// here.
func (r *Registry) Unexport(b hal.Buffer) error {
	if b == nil {
		return fmt.Errorf("%s: rank %d: unexport a nil buffer: %w", r.name, r.me.Rank, hal.ErrInvalidArgument)
	}
	var gone []*registration
	r.mu.Lock()
	for id, x := range r.regs {
		if x.addr == b.Addr() && x.size == b.Size() {
			gone = append(gone, x)
			delete(r.regs, id)
			r.hosts = slices.DeleteFunc(r.hosts, func(y *registration) bool { return y == x })
		}
	}
	r.mu.Unlock()
	if len(gone) == 0 {
		return fmt.Errorf("%s: rank %d: unexport a buffer of %d bytes at %#x that is not exported: %w", r.name, r.me.Rank, b.Size(), b.Addr(), hal.ErrInvalidArgument)
	}
	for _, x := range gone {
		x.held.Lock()
		x.held.Unlock() //nolint:staticcheck // an empty critical section: waiting for the holders is the point
	}
	return nil
}

// Clear forgets every registration and import (at Close).
func (r *Registry) Clear() {
	r.mu.Lock()
	clear(r.regs)
	clear(r.imports)
	r.hosts = nil
	r.mu.Unlock()
}

// OwnBuffer is a NetDevice's own registration imported by itself: its
// Addr is the device address of the exported buffer (size bytes), which
// the device's own engine takes; Free does nothing (the export owns the
// memory).
func OwnBuffer(addr uint64, size int64) hal.Buffer { return &ownBuffer{addr: addr, size: size} }

type ownBuffer struct {
	addr uint64
	size int64
}

func (b *ownBuffer) Addr() uint64 { return b.addr }
func (b *ownBuffer) Size() int64  { return b.size }
func (b *ownBuffer) Host() []byte { return nil }
func (b *ownBuffer) Free() error  { return nil }
