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
// A receive of the windowed plan into a buffer registered with Register
// (anywhere inside it) is stored by the sender directly, without scratch;
// the ranks agree on it on the device, so CUDA graphs replay it
// (p2ppost.go).
// Errors: ErrInvalidArgument for a nil stream, an unknown peer, a negative
// size or a null buffer; ErrInvalidUsage for a send to itself without its
// receive; ErrNotSupported when the communicator has no point-to-point
// plan.
func (c *Comm) LaunchP2P(ops []P2P, s hal.Stream) error {
	return c.launchP2P(ops, s, c.cfg.CEP2PMinBytes)
}

// launchP2P is LaunchP2P with ceMin the smallest operation the copy-engine
// point-to-point path moves (p2pce.go; every rank of a group passes the
// same for the same call).
func (c *Comm) launchP2P(ops []P2P, s hal.Stream, ceMin int64) error {
	if s == nil {
		return fmt.Errorf("weft: point-to-point on rank %d: stream is nil: %w", c.cfg.Rank, hal.ErrInvalidArgument)
	}
	if len(c.p2p) == 0 {
		return fmt.Errorf("weft: point-to-point on rank %d: no plan: the links are not memory-mapped and point-to-point has no port-channel plan yet: %w", c.cfg.Rank, hal.ErrNotSupported)
	}
	t := c.p2pProf.Now()
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
	me := c.cfg.Rank
	// newArgs are a launch's arguments with slots group-argument slots
	// (a window's SelfArg, its last), all skipped until set; PackParams
	// and the backends skip the slots past them.
	newArgs := func(slots int) *plan.Args {
		args := &plan.Args{Timeout: c.timeout, Groups: make([]plan.GroupArgs, slots)}
		for i := range args.Groups {
			args.Groups[i].Skip = true
		}
		return args
	}
	// Zero-copy: with a registration on the communicator, the windowed
	// plan's groups exchange posts (p2ppost.go).
	table, lookup := c.postState()
	if err := c.launched(s); err != nil {
		return err
	}
	t = c.p2pProf.Since(p2pStagePrepare, t)
	// Large operations on copy engines (p2pce.go; its own stages), queued
	// after every kernel of the group on every rank.
	ceOps, err := c.ceP2PSplit(rounds, ceMin, s)
	if err != nil {
		return err
	}
	t = c.p2pProf.Now()
	for _, round := range rounds {
		// Any plan's self-copy group stages; the last (windowed) plan's
		// serves every size.
		if err := c.stageOverlapping(round, progs, s, newArgs); err != nil {
			return err
		}
		// One launch per plan the round's operations need, smallest
		// operations' plan first on every rank (algorithms/p2p.go); past
		// algorithms.PeerPlansMaxRanks ranks, per peer window, in window
		// order (progs holds the windows' plans one after another). Only
		// the plans an operation needs get arguments.
		args := make([]*plan.Args, len(progs))
		for _, o := range round {
			for _, w := range c.p2pWins {
				if !w.serves(o.Peer, me) {
					continue
				}
				pi := w.first + algorithms.Select(w.choices, o.Bytes)
				a := args[pi]
				if a == nil {
					a = newArgs(w.win.SelfArg())
					if table != 0 && c.p2p[pi].choice.Plan.Posts() {
						a.PostTable = table
					}
					args[pi] = a
				}
				posts := a.PostTable != 0
				switch self := w.win.SelfArg() - 1; {
				case o.Peer == me && o.Send:
					a.Groups[self].Input, a.Groups[self].Count, a.Groups[self].Skip = o.Buf, o.Bytes, false
				case o.Peer == me:
					a.Groups[self].Output = o.Buf
				case o.Send:
					g := plan.GroupArgs{Count: o.Bytes, Input: o.Buf}
					if posts {
						g.Post = plan.PostNone
					}
					a.Groups[w.win.SendArg(o.Peer)-1] = g
				default:
					g := plan.GroupArgs{Count: o.Bytes, Output: o.Buf}
					if posts {
						g.Post = lookup(o.Buf, o.Bytes)
					}
					a.Groups[w.win.RecvArg(o.Peer)-1] = g
				}
			}
		}
		t = c.p2pProf.Since(p2pStageArgs, t)
		for pi, a := range args {
			if a == nil {
				continue
			}
			if err := progs[pi].Launch(s, a); err != nil {
				return fmt.Errorf("weft: point-to-point on rank %d (%s): %w", c.cfg.Rank, c.p2p[pi].choice.Plan.Name, err)
			}
			t = c.p2pProf.Since(p2pStageEnqueue, t)
		}
	}
	if len(ceOps) == 0 {
		return nil
	}
	err = c.ceP2PQueue(ceOps, s)
	c.p2pProf.Since(p2pStageCEQueue, t)
	return err
}

