// Package weft is a GPU communication stack: one-sided channel primitives
// over a hardware-abstraction layer organised by interconnect, collectives
// written as plans over those channels, and a communicator that runs them.
//
// A [Comm] joins the ranks of a job: one process per device (or one
// goroutine per device in tests), a bootstrap for out-of-band exchange, and
// a device opened through a HAL backend:
//
//	boot, _ := bootstrap.Connect(ctx, id, rank, size)
//	dev, _ := hal.Open("nvlink", hal.Config{Ordinal: localRank, Rank: rank})
//	comm, _ := weft.NewComm(ctx, boot, dev, weft.Options{})
//	err := comm.AllReduce(in, out, count, plan.Float32, plan.Sum, stream)
//	err = comm.Synchronize(stream)
//
// Collectives are asynchronous: they enqueue work on the caller's stream
// (and may be captured into a graph). Synchronize waits for the stream and
// reports any failure recorded by the device — a wait that passed its
// deadline, an element count that differs between ranks, a peer that
// disappeared — as an error naming the ranks involved.
package weft

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/env"
)

// Bootstrap is what a communicator needs of the bootstrap
// (bootstrap.Bootstrap satisfies it).
type Bootstrap interface {
	channels.Exchanger
	// Err is the first failure of the bootstrap (a peer that disappeared).
	Err() error
	// Failed is closed when Err becomes non-nil.
	Failed() <-chan struct{}
}

// Options configure a communicator. Zero values mean defaults.
type Options struct {
	// Config overrides the algorithm configuration (block counts, LL
	// threshold); nil uses algorithms.DefaultConfig for the device.
	Config *algorithms.Config
	// Timeout bounds every device- and host-side wait; 0: WEFT_TIMEOUT.
	Timeout time.Duration
}

// Comm is a communicator: the ranks of a job and the prepared plans of
// their collectives.
type Comm struct {
	boot    Bootstrap
	dev     hal.Device
	exec    hal.Executor
	cfg     algorithms.Config
	source  string // where the AllReduce tiers came from (PlanSource)
	timeout time.Duration
	stall   stallState // progress exchange with the other ranks (stall.go)

	net       *channels.Network   // peers on other nodes (nil: none)
	allreduce []*algo             // zero-copy AllReduce (Comm.AllReduce)
	p2p       *algo               // point-to-point (LaunchP2P)
	colls     map[collKey][]*algo // scratch-based plans (Launch), set up on first use

	mu   sync.Mutex
	regs map[uint64]*channels.Registration
	// staging holds the data of sends that overlap receives of the same
	// group; retired are earlier, smaller staging buffers, freed at Close.
	staging hal.Buffer
	retired []hal.Buffer
}

// algo is one plan with its resources and compiled programs.
type algo struct {
	choice   algorithms.Choice
	res      *channels.Resources
	library  map[string]string
	programs map[progKey]hal.Program
}

type progKey struct {
	t  plan.DataType
	op plan.RedOp
}

// NewComm creates a communicator. It is collective: every rank calls it
// with its own device. Errors wrap hal sentinels; on error nothing stays
// allocated.
func NewComm(ctx context.Context, boot Bootstrap, dev hal.Device, opts Options) (_ *Comm, err error) {
	// Every WEFT_* variable is checked before any is used: a malformed
	// value is ErrInvalidArgument naming it, never a silent default.
	if err := env.CheckAll(); err != nil {
		return nil, fmt.Errorf("weft: rank %d: %w", boot.Rank(), err)
	}
	exec, ok := dev.(hal.Executor)
	if !ok {
		return nil, fmt.Errorf("weft: backend %s cannot execute plans: %w", dev.Info().Backend, hal.ErrNotSupported)
	}
	info := dev.Info()
	// Precedence: an explicit configuration, then WEFT_* variables, then
	// the tuning file, then the defaults for the device.
	cfg := algorithms.DefaultConfig(boot.Rank(), boot.Size(), info.Multiprocessors, info.Backend != "host")
	source := "Options.Config"
	if opts.Config != nil {
		cfg = *opts.Config
	} else {
		if cfg.Algo, err = algoFromEnv(); err != nil {
			return nil, err
		}
		if cfg.AllReduce, source, err = allReduceTiers(info, boot.Size()); err != nil {
			return nil, err
		}
	}
	if cfg.PortOnly, cfg.Switch, cfg.Nodes, err = linkKinds(ctx, boot, dev); err != nil {
		return nil, err
	}
	if err := agreeOnPlans(ctx, boot, cfg, source); err != nil {
		return nil, err
	}
	c := &Comm{boot: boot, dev: dev, exec: exec, cfg: cfg, source: source, timeout: opts.Timeout, regs: map[uint64]*channels.Registration{}, colls: map[collKey][]*algo{}}
	if c.timeout <= 0 {
		if c.timeout, err = env.Duration("WEFT_TIMEOUT", 10*time.Second); err != nil {
			return nil, fmt.Errorf("weft: rank %d: %w", boot.Rank(), err)
		}
	}
	c.startProgress()
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if cfg.Nodes != nil {
		// Peers on other nodes: their port channels use the network.
		if c.net, err = channels.OpenNetwork(ctx, boot, dev); err != nil {
			return nil, fmt.Errorf("weft: %w", err)
		}
	}
	if !cfg.PortOnly {
		// The zero-copy AllReduce plans use memory channels; where links
		// are port-mapped only, AllReduce goes through Launch's
		// port-channel plan.
		choices, err := algorithms.AllReducePlans(cfg)
		if err != nil {
			return nil, fmt.Errorf("weft: %v: %w", err, hal.ErrInvalidArgument)
		}
		if c.allreduce, err = c.setupAlgos(choices); err != nil {
			return nil, err
		}
	}
	// Point-to-point operations involve only some ranks, so their plan
	// (over port channels where links are port-mapped only) is set up and
	// compiled here, where every rank takes part.
	p2p, err := algorithms.Plans(cfg, algorithms.SendRecv, 0)
	if err != nil {
		return nil, fmt.Errorf("weft: %v: %w", err, hal.ErrInvalidArgument)
	}
	algos, err := c.setupAlgos(p2p)
	if err != nil {
		return nil, err
	}
	c.p2p = algos[0]
	if _, err := c.program(c.p2p, plan.Uint8, plan.Sum, 0); err != nil {
		return nil, err
	}
	env.Logger("INIT").Info("communicator ready", "rank", cfg.Rank, "nranks", cfg.NRanks, "backend", info.Backend,
		"device", info.Name, "memory", c.MemoryBytes())
	return c, nil
}

