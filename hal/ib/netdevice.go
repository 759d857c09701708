package ib

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/netcore"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/ibverbs"
)

// DmaBufExporter is implemented by a hal.Device whose memory an RDMA NIC
// can reach directly (GPUDirect RDMA): it returns a dma-buf file descriptor
// covering buffer b (cuMemGetHandleForAddressRange with
// CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD on CUDA; hsa_amd_portable_export_dmabuf
// on ROCm) and b's offset within it. ExportPort registers the range with
// ibv_reg_dmabuf_mr at b.Addr() as the NIC-side address and closes fd
// afterwards (the registration keeps its own reference). An error wrapping
// hal.ErrNotSupported makes ExportPort fall back to host staging.
type DmaBufExporter interface {
	DmaBuf(b hal.Buffer) (fd int, offset uint64, err error)
}

// NetDevice is one rank's side of the RDMA network: a protection domain on
// the chosen port, one RC queue pair and completion queue per peer rank
// (created at Open so that Address carries every QP number), the
// registrations made by ExportPort and the engines.
type NetDevice struct {
	dev   hal.Device
	pm    hal.PortMapped
	cfg   hal.NetConfig
	opts  Options
	job   uint64
	nonce uint64
	log   *slog.Logger

	lib      *ibverbs.Lib
	ctx      *ibverbs.Context
	pd       *ibverbs.PD
	port     int
	attr     ibverbs.PortAttr
	gid      ibverbs.GID
	gidIndex int
	chunk    int64
	conns    []*conn // by rank; nil for this rank
	addr     []byte

	mu      sync.RWMutex
	closed  bool
	regs    map[uint32]*registration
	lastReg uint32
	imports map[int][]*imported // by rank
	engines map[*engine]struct{}
	// unexporting holds the registrations UnexportPort took out of regs
	// and has not deregistered yet (it waits for work requests reading
	// them, or gave up waiting): whichever of UnexportPort and Close
	// takes one out of here deregisters it, so it is deregistered once.
	unexporting map[*registration]struct{}
}

var _ hal.NetDevice = (*NetDevice)(nil)

type registration struct {
	id      uint32
	devAddr uint64 // the buffer's device address
	size    int64
	iova    uint64 // the address the NIC knows the memory by
	mr      *ibverbs.MR
	staged  bool
}

// Open opens the first active port that opts select for dev and creates a
// queue pair per peer rank in INIT. Errors wrap hal.ErrNotSupported (no
// usable port; a device without a port-mapped engine), hal.ErrInvalidArgument
// (bad options or rank) or hal.ErrSystem (a verbs call failed).
func Open(dev hal.Device, cfg hal.NetConfig, opts Options) (*NetDevice, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.NRanks < 1 || cfg.NRanks > maxRanks || cfg.Rank < 0 || cfg.Rank >= cfg.NRanks {
		return nil, fmt.Errorf("ib: rank %d of %d ranks: %w", cfg.Rank, cfg.NRanks, hal.ErrInvalidArgument)
	}
	if dev == nil {
		return nil, fmt.Errorf("ib: open rank %d: nil device: %w", cfg.Rank, hal.ErrInvalidArgument)
	}
	pm, ok := dev.(hal.PortMapped)
	if !ok || dev.Link(dev.Endpoint()).Caps&hal.CapPortMapped == 0 {
		return nil, fmt.Errorf("ib: open rank %d: %s device %d has no port-mapped engine for local copies: %w",
			cfg.Rank, dev.Info().Backend, dev.Info().Ordinal, hal.ErrNotSupported)
	}
	lib, active, why := findPorts(opts)
	if len(active) == 0 {
		return nil, fmt.Errorf("ib: open rank %d: %s: %w", cfg.Rank, why, hal.ErrNotSupported)
	}
	c := active[0]
	nd := &NetDevice{
		dev: dev, pm: pm, cfg: cfg, opts: opts, job: jobHash(cfg.JobID), nonce: rand.Uint64() | 1,
		lib: lib, port: c.port, attr: c.attr, conns: make([]*conn, cfg.NRanks),
		regs: map[uint32]*registration{}, imports: map[int][]*imported{}, engines: map[*engine]struct{}{},
		unexporting: map[*registration]struct{}{}, log: env.Logger("NET").With("rank", cfg.Rank, "net", Name),
	}
	if err := nd.open(c.dev); err != nil {
		nd.release()
		return nil, err
	}
	qpns := make([]uint32, cfg.NRanks)
	for r, cn := range nd.conns {
		if cn != nil {
			qpns[r] = cn.qp.Num()
		}
	}
	nd.addr = encodeAddress(address{link: c.attr.LinkLayer, mtu: c.attr.ActiveMTU, gidIndex: nd.gidIndex, job: nd.job,
		nonce: nd.nonce, rank: cfg.Rank, nranks: cfg.NRanks, lid: c.attr.LID, gid: nd.gid, qpns: qpns})
	nd.log.Info("ib transport open", "device", c.dev, "port", c.port, "link", linkName(c.attr.LinkLayer),
		"lid", c.attr.LID, "gid", nd.gid.String(), "chunk", nd.chunk)
	return nd, nil
}

