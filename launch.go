package weft

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/env"
)

// Call is one collective call on buffers given by address in the device's
// address space (hal.Buffer.Addr; for hal/nvlink any device pointer, also
// memory weft did not allocate). This is the form the NCCL C ABI uses.
//
// Count is NCCL's count argument: elements per rank for AllReduce,
// Broadcast and Reduce; the send count of AllGather (Recv holds
// NRanks × Count); the receive count of ReduceScatter (Send holds
// NRanks × Count); the elements sent to each peer by AllToAll (both
// buffers hold NRanks × Count). In place is Send == Recv for AllReduce,
// Broadcast, Reduce and AllToAll, Send == Recv + Rank × Count × size for
// AllGather, and Recv == Send + Rank × Count × size for ReduceScatter, as
// in NCCL. In-place AllToAll costs one more local copy of the NRanks ×
// Count elements, on the same stream, into a staging buffer that the
// communicator keeps (grown to the largest such call) until Close;
// buffers that overlap otherwise are refused (ErrInvalidArgument).
// Send of Broadcast and Recv of Reduce matter at the root only.
type Call struct {
	Coll       Collective
	Send, Recv uint64
	Count      int64
	Type       DataType
	Op         RedOp // collectives that reduce
	Root       int   // Broadcast and Reduce
	// Scalar (the element's bits, little-endian) or, when ScalarPtr is not
	// 0, the element at device address ScalarPtr, is the PreMulSum
	// multiplier.
	Scalar    uint64
	ScalarPtr uint64
}

// collKey names the plans of one collective (and root).
type collKey struct {
	coll algorithms.Collective
	root int
}

// key names the plans that serve call.
func (call Call) key() collKey {
	k := collKey{coll: call.Coll}
	if call.Coll.Rooted() {
		k.root = call.Root
	}
	return k
}

// progOp is the operator call's program is compiled for: the call's, or
// Sum for a collective that only moves data (one program per type).
func (call Call) progOp() plan.RedOp {
	if !call.Coll.Reduces() {
		return plan.Sum
	}
	return call.Op
}

// Launch enqueues one collective call on stream s. It is collective: every
// rank makes the same call (same collective, count, type, operator and
// root) in the same order. Buffers need no registration: plans move data
// through the communicator's scratch buffers.
//
// Errors: ErrInvalidArgument for a zero address with a non-zero count, a
// negative count, an unknown type, operator or root, or an operator the
// collective does not take; ErrNotSupported for what weft does not serve
// (the NCCL layer forwards those); a lost peer (ErrRemote) as soon as it
// is known. Failures inside the launch are reported by Synchronize and
// AsyncError.
func (c *Comm) Launch(call Call, s hal.Stream) error {
	t := c.prof.Now()
	if s == nil {
		return fmt.Errorf("weft: %v on rank %d: stream is nil: %w", call.Coll, c.cfg.Rank, hal.ErrInvalidArgument)
	}
	if err := c.checkCall(call); err != nil {
		return err
	}
	if err := c.boot.Err(); err != nil {
		return fmt.Errorf("weft: %v on rank %d: %w", call.Coll, c.cfg.Rank, err)
	}
	if call.Count == 0 {
		return nil
	}
	if c.allToAllByP2P(call) {
		return c.allToAllP2P(call, s, c.cfg.CEP2PMinBytes) // past PeerPlansMaxRanks ranks (p2p.go)
	}
	if ok, err := c.launchWindowed(call, s, t); ok { // symmetric memory windows (window.go)
		return err
	}
	if c.ceP2PServes(call) {
		return c.launchCEP2P(call, s) // p2pce.go
	}
	if c.cearExportServes(call) {
		if ok, err := c.launchCEAllReduceExported(call, s, t); ok { // cear.go
			return err
		}
	}
	if c.ceServes(call) {
		return c.launchCE(call, s, t) // ce.go
	}
	a, err := c.selectAlgo(call, false)
	if err != nil {
		return err
	}
	op := programKey(a, call).op
	if !a.choice.Serves(call.Type, op) {
		// No plan of this communicator computes it (PreMulSum without a
		// scalar per rank, plan/premul.go; Avg of an integer type on staged
		// plans without a final division, plan.Op.PostDiv: the hierarchical
		// and chained port-channel plans): refuse rather than compute wrong
		// numbers.
		why := fmt.Sprintf("plan %s cannot run it for %v", a.choice.Plan.Name, call.Type)
		if err := a.choice.Plan.ServesPreMulSum(); op == plan.PreMulSum && err != nil {
			why = err.Error()
		} else if a.choice.Staged && op == plan.Avg {
			why = fmt.Sprintf("plan %s reduces in stages (%d ranks) and has no final division (plan.Op.PostDiv), so it cannot divide the sum of an integer type", a.choice.Plan.Name, c.cfg.NRanks)
		}
		return fmt.Errorf("weft: %v on rank %d: %v: %s: %w", call.Coll, c.cfg.Rank, op, why, hal.ErrNotSupported)
	}
	args := c.callArgs(call)
	t = c.prof.Since(stagePlan, t)
	prog, err := c.program(a, call.Type, op, call.Count)
	for errors.Is(err, hal.ErrNotResident) {
		// Every rank's backend refused this plan alike (prepare): every
		// rank takes the next plan that can run the call.
		c.refuse(a, call, err)
		next, serr := c.selectAlgo(call, false)
		if serr != nil {
			return serr
		}
		bytes := call.Count * int64(call.Type.Size())
		if c.refused(next, call) || next.choice.MaxBytes > 0 && bytes > next.choice.MaxBytes {
			return fmt.Errorf("weft: %v of %d bytes on rank %d: no other plan of this communicator can run it: %w", call.Coll, bytes, c.cfg.Rank, err)
		}
		a, op = next, programKey(next, call).op
		prog, err = c.program(a, call.Type, op, call.Count)
	}
	if err != nil {
		return err
	}
	t = c.prof.Since(stageProgram, t)
	if err := c.launched(s); err != nil {
		return err
	}
	if inPlaceAllToAll(call, c.cfg.NRanks) {
		if args.Input, err = c.stageInput(call, s); err != nil {
			return err
		}
	}
	a.res.Launching() // wakes a port plan's proxy from an idle sleep (channels.Proxy)
	t = c.prof.Since(stageOrder, t)
	err = prog.Launch(s, args)
	c.prof.Since(stageEnqueue, t)
	return err
}

