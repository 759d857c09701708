package netcore

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/weftccl/weft/hal"
)

// maxRefused is how many refused connections Failures keeps.
const maxRefused = 16

// Failures is a NetDevice's record of failed peers, first failure by
// rank, the first failure of all, and the most recent refused
// connections (at most 16). Its methods take its own lock; a backend that
// must record a failure atomically with state of its own (the set of
// engines to fail) calls them under its lock, which it always takes
// first. The zero value is ready to use.
type Failures struct {
	mu      sync.Mutex
	byRank  map[int]error
	first   error
	refused []error
	n       atomic.Int32 // len(byRank), read without mu
}

// Record records err as rank peer's failure; the first one per rank
// sticks, and so does the first of all. It reports whether err was the
// rank's first.
func (f *Failures) Record(peer int, err error) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.first == nil {
		f.first = err
	}
	if f.byRank[peer] != nil {
		return false
	}
	if f.byRank == nil {
		f.byRank = map[int]error{}
	}
	f.byRank[peer] = err
	f.n.Add(1)
	return true
}

// Err is the first failure recorded, or nil.
func (f *Failures) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first
}

// Peer is the failure recorded for rank peer, or nil.
func (f *Failures) Peer(peer int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byRank[peer]
}

// Count is how many ranks failed, without taking the lock (a fast path
// for engines that check for failures on every call).
func (f *Failures) Count() int { return int(f.n.Load()) }

// Refuse records a refused connection, keeping the newest 16.
func (f *Failures) Refuse(err error) {
	f.mu.Lock()
	f.refused = append(f.refused, err)
	if len(f.refused) > maxRefused {
		f.refused = f.refused[len(f.refused)-maxRefused:]
	}
	f.mu.Unlock()
}

// Refused is a copy of the refused connections, newest last.
func (f *Failures) Refused() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]error(nil), f.refused...)
}

// LostPeer is the failure a NetDevice's FailPeer records for rank peer,
// which the caller found lost (cause): "<name>: rank <rank>: rank <peer>
// is lost: <cause>", wrapping hal.ErrRemote. It is nil for a rank
// outside the job of nranks ranks, or rank itself: FailPeer ignores those.
func LostPeer(name string, rank, nranks, peer int, cause error) error {
	if peer < 0 || peer >= nranks || peer == rank {
		return nil
	}
	return fmt.Errorf("%s: rank %d: rank %d is lost: %v: %w", name, rank, peer, cause, hal.ErrRemote)
}
