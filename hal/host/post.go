package host

import (
	"sync/atomic"

	"github.com/weftccl/weft/hal/plan"
)

// Posted receive buffers (zero-copy point-to-point): the interpreter's
// side of the exchange that hal/plan/posted.go describes and
// weft_channels.h's post_recv, post_take and post_done run on GPUs.

// mailbox is the counter (count false) or count word of mailbox word k of
// this block, in region sems, as signalled by rank from.
func (b *blockCtx) mailbox(sems []byte, q *plan.Post, from, k int, count bool) *uint64 {
	s := plan.PostMailbox(q.Sem, b.g.Blocks, b.part, k)
	if count {
		return u64(sems, b.p.CountOffset(from, s))
	}
	return u64(sems, b.p.InboundOffset(from, s))
}

// exchangePost runs the block's side of its group's exchange. done: the
// group has nothing left to do (a receiver whose sender stored directly,
// or a sender that did); ok false: the block failed (recorded in the
// control block).
func (b *blockCtx) exchangePost(q *plan.Post) (done, ok bool, err error) {
	if q.Send {
		return b.takePost(q)
	}
	peer := b.p.Channels[q.Chan].Peer
	out := b.peers[q.Chan].sems
	seq := b.number + 1
	atomic.StoreUint64(b.mailbox(out, q, b.p.Rank, 1, false), b.post)
	atomic.StoreUint64(b.mailbox(out, q, b.p.Rank, 0, true), uint64(b.count))
	atomic.StoreUint64(b.mailbox(out, q, b.p.Rank, 0, false), seq)
	if id, _ := plan.SplitPost(b.post); id == 0 {
		return false, true, nil // nothing registered: the windowed path follows
	}
	ans := b.mailbox(b.inboundRegion(q.Chan), q, peer, 2, false)
	if !b.waitWord(q, 2, ans, seq, 1) {
		return false, false, nil
	}
	if atomic.LoadUint64(ans)&1 == 0 {
		return false, true, nil // refused: the windowed path follows
	}
	if theirs := atomic.LoadUint64(b.mailbox(b.inboundRegion(q.Chan), q, peer, 2, true)); theirs != uint64(b.count) {
		b.fail(plan.StatusMismatch, plan.WhatSemaphore, q.Chan, plan.PostMailbox(q.Sem, b.g.Blocks, b.part, 2), uint64(b.count), theirs)
		return false, false, nil
	}
	return true, true, nil
}

// waitWord waits, deadline-bound, until *w >> shift == want; a timeout is
// recorded against mailbox word k.
func (b *blockCtx) waitWord(q *plan.Post, k int, w *uint64, want uint64, shift uint) bool {
	if b.spin(func() bool { return atomic.LoadUint64(w)>>shift == want }) {
		return true
	}
	if !b.aborted() || atomic.LoadUint32(u32(b.control, plan.CtlStatus)) == 0 {
		b.fail(plan.StatusTimeout, plan.WhatSemaphore, q.Chan, plan.PostMailbox(q.Sem, b.g.Blocks, b.part, k), want<<shift, atomic.LoadUint64(w))
	}
	return false
}

// takePost is the send side: wait for the receiver's post of this launch;
// when it names a buffer this rank has mapped (post table entry of that
// id, equal counts, the range inside the registration, and mapped in this
// process), run the direct ops into it and answer "direct"; when it names
// one that is not, answer "refused"; either way without a registration the
// windowed path follows.
func (b *blockCtx) takePost(q *plan.Post) (done, ok bool, err error) {
	peer := b.p.Channels[q.Chan].Peer
	seq := b.number + 1
	if !b.waitWord(q, 0, b.mailbox(b.inboundRegion(q.Chan), q, peer, 0, false), seq, 0) {
		return false, false, nil
	}
	id, off := plan.SplitPost(atomic.LoadUint64(b.mailbox(b.inboundRegion(q.Chan), q, peer, 1, false)))
	if id == 0 {
		return false, true, nil
	}
	theirs := atomic.LoadUint64(b.mailbox(b.inboundRegion(q.Chan), q, peer, 0, true))
	b.posted = b.lookupPost(peer, id, off, theirs)
	out := b.peers[q.Chan].sems
	answer := func(direct uint64) {
		atomic.StoreUint64(b.mailbox(out, q, b.p.Rank, 2, true), uint64(b.count))
		atomic.StoreUint64(b.mailbox(out, q, b.p.Rank, 2, false), seq<<1|direct)
	}
	if b.posted == nil {
		answer(0)
		return false, true, nil
	}
	check := plan.FirstWaits(q.Direct)
	for i, o := range q.Direct {
		if ok, err := b.run(o, check[i]); !ok || err != nil {
			return false, false, err
		}
	}
	b.posted = nil
	answer(1)
	return true, true, nil
}

// lookupPost is the posted buffer of rank peer's registration id at byte
// offset off, mapped here, for a receive of theirs elements; nil when the
// post table has no entry for that id and rank, the counts differ, the
// range leaves the registration, or the address is not mapped.
func (b *blockCtx) lookupPost(peer int, id uint32, off, theirs uint64) []byte {
	if b.postTable == nil || theirs != uint64(b.count) {
		return nil
	}
	e := plan.PostEntryOffset(b.p.NRanks, id)
	if atomic.LoadUint64(u64(b.postTable, e)) != uint64(id) {
		return nil
	}
	base := atomic.LoadUint64(u64(b.postTable, e+8*int64(1+2*peer)))
	size := atomic.LoadUint64(u64(b.postTable, e+8*int64(2+2*peer)))
	bytes := uint64(b.count) * uint64(b.esize)
	if base == 0 || off > size || bytes > size-off {
		return nil
	}
	if bytes == 0 {
		return []byte{}
	}
	buf, err := b.dev.resolve(base+off, int64(bytes))
	if err != nil {
		return nil
	}
	return buf
}
