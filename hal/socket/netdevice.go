package socket

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/auth"
)

// NetDevice is one rank's side of the socket transport: a listener that
// accepts peers' engines and applies their frames to registered memory,
// the registrations themselves, and the engines this rank opened.
type NetDevice struct {
	dev   hal.Device
	pm    hal.PortMapped
	cfg   hal.NetConfig
	opts  Options
	job   uint64
	nonce uint64
	ln    net.Listener
	addr  []byte
	where string // interface choice, for messages
	log   *slog.Logger

	// secret authenticates every connection (zero: unauthenticated);
	// gate caps connections that have not authenticated yet.
	secret auth.Secret
	gate   *auth.Gate

	regMu   sync.RWMutex
	regs    map[uint32]*registration
	lastReg uint32
	imports map[importKey]*importEntry

	mu       sync.Mutex
	closed   bool
	engines  map[engineCloser]struct{} // engines not yet closed
	sessions map[sessionKey]*session
	inbound  map[net.Conn]struct{}
	peerErr  map[int]error
	firstErr error
	refused  []error

	closing     atomic.Bool
	failedPeers atomic.Int32   // len(peerErr), read without mu
	wg          sync.WaitGroup // accept loop and receivers
}

// engineCloser is an engine the NetDevice closes if its owner did not.
type engineCloser interface{ closeQuiet() error }

var _ hal.NetDevice = (*NetDevice)(nil)

// registration is a buffer exported with ExportPort.
type registration struct {
	buf  hal.Buffer
	addr uint64
	size int64
}

type importKey struct {
	rank int
	reg  uint32
}

// importEntry is a peer's registration imported here.
type importEntry struct {
	size  int64
	nonce uint64
	refs  int
}

// Open opens the transport for dev with explicit options (zero fields
// take their defaults; the registered network passes OptionsFromEnv). It
// listens on port 0 of the chosen interface's address.
//
// Errors wrap hal.ErrInvalidArgument (bad options, rank outside [0,
// NRanks)), hal.ErrNotSupported (no usable interface; a device without a
// port-mapped engine to stage through) or hal.ErrSystem (no listener).
func Open(dev hal.Device, cfg hal.NetConfig, opts Options) (*NetDevice, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.NRanks < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.NRanks {
		return nil, fmt.Errorf("socket: rank %d of %d ranks: %w", cfg.Rank, cfg.NRanks, hal.ErrInvalidArgument)
	}
	var secret auth.Secret
	if cfg.Secret != nil {
		if secret, err = auth.SecretFromBytes(cfg.Secret); err != nil {
			return nil, fmt.Errorf("socket: open rank %d: NetConfig.Secret: %w", cfg.Rank, err)
		}
	}
	if opts.Encrypt && secret.IsZero() {
		return nil, fmt.Errorf("socket: open rank %d: encryption (WEFT_SOCKET_ENCRYPT) needs a job secret (hal.NetConfig.Secret), and this job has none: %w", cfg.Rank, hal.ErrInvalidArgument)
	}
	if dev == nil {
		return nil, fmt.Errorf("socket: open rank %d: nil device: %w", cfg.Rank, hal.ErrInvalidArgument)
	}
	pm, ok := dev.(hal.PortMapped)
	if !ok || dev.Link(dev.Endpoint()).Caps&hal.CapPortMapped == 0 {
		return nil, fmt.Errorf("socket: open rank %d: %s device %d has no port-mapped engine to stage through: %w",
			cfg.Rank, dev.Info().Backend, dev.Info().Ordinal, hal.ErrNotSupported)
	}
	ifs, err := systemInterfaces()
	if err != nil {
		return nil, err
	}
	_, ip, where, ok := chooseInterface(opts.IfName, ifs, cfg.OneHost)
	if !ok {
		return nil, fmt.Errorf("socket: open rank %d: %s: %w", cfg.Rank, where, hal.ErrNotSupported)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		return nil, fmt.Errorf("socket: open rank %d: listen on %s: %v: %w", cfg.Rank, where, err, hal.ErrSystem)
	}
	nonce := rand.Uint64() | 1
	nd := &NetDevice{
		dev: dev, pm: pm, cfg: cfg, opts: opts, job: jobHash(cfg.JobID), nonce: nonce, ln: ln, where: where,
		log:    opts.Logger.With("rank", cfg.Rank, "net", Name),
		secret: secret, gate: auth.NewGate(auth.MaxPending),
		regs:    map[uint32]*registration{},
		imports: map[importKey]*importEntry{},
		engines: map[engineCloser]struct{}{}, sessions: map[sessionKey]*session{},
		inbound: map[net.Conn]struct{}{}, peerErr: map[int]error{},
	}
	nd.addr = encodeAddress(address{job: nd.job, nonce: nonce, rank: cfg.Rank, addrs: []string{ln.Addr().String()}})
	if secret.IsZero() {
		auth.WarnUnauthenticated(nd.log, "socket transport")
	}
	nd.wg.Add(1)
	go nd.accept()
	nd.log.Info("socket transport listening", "addr", ln.Addr().String(), "interface", where,
		"conns", opts.Conns, "chunk", opts.Chunk, "authenticated", !secret.IsZero(), "encrypted", opts.Encrypt)
	return nd, nil
}