// Stages of LaunchP2P timed under WEFT_PROXY_PROFILE=1 (Comm.p2pProf): a
// sendrecv costs the caller's thread 13–27 µs through libweft_nccl.so
// against NCCL's 6–10 (2×H100, 2026-11-26, docs/bench/2026-11-26e-h100x2).
const (
	p2pStagePrepare    = iota // rounds, checks, programs, posts, stream order
	p2pStageArgs              // a launch's group arguments (and staging copies)
	p2pStageEnqueue           // packing and the backend's launch, per launch
	p2pStageCEDescribe        // copy engines: receivers export and describe (p2pce.go)
	p2pStageCEAnswer          // copy engines: senders wait, map and answer
	p2pStageCEAgree           // copy engines: receivers wait for the answers
	p2pStageCEQueue           // copy engines: the stream operations queued
)

var p2pStages = []string{"prepare (rounds, programs, stream order)", "arguments of a launch", "enqueue (pack + launch)",
	"copy engines: export and describe receives", "copy engines: wait for descriptions, map, answer", "copy engines: wait for answers",
	"copy engines: queue stream operations"}

// p2pAlgo is the point-to-point plan that serves an operation of bytes
// bytes (the first whose bound takes it), or nil when there is none.
func (c *Comm) p2pAlgo(bytes int64) *algo {
	if len(c.p2pWins) == 0 {
		return nil
	}
	w := c.p2pWins[0] // every window has plans of the same bounds
	return c.p2p[w.first+algorithms.Select(w.choices, bytes)]
}

// p2pWindow is one peer window of the point-to-point plans
// (algorithms.P2PWindows): the peers its plans reach, and where the plans
// are in Comm.p2p (n from first, smallest operations first, with their
// choices). A communicator of up to algorithms.PeerPlansMaxRanks ranks has
// one window, of every peer.
type p2pWindow struct {
	win      algorithms.PeerWindow
	first, n int
	choices  []algorithms.Choice
}

// serves reports whether the window's plans serve an operation with peer
// (this rank me itself: a copy, served by the window that says Self).
func (w p2pWindow) serves(peer, me int) bool {
	if peer == me {
		return w.win.Self
	}
	return w.win.Has(peer)
}

