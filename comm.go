package weft

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/stageprof"
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

// Comm is a communicator: the ranks of a job and the prepared plans of
// their collectives.
type Comm struct {
	boot    Bootstrap
	dev     hal.Device
	exec    hal.Executor
	cfg     algorithms.Config
	source  string // where the AllReduce tiers came from (PlanSource)
	timeout time.Duration
	stall   stallState  // progress exchange with the other ranks (stall.go)
	aborted atomic.Bool // Abort was called: Close waits for no peer
	// refusals counts the plans refused as not resident (algo.refused), so
	// that selection looks them up only once there is one.
	refusals atomic.Int32
	order    streamOrder // calls in issue order across streams (order.go)
	// prof times Launch's stages on the host (WEFT_PROXY_PROFILE=1;
	// launchStages), logged at Close; nil when off.
	// p2pProf times LaunchP2P's stages the same way (p2pStages).
	p2pProf *stageprof.Set
	prof    *stageprof.Set

	net       *channels.Network   // peers on other nodes (nil: none)
	allreduce []*algo             // zero-copy AllReduce (Comm.AllReduce)
	arChoices []algorithms.Choice // their choices (choicesOf), for selection without an allocation per call
	p2p       []*algo             // point-to-point (LaunchP2P): per peer window, smallest operations first
	p2pWins   []p2pWindow         // the peer windows of p2p, in order (p2p.go)
	p2pProgs  []hal.Program       // p2p's compiled programs, once all are (p2pPrograms)
	colls     map[collKey][]*algo // scratch-based plans (Launch), set up on first use

	mu   sync.Mutex
	regs map[uint64]*channels.Registration
	// staging holds the data of sends that overlap receives of the same
	// group; retired are earlier, smaller staging buffers, freed at Close.
	staging hal.Buffer
	retired []hal.Buffer
	// posts are the registrations' ids and the post table of zero-copy
	// point-to-point (p2ppost.go).
	posts postRegistry
	// ce and cear are the host-issued copy-engine AllGather's and
	// AllReduce's resources (ce.go, cear.go), cered the flags of the
	// copy-engine Reduce into the root's output (cereduce.go), set up on
	// their first call; nil before.
	ce, cear, cered *hostIssued
	// cep2p is the copy-engine point-to-point path's flag buffer, set up
	// in NewComm where Config.CEP2PMinBytes is on (p2pce.go); imports are
	// the peers' allocations it has mapped.
	cep2p   *hostIssued
	imports importCache
	// ceP2POps counts the operations it has queued (CopyEngineP2POps);
	// ceRedDirect the Reduces queued into the root's output (cereduce.go),
	// cearExported the AllReduces into the peers' exported outputs
	// (cear.go).
	ceP2POps, ceRedDirect, cearExported atomic.Int64
	// ceOK: the host-issued executors can run here (ceUsable: peer-mapped
	// links on one node, usable stream operations); WEFT_ALGO=ce keeps the
	// default plans where they cannot.
	ceOK bool
	// cearKernels are the AllReduce's reduction kernels by type and
	// operator (cear.go), compiled on first use, closed at Close.
	cearKernels map[cearKey]cearKernel
	// windows are the live memory windows in registration order
	// (window.go); windowCalls counts the collectives run zero-copy
	// through them.
	windows     []*Window
	windowCalls atomic.Int64
	symWindows  atomic.Int32 // live symmetric windows that every rank mapped
}

