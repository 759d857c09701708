package hal

import (
	"fmt"
	"time"
)

// Tickets is the ticket book of an [Engine]'s Mark and Completed, written
// once for every backend. The engine numbers its requests 1, 2, … in issue
// order and knows how many of them are complete at the source ("done", a
// count that only grows, however the engine learns it: a worker's counter,
// polled work completions, a GPU event that has been reached). A ticket
// covers the requests issued up to its Mark; tickets start at 1 and
// increase by one per Mark, as Engine says.
//
// Outstanding marks are kept in a ring, oldest first. A Mark with no
// request issued since the previous one shares that mark (the later ticket
// covers the earlier), and a Mark whose requests are all done completes at
// once, so an engine with at most n requests in flight has at most n+1
// marks outstanding. The ring grows (doubling) only when every slot is
// outstanding: an engine that sizes it with [MakeTickets] to its bound never
// allocates in Mark or Completed, as Engine requires.
//
// Tickets is not safe for concurrent use; the engine guards it with its
// own lock, or calls it from the proxy's goroutine only.
type Tickets struct {
	ring      []ticketMark
	head      int // index of the oldest outstanding mark
	count     int // outstanding marks
	issued    uint64
	completed uint64
	done      uint64 // largest request count known complete
}

// ticketMark is an outstanding mark: ticket covers requests 1..seq.
type ticketMark struct{ ticket, seq uint64 }

// MakeTickets returns a ticket book whose ring holds capacity outstanding
// marks before it grows (at least 1).
func MakeTickets(capacity int) Tickets {
	return Tickets{ring: make([]ticketMark, max(capacity, 1))}
}

// Mark issues the next ticket, covering requests 1..seq (the requests
// issued so far), given that requests 1..done are complete. added reports
// whether the ticket opened a new outstanding mark; it is false when the
// ticket shares the newest outstanding mark or is complete at once. An
// engine that learns of completion through markers of its own (a GPU event
// recorded on a stream) places one exactly when added is true: the markers
// then correspond one to one, in order, with the outstanding marks.
func (t *Tickets) Mark(seq, done uint64) (ticket uint64, added bool) {
	t.Advance(done)
	t.issued++
	ticket = t.issued
	switch {
	case t.count == 0 && seq <= t.done:
		t.completed = ticket
		return ticket, false
	case t.count > 0 && t.ring[(t.head+t.count-1)%len(t.ring)].seq == seq:
		t.ring[(t.head+t.count-1)%len(t.ring)].ticket = ticket
		return ticket, false
	}
	if t.count == len(t.ring) {
		t.grow()
	}
	t.ring[(t.head+t.count)%len(t.ring)] = ticketMark{ticket: ticket, seq: seq}
	t.count++
	return ticket, true
}

// Advance retires the marks whose requests are complete (requests 1..done)
// and returns the largest complete ticket. A done smaller than one seen
// before (a stale reading) changes nothing: completion never goes back.
func (t *Tickets) Advance(done uint64) uint64 {
	t.done = max(t.done, done)
	for t.count > 0 && t.ring[t.head].seq <= t.done {
		t.completed = t.ring[t.head].ticket
		t.head = (t.head + 1) % len(t.ring)
		t.count--
	}
	return t.completed
}

// Complete retires the oldest outstanding mark as complete (its marker, a
// GPU event, has been reached) and returns the largest complete ticket;
// with no mark outstanding it changes nothing.
func (t *Tickets) Complete() uint64 {
	if t.count > 0 {
		return t.Advance(t.ring[t.head].seq)
	}
	return t.completed
}

// Completed returns the largest complete ticket without advancing.
func (t *Tickets) Completed() uint64 { return t.completed }

// Issued returns the last ticket issued (0 before the first Mark).
func (t *Tickets) Issued() uint64 { return t.issued }

// Outstanding returns the number of marks not yet complete.
func (t *Tickets) Outstanding() int { return t.count }

// grow doubles the ring (from 8 for a zero Tickets), keeping the
// outstanding marks in order.
func (t *Tickets) grow() {
	ring := make([]ticketMark, max(2*len(t.ring), 8))
	for i := 0; i < t.count; i++ {
		ring[i] = t.ring[(t.head+i)%len(t.ring)]
	}
	t.ring, t.head = ring, 0
}

// AwaitTicket polls e.Completed until it reaches ticket or the deadline
// passes (a zero deadline never passes), sleeping 10 µs between polls. It
// returns Completed's error, or one wrapping ErrTimeout that names the
// ticket and the completed one. It is for callers that may block (tests,
// Close); a proxy polls Completed itself.
func AwaitTicket(e Engine, ticket uint64, deadline time.Time) error {
	for {
		done, err := e.Completed()
		switch {
		case err != nil:
			return err
		case done >= ticket:
			return nil
		case !deadline.IsZero() && !time.Now().Before(deadline):
			return fmt.Errorf("engine ticket %d not complete by the deadline (completed %d): %w", ticket, done, ErrTimeout)
		}
		time.Sleep(10 * time.Microsecond)
	}
}