// Rank and Size of the communicator.
func (c *Comm) Rank() int { return c.cfg.Rank }
func (c *Comm) Size() int { return c.cfg.NRanks }

// Device is the communicator's device.
func (c *Comm) Device() hal.Device { return c.dev }

// Plans describes the AllReduce plans and the message sizes each serves,
// smallest first ("allreduce-1pa-LL16 ≤ 131072 B").
func (c *Comm) Plans() []string {
	var out []string
	for _, a := range c.allreduce {
		if a.choice.MaxBytes > 0 {
			out = append(out, fmt.Sprintf("%s ≤ %d B", a.choice.Plan.Name, a.choice.MaxBytes))
		} else {
			out = append(out, a.choice.Plan.Name+" above")
		}
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
func (c *Comm) AllReducePlan(count int64, t plan.DataType, op plan.RedOp) string {
	if c.allReduceViaLaunch() {
		// Stand-in addresses: naming the plan depends only on the count,
		// type and operator.
		return c.PlanName(Call{Coll: algorithms.AllReduce, Send: 16, Recv: 16, Count: count, Type: t, Op: op})
	}
	if count < 0 || !t.Valid() {
		return ""
	}
	return c.allreduce[algorithms.Select(c.choices(), count*int64(t.Size()))].choice.Plan.Name
}

// allReduceViaLaunch: port-mapped links, or WEFT_ALGO=port or nvls, take
// AllReduce through the scratch-based plans of Launch (the NVLS plan
// through the switch buffer).
func (c *Comm) allReduceViaLaunch() bool {
	return len(c.allreduce) == 0 || c.cfg.Algo == algorithms.PortFamily || c.cfg.Algo == algorithms.NVLSFamily
}

// MemoryBytes is the device memory the communicator holds on this rank for
// scratch, semaphores, state and the staging buffer of in-place AllToAll
// and overlapping point-to-point sends (registered user buffers not
// counted), in bytes.
func (c *Comm) MemoryBytes() int64 {
	var n int64
	for _, a := range c.allAlgos() {
		n += a.res.Bytes()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range append(c.retired, c.staging) {
		n += sizeOf(b)
	}
	return n
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
func (c *Comm) AllReduce(in, out hal.Buffer, count int64, t plan.DataType, op plan.RedOp, s hal.Stream) error {
	if err := c.checkArgs("allreduce", in, out, count, t, op, s); err != nil {
		return err
	}
	if c.allReduceViaLaunch() {
		return c.launchCall(Call{Coll: algorithms.AllReduce, Send: in.Addr(), Recv: out.Addr(), Count: count, Type: t, Op: op}, s)
	}
	bytes := count * int64(t.Size())
	a := c.allreduce[algorithms.Select(c.choices(), bytes)]
	return c.launch(a, in, out, count, t, op, s)
}

// algoFromEnv reads WEFT_ALGO.
func algoFromEnv() (string, error) {
	v := strings.ToLower(env.String("WEFT_ALGO"))
	if v == "" || slices.Contains(algorithms.Families, v) {
		return v, nil
	}
	return "", fmt.Errorf("weft: WEFT_ALGO=%q: want one of %s: %w", v, strings.Join(algorithms.Families, ", "), hal.ErrInvalidArgument)
}

// linkKinds exchanges endpoints and reports whether every link to a peer
// is port-mapped but not memory-mapped, whether every link is
// memory-mapped and switch-mapped (the NVLS plans can run), and whether
// some peer is on another node (Endpoint.Node), reached through a network
// whose links are port-mapped: then nodes is the node of each rank (0, 1,
// … in order of first appearance), else nil. A link with neither memory nor port mapping
// within a node is ErrNotSupported, naming the peer; links of mixed kinds
// use memory channels where they can, which needs all links memory-mapped.
func linkKinds(ctx context.Context, boot Bootstrap, dev hal.Device) (portOnly, switchMapped bool, nodes []int, err error) {
	if boot.Size() == 1 {
		return false, false, nil, nil
	}
	blob, err := json.Marshal(dev.Endpoint())
	if err != nil {
		return false, false, nil, fmt.Errorf("weft: %w", err)
	}
	all, err := boot.AllGather(ctx, blob)
	if err != nil {
		return false, false, nil, fmt.Errorf("weft: exchange endpoints: %w", err)
	}
	memory, port, sw := true, true, true
	ids := map[string]int{}
	nodes = make([]int, len(all))
	for r, b := range all {
		var ep hal.Endpoint
		if r == boot.Rank() {
			ep = dev.Endpoint()
		} else if err := json.Unmarshal(b, &ep); err != nil {
			return false, false, nil, fmt.Errorf("weft: rank %d sent a malformed endpoint: %v: %w", r, err, hal.ErrRemote)
		}
		node := hal.NodeOf(ep.HostID, ep.Node)
		if _, ok := ids[node]; !ok {
			ids[node] = len(ids)
		}
		nodes[r] = ids[node]
		if r == boot.Rank() {
			continue
		}
		if dev.Endpoint().OtherNode(ep) != "" {
			memory, sw = false, false
			continue
		}
		l := dev.Link(ep)
		if l.Caps&(hal.CapMemoryMapped|hal.CapPortMapped) == 0 {
			return false, false, nil, fmt.Errorf("weft: rank %d: no memory- or port-mapped link to rank %d (%s): %w", boot.Rank(), r, l.Reason, hal.ErrNotSupported)
		}
		memory = memory && l.Caps&hal.CapMemoryMapped != 0
		port = port && l.Caps&hal.CapPortMapped != 0
		sw = sw && l.Caps&hal.CapSwitchMapped != 0
	}
	if len(ids) == 1 {
		nodes = nil
	}
	return !memory && port, memory && sw, nodes, nil
}

func (c *Comm) choices() []algorithms.Choice {
	cs := make([]algorithms.Choice, len(c.allreduce))
	for i, a := range c.allreduce {
		cs[i] = a.choice
	}
	return cs
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

func (c *Comm) launch(a *algo, in, out hal.Buffer, count int64, t plan.DataType, op plan.RedOp, s hal.Stream) error {
	prog, err := c.program(a, t, op, count)
	if err != nil {
		return err
	}
	args := &plan.Args{Count: count, Input: in.Addr(), Output: out.Addr(), Timeout: c.timeout}
	if op == plan.Avg && t.Float() {
		args.Scalar = plan.AvgScalar(t, c.cfg.NRanks)
	}
	needIn, needOut := a.choice.Plan.Needs()
	if needIn || needOut {
		args.PeerInput = make([]uint64, len(a.choice.Plan.Channels))
		args.PeerOutput = make([]uint64, len(a.choice.Plan.Channels))
		for _, pair := range []struct {
			need bool
			buf  hal.Buffer
			dst  []uint64
		}{{needIn, in, args.PeerInput}, {needOut, out, args.PeerOutput}} {
			if !pair.need {
				continue
			}
			reg, err := c.register(pair.buf)
			if err != nil {
				return err
			}
			for ci, ch := range a.choice.Plan.Channels {
				pair.dst[ci] = reg.Peers[ch.Peer].Addr()
			}
		}
	}
	c.launched()
	return prog.Launch(s, args)
}

// prepare compiles a plan for a data type and operator on its first use,
// then waits until every rank has done the same before anyone launches it:
// loading a module can wait for kernels already running in the context, and
// a kernel of this plan spins until its peers' kernels run. The exchange
// also checks that every rank chose the same plan, type, operator and
// count, and names the ranks that did not.
func (c *Comm) prepare(a *algo, t plan.DataType, op plan.RedOp, count int64) (hal.Program, error) {
	prog, err := c.exec.Prepare(hal.PlanSpec{Plan: a.choice.Plan, Bindings: a.res.Bindings, DataType: t, RedOp: op, Library: a.library})
	status := "ok"
	if err != nil {
		status = err.Error()
	}
	me := fmt.Sprintf("%s %v %v count=%d", a.choice.Plan.Name, t, op, count)
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	all, xerr := c.boot.AllGather(ctx, []byte(me+"\x00"+status))
	if err != nil {
		return nil, fmt.Errorf("weft: prepare %s for %v %v on rank %d: %w", a.choice.Plan.Name, t, op, c.cfg.Rank, err)
	}
	if xerr != nil {
		prog.Close()
		return nil, fmt.Errorf("weft: rank %d: %w", c.cfg.Rank, xerr)
	}
	for r, b := range all {
		theirs, st, _ := strings.Cut(string(b), "\x00")
		if theirs != me {
			prog.Close()
			return nil, fmt.Errorf("weft: rank %d calls %s but rank %d calls %s: %w", c.cfg.Rank, me, r, theirs, hal.ErrInvalidUsage)
		}
		if st != "ok" {
			prog.Close()
			return nil, fmt.Errorf("weft: rank %d could not prepare %s: %s: %w", r, me, st, hal.ErrRemote)
		}
	}
	return prog, nil
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
		old.Close()
	}
	c.regs[buf.Addr()] = r
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
	return r.Close()
}

// Synchronize waits for the work queued on s and returns the first failure
// any launch recorded, or the loss of a peer. When the bootstrap reports a
// lost peer first, the device's waits are aborted at once, and the error
// names that peer. It gives up (ErrTimeout, after aborting the device's
// waits) when the stream is still busy Options.Timeout + 5 s after the
// call: callers that queue longer work on the stream synchronise it
// themselves first, or raise the timeout.
//
// Before it reports a wait that passed its deadline or a lost connection,
// it asks the other ranks for their progress (for at most a quarter of the
// timeout, capped at 5 s) and returns a *StallError naming the ranks that
// stopped making progress, rather than the peer the wait was on, which may
// itself have been waiting for them.
func (c *Comm) Synchronize(s hal.Stream) error {
	deadline := time.Now().Add(c.timeout + 5*time.Second)
	for {
		step := time.Now().Add(50 * time.Millisecond)
		if step.After(deadline) {
			step = deadline
		}
		err := s.Synchronize(step)
		if err == nil {
			break
		}
		if !errors.Is(err, hal.ErrTimeout) {
			return fmt.Errorf("weft: rank %d: %w", c.cfg.Rank, err)
		}
		if berr := c.lostPeer(); berr != nil {
			c.abort()
			// Waits give up now; let the stream drain briefly.
			_ = s.Synchronize(time.Now().Add(5 * time.Second))
			return fmt.Errorf("weft: rank %d: %w", c.cfg.Rank, c.diagnose(berr))
		}
		if !time.Now().Before(deadline) {
			c.abort()
			return fmt.Errorf("weft: rank %d: %w", c.cfg.Rank, c.diagnose(fmt.Errorf("stream did not finish within %v: %w", c.timeout+5*time.Second, err)))
		}
	}
	if err := c.Check(); err != nil {
		if v := c.diagnose(err); v != err {
			return fmt.Errorf("weft: %w", v)
		}
		return err
	}
	return nil
}

// Check returns the first failure recorded by any launch (see
// channels.Resources.Check) without waiting.
func (c *Comm) Check() error {
	if v := c.stall.verdict.Load(); v != nil {
		return fmt.Errorf("weft: %w", v)
	}
	for _, a := range c.allAlgos() {
		if err := a.res.Check(); err != nil {
			if berr := c.boot.Err(); berr != nil {
				return fmt.Errorf("weft: %w (%v)", berr, err)
			}
			return fmt.Errorf("weft: %w", err)
		}
	}
	return nil
}

func (c *Comm) abort() {
	for _, a := range c.allAlgos() {
		a.res.Abort()
	}
}

// Close releases programs, channels and registrations.
func (c *Comm) Close() error {
	var errs []error
	for _, a := range c.allAlgos() {
		for _, p := range a.programs {
			errs = append(errs, p.Close())
		}
		errs = append(errs, a.res.Close())
	}
	c.mu.Lock()
	c.allreduce, c.p2p, c.colls = nil, nil, map[collKey][]*algo{}
	c.mu.Unlock()
	c.mu.Lock()
	for k, r := range c.regs {
		errs = append(errs, r.Close())
		delete(c.regs, k)
	}
	for _, b := range append(c.retired, c.staging) {
		if b != nil {
			errs = append(errs, b.Free())
		}
	}
	c.staging, c.retired = nil, nil
	c.mu.Unlock()
	if c.net != nil {
		// After the plans: their engines close before the NetDevice.
		errs = append(errs, c.net.Close())
		c.net = nil
	}
	return errors.Join(errs...)
}