// Stages of Launch timed under WEFT_PROXY_PROFILE=1 (Comm.prof): what a
// call costs the caller's thread, which a framework pays on its critical
// path (2×H100, 2026-11-26: 15–32 µs a call through libweft_nccl.so
// against NCCL's 8–13, docs/bench/2026-11-26d-h100x2).
const (
	stagePlan    = iota // argument checks, plan choice, arguments
	stageProgram        // the compiled program for the type and operator
	stageOrder          // ordering after the previous call's stream, proxy wake-up
	stageEnqueue        // packing the parameters and the backend's launch
	stageCEBuild        // copy-engine AllGather: checks, set-up lookup, its operations listed
	stageCEQueue        // copy-engine AllGather: hal.StreamOps.QueueOps (the driver calls)
)

var launchStages = []string{"plan choice", "program lookup", "stream order", "enqueue (pack + launch)",
	"copy-engine ops built", "copy-engine ops queued"}

// selectPlan decides which plan serves call; it is the one function that
// does, for Launch, PlanName, PlanSMs, AllReducePlan and AllReduce alike.
// The call is valid (checkCall, or checkArgs for AllReduce).
//
// zeroCopy: the call comes through Comm.AllReduce, whose own zero-copy
// plans serve it (the first whose size bound takes the message), except
// where allReduceViaLaunch sends it to Launch's plans. Otherwise the
// collective's scratch-based plans serve it: the first that runs its type
// and operator and takes its size, past the plans the backend refused as
// not resident (algorithms.SelectForExcept, Comm.refuse); LaunchP2P's
// plan serves SendRecv.
//
// setUp: the collective's plans are set up on first use (a collective
// step: only Launch, where every rank makes the same call), and the
// chosen plan's algo is returned. Without it the choices are computed, not
// set up (naming a plan is no collective call: it must not allocate or
// exchange anything), and the algo is nil where the plans are not set up
// yet.
func (c *Comm) selectPlan(call Call, zeroCopy, setUp bool) (algorithms.Choice, *algo, error) {
	bytes := call.Count * int64(call.Type.Size())
	switch {
	case zeroCopy && !c.allReduceViaLaunch() && !c.allReduceLaunchLL(call):
		a := c.allreduce[algorithms.Select(c.arChoices, bytes)]
		return a.choice, a, nil
	case call.Coll == algorithms.SendRecv || c.allToAllByP2P(call):
		a := c.p2pAlgo(bytes)
		if a == nil {
			return algorithms.Choice{}, nil, fmt.Errorf("weft: point-to-point on rank %d: no plan: %w", c.cfg.Rank, hal.ErrNotSupported)
		}
		return a.choice, a, nil
	}
	var algos []*algo
	var choices []algorithms.Choice
	var err error
	if setUp {
		if algos, err = c.collAlgos(call.key()); err != nil {
			return algorithms.Choice{}, nil, err
		}
	} else {
		c.mu.Lock()
		algos = c.colls[call.key()] // set up already: its refusals count
		c.mu.Unlock()
	}
	if algos != nil {
		choices = choicesOf(algos)
	} else if choices, err = c.plansOf(call.key()); err != nil {
		return algorithms.Choice{}, nil, err
	}
	var skip func(int) bool
	if algos != nil && c.refusals.Load() > 0 {
		skip = func(i int) bool { return c.refused(algos[i], call) }
	}
	i := algorithms.SelectForExcept(choices, bytes, call.Type, call.progOp(), skip)
	if !setUp {
		return choices[i], nil, nil
	}
	return choices[i], algos[i], nil
}