// Address is this rank's connection information: the listen address, the
// job hash, the rank and this NetDevice's nonce (see the package
// documentation for the layout). Peers pass it to NewEngine in
// Endpoint.Net["socket"].
func (nd *NetDevice) Address() []byte { return append([]byte(nil), nd.addr...) }

// ListenAddr is the host:port the NetDevice accepts connections on.
func (nd *NetDevice) ListenAddr() string { return nd.ln.Addr().String() }

// Rank is the rank the NetDevice was opened for.
func (nd *NetDevice) Rank() int { return nd.cfg.Rank }

// ExportPort registers b as a receive window: peers' engines may put into
// it and signal words in it. The handle (40 bytes) names the job, this
// NetDevice, the rank, a registration id and the size. Errors wrap
// hal.ErrInvalidArgument (nil or empty buffer, larger than 1 TiB, too many
// registrations) or hal.ErrInvalidUsage (closed).
func (nd *NetDevice) ExportPort(b hal.Buffer) (hal.Handle, error) {
	if b == nil || b.Size() <= 0 || b.Size() > maxBytes {
		size := int64(0)
		if b != nil {
			size = b.Size()
		}
		return nil, fmt.Errorf("socket: rank %d: export a buffer of %d bytes: want 1 byte to 1 TiB: %w", nd.cfg.Rank, size, hal.ErrInvalidArgument)
	}
	nd.regMu.Lock()
	defer nd.regMu.Unlock()
	if nd.closing.Load() {
		return nil, fmt.Errorf("socket: rank %d: export on a closed NetDevice: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	if nd.lastReg == maxReg {
		return nil, fmt.Errorf("socket: rank %d: export: %d registrations, the most one NetDevice holds: %w", nd.cfg.Rank, maxReg, hal.ErrInvalidArgument)
	}
	nd.lastReg++
	id := nd.lastReg
	nd.regs[id] = &registration{buf: b, addr: b.Addr(), size: b.Size()}
	return encodeHandle(handle{job: nd.job, nonce: nd.nonce, rank: nd.cfg.Rank, reg: id, size: b.Size()}), nil
}

// ImportPort resolves a peer's handle to a buffer whose Addr is the remote
// address engines take: the registration id and offset 0 encoded as the
// package documentation describes (Host is nil; the address is not
// dereferenceable here). Addr()+off is byte off of the peer's buffer.
//
// A handle of the wrong size, magic or version, or of a rank outside the
// job, is refused with hal.ErrInvalidArgument; a handle of another job with
// hal.ErrInvalidUsage.
func (nd *NetDevice) ImportPort(h hal.Handle) (hal.Buffer, error) {
	x, err := decodeHandle(h)
	if err != nil {
		return nil, fmt.Errorf("socket: rank %d: import: %v: %w", nd.cfg.Rank, err, hal.ErrInvalidArgument)
	}
	owner := hal.HandleOwner{Job: x.job, Rank: x.rank, Nonce: x.nonce}
	if err := hal.CheckImport(owner, hal.HandleOwner{Job: nd.job, Rank: nd.cfg.Rank, Nonce: nd.nonce}, nd.cfg.NRanks); err != nil {
		return nil, fmt.Errorf("socket: rank %d: import: %w", nd.cfg.Rank, err)
	}
	nd.regMu.Lock()
	defer nd.regMu.Unlock()
	if nd.closing.Load() {
		return nil, fmt.Errorf("socket: rank %d: import on a closed NetDevice: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	k := importKey{x.rank, x.reg}
	if e := nd.imports[k]; e != nil {
		if e.nonce != x.nonce || e.size != x.size {
			return nil, fmt.Errorf("socket: rank %d: import: registration %d of rank %d is already imported from another incarnation or with another size: %w", nd.cfg.Rank, x.reg, x.rank, hal.ErrInvalidUsage)
		}
		e.refs++
	} else {
		nd.imports[k] = &importEntry{size: x.size, nonce: x.nonce, refs: 1}
	}
	return &remoteBuffer{nd: nd, key: k, size: x.size}, nil
}

// remoteBuffer is an imported registration.
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
		return fmt.Errorf("socket: free %v: already freed: %w", b, hal.ErrInvalidUsage)
	}
	nd := b.nd
	nd.regMu.Lock()
	defer nd.regMu.Unlock()
	if e := nd.imports[b.key]; e != nil {
		if e.refs--; e.refs == 0 {
			delete(nd.imports, b.key)
		}
	}
	return nil
}

// checkRemote checks that [a, a+n) lies in a registration imported from
// rank peer (nonce: the peer's incarnation) and returns it decoded.
func (nd *NetDevice) checkRemote(peer int, nonce uint64, a uint64, n uint64, what string) error {
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
// sentinel) says what was wrong.
func (nd *NetDevice) resolve(a, n uint64, align uint64) (uint64, error) {
	reg, off, ok := decodeAddr(a)
	if !ok {
		return 0, fmt.Errorf("address %#x is not a socket-transport address", a)
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

// NewEngine connects an engine to peer, whose Endpoint.Net["socket"] holds
// its Address: Conns connections, each opened with a handshake the peer
// answers. peer may be this device's own endpoint (or carry this
// NetDevice's Address): that engine is local, copying and signalling
// within the device, and also takes addresses of this NetDevice's own
// registrations.
//
// Errors wrap hal.ErrInvalidArgument (no or a malformed address, a rank
// outside the job), hal.ErrInvalidUsage (another job's address, closed),
// hal.ErrRemote (the peer refused or is unreachable; the message names its
// rank and address) or hal.ErrTimeout.
func (nd *NetDevice) NewEngine(peer hal.Endpoint) (hal.Engine, error) {
	if nd.closing.Load() {
		return nil, fmt.Errorf("socket: rank %d: engine on a closed NetDevice: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	raw, ok := peer.Net[Name]
	if !ok {
		if sameEndpoint(peer, nd.dev.Endpoint()) {
			return nd.newLocalEngine()
		}
		return nil, fmt.Errorf("socket: rank %d: engine to %s device %d on %s: the endpoint carries no socket address (Endpoint.Net[%q]): %w",
			nd.cfg.Rank, peer.Backend, peer.Ordinal, peer.Hostname, Name, hal.ErrInvalidArgument)
	}
	a, err := decodeAddress(raw)
	if err != nil {
		return nil, fmt.Errorf("socket: rank %d: engine: peer address: %v: %w", nd.cfg.Rank, err, hal.ErrInvalidArgument)
	}
	switch {
	case a.job != nd.job:
		return nil, fmt.Errorf("socket: rank %d: engine: address of another job: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	case a.rank < 0 || a.rank >= nd.cfg.NRanks:
		return nil, fmt.Errorf("socket: rank %d: engine: address of rank %d in a job of %d ranks: %w", nd.cfg.Rank, a.rank, nd.cfg.NRanks, hal.ErrInvalidArgument)
	case a.nonce == nd.nonce:
		return nd.newLocalEngine()
	}
	return nd.dial(a)
}

func sameEndpoint(a, b hal.Endpoint) bool {
	return a.Backend == b.Backend && a.HostID == b.HostID && a.Ordinal == b.Ordinal && a.PID == b.PID && a.UUID == b.UUID
}

// Err returns the first failure of a peer seen by this NetDevice's
// receivers or engines (a peer lost, a malformed frame), or nil. Engines
// to that peer fail with it too.
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

// Refused returns the most recent handshakes this NetDevice refused
// (another job, a wrong rank, not weft at all), newest last, at most 16.
// A refused connection does not disturb the job.
func (nd *NetDevice) Refused() []error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return append([]error(nil), nd.refused...)
}

// FailPeer records that rank peer is lost, as a caller above the
// transport found it (a communicator whose progress exchange found the
// rank stopped): every engine to it fails at once with an error wrapping
// hal.ErrRemote and err, and closing those engines, or this NetDevice,
// does not wait for the peer's goodbye. A rank outside the job is ignored.
func (nd *NetDevice) FailPeer(peer int, err error) {
	if peer < 0 || peer >= nd.cfg.NRanks || peer == nd.cfg.Rank {
		return
	}
	nd.failPeer(peer, fmt.Errorf("socket: rank %d: rank %d is lost: %v: %w", nd.cfg.Rank, peer, err, hal.ErrRemote))
	nd.failEnginesTo(peer)
}

// failEnginesTo fails every engine to rank peer with the peer's recorded
// failure, so that their waits (a full request ring, a drain at Close)
// return now rather than at the timeout.
func (nd *NetDevice) failEnginesTo(peer int) {
	nd.mu.Lock()
	var to []*Engine
	for e := range nd.engines {
		if e, ok := e.(*Engine); ok && e.peer == peer {
			to = append(to, e)
		}
	}
	nd.mu.Unlock()
	for _, e := range to {
		e.check()
	}
}

// failPeer records err as rank peer's failure (the first one sticks).
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
	nd.log.Warn("socket transport: peer failed", "peer", peer, "err", err)
}

func (nd *NetDevice) refuse(err error) {
	nd.mu.Lock()
	nd.refused = append(nd.refused, err)
	if len(nd.refused) > 16 {
		nd.refused = nd.refused[len(nd.refused)-16:]
	}
	nd.mu.Unlock()
	nd.log.Warn("socket transport: connection refused", "err", err)
}

// authConfig is the handshake of this job's connections to rank dst.
func (nd *NetDevice) authConfig(dst int) auth.Config {
	return auth.Config{Secret: nd.secret, Proto: auth.ProtoSocket, Encrypt: nd.opts.Encrypt,
		Context: fmt.Sprintf("%016x to rank %d", nd.job, dst), Timeout: nd.opts.Timeout}
}

// Close closes this rank's engines (each drains its queue and says goodbye,
// bounded by the timeout), tells the engines of peers connected here that
// nothing more will be applied, closes every connection and the listener,
// and releases staging memory. It returns errors of engines that were
// never reported by an engine call; a peer's failure reported earlier is
// not repeated. Calling it twice is hal.ErrInvalidUsage.
func (nd *NetDevice) Close() error {
	nd.mu.Lock()
	if nd.closed {
		nd.mu.Unlock()
		return fmt.Errorf("socket: rank %d: NetDevice closed twice: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	nd.closed = true
	engines := make([]engineCloser, 0, len(nd.engines))
	for e := range nd.engines {
		engines = append(engines, e)
	}
	nd.mu.Unlock()
	var errs []error
	for _, e := range engines {
		if err := e.closeQuiet(); err != nil {
			errs = append(errs, err)
		}
	}
	nd.closing.Store(true)
	nd.ln.Close()
	nd.mu.Lock()
	sessions := make([]*session, 0, len(nd.sessions))
	for _, s := range nd.sessions {
		sessions = append(sessions, s)
	}
	var orphans []net.Conn
	for c := range nd.inbound {
		orphans = append(orphans, c)
	}
	nd.mu.Unlock()
	for _, s := range sessions {
		s.shutdown(replyClosing, "")
	}
	for _, c := range orphans {
		c.Close()
	}
	nd.regMu.Lock()
	clear(nd.regs)
	clear(nd.imports)
	nd.regMu.Unlock()
	done := make(chan struct{})
	go func() { nd.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(nd.opts.Timeout):
		errs = append(errs, fmt.Errorf("socket: rank %d: close: receivers did not stop within %v: %w", nd.cfg.Rank, nd.opts.Timeout, hal.ErrTimeout))
	}
	return errors.Join(errs...)
}

// accept runs the listener.
func (nd *NetDevice) accept() {
	defer nd.wg.Done()
	for {
		c, err := nd.ln.Accept()
		if err != nil {
			if nd.closing.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			nd.log.Warn("socket transport: accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !nd.gate.Enter() {
			nd.refuse(fmt.Errorf("socket: rank %d: %d connections from %s and others have not completed their handshake: closed at once: %w",
				nd.cfg.Rank, auth.MaxPending, c.RemoteAddr(), hal.ErrRemote))
			c.Close()
			continue
		}
		nd.mu.Lock()
		if nd.closing.Load() {
			nd.mu.Unlock()
			nd.gate.Leave()
			c.Close()
			return
		}
		nd.inbound[c] = struct{}{}
		nd.wg.Add(1)
		nd.mu.Unlock()
		go nd.serve(c)
	}
}

func (nd *NetDevice) forgetConn(c net.Conn) {
	nd.mu.Lock()
	delete(nd.inbound, c)
	nd.mu.Unlock()
}
