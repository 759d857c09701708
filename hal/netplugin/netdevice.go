package netplugin

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/auth"
	"github.com/weftccl/weft/internal/ncclnet"
)

// NetDevice is one rank's side of the plugin transport: a listening comm
// per peer rank, one link per peer (a send comm and a receive comm), the
// registrations peers put into, and the engines this rank opened. A
// progress goroutine makes every plugin call (see the package
// documentation).
type NetDevice struct {
	dev   hal.Device
	pm    hal.PortMapped
	cfg   hal.NetConfig
	opts  Options
	p     *ncclnet.Plugin
	props ncclnet.Properties
	job   uint64
	nonce uint64
	addr  []byte
	log   *slog.Logger

	secret auth.Secret // zero: unauthenticated

	listens    []*ncclnet.Listen // by peer rank; progress goroutine only after Open
	acceptNext int               // the next listening comm acceptAll tries
	handles    []ncclnet.Handle  // this rank's listen handle for each peer

	regMu   sync.RWMutex
	regs    map[uint32]*registration
	lastReg uint32
	imports map[importKey]*importEntry

	mu       sync.Mutex
	closed   bool
	links    map[int]*link
	engines  map[*Engine]struct{}
	locals   map[*localEngine]struct{}
	peerErr  map[int]error
	firstErr error
	refused  []error
	changed  notifier // a link became ready or failed, an engine closed

	failedPeers atomic.Int32
	crash       atomic.Bool // tests: stop as a crashed process would, without goodbyes
	wake        chan struct{}
	stop        chan struct{}
	done        chan struct{}
}

var _ hal.NetDevice = (*NetDevice)(nil)