// algo is one plan with its resources and compiled programs.
type algo struct {
	choice   algorithms.Choice
	res      *channels.Resources
	library  map[string]string
	programs map[progKey]hal.Program
	// refused are the types and operators for which every rank's backend
	// refused the plan at Prepare because its blocks cannot all be
	// resident (hal.ErrNotResident): Launch selects past it (Comm.c.mu).
	refused map[progKey]bool
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
	links, err := linkKinds(ctx, boot, dev)
	if err != nil {
		return nil, err
	}
	cfg, source, timeout, err := configure(opts, dev, boot.Rank(), boot.Size(), links.lines)
	if err != nil {
		return nil, err
	}
	cfg.PortOnly, cfg.Switch, cfg.Nodes = links.portOnly, links.switchMapped, links.nodes
	if users := cfg.LL128Users(); len(users) > 0 && !links.lines {
		// Options.Config, WEFT_ALLREDUCE or a tuning file may name LL128
		// lines; WEFT_LL128 is checked in configure.
		return nil, fmt.Errorf("weft: %s take LL128 lines, but not every link between the ranks carries them as one write (%s; NVLink between two GPUs does): %w",
			strings.Join(users, ", "), info.Backend, hal.ErrInvalidArgument)
	}
	ceOK := ceUsable(dev, cfg)
	if !ceOK {
		cfg.CEMinBytes, cfg.CEAllReduceMinBytes, cfg.CEP2PMinBytes, cfg.CEReduceMinBytes = 0, 0, 0, 0
	}
	if err := agreeOnPlans(ctx, boot, cfg, source); err != nil {
		return nil, err
	}
	c := &Comm{boot: boot, dev: dev, exec: exec, cfg: cfg, source: source, timeout: timeout, regs: map[uint64]*channels.Registration{}, colls: map[collKey][]*algo{}, ceOK: ceOK}
	c.prof = stageprof.New(fmt.Sprintf("launch path of rank %d", cfg.Rank), launchStages...)
	c.p2pProf = stageprof.New(fmt.Sprintf("point-to-point launch path of rank %d", cfg.Rank), p2pStages...)
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
		// Every rank opened the same network and reads the same
		// variable: the ranks agree.
		c.cfg.HostWindows = c.net.HostWindows()
	}
	if err := engineWaits(info, c.cfg); err != nil {
		return nil, err
	}
	if !cfg.PortOnly && !cfg.UsesBounded(algorithms.AllReduce) {
		// The zero-copy AllReduce plans use memory channels and are
		// all-pairs; where links are port-mapped only, or past
		// algorithms.AllPairsMaxRanks ranks (or WEFT_ALGO=ring/tree),
		// AllReduce goes through Launch's plans (allReduceViaLaunch).
		choices, err := algorithms.AllReducePlans(cfg)
		if err != nil {
			return nil, fmt.Errorf("weft: %v: %w", err, hal.ErrInvalidArgument)
		}
		if c.allreduce, err = c.setupAlgos(choices); err != nil {
			return nil, err
		}
		c.arChoices = choicesOf(c.allreduce)
	}
	// Point-to-point operations involve only some ranks, so their plans
	// (over port channels where links are port-mapped only; one set per
	// window of at most plan.MaxPeers peers past
	// algorithms.PeerPlansMaxRanks ranks) are set up and compiled here,
	// where every rank takes part.
	if err := c.setupP2P(); err != nil {
		return nil, err
	}
	if err := c.setupCEP2P(); err != nil {
		return nil, err
	}
	env.Logger("INIT").Info("communicator ready", "rank", cfg.Rank, "nranks", cfg.NRanks, "backend", info.Backend,
		"device", info.Name, "memory", c.MemoryBytes(), "wide_ll", cfg.WideLLProto())
	return c, nil
}

