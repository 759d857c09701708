package netcore

import (
	"fmt"
	"sync"

	"github.com/weftccl/weft/hal"
)

// LocalEngine is the engine of a NetDevice to its own rank: the device's
// own engine, with remote addresses of the NetDevice's own registrations
// (a handle exported and imported here) turned into device addresses by
// the Registry. Addresses without [AddrTag] pass through unchanged.
type LocalEngine struct {
	name    string
	rank    int
	eng     hal.Engine
	reg     *Registry
	untrack func(*LocalEngine)
	once    sync.Once
	err     error
}

// NewLocalEngine wraps eng, the device's own engine, for the NetDevice of
// rank rank whose registrations reg holds. track registers the engine with
// the NetDevice (which closes it at Close) and reports false when the
// NetDevice is closed: eng is then closed and the error wraps
// hal.ErrInvalidUsage. untrack removes it at Close. name prefixes error
// messages (the backend).
func NewLocalEngine(name string, rank int, eng hal.Engine, reg *Registry, track func(*LocalEngine) bool, untrack func(*LocalEngine)) (*LocalEngine, error) {
	l := &LocalEngine{name: name, rank: rank, eng: eng, reg: reg, untrack: untrack}
	if !track(l) {
		eng.Close()
		return nil, fmt.Errorf("%s: rank %d: local engine on a closed NetDevice: %w", name, rank, hal.ErrInvalidUsage)
	}
	return l, nil
}

// local turns a's range into a device address.
func (l *LocalEngine) local(a, n, align uint64, what string) (uint64, error) {
	if a&AddrTag == 0 {
		return a, nil
	}
	d, err := l.reg.Resolve(a, n, align)
	if err != nil {
		return 0, fmt.Errorf("%s: rank %d: local engine: %s: %v: %w", l.name, l.rank, what, err, hal.ErrInvalidArgument)
	}
	return d, nil
}

// Put is Copy: the destination is this rank's.
func (l *LocalEngine) Put(dst, src uint64, bytes int64) error { return l.Copy(dst, src, bytes) }

// Copy copies bytes from src to dst on the device; either may be a remote
// address of this NetDevice's registrations. Errors wrap
// hal.ErrInvalidArgument (negative size, an address outside a
// registration) or the device engine's.
func (l *LocalEngine) Copy(dst, src uint64, bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("%s: rank %d: local engine: copy of %d bytes: %w", l.name, l.rank, bytes, hal.ErrInvalidArgument)
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

// Signal adds count to the semaphore word at semAddr (or the count word
// at countAddr, when not 0), each 8 bytes and 8-byte aligned.
func (l *LocalEngine) Signal(semAddr, countAddr, count uint64) error {
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

// Mark is the device engine's.
func (l *LocalEngine) Mark() (uint64, error) { return l.eng.Mark() }

// Completed is the device engine's.
func (l *LocalEngine) Completed() (uint64, error) { return l.eng.Completed() }

// Close closes the device engine; a second Close is hal.ErrInvalidUsage.
func (l *LocalEngine) Close() error {
	first := false
	l.once.Do(func() { first = true; l.err = l.shutdown() })
	if !first {
		return fmt.Errorf("%s: rank %d: local engine closed twice: %w", l.name, l.rank, hal.ErrInvalidUsage)
	}
	return l.err
}

// CloseQuiet closes for the NetDevice's Close: a second close is no
// error, and the engine's own close error was its owner's to see.
func (l *LocalEngine) CloseQuiet() error {
	l.once.Do(func() { l.err = l.shutdown() })
	return nil
}

func (l *LocalEngine) shutdown() error {
	l.untrack(l)
	return l.eng.Close()
}