// refused reports whether every rank's backend refused a's plan for call's
// type and operator because its blocks cannot all be resident
// (hal.ErrNotResident; refuse).
func (c *Comm) refused(a *algo, call Call) bool {
	key := programKey(a, call)
	c.mu.Lock()
	defer c.mu.Unlock()
	return a.refused[key]
}

// refuse records that a's plan cannot run call's type and operator on
// this device (err wraps hal.ErrNotResident on every rank: prepare), so
// that selection takes the next plan that can run the call, and says so
// once, at WARN.
func (c *Comm) refuse(a *algo, call Call, err error) {
	key := programKey(a, call)
	c.mu.Lock()
	if a.refused == nil {
		a.refused = map[progKey]bool{}
	}
	a.refused[key] = true
	c.mu.Unlock()
	c.refusals.Add(1)
	env.Logger("INIT").Warn("a plan's thread blocks cannot all be resident on this device: the next plan that can run the call serves it",
		"rank", c.cfg.Rank, "plan", a.choice.Plan.Name, "type", call.Type, "op", key.op, "err", err)
}

// programKey is the type and operator a's plan runs call with (runOp of
// its choice alone): the key of its program and of its refusals.
func programKey(a *algo, call Call) progKey {
	return progKey{call.Type, runOp([]algorithms.Choice{a.choice}, call)}
}

// runOp is the operator the plans of choices run call with: call.progOp(),
// except Avg of a floating type where no choice serves Avg (plans that
// reduce in stages, Choice.Staged: the split Reduce, rings, the plans with
// bounded peers, the chained port-channel plans): then PreMulSum, whose
// scalar callArgs sets to plan.AvgScalar on every rank, which is what Avg
// computes (Σ x·(1/n); Choice.Runs).
func runOp(choices []algorithms.Choice, call Call) plan.RedOp {
	op := call.progOp()
	if op != plan.Avg || !call.Type.Float() {
		return op
	}
	for _, ch := range choices {
		if ch.Serves(call.Type, op) {
			return op
		}
	}
	return plan.PreMulSum
}

// selectAlgo is the set-up plan that serves call (selectPlan; collective).
func (c *Comm) selectAlgo(call Call, zeroCopy bool) (*algo, error) {
	_, a, err := c.selectPlan(call, zeroCopy, true)
	return a, err
}

// callArgs are the launch arguments of call. The scalar is set up here
// only: the PreMulSum multiplier as the call gives it, or, for Avg of a
// floating type, 1/nranks (plan.AvgScalar).
func (c *Comm) callArgs(call Call) *plan.Args {
	args := &plan.Args{Count: call.Count, Input: call.Send, Output: call.Recv, Timeout: c.timeout, Scalar: call.Scalar, ScalarPtr: call.ScalarPtr}
	if call.progOp() == plan.Avg && call.Type.Float() {
		args.Scalar, args.ScalarPtr = plan.AvgScalar(call.Type, c.cfg.NRanks), 0
	}
	return args
}

// checkCall validates a call.
func (c *Comm) checkCall(call Call) error {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("weft: %v on rank %d: %s: %w", call.Coll, c.cfg.Rank, fmt.Sprintf(f, a...), hal.ErrInvalidArgument)
	}
	n := c.cfg.NRanks
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
	if call.Coll.Rooted() && (call.Root < 0 || call.Root >= n) {
		return bad("root %d is not a rank of the communicator (0 to %d)", call.Root, n-1)
	}
	if call.Count == 0 {
		return nil
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
	return nil
}

