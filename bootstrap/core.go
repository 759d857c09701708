package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
)

// defaultTimeout is the deadline of blocking calls whose ctx has none, when
// WEFT_BOOTSTRAP_TIMEOUT is unset.
const defaultTimeout = 60 * time.Second

// bootstrapTimeout reads WEFT_BOOTSTRAP_TIMEOUT; a malformed value is an
// error wrapping hal.ErrInvalidArgument.
func bootstrapTimeout() (time.Duration, error) {
	d, err := env.Duration("WEFT_BOOTSTRAP_TIMEOUT", defaultTimeout)
	if err != nil {
		return 0, fmt.Errorf("bootstrap: %w: %w", err, hal.ErrInvalidArgument)
	}
	return d, nil
}

// mkey addresses a queue of the mailbox: user messages (Send/Recv) and
// collective messages live in separate spaces, so that user tags never
// collide with collective sequence numbers.
type mkey struct {
	coll bool
	peer int
	tag  uint32
}

type mail struct {
	typ  msgType
	data []byte
}

// mailbox holds messages that arrived and are not yet received. It is
// unbounded: readers never block, so two ranks sending to each other at the
// same time cannot deadlock.
type mailbox struct {
	mu   sync.Mutex
	q    map[mkey][]mail
	gone []bool        // gone[p]: peer p said goodbye
	wake chan struct{} // closed and replaced whenever something changes
}

func newMailbox(size int) *mailbox {
	return &mailbox{q: map[mkey][]mail{}, gone: make([]bool, size), wake: make(chan struct{})}
}

func (m *mailbox) put(k mkey, v mail) {
	m.mu.Lock()
	m.q[k] = append(m.q[k], v)
	close(m.wake)
	m.wake = make(chan struct{})
	m.mu.Unlock()
}

func (m *mailbox) setGone(peer int) {
	m.mu.Lock()
	m.gone[peer] = true
	close(m.wake)
	m.wake = make(chan struct{})
	m.mu.Unlock()
}

func (m *mailbox) isGone(peer int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gone[peer]
}

// transport delivers one message to a peer (never to oneself).
type transport interface {
	deliver(ctx context.Context, deadline time.Time, peer int, typ msgType, tag uint32, data []byte) error
}

// core implements the Bootstrap methods common to the TCP and in-process
// implementations: argument checks, deadlines, failure state, mailbox
// matching and the collectives, which are built on point-to-point messages.
type core struct {
	rank, size int
	timeout    time.Duration
	log        *slog.Logger
	box        *mailbox
	tx         transport
	seq        atomic.Uint32 // collective sequence number
	prog       progress      // progress probes (progress.go)

	err      atomic.Pointer[error]
	failOnce sync.Once
	failed   chan struct{}

	closing   atomic.Bool
	closeOnce sync.Once
	closed    chan struct{}
}

func newCore(rank, size int, timeout time.Duration) *core {
	return &core{
		rank:    rank,
		size:    size,
		timeout: timeout,
		log:     env.Logger("BOOT").With("rank", rank, "size", size),
		box:     newMailbox(size),
		failed:  make(chan struct{}),
		closed:  make(chan struct{}),
	}
}

func (c *core) Rank() int               { return c.rank }
func (c *core) Size() int               { return c.size }
func (c *core) Failed() <-chan struct{} { return c.failed }

func (c *core) Err() error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}

// fail records the first failure and closes Failed. Failures seen while
// this rank closes are its own doing and ignored.
func (c *core) fail(err error) {
	if c.closing.Load() {
		return
	}
	c.failOnce.Do(func() {
		c.err.Store(&err)
		close(c.failed)
		c.log.Warn("bootstrap failed", "err", err)
	})
}

// disconnected is the failure of a peer whose connection ended without a
// goodbye.
func (c *core) disconnected(peer int, detail error) error {
	if detail != nil {
		return fmt.Errorf("bootstrap: rank %d disconnected (seen by rank %d): %w: %w", peer, c.rank, detail, hal.ErrRemote)
	}
	return fmt.Errorf("bootstrap: rank %d disconnected (seen by rank %d): %w", peer, c.rank, hal.ErrRemote)
}

// deadline returns ctx's deadline, or now + the bootstrap timeout.
func (c *core) deadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(c.timeout)
}

