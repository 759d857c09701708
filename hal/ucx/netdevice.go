package ucx

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/netcore"
	"github.com/weftccl/weft/internal/auth"
	"github.com/weftccl/weft/internal/stageprof"
	"github.com/weftccl/weft/internal/ucx"
)

// amID is the active-message id of weft's signals.
const amID = 0x5746 // "WF"

// NetDevice is one rank's side of the UCX network: a UCP context with two
// workers — one for this rank's engines (their endpoints, puts, flushes
// and messages), one that peers' endpoints connect to (UCX's TCP
// transport lands their puts, and their messages arrive, only while it
// is progressed) — each driven by its own goroutine, the registrations
// ExportPort made, the engines this rank opened, the sessions of peers'
// engines connected here, and the side channel on which every peer
// authenticates before it learns the receiving worker's address.
type NetDevice struct {
	dev   hal.Device
	pm    hal.PortMapped
	cfg   hal.NetConfig
	opts  Options
	job   uint64
	nonce uint64
	log   *slog.Logger

	secret auth.Secret
	gate   *auth.Gate
	ln     net.Listener
	addr   []byte

	lib *ucx.Lib
	ctx *ucx.Context
	// w is the sending worker: this rank's engines' endpoints, under wmu.
	w *ucx.Worker
	// rw is the receiving worker, which peers' endpoints connect to
	// (waddr is its address): only recvLoop calls it until Close. Apart
	// from w, so that what this rank sends and what it receives are moved
	// by two threads, as hal/socket's writers and readers are: one UCX
	// worker serialised both, which held a 64 MB AllGather over UCX's TCP
	// to 1.2 GB/s each way on 2×H100 where one stream alone moved 3.1
	// (docs/network.md, "Releases and two workers").
	rw    *ucx.Worker
	waddr []byte
	// memType is the UCX memory type device memory is registered with,
	// or -1: staged through host memory.
	memType int

	// wmu serialises every call on the sending worker, its endpoints and
	// the context's registrations, and the engines' state. Lock order:
	// wmu before mu.
	wmu sync.Mutex

	mu       sync.Mutex
	closed   bool
	regs     map[uint32]*registration
	lastReg  uint32
	imports  map[importKey]*importEntry
	engines  map[*engine]struct{}
	lastEng  uint32
	sessions map[sessionKey]*session
	inbound  map[net.Conn]struct{}
	// unexporting holds the registrations UnexportPort took out of regs
	// and has not released yet (it waits for what was applied into them,
	// or gave up waiting): whichever of UnexportPort and Close takes one
	// out of here releases it, so it is released once.
	unexporting map[*registration]struct{}
	// gone remembers the last maxGone registrations UnexportPort withdrew,
	// so that a late signal naming one is refused saying so.
	gone []goneReg
	// draining holds the sessions that shutdown took out of sessions and
	// whose device engine is still closing (UnexportPort waits for them).
	draining map[*session]struct{}

	// fails records peers' failures; failPeer records under mu, with
	// the engines to fail.
	fails netcore.Failures

	closing atomic.Bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

var _ hal.NetDevice = (*NetDevice)(nil)

// registration is a buffer exported with ExportPort: peers write at
// remote (the address UCX knows the memory by: the host bytes, the GPU
// address, or a host bounce region for a staged one).
type registration struct {
	id      uint32
	devAddr uint64
	remote  uint64
	size    int64
	staged  bool
	bounce  hal.Buffer // staged: host memory from dev.AllocHost
	host    []byte     // host memory registered directly
	mem     *ucx.Mem
}

// release unmaps r's memory from UCX and frees its bounce region (under
// wmu, the context open).
func (r *registration) release() error {
	err := r.mem.Unmap()
	if r.bounce != nil {
		err = errors.Join(err, r.bounce.Free())
	}
	return err
}

// goneReg is a registration withdrawn by UnexportPort: its id and the
// remote range peers knew it by.
type goneReg struct {
	id     uint32
	remote uint64
	size   int64
}

// maxGone is the number of withdrawn registrations remembered for error
// messages.
const maxGone = 64

type importKey struct {
	rank int
	reg  uint32
}

// importEntry is a peer's registration imported here.
type importEntry struct {
	addr   uint64
	size   int64
	staged bool
	nonce  uint64
	rkey   []byte
	refs   int
}

// Open opens the network for dev: a UCP context with RMA, active
// messages and wake-up, its sending and receiving workers, and the side
// channel's listener.
// Errors wrap hal.ErrInvalidArgument (bad options or rank, a malformed
// secret), hal.ErrNotSupported (UCX absent; a device without a port-mapped
// engine) or hal.ErrSystem (a UCX call failed, no listener).
func Open(dev hal.Device, cfg hal.NetConfig, opts Options) (*NetDevice, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	pm, secret, err := netcore.CheckOpen(Name, dev, cfg, maxRanks, "for local copies")
	if err != nil {
		return nil, err
	}
	lib, err := ucx.Load()
	if err != nil {
		return nil, fmt.Errorf("ucx: open rank %d: %w", cfg.Rank, err)
	}
	settings := map[string]string{}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	if _, set := settings["NET_DEVICES"]; cfg.OneHost && !set && os.Getenv("UCX_NET_DEVICES") == "" {
		settings["NET_DEVICES"] = "lo"
	}
	// UCX's TCP transport moves 8 KiB segments by default: 0.6 GB/s for a
	// 16 MiB put on loopback here, 0.5 GB/s between two emulated nodes on
	// 2×H200; 256 KiB segments: 2.4 GB/s (docs/bench/notes.md, UCX v2).
	// Only the TCP transport reads them (UCX warns of "invalid
	// configurations" when no selected transport does); a user's setting
	// wins.
	tls, ok := settings["TLS"]
	if !ok {
		tls = os.Getenv("UCX_TLS")
	}
	for _, k := range []string{"TCP_TX_SEG_SIZE", "TCP_RX_SEG_SIZE"} {
		if _, set := settings[k]; !set && os.Getenv("UCX_"+k) == "" && tcpSelected(tls) {
			settings[strings.TrimPrefix(k, "TCP_")] = tcpSegment
		}
	}
	ip, where, err := sideAddress(opts.IfName, cfg.OneHost)
	if err != nil {
		return nil, err
	}
	nd := &NetDevice{
		dev: dev, pm: pm, cfg: cfg, opts: opts, job: jobHash(cfg.JobID), nonce: rand.Uint64() | 1,
		log: opts.Logger.With("rank", cfg.Rank, "net", Name), secret: secret, gate: auth.NewGate(auth.MaxPending),
		lib: lib, memType: -1,
		regs: map[uint32]*registration{}, imports: map[importKey]*importEntry{}, engines: map[*engine]struct{}{},
		sessions: map[sessionKey]*session{}, inbound: map[net.Conn]struct{}{},
		unexporting: map[*registration]struct{}{}, draining: map[*session]struct{}{},
		stop: make(chan struct{}),
	}
	if nd.ctx, err = lib.NewContext(ucx.FeatureRMA|ucx.FeatureAM|ucx.FeatureWakeup, settings); err != nil {
		return nil, fmt.Errorf("ucx: open rank %d: %w", cfg.Rank, err)
	}
	types, err := nd.ctx.MemoryTypes()
	if err != nil {
		nd.ctx.Close()
		return nil, fmt.Errorf("ucx: open rank %d: %w", cfg.Rank, err)
	}
	if opts.Staging == StagingAuto {
		nd.memType = memTypeOf(dev.Info().Backend, types)
	}
	closeUCX := func() {
		for _, w := range []*ucx.Worker{nd.w, nd.rw} {
			if w != nil {
				w.Close()
			}
		}
		nd.ctx.Close()
	}
	if nd.w, err = nd.ctx.NewWorker(amID, maxSignal); err == nil {
		if nd.rw, err = nd.ctx.NewWorker(amID, maxSignal); err == nil {
			nd.waddr, err = nd.rw.Address()
		}
	}
	if err != nil {
		closeUCX()
		return nil, fmt.Errorf("ucx: open rank %d: %w", cfg.Rank, err)
	}
	if nd.ln, err = net.Listen("tcp", net.JoinHostPort(ip.String(), "0")); err != nil {
		closeUCX()
		return nil, fmt.Errorf("ucx: open rank %d: side channel: listen on %s: %v: %w", cfg.Rank, where, err, hal.ErrSystem)
	}
	nd.addr = encodeAddress(address{job: nd.job, nonce: nd.nonce, rank: cfg.Rank, nranks: cfg.NRanks, side: nd.ln.Addr().String()})
	if secret.IsZero() {
		auth.WarnUnauthenticated(nd.log, "ucx transport")
	}
	nd.wg.Add(3)
	go nd.accept()
	go nd.progressLoop()
	go nd.recvLoop()
	nd.log.Info("ucx transport open", "ucx", lib.Version(), "side_channel", nd.ln.Addr().String(), "interface", where,
		"device_memory", memTypeName(nd.memType, dev.Info().Backend), "settings", settings, "authenticated", !secret.IsZero())
	return nd, nil
}

// memTypeOf is the UCX memory type of backend's device memory when UCX
// reaches it (types has its bit), else -1 (staged). hal/host memory is
// host memory.
func memTypeOf(backend string, types uint64) int {
	t := -1
	switch backend {
	case "host":
		return ucx.MemHost
	case "nvlink", "nvswitch", "pcie":
		t = ucx.MemCUDA
	case "xgmi":
		t = ucx.MemROCm
	}
	if t >= 0 && types&(1<<t) != 0 {
		return t
	}
	return -1
}

func memTypeName(t int, backend string) string {
	switch t {
	case ucx.MemHost:
		return "host memory, registered directly"
	case ucx.MemCUDA:
		return "CUDA memory, registered directly (UCX reports CUDA support)"
	case ucx.MemROCm:
		return "ROCm memory, registered directly (UCX reports ROCm support)"
	}
	return backend + " memory, staged through host memory"
}

// Address is this rank's connection information: job, rank, nonce and
// the side channel's host:port (wire.go). The UCX worker address is not
// in it: a peer receives it only after authenticating.
func (nd *NetDevice) Address() []byte { return append([]byte(nil), nd.addr...) }

// Rank is the rank the NetDevice was opened for.
func (nd *NetDevice) Rank() int { return nd.cfg.Rank }

// Staged reports whether device memory is staged through host memory.
func (nd *NetDevice) Staged() bool { return nd.memType < 0 }

// HostWindows reports whether memory with a host view is registered
// directly although device memory is staged (hal.HostWindowed): where UCX
// cannot reach the device's memory (StagingAuto without the GPU's memory
// type, StagingDevice), package channels then places the scratch and
// semaphores of plans whose every channel goes over the network in host
// memory mapped into the device; UCX places the peers' puts there, this
// NetDevice applies their signals with the CPU, and puts from there leave
// without a staging copy. False under StagingAlways and where device
// memory is registered as it is.
func (nd *NetDevice) HostWindows() bool {
	return nd.memType < 0 && nd.opts.Staging != StagingAlways
}

// localHost returns the local bytes [a, a+n) where they lie inside a
// registration of host memory registered directly, or nil: a put from
// there needs no staging copy (and a small one may travel inside its
// signal's message, fusePut).
func (nd *NetDevice) localHost(a, n uint64) []byte {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for _, r := range nd.regs {
		if r.host != nil && n > 0 && a >= r.devAddr && a+n <= r.devAddr+uint64(r.size) && a+n > a {
			off := a - r.devAddr
			return r.host[off : off+n : off+n]
		}
	}
	return nil
}

// ExportPort registers b as a destination of peers' engines: host memory
// and GPU memory UCX reaches with ucp_mem_map, other device memory through
// a host bounce region of the same size (peers write there; received
// ranges are copied to b by the device's engine before each signal). The
// handle carries the packed remote key, the remote address and the size.
// Errors wrap hal.ErrInvalidArgument (nil, empty or larger than 1 TiB),
// hal.ErrInvalidUsage (closed) or hal.ErrSystem (registration failed).
func (nd *NetDevice) ExportPort(b hal.Buffer) (hal.Handle, error) {
	if b == nil || b.Size() <= 0 || b.Size() > maxBytes {
		return nil, fmt.Errorf("ucx: rank %d: export of a nil, empty or oversized buffer (1 byte to 1 TiB): %w", nd.cfg.Rank, hal.ErrInvalidArgument)
	}
	if nd.closing.Load() {
		return nil, fmt.Errorf("ucx: rank %d: export on a closed NetDevice: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	reg := &registration{devAddr: b.Addr(), size: b.Size()}
	memType := nd.memType
	switch host := b.Host(); {
	case nd.memType == ucx.MemHost && host != nil:
		reg.remote = uint64(uintptr(unsafe.Pointer(&host[0])))
		reg.host = host
	case nd.memType >= 0 && nd.memType != ucx.MemHost:
		reg.remote = b.Addr()
	case host != nil && nd.HostWindows():
		// Memory with a host view on a device UCX cannot reach
		// (Device.AllocHost: a network plan's host windows): registered
		// as host memory, peers' puts land in it, signals into it are
		// applied by the CPU, and puts from it leave without staging.
		reg.remote = uint64(uintptr(unsafe.Pointer(&host[0])))
		reg.host, memType = host, ucx.MemHost
	default:
		bounce, err := nd.dev.AllocHost(b.Size())
		if err == nil && bounce.Host() == nil {
			bounce.Free()
			err = fmt.Errorf("host allocation without host bytes")
		}
		if err != nil {
			return nil, fmt.Errorf("ucx: rank %d: export: host bounce region of %d bytes: %w", nd.cfg.Rank, b.Size(), err)
		}
		reg.staged, reg.bounce, memType = true, bounce, ucx.MemHost
		reg.remote = uint64(uintptr(unsafe.Pointer(&bounce.Host()[0])))
	}
	nd.wmu.Lock()
	var mem *ucx.Mem
	var rkey []byte
	err := error(nil)
	if nd.isClosed() {
		err = fmt.Errorf("the NetDevice is closed: %w", hal.ErrInvalidUsage)
	} else {
		mem, err = nd.ctx.MemMap(uintptr(reg.remote), uint64(reg.size), memType)
	}
	if err == nil {
		rkey, err = mem.PackRkey()
		if err == nil && (len(rkey) == 0 || len(rkey) > maxRkey) {
			err = fmt.Errorf("packed remote key of %d bytes (want 1 to %d): %w", len(rkey), maxRkey, hal.ErrSystem)
		}
		if err != nil {
			mem.Unmap()
		}
	}
	if err == nil {
		// Registered under wmu, so that Close (which frees the context
		// under wmu) either sees it or comes after.
		reg.mem = mem
		nd.mu.Lock()
		nd.lastReg++
		reg.id = nd.lastReg
		nd.regs[reg.id] = reg
		nd.mu.Unlock()
	}
	nd.wmu.Unlock()
	if err != nil {
		if reg.bounce != nil {
			reg.bounce.Free()
		}
		return nil, fmt.Errorf("ucx: rank %d: export %d bytes: %w", nd.cfg.Rank, reg.size, err)
	}
	return encodeHandle(handle{staged: reg.staged, job: nd.job, nonce: nd.nonce, rank: nd.cfg.Rank, reg: reg.id,
		addr: reg.remote, size: reg.size, rkey: rkey}), nil
}

func (nd *NetDevice) isClosed() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.closed
}

// imported is a peer's registration as ImportPort gives it: Addr is the
// remote address engines to that peer take; not dereferenceable here.
type imported struct {
	nd    *NetDevice
	key   importKey
	addr  uint64
	size  int64
	freed atomic.Bool
}

func (b *imported) Addr() uint64 { return b.addr }
func (b *imported) Size() int64  { return b.size }
func (b *imported) Host() []byte { return nil }
func (b *imported) Free() error {
	if b.freed.Swap(true) {
		return fmt.Errorf("ucx: rank %d: imported buffer of rank %d freed twice: %w", b.nd.cfg.Rank, b.key.rank, hal.ErrInvalidUsage)
	}
	nd := b.nd
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if e := nd.imports[b.key]; e != nil {
		if e.refs--; e.refs == 0 {
			delete(nd.imports, b.key)
		}
	}
	return nil
}

// ImportPort resolves a peer's handle to a buffer whose Addr is the remote
// address engines to that peer take. Every byte is checked: size, magic,
// version, reserved bytes, the remote key's length, the range, the job,
// the rank; the remote key itself is unpacked by UCX on the first engine
// that uses it. A malformed handle is refused with hal.ErrInvalidArgument;
// one of another job, or of this rank from another NetDevice, with
// hal.ErrInvalidUsage.
func (nd *NetDevice) ImportPort(h hal.Handle) (hal.Buffer, error) {
	x, err := decodeHandle(h)
	if err != nil {
		return nil, fmt.Errorf("ucx: rank %d: import: %v: %w", nd.cfg.Rank, err, hal.ErrInvalidArgument)
	}
	owner := hal.HandleOwner{Job: x.job, Rank: x.rank, Nonce: x.nonce}
	if err := hal.CheckImportAs(Name, owner, hal.HandleOwner{Job: nd.job, Rank: nd.cfg.Rank, Nonce: nd.nonce}, nd.cfg.NRanks); err != nil {
		return nil, err
	}
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.closed {
		return nil, fmt.Errorf("ucx: rank %d: import on a closed NetDevice: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	if x.rank == nd.cfg.Rank {
		r := nd.regs[x.reg]
		if r == nil || r.size != x.size || r.remote != x.addr {
			return nil, fmt.Errorf("ucx: rank %d: import: handle of this rank of a registration gone: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
		}
		return netcore.OwnBuffer(r.devAddr, r.size), nil
	}
	k := importKey{x.rank, x.reg}
	if e := nd.imports[k]; e != nil {
		if e.nonce != x.nonce || e.size != x.size || e.addr != x.addr || e.staged != x.staged || string(e.rkey) != string(x.rkey) {
			return nil, fmt.Errorf("ucx: rank %d: import: registration %d of rank %d is already imported from another incarnation or with other contents: %w",
				nd.cfg.Rank, x.reg, x.rank, hal.ErrInvalidUsage)
		}
		e.refs++
	} else {
		nd.imports[k] = &importEntry{addr: x.addr, size: x.size, staged: x.staged, nonce: x.nonce, rkey: x.rkey, refs: 1}
	}
	return &imported{nd: nd, key: k, addr: x.addr, size: x.size}, nil
}

// remote finds the import of rank holding [a, a+n).
func (nd *NetDevice) remote(rank int, a uint64, n uint64) (importKey, *importEntry, bool) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for k, e := range nd.imports {
		if k.rank == rank && a >= e.addr && a+n <= e.addr+uint64(e.size) && a+n >= a {
			return k, e, true
		}
	}
	return importKey{}, nil, false
}

// target is a range of one of this NetDevice's registrations as a
// received signal names it.
type target struct {
	dev    uint64 // the device address of the range
	staged bool   // the bytes arrive in a bounce region
	bounce uint64 // staged: the device-engine address of the range in the bounce region
	host   []byte // host memory registered directly: the range's bytes
	// staged: the range's bytes in the bounce region (nil where it has
	// no host view)
	bounceHost []byte
}

// resolve maps the remote range [a, a+n) of one of this NetDevice's
// registrations to its device address, and for a staged one the bounce
// bytes it arrived at (AllocHost buffers are addressed by their own Addr,
// which may differ from the host pointer peers write at). The error (no
// sentinel) says what is wrong, naming the registration where the range
// lies in one UnexportPort withdrew.
func (nd *NetDevice) resolve(a, n, align uint64) (target, error) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for _, r := range nd.regs {
		if a >= r.remote && a+n <= r.remote+uint64(r.size) && a+n >= a {
			off := a - r.remote
			if align > 1 && (r.devAddr+off)%align != 0 {
				return target{}, fmt.Errorf("word at offset %d of registration %d is not %d-byte aligned", off, r.id, align)
			}
			t := target{dev: r.devAddr + off, staged: r.staged}
			if r.staged {
				t.bounce = r.bounce.Addr() + off
				if h := r.bounce.Host(); uint64(len(h)) >= off+n {
					t.bounceHost = h[off : off+n : off+n]
				}
			}
			if r.host != nil {
				t.host = r.host[off : off+n : off+n]
			}
			return t, nil
		}
	}
	for i := len(nd.gone) - 1; i >= 0; i-- {
		if g := nd.gone[i]; a >= g.remote && a < g.remote+uint64(g.size) {
			return target{}, fmt.Errorf("bytes [%#x, %#x) lie in registration %d of rank %d (%d bytes), which is unexported", a, a+n, g.id, nd.cfg.Rank, g.size)
		}
	}
	return target{}, fmt.Errorf("bytes [%#x, %#x) are not inside a registration of rank %d", a, a+n, nd.cfg.Rank)
}

// UnexportPort withdraws ExportPort's registration of b (hal.PortUnexporter),
// found by b's address and size (every one, where b was exported more
// than once). From then on a peer's signal naming its memory — the
// semaphore, the count word or a staged range to copy out of the bounce
// region — fails that peer as naming an unexported registration, and an
// ImportPort of its handle here is refused. UnexportPort returns once no
// session of a peer's engine is writing into b: what the sessions' device
// engines were given before the withdrawal (staged copies out of the
// bounce region, semaphore and count stores) is waited for, at most the
// NetDevice's timeout (Options.Timeout) in all. It then unmaps the memory
// from UCX (ucp_mem_unmap) and frees the bounce region; Close does not
// release it again. A put's bytes are placed by UCX, not by weft: peers
// must have stopped putting into b (their signals seen) before it is
// withdrawn; UCX refuses later puts only where its transport checks
// remote keys.
//
// Errors wrap hal.ErrInvalidArgument (b nil, or not exported here; the
// message names the rank, b's size in bytes and its address),
// hal.ErrInvalidUsage (a closed NetDevice: Close released every
// registration), hal.ErrTimeout (what was applied did not finish within
// the timeout: the registration stays mapped until Close, and b must not
// be freed before), or carry the error of ucp_mem_unmap (UCX's status;
// hal.ErrSystem for most) or of freeing the bounce region.
func (nd *NetDevice) UnexportPort(b hal.Buffer) error {
	if b == nil {
		return fmt.Errorf("ucx: rank %d: unexport a nil buffer: %w", nd.cfg.Rank, hal.ErrInvalidArgument)
	}
	var regs []*registration
	nd.mu.Lock()
	if nd.closed {
		nd.mu.Unlock()
		return fmt.Errorf("ucx: rank %d: unexport a buffer of %d bytes at %#x on a closed NetDevice (Close released every registration): %w",
			nd.cfg.Rank, b.Size(), b.Addr(), hal.ErrInvalidUsage)
	}
	for id, r := range nd.regs {
		if r.devAddr == b.Addr() && r.size == b.Size() {
			regs = append(regs, r)
			delete(nd.regs, id)
			nd.unexporting[r] = struct{}{}
		}
	}
	slices.SortFunc(regs, func(x, y *registration) int { return cmp.Compare(x.id, y.id) })
	for _, r := range regs {
		if len(nd.gone) == maxGone {
			nd.gone = slices.Delete(nd.gone, 0, 1)
		}
		nd.gone = append(nd.gone, goneReg{id: r.id, remote: r.remote, size: r.size})
	}
	sessions := slices.Collect(maps.Values(nd.sessions))
	for s := range nd.draining {
		sessions = append(sessions, s)
	}
	nd.mu.Unlock()
	if len(regs) == 0 {
		return fmt.Errorf("ucx: rank %d: unexport a buffer of %d bytes at %#x that is not exported: %w", nd.cfg.Rank, b.Size(), b.Addr(), hal.ErrInvalidArgument)
	}
	// Every apply that resolved into the registrations before they left
	// the table holds its session's lock until it has stored or queued
	// everything: the sessions' waits cover them all.
	deadline := time.Now().Add(nd.opts.Timeout)
	for _, s := range sessions {
		if err := s.quiesce(deadline); err != nil {
			return fmt.Errorf("ucx: rank %d: unexport registration %d (%d bytes at %#x): %w", nd.cfg.Rank, regs[0].id, b.Size(), b.Addr(), err)
		}
	}
	nd.wmu.Lock()
	defer nd.wmu.Unlock()
	var errs []error
	for _, r := range regs {
		nd.mu.Lock()
		_, mine := nd.unexporting[r]
		delete(nd.unexporting, r)
		nd.mu.Unlock()
		if !mine {
			continue // Close came first and released it
		}
		if err := r.release(); err != nil {
			errs = append(errs, fmt.Errorf("ucx: rank %d: unexport registration %d: %w", nd.cfg.Rank, r.id, err))
		}
	}
	return errors.Join(errs...)
}

// NewEngine connects an engine to peer, whose Endpoint.Net["ucx"] holds
// its Address: it dials the peer's side channel, authenticates with the
// job secret (internal/auth, mutual challenge–response), receives the
// peer's UCX worker address and a session token, and creates a UCP
// endpoint to that worker. peer may be this device's own endpoint (or
// carry this NetDevice's Address): that engine is the device's own.
//
// Errors wrap hal.ErrInvalidArgument (no or a malformed address),
// hal.ErrInvalidUsage (another job, closed), hal.ErrRemote (the peer
// refused, failed authentication or is unreachable; the message names its
// rank) or hal.ErrTimeout.
func (nd *NetDevice) NewEngine(peer hal.Endpoint) (hal.Engine, error) {
	if nd.closing.Load() {
		return nil, fmt.Errorf("ucx: rank %d: engine on a closed NetDevice: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	raw, ok := peer.Net[Name]
	if !ok {
		own := nd.dev.Endpoint()
		if peer.Backend == own.Backend && peer.HostID == own.HostID && peer.Ordinal == own.Ordinal && peer.PID == own.PID {
			return nd.ownEngine()
		}
		return nil, fmt.Errorf("ucx: rank %d: engine to %s device %d on %s: the endpoint carries no ucx address (Endpoint.Net[%q]): %w",
			nd.cfg.Rank, peer.Backend, peer.Ordinal, peer.Hostname, Name, hal.ErrInvalidArgument)
	}
	a, err := decodeAddress(raw)
	if err != nil {
		return nil, fmt.Errorf("ucx: rank %d: engine: peer address: %v: %w", nd.cfg.Rank, err, hal.ErrInvalidArgument)
	}
	switch {
	case a.job != nd.job:
		return nil, fmt.Errorf("ucx: rank %d: engine to rank %d: address of another job: %w", nd.cfg.Rank, a.rank, hal.ErrInvalidUsage)
	case a.nranks != nd.cfg.NRanks:
		return nil, fmt.Errorf("ucx: rank %d: engine to rank %d: address of a job of %d ranks, this one has %d: %w", nd.cfg.Rank, a.rank, a.nranks, nd.cfg.NRanks, hal.ErrInvalidArgument)
	case a.rank == nd.cfg.Rank && a.nonce != nd.nonce:
		return nil, fmt.Errorf("ucx: rank %d: engine to this rank with another NetDevice's address: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	case a.rank == nd.cfg.Rank:
		return nd.ownEngine()
	}
	if err := nd.PeerErr(a.rank); err != nil {
		return nil, err
	}
	return nd.dial(a)
}

func (nd *NetDevice) ownEngine() (hal.Engine, error) {
	e, err := nd.pm.NewEngine(nd.dev.Endpoint())
	if err != nil {
		return nil, fmt.Errorf("ucx: rank %d: own engine: %w", nd.cfg.Rank, err)
	}
	return e, nil
}

// authConfig is the handshake of this job's side channel to rank dst.
func (nd *NetDevice) authConfig(dst int) auth.Config {
	return auth.Config{Secret: nd.secret, Proto: auth.ProtoSocket, Context: fmt.Sprintf("%016x ucx to rank %d", nd.job, dst), Timeout: nd.opts.Timeout}
}

// Err returns the first failure of a peer seen by this NetDevice (a peer
// lost, a malformed or foreign signal, an endpoint in error), or nil.
func (nd *NetDevice) Err() error { return nd.fails.Err() }

// PeerErr returns the failure recorded for rank peer, or nil.
func (nd *NetDevice) PeerErr(peer int) error { return nd.fails.Peer(peer) }

// Refused returns the most recent side-channel connections and active
// messages this NetDevice refused (a failed authentication, another job,
// a wrong rank, an unknown session), newest last, at most 16.
func (nd *NetDevice) Refused() []error { return nd.fails.Refused() }

// FailPeer records that rank peer is lost, as a caller above the
// transport found it: engines to it fail at once with an error wrapping
// hal.ErrRemote, and closing them does not wait for the peer.
func (nd *NetDevice) FailPeer(peer int, err error) {
	lost := netcore.LostPeer(Name, nd.cfg.Rank, nd.cfg.NRanks, peer, err)
	if lost == nil {
		return
	}
	nd.failPeer(peer, lost)
}

// failPeer records err as rank peer's failure (the first one sticks) and
// fails the engines to it.
func (nd *NetDevice) failPeer(peer int, err error) {
	nd.mu.Lock()
	first := nd.fails.Record(peer, err)
	var to []*engine
	for e := range nd.engines {
		if e.peer == peer {
			to = append(to, e)
		}
	}
	nd.mu.Unlock()
	if first {
		nd.log.Warn("ucx transport: peer failed", "peer", peer, "err", err)
	}
	for _, e := range to {
		e.fail(err)
	}
}

func (nd *NetDevice) refuse(err error) {
	nd.fails.Refuse(err)
	nd.log.Warn("ucx transport: refused", "err", err)
}

// progressLoop drives the sending worker while nothing else does: it
// progresses it and moves engines' waiting requests on, and when nothing
// is left arms the worker and sleeps on its event descriptor until UCX
// has work (a completion, a flush's acknowledgement) or an engine call
// wakes it. While requests wait it polls, never sleeping on the
// descriptor, and naps once nothing has moved for a while.
func (nd *NetDevice) progressLoop() {
	defer nd.wg.Done()
	armWarned := false
	var lastActive time.Time
	var engines []*engine
	for {
		select {
		case <-nd.stop:
			return
		default:
		}
		nd.wmu.Lock()
		progressed := false
		for nd.w.Progress() > 0 {
			progressed = true
		}
		nd.mu.Lock()
		engines = engines[:0]
		for e := range nd.engines {
			engines = append(engines, e)
		}
		nd.mu.Unlock()
		// Engines with nothing queued or in flight are not pumped: the
		// worker was progressed above, and each pump progresses it again
		// under wmu, which the proxy's calls wait for (2–9 µs per signal on
		// 2×H100 before, docs/network.md).
		waiting := false
		for _, e := range engines {
			if e.waiting() {
				e.pump()
			}
			waiting = waiting || e.waiting()
		}
		now := time.Now()
		if progressed {
			lastActive = now
		}
		// Warm: right after activity the next event (a flush's
		// acknowledgement) usually follows within microseconds; poll for
		// Options.Spin before sleeping on the descriptor. While requests
		// wait the loop never sleeps on the descriptor: what they wait for
		// is often a device copy (a staging copy, the receiver's copy
		// out), whose completion wakes no descriptor, and the 1 ms limit
		// that sleeping took per stage held UCX to 0.5 GB/s on 2×H200
		// (docs/bench/notes.md, UCX v2).
		warm := now.Sub(lastActive) < nd.opts.Spin
		armed, armFailed := false, false
		if !warm && !waiting {
			var err error
			if armed, err = nd.w.Arm(); err != nil {
				if !armWarned {
					armWarned = true
					nd.log.Warn("ucx transport: the worker cannot be armed for wake-ups; progress polls every millisecond", "err", err)
				}
				armed, armFailed = true, true
			}
		}
		nd.wmu.Unlock()
		if !armed {
			switch {
			case warm || (waiting && now.Sub(lastActive) < waitSpin):
				runtime.Gosched()
			case waiting:
				time.Sleep(waitNap)
			}
			continue
		}
		nd.sleep(nd.w, armFailed)
	}
}

// recvLoop drives the receiving worker: it progresses it (UCX lands
// peers' puts and receives their messages) and applies the received
// signals in arrival order; after Options.Spin without anything arriving
// it arms the worker and sleeps on its event descriptor. It is the only
// goroutine that calls the receiving worker until Close.
func (nd *NetDevice) recvLoop() {
	defer nd.wg.Done()
	armWarned := false
	dropped := uint64(0)
	var lastActive time.Time
	for {
		select {
		case <-nd.stop:
			return
		default:
		}
		progressed := false
		for nd.rw.Progress() > 0 {
			progressed = true
		}
		if d := nd.rw.Dropped(); d != dropped {
			dropped = d
			nd.refuse(fmt.Errorf("ucx: rank %d: %d active messages dropped so far (longer than %d bytes, or sent by rendezvous): not weft signals: %w",
				nd.cfg.Rank, d, maxSignal, hal.ErrRemote))
		}
		popped := stageprof.TraceStart()
		applied := 0
		for {
			m, ok := nd.rw.PopAM()
			if !ok {
				break
			}
			nd.apply(m, popped)
			applied++
		}
		now := time.Now()
		if progressed || applied > 0 {
			lastActive = now
		}
		if now.Sub(lastActive) < nd.opts.Spin {
			runtime.Gosched() // polls, yielding to goroutines that wait for a thread
			continue
		}
		armed, err := nd.rw.Arm()
		if err != nil {
			if !armWarned {
				armWarned = true
				nd.log.Warn("ucx transport: the receiving worker cannot be armed for wake-ups; it polls every millisecond", "err", err)
			}
			nd.sleep(nd.rw, true)
			continue
		}
		if armed {
			nd.sleep(nd.rw, false)
		}
	}
}

// sleep waits on armed worker w's event descriptor, up to 250 ms (a
// stop wakes it), or 1 ms where w cannot be armed.
func (nd *NetDevice) sleep(w *ucx.Worker, unarmed bool) {
	limit := 250
	if unarmed {
		limit = 1
	}
	if _, err := w.Wait(limit); err != nil {
		nd.log.Warn("ucx transport: wait on a worker", "err", err)
		time.Sleep(time.Millisecond)
	}
}

// tcpSegment is the segment size set for UCX's TCP transport unless the
// user sets UCX_TCP_TX_SEG_SIZE or UCX_TCP_RX_SEG_SIZE.
const tcpSegment = "256k"

// tcpSelected reports whether UCX_TLS's value tls (UCX's syntax: a comma
// list of transports or aliases, "all", or "^" and a list to leave out;
// empty: all) lets UCX load its TCP transport.
func tcpSelected(tls string) bool {
	tls = strings.TrimSpace(tls)
	exclude := strings.HasPrefix(tls, "^")
	has := false
	for _, t := range strings.Split(strings.TrimPrefix(tls, "^"), ",") {
		switch strings.ToLower(strings.TrimSpace(t)) {
		case "tcp", "all": // listed, or taken in or left out with everything
			has = true
		}
	}
	if tls == "" {
		return true
	}
	return has != exclude
}

// waitSpin is how long the progress loop polls without pause while
// requests wait and nothing moves; after it, it naps waitNap between
// polls (a stalled peer costs a nap per round, not a spinning core).
const (
	waitSpin = 2 * time.Millisecond
	waitNap  = 50 * time.Microsecond
)

// wake makes the progress loop run (an engine queued work it cannot
// finish at once).
func (nd *NetDevice) wake() { nd.w.Signal() }

// Close closes this rank's engines (each drains, says goodbye, closes its
// endpoint), tells the engines of peers connected here that nothing more
// will be applied, stops the progress loop, closes the side channel, and
// releases registrations, the worker and the context. A peer's failure
// reported earlier is not repeated. Calling it twice is
// hal.ErrInvalidUsage.
func (nd *NetDevice) Close() error {
	nd.mu.Lock()
	if nd.closed {
		nd.mu.Unlock()
		return fmt.Errorf("ucx: rank %d: NetDevice closed twice: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	nd.closed = true
	engines := slices.Collect(maps.Keys(nd.engines))
	nd.mu.Unlock()
	errs := netcore.CloseQuietAll(engines, (*engine).closeQuiet)
	if err := stageprof.WriteTrace(); err != nil {
		nd.log.Warn("ucx transport timeline", "err", err)
	}
	nd.closing.Store(true)
	nd.ln.Close()
	nd.mu.Lock()
	sessions := slices.Collect(maps.Values(nd.sessions))
	orphans := slices.Collect(maps.Keys(nd.inbound))
	nd.mu.Unlock()
	for _, s := range sessions {
		s.shutdown(true)
	}
	for _, c := range orphans {
		c.Close()
	}
	close(nd.stop)
	nd.wake()
	nd.rw.Signal()
	done := make(chan struct{})
	go func() { nd.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(nd.opts.Timeout):
		errs = append(errs, fmt.Errorf("ucx: rank %d: close: the progress loop and side channels did not stop within %v: %w", nd.cfg.Rank, nd.opts.Timeout, hal.ErrTimeout))
		return errors.Join(errs...) // leave the worker to them rather than free it under them
	}
	nd.wmu.Lock()
	defer nd.wmu.Unlock()
	nd.mu.Lock()
	regs := slices.Collect(maps.Values(nd.regs))
	nd.regs = map[uint32]*registration{}
	// Registrations an UnexportPort withdrew and has not released: it
	// finds them gone and leaves them to this.
	for r := range nd.unexporting {
		regs = append(regs, r)
	}
	clear(nd.unexporting)
	clear(nd.imports)
	nd.mu.Unlock()
	for _, r := range regs {
		if err := r.release(); err != nil {
			errs = append(errs, fmt.Errorf("ucx: rank %d: close: registration %d: %w", nd.cfg.Rank, r.id, err))
		}
	}
	nd.w.Close()
	nd.rw.Close()
	nd.ctx.Close()
	return errors.Join(errs...)
}

// readFull reads len(b) bytes from c before the deadline.
func readFull(c net.Conn, b []byte, d time.Duration) error {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.ReadFull(c, b)
	c.SetReadDeadline(time.Time{})
	return err
}

func writeAll(c net.Conn, b []byte, d time.Duration) error {
	c.SetWriteDeadline(time.Now().Add(d))
	_, err := c.Write(b)
	c.SetWriteDeadline(time.Time{})
	return err
}