func overlaps(a, an, b, bn uint64) bool { return a < b+bn && b < a+an }

// collAlgos returns the plans of a collective, set up on first use (every
// rank makes the same first call, so the setup's exchange is collective).
func (c *Comm) collAlgos(k collKey) ([]*algo, error) {
	c.mu.Lock()
	algos, ok := c.colls[k]
	c.mu.Unlock()
	if ok {
		return algos, nil
	}
	choices, err := c.plansOf(k)
	if err != nil {
		return nil, err
	}
	if algos, err = c.setupAlgos(choices); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.colls[k] = algos
	c.mu.Unlock()
	return algos, nil
}

// plansOf computes the choices of Launch's plans for a collective (and
// root), or its direct plans for directKey (window.go), sets nothing up:
// ErrNotSupported where weft has no plan for it.
func (c *Comm) plansOf(k collKey) ([]algorithms.Choice, error) {
	plans := algorithms.Plans
	if k == directKey(k.coll) {
		plans = func(cfg algorithms.Config, coll algorithms.Collective, _ int) ([]algorithms.Choice, error) {
			return algorithms.DirectPlans(cfg, coll)
		}
	}
	choices, err := plans(c.cfg, k.coll, k.root)
	if errors.Is(err, algorithms.ErrNoPlan) {
		return nil, fmt.Errorf("weft: %v: %w", err, hal.ErrNotSupported)
	}
	if err != nil {
		return nil, fmt.Errorf("weft: %v: %w", err, hal.ErrInvalidArgument)
	}
	return choices, nil
}

func choicesOf(algos []*algo) []algorithms.Choice {
	cs := make([]algorithms.Choice, len(algos))
	for i, a := range algos {
		cs[i] = a.choice
	}
	return cs
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
	args.Groups[c.p2pSelfArg()-1] = plan.GroupArgs{Count: bytes, Input: call.Send, Output: base}
	if err := prog.Launch(s, args); err != nil {
		return 0, fmt.Errorf("weft: in-place %v on rank %d: staging the send data: %w", call.Coll, c.cfg.Rank, err)
	}
	return base, nil
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
	c.mu.Lock()
	first := len(a.programs) == 0
	c.mu.Unlock()
	if b := c.cfg.Budget; first && b.Max > 0 && a.choice.Plan.Blocks() > b.Max {
		// Fitting (algorithms.FitBlocks) left it above the budget: one
		// block per group is its minimum.
		env.Logger("INIT").Warn("plan holds more thread blocks than the block budget: it cannot run with fewer (one block per group)",
			"rank", c.cfg.Rank, "plan", a.choice.Plan.Name, "blocks", a.choice.Plan.Blocks(), "groups", len(a.choice.Plan.Groups), "max_ctas", b.Max)
	}
	prog, err := c.prepare(a, t, op, count)
	if err != nil {
		return nil, err
	}
	prog = &heldProgram{Program: prog, blocks: a.choice.Plan.Blocks()}
	c.mu.Lock()
	a.programs[key] = prog
	c.mu.Unlock()
	return prog, nil
}

// heldProgram is a prepared program that remembers whether it was
// launched, for PeakBlocks: a launch holds blocks thread blocks (GPU
// backends launch one per plan block, whichever groups a call runs).
type heldProgram struct {
	hal.Program
	blocks   int
	launched atomic.Bool
}

func (h *heldProgram) Launch(s hal.Stream, a *plan.Args) error {
	h.launched.Store(true)
	return h.Program.Launch(s, a)
}

// PeakBlocks is the most thread blocks (CTAs) any launch of this
// communicator has held so far, over every plan it launched: Launch,
// AllReduce, LaunchP2P and the staging copies of in-place AllToAll. With a
// block budget (Options.MaxCTAs, WEFT_MAX_CTAS, ncclConfig_t.maxCTAs) it
// is at most the budget, unless a plan cannot run with fewer blocks
// (logged once when that plan is first prepared). 0 before the first
// launch.
func (c *Comm) PeakBlocks() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	peak := 0
	visit := func(algos []*algo) {
		for _, a := range algos {
			for _, p := range a.programs {
				if h, ok := p.(*heldProgram); ok && h.launched.Load() {
					peak = max(peak, h.blocks)
				}
			}
		}
	}
	visit(c.allreduce)
	visit(c.p2p)
	for _, algos := range c.colls {
		visit(algos)
	}
	return peak
}

