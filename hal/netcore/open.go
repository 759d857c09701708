package netcore

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/auth"
)

// CheckOpen is the check of Open's arguments every network makes: cfg
// names a rank of a job of 1 to maxRanks ranks (maxRanks 0: no limit), its
// job secret (if any) is well-formed, and dev is a device with a
// port-mapped engine, which the network uses for engineUse ("to stage
// through", "for local copies"). It returns that engine's mapper and the
// secret (zero without one). name prefixes errors, which wrap
// hal.ErrInvalidArgument (rank, secret, nil device) or
// hal.ErrNotSupported (no port-mapped engine).
func CheckOpen(name string, dev hal.Device, cfg hal.NetConfig, maxRanks int, engineUse string) (hal.PortMapped, auth.Secret, error) {
	var secret auth.Secret
	if cfg.NRanks < 1 || (maxRanks > 0 && cfg.NRanks > maxRanks) || cfg.Rank < 0 || cfg.Rank >= cfg.NRanks {
		return nil, secret, fmt.Errorf("%s: rank %d of %d ranks: %w", name, cfg.Rank, cfg.NRanks, hal.ErrInvalidArgument)
	}
	if cfg.Secret != nil {
		var err error
		if secret, err = auth.SecretFromBytes(cfg.Secret); err != nil {
			return nil, secret, fmt.Errorf("%s: open rank %d: NetConfig.Secret: %w", name, cfg.Rank, err)
		}
	}
	if dev == nil {
		return nil, secret, fmt.Errorf("%s: open rank %d: nil device: %w", name, cfg.Rank, hal.ErrInvalidArgument)
	}
	pm, ok := dev.(hal.PortMapped)
	if !ok || dev.Link(dev.Endpoint()).Caps&hal.CapPortMapped == 0 {
		return nil, secret, fmt.Errorf("%s: open rank %d: %s device %d has no port-mapped engine %s: %w",
			name, cfg.Rank, dev.Info().Backend, dev.Info().Ordinal, engineUse, hal.ErrNotSupported)
	}
	return pm, secret, nil
}

// Acceptor is the accept loop of a NetDevice's TCP listener (hal/socket's
// data connections, hal/ucx's side channel): it takes connections, caps
// those that have not authenticated yet with Gate (refusing the rest at
// once), and hands each admitted one to Serve on its own goroutine.
type Acceptor struct {
	Name     string       // backend, the prefix of errors: "socket"
	What     string       // what the connections are: "connections"
	LogName  string       // the transport in log lines: "socket transport"
	Rank     int          // this NetDevice's rank
	Listener net.Listener //
	Gate     *auth.Gate   // caps unauthenticated connections
	Log      *slog.Logger //
	Closing  func() bool  // the NetDevice is closing: stop
	Refuse   func(error)  // records a refused connection
	// Mu guards Inbound, where an admitted connection is recorded (the
	// NetDevice's Close closes those its sessions did not take); WG
	// counts Serve's goroutine. A connection that arrives while Closing
	// is closed, and Run stops.
	Mu      sync.Locker
	Inbound map[net.Conn]struct{}
	WG      *sync.WaitGroup
	Serve   func(c net.Conn) // serves c; calls Gate.Leave once authenticated or refused
}

// Run accepts until the listener is closed or the NetDevice closing. A
// failed Accept other than a closed listener is logged and retried after
// 10 ms (a transient EMFILE, say).
func (a *Acceptor) Run() {
	for {
		c, err := a.Listener.Accept()
		if err != nil {
			if a.Closing() || errors.Is(err, net.ErrClosed) {
				return
			}
			a.Log.Warn(a.LogName+": accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !a.Gate.Enter() {
			a.Refuse(fmt.Errorf("%s: rank %d: %d %s from %s and others have not completed their handshake: closed at once: %w",
				a.Name, a.Rank, auth.MaxPending, a.What, c.RemoteAddr(), hal.ErrRemote))
			c.Close()
			continue
		}
		a.Mu.Lock()
		if a.Closing() {
			a.Mu.Unlock()
			a.Gate.Leave()
			c.Close()
			return
		}
		a.Inbound[c] = struct{}{}
		a.WG.Add(1)
		a.Mu.Unlock()
		go a.Serve(c)
	}
}

// PeerAddress returns the address of network name that peer carries
// (Endpoint.Net[name]), as NewEngine takes it. own is true, with no
// address, when peer carries none but is self, this NetDevice's device
// (same backend, host, ordinal, process and UUID): the engine is then the
// local one. what names the address in the error ("socket"), which wraps
// hal.ErrInvalidArgument and is prefixed with name and rank.
func PeerAddress(name, what string, rank int, peer, self hal.Endpoint) (raw []byte, own bool, err error) {
	raw, ok := peer.Net[name]
	switch {
	case ok:
		return raw, false, nil
	case peer.Backend == self.Backend && peer.HostID == self.HostID && peer.Ordinal == self.Ordinal && peer.PID == self.PID && peer.UUID == self.UUID:
		return nil, true, nil
	}
	return nil, false, fmt.Errorf("%s: rank %d: engine to %s device %d on %s: the endpoint carries no %s address (Endpoint.Net[%q]): %w",
		name, rank, peer.Backend, peer.Ordinal, peer.Hostname, what, name, hal.ErrInvalidArgument)
}