// engineWaits refuses, with an error wrapping hal.ErrNotSupported, a GPU
// communicator whose plans would have a running kernel wait for the
// device's own engine — a CUDA stream the proxy queues copies and
// semaphore stores on — to move its bytes:
//   - across nodes, where the network keeps device windows
//     (WEFT_NET_HOST_WINDOWS=0, hal/ib, UCX with CUDA);
//   - on links that are port-mapped only (Config.PortOnly: hal/pcie without
//     peer access, whose engines stage through shared memory).
//
// Those stream operations are queued after the kernel started, so on a
// hardware queue they share with the application's streams (all of them
// under CUDA_DEVICE_MAX_CONNECTIONS=1, as Megatron-LM sets it; some of them
// by default) they wait behind work that waits for the kernel: FSDP2
// across 2 emulated nodes of 2 H100s timed out in its first AllGather with
// CUDA_DEVICE_MAX_CONNECTIONS=1 and with the driver's default
// (docs/bench/2026-11-27j-h100x2, calls 3 and 4), as the copy-engine port
// plans on NVLink did (docs/portchannel.md, "Copy engines beside other
// streams"). Where the network writes host windows
// (algorithms.Config.StagesSends) nothing of the kind is on the path, as
// in NCCL's network transports: the hierarchical plans keep the windows
// their counterparts write in host memory and reach the node's peers over
// memory channels, the flat port plans and the point-to-point windows
// carry every channel over the network. WEFT_ENGINE_WAITS=1 allows the rest, for programs that queue
// nothing behind weft's calls (weft bench). The decision is the same on
// every rank: links, nodes, network and variables are the job's. hal/host's
// engines are goroutines and cannot be held back this way.
func engineWaits(info hal.DeviceInfo, cfg algorithms.Config) error {
	if info.Arch == "" {
		return nil
	}
	var why string
	switch {
	case cfg.Nodes != nil && !cfg.StagesSends():
		why = "across nodes, the network does not write host windows (WEFT_NET_HOST_WINDOWS=0, or a transport that reaches device memory; sockets and UCX without CUDA are served)"
	case cfg.Nodes == nil && cfg.PortOnly:
		why = "every link between the GPUs is port-mapped only (copy engines staged through host memory)"
	default:
		return nil
	}
	if on, _ := env.Bool("WEFT_ENGINE_WAITS", false); on {
		return nil
	}
	return fmt.Errorf("weft: rank %d: on %s, %s: its plans would have kernels wait for CUDA stream operations "+
		"that work queued behind them can hold back for ever (PyTorch's FSDP2 does); WEFT_ENGINE_WAITS=1 allows this "+
		"for programs that queue nothing behind weft's calls (docs/network.md, \"Streams and the network path\"): %w",
		cfg.Rank, info.Backend, why, hal.ErrNotSupported)
}

// links is what linkKinds found out about the links between the ranks.
type links struct {
	// portOnly: every link to a peer is port-mapped but not
	// memory-mapped; switchMapped: every link is memory-mapped and
	// switch-mapped (the NVLS plans can run).
	portOnly, switchMapped bool
	// nodes is the node of each rank (0, 1, … in order of first
	// appearance) where some peer is on another node (Endpoint.Node),
	// reached through a network whose links are port-mapped; else nil.
	nodes []int
	// lines: every rank's device carries LL128 lines on every link to a
	// peer of its node (hal.LL128Carrier), agreed by all ranks.
	lines bool
}

// linkKinds exchanges endpoints and classifies the links (see links). A
// link with neither memory nor port mapping within a node is
// ErrNotSupported, naming the peer; links of mixed kinds use memory
// channels where they can, which needs all links memory-mapped. The
// LL128 verdict takes one more exchange, so that every rank takes it
// alike even where links differ (NVLink between some GPUs, PCIe between
// others).
func linkKinds(ctx context.Context, boot Bootstrap, dev hal.Device) (links, error) {
	carrier, _ := dev.(hal.LL128Carrier)
	if boot.Size() == 1 {
		return links{lines: carrier != nil}, nil
	}
	blob, err := json.Marshal(dev.Endpoint())
	if err != nil {
		return links{}, fmt.Errorf("weft: %w", err)
	}
	all, err := boot.AllGather(ctx, blob)
	if err != nil {
		return links{}, fmt.Errorf("weft: exchange endpoints: %w", err)
	}
	memory, port, sw, lines := true, true, true, carrier != nil
	ids := map[string]int{}
	nodes := make([]int, len(all))
	for r, b := range all {
		var ep hal.Endpoint
		if r == boot.Rank() {
			ep = dev.Endpoint()
		} else if err := json.Unmarshal(b, &ep); err != nil {
			return links{}, fmt.Errorf("weft: rank %d sent a malformed endpoint: %v: %w", r, err, hal.ErrRemote)
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
			return links{}, fmt.Errorf("weft: rank %d: no memory- or port-mapped link to rank %d (%s): %w", boot.Rank(), r, l.Reason, hal.ErrNotSupported)
		}
		memory = memory && l.Caps&hal.CapMemoryMapped != 0
		port = port && l.Caps&hal.CapPortMapped != 0
		sw = sw && l.Caps&hal.CapSwitchMapped != 0
		lines = lines && carrier.LL128(ep)
	}
	if len(ids) == 1 {
		nodes = nil
	}
	mine := []byte{0}
	if lines {
		mine[0] = 1
	}
	verdicts, err := boot.AllGather(ctx, mine)
	if err != nil {
		return links{}, fmt.Errorf("weft: exchange link verdicts: %w", err)
	}
	for r, v := range verdicts {
		if len(v) != 1 || v[0] > 1 {
			return links{}, fmt.Errorf("weft: rank %d sent a malformed link verdict (%d bytes): %w", r, len(v), hal.ErrRemote)
		}
		lines = lines && v[0] == 1
	}
	return links{portOnly: !memory && port, switchMapped: memory && sw, nodes: nodes, lines: lines}, nil
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

// Rank is this rank of the communicator, 0 to Size-1.
func (c *Comm) Rank() int { return c.cfg.Rank }

// Size is the number of ranks of the communicator.

func (c *Comm) Size() int { return c.cfg.NRanks }

// Device is the communicator's device.
func (c *Comm) Device() hal.Device { return c.dev }

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

func sizeOf(b hal.Buffer) int64 {
	if b == nil {
		return 0
	}
	return b.Size()
}

// allAlgos lists every plan of the communicator.
func (c *Comm) allAlgos() []*algo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append(append([]*algo{}, c.allreduce...), c.p2p...)
	for _, as := range c.colls {
		out = append(out, as...)
	}
	return out
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
			c.Abort()
			// Waits give up now; let the stream drain briefly.
			_ = s.Synchronize(time.Now().Add(5 * time.Second))
			return fmt.Errorf("weft: rank %d: %w", c.cfg.Rank, c.diagnose(berr))
		}
		if !time.Now().Before(deadline) {
			c.Abort()
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
	for _, st := range c.hostIssuedStates() {
		// A host-issued executor's released waits (ce.go): its stream
		// completed with undefined data.
		if err := c.dev.(hal.StreamOps).WaitsFailed(st.flags); err != nil {
			if berr := c.boot.Err(); berr != nil {
				return fmt.Errorf("weft: %s: %w (%v)", st.what, berr, err)
			}
			return fmt.Errorf("weft: %s: %w", st.what, err)
		}
	}
	return nil
}