// prepare compiles a plan for a data type and operator on its first use,
// then waits until every rank has done the same before anyone launches it:
// loading a module can wait for kernels already running in the context, and
// a kernel of this plan spins until its peers' kernels run. The exchange
// also checks that every rank chose the same plan, type, operator and
// count, and names the ranks that did not. When every rank that failed
// was refused because the plan's blocks cannot all be resident, every
// rank returns an error wrapping hal.ErrNotResident (Launch then takes the
// next plan); any other failure wraps its own sentinel, or ErrRemote.
func (c *Comm) prepare(a *algo, t plan.DataType, op plan.RedOp, count int64) (hal.Program, error) {
	prog, err := c.exec.Prepare(hal.PlanSpec{Plan: a.choice.Plan, Bindings: a.res.Bindings, DataType: t, RedOp: op, Library: a.library})
	status := "ok"
	if err != nil {
		status = err.Error()
		if errors.Is(err, hal.ErrNotResident) {
			status = notResidentStatus + status
		}
	}
	me := fmt.Sprintf("%s %v %v count=%d", a.choice.Plan.Name, t, op, count)
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	all, xerr := c.boot.AllGather(ctx, []byte(me+"\x00"+status))
	if xerr != nil {
		if err != nil {
			// Not ErrNotResident: without the exchange no rank knows
			// what the others decided.
			return nil, fmt.Errorf("weft: prepare %s for %v %v on rank %d: %v; exchange: %w", a.choice.Plan.Name, t, op, c.cfg.Rank, err, xerr)
		}
		prog.Close()
		return nil, fmt.Errorf("weft: rank %d: %w", c.cfg.Rank, xerr)
	}
	// The first rank that failed otherwise than for residency (other), or
	// else the first other rank that failed (remote), is the one named.
	other, remote, why := -1, -1, ""
	for r, b := range all {
		theirs, st, _ := strings.Cut(string(b), "\x00")
		if theirs != me {
			mismatch := fmt.Errorf("weft: rank %d calls %s but rank %d calls %s: %w", c.cfg.Rank, me, r, theirs, hal.ErrInvalidUsage)
			if err != nil { // this rank's own failure named too, and no fallback
				return nil, fmt.Errorf("weft: prepare %s for %v %v on rank %d: %v; %w", a.choice.Plan.Name, t, op, c.cfg.Rank, err, mismatch)
			}
			prog.Close()
			return nil, mismatch
		}
		if st == "ok" {
			continue
		}
		msg, notResident := strings.CutPrefix(st, notResidentStatus)
		if !notResident && other < 0 {
			other, why = r, msg
		} else if r != c.cfg.Rank && remote < 0 && other < 0 {
			remote, why = r, msg
		}
	}
	switch {
	case err != nil && (other < 0 || !errors.Is(err, hal.ErrNotResident)):
		return nil, fmt.Errorf("weft: prepare %s for %v %v on rank %d: %w", a.choice.Plan.Name, t, op, c.cfg.Rank, err)
	case err != nil:
		// Not resident here, another failure elsewhere: no rank falls back.
		return nil, fmt.Errorf("weft: prepare %s for %v %v on rank %d: %v; rank %d: %s: %w", a.choice.Plan.Name, t, op, c.cfg.Rank, err, other, why, hal.ErrRemote)
	case other >= 0:
		prog.Close()
		return nil, fmt.Errorf("weft: rank %d could not prepare %s: %s: %w", other, me, why, hal.ErrRemote)
	case remote >= 0:
		prog.Close()
		return nil, fmt.Errorf("weft: rank %d could not prepare %s: %s: %w", remote, me, why, hal.ErrNotResident)
	}
	return prog, nil
}

// notResidentStatus marks, in prepare's exchange, a rank whose backend
// refused the plan because its blocks cannot all be resident.
const notResidentStatus = "not-resident\x01"

// PlanName names the plan that Launch uses for call ("all_gather-LL16",
// …; for SendRecv, LaunchP2P's plan), or "" for a call Launch refuses. It
// is local: it sets nothing up.
func (c *Comm) PlanName(call Call) string {
	if name := c.windowPlanName(call); name != "" {
		return name
	}
	if c.ceP2PServes(call) {
		return ceP2PName(call)
	}
	if c.cearExportServes(call) || c.ceServes(call) {
		return c.ceName(call)
	}
	if p := c.planFor(call, false); p != nil {
		return p.Name
	}
	return ""
}

