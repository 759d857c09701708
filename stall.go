package weft

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
)

// A wait that passes its deadline names the peer it waited for, but that
// peer may itself be waiting for a third rank: blaming it would send the
// user after a healthy rank. So before a communicator reports a timeout or
// a lost connection, it asks every rank over the bootstrap, with a short
// deadline, how far it got (progressReport), and names the ranks that
// stopped making progress: those that answer nothing (a stopped process
// still holds its connections open, but its readers do not run), that
// cannot be reached, or whose count of collective calls is behind every
// other rank's. A rank that reached a verdict announces it before it
// returns, so that a rank probing after it has left knows it left because
// of the failure and not as its cause.

// StallError reports ranks that stopped making progress in a collective:
// a wait of this rank passed its deadline (or a connection was lost), and
// the progress exchange between the ranks singled them out. It wraps
// hal.ErrRemote and the failure that started the exchange (Cause: usually
// a *hal.TimeoutError naming the peer this rank waited for, which need not
// be one of Ranks).
type StallError struct {
	Rank  int      // the rank that reports
	Ranks []int    // the ranks that stopped making progress, ascending
	Why   []string // for each of Ranks, how the exchange found it
	Cause error
}

// Error names the reporting rank, the ranks that stopped and why, and the
// failure that started the exchange.
func (e *StallError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rank %d: %s stopped making progress (", e.Rank, ranksText(e.Ranks))
	for i := range e.Ranks {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "rank %d %s", e.Ranks[i], e.Why[i])
	}
	b.WriteString(")")
	if e.Cause != nil {
		fmt.Fprintf(&b, "; first seen as: %v", e.Cause)
	}
	return b.String()
}

// Unwrap returns hal.ErrRemote and Cause.
func (e *StallError) Unwrap() []error {
	if e.Cause == nil {
		return []error{hal.ErrRemote}
	}
	return []error{hal.ErrRemote, e.Cause}
}

func ranksText(rs []int) string {
	if len(rs) == 1 {
		return "rank " + strconv.Itoa(rs[0])
	}
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = strconv.Itoa(r)
	}
	return "ranks " + strings.Join(s, ", ")
}

// stallState is a communicator's part of the progress exchange.
type stallState struct {
	calls   atomic.Uint64 // collective and point-to-point calls launched
	mu      sync.Mutex    // serialises diagnoses
	verdict atomic.Pointer[StallError]
}

// progressReport is what a rank answers a probe with (JSON).
type progressReport struct {
	Calls   uint64 `json:"calls"`             // calls this communicator launched
	Stalled []int  `json:"stalled,omitempty"` // this rank's verdict, once it reached one
}

// report is this rank's progress report; the bootstrap's readers call it.
func (c *Comm) report() []byte {
	r := progressReport{Calls: c.stall.calls.Load()}
	if v := c.stall.verdict.Load(); v != nil {
		r.Stalled = v.Ranks
	}
	b, _ := json.Marshal(r)
	return b
}

// startProgress makes the bootstrap answer peers' probes with this
// communicator's report.
func (c *Comm) startProgress() {
	if p, ok := c.boot.(bootstrap.Prober); ok {
		p.SetProgress(c.report)
	}
}

// probeWindow bounds a progress probe: a quarter of the timeout, at least
// 250 ms and at most 5 s, so that the report comes within 1.25 × the
// timeout of the stall while a healthy rank short of CPU (its answer
// takes a goroutine and one small write) still gets to answer.
func (c *Comm) probeWindow() time.Duration {
	return min(max(c.timeout/4, 250*time.Millisecond), 5*time.Second)
}

// diagnose turns cause, a timeout or a lost peer that this rank saw, into
// a *StallError naming the ranks that stopped making progress, when the
// progress exchange finds any; otherwise it returns cause. The first
// verdict sticks: later calls return it at once. It aborts the device's
// waits, tells the network that the stalled ranks are lost (so that
// closing does not wait for them) and announces the verdict to the other
// ranks.
func (c *Comm) diagnose(cause error) error {
	if v := c.stall.verdict.Load(); v != nil {
		return v
	}
	if !errors.Is(cause, hal.ErrTimeout) && !errors.Is(cause, hal.ErrRemote) {
		return cause
	}
	p, ok := c.boot.(bootstrap.Prober)
	if !ok {
		return cause
	}
	c.stall.mu.Lock()
	defer c.stall.mu.Unlock()
	if v := c.stall.verdict.Load(); v != nil {
		return v
	}
	if errors.Is(cause, hal.ErrTimeout) {
		logPortState(c.cfg.Rank, cause)
	}
	if berr := c.boot.Err(); berr != nil {
		// The bootstrap lost a rank: it names the one whose connection
		// ended, which no probe can reach any more. If that rank had
		// announced a verdict, it left because of the stall it found.
		return c.verdictOfLost(p, cause)
	}
	window := c.probeWindow()
	ctx, cancel := context.WithTimeout(context.Background(), window)
	peers := p.ProbeProgress(ctx)
	cancel()
	ranks, why := judge(c.cfg.Rank, peers, window)
	if len(ranks) == 0 {
		return cause
	}
	return c.conclude(p, &StallError{Rank: c.cfg.Rank, Ranks: ranks, Why: why, Cause: cause})
}