// setupP2P sets up and compiles the point-to-point plans of every peer
// window of this rank. It is collective: every rank sets up its window j
// together with the others' window j, which holds the matching channels.
func (c *Comm) setupP2P() error {
	wins, err := algorithms.P2PWindows(c.cfg.Rank, c.cfg.NRanks)
	if err != nil {
		return fmt.Errorf("weft: %v: %w", err, hal.ErrInvalidArgument)
	}
	for _, win := range wins {
		choices, err := algorithms.P2PWindowPlans(c.cfg, win)
		if err != nil {
			return fmt.Errorf("weft: %v: %w", err, hal.ErrInvalidArgument)
		}
		algos, err := c.setupAlgos(choices)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.p2pWins = append(c.p2pWins, p2pWindow{win: win, first: len(c.p2p), n: len(algos), choices: choices})
		c.p2p = append(c.p2p, algos...)
		c.mu.Unlock()
		for _, a := range algos {
			if _, err := c.program(a, plan.Uint8, plan.Sum, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// p2pSelf is the peer window whose plans serve this rank's copies to
// itself; its last plan's self-copy group also stages data.
func (c *Comm) p2pSelf() p2pWindow {
	for _, w := range c.p2pWins {
		if w.win.Self {
			return w
		}
	}
	return p2pWindow{}
}

// p2pSelfArg is the argument slot (plan.Args.Groups index + 1) of the
// self-copy group of p2pProgram's plan.
func (c *Comm) p2pSelfArg() int { return c.p2pSelf().win.SelfArg() }

// p2pRounds splits a group's operations into rounds in which each peer
// has at most one send and one receive: the k-th send to a peer matches
// the peer's k-th receive from this rank, as NCCL matches them, and every
// rank runs its rounds in order.
func (c *Comm) p2pRounds(ops []P2P) ([][]P2P, error) {
	bad := func(i int, f string, a ...any) error {
		return fmt.Errorf("weft: point-to-point operation %d on rank %d: %s: %w", i, c.cfg.Rank, fmt.Sprintf(f, a...), hal.ErrInvalidArgument)
	}
	if len(ops) <= 16 && oneRound(ops) {
		// Every peer at most once each way (a sendrecv, a Gather, an
		// all-to-all-v): one round, the checks below on it alone. The
		// round is a copy: staging may point its sends elsewhere.
		// oneRound compares every pair, so only for small groups; larger
		// ones take the map below.
		for i, o := range ops {
			if err := checkP2P(c, i, o, bad); err != nil {
				return nil, err
			}
		}
		rounds := [][]P2P{append([]P2P(nil), ops...)}
		return rounds, c.checkSelfPairs(rounds)
	}
	var rounds [][]P2P
	seen := map[[2]int]int{} // (peer, send) -> operations so far
	for i, o := range ops {
		if err := checkP2P(c, i, o, bad); err != nil {
			return nil, err
		}
		k := [2]int{o.Peer, b2i(o.Send)}
		r := seen[k]
		seen[k] = r + 1
		for len(rounds) <= r {
			rounds = append(rounds, nil)
		}
		rounds[r] = append(rounds[r], o)
	}
	return rounds, c.checkSelfPairs(rounds)
}

// oneRound reports whether ops hold at most one send to and one receive
// from each peer (the whole group is one round).
func oneRound(ops []P2P) bool {
	for i := range ops {
		for j := range i {
			if ops[j].Peer == ops[i].Peer && ops[j].Send == ops[i].Send {
				return false
			}
		}
	}
	return true
}

// checkP2P checks operation i's peer, size and buffer.
func checkP2P(c *Comm, i int, o P2P, bad func(i int, f string, a ...any) error) error {
	switch {
	case o.Peer < 0 || o.Peer >= c.cfg.NRanks:
		return bad(i, "peer %d is not a rank of the communicator (0 to %d)", o.Peer, c.cfg.NRanks-1)
	case o.Bytes < 0:
		return bad(i, "negative size %d", o.Bytes)
	case o.Bytes > 0 && o.Buf == 0:
		return bad(i, "buffer is null")
	}
	return nil
}

// checkSelfPairs checks that each round's send to this rank has its
// receive from this rank, of the same size.
func (c *Comm) checkSelfPairs(rounds [][]P2P) error {
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
			return fmt.Errorf("weft: rank %d: a send to itself needs a receive from itself of the same size in the same group (round %d): %w",
				me, ri, hal.ErrInvalidUsage)
		}
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// stageOverlapping copies the data of every send of round that overlaps a
// receive of the round (in place, as nccl-tests' sendrecv does) into the
// communicator's staging buffer first, with the self-copy group of the
// last plan (which serves every size; progs is p2pPrograms) of the window
// that serves this rank's copies to itself, and points the send there:
// the fused launch reads sends and writes receives concurrently.
func (c *Comm) stageOverlapping(round []P2P, progs []hal.Program, s hal.Stream, newArgs func(slots int) *plan.Args) error {
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
	sw := c.p2pSelf()
	prog, self := progs[sw.first+sw.n-1], sw.win.SelfArg()-1
	var off uint64
	for i := range round {
		o := &round[i]
		if !o.Send || !c.overlapsRecv(round, i) {
			continue
		}
		args := newArgs(self + 1)
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
	if len(c.p2pProgs) == len(c.p2p) {
		return c.p2pProgs, nil // set up once, in NewComm; read-only to callers
	}
	progs := make([]hal.Program, len(c.p2p))
	for i, a := range c.p2p {
		prog, ok := a.programs[progKey{plan.Uint8, plan.Sum}]
		if !ok {
			return nil, fmt.Errorf("weft: rank %d: point-to-point plan %s not prepared: %w", c.cfg.Rank, a.choice.Plan.Name, hal.ErrInternal)
		}
		progs[i] = prog
	}
	c.p2pProgs = progs
	return progs, nil
}

// p2pProgram returns the compiled point-to-point plan that serves every
// size in the window of this rank's copies to itself (that window's last
// plan), whose self-copy group (argument slot p2pSelfArg) stages data.
func (c *Comm) p2pProgram() (hal.Program, error) {
	progs, err := c.p2pPrograms()
	if err != nil {
		return nil, err
	}
	sw := c.p2pSelf()
	if len(progs) == 0 || sw.n == 0 {
		return nil, fmt.Errorf("weft: rank %d: no point-to-point plan: %w", c.cfg.Rank, hal.ErrNotSupported)
	}
	return progs[sw.first+sw.n-1], nil
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

// allToAllByP2P reports whether call is an AllToAll that LaunchP2P serves:
// past algorithms.PeerPlansMaxRanks ranks, where no AllToAll plan (one
// channel per peer) exists.
func (c *Comm) allToAllByP2P(call Call) bool {
	return call.Coll == algorithms.AllToAll && c.cfg.NRanks > algorithms.PeerPlansMaxRanks
}

// allToAllP2P runs an AllToAll as one group of point-to-point operations:
// segment p of the send buffer to rank p, segment p of the receive buffer
// from rank p, for every rank p (this one included), so that the peer
// windows of LaunchP2P serve any rank count. In place (send = receive),
// LaunchP2P stages every send that overlaps a receive first. Segments of
// at least ceMin bytes go on copy engines (p2pce.go).
func (c *Comm) allToAllP2P(call Call, s hal.Stream, ceMin int64) error {
	n, seg := c.cfg.NRanks, call.Count*int64(call.Type.Size())
	ops := make([]P2P, 0, 2*n)
	for p := 0; p < n; p++ {
		off := uint64(p) * uint64(seg)
		ops = append(ops, P2P{Peer: p, Send: true, Buf: call.Send + off, Bytes: seg}, P2P{Peer: p, Buf: call.Recv + off, Bytes: seg})
	}
	if err := c.launchP2P(ops, s, ceMin); err != nil {
		return fmt.Errorf("weft: %v on rank %d as point-to-point: %w", call.Coll, c.cfg.Rank, err)
	}
	return nil
}