// check returns the error a call must fail with before it starts: closed,
// failed, or a canceled context.
func (c *core) check(ctx context.Context, op string) error {
	select {
	case <-c.closed:
		return fmt.Errorf("bootstrap: rank %d: %s after Close: %w", c.rank, op, hal.ErrInvalidUsage)
	default:
	}
	if err := c.Err(); err != nil {
		return fmt.Errorf("%w (in %s)", err, op)
	}
	switch err := ctx.Err(); {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("bootstrap: rank %d: %s: %w: %w", c.rank, op, hal.ErrTimeout, err)
	default:
		return fmt.Errorf("bootstrap: rank %d: %s: %w", c.rank, op, err)
	}
}

func (c *core) checkPeer(op string, peer int) error {
	if peer < 0 || peer >= c.size {
		return fmt.Errorf("bootstrap: rank %d: %s: peer %d outside [0, %d): %w", c.rank, op, peer, c.size, hal.ErrInvalidArgument)
	}
	return nil
}

func (c *core) checkLen(op string, n int) error {
	if n > MaxMessageSize {
		return fmt.Errorf("bootstrap: rank %d: %s: %d bytes exceed MaxMessageSize (%d): %w", c.rank, op, n, MaxMessageSize, hal.ErrInvalidArgument)
	}
	return nil
}

// send delivers one message, to oneself through the mailbox.
func (c *core) send(ctx context.Context, deadline time.Time, peer int, typ msgType, tag uint32, data []byte) error {
	if peer == c.rank {
		c.box.put(mkey{coll: typ != msgData, peer: peer, tag: tag}, mail{typ, slices.Clone(data)})
		return nil
	}
	if c.box.isGone(peer) {
		return fmt.Errorf("bootstrap: rank %d: send %v to rank %d: it has closed its bootstrap: %w", c.rank, typ, peer, hal.ErrRemote)
	}
	return c.tx.deliver(ctx, deadline, peer, typ, tag, data)
}

func (c *core) Send(ctx context.Context, peer int, tag uint32, data []byte) error {
	op := "Send tag " + strconv.FormatUint(uint64(tag), 10)
	if err := c.checkPeer(op, peer); err != nil {
		return err
	}
	if err := c.checkLen(op, len(data)); err != nil {
		return err
	}
	if err := c.check(ctx, op); err != nil {
		return err
	}
	return c.send(ctx, c.deadline(ctx), peer, msgData, tag, data)
}

func (c *core) Recv(ctx context.Context, peer int, tag uint32) ([]byte, error) {
	op := "Recv tag " + strconv.FormatUint(uint64(tag), 10)
	if err := c.checkPeer(op, peer); err != nil {
		return nil, err
	}
	if err := c.check(ctx, op); err != nil {
		return nil, err
	}
	out := make([][]byte, c.size)
	if err := c.wait(ctx, time.Now(), c.deadline(ctx), op, false, tag, msgData, []int{peer}, out); err != nil {
		return nil, err
	}
	return out[peer], nil
}

func (c *core) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	seq := c.seq.Add(1)
	op := "AllGather #" + strconv.FormatUint(uint64(seq), 10)
	if err := c.checkLen(op, len(data)); err != nil {
		return nil, err
	}
	if err := c.check(ctx, op); err != nil {
		return nil, err
	}
	start, deadline := time.Now(), c.deadline(ctx)
	out := make([][]byte, c.size)
	out[c.rank] = slices.Clone(data)
	if out[c.rank] == nil {
		out[c.rank] = []byte{}
	}
	// Send to the ranks after this one first, so that the load spreads
	// instead of everyone writing to rank 0 at once.
	for i := 1; i < c.size; i++ {
		p := (c.rank + i) % c.size
		if err := c.send(ctx, deadline, p, msgAllGather, seq, data); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
	}
	if err := c.wait(ctx, start, deadline, op, true, seq, msgAllGather, c.others(), out); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *core) Broadcast(ctx context.Context, root int, data []byte) ([]byte, error) {
	seq := c.seq.Add(1)
	op := "Broadcast #" + strconv.FormatUint(uint64(seq), 10) + " from rank " + strconv.Itoa(root)
	if err := c.checkPeer(op, root); err != nil {
		return nil, err
	}
	if c.rank == root {
		if err := c.checkLen(op, len(data)); err != nil {
			return nil, err
		}
	}
	if err := c.check(ctx, op); err != nil {
		return nil, err
	}
	start, deadline := time.Now(), c.deadline(ctx)
	if c.rank == root {
		for i := 1; i < c.size; i++ {
			p := (c.rank + i) % c.size
			if err := c.send(ctx, deadline, p, msgBroadcast, seq, data); err != nil {
				return nil, fmt.Errorf("%s: %w", op, err)
			}
		}
		return data, nil
	}
	out := make([][]byte, c.size)
	if err := c.wait(ctx, start, deadline, op, true, seq, msgBroadcast, []int{root}, out); err != nil {
		return nil, err
	}
	return out[root], nil
}

