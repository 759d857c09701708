package hip

import (
	"errors"
	"fmt"
)

// Marks gives the tickets of a port-channel engine (hal.Engine's Mark and
// Completed) for the work queued on one stream: Mark records an event from
// a preallocated ring (grown only when every event in it is outstanding)
// and Completed queries the outstanding events oldest first without
// blocking. A Mark with nothing queued since the previous one records no
// event: the newest outstanding event covers it too. One goroutine at a
// time uses a Marks; in the steady state it allocates nothing.
type Marks struct {
	stream Stream
	// Ring of outstanding marks: events[(head+i)%len] was recorded for
	// ticket tickets[...], i < count.
	events    []Event
	tickets   []uint64
	head      int
	count     int
	issued    uint64 // last ticket handed out
	completed uint64 // last ticket known complete
	dirty     bool   // work queued since the last recorded mark
}

// NewMarks returns a ring of n events (timing disabled) for stream s.
func NewMarks(s Stream, n int) (*Marks, error) {
	m := &Marks{stream: s}
	if err := m.grow(max(n, 1)); err != nil {
		return nil, err
	}
	return m, nil
}

// Queued tells m that work was queued on the stream since the last Mark.
func (m *Marks) Queued() { m.dirty = true }

// Mark returns a ticket for the work queued so far. Tickets start at 1
// and increase by one per Mark.
func (m *Marks) Mark() (uint64, error) {
	m.issued++
	t := m.issued
	switch {
	case !m.dirty && m.count == 0:
		m.completed = t
		return t, nil
	case !m.dirty:
		m.tickets[(m.head+m.count-1)%len(m.events)] = t
		return t, nil
	}
	if m.count == len(m.events) {
		if _, err := m.Completed(); err != nil {
			return 0, err
		}
		if m.count == len(m.events) {
			if err := m.grow(len(m.events)); err != nil {
				return 0, err
			}
		}
	}
	i := (m.head + m.count) % len(m.events)
	if err := m.events[i].Record(m.stream); err != nil {
		return 0, err
	}
	m.tickets[i] = t
	m.count++
	m.dirty = false
	return t, nil
}

// Completed returns the largest ticket whose work is complete. A failure
// on the stream (a fault in a copy) is the query's error.
func (m *Marks) Completed() (uint64, error) {
	for m.count > 0 {
		done, err := m.events[m.head].Query()
		if err != nil || !done {
			return m.completed, err
		}
		m.completed = m.tickets[m.head]
		m.head = (m.head + 1) % len(m.events)
		m.count--
	}
	return m.completed, nil
}

// grow adds n events to the ring, keeping the outstanding ones in order.
func (m *Marks) grow(n int) error {
	evs := make([]Event, 0, len(m.events)+n)
	tks := make([]uint64, len(m.events)+n)
	for i := 0; i < len(m.events); i++ { // outstanding first, then the free ones
		j := (m.head + i) % len(m.events)
		evs = append(evs, m.events[j])
		tks[i] = m.tickets[j]
	}
	for len(evs) < cap(evs) {
		ev, err := m.stream.Dev.EventCreate(EventDisableTiming)
		if err != nil {
			for _, x := range evs[len(m.events):] {
				x.Destroy()
			}
			return fmt.Errorf("event ring of %d: %w", cap(evs), err)
		}
		evs = append(evs, ev)
	}
	m.events, m.tickets, m.head = evs, tks, 0
	return nil
}

// Destroy destroys the events; the stream's work must be done.
func (m *Marks) Destroy() error {
	var errs []error
	for _, ev := range m.events {
		errs = append(errs, ev.Destroy())
	}
	m.events = nil
	return errors.Join(errs...)
}
