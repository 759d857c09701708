package plan

import "fmt"

// Zero-copy point-to-point: posted receive buffers.
//
// A point-to-point receive whose output lies in a registered buffer (a
// buffer the communicator has mapped on every peer) can be written by the
// sender directly, one copy instead of two (sender into scratch, receiver
// out of scratch). Neither host knows at enqueue time what the other
// does, and a CUDA graph replays launches without any host, so the two
// groups agree on the device, at the start of every launch, through a
// mailbox in the semaphore regions:
//
//  1. The receive group (Group.Post with Send false) posts: block p stores
//     the registration id and byte offset of its output (or "nothing
//     registered", PostNone) and its count into the sender's region, then
//     the launch's sequence number (the block's launch number + 1) with a
//     release store at system scope. Sender block p reads slot p only.
//  2. The send group (Group.Post with Send true) waits for that sequence
//     number (deadline-bound) and looks the registration up in its post
//     table (PostTableBytes, Args.PostTable): an entry written when the
//     buffer was registered, holding for every rank the address at which
//     this rank mapped that rank's buffer and its size. When the entry is
//     there, belongs to the id, the counts agree and the range fits, the
//     group runs Post.Direct instead of Ops and After: its transfers store
//     into the posted buffer (Ref{Buf: Posted, Chan: ch}), and then block
//     p answers "direct" into the receiver's region (sequence × 2 + 1,
//     released after the block's stores, with its count beside it).
//     Otherwise it answers "refused" (sequence × 2) when the post named a
//     registration, and runs its windowed Ops and After as before.
//  3. The receive group, when it posted a registration, waits for the
//     answer: "direct" means the data is in place (the group ends; the
//     answer's count is checked against its own); "refused" sends it on
//     to its windowed Ops and After. A post of PostNone needs no answer:
//     both sides know the windowed path follows.
//
// A group whose GroupArgs.Post is 0 does none of this (the communicator
// has no registration): the plan runs exactly as without Group.Post.
// Both groups of a pair see the same value, because the host sets it from
// state that changes only in collective calls.
//
// Mailbox words (per block p, in units of the plan's semaphores; Post.Sem
// is the base): in the sender's region, from the receiver, the counter of
// Sem+p holds the sequence number and its count word the receiver's count,
// the counter of Sem+B+p the post word (B = the group's blocks); in the
// receiver's region, from the sender, the counter of Sem+2B+p holds the
// answer and its count word the sender's count. They are plain stores, not
// increments, so they never meet the semaphore waits' expected values.

// Posted as a Ref's Buf is the receive buffer that the peer of channel
// Chan posted for this launch, mapped on this rank (a destination of
// Post.Direct transfers only; Seg and Slot are 0).
const Posted BufferKind = Switch + 1

// Post is the posted-buffer exchange of a point-to-point group (see the
// comment above): the receive side (Send false) posts its output, the send
// side (Send true) takes the post and runs Direct when it names a mapped
// buffer. Chan is the channel of the peer; the exchange uses the 3 ×
// Blocks semaphore indices from Sem.
type Post struct {
	Chan int
	Send bool
	Sem  int
	// Direct, on the send side, are the ops run instead of Ops and After
	// when the peer's post names a buffer this rank has mapped: transfers
	// of the whole range (chunk All) whose destination is
	// Ref{Buf: Posted, Chan: Chan}. They run once, without windows.
	Direct []Op
}

// PostNone as GroupArgs.Post posts "nothing registered" (receive side) or
// takes posts (send side).
const PostNone = 1

// postOffsetBits is the width of the byte offset in a post word; the
// registration id takes the bits above.
const postOffsetBits = 48

// MaxPostOffset bounds the byte offset of a posted buffer inside its
// registration (256 TiB).
const MaxPostOffset = 1<<postOffsetBits - 1

// MaxPostID bounds registration ids in post words.
const MaxPostID = 1<<(64-postOffsetBits) - 1

// PostArg is the GroupArgs.Post of a receive group whose output starts
// off bytes into registration id (1 ≤ id ≤ MaxPostID, off ≤ MaxPostOffset).
func PostArg(id uint32, off uint64) (uint64, error) {
	if id < 1 || id > MaxPostID || off > MaxPostOffset {
		return 0, fmt.Errorf("plan: post of registration %d at offset %d (want id 1 to %d, offset up to %d): %w", id, off, MaxPostID, uint64(MaxPostOffset), ErrInvalidPlan)
	}
	return uint64(id)<<postOffsetBits | off, nil
}

