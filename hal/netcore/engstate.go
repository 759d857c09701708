package netcore

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/weftccl/weft/hal"
)

// EngineState is a network engine's sticky failure, whether an engine
// call has returned it (so that the NetDevice's Close does not repeat
// it), and the engine's one shutdown. The zero value is a live engine.
type EngineState struct {
	err       atomic.Pointer[error]
	reported  atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Fail records err as the engine's failure if it has none yet, and
// reports whether it did.
func (s *EngineState) Fail(err error) bool { return s.err.CompareAndSwap(nil, &err) }

// Err is the engine's failure, or nil.
func (s *EngineState) Err() error {
	if p := s.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Report returns err, noting that a call returned the engine's failure
// when err is it.
func (s *EngineState) Report(err error) error {
	if p := s.err.Load(); p != nil && *p == err {
		s.reported.Store(true)
	}
	return err
}

// Close runs shutdown once and returns its error, which counts as
// reported; a second Close is an error wrapping hal.ErrInvalidUsage,
// prefixed with describe().
func (s *EngineState) Close(describe func() string, shutdown func() error) error {
	first := false
	s.closeOnce.Do(func() { first = true; s.closeErr = shutdown() })
	if !first {
		return fmt.Errorf("%s: closed twice: %w", describe(), hal.ErrInvalidUsage)
	}
	if s.closeErr != nil {
		s.reported.Store(true)
	}
	return s.closeErr
}

// CloseQuiet is Close for the NetDevice's Close: a second close is no
// error, and a failure a call already returned is not repeated.
func (s *EngineState) CloseQuiet(shutdown func() error) error {
	s.closeOnce.Do(func() { s.closeErr = shutdown() })
	if s.closeErr == nil || s.reported.Swap(true) {
		return nil
	}
	return s.closeErr
}

// Marks are an engine's tickets (hal.Tickets) over its request counts,
// safe for concurrent use: Mark covers the requests issued so far, and a
// ticket completes once that many requests are complete at the source.
type Marks struct {
	mu sync.Mutex
	t  hal.Tickets
}

// NewMarks returns marks with room for capacity outstanding tickets
// before they grow (an engine's request ring size plus 2).
func NewMarks(capacity int) *Marks { return &Marks{t: hal.MakeTickets(capacity)} }

// Mark issues a ticket covering requests 1..issued, given that requests
// 1..done are complete (a stale done is harmless).
func (m *Marks) Mark(issued, done uint64) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, _ := m.t.Mark(issued, done)
	return t
}

// Completed returns the largest complete ticket, given that requests
// 1..done are complete.
func (m *Marks) Completed(done uint64) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.t.Advance(done)
}

// CopyMark queues a copy of n bytes from src to dst on own, the device's
// own engine (staging a chunk into host memory, or applying one received
// there), and returns a ticket of own covering it. The error is own's.
func CopyMark(own hal.Engine, dst, src uint64, n int64) (uint64, error) {
	if err := own.Copy(dst, src, n); err != nil {
		return 0, err
	}
	return own.Mark()
}

// CloseQuietAll closes each engine with closeQuiet (a NetDevice's Close
// of the engines their owners left open, in the order given) and returns
// the errors, which errors.Join makes Close's.
func CloseQuietAll[E any](engines []E, closeQuiet func(E) error) []error {
	var errs []error
	for _, e := range engines {
		if err := closeQuiet(e); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