type registration struct {
	buf  hal.Buffer
	addr uint64
	size int64
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

// Open loads opts.Plugin, creates a listening comm for every peer rank on
// the plugin's device opts.Device, and starts the progress goroutine.
//
// Errors wrap hal.ErrInvalidArgument (bad options, rank outside [0,
// NRanks), a malformed secret), hal.ErrNotSupported (no plugin, no
// device, a plugin without host-memory support, a device without a
// port-mapped engine to stage through) or the plugin's errors.
func Open(dev hal.Device, cfg hal.NetConfig, opts Options) (*NetDevice, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.NRanks < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.NRanks {
		return nil, fmt.Errorf("netplugin: rank %d of %d ranks: %w", cfg.Rank, cfg.NRanks, hal.ErrInvalidArgument)
	}
	var secret auth.Secret
	if cfg.Secret != nil {
		if secret, err = auth.SecretFromBytes(cfg.Secret); err != nil {
			return nil, fmt.Errorf("netplugin: open rank %d: NetConfig.Secret: %w", cfg.Rank, err)
		}
	}
	if dev == nil {
		return nil, fmt.Errorf("netplugin: open rank %d: nil device: %w", cfg.Rank, hal.ErrInvalidArgument)
	}
	pm, ok := dev.(hal.PortMapped)
	if !ok || dev.Link(dev.Endpoint()).Caps&hal.CapPortMapped == 0 {
		return nil, fmt.Errorf("netplugin: open rank %d: %s device %d has no port-mapped engine to stage through: %w",
			cfg.Rank, dev.Info().Backend, dev.Info().Ordinal, hal.ErrNotSupported)
	}
	p, err := ncclnet.Load(opts.Plugin)
	if err != nil {
		return nil, fmt.Errorf("netplugin: open rank %d: %w", cfg.Rank, err)
	}
	n, err := p.Devices()
	if err != nil {
		return nil, fmt.Errorf("netplugin: open rank %d: %w", cfg.Rank, err)
	}
	if opts.Device >= n {
		return nil, fmt.Errorf("netplugin: open rank %d: net plugin %s has %d device(s), device %d asked for: %w", cfg.Rank, p.Name(), n, opts.Device, hal.ErrNotSupported)
	}
	props, err := p.Properties(opts.Device)
	if err != nil {
		return nil, fmt.Errorf("netplugin: open rank %d: %w", cfg.Rank, err)
	}
	if props.PtrSupport&ncclnet.PtrHost == 0 {
		return nil, fmt.Errorf("netplugin: open rank %d: net plugin %s device %d (%s) does not take host memory (ptrSupport %#x), which weft stages through: %w",
			cfg.Rank, p.Name(), opts.Device, props.Name, props.PtrSupport, hal.ErrNotSupported)
	}
	nd := &NetDevice{
		dev: dev, pm: pm, cfg: cfg, opts: opts, p: p, props: props, job: jobHash(cfg.JobID), nonce: rand.Uint64() | 1,
		log: opts.Logger.With("rank", cfg.Rank, "net", Name), secret: secret,
		regs: map[uint32]*registration{}, imports: map[importKey]*importEntry{},
		links: map[int]*link{}, engines: map[*Engine]struct{}{}, locals: map[*localEngine]struct{}{}, peerErr: map[int]error{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		listens: make([]*ncclnet.Listen, cfg.NRanks),
	}
	handles := make([]ncclnet.Handle, cfg.NRanks)
	for r := range cfg.NRanks {
		if r == cfg.Rank {
			continue
		}
		l, h, err := p.Listen(opts.Device)
		if err != nil {
			for _, l := range nd.listens {
				if l != nil {
					l.Close()
				}
			}
			return nil, fmt.Errorf("netplugin: open rank %d: listen for rank %d: %w", cfg.Rank, r, err)
		}
		nd.listens[r], handles[r] = l, h
	}
	nd.handles = handles
	nd.addr = encodeAddress(address{job: nd.job, nonce: nd.nonce, rank: cfg.Rank, chunk: opts.Chunk, handles: handles})
	if secret.IsZero() {
		auth.WarnUnauthenticated(nd.log, "net plugin transport")
	}
	go nd.progress()
	nd.log.Info("net plugin transport open", "plugin", p.Name(), "library", p.Path(), "device", opts.Device, "nic", props.Name,
		"speed_mbps", props.SpeedMbps, "chunk", opts.Chunk, "authenticated", !secret.IsZero())
	return nd, nil
}

// Address is this rank's connection information: the job hash, the rank,
// this NetDevice's nonce, its chunk size and a listen handle for each
// peer rank (see the package documentation).
func (nd *NetDevice) Address() []byte { return append([]byte(nil), nd.addr...) }

// Rank is the rank the NetDevice was opened for.
func (nd *NetDevice) Rank() int { return nd.cfg.Rank }

// Plugin is the loaded plugin.
func (nd *NetDevice) Plugin() *ncclnet.Plugin { return nd.p }

func (nd *NetDevice) kick() {
	select {
	case nd.wake <- struct{}{}:
	default:
	}
}

// ExportPort registers b as a destination of peers' puts and signals.
// The handle (40 bytes) names the job, this NetDevice, the rank, a
// registration id and the size. Errors wrap hal.ErrInvalidArgument (nil
// or empty buffer, larger than 1 TiB, too many registrations) or
// hal.ErrInvalidUsage (closed).
func (nd *NetDevice) ExportPort(b hal.Buffer) (hal.Handle, error) {
	if b == nil || b.Size() <= 0 || b.Size() > maxBytes {
		size := int64(0)
		if b != nil {
			size = b.Size()
		}
		return nil, fmt.Errorf("netplugin: rank %d: export a buffer of %d bytes: want 1 byte to 1 TiB: %w", nd.cfg.Rank, size, hal.ErrInvalidArgument)
	}
	nd.regMu.Lock()
	defer nd.regMu.Unlock()
	if nd.isClosed() {
		return nil, fmt.Errorf("netplugin: rank %d: export on a closed NetDevice: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	if nd.lastReg == maxReg {
		return nil, fmt.Errorf("netplugin: rank %d: export: %d registrations, the most one NetDevice holds: %w", nd.cfg.Rank, maxReg, hal.ErrInvalidArgument)
	}
	nd.lastReg++
	id := nd.lastReg
	nd.regs[id] = &registration{buf: b, addr: b.Addr(), size: b.Size()}
	return encodeHandle(handle{job: nd.job, nonce: nd.nonce, rank: nd.cfg.Rank, reg: id, size: b.Size()}), nil
}

// ImportPort resolves a peer's handle to a buffer whose Addr is the remote
// address engines take (Host is nil). A malformed handle or one of a rank
// outside the job is refused with hal.ErrInvalidArgument, another job's
// with hal.ErrInvalidUsage.
func (nd *NetDevice) ImportPort(h hal.Handle) (hal.Buffer, error) {
	x, err := decodeHandle(h)
	if err != nil {
		return nil, fmt.Errorf("netplugin: rank %d: import: %v: %w", nd.cfg.Rank, err, hal.ErrInvalidArgument)
	}
	owner := hal.HandleOwner{Job: x.job, Rank: x.rank, Nonce: x.nonce}
	if err := hal.CheckImport(owner, hal.HandleOwner{Job: nd.job, Rank: nd.cfg.Rank, Nonce: nd.nonce}, nd.cfg.NRanks); err != nil {
		return nil, fmt.Errorf("netplugin: rank %d: import: %w", nd.cfg.Rank, err)
	}
	nd.regMu.Lock()
	defer nd.regMu.Unlock()
	if nd.isClosed() {
		return nil, fmt.Errorf("netplugin: rank %d: import on a closed NetDevice: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	k := importKey{x.rank, x.reg}
	if e := nd.imports[k]; e != nil {
		if e.nonce != x.nonce || e.size != x.size {
			return nil, fmt.Errorf("netplugin: rank %d: import: registration %d of rank %d is already imported from another incarnation or with another size: %w", nd.cfg.Rank, x.reg, x.rank, hal.ErrInvalidUsage)
		}
		e.refs++
	} else {
		nd.imports[k] = &importEntry{size: x.size, nonce: x.nonce, refs: 1}
	}
	return &remoteBuffer{nd: nd, key: k, size: x.size}, nil
}

type remoteBuffer struct {
	nd    *NetDevice
	key   importKey
	size  int64
	freed atomic.Bool
}

func (b *remoteBuffer) Addr() uint64 { return encodeAddr(b.key.reg, 0) }
func (b *remoteBuffer) Size() int64  { return b.size }
func (b *remoteBuffer) Host() []byte { return nil }
func (b *remoteBuffer) String() string {
	return fmt.Sprintf("registration %d of rank %d", b.key.reg, b.key.rank)
}

// Free forgets the import; engines refuse its addresses afterwards.
func (b *remoteBuffer) Free() error {
	if b.freed.Swap(true) {
		return fmt.Errorf("netplugin: free %v: already freed: %w", b, hal.ErrInvalidUsage)
	}
	b.nd.regMu.Lock()
	defer b.nd.regMu.Unlock()
	if e := b.nd.imports[b.key]; e != nil {
		if e.refs--; e.refs == 0 {
			delete(b.nd.imports, b.key)
		}
	}
	return nil
}

// checkRemote checks that [a, a+n) lies in a registration imported from
// rank peer of incarnation nonce.
func (nd *NetDevice) checkRemote(peer int, nonce uint64, a, n uint64, what string) error {
	reg, off, ok := decodeAddr(a)
	if !ok {
		return fmt.Errorf("%s %#x is not the address of a buffer imported with ImportPort: %w", what, a, hal.ErrInvalidArgument)
	}
	nd.regMu.RLock()
	e := nd.imports[importKey{peer, reg}]
	nd.regMu.RUnlock()
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

// resolve turns a remote address naming one of this NetDevice's
// registrations into the device address of [a, a+n). The error (no
// sentinel) says what is wrong.
func (nd *NetDevice) resolve(a, n, align uint64) (uint64, error) {
	reg, off, ok := decodeAddr(a)
	if !ok {
		return 0, fmt.Errorf("address %#x is not a plugin-transport address", a)
	}
	nd.regMu.RLock()
	r := nd.regs[reg]
	nd.regMu.RUnlock()
	if r == nil {
		return 0, fmt.Errorf("unknown registration id %d", reg)
	}
	if off+n > uint64(r.size) || off+n < off {
		return 0, fmt.Errorf("bytes [%d, %d) beyond registration %d of %d bytes", off, off+n, reg, r.size)
	}
	d := r.addr + off
	if align > 1 && d%align != 0 {
		return 0, fmt.Errorf("word at offset %d of registration %d is not %d-byte aligned", off, reg, align)
	}
	return d, nil
}

// NewEngine connects an engine to peer, whose Endpoint.Net["plugin"]
// holds its Address: the first engine to a rank connects the link (the
// plugin's connect to the peer's listen handle for this rank, the peer's
// connect back, hello and, with a job secret, the challenge–response)
// and waits for it, at most the timeout. peer may be this device's own
// endpoint: that engine copies and signals within the device.
//
// Errors wrap hal.ErrInvalidArgument (no or a malformed address, a rank
// outside the job), hal.ErrInvalidUsage (another job's address, closed),
// hal.ErrRemote (the peer refused, or failed; the message names its rank)
// or hal.ErrTimeout.
func (nd *NetDevice) NewEngine(peer hal.Endpoint) (hal.Engine, error) {
	if nd.isClosed() {
		return nil, fmt.Errorf("netplugin: rank %d: engine on a closed NetDevice: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	raw, ok := peer.Net[Name]
	if !ok {
		if sameEndpoint(peer, nd.dev.Endpoint()) {
			return nd.newLocalEngine()
		}
		return nil, fmt.Errorf("netplugin: rank %d: engine to %s device %d on %s: the endpoint carries no plugin address (Endpoint.Net[%q]): %w",
			nd.cfg.Rank, peer.Backend, peer.Ordinal, peer.Hostname, Name, hal.ErrInvalidArgument)
	}
	a, err := decodeAddress(raw, nd.cfg.NRanks)
	if err != nil {
		return nil, fmt.Errorf("netplugin: rank %d: engine: peer address: %v: %w", nd.cfg.Rank, err, hal.ErrInvalidArgument)
	}
	switch {
	case a.job != nd.job:
		return nil, fmt.Errorf("netplugin: rank %d: engine: address of another job: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	case a.nonce == nd.nonce:
		return nd.newLocalEngine()
	case a.rank == nd.cfg.Rank:
		return nil, fmt.Errorf("netplugin: rank %d: engine: the address claims this rank but another incarnation: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	l, err := nd.connectLink(a)
	if err != nil {
		return nil, err
	}
	return nd.newEngine(l)
}

func sameEndpoint(a, b hal.Endpoint) bool {
	return a.Backend == b.Backend && a.HostID == b.HostID && a.Ordinal == b.Ordinal && a.PID == b.PID && a.UUID == b.UUID
}

// connectLink asks the progress goroutine for the link to a.rank and
// waits until it is ready or failed, at most the timeout.
func (nd *NetDevice) connectLink(a address) (*link, error) {
	deadline := time.Now().Add(nd.opts.Timeout)
	nd.mu.Lock()
	l := nd.linkLocked(a.rank)
	if l.peerNonce != 0 && l.peerNonce != a.nonce {
		nd.mu.Unlock()
		return nil, fmt.Errorf("netplugin: rank %d: engine to rank %d: the address is of another incarnation than the rank connected here: %w", nd.cfg.Rank, a.rank, hal.ErrInvalidUsage)
	}
	l.addrHandle, l.haveAddr, l.addrNonce, l.addrChunk, l.wantSend = a.handles[nd.cfg.Rank], true, a.nonce, a.chunk, true
	nd.mu.Unlock()
	nd.kick()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		ch := nd.changed.wait()
		nd.mu.Lock()
		l = nd.links[a.rank]
		closed := nd.closed
		nd.mu.Unlock()
		if err := l.failure(); err != nil {
			return nil, err
		}
		if l.isReady() {
			return l, nil
		}
		if closed {
			return nil, fmt.Errorf("netplugin: rank %d: engine to rank %d: the NetDevice closed: %w", nd.cfg.Rank, a.rank, hal.ErrInvalidUsage)
		}
		select {
		case <-ch:
		case <-timer.C:
			return nil, fmt.Errorf("netplugin: rank %d: engine to rank %d: the link did not come up within %v (%s): %w",
				nd.cfg.Rank, a.rank, nd.opts.Timeout, l.stage(), hal.ErrTimeout)
		}
	}
}

// linkLocked returns the link to peer, creating it. nd.mu held.
func (nd *NetDevice) linkLocked(peer int) *link {
	l := nd.links[peer]
	if l == nil {
		l = newLink(nd, peer)
		nd.links[peer] = l
	}
	return l
}

func (nd *NetDevice) isClosed() bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.closed
}

// Err returns the first failure of a peer seen by this NetDevice (a peer
// lost, a malformed message), or nil. Engines to that peer fail with it.
func (nd *NetDevice) Err() error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.firstErr
}

// PeerErr returns the failure recorded for rank peer, or nil.
func (nd *NetDevice) PeerErr(peer int) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.peerErr[peer]
}

// Refused returns the most recent connections this NetDevice refused
// (another job, a wrong rank or incarnation, a failed challenge), newest
// last, at most 16. A refused connection does not disturb the job.
func (nd *NetDevice) Refused() []error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return append([]error(nil), nd.refused...)
}

// FailPeer records that rank peer is lost, as the caller found it (a
// communicator whose progress exchange found the rank stopped): engines
// to it fail at once with an error wrapping hal.ErrRemote and err, and
// closing them does not wait for the peer. A rank outside the job is
// ignored.
func (nd *NetDevice) FailPeer(peer int, err error) {
	if peer < 0 || peer >= nd.cfg.NRanks || peer == nd.cfg.Rank {
		return
	}
	nd.failPeer(peer, fmt.Errorf("netplugin: rank %d: rank %d is lost: %v: %w", nd.cfg.Rank, peer, err, hal.ErrRemote))
	nd.kick()
}

func (nd *NetDevice) failPeer(peer int, err error) {
	nd.mu.Lock()
	if nd.peerErr[peer] == nil {
		nd.peerErr[peer] = err
		nd.failedPeers.Add(1)
	}
	if nd.firstErr == nil {
		nd.firstErr = err
	}
	nd.mu.Unlock()
	nd.changed.notify()
	nd.log.Warn("net plugin transport: peer failed", "peer", peer, "err", err)
}

func (nd *NetDevice) refuse(err error) {
	nd.mu.Lock()
	nd.refused = append(nd.refused, err)
	if len(nd.refused) > 16 {
		nd.refused = nd.refused[len(nd.refused)-16:]
	}
	nd.mu.Unlock()
	nd.log.Warn("net plugin transport: connection refused", "err", err)
}

// authConfig is the handshake of the link between this rank and rank
// peer. The context binds the proofs to this transport, the job and the
// pair of ranks (lower rank first), so a transcript of the socket
// transport's handshake, or of another pair's, opens nothing here.
func (nd *NetDevice) authConfig(peer int) auth.Config {
	lo, hi := min(nd.cfg.Rank, peer), max(nd.cfg.Rank, peer)
	return auth.Config{Secret: nd.secret, Proto: auth.ProtoSocket,
		Context: fmt.Sprintf("weft net plugin %016x ranks %d-%d", nd.job, lo, hi), Timeout: nd.opts.Timeout}
}

// Close closes this rank's engines (each drains, says goodbye and waits
// for the peer's acknowledgement, bounded by the timeout), tells every
// connected peer that nothing more will be applied, stops the progress
// goroutine and closes every comm, registration and listening comm. It
// returns errors of engines that were never reported by an engine call.
// Calling it twice is hal.ErrInvalidUsage.
func (nd *NetDevice) Close() error {
	nd.mu.Lock()
	if nd.closed {
		nd.mu.Unlock()
		return fmt.Errorf("netplugin: rank %d: NetDevice closed twice: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	engines := make([]*Engine, 0, len(nd.engines))
	for e := range nd.engines {
		engines = append(engines, e)
	}
	locals := make([]*localEngine, 0, len(nd.locals))
	for l := range nd.locals {
		locals = append(locals, l)
	}
	nd.mu.Unlock()
	var errs []error
	for _, e := range engines {
		if err := e.closeQuiet(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, l := range locals {
		l.closeQuiet()
	}
	nd.mu.Lock()
	nd.closed = true
	nd.mu.Unlock()
	nd.changed.notify()
	// The progress goroutine says "closing" on every link, waits (at
	// most the timeout) for those messages and the copies of received
	// data, and releases every plugin object.
	close(nd.stop)
	select {
	case <-nd.done:
	case <-time.After(2*nd.opts.Timeout + time.Second):
		errs = append(errs, fmt.Errorf("netplugin: rank %d: close: the progress goroutine did not stop within %v: %w", nd.cfg.Rank, 2*nd.opts.Timeout, hal.ErrTimeout))
	}
	nd.regMu.Lock()
	clear(nd.regs)
	clear(nd.imports)
	nd.regMu.Unlock()
	return errors.Join(errs...)
}
