package weft

import (
	"fmt"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// P2P is one point-to-point operation of a group: Bytes bytes sent from
// Buf to rank Peer (Send) or received from Peer into Buf. A send to or a
// receive from the own rank pairs with the rank's matching receive or send
// of the same group (a local copy).
type P2P struct {
	Peer  int
	Send  bool
	Buf   uint64
	Bytes int64
}

// LaunchP2P enqueues the point-to-point operations of one group on stream
// s, so that any pattern of sends and receives (rings, all-to-all-v,
// gather, scatter) progresses without deadlock. The matching operations of
// the peers must be launched too, each rank with its own group; a send and
// its receive must have the same byte count. Each round of the group (the
// k-th operation to or from each peer: p2pRounds) is one fused launch per
// plan it needs: operations up to the LL plan's bound
// (algorithms.Config.P2PLLMaxBytes) go through the LL point-to-point plan,
// larger ones through the windowed plan, chosen by each operation's own
// size so that a sender and its receiver choose alike (algorithms/p2p.go).
// Errors: ErrInvalidArgument for a nil stream, an unknown peer, a negative
// size or a null buffer; ErrInvalidUsage for a send to itself without its
// receive; ErrNotSupported when the communicator has no point-to-point
// plan.
func (c *Comm) LaunchP2P(ops []P2P, s hal.Stream) error {
	if s == nil {
		return fmt.Errorf("weft: point-to-point on rank %d: stream is nil: %w", c.cfg.Rank, hal.ErrInvalidArgument)
	}
	if len(c.p2p) == 0 {
		return fmt.Errorf("weft: point-to-point on rank %d: no plan: the links are not memory-mapped and point-to-point has no port-channel plan yet: %w", c.cfg.Rank, hal.ErrNotSupported)
	}
	rounds, err := c.p2pRounds(ops)
	if err != nil {
		return err
	}
	if err := c.boot.Err(); err != nil {
		return fmt.Errorf("weft: point-to-point on rank %d: %w", c.cfg.Rank, err)
	}
	progs, err := c.p2pPrograms()
	if err != nil {
		return err
	}
	n, me := c.cfg.NRanks, c.cfg.Rank
	newArgs := func() *plan.Args {
		args := &plan.Args{Timeout: c.timeout, Groups: make([]plan.GroupArgs, plan.MaxGroupArgs)}
		for i := range args.Groups {
			args.Groups[i].Skip = true
		}
		return args
	}
	choices := choicesOf(c.p2p)
	c.launched()
	for _, round := range rounds {
		// Any plan's self-copy group stages; the last (windowed) plan's
		// serves every size.
		if err := c.stageOverlapping(round, progs[len(progs)-1], s, newArgs); err != nil {
			return err
		}
		// One launch per plan the round's operations need, smallest
		// operations' plan first on every rank (algorithms/p2p.go).
		for pi, prog := range progs {
			args, used := newArgs(), false
			for _, o := range round {
				if algorithms.Select(choices, o.Bytes) != pi {
					continue
				}
				used = true
				switch self := algorithms.SelfArg(n) - 1; {
				case o.Peer == me && o.Send:
					args.Groups[self].Input, args.Groups[self].Count, args.Groups[self].Skip = o.Buf, o.Bytes, false
				case o.Peer == me:
					args.Groups[self].Output = o.Buf
				case o.Send:
					args.Groups[algorithms.SendArg(me, o.Peer)-1] = plan.GroupArgs{Count: o.Bytes, Input: o.Buf}
				default:
					args.Groups[algorithms.RecvArg(me, o.Peer)-1] = plan.GroupArgs{Count: o.Bytes, Output: o.Buf}
				}
			}
			if !used {
				continue
			}
			if err := prog.Launch(s, args); err != nil {
				return fmt.Errorf("weft: point-to-point on rank %d (%s): %w", c.cfg.Rank, c.p2p[pi].choice.Plan.Name, err)
			}
		}
	}
	return nil
}

// p2pAlgo is the point-to-point plan that serves an operation of bytes
// bytes (the first whose bound takes it), or nil when there is none.
func (c *Comm) p2pAlgo(bytes int64) *algo {
	if len(c.p2p) == 0 {
		return nil
	}
	return c.p2p[algorithms.Select(choicesOf(c.p2p), bytes)]
}

// p2pRounds splits a group's operations into rounds in which each peer
// has at most one send and one receive: the k-th send to a peer matches
// the peer's k-th receive from this rank, as NCCL matches them, and every
// rank runs its rounds in order.
func (c *Comm) p2pRounds(ops []P2P) ([][]P2P, error) {
	bad := func(i int, f string, a ...any) error {
		return fmt.Errorf("weft: point-to-point operation %d on rank %d: %s: %w", i, c.cfg.Rank, fmt.Sprintf(f, a...), hal.ErrInvalidArgument)
	}
	var rounds [][]P2P
	seen := map[[2]int]int{} // (peer, send) -> operations so far
	for i, o := range ops {
		switch {
		case o.Peer < 0 || o.Peer >= c.cfg.NRanks:
			return nil, bad(i, "peer %d is not a rank of the communicator (0 to %d)", o.Peer, c.cfg.NRanks-1)
		case o.Bytes < 0:
			return nil, bad(i, "negative size %d", o.Bytes)
		case o.Bytes > 0 && o.Buf == 0:
			return nil, bad(i, "buffer is null")
		}
		k := [2]int{o.Peer, b2i(o.Send)}
		r := seen[k]
		seen[k] = r + 1
		for len(rounds) <= r {
			rounds = append(rounds, nil)
		}
		rounds[r] = append(rounds[r], o)
	}
	me := c.cfg.Rank
	for ri, round := range rounds {
		var send, recv *P2P
		for i := range round {
			if round[i].Peer == me {
				if round[i].Send {
					send = &round[i]
				} else {
					recv = &round[i]
				}
			}
		}
		if (send == nil) != (recv == nil) || (send != nil && send.Bytes != recv.Bytes) {
			return nil, fmt.Errorf("weft: rank %d: a send to itself needs a receive from itself of the same size in the same group (round %d): %w",
				me, ri, hal.ErrInvalidUsage)
		}
	}
	return rounds, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// stageOverlapping copies the data of every send of round that overlaps a
// receive of the round (in place, as nccl-tests' sendrecv does) into the
// communicator's staging buffer first, with the plan's self-copy group,
// and points the send there: the fused launch reads sends and writes
// receives concurrently.
func (c *Comm) stageOverlapping(round []P2P, prog hal.Program, s hal.Stream, newArgs func() *plan.Args) error {
	var need int64
	for i, o := range round {
		if o.Send && c.overlapsRecv(round, i) {
			need += (o.Bytes + 15) &^ 15
		}
	}
	if need == 0 {
		return nil
	}
	base, err := c.stagingBuffer(need)
	if err != nil {
		return fmt.Errorf("weft: point-to-point on rank %d: staging buffer of %d bytes for sends that overlap receives: %w", c.cfg.Rank, need, err)
	}
	self := algorithms.SelfArg(c.cfg.NRanks) - 1
	var off uint64
	for i := range round {
		o := &round[i]
		if !o.Send || !c.overlapsRecv(round, i) {
			continue
		}
		args := newArgs()
		args.Groups[self] = plan.GroupArgs{Count: o.Bytes, Input: o.Buf, Output: base + off}
		if err := prog.Launch(s, args); err != nil {
			return fmt.Errorf("weft: point-to-point on rank %d: staging a send to rank %d: %w", c.cfg.Rank, o.Peer, err)
		}
		o.Buf = base + off
		off += uint64((o.Bytes + 15) &^ 15)
	}
	return nil
}

// overlapsRecv reports whether operation i (a send) overlaps a receive of
// round from another peer, or from the same peer when it is this rank.
func (c *Comm) overlapsRecv(round []P2P, i int) bool {
	o := round[i]
	for j, r := range round {
		if j != i && !r.Send && r.Bytes > 0 && o.Bytes > 0 && overlaps(o.Buf, uint64(o.Bytes), r.Buf, uint64(r.Bytes)) &&
			(r.Peer != c.cfg.Rank || o.Peer != c.cfg.Rank) {
			return true
		}
	}
	return false
}

// p2pPrograms returns the compiled point-to-point plans, in the order of
// Comm.p2p. They are prepared in NewComm, where every rank takes part,
// because a group's operations involve only some ranks.
func (c *Comm) p2pPrograms() ([]hal.Program, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	progs := make([]hal.Program, len(c.p2p))
	for i, a := range c.p2p {
		prog, ok := a.programs[progKey{plan.Uint8, plan.Sum}]
		if !ok {
			return nil, fmt.Errorf("weft: rank %d: point-to-point plan %s not prepared: %w", c.cfg.Rank, a.choice.Plan.Name, hal.ErrInternal)
		}
		progs[i] = prog
	}
	return progs, nil
}

// p2pProgram returns the compiled point-to-point plan that serves every
// size (the last of Comm.p2p), whose self-copy group stages data.
func (c *Comm) p2pProgram() (hal.Program, error) {
	progs, err := c.p2pPrograms()
	if err != nil {
		return nil, err
	}
	if len(progs) == 0 {
		return nil, fmt.Errorf("weft: rank %d: no point-to-point plan: %w", c.cfg.Rank, hal.ErrNotSupported)
	}
	return progs[len(progs)-1], nil
}

// stagingBuffer returns the address of the communicator's staging buffer,
// grown to at least need bytes. Work already queued on a stream may still
// read a smaller buffer it replaces, so that one is kept until Close; work
// queued later on the same stream runs after the earlier reader is done.
func (c *Comm) stagingBuffer(need int64) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.staging == nil || c.staging.Size() < need {
		b, err := c.dev.Alloc(max(need, 2*sizeOf(c.staging)))
		if err != nil {
			return 0, err
		}
		if c.staging != nil {
			c.retired = append(c.retired, c.staging)
		}
		c.staging = b
	}
	return c.staging.Addr(), nil
}
