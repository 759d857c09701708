package netplugin

import (
	"fmt"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/netcore"
)

// newLocalEngine returns the engine to this rank itself
// (netcore.LocalEngine): the device's own engine, with remote addresses
// of this NetDevice's own registrations turned into device addresses.
func (nd *NetDevice) newLocalEngine() (hal.Engine, error) {
	eng, err := nd.pm.NewEngine(nd.dev.Endpoint())
	if err != nil {
		return nil, fmt.Errorf("netplugin: rank %d: local engine: %w", nd.cfg.Rank, err)
	}
	l, err := netcore.NewLocalEngine(Name, nd.cfg.Rank, eng, nd.reg,
		func(l *netcore.LocalEngine) bool {
			nd.mu.Lock()
			defer nd.mu.Unlock()
			if !nd.closed {
				nd.locals[l] = struct{}{}
			}
			return !nd.closed
		},
		func(l *netcore.LocalEngine) {
			nd.mu.Lock()
			delete(nd.locals, l)
			nd.mu.Unlock()
		})
	if err != nil {
		return nil, err
	}
	return l, nil
}
