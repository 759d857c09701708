package bootstrap

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Progress probes let a rank whose wait passed its deadline ask the others
// how far they got before it blames anyone: the peer it waited for may
// itself be waiting for a third rank. Every rank answers probes from its
// connection readers with the report its progress function returns, so a
// rank whose process is stopped (SIGSTOP), or whose bootstrap is wedged,
// answers nothing while its connections stay open. Reports are opaque
// bytes to the bootstrap; the communicator defines them.
//
// The messages are msgProgressQuery (tag: the probe id, no payload) and
// msgProgress (the report: tag 0 for an announcement that nobody asked
// for, else the id of the probe it answers). They use neither the
// mailbox nor the collective sequence, so probes may run at any time,
// also while a collective of the bootstrap is pending.

// Prober is the progress exchange; the Bootstraps of this package
// (Connect, Launch.Connect, NewLocal) implement it.
type Prober interface {
	// SetProgress installs the function that answers peers' probes.
	SetProgress(fn func() []byte)
	// Announce sends a report to every rank that is still there.
	Announce(ctx context.Context, report []byte)
	// ProbeProgress asks every rank for its report.
	ProbeProgress(ctx context.Context) []PeerProgress
}

var _ Prober = (*core)(nil)

// MaxProgressReport is the largest report, in bytes, a progress function
// may return; longer ones are cut.
const MaxProgressReport = 4 << 10

// PeerState is what a progress probe learned of one rank.
type PeerState uint8

const (
	// PeerAnswered: the rank answered the probe (this rank too).
	PeerAnswered PeerState = iota + 1
	// PeerSilent: the rank's connection is open but it sent no answer by
	// the probe's deadline: stopped, or not running its bootstrap.
	PeerSilent
	// PeerLeft: the rank closed its bootstrap (said goodbye) before it
	// answered.
	PeerLeft
	// PeerUnreachable: the probe could not be delivered to the rank, or
	// the bootstrap failed (a lost peer) before it answered.
	PeerUnreachable
)

func (s PeerState) String() string {
	switch s {
	case PeerAnswered:
		return "answered"
	case PeerSilent:
		return "silent"
	case PeerLeft:
		return "left"
	case PeerUnreachable:
		return "unreachable"
	}
	return "unknown"
}

// PeerProgress is one rank's entry in the result of ProbeProgress.
type PeerProgress struct {
	Rank  int
	State PeerState
	// Report is the rank's answer when State is PeerAnswered; otherwise
	// the last report it announced (Announce) or sent, or nil.
	Report []byte
}

// progress is a core's probe state.
type progress struct {
	mu      sync.Mutex
	fn      func() []byte
	nextID  uint32
	latest  map[int][]byte            // last report received from each peer
	pending map[uint32]map[int][]byte // probe id → answers so far
	changed chan struct{}             // closed and replaced on every answer
}

// init makes the maps; called with mu held.
func (p *progress) init() {
	if p.latest == nil {
		p.latest = map[int][]byte{}
		p.pending = map[uint32]map[int][]byte{}
		p.changed = make(chan struct{})
	}
}

// SetProgress installs the function whose result answers the probes of
// peers (at most MaxProgressReport bytes; nil answers with an empty
// report). It is called from the bootstrap's connection readers, so it
// must not block: read counters, do not wait for locks held across
// device waits. Without one, a rank answers with an empty report.
func (c *core) SetProgress(fn func() []byte) {
	c.prog.mu.Lock()
	c.prog.fn = fn
	c.prog.mu.Unlock()
}

func (c *core) ownReport() []byte {
	c.prog.mu.Lock()
	fn := c.prog.fn
	c.prog.mu.Unlock()
	if fn == nil {
		return []byte{}
	}
	r := fn()
	if len(r) > MaxProgressReport {
		r = r[:MaxProgressReport]
	}
	if r == nil {
		r = []byte{}
	}
	return r
}