func (nd *NetDevice) open(name string) error {
	var err error
	wrap := func(what string, err error) error {
		return fmt.Errorf("ib: open rank %d: %s: %w", nd.cfg.Rank, what, err)
	}
	if nd.ctx, err = nd.lib.OpenDevice(name); err != nil {
		return wrap("open device", err)
	}
	if nd.attr.LinkLayer == ibverbs.LinkEthernet {
		if nd.gidIndex, nd.gid, err = chooseGID(nd.ctx, nd.port, nd.attr, nd.opts.GIDIndex); err != nil {
			return wrap("choose a GID", err)
		}
	} else if nd.attr.GIDTblLen > 0 {
		nd.gid, _ = nd.ctx.QueryGID(nd.port, 0)
	}
	nd.chunk = nd.opts.Chunk
	if m := int64(nd.attr.MaxMsgSz); m > 0 && m < nd.chunk {
		nd.chunk = m
	}
	if nd.pd, err = nd.ctx.AllocPD(); err != nil {
		return wrap("protection domain", err)
	}
	for r := range nd.conns {
		if r == nd.cfg.Rank {
			continue
		}
		c := &conn{nd: nd, peer: r, depth: nd.opts.QueueDepth, engines: map[uint16]*engine{}, wcs: make([]ibverbs.WC, 32)}
		if c.cq, err = nd.ctx.CreateCQ(c.depth); err != nil {
			return wrap(fmt.Sprintf("completion queue for peer rank %d", r), err)
		}
		nd.conns[r] = c
		if c.qp, err = nd.pd.CreateRCQP(c.cq, c.cq, c.depth, 1); err != nil {
			return wrap(fmt.Sprintf("queue pair for peer rank %d", r), err)
		}
		if err = c.qp.Init(nd.port, ibverbs.AccessRemoteWrite|ibverbs.AccessRemoteAtomic); err != nil {
			return wrap(fmt.Sprintf("queue pair for peer rank %d", r), err)
		}
	}
	return nil
}

// chooseGID returns want, or with want -1 the first IPv4-mapped GID of the
// port's table (RoCEv2 over IPv4, what NCCL picks by default), else 0.
func chooseGID(ctx *ibverbs.Context, port int, attr ibverbs.PortAttr, want int) (int, ibverbs.GID, error) {
	if want >= 0 {
		g, err := ctx.QueryGID(port, want)
		if err == nil && g.IsZero() {
			err = fmt.Errorf("GID index %d of %s:%d is empty (WEFT_IB_GID_INDEX): %w", want, ctx.Name(), port, hal.ErrInvalidArgument)
		}
		return want, g, err
	}
	var first ibverbs.GID
	for i := 0; i < attr.GIDTblLen && i < 256; i++ {
		g, err := ctx.QueryGID(port, i)
		if err != nil || g.IsZero() {
			continue
		}
		if g.IPv4Mapped() {
			return i, g, nil
		}
		if i == 0 {
			first = g
		}
	}
	if first.IsZero() {
		return 0, first, fmt.Errorf("%s:%d has no usable GID: %w", ctx.Name(), port, hal.ErrNotSupported)
	}
	return 0, first, nil
}

