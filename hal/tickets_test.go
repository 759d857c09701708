package hal_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/hal"
)

// step is one call on a Tickets: a Mark of the requests issued so far
// (seq) with done of them complete, or an Advance to done.
type step struct {
	mark      bool
	seq, done uint64
	// want: the ticket of a Mark (and whether it opened a mark), or the
	// completed ticket of an Advance; then the outstanding marks.
	ticket      uint64
	added       bool
	completed   uint64
	outstanding int
}

func mark(seq, done, ticket uint64, added bool, completed uint64, outstanding int) step {
	return step{mark: true, seq: seq, done: done, ticket: ticket, added: added, completed: completed, outstanding: outstanding}
}

func advance(done, completed uint64, outstanding int) step {
	return step{done: done, completed: completed, outstanding: outstanding}
}

func TestTickets(t *testing.T) {
	for _, c := range []struct {
		name     string
		capacity int
		steps    []step
	}{
		{"nothing issued completes at once", 4, []step{
			mark(0, 0, 1, false, 1, 0),
			mark(0, 0, 2, false, 2, 0),
		}},
		{"issue then complete in order", 4, []step{
			mark(3, 0, 1, true, 0, 1),
			mark(5, 0, 2, true, 0, 2),
			advance(2, 0, 2),
			advance(3, 1, 1),
			advance(5, 2, 0),
		}},
		{"marks with nothing issued between them merge", 4, []step{
			mark(3, 0, 1, true, 0, 1),
			mark(3, 0, 2, false, 0, 1),
			mark(3, 1, 3, false, 0, 1),
			advance(3, 3, 0), // the merged mark completes the later ticket
		}},
		{"done jumps over several marks", 4, []step{
			mark(1, 0, 1, true, 0, 1),
			mark(2, 0, 2, true, 0, 2),
			mark(3, 0, 3, true, 0, 3),
			advance(10, 3, 0),
		}},
		{"a stale done does not go back", 4, []step{
			mark(2, 0, 1, true, 0, 1),
			mark(4, 0, 2, true, 0, 2),
			advance(2, 1, 1),
			advance(1, 1, 1), // an older reading of done, observed late
			advance(0, 1, 1),
			mark(4, 1, 3, false, 1, 1), // done is still 2, not 1
			advance(4, 3, 0),
		}},
		{"mark of done requests completes at once", 4, []step{
			mark(2, 0, 1, true, 0, 1),
			mark(2, 2, 2, false, 2, 0), // Mark advances first, then completes
		}},
		{"wraparound keeps order", 2, []step{
			mark(1, 0, 1, true, 0, 1),
			mark(2, 0, 2, true, 0, 2),
			advance(1, 1, 1),
			mark(3, 1, 3, true, 1, 2), // written in slot 0, after slot 1
			advance(2, 2, 1),
			mark(4, 2, 4, true, 2, 2),
			advance(3, 3, 1),
			advance(4, 4, 0),
		}},
		{"full ring grows, order kept", 2, []step{
			mark(1, 0, 1, true, 0, 1),
			mark(2, 0, 2, true, 0, 2),
			advance(1, 1, 1),
			mark(3, 1, 3, true, 1, 2),
			mark(4, 1, 4, true, 1, 3), // grows while head is not slot 0
			mark(5, 1, 5, true, 1, 4),
			advance(2, 2, 3),
			advance(3, 3, 2),
			advance(5, 5, 0),
		}},
		{"zero value grows", 0, []step{
			mark(1, 0, 1, true, 0, 1),
			advance(1, 1, 0),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tk hal.Tickets
			if c.capacity > 0 {
				tk = hal.MakeTickets(c.capacity)
			}
			for i, s := range c.steps {
				if s.mark {
					ticket, added := tk.Mark(s.seq, s.done)
					if ticket != s.ticket || added != s.added {
						t.Errorf("step %d: Mark(%d, %d) = %d, %v; want %d, %v", i, s.seq, s.done, ticket, added, s.ticket, s.added)
					}
				} else if got := tk.Advance(s.done); got != s.completed {
					t.Errorf("step %d: Advance(%d) = %d, want %d", i, s.done, got, s.completed)
				}
				if tk.Completed() != s.completed || tk.Outstanding() != s.outstanding {
					t.Errorf("step %d: completed %d with %d outstanding, want %d with %d", i, tk.Completed(), tk.Outstanding(), s.completed, s.outstanding)
				}
			}
		})
	}
}

// TestTicketsComplete: an engine completing marks one by one through
// markers of its own (GPU events) sees them in issue order.
func TestTicketsComplete(t *testing.T) {
	tk := hal.MakeTickets(1)
	var got []uint64
	if tk.Complete() != 0 {
		t.Fatal("Complete with nothing outstanding moved completion")
	}
	var seq uint64
	for i := 0; i < 5; i++ {
		seq++
		if _, added := tk.Mark(seq, 0); !added {
			t.Fatalf("Mark %d after a new request opened no mark", i)
		}
		tk.Mark(seq, 0) // shares the mark just opened
	}
	for tk.Outstanding() > 0 {
		got = append(got, tk.Complete())
	}
	if diff := cmp.Diff([]uint64{2, 4, 6, 8, 10}, got); diff != "" {
		t.Errorf("tickets completed by Complete (-want +got):\n%s", diff)
	}
	if tk.Issued() != 10 {
		t.Errorf("Issued = %d, want 10", tk.Issued())
	}
}

// TestTicketsNoAllocs: a ring sized to the engine's bound does not
// allocate, as Engine's Mark and Completed must not.
func TestTicketsNoAllocs(t *testing.T) {
	tk := hal.MakeTickets(4)
	var seq uint64
	allocs := testing.AllocsPerRun(1000, func() {
		seq++
		tk.Mark(seq, seq-1)
		tk.Mark(seq, seq-1)
		tk.Advance(seq)
	})
	if allocs != 0 {
		t.Errorf("Mark and Advance allocate %v times per round", allocs)
	}
}

// countEngine is an Engine whose Completed reports the next value of
// done, or err.
type countEngine struct {
	hal.Engine
	done  func() uint64
	err   error
	polls int
}

func (e *countEngine) Completed() (uint64, error) {
	e.polls++
	return e.done(), e.err
}

func TestAwaitTicket(t *testing.T) {
	var n uint64
	e := &countEngine{done: func() uint64 { n++; return n }}
	if err := hal.AwaitTicket(e, 5, time.Now().Add(10*time.Second)); err != nil || e.polls != 5 {
		t.Errorf("AwaitTicket of a ticket reached on the 5th poll = %v after %d polls", err, e.polls)
	}

	stuck := &countEngine{done: func() uint64 { return 2 }}
	start := time.Now()
	err := hal.AwaitTicket(stuck, 3, start.Add(5*time.Millisecond))
	if !errors.Is(err, hal.ErrTimeout) || time.Since(start) < 5*time.Millisecond {
		t.Errorf("AwaitTicket past its deadline = %v after %v, want ErrTimeout after 5ms", err, time.Since(start))
	}

	boom := errors.New("copy failed")
	failing := &countEngine{done: func() uint64 { return 0 }, err: boom}
	if err := hal.AwaitTicket(failing, 1, time.Time{}); err != boom {
		t.Errorf("AwaitTicket on a failed engine = %v, want %v", err, boom)
	}
}
