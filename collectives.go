package weft

import (
	"context"
	"errors"
	"fmt"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// collKey names the plans of one collective (and root).
type collKey struct {
	coll algorithms.Collective
	root int
}

// setupAlgos allocates and connects the resources of each choice. It is
// collective.
func (c *Comm) setupAlgos(choices []algorithms.Choice) ([]*algo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	var out []*algo
	for _, ch := range choices {
		var scratch int64
		switch {
		case ch.Plan.Windowed():
			scratch = ch.Plan.ScratchBytes(0, 1) // window-sized, whatever the count
		case ch.MaxBytes > 0:
			for _, t := range plan.DataTypes {
				scratch = max(scratch, ch.Plan.ScratchBytes(ch.MaxBytes/int64(t.Size()), t.Size()))
			}
		}
		res, err := channels.Setup(ctx, c.boot, c.dev, ch.Plan, scratch, 0)
		if err != nil {
			for _, a := range out {
				a.res.Close()
			}
			return nil, fmt.Errorf("weft: %w", err)
		}
		out = append(out, &algo{choice: ch, res: res, library: channels.DeviceLibrary(), programs: map[progKey]hal.Program{}})
	}
	return out, nil
}

// collAlgos returns the plans of a collective, set up on first use (every
// rank makes the same first call, so the setup's exchange is collective).
func (c *Comm) collAlgos(k collKey) ([]*algo, error) {
	c.mu.Lock()
	algos, ok := c.colls[k]
	c.mu.Unlock()
	if ok {
		return algos, nil
	}
	choices, err := algorithms.Plans(c.cfg, k.coll, k.root)
	if errors.Is(err, algorithms.ErrNoPlan) {
		return nil, fmt.Errorf("weft: %v: %w", err, hal.ErrNotSupported)
	}
	if err != nil {
		return nil, fmt.Errorf("weft: %v: %w", err, hal.ErrInvalidArgument)
	}
	if algos, err = c.setupAlgos(choices); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.colls[k] = algos
	c.mu.Unlock()
	return algos, nil
}

func choicesOf(algos []*algo) []algorithms.Choice {
	cs := make([]algorithms.Choice, len(algos))
	for i, a := range algos {
		cs[i] = a.choice
	}
	return cs
}

// checkCall validates a call; it returns the plans' key.
func (c *Comm) checkCall(call Call) (collKey, error) {
	bad := func(f string, a ...any) (collKey, error) {
		return collKey{}, fmt.Errorf("weft: %v on rank %d: %s: %w", call.Coll, c.cfg.Rank, fmt.Sprintf(f, a...), hal.ErrInvalidArgument)
	}
	n := c.cfg.NRanks
	k := collKey{coll: call.Coll}
	switch {
	case call.Coll == algorithms.SendRecv || call.Coll > algorithms.SendRecv:
		return bad("not a collective call (point-to-point goes through LaunchP2P)")
	case !call.Type.Valid():
		return bad("unsupported data type %v", call.Type)
	case call.Coll.Reduces() && !call.Op.Valid():
		return bad("unsupported reduction op %v", call.Op)
	case call.Count < 0:
		return bad("negative count %d", call.Count)
	case call.Count > (1<<62)/int64(call.Type.Size())/int64(n):
		return bad("count %d overflows", call.Count)
	}
	if call.Coll.Rooted() {
		if call.Root < 0 || call.Root >= n {
			return bad("root %d is not a rank of the communicator (0 to %d)", call.Root, n-1)
		}
		k.root = call.Root
	}
	if call.Count == 0 {
		return k, nil
	}
	me := c.cfg.Rank
	needSend := call.Coll != algorithms.Broadcast || me == call.Root
	needRecv := call.Coll != algorithms.Reduce || me == call.Root
	switch {
	case needSend && call.Send == 0:
		return bad("send buffer is null")
	case needRecv && call.Recv == 0:
		return bad("receive buffer is null")
	case call.Op == plan.PreMulSum && !call.Coll.Reduces():
		return bad("PreMulSum on a collective that does not reduce")
	}
	es := uint64(call.Type.Size())
	seg := uint64(call.Count) * es
	switch call.Coll {
	case algorithms.AllToAll:
		if call.Send != call.Recv && overlaps(call.Send, seg*uint64(n), call.Recv, seg*uint64(n)) {
			return bad("send and receive buffers overlap without being the same (in place is send = recv)")
		}
	case algorithms.AllGather:
		if call.Send != call.Recv+uint64(me)*seg && overlaps(call.Send, seg, call.Recv, seg*uint64(n)) {
			return bad("send buffer overlaps the receive buffer other than at this rank's segment (in place is send = recv + rank × count)")
		}
	case algorithms.ReduceScatter:
		if call.Recv != call.Send+uint64(me)*seg && overlaps(call.Recv, seg, call.Send, seg*uint64(n)) {
			return bad("receive buffer overlaps the send buffer other than at this rank's segment (in place is recv = send + rank × count)")
		}
	}
	return k, nil
}

func overlaps(a, an, b, bn uint64) bool { return a < b+bn && b < a+an }

func (c *Comm) launchCall(call Call, s hal.Stream) error {
	if s == nil {
		return fmt.Errorf("weft: %v on rank %d: stream is nil: %w", call.Coll, c.cfg.Rank, hal.ErrInvalidArgument)
	}
	k, err := c.checkCall(call)
	if err != nil {
		return err
	}
	if err := c.boot.Err(); err != nil {
		return fmt.Errorf("weft: %v on rank %d: %w", call.Coll, c.cfg.Rank, err)
	}
	if call.Count == 0 {
		return nil
	}
	algos, err := c.collAlgos(k)
	if err != nil {
		return err
	}
	op := call.Op
	if !call.Coll.Reduces() {
		op = plan.Sum // data movement only: one program per type
	}
	a := algos[algorithms.SelectFor(choicesOf(algos), call.Count*int64(call.Type.Size()), call.Type, op)]
	if op == plan.PreMulSum && !a.choice.Serves(call.Type, op) {
		// No plan of this communicator scales each rank's input with its
		// own scalar (plan/premul.go): refuse rather than compute wrong
		// numbers.
		why := fmt.Sprintf("plan %s cannot run it for %v", a.choice.Plan.Name, call.Type)
		if err := a.choice.Plan.ServesPreMulSum(); err != nil {
			why = err.Error()
		}
		return fmt.Errorf("weft: %v on rank %d: PreMulSum: %s: %w", call.Coll, c.cfg.Rank, why, hal.ErrNotSupported)
	}
	args := &plan.Args{Count: call.Count, Input: call.Send, Output: call.Recv, Timeout: c.timeout, Scalar: call.Scalar, ScalarPtr: call.ScalarPtr}
	if op == plan.Avg && call.Type.Float() {
		args.Scalar, args.ScalarPtr = plan.AvgScalar(call.Type, c.cfg.NRanks), 0
	}
	prog, err := c.program(a, call.Type, op, call.Count)
	if err != nil {
		return err
	}
	if inPlaceAllToAll(call, c.cfg.NRanks) {
		if args.Input, err = c.stageInput(call, s); err != nil {
			return err
		}
	}
	c.launched()
	return prog.Launch(s, args)
}

// inPlaceAllToAll reports whether call is an AllToAll whose send and
// receive buffers are the same (NCCL 2.28 takes it) on more than one rank.
func inPlaceAllToAll(call Call, nranks int) bool {
	return call.Coll == algorithms.AllToAll && call.Send == call.Recv && call.Count > 0 && nranks > 1
}

// stageInput copies the whole send buffer of an in-place AllToAll (NRanks
// × Count elements) into the communicator's staging buffer, enqueued on s
// before the collective, and returns the copy's address for the plan to
// send from. Every AllToAll plan writes segment p of the output while
// segment p of the input may still be unsent (the receive group runs
// beside the send group; a port plan's engines read the input while other
// engines write the output), so the plan must read a copy. The copy is
// the point-to-point plan's self-copy group (every communicator has that
// plan, over memory or port channels), so it needs nothing of a backend
// beyond the HAL contract. Out-of-place calls never come here.
func (c *Comm) stageInput(call Call, s hal.Stream) (uint64, error) {
	bytes := int64(c.cfg.NRanks) * call.Count * int64(call.Type.Size())
	prog, err := c.p2pProgram()
	if err != nil {
		return 0, err
	}
	base, err := c.stagingBuffer(bytes)
	if err != nil {
		return 0, fmt.Errorf("weft: in-place %v on rank %d: staging buffer of %d bytes for the send data: %w", call.Coll, c.cfg.Rank, bytes, err)
	}
	args := &plan.Args{Timeout: c.timeout, Groups: make([]plan.GroupArgs, plan.MaxGroupArgs)}
	for i := range args.Groups {
		args.Groups[i].Skip = true
	}
	args.Groups[algorithms.SelfArg(c.cfg.NRanks)-1] = plan.GroupArgs{Count: bytes, Input: call.Send, Output: base}
	if err := prog.Launch(s, args); err != nil {
		return 0, fmt.Errorf("weft: in-place %v on rank %d: staging the send data: %w", call.Coll, c.cfg.Rank, err)
	}
	return base, nil
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

// program returns a's program for a type and operator, preparing it on
// first use (collective: see prepare).
func (c *Comm) program(a *algo, t plan.DataType, op plan.RedOp, count int64) (hal.Program, error) {
	key := progKey{t, op}
	c.mu.Lock()
	prog, ok := a.programs[key]
	c.mu.Unlock()
	if ok {
		return prog, nil
	}
	prog, err := c.prepare(a, t, op, count)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	a.programs[key] = prog
	c.mu.Unlock()
	return prog, nil
}

func (c *Comm) planName(call Call) string {
	if p := c.planFor(call); p != nil {
		return p.Name
	}
	return ""
}

// planFor is the plan Launch would use for call, or nil.
func (c *Comm) planFor(call Call) *plan.Plan {
	if call.Coll == algorithms.SendRecv {
		if c.p2p == nil {
			return nil
		}
		return c.p2p.choice.Plan
	}
	k, err := c.checkCall(call)
	if err != nil {
		return nil
	}
	// The choice is computed, not set up: naming a plan is no collective
	// call, so it must not allocate or exchange anything.
	choices, err := algorithms.Plans(c.cfg, k.coll, k.root)
	if err != nil {
		return nil
	}
	op := call.Op
	if !call.Coll.Reduces() {
		op = plan.Sum
	}
	return choices[algorithms.SelectFor(choices, call.Count*int64(call.Type.Size()), call.Type, op)].Plan
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

func (c *Comm) launchP2P(ops []P2P, s hal.Stream) error {
	if s == nil {
		return fmt.Errorf("weft: point-to-point on rank %d: stream is nil: %w", c.cfg.Rank, hal.ErrInvalidArgument)
	}
	if c.p2p == nil {
		return fmt.Errorf("weft: point-to-point on rank %d: no plan: the links are not memory-mapped and point-to-point has no port-channel plan yet: %w", c.cfg.Rank, hal.ErrNotSupported)
	}
	rounds, err := c.p2pRounds(ops)
	if err != nil {
		return err
	}
	if err := c.boot.Err(); err != nil {
		return fmt.Errorf("weft: point-to-point on rank %d: %w", c.cfg.Rank, err)
	}
	a := c.p2p
	prog, err := c.p2pProgram()
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
	c.launched()
	for _, round := range rounds {
		if err := c.stageOverlapping(round, prog, s, newArgs); err != nil {
			return err
		}
		args := newArgs()
		for _, o := range round {
			var slot int
			switch {
			case o.Peer == me && o.Send:
				slot = algorithms.SelfArg(n)
				args.Groups[slot-1].Input, args.Groups[slot-1].Count, args.Groups[slot-1].Skip = o.Buf, o.Bytes, false
				continue
			case o.Peer == me:
				args.Groups[algorithms.SelfArg(n)-1].Output = o.Buf
				continue
			case o.Send:
				slot = algorithms.SendArg(me, o.Peer)
				args.Groups[slot-1] = plan.GroupArgs{Count: o.Bytes, Input: o.Buf}
			default:
				slot = algorithms.RecvArg(me, o.Peer)
				args.Groups[slot-1] = plan.GroupArgs{Count: o.Bytes, Output: o.Buf}
			}
		}
		if err := prog.Launch(s, args); err != nil {
			return fmt.Errorf("weft: point-to-point on rank %d (%s): %w", c.cfg.Rank, a.choice.Plan.Name, err)
		}
	}
	return nil
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

func sizeOf(b hal.Buffer) int64 {
	if b == nil {
		return 0
	}
	return b.Size()
}

// p2pProgram returns the compiled point-to-point plan. It is prepared in
// NewComm, where every rank takes part, because a group's operations
// involve only some ranks.
func (c *Comm) p2pProgram() (hal.Program, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	prog, ok := c.p2p.programs[progKey{plan.Uint8, plan.Sum}]
	if !ok {
		return nil, fmt.Errorf("weft: rank %d: point-to-point plan not prepared: %w", c.cfg.Rank, hal.ErrInternal)
	}
	return prog, nil
}

// allAlgos lists every plan of the communicator.
func (c *Comm) allAlgos() []*algo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]*algo{}, c.allreduce...)
	if c.p2p != nil {
		out = append(out, c.p2p)
	}
	for _, as := range c.colls {
		out = append(out, as...)
	}
	return out
}
