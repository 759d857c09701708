package netplugin

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/netcore"
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

	reg *netcore.Registry // exports and imports

	mu      sync.Mutex
	closed  bool
	links   map[int]*link
	engines map[*Engine]struct{}
	locals  map[*netcore.LocalEngine]struct{}
	changed notifier // a link became ready or failed, an engine closed

	// fails records peers' failures (recorded under mu).
	fails netcore.Failures

	crash atomic.Bool // tests: stop as a crashed process would, without goodbyes
	wake  chan struct{}
	stop  chan struct{}
	done  chan struct{}
}

var _ hal.NetDevice = (*NetDevice)(nil)

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
	pm, secret, err := netcore.CheckOpen(Name, dev, cfg, 0, "to stage through")
	if err != nil {
		return nil, err
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
		links: map[int]*link{}, engines: map[*Engine]struct{}{}, locals: map[*netcore.LocalEngine]struct{}{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		listens: make([]*ncclnet.Listen, cfg.NRanks),
	}
	nd.reg = netcore.NewRegistry(Name, "plugin-transport", handleFormat, hal.HandleOwner{Job: nd.job, Rank: cfg.Rank, Nonce: nd.nonce}, cfg.NRanks, nd.isClosed)
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
func (nd *NetDevice) ExportPort(b hal.Buffer) (hal.Handle, error) { return nd.reg.Export(b) }

// UnexportPort withdraws b's registration (hal.PortUnexporter): later
// messages naming it fail the link as naming an unknown registration.
// Errors wrap hal.ErrInvalidArgument (b not exported here).
func (nd *NetDevice) UnexportPort(b hal.Buffer) error { return nd.reg.Unexport(b) }

// ImportPort resolves a peer's handle to a buffer whose Addr is the remote
// address engines take (Host is nil). A malformed handle or one of a rank
// outside the job is refused with hal.ErrInvalidArgument, another job's
// with hal.ErrInvalidUsage.
func (nd *NetDevice) ImportPort(h hal.Handle) (hal.Buffer, error) { return nd.reg.Import(h) }

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
	raw, own, err := netcore.PeerAddress(Name, "plugin", nd.cfg.Rank, peer, nd.dev.Endpoint())
	switch {
	case err != nil:
		return nil, err
	case own:
		return nd.newLocalEngine()
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
		ch := nd.changed.Wait()
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
func (nd *NetDevice) Err() error { return nd.fails.Err() }

// PeerErr returns the failure recorded for rank peer, or nil.
func (nd *NetDevice) PeerErr(peer int) error { return nd.fails.Peer(peer) }

// Refused returns the most recent connections this NetDevice refused
// (another job, a wrong rank or incarnation, a failed challenge), newest
// last, at most 16. A refused connection does not disturb the job.
func (nd *NetDevice) Refused() []error { return nd.fails.Refused() }

// FailPeer records that rank peer is lost, as the caller found it (a
// communicator whose progress exchange found the rank stopped): engines
// to it fail at once with an error wrapping hal.ErrRemote and err, and
// closing them does not wait for the peer. A rank outside the job is
// ignored.
func (nd *NetDevice) FailPeer(peer int, err error) {
	lost := netcore.LostPeer(Name, nd.cfg.Rank, nd.cfg.NRanks, peer, err)
	if lost == nil {
		return
	}
	nd.failPeer(peer, lost)
	nd.kick()
}

func (nd *NetDevice) failPeer(peer int, err error) {
	nd.mu.Lock()
	nd.fails.Record(peer, err)
	nd.mu.Unlock()
	nd.changed.Notify()
	nd.log.Warn("net plugin transport: peer failed", "peer", peer, "err", err)
}

func (nd *NetDevice) refuse(err error) {
	nd.fails.Refuse(err)
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
	engines := slices.Collect(maps.Keys(nd.engines))
	locals := slices.Collect(maps.Keys(nd.locals))
	nd.mu.Unlock()
	errs := netcore.CloseQuietAll(engines, (*Engine).closeQuiet)
	netcore.CloseQuietAll(locals, (*netcore.LocalEngine).CloseQuiet) // never an error

	nd.mu.Lock()
	nd.closed = true
	nd.mu.Unlock()
	nd.changed.Notify()
	// The progress goroutine says "closing" on every link, waits (at
	// most the timeout) for those messages and the copies of received
	// data, and releases every plugin object.
	close(nd.stop)
	select {
	case <-nd.done:
	case <-time.After(2*nd.opts.Timeout + time.Second):
		errs = append(errs, fmt.Errorf("netplugin: rank %d: close: the progress goroutine did not stop within %v: %w", nd.cfg.Rank, 2*nd.opts.Timeout, hal.ErrTimeout))
	}
	nd.reg.Clear()
	return errors.Join(errs...)
}
