package weft

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
)

// Closing a communicator (docs/collectives.md, "Closing").
//
// A launch of a plan ends once this rank's own waits have passed, but a
// peer's launch may still store into this rank's semaphores afterwards:
// the LL plans (point-to-point, Broadcast, Reduce, the LL rings) release
// a scratch half with a signal that nothing waits for in that launch, and
// the writer takes it as a credit at the start of the launch that reuses
// the half (plan.Op.Credits). The releases of a writer's last two launches
// are never taken. If the writer closed right after its last launch, the
// reader's release would land in freed (on a GPU possibly reallocated)
// memory. (Point-to-point, Broadcast and Reduce readers send each release
// at the start of their next run, plan.Op.Deferred: the last run's is
// never sent, and plan.Plan.ReleaseLag takes it out of what is owed.)
//
// Every wait advances the expected value of its counter (plan.Plan's
// expected-value table, kept on the device), a credit wait included: after
// this rank's last launch of a plan, expected value e for the counter of
// peer p and semaphore s is exactly the number of signals p's matching
// launches send on s, because every plan's signals and waits pair up per
// launch (windowed plans' "slot free" signals skip the last windows as
// their waits skip the first ones), and credit waits count releases
// rather than wait for them. So Close needs neither a barrier nor host
// bookkeeping of launches or message sizes: before it frees anything it
// reads, per plan, the counters still below their expected value
// (channels.Resources.Owed) and polls until they reach it. The peers'
// launches that owe them are already queued or done (collectives are
// matched, and a rank's own launches have completed before it closes),
// so the wait is local: it never depends on the order in which ranks
// close communicators (one thread may close A then B while its peer
// closes B then A; a collective barrier deadlocked there).
//
// The wait is bounded by the communicator's timeout (Options.Timeout):
// past it Close logs a WARN and returns an error wrapping hal.ErrRemote
// naming the ranks that still owe releases, and frees the memory anyway.
// A plan whose launches were aborted or failed (their expected values ran
// ahead of any signal) is not waited for, also when that happens during
// the wait (Abort from another thread), nor is anything once a peer is
// known lost or ranks were found stalled. A healthy rank whose peer's
// launch failed (a count mismatch, say) does wait: nothing local tells it
// that the peer's release will not come.

// closeWaitHook, when set (tests), is called at every poll that finds
// releases still owed, with the ranks that owe them, ascending.
var closeWaitHook func(rank int, peers []int)

// closePollMax is the longest pause between two polls of the owed
// counters; pauses start at closePollMin and double.
const (
	closePollMin = 20 * time.Microsecond
	closePollMax = time.Millisecond
)

// awaitReleases waits until no plan of algos is owed a release by a peer
// (see above), the communicator's timeout passes, or a peer is lost. It
// returns nil when nothing is owed, else an error wrapping hal.ErrRemote
// (a lost peer, or releases missing at the deadline: naming the ranks,
// plans and semaphores) or an error of the device's reads.
func (c *Comm) awaitReleases(algos []*algo) error {
	log := env.Logger("INIT")
	if err := c.lostPeer(); err != nil {
		log.Debug("close: a peer was lost; not waiting for peers' releases", "rank", c.cfg.Rank, "cause", err)
		return nil
	}
	if v := c.stall.verdict.Load(); v != nil {
		log.Debug("close: ranks stalled; not waiting for peers' releases", "rank", c.cfg.Rank, "verdict", v)
		return nil
	}
	var live []*algo
	for _, a := range algos {
		if a.res.Stopped() {
			log.Debug("close: not waiting for peers' releases of a stopped plan", "rank", c.cfg.Rank, "plan", a.res.Plan.Name)
			continue
		}
		live = append(live, a)
	}
	deadline := time.Now().Add(c.timeout)
	pause := closePollMin
	for {
		type owedIn struct {
			plan string
			o    channels.Owed
		}
		var owed []owedIn
		next := live[:0]
		for _, a := range live {
			if a.res.Stopped() {
				continue // aborted (Abort from another thread) or failed meanwhile
			}
			got, err := a.res.Owed()
			if err != nil {
				return fmt.Errorf("weft: rank %d: close: %w", c.cfg.Rank, err)
			}
			for _, o := range got {
				owed = append(owed, owedIn{a.res.Plan.Name, o})
			}
			if len(got) > 0 {
				next = append(next, a)
			}
		}
		live = next
		if len(owed) == 0 {
			return nil
		}
		peers := map[int]bool{}
		for _, o := range owed {
			peers[o.o.Peer] = true
		}
		ranks := make([]int, 0, len(peers))
		for p := range peers {
			ranks = append(ranks, p)
		}
		sort.Ints(ranks)
		if closeWaitHook != nil {
			closeWaitHook(c.cfg.Rank, ranks)
		}
		if err := c.lostPeer(); err != nil {
			log.Warn("close: a peer was lost while it owed releases; freeing anyway", "rank", c.cfg.Rank, "owed_by", ranks, "cause", err)
			return fmt.Errorf("weft: rank %d: close: %s still owed semaphore releases when a peer was lost (%v): %w",
				c.cfg.Rank, ranksText(ranks), err, hal.ErrRemote)
		}
		if !time.Now().Before(deadline) {
			var what []string
			for i, o := range owed {
				if i == 4 {
					what = append(what, fmt.Sprintf("… %d more", len(owed)-i))
					break
				}
				what = append(what, fmt.Sprintf("plan %s semaphore %d from rank %d at %d of %d", o.plan, o.o.Semaphore, o.o.Peer, o.o.Observed, o.o.Expected))
			}
			log.Warn("close: peers still owe semaphore releases at the deadline; freeing anyway", "rank", c.cfg.Rank,
				"owed_by", ranks, "timeout", c.timeout, "counters", strings.Join(what, "; "))
			return fmt.Errorf("weft: rank %d: close: %s did not release this rank's semaphores within %v (%s): %w",
				c.cfg.Rank, ranksText(ranks), c.timeout, strings.Join(what, "; "), hal.ErrRemote)
		}
		time.Sleep(min(pause, time.Until(deadline)))
		pause = min(2*pause, closePollMax)
	}
}

// quiesceWait bounds awaitQuiesced's wait for the other ranks.
const quiesceWait = 10 * time.Second

// awaitQuiesced, in a communicator across nodes, waits until every rank
// has quiesced its plans (channels.Resources.Quiesce: every engine closed
// after its last request, the peers' goodbyes answered) before this rank
// withdraws its windows and closes its network: a release that a peer
// sends after its last wait — one nobody waits for, so awaitReleases
// cannot know of it — would otherwise meet a closed transport, and the
// peer's Close fail with "closed its socket transport with requests of
// this engine in flight". It does not wait where a peer is lost, the
// communicator was aborted or the ranks stalled, and at most quiesceWait
// (or the communicator's timeout, if shorter) for ranks that do not
// close: their absence is logged, not an error of Close.
func (c *Comm) awaitQuiesced() {
	if c.net == nil || c.aborted.Load() || c.lostPeer() != nil || c.stall.verdict.Load() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(c.timeout, quiesceWait))
	defer cancel()
	if _, err := c.boot.AllGather(ctx, nil); err != nil {
		env.Logger("INIT").Warn("close: not every rank quiesced its network plans; freeing anyway", "rank", c.cfg.Rank, "err", err)
	}
}