// planFor is the plan that serves call (selectPlan: through Comm.AllReduce
// when zeroCopy, else through Launch or, for SendRecv, LaunchP2P), or nil
// for a call they refuse. It is local: it sets nothing up.
func (c *Comm) planFor(call Call, zeroCopy bool) *plan.Plan {
	if call.Coll != algorithms.SendRecv {
		if err := c.checkCall(call); err != nil {
			return nil
		}
	}
	ch, _, err := c.selectPlan(call, zeroCopy, false)
	if err != nil {
		return nil
	}
	return ch.Plan
}

// PlanSMs reports, for the plan PlanName names, the thread blocks a launch
// occupies (at most one SM each) and how many of them move data; the
// others only push port-channel triggers and wait (plan.Plan.DataBlocks).
// With a block budget (Options.MaxCTAs) it is the fitted plan's. Both are
// 0 for a call Launch refuses. The host-issued AllGather holds none; the
// copy-engine AllReduce holds at most its reduction and copy kernels'
// blocks (they may run at once on two lanes; the zero-copy forms, through
// a symmetric window or into outputs exported at the call, have no copy
// kernel), none of them moving data over the links.
func (c *Comm) PlanSMs(call Call) (blocks, moving int) {
	if c.windowServes(call) != nil || c.cearExportServes(call) {
		return c.cearBlocks(), 0
	}
	if a, _, _ := c.windowSM(call); a != nil {
		return a.choice.Plan.Blocks(), a.choice.Plan.DataBlocks()
	}
	if ch, _ := c.windowDirect(call); ch.Plan != nil {
		return ch.Plan.Blocks(), ch.Plan.DataBlocks()
	}
	if c.ceP2PServes(call) {
		// Copy engines; a copy to itself (an out-of-place Broadcast's
		// root, an AllToAll's own segment) on the copy kernel's blocks.
		if call.Coll == algorithms.AllToAll || (c.cfg.Rank == call.Root && call.Send != call.Recv) {
			return c.cearBlocks(), 0
		}
		return 0, 0
	}
	if c.ceServes(call) {
		switch call.Coll {
		case algorithms.AllReduce:
			return 2 * c.cearBlocks(), 0
		case algorithms.Reduce:
			if c.cfg.Rank == call.Root {
				return c.cearBlocks(), 0 // the reduction kernel
			}
		}
		return 0, 0 // no kernel
	}
	if p := c.planFor(call, false); p != nil {
		return p.Blocks(), p.DataBlocks()
	}
	return 0, 0
}

// Plans describes the AllReduce plans and the message sizes each serves,
// smallest first ("allreduce-1pa-LL16 ≤ 131072 B"), then the copy-engine
// executor's range where it takes sizes before them
// ("all_reduce-ce-host-issued ≥ 1073741824 B").
func (c *Comm) Plans() []string {
	var out []string
	for _, a := range c.allreduce {
		if a.choice.MaxBytes > 0 {
			out = append(out, fmt.Sprintf("%s ≤ %d B", a.choice.Plan.Name, a.choice.MaxBytes))
		} else {
			out = append(out, a.choice.Plan.Name+" above")
		}
	}
	// The copy-engine executor before the tiers (cearServes).
	switch {
	case !c.ceOK || c.cfg.NRanks < 2:
	case c.cfg.Algo == algorithms.CEFamily:
		out = append(out, cearName+" for every size (WEFT_ALGO=ce)")
	case c.cfg.Algo == "" && c.cfg.CEAllReduceMinBytes > 0:
		out = append(out, fmt.Sprintf("%s ≥ %d B", cearName, c.cfg.CEAllReduceMinBytes))
	}
	return out
}

// PlanSource says where the AllReduce plans came from: "default",
// "WEFT_ALLREDUCE", "tuning file PATH" or "Options.Config".
func (c *Comm) PlanSource() string { return c.source }

// AllReducePlan names the plan that serves an AllReduce of count elements
// of type t and operator op through Comm.AllReduce ("allreduce-1pa-LL16-8x1024";
// the Launch plan where AllReduce goes through Launch), or "" for a call
// it refuses.
func (c *Comm) AllReducePlan(count int64, t DataType, op RedOp) string {
	// Stand-in addresses: naming the plan depends only on the count, type
	// and operator.
	call := Call{Coll: algorithms.AllReduce, Send: 16, Recv: 16, Count: count, Type: t, Op: op}
	if c.cearServes(call, true) {
		return cearName
	}
	if p := c.planFor(call, true); p != nil {
		return p.Name
	}
	return ""
}

