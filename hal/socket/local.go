package socket

import (
	"fmt"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/netcore"
)

// localEngine is the engine to this rank itself (netcore.LocalEngine):
// the device's own engine, with remote addresses of this NetDevice's own
// registrations (a handle exported and imported here) turned into device
// addresses.
type localEngine struct{ *netcore.LocalEngine }

func (l localEngine) closeQuiet() error { return l.CloseQuiet() }

func (nd *NetDevice) newLocalEngine() (hal.Engine, error) {
	eng, err := nd.pm.NewEngine(nd.dev.Endpoint())
	if err != nil {
		return nil, fmt.Errorf("socket: rank %d: local engine: %w", nd.cfg.Rank, err)
	}
	l, err := netcore.NewLocalEngine(Name, nd.cfg.Rank, eng, nd.reg,
		func(l *netcore.LocalEngine) bool {
			nd.mu.Lock()
			defer nd.mu.Unlock()
			if !nd.closed {
				nd.engines[localEngine{l}] = struct{}{}
			}
			return !nd.closed
		},
		func(l *netcore.LocalEngine) {
			nd.mu.Lock()
			delete(nd.engines, localEngine{l})
			nd.mu.Unlock()
		})
	if err != nil {
		return nil, err
	}
	return &localEngine{l}, nil
}