// Barrier has every rank tell every other rank it arrived: size−1 empty
// messages per rank, one round trip, and a timeout names exactly the ranks
// that have not arrived.
func (c *core) Barrier(ctx context.Context) error {
	seq := c.seq.Add(1)
	op := "Barrier #" + strconv.FormatUint(uint64(seq), 10)
	if err := c.check(ctx, op); err != nil {
		return err
	}
	start, deadline := time.Now(), c.deadline(ctx)
	for i := 1; i < c.size; i++ {
		p := (c.rank + i) % c.size
		if err := c.send(ctx, deadline, p, msgBarrier, seq, nil); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	return c.wait(ctx, start, deadline, op, true, seq, msgBarrier, c.others(), make([][]byte, c.size))
}

func (c *core) others() []int {
	ps := make([]int, 0, c.size-1)
	for i := 1; i < c.size; i++ {
		ps = append(ps, (c.rank+i)%c.size)
	}
	return ps
}

// wait takes one message of type want from each of peers out of the
// mailbox queue (coll, peer, tag) and stores it in out[peer]. It returns
// early on failure, Close, cancellation or the deadline, naming the peers
// still awaited.
func (c *core) wait(ctx context.Context, start, deadline time.Time, op string, coll bool, tag uint32, want msgType, peers []int, out [][]byte) error {
	pending := slices.Clone(peers)
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		if err := c.check(ctx, op); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return c.timeoutErr(ctx, op, start, pending)
			}
			return err
		}
		m := c.box
		m.mu.Lock()
		keep := pending[:0]
		for _, p := range pending {
			k := mkey{coll: coll, peer: p, tag: tag}
			if q := m.q[k]; len(q) > 0 {
				v := q[0]
				if len(q) == 1 {
					delete(m.q, k)
				} else {
					m.q[k] = q[1:]
				}
				if v.typ != want {
					m.mu.Unlock()
					return fmt.Errorf("bootstrap: rank %d: %s: rank %d called %v at this position: collectives must be called in the same order on every rank: %w",
						c.rank, op, p, v.typ, hal.ErrInvalidUsage)
				}
				out[p] = v.data
				continue
			}
			if m.gone[p] {
				m.mu.Unlock()
				return fmt.Errorf("bootstrap: rank %d: %s: rank %d closed its bootstrap without sending: %w", c.rank, op, p, hal.ErrRemote)
			}
			keep = append(keep, p)
		}
		pending = keep
		wake := m.wake
		m.mu.Unlock()
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-wake:
		case <-c.failed:
		case <-c.closed:
		case <-ctx.Done():
		case <-timer.C:
			return c.timeoutErr(ctx, op, start, pending)
		}
	}
}

// timeoutErr describes a wait that passed its deadline: ctx's, or the
// bootstrap timeout when ctx has none.
func (c *core) timeoutErr(ctx context.Context, op string, start time.Time, pending []int) error {
	waited := time.Since(start).Round(time.Millisecond)
	if _, ok := ctx.Deadline(); ok {
		return fmt.Errorf("bootstrap: rank %d: %s timed out after %v waiting for %s: %w: %w", c.rank, op, waited, ranksText(pending), hal.ErrTimeout, context.DeadlineExceeded)
	}
	return fmt.Errorf("bootstrap: rank %d: %s timed out after %v (WEFT_BOOTSTRAP_TIMEOUT=%v) waiting for %s: %w", c.rank, op, waited, c.timeout, ranksText(pending), hal.ErrTimeout)
}

// ranksText returns "rank 3" or "ranks 1, 4, 7", eliding long lists.
func ranksText(ranks []int) string {
	rs := slices.Sorted(slices.Values(ranks))
	if len(rs) == 1 {
		return "rank " + strconv.Itoa(rs[0])
	}
	const show = 16
	var b strings.Builder
	b.WriteString("ranks ")
	for i, r := range rs {
		if i == show {
			fmt.Fprintf(&b, ", … (%d in all)", len(rs))
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(r))
	}
	return b.String()
}