// allReduceViaLaunch: port-mapped links, or WEFT_ALGO=port or nvls, take
// AllReduce through the scratch-based plans of Launch (the NVLS plan
// through the switch buffer).
func (c *Comm) allReduceViaLaunch() bool {
	return len(c.allreduce) == 0 || c.cfg.Algo == algorithms.PortFamily || c.cfg.Algo == algorithms.NVLSFamily
}

// allReduceLaunchLL reports whether Comm.AllReduce takes call through
// Launch's LL plan instead of its own zero-copy tiers: where those would
// run a 2PA (it reads the peers' buffers in place) on a message of at most
// Config.WindowLLMaxBytes that Launch serves with LL packets (its wide 1PA
// reaches 2–4 MiB on 2 GPUs). The rule and its bound are the symmetric
// windows' (window.go): on 2×H100 a 512 KB AllReduce took 4.5 µs on LL
// against 10.2 on the zero-copy 2PA, 2 MB 20.4 against 14.6
// (docs/bench/2026-11-29-h100x2, calls 3–4); through Comm.AllReduce the
// 2PA took 9.9 µs at 512 KB where the NCCL API's LL took 6.1
// (docs/bench/2026-11-27l-h100x2, calls 4 and 6). Only with the default
// tiers: a tier list given by WEFT_ALLREDUCE, a tuning file or the tuner
// (Config.AllReduce) serves the sizes it names. Every rank decides alike:
// the size, the tiers and the bound agree across ranks.
func (c *Comm) allReduceLaunchLL(call Call) bool {
	bytes := call.Count * int64(call.Type.Size())
	if bytes > c.cfg.WindowLLMaxBytes || len(c.arChoices) == 0 || len(c.cfg.AllReduce) > 0 {
		return false
	}
	own := c.arChoices[algorithms.Select(c.arChoices, bytes)].Plan
	if own == nil || own.Scratch != plan.Simple {
		return false // its own tier is an LL plan already
	}
	p := c.planFor(call, false)
	return p != nil && p.Scratch != plan.Simple
}

// AllReduce enqueues an AllReduce of count elements of type t with operator
// op on stream s: out[i] = in_0[i] ⊕ … ⊕ in_{n−1}[i] on every rank. in and
// out may be the same buffer (in place). count may be 0.
//
// Errors: ErrInvalidArgument for a nil buffer, a negative count, a count
// whose bytes exceed a buffer, an unknown data type or operator; errors of
// buffer registration (collective, on a buffer's first use by a zero-copy
// plan) and of the device otherwise. Failures during the launch are
// reported by Synchronize.
func (c *Comm) AllReduce(in, out hal.Buffer, count int64, t DataType, op RedOp, s hal.Stream) error {
	if err := c.checkArgs("allreduce", in, out, count, t, op, s); err != nil {
		return err
	}
	call := Call{Coll: algorithms.AllReduce, Send: in.Addr(), Recv: out.Addr(), Count: count, Type: t, Op: op}
	if c.cearServes(call, true) && count > 0 {
		return c.allReduceCE(call, out, s)
	}
	if c.allReduceViaLaunch() || c.allReduceLaunchLL(call) {
		return c.Launch(call, s)
	}
	a, err := c.selectAlgo(call, true)
	if err != nil {
		return err
	}
	return c.launch(a, call, in, out, s)
}

// allReduceCE is Comm.AllReduce through the copy-engine executor with the
// output registered with the peers (collective on its first use, as the
// zero-copy plans' registration): the reduced windows are copied straight
// into the peers' outputs (cear.go).
func (c *Comm) allReduceCE(call Call, out hal.Buffer, s hal.Stream) error {
	t := c.prof.Now()
	if err := c.boot.Err(); err != nil {
		return fmt.Errorf("weft: AllReduce on rank %d: %w", c.cfg.Rank, err)
	}
	reg, err := c.register(out)
	if err != nil {
		return err
	}
	peerOut := make([]uint64, c.cfg.NRanks)
	for p := range peerOut {
		if p != c.cfg.Rank {
			peerOut[p] = reg.Peers[p].Addr()
		}
	}
	return c.launchCEAllReduce(call, s, t, peerOut)
}