// logPortState logs, once per process, the port channels' FIFOs and
// engines (channels.DebugState) when a wait of rank timed out and a port
// plan is set up: whether the awaited signal was never asked of an engine,
// or asked and not executed, is what tells a lost trigger from a held-up
// copy engine.
func logPortState(rank int, cause error) {
	portStateOnce.Do(func() {
		if st := channels.DebugState(); strings.Contains(st, "  fifo ") {
			env.Logger("PROXY").Warn("port channels at a timed-out wait", "rank", rank, "cause", cause, "state", st)
		}
	})
}

var portStateOnce sync.Once

// conclude records v, stops the device's waits, releases the network's
// engines to the stalled ranks and announces v.
func (c *Comm) conclude(p bootstrap.Prober, v *StallError) error {
	c.stall.verdict.Store(v)
	c.Abort()
	if c.net != nil {
		for _, r := range v.Ranks {
			c.net.FailPeer(r, v)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.probeWindow())
	p.Announce(ctx, c.report())
	cancel()
	return v
}

// verdictOfLost handles a bootstrap that lost a rank: when one of the
// probe's last reports (an announcement of a rank that left) names
// stalled ranks, that verdict is adopted.
func (c *Comm) verdictOfLost(p bootstrap.Prober, cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	peers := p.ProbeProgress(ctx)
	cancel()
	for _, pp := range peers {
		if pp.Rank == c.cfg.Rank {
			continue
		}
		var r progressReport
		if json.Unmarshal(pp.Report, &r) == nil && len(r.Stalled) > 0 && !slices.Contains(r.Stalled, c.cfg.Rank) {
			why := make([]string, len(r.Stalled))
			for i := range why {
				why[i] = "was found stalled by rank " + strconv.Itoa(pp.Rank) + ", which then left"
			}
			return c.conclude(p, &StallError{Rank: c.cfg.Rank, Ranks: slices.Clone(r.Stalled), Why: why, Cause: cause})
		}
	}
	return cause
}

// judge picks the ranks that stopped making progress from a probe's
// results: those that answered nothing or could not be reached, and those
// whose call count is behind every other answering rank's. A rank that
// left is blamed only when nothing else is found and it announced no
// verdict (it left the job early rather than because of the failure).
// Why says, per rank, how it was found.
func judge(me int, peers []bootstrap.PeerProgress, window time.Duration) (ranks []int, why []string) {
	calls := map[int]uint64{}
	var left []int
	for _, p := range peers {
		switch p.State {
		case bootstrap.PeerAnswered:
			var r progressReport
			if err := json.Unmarshal(p.Report, &r); err == nil {
				calls[p.Rank] = r.Calls
			}
		case bootstrap.PeerSilent:
			ranks = append(ranks, p.Rank)
			why = append(why, fmt.Sprintf("did not answer a progress probe within %v (stopped or hung)", window))
		case bootstrap.PeerUnreachable:
			ranks = append(ranks, p.Rank)
			why = append(why, "cannot be reached over the bootstrap")
		case bootstrap.PeerLeft:
			var r progressReport
			if json.Unmarshal(p.Report, &r) != nil || len(r.Stalled) == 0 {
				left = append(left, p.Rank)
			}
		}
	}
	// Behind: fewer calls than every other rank that answered, this rank
	// included (it is waiting in a call, so it is not the one behind).
	if len(calls) >= 2 {
		for r, n := range calls {
			if r == me {
				continue
			}
			behind := true
			for q, m := range calls {
				if q != r && n >= m {
					behind = false
				}
			}
			if behind {
				ranks = append(ranks, r)
				why = append(why, fmt.Sprintf("is behind: %d calls launched, the others %s", n, otherCalls(calls, r)))
			}
		}
	}
	if len(ranks) == 0 {
		for _, r := range left {
			ranks = append(ranks, r)
			why = append(why, "left the job (closed its bootstrap) without reporting a failure")
		}
	}
	if len(ranks) == 0 {
		return nil, nil
	}
	// Ascending, with why in step.
	idx := make([]int, len(ranks))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return ranks[a] - ranks[b] })
	sr, sw := make([]int, len(idx)), make([]string, len(idx))
	for i, j := range idx {
		sr[i], sw[i] = ranks[j], why[j]
	}
	return sr, sw
}

func otherCalls(calls map[int]uint64, except int) string {
	rs := make([]int, 0, len(calls))
	for r := range calls {
		if r != except {
			rs = append(rs, r)
		}
	}
	slices.Sort(rs)
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmt.Sprintf("rank %d: %d", r, calls[r])
	}
	return strings.Join(s, ", ")
}