// AsyncError returns, without waiting, the first failure any launch has
// recorded or the loss of a peer (an error wrapping hal.ErrRemote that
// names the rank), or nil. It is what ncclCommGetAsyncError reports.
func (c *Comm) AsyncError() error {
	if v := c.stall.verdict.Load(); v != nil {
		return fmt.Errorf("weft: rank %d: %w", c.cfg.Rank, v)
	}
	if err := c.boot.Err(); err != nil {
		return fmt.Errorf("weft: rank %d: %w", c.cfg.Rank, err)
	}
	err := c.Check()
	if errors.Is(err, hal.ErrTimeout) {
		// A client that polls (PyTorch's watchdog through
		// ncclCommGetAsyncError) finds the device's timed-out wait here,
		// not in Synchronize: log the port channels' state as diagnose does.
		logPortState(c.cfg.Rank, err)
	}
	return err
}

// lostPeer is the first loss of a peer that the bootstrap or the network
// saw (each names the peer's rank), or nil.
func (c *Comm) lostPeer() error {
	if err := c.boot.Err(); err != nil {
		return err
	}
	if c.net != nil {
		if err := c.net.Err(); err != nil {
			return fmt.Errorf("network %s: %w", c.net.Name, err)
		}
	}
	return nil
}

// Abort makes every wait of running and later launches give up at once
// (the kernels' abort word; the copy-engine AllGather's stream waits
// through hal.StreamOps.AbortWaits), so that streams drain; the communicator is unusable afterwards except
// for Close. It does not block.
func (c *Comm) Abort() {
	c.aborted.Store(true)
	for _, a := range c.allAlgos() {
		a.res.Abort()
	}
	for _, st := range c.hostIssuedStates() {
		// The host-issued executors' stream waits (ce.go) have no abort
		// word: the backend releases them.
		c.dev.(hal.StreamOps).AbortWaits(st.flags)
	}
}

