package netplugin

import (
	"fmt"
	"sync"

	"github.com/weftccl/weft/hal"
)

// localEngine is the engine to this rank itself: the device's own engine,
// with remote addresses of this NetDevice's own registrations (a handle
// exported and imported here) turned into device addresses.
type localEngine struct {
	nd   *NetDevice
	eng  hal.Engine
	once sync.Once
	err  error
}

func (nd *NetDevice) newLocalEngine() (hal.Engine, error) {
	eng, err := nd.pm.NewEngine(nd.dev.Endpoint())
	if err != nil {
		return nil, fmt.Errorf("netplugin: rank %d: local engine: %w", nd.cfg.Rank, err)
	}
	l := &localEngine{nd: nd, eng: eng}
	nd.mu.Lock()
	closed := nd.closed
	if !closed {
		nd.locals[l] = struct{}{}
	}
	nd.mu.Unlock()
	if closed {
		eng.Close()
		return nil, fmt.Errorf("netplugin: rank %d: local engine on a closed NetDevice: %w", nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	return l, nil
}

// local turns a's range into a device address.
func (l *localEngine) local(a, n, align uint64, what string) (uint64, error) {
	if a&addrTag == 0 {
		return a, nil
	}
	d, err := l.nd.resolve(a, n, align)
	if err != nil {
		return 0, fmt.Errorf("netplugin: rank %d: local engine: %s: %v: %w", l.nd.cfg.Rank, what, err, hal.ErrInvalidArgument)
	}
	return d, nil
}

func (l *localEngine) Put(dst, src uint64, bytes int64) error { return l.Copy(dst, src, bytes) }

func (l *localEngine) Copy(dst, src uint64, bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("netplugin: rank %d: local engine: copy of %d bytes: %w", l.nd.cfg.Rank, bytes, hal.ErrInvalidArgument)
	}
	d, err := l.local(dst, uint64(bytes), 1, "destination")
	if err != nil {
		return err
	}
	s, err := l.local(src, uint64(bytes), 1, "source")
	if err != nil {
		return err
	}
	return l.eng.Copy(d, s, bytes)
}

func (l *localEngine) Signal(semAddr, countAddr, count uint64) error {
	sem, err := l.local(semAddr, 8, 8, "semaphore")
	if err != nil {
		return err
	}
	cnt := countAddr
	if countAddr != 0 {
		if cnt, err = l.local(countAddr, 8, 8, "count word"); err != nil {
			return err
		}
	}
	return l.eng.Signal(sem, cnt, count)
}

func (l *localEngine) Mark() (uint64, error)      { return l.eng.Mark() }
func (l *localEngine) Completed() (uint64, error) { return l.eng.Completed() }

func (l *localEngine) Close() error {
	first := false
	l.once.Do(func() { first = true; l.err = l.shutdown() })
	if !first {
		return fmt.Errorf("netplugin: rank %d: local engine closed twice: %w", l.nd.cfg.Rank, hal.ErrInvalidUsage)
	}
	return l.err
}

func (l *localEngine) closeQuiet() error {
	l.once.Do(func() { l.err = l.shutdown() })
	return nil
}

func (l *localEngine) shutdown() error {
	l.nd.mu.Lock()
	delete(l.nd.locals, l)
	l.nd.mu.Unlock()
	return l.eng.Close()
}