// Address is this rank's connection information (see wire.go): link
// layer, LID, GID, and the queue-pair number this rank keeps for each peer.
func (nd *NetDevice) Address() []byte { return append([]byte(nil), nd.addr...) }

// Rank is the rank the NetDevice was opened for.
func (nd *NetDevice) Rank() int { return nd.cfg.Rank }

// Device names the RDMA device and port in use ("mlx5_0:1").
func (nd *NetDevice) Device() string { return fmt.Sprintf("%s:%d", nd.ctx.Name(), nd.port) }

// ExportPort registers b as a destination of peers' engines. Host memory
// (b.Host() non-nil) is registered directly; device memory through dma-buf
// when the device is a DmaBufExporter. The handle (56 bytes) carries the
// rkey, the remote address, the size and the job. Errors wrap
// hal.ErrInvalidArgument (nil or empty buffer), hal.ErrInvalidUsage (a
// closed NetDevice), hal.ErrNotSupported (memory the NIC cannot reach:
// host staging of received data is not implemented) or hal.ErrSystem
// (ibv_reg_mr failed).
func (nd *NetDevice) ExportPort(b hal.Buffer) (hal.Handle, error) {
	if b == nil || b.Size() <= 0 || b.Size() > 1<<40 {
		return nil, fmt.Errorf("ib: rank %d: export of an empty or oversized buffer: %w", nd.cfg.Rank, hal.ErrInvalidArgument)
	}
	const access = ibverbs.AccessLocalWrite | ibverbs.AccessRemoteWrite | ibverbs.AccessRemoteAtomic
	reg := &registration{devAddr: b.Addr(), size: b.Size()}
	var err error
	switch host, exp := b.Host(), dmaBufOf(nd.dev); {
	case nd.opts.Staging == StagingAlways:
		return nil, fmt.Errorf("ib: rank %d: export with StagingAlways: host staging of received data is not implemented: %w", nd.cfg.Rank, hal.ErrNotSupported)
	case host != nil:
		reg.iova = uint64(uintptr(unsafe.Pointer(&host[0])))
		reg.mr, err = nd.pd.RegMR(reg.iova, uint64(reg.size), access)
	case exp != nil:
		var fd int
		var off uint64
		if fd, off, err = exp.DmaBuf(b); err == nil {
			reg.iova = b.Addr()
			reg.mr, err = nd.pd.RegDmaBufMR(off, uint64(reg.size), reg.iova, fd, access)
			syscall.Close(fd)
		}
	default:
		return nil, fmt.Errorf("ib: rank %d: export of %s device memory: the device offers no dma-buf export (GPUDirect RDMA) and host staging of received data is not implemented: %w",
			nd.cfg.Rank, nd.dev.Info().Backend, hal.ErrNotSupported)
	}
	if err != nil {
		return nil, fmt.Errorf("ib: rank %d: export %d bytes: %w", nd.cfg.Rank, reg.size, err)
	}
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.closed {
		reg.mr.Dereg()
		return nil, fmt.Errorf("ib: rank %d: export on a closed NetDevice: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	nd.lastReg++
	reg.id = nd.lastReg
	nd.regs[reg.id] = reg
	return encodeHandle(handle{staged: reg.staged, job: nd.job, nonce: nd.nonce, rank: nd.cfg.Rank, reg: reg.id,
		rkey: reg.mr.RKey(), addr: reg.iova, size: reg.size}), nil
}

func dmaBufOf(d hal.Device) DmaBufExporter {
	e, _ := d.(DmaBufExporter)
	return e
}

// localRegion translates the device range [a, a+n) to the NIC address
// and lkey of a registration holding it; nil where none does.
func (nd *NetDevice) localRegion(a uint64, n int64) (iova uint64, lkey uint32, reg *registration) {
	nd.mu.RLock()
	defer nd.mu.RUnlock()
	for _, r := range nd.regs {
		if !r.staged && a >= r.devAddr && a+uint64(n) <= r.devAddr+uint64(r.size) {
			return r.iova + (a - r.devAddr), r.mr.LKey(), r
		}
	}
	return 0, 0, nil
}

// UnexportPort withdraws ExportPort's registration of b (hal.PortUnexporter),
// found by b's address and size (every one, where b was exported more
// than once), and deregisters its memory region (ibv_dereg_mr). From
// then on a peer's RDMA write or fetch-and-add naming it is refused by
// the NIC: it completes with a remote access error at the peer, whose
// queue pair to this rank fails (RDMA writes are one-sided, so this
// rank's Err does not see it), and an ImportPort of its handle here is
// refused. Once ibv_dereg_mr has returned the NIC no longer touches the
// memory. Before deregistering, UnexportPort waits until the RDMA
// writes this rank's engines posted from b as a registered source have
// completed (deregistering under them would fail their queue pair with
// a local protection error), at most WEFT_TIMEOUT in all; Close does not
// deregister it again.
//
// Errors wrap hal.ErrInvalidArgument (b nil, or not exported here; the
// message names the rank, b's size in bytes and its address),
// hal.ErrInvalidUsage (a closed NetDevice: Close deregistered every
// registration), hal.ErrTimeout (the writes reading b did not complete
// within WEFT_TIMEOUT: the region stays registered until Close, and b
// must not be freed before), or carry the verbs error of ibv_dereg_mr
// (hal.ErrSystem for most errnos).
func (nd *NetDevice) UnexportPort(b hal.Buffer) error {
	if b == nil {
		return fmt.Errorf("ib: rank %d: unexport a nil buffer: %w", nd.cfg.Rank, hal.ErrInvalidArgument)
	}
	var regs []*registration
	nd.mu.Lock()
	if nd.closed {
		nd.mu.Unlock()
		return fmt.Errorf("ib: rank %d: unexport a buffer of %d bytes at %#x on a closed NetDevice (Close deregistered every registration): %w",
			nd.cfg.Rank, b.Size(), b.Addr(), hal.ErrInvalidUsage)
	}
	for id, r := range nd.regs {
		if r.devAddr == b.Addr() && r.size == b.Size() {
			regs = append(regs, r)
			delete(nd.regs, id)
			nd.unexporting[r] = struct{}{}
		}
	}
	nd.mu.Unlock()
	if len(regs) == 0 {
		return fmt.Errorf("ib: rank %d: unexport a buffer of %d bytes at %#x that is not exported: %w", nd.cfg.Rank, b.Size(), b.Addr(), hal.ErrInvalidArgument)
	}
	slices.SortFunc(regs, func(x, y *registration) int { return cmp.Compare(x.id, y.id) })
	limit := env.Timeout()
	deadline := time.Now().Add(limit)
	for _, c := range nd.conns {
		if c == nil {
			continue
		}
		if err := c.awaitReads(regs, limit, deadline); err != nil {
			return fmt.Errorf("ib: rank %d: unexport registration %d (%d bytes at %#x): %w", nd.cfg.Rank, regs[0].id, b.Size(), b.Addr(), err)
		}
	}
	// Deregistered under nd.mu, so that Close's release, which takes the
	// registrations out of unexporting under it, either finds one here or
	// comes after its deregistration (and before the domain's end).
	nd.mu.Lock()
	defer nd.mu.Unlock()
	var errs []error
	for _, r := range regs {
		if _, mine := nd.unexporting[r]; !mine {
			continue // Close came first and deregistered it
		}
		delete(nd.unexporting, r)
		if err := r.mr.Dereg(); err != nil {
			errs = append(errs, fmt.Errorf("ib: rank %d: unexport registration %d: %w", nd.cfg.Rank, r.id, err))
		}
	}
	return errors.Join(errs...)
}

// imported is a peer's registration as ImportPort gives it: Addr is the
// remote address engines take; it is not dereferenceable here.
type imported struct {
	nd     *NetDevice
	rank   int
	addr   uint64
	size   int64
	rkey   uint32
	staged bool
	freed  bool
}

func (b *imported) Addr() uint64 { return b.addr }
func (b *imported) Size() int64  { return b.size }
func (b *imported) Host() []byte { return nil }
func (b *imported) Free() error {
	nd := b.nd
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if b.freed {
		return fmt.Errorf("ib: rank %d: imported buffer of rank %d freed twice: %w", nd.cfg.Rank, b.rank, hal.ErrInvalidUsage)
	}
	b.freed = true
	list := nd.imports[b.rank]
	for i, x := range list {
		if x == b {
			nd.imports[b.rank] = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	return nil
}

// ImportPort resolves a peer's handle to a buffer whose Addr is the remote
// address engines to that peer take. A malformed handle (size, magic,
// version, a rank outside the job) is refused with hal.ErrInvalidArgument;
// one of another job, or of this rank from another NetDevice, with
// hal.ErrInvalidUsage.
func (nd *NetDevice) ImportPort(h hal.Handle) (hal.Buffer, error) {
	x, err := decodeHandle(h)
	if err != nil {
		return nil, fmt.Errorf("ib: rank %d: import: %v: %w", nd.cfg.Rank, err, hal.ErrInvalidArgument)
	}
	owner := hal.HandleOwner{Job: x.job, Rank: x.rank, Nonce: x.nonce}
	if err := hal.CheckImportAs(Name, owner, hal.HandleOwner{Job: nd.job, Rank: nd.cfg.Rank, Nonce: nd.nonce}, nd.cfg.NRanks); err != nil {
		return nil, err
	}
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.closed {
		return nil, fmt.Errorf("ib: rank %d: import on a closed NetDevice: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	if x.rank == nd.cfg.Rank {
		r := nd.regs[x.reg]
		if r == nil || r.size != x.size {
			return nil, fmt.Errorf("ib: rank %d: import: handle of this rank of a registration gone: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
		}
		return netcore.OwnBuffer(r.devAddr, r.size), nil
	}
	b := &imported{nd: nd, rank: x.rank, addr: x.addr, size: x.size, rkey: x.rkey, staged: x.staged}
	nd.imports[x.rank] = append(nd.imports[x.rank], b)
	return b, nil
}

// remote finds the rkey of [a, a+n) in a registration of rank imported
// here.
func (nd *NetDevice) remote(rank int, a uint64, n int64) (uint32, bool) {
	nd.mu.RLock()
	defer nd.mu.RUnlock()
	for _, b := range nd.imports[rank] {
		if a >= b.addr && a+uint64(n) <= b.addr+uint64(b.size) && a+uint64(n) >= a {
			return b.rkey, true
		}
	}
	return 0, false
}

// NewEngine connects to peer, whose Endpoint.Net["ib"] holds its Address:
// the first engine to a peer moves this rank's queue pair for it to RTR
// (addressed by LID on InfiniBand, by GID on RoCE) and RTS. Further
// engines to the same peer share the queue pair. The peer must open an
// engine to this rank as well, which connects its end; until it has,
// requests wait in the NIC's retries (and fail with "transport retry
// counter exceeded" if it never does). peer may be this device's own
// endpoint (with this rank's Address): that engine is the device's own.
//
// Errors wrap hal.ErrInvalidArgument (no or a malformed address),
// hal.ErrInvalidUsage (another job, another incarnation of a connected
// peer, a closed NetDevice), hal.ErrNotSupported (the peer's port has
// another link layer) or hal.ErrSystem (ibv_modify_qp failed).
func (nd *NetDevice) NewEngine(peer hal.Endpoint) (hal.Engine, error) {
	raw, ok := peer.Net[Name]
	if !ok {
		return nil, fmt.Errorf("ib: rank %d: engine to %s device %d: the endpoint carries no ib address: %w", nd.cfg.Rank, peer.Backend, peer.Ordinal, hal.ErrInvalidArgument)
	}
	a, err := decodeAddress(raw)
	if err != nil {
		return nil, fmt.Errorf("ib: rank %d: engine: %v: %w", nd.cfg.Rank, err, hal.ErrInvalidArgument)
	}
	if a.job != nd.job {
		return nil, fmt.Errorf("ib: rank %d: engine to rank %d: address of another job: %w", nd.cfg.Rank, a.rank, hal.ErrInvalidUsage)
	}
	if a.nranks != nd.cfg.NRanks {
		return nil, fmt.Errorf("ib: rank %d: engine to rank %d: address of a job of %d ranks, this one has %d: %w", nd.cfg.Rank, a.rank, a.nranks, nd.cfg.NRanks, hal.ErrInvalidArgument)
	}
	nd.mu.RLock()
	closed := nd.closed
	nd.mu.RUnlock()
	if closed {
		return nil, fmt.Errorf("ib: rank %d: engine on a closed NetDevice: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	if a.rank == nd.cfg.Rank {
		if a.nonce != nd.nonce {
			return nil, fmt.Errorf("ib: rank %d: engine to this rank with another NetDevice's address: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
		}
		e, err := nd.pm.NewEngine(nd.dev.Endpoint())
		if err != nil {
			return nil, fmt.Errorf("ib: rank %d: own engine: %w", nd.cfg.Rank, err)
		}
		return e, nil
	}
	if a.link != nd.attr.LinkLayer {
		return nil, fmt.Errorf("ib: rank %d: engine to rank %d: its port is %s, this one %s: %w", nd.cfg.Rank, a.rank, linkName(a.link), linkName(nd.attr.LinkLayer), hal.ErrNotSupported)
	}
	return nd.conns[a.rank].newEngine(a)
}

// Close closes the engines, destroys the queue pairs and completion
// queues, deregisters memory and closes the device.
func (nd *NetDevice) Close() error {
	nd.mu.Lock()
	if nd.closed {
		nd.mu.Unlock()
		return fmt.Errorf("ib: rank %d: NetDevice closed twice: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	nd.closed = true
	var engines []*engine
	for e := range nd.engines {
		engines = append(engines, e)
	}
	nd.mu.Unlock()
	var errs []error
	for _, e := range engines {
		e.shutdown()
	}
	errs = append(errs, nd.release())
	return errors.Join(errs...)
}

func (nd *NetDevice) release() error {
	var errs []error
	for _, c := range nd.conns {
		if c == nil {
			continue
		}
		c.mu.Lock()
		if c.qp != nil {
			errs = append(errs, c.qp.Destroy())
		}
		if c.cq != nil {
			errs = append(errs, c.cq.Destroy())
		}
		c.released = true
		c.mu.Unlock()
	}
	nd.mu.Lock()
	for id, r := range nd.regs {
		errs = append(errs, r.mr.Dereg())
		delete(nd.regs, id)
	}
	// Registrations an UnexportPort withdrew and has not deregistered:
	// it finds them gone and leaves them to this.
	for r := range nd.unexporting {
		errs = append(errs, r.mr.Dereg())
		delete(nd.unexporting, r)
	}
	nd.mu.Unlock()
	if nd.pd != nil {
		errs = append(errs, nd.pd.Dealloc())
	}
	if nd.ctx != nil {
		errs = append(errs, nd.ctx.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("ib: rank %d: close: %w", nd.cfg.Rank, err)
	}
	return nil
}

// Err returns the first failed completion of any peer's queue pair (the
// pair is then in error and every later request to that peer fails), or
// nil. RDMA writes are one-sided: this rank's receive side has no failures
// of its own to report.
func (nd *NetDevice) Err() error {
	nd.mu.RLock()
	conns := nd.conns
	nd.mu.RUnlock()
	for _, c := range conns {
		if c == nil {
			continue
		}
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}