// Close releases programs, channels and registrations. Call it once the
// streams that ran the communicator's launches are synchronised. It is
// local, not collective: ranks may close communicators in any order (one
// thread may close A then B while a peer closes B then A).
//
// Before it frees anything, Close waits until every semaphore release
// that peers' launches owe this rank has landed (closewait.go): the LL
// plans' readers release a scratch half after this rank's last launch
// that wrote it may have ended, into this rank's semaphores. The wait is
// bounded by Options.Timeout; past it Close logs a WARN, frees everything
// anyway and returns an error wrapping hal.ErrRemote that names the ranks
// that still owe releases. It does not wait after Abort, for plans whose
// launches recorded a failure, or once a peer is known lost. Other errors:
// those of freeing the device's buffers, joined.
func (c *Comm) Close() error {
	c.prof.Log(env.Logger("COLL"))
	c.p2pProf.Log(env.Logger("COLL"))
	if lp, ok := c.dev.(interface{ LaunchProfile() *stageprof.Set }); ok {
		lp.LaunchProfile().Log(env.Logger("COLL")) // the backend's part of the enqueue (cudadev)
	}
	var errs []error
	algos := c.allAlgos()
	for _, a := range algos {
		for _, p := range a.programs {
			errs = append(errs, p.Close())
		}
	}
	// After the programs (whose launches have then ended, so that the
	// expected values are final), before any memory is freed.
	errs = append(errs, c.awaitReleases(algos))
	for _, a := range algos {
		errs = append(errs, a.res.Quiesce())
	}
	c.awaitQuiesced()
	for _, a := range algos {
		errs = append(errs, a.res.Close())
	}
	states := c.hostIssuedStates()
	c.mu.Lock()
	c.ce, c.cear, c.cered, c.cep2p = nil, nil, nil, nil
	kernels := c.cearKernels
	c.cearKernels = nil
	c.mu.Unlock()
	for _, k := range kernels {
		if k.mod != nil {
			errs = append(errs, k.mod.Close())
		}
	}
	for _, st := range states {
		lost := func() bool {
			return c.aborted.Load() || c.lostPeer() != nil || c.stall.verdict.Load() != nil ||
				c.dev.(hal.StreamOps).WaitsFailed(st.flags) != nil // a peer that stopped owes nothing it will send
		}
		if err := st.awaitQuiet(c.dev, c.cfg.Rank, c.cfg.NRanks, time.Now().Add(c.timeout), lost); err != nil {
			// A peer may still write here: leave the memory mapped.
			errs = append(errs, fmt.Errorf("weft: rank %d: %w", c.cfg.Rank, err))
		} else {
			errs = append(errs, st.close())
		}
	}
	// The peers' allocations the copy-engine point-to-point path mapped
	// (p2pce.go): its copies have ended with the streams.
	errs = append(errs, c.imports.close())
	c.mu.Lock()
	c.allreduce, c.arChoices, c.p2p, c.p2pWins, c.colls = nil, nil, nil, nil, map[collKey][]*algo{}
	c.mu.Unlock()
	c.mu.Lock()
	for k, r := range c.regs {
		errs = append(errs, r.Close())
		delete(c.regs, k)
	}
	for _, w := range c.windows {
		if w.reg != nil {
			errs = append(errs, w.reg.Close())
		}
	}
	c.windows = nil
	for _, b := range append(c.retired, c.staging) {
		if b != nil {
			errs = append(errs, b.Free())
		}
	}
	c.staging, c.retired = nil, nil
	for _, r := range c.posts.held {
		errs = append(errs, r.Close())
	}
	if c.posts.table != nil {
		errs = append(errs, c.posts.table.Free())
	}
	c.posts = postRegistry{}
	c.mu.Unlock()
	if c.net != nil {
		// After the plans: their engines close before the NetDevice.
		errs = append(errs, c.net.Close())
		c.net = nil
	}
	return errors.Join(errs...)
}

// OpenDevice opens device ordinal (the backend's own index: the CUDA
// ordinal for "nvlink") of a registered HAL backend ("host", "nvlink",
// "pcie", …) with the defaults of hal.Config: hal/host names its shared
// memory after this process. A backend registers itself when its package
// is imported, usually for its side effect alone (import _
// "github.com/weftccl/weft/hal/host"). Jobs whose processes share memory
// through hal/host, or that want ranks in the device's messages, call
// hal.Open with a full hal.Config instead.
func OpenDevice(backend string, ordinal int) (hal.Device, error) {
	return hal.Open(backend, hal.Config{Ordinal: ordinal})
}