// SplitPost is the registration id and offset of a post word; id 0 for
// PostNone (or 0).
func SplitPost(v uint64) (id uint32, off uint64) {
	if v < 1<<postOffsetBits {
		return 0, 0
	}
	return uint32(v >> postOffsetBits), v & MaxPostOffset
}

// PostTableEntries is the number of entries of a post table: registration
// id k lives in entry k mod PostTableEntries, which records k so that an
// entry reused by a later registration is not taken for an earlier one.
const PostTableEntries = 256

// PostEntryBytes is the size of one post-table entry for nranks ranks: the
// registration id (uint64; 0: empty), then per rank r the address at
// which this rank mapped r's registered buffer (0 when r registered none
// in that call, and for this rank itself) and its size in bytes.
func PostEntryBytes(nranks int) int64 { return int64(1+2*nranks) * 8 }

// PostTableBytes is the size of a communicator's post table.
func PostTableBytes(nranks int) int64 { return PostTableEntries * PostEntryBytes(nranks) }

// PostEntryOffset is the byte offset of registration id's entry.
func PostEntryOffset(nranks int, id uint32) int64 {
	return int64(id%PostTableEntries) * PostEntryBytes(nranks)
}

// PostMailbox is the semaphore index of mailbox word k (0: sequence and
// count, 1: post word, 2: answer and count) of block part in a group of
// blocks blocks whose Post.Sem is sem.
func PostMailbox(sem, blocks, part, k int) int { return sem + k*blocks + part }

// Posts reports whether some group of the plan has a posted-buffer
// exchange.
func (p *Plan) Posts() bool {
	for _, g := range p.Groups {
		if g.Post != nil {
			return true
		}
	}
	return false
}

// validatePost checks group g's posted-buffer exchange; "" when valid.
func (p *Plan) validatePost(g *Group) string {
	q := g.Post
	if q == nil {
		return ""
	}
	switch {
	case q.Chan < 0 || q.Chan >= len(p.Channels) || p.Channels[q.Chan].Port:
		return fmt.Sprintf("post on channel %d: want a memory channel of the plan", q.Chan)
	case g.Arg < 1:
		return "a group with a post takes its own arguments (Arg ≥ 1)"
	case q.Sem < 0 || q.Sem+3*g.Blocks > p.Semaphores:
		return fmt.Sprintf("post mailbox semaphores %d..%d beyond %d", q.Sem, q.Sem+3*g.Blocks-1, p.Semaphores)
	case !q.Send && len(q.Direct) > 0:
		return "only the send side of a post has direct ops"
	case q.Send && len(q.Direct) == 0:
		return "the send side of a post needs direct ops"
	}
	for oi, o := range q.Direct {
		switch o.Kind {
		case OpSignal, OpWait, OpFlush:
			if o.Chan < 0 || o.Chan >= len(p.Channels) || o.Credits != 0 || o.SkipFirst != 0 || o.SkipLast != 0 {
				return fmt.Sprintf("direct op %d (%s): channel %d, no credits or window skips", oi, o.Name(), o.Chan)
			}
			if o.Kind != OpFlush && (o.Sem < 0 || o.Sem+g.Blocks > p.Semaphores) {
				return fmt.Sprintf("direct op %d (%s): semaphores beyond %d", oi, o.Name(), p.Semaphores)
			}
		case OpTransfer:
			if o.Chunk != All || o.Port || o.Combine || o.PostDiv || o.Stage != 0 || len(o.Srcs) == 0 || len(o.Dsts) == 0 ||
				len(o.Srcs) > MaxOperands || len(o.Dsts) > MaxOperands {
				return fmt.Sprintf("direct op %d: a direct transfer moves the whole range from plain sources, without the engine", oi)
			}
			for _, r := range o.Srcs {
				if r.Buf != Input && r.Buf != Output || r.Chan != Local {
					return fmt.Sprintf("direct op %d: source %s: want a local input or output", oi, r)
				}
			}
			for _, r := range o.Dsts {
				if r.Buf != Posted || r.Chan != q.Chan || r.Seg != 0 || r.Slot != 0 {
					return fmt.Sprintf("direct op %d: destination %s: want the posted buffer of channel %d", oi, r, q.Chan)
				}
			}
		default:
			return fmt.Sprintf("direct op %d: unknown kind %d", oi, o.Kind)
		}
	}
	return ""
}
