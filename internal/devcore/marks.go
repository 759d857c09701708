package devcore

import (
	"errors"
	"fmt"

	"github.com/weftccl/weft/hal"
)

// Events are the calls Marks makes on a vendor's events (E: cuda.Event,
// hip.Event), all bound to one stream.
type Events[E any] struct {
	New     func() (E, error)     // create an event with timing disabled
	Record  func(E) error         // record it on the stream
	Query   func(E) (bool, error) // has the stream reached it? never blocks
	Destroy func(E) error
}

// Marks gives the tickets of a copy engine (hal.Engine's Mark and
// Completed) for the work queued on one stream. The ticket book is a
// hal.Tickets over the number of requests queued; what differs from the
// host and network engines is only how completion is learnt: each
// outstanding mark has an event recorded on the stream after its
// requests, and Completed queries the events oldest first without blocking
// (so marks complete one by one, through Tickets.Complete). A Mark with
// nothing queued since the previous one records no event. Events come
// from a preallocated ring, grown only when every event in it is
// outstanding, so in the steady state nothing is allocated. One goroutine
// at a time uses a Marks.
type Marks[E any] struct {
	ev     Events[E]
	events []E // events[(head+i)%len] marks the i-th outstanding mark
	head   int
	tk     hal.Tickets
	queued uint64 // requests queued
	marked uint64 // requests covered by the newest event
}

// NewMarks returns Marks with a ring of n events.
func NewMarks[E any](ev Events[E], n int) (*Marks[E], error) {
	m := &Marks[E]{ev: ev, tk: hal.MakeTickets(max(n, 1))}
	if err := m.grow(max(n, 1)); err != nil {
		return nil, err
	}
	return m, nil
}

// Queued tells m that a request was queued on the stream.
func (m *Marks[E]) Queued() { m.queued++ }

// Mark returns a ticket for the work queued so far. Errors are the
// binding's (recording or creating an event, or the query of a failed
// stream when the ring is full); no ticket is issued then.
func (m *Marks[E]) Mark() (uint64, error) {
	if m.queued > m.marked {
		if m.tk.Outstanding() == len(m.events) {
			if _, err := m.Completed(); err != nil {
				return 0, err
			}
			if m.tk.Outstanding() == len(m.events) {
				if err := m.grow(len(m.events)); err != nil {
					return 0, err
				}
			}
		}
		if err := m.ev.Record(m.events[(m.head+m.tk.Outstanding())%len(m.events)]); err != nil {
			return 0, err
		}
		m.marked = m.queued
	}
	// Completion is learnt from the events alone (Complete), so done is 0.
	t, _ := m.tk.Mark(m.queued, 0)
	return t, nil
}

// Completed returns the largest ticket whose work is complete. A failure
// on the stream (a fault in a copy) is the query's error.
func (m *Marks[E]) Completed() (uint64, error) {
	for m.tk.Outstanding() > 0 {
		done, err := m.ev.Query(m.events[m.head])
		if err != nil || !done {
			return m.tk.Completed(), err
		}
		m.tk.Complete()
		m.head = (m.head + 1) % len(m.events)
	}
	return m.tk.Completed(), nil
}

// grow adds n events to the ring: the outstanding ones first, in order,
// then the free ones, then the new ones.
func (m *Marks[E]) grow(n int) error {
	evs := make([]E, 0, len(m.events)+n)
	for i := range m.events {
		evs = append(evs, m.events[(m.head+i)%len(m.events)])
	}
	for len(evs) < cap(evs) {
		ev, err := m.ev.New()
		if err != nil {
			for _, x := range evs[len(m.events):] {
				m.ev.Destroy(x)
			}
			return fmt.Errorf("event ring of %d: %w", cap(evs), err)
		}
		evs = append(evs, ev)
	}
	m.events, m.head = evs, 0
	return nil
}

// Destroy destroys the events; the stream's work must be done.
func (m *Marks[E]) Destroy() error {
	var errs []error
	for _, ev := range m.events {
		errs = append(errs, m.ev.Destroy(ev))
	}
	m.events = nil
	return errors.Join(errs...)
}
