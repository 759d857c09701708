package socket

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/netcore"
	"github.com/weftccl/weft/internal/auth"
	"github.com/weftccl/weft/internal/stageprof"
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

	reg *netcore.Registry // exports and imports

	mu       sync.Mutex
	closed   bool
	engines  map[engineCloser]struct{} // engines not yet closed
	sessions map[sessionKey]*session
	inbound  map[net.Conn]struct{}

	// fails records peers' failures; failPeer records under mu, so
	// that engines created under mu see a failure or are failed by it.
	fails netcore.Failures

	closing atomic.Bool
	wg      sync.WaitGroup // accept loop and receivers
}

// engineCloser is an engine the NetDevice closes if its owner did not.
type engineCloser interface{ closeQuiet() error }

var _ hal.NetDevice = (*NetDevice)(nil)

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
	pm, secret, err := netcore.CheckOpen(Name, dev, cfg, 0, "to stage through")
	if err != nil {
		return nil, err
	}
	if opts.Encrypt && secret.IsZero() {
		return nil, fmt.Errorf("socket: open rank %d: encryption (WEFT_SOCKET_ENCRYPT) needs a job secret (hal.NetConfig.Secret), and this job has none: %w", cfg.Rank, hal.ErrInvalidArgument)
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
		engines: map[engineCloser]struct{}{}, sessions: map[sessionKey]*session{},
		inbound: map[net.Conn]struct{}{},
	}
	nd.reg = netcore.NewRegistry(Name, "socket-transport", handleFormat, hal.HandleOwner{Job: nd.job, Rank: cfg.Rank, Nonce: nonce}, cfg.NRanks, nd.closing.Load)
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
func (nd *NetDevice) ExportPort(b hal.Buffer) (hal.Handle, error) { return nd.reg.Export(b) }

// UnexportPort withdraws b's registration (hal.PortUnexporter): later
// frames naming it fail their session as naming an unknown registration,
// and it returns once no reader is storing into b's host view (at most
// the read timeout of the frame in flight). Errors wrap
// hal.ErrInvalidArgument (b not exported here).
func (nd *NetDevice) UnexportPort(b hal.Buffer) error { return nd.reg.Unexport(b) }

// HostWindows reports that the receivers read in-order puts straight
// into registrations with a host view and store signals into them with
// the CPU (hal.HostWindowed); false under Options.stagedOnly (tests).
func (nd *NetDevice) HostWindows() bool { return !nd.opts.stagedOnly }

// ImportPort resolves a peer's handle to a buffer whose Addr is the remote
// address engines take: the registration id and offset 0 encoded as the
// package documentation describes (Host is nil; the address is not
// dereferenceable here). Addr()+off is byte off of the peer's buffer.
//
// A handle of the wrong size, magic or version, or of a rank outside the
// job, is refused with hal.ErrInvalidArgument; a handle of another job with
// hal.ErrInvalidUsage.
func (nd *NetDevice) ImportPort(h hal.Handle) (hal.Buffer, error) { return nd.reg.Import(h) }

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
	raw, own, err := netcore.PeerAddress(Name, "socket", nd.cfg.Rank, peer, nd.dev.Endpoint())
	switch {
	case err != nil:
		return nil, err
	case own:
		return nd.newLocalEngine()
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

// Err returns the first failure of a peer seen by this NetDevice's
// receivers or engines (a peer lost, a malformed frame), or nil. Engines
// to that peer fail with it too.
func (nd *NetDevice) Err() error { return nd.fails.Err() }

// PeerErr returns the failure recorded for rank peer, or nil.
func (nd *NetDevice) PeerErr(peer int) error { return nd.fails.Peer(peer) }

// Refused returns the most recent handshakes this NetDevice refused
// (another job, a wrong rank, not weft at all), newest last, at most 16.
// A refused connection does not disturb the job.
func (nd *NetDevice) Refused() []error { return nd.fails.Refused() }

// FailPeer records that rank peer is lost, as a caller above the
// transport found it (a communicator whose progress exchange found the
// rank stopped): every engine to it fails at once with an error wrapping
// hal.ErrRemote and err, and closing those engines, or this NetDevice,
// does not wait for the peer's goodbye. A rank outside the job is ignored.
func (nd *NetDevice) FailPeer(peer int, err error) {
	lost := netcore.LostPeer(Name, nd.cfg.Rank, nd.cfg.NRanks, peer, err)
	if lost == nil {
		return
	}
	nd.failPeer(peer, lost)
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
	nd.fails.Record(peer, err)
	nd.mu.Unlock()
	nd.log.Warn("socket transport: peer failed", "peer", peer, "err", err)
}

func (nd *NetDevice) refuse(err error) {
	nd.fails.Refuse(err)
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
	engines := slices.Collect(maps.Keys(nd.engines))
	nd.mu.Unlock()
	errs := netcore.CloseQuietAll(engines, (engineCloser).closeQuiet)
	if err := stageprof.WriteTrace(); err != nil {
		nd.log.Warn("socket transport timeline", "err", err)
	}
	nd.closing.Store(true)
	nd.ln.Close()
	nd.mu.Lock()
	sessions := slices.Collect(maps.Values(nd.sessions))
	orphans := slices.Collect(maps.Keys(nd.inbound))
	nd.mu.Unlock()
	for _, s := range sessions {
		s.shutdown(replyClosing, "")
	}
	for _, c := range orphans {
		c.Close()
	}
	nd.reg.Clear()
	done := make(chan struct{})
	go func() { nd.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(nd.opts.Timeout):
		errs = append(errs, fmt.Errorf("socket: rank %d: close: receivers did not stop within %v: %w", nd.cfg.Rank, nd.opts.Timeout, hal.ErrTimeout))
	}
	return errors.Join(errs...)
}

// accept runs the listener (netcore.Acceptor).
func (nd *NetDevice) accept() {
	defer nd.wg.Done()
	a := netcore.Acceptor{Name: Name, What: "connections", LogName: "socket transport", Rank: nd.cfg.Rank,
		Listener: nd.ln, Gate: nd.gate, Log: nd.log, Closing: nd.closing.Load, Refuse: nd.refuse,
		Mu: &nd.mu, Inbound: nd.inbound, WG: &nd.wg, Serve: nd.serve}
	a.Run()
}

func (nd *NetDevice) forgetConn(c net.Conn) {
	nd.mu.Lock()
	delete(nd.inbound, c)
	nd.mu.Unlock()
}