// progressIn handles a progress message from peer; the transports call it
// from their readers. A query is answered from a goroutine of its own, so
// that a slow peer cannot hold up the reader.
func (c *core) progressIn(peer int, typ msgType, tag uint32, data []byte) {
	if typ == msgProgressQuery {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
			defer cancel()
			if err := c.send(ctx, c.deadline(ctx), peer, msgProgress, tag, c.ownReport()); err != nil {
				c.log.Debug("progress answer not sent", "peer", peer, "err", err)
			}
		}()
		return
	}
	p := &c.prog
	p.mu.Lock()
	p.init()
	p.latest[peer] = data
	if got, ok := p.pending[tag]; ok && tag != 0 {
		got[peer] = data
	}
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// Announce sends report to every other rank that has not closed its
// bootstrap, without being asked: peers keep the last report of each rank
// and return it from ProbeProgress even after the rank has left. A rank
// announces what it concluded before it leaves a failed job, so that ranks
// probing later know why it left. It returns once every send is done or
// ctx ends (ctx's deadline, or the bootstrap timeout); errors are ignored
// (the peer may be the lost one).
func (c *core) Announce(ctx context.Context, report []byte) {
	if len(report) > MaxProgressReport {
		report = report[:MaxProgressReport]
	}
	deadline := c.deadline(ctx)
	var wg sync.WaitGroup
	for _, p := range c.others() {
		if c.box.isGone(p) {
			continue
		}
		wg.Go(func() { c.send(ctx, deadline, p, msgProgress, 0, report) })
	}
	wg.Wait()
}

// ProbeProgress asks every other rank for its progress report and waits
// until each has answered, has left, or cannot be reached, or until ctx's
// deadline (the bootstrap timeout when ctx has none; callers pass a short
// one, such as a second). It returns one entry per rank, this rank's own
// report at index Rank(). It works while collectives of the bootstrap are
// pending, and does not fail the bootstrap; after Close every peer is
// PeerUnreachable.
func (c *core) ProbeProgress(ctx context.Context) []PeerProgress {
	out := make([]PeerProgress, c.size)
	out[c.rank] = PeerProgress{Rank: c.rank, State: PeerAnswered, Report: c.ownReport()}
	p := &c.prog
	p.mu.Lock()
	p.init()
	p.nextID++
	if p.nextID == 0 {
		p.nextID = 1 // 0 marks announcements
	}
	id := p.nextID
	got := map[int][]byte{}
	p.pending[id] = got
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
	}()

	deadline := c.deadline(ctx)
	var (
		mu      sync.Mutex
		unreach = map[int]bool{}
		wg      sync.WaitGroup
	)
	for _, peer := range c.others() {
		out[peer].Rank = peer
		if c.box.isGone(peer) {
			continue
		}
		wg.Go(func() {
			if err := c.send(ctx, deadline, peer, msgProgressQuery, id, nil); err != nil {
				mu.Lock()
				unreach[peer] = true
				mu.Unlock()
				p.mu.Lock()
				close(p.changed)
				p.changed = make(chan struct{})
				p.mu.Unlock()
			}
		})
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		p.mu.Lock()
		changed := p.changed
		p.mu.Unlock()
		c.box.mu.Lock()
		boxWake := c.box.wake
		c.box.mu.Unlock()
		open := 0
		for _, peer := range c.others() {
			p.mu.Lock()
			_, answered := got[peer]
			p.mu.Unlock()
			mu.Lock()
			u := unreach[peer]
			mu.Unlock()
			if !answered && !u && !c.box.isGone(peer) {
				open++
			}
		}
		if open == 0 {
			break
		}
		stop := false
		select {
		case <-changed:
		case <-boxWake:
		case <-c.failed:
			// A peer was lost: those that have not answered by now may
			// be it; wait no longer than the answers in flight need.
			graceWait(ctx, timer, 50*time.Millisecond)
			stop = true
		case <-c.closed:
			stop = true
		case <-ctx.Done():
			stop = true
		case <-timer.C:
			stop = true
		}
		if stop {
			break
		}
	}
	wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	failed := c.Err() != nil
	for _, peer := range c.others() {
		e := &out[peer]
		if r, ok := got[peer]; ok {
			e.State, e.Report = PeerAnswered, r
			continue
		}
		e.Report = slices.Clone(p.latest[peer])
		switch {
		case c.box.isGone(peer):
			e.State = PeerLeft
		case unreach[peer] || failed:
			e.State = PeerUnreachable
		default:
			e.State = PeerSilent
		}
	}
	select {
	case <-c.closed:
		for _, peer := range c.others() {
			if out[peer].State != PeerAnswered {
				out[peer].State = PeerUnreachable
			}
		}
	default:
	}
	return out
}

// graceWait waits d, or less if ctx or timer end first.
func graceWait(ctx context.Context, timer *time.Timer, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-timer.C:
	}
}