func (c *Comm) checkArgs(coll string, in, out hal.Buffer, count int64, t plan.DataType, op plan.RedOp, s hal.Stream) error {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("weft: %s on rank %d: %s: %w", coll, c.cfg.Rank, fmt.Sprintf(f, a...), hal.ErrInvalidArgument)
	}
	switch {
	case in == nil:
		return bad("input buffer is nil")
	case out == nil:
		return bad("output buffer is nil")
	case s == nil:
		return bad("stream is nil")
	case !t.Valid():
		return bad("unsupported data type %v", t)
	case !op.Valid():
		return bad("unsupported reduction op %v", op)
	case op == plan.PreMulSum:
		return bad("PreMulSum needs a scalar: use Launch with Call.Scalar")
	case count < 0:
		return bad("negative count %d", count)
	}
	es := int64(t.Size())
	if count > (1<<62)/es {
		return bad("count %d overflows (× %d bytes)", count, es)
	}
	if count*es > in.Size() {
		return bad("count %d × %d bytes exceeds the %d-byte input buffer", count, es, in.Size())
	}
	if count*es > out.Size() {
		return bad("count %d × %d bytes exceeds the %d-byte output buffer", count, es, out.Size())
	}
	if err := c.boot.Err(); err != nil {
		return fmt.Errorf("weft: %s on rank %d: %w", coll, c.cfg.Rank, err)
	}
	return nil
}

// launch enqueues call (an AllReduce) with a zero-copy plan a, registering
// in and out with the peers where a reads or writes them there.
func (c *Comm) launch(a *algo, call Call, in, out hal.Buffer, s hal.Stream) error {
	prog, err := c.program(a, call.Type, call.Op, call.Count)
	if err != nil {
		return err
	}
	needIn, needOut := a.choice.Plan.Needs()
	var peerIn, peerOut []uint64
	for _, pair := range []struct {
		need bool
		buf  hal.Buffer
		dst  *[]uint64
	}{{needIn, in, &peerIn}, {needOut, out, &peerOut}} {
		if !pair.need {
			continue
		}
		reg, err := c.register(pair.buf)
		if err != nil {
			return err
		}
		*pair.dst = make([]uint64, c.cfg.NRanks)
		for p, b := range reg.Peers {
			if b != nil {
				(*pair.dst)[p] = b.Addr()
			}
		}
	}
	return c.launchPeers(a, prog, call, peerIn, peerOut, s)
}

// launchPeers launches a zero-copy plan's program prog for call, with
// every rank's input and output as this rank addresses them (indexed by
// rank; nil where the plan reads none of them).
func (c *Comm) launchPeers(a *algo, prog hal.Program, call Call, peerIn, peerOut []uint64, s hal.Stream) error {
	args := c.callArgs(call)
	if peerIn != nil || peerOut != nil {
		args.PeerInput = make([]uint64, len(a.choice.Plan.Channels))
		args.PeerOutput = make([]uint64, len(a.choice.Plan.Channels))
		for ci, ch := range a.choice.Plan.Channels {
			if peerIn != nil {
				args.PeerInput[ci] = peerIn[ch.Peer]
			}
			if peerOut != nil {
				args.PeerOutput[ci] = peerOut[ch.Peer]
			}
		}
	}
	if err := c.launched(s); err != nil {
		return err
	}
	a.res.Launching()
	return prog.Launch(s, args)
}

// register returns buf's registration, registering it collectively on
// first use. Every rank reaches this point for the same call, because plan
// selection depends only on the (common) message size.
func (c *Comm) register(buf hal.Buffer) (*channels.Registration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.regs[buf.Addr()]; ok && r.Local == buf {
		return r, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	r, err := channels.Register(ctx, c.boot, c.dev, buf)
	if err != nil {
		return nil, fmt.Errorf("weft: register buffer on rank %d: %w", c.cfg.Rank, err)
	}
	if old, ok := c.regs[buf.Addr()]; ok {
		c.postRemoveLocked(old)
		old.Close()
	}
	c.regs[buf.Addr()] = r
	if err := c.postAddLocked(r); err != nil { // zero-copy point-to-point (p2ppost.go)
		return nil, err
	}
	return r, nil
}

// Deregister unmaps buf from the peers; call it before freeing a buffer
// that collectives used. It is not collective.
func (c *Comm) Deregister(buf hal.Buffer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.regs[buf.Addr()]
	if !ok {
		return nil
	}
	delete(c.regs, buf.Addr())
	return errors.Join(c.postRemoveLocked(r), r.Close())
}
