//go:build cgo

package main

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/cudadev"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/stageprof"
)

// splitNoColor is NCCL_SPLIT_NOCOLOR.
const splitNoColor = -1

// handles maps the opaque values handed to C (ncclComm_t, registration and
// window handles) to their objects. Values are never reused, so a stale
// handle is refused rather than aliased. They are odd numbers, never an
// address malloc returns: a communicator of NVIDIA's NCCL (an aligned heap
// pointer) that reaches weft's entry points is told apart from weft's own
// (foreignComm).
var handles = struct {
	sync.Mutex
	next  uintptr
	comms map[uintptr]*comm
	other map[uintptr]struct{}
}{next: 0x7e1f0001, comms: map[uintptr]*comm{}, other: map[uintptr]struct{}{}}

func newHandle() uintptr {
	handles.Lock()
	defer handles.Unlock()
	handles.next += 0x10
	return handles.next
}

// foreignComm reports whether h is a communicator of NVIDIA's NCCL rather
// than one of weft's handles: non-NULL, even (weft's are odd), with the
// real library loaded. Such calls come from NCCL itself: a process that
// loaded NCCL before weft was preloaded (PyTorch links it) resolved NCCL's
// calls to its own exported functions (ncclCommEnsureReady calls
// ncclCommGetAsyncError on every collective, in 2.28) to weft's, so the
// calls weft forwards come back here with NCCL's communicator; weft hands
// them back to the real function.
//
// Only while a real NCCL is mapped into the process (realMapped): without
// one no such call can come, and an even handle is the caller's mistake,
// answered with weft's error rather than handed to a library that would
// dereference it.
func foreignComm(h uintptr) bool {
	return h != 0 && h&1 == 0 && realMapped()
}

func registerComm(c *comm) uintptr {
	c.handle = newHandle()
	handles.Lock()
	handles.comms[c.handle] = c
	handles.Unlock()
	return c.handle
}

func forgetComm(c *comm) {
	handles.Lock()
	delete(handles.comms, c.handle)
	handles.Unlock()
}

// lookup resolves a comm argument: NULL and unknown handles are
// ncclInvalidArgument.
func lookup(fn string, h uintptr) (*comm, result) {
	if h == 0 {
		return nil, fail(ncclInvalidArgument, "%s: comm argument is NULL", fn)
	}
	handles.Lock()
	c, ok := handles.comms[h]
	handles.Unlock()
	if !ok {
		return nil, fail(ncclInvalidArgument, "%s: comm %#x is not a live communicator (destroyed, aborted, or not from ncclCommInitRank)", fn, h)
	}
	return c, ncclSuccess
}

// ---- groups ---------------------------------------------------------------

// op is one call queued in a group: a collective (call) or point-to-point
// operations (p2p: a Send or Recv, or the sends and receives Gather and
// Scatter are made of).
type op struct {
	c      *comm
	kind   kind
	call   weft.Call
	p2p    []p2pEntry
	stream uintptr
	// For forwarding: NCCL's datatype, operator and count.
	dtype int32
	ncOp  int32
	count uint64
	// one holds a Send's or Recv's only entry (p2p = one[:]), so that
	// queueing one costs no allocation beside the op.
	one [1]p2pEntry
}

// group is one thread's group state (NCCL keeps groups per thread).
// Ended groups are kept for reuse (groupPool), their slices emptied, so a
// thread that runs a group per step allocates no group state.
type group struct {
	depth int
	inits []func() error
	ops   []*op
}

var groupPool = sync.Pool{New: func() any { return new(group) }}

// release empties g and keeps it for the next ncclGroupStart.
func (g *group) release() {
	clear(g.ops)
	clear(g.inits)
	g.ops, g.inits, g.depth = g.ops[:0], g.inits[:0], 0
	groupPool.Put(g)
}

var groups = struct {
	sync.Mutex
	byThread map[uint64]*group // by threadKey
	open     atomic.Int32      // len(byThread): a call outside any group skips the lookup
}{byThread: map[uint64]*group{}}

// threadGroup returns the calling OS thread's group, or nil outside one.
func threadGroup() *group {
	if groups.open.Load() == 0 {
		return nil
	}
	k := threadKey()
	groups.Lock()
	defer groups.Unlock()
	return groups.byThread[k]
}

func groupStart() result {
	k := threadKey()
	groups.Lock()
	defer groups.Unlock()
	g := groups.byThread[k]
	if g == nil {
		g = groupPool.Get().(*group)
		groups.byThread[k] = g
		groups.open.Add(1)
	}
	g.depth++
	return ncclSuccess
}

// groupEnd ends a group level; the outermost runs the group: inits first,
// all at once, then every communicator's operations, one goroutine per
// communicator (weft's first use of a plan exchanges with the peers, so
// communicators of one thread must progress together). simulate drops the
// operations instead of running them.
func groupEnd(fn string, simulate bool) result {
	var start time.Time
	if stageprof.Enabled() {
		start = time.Now()
	}
	k := threadKey()
	groups.Lock()
	g := groups.byThread[k]
	if g == nil || g.depth == 0 {
		groups.Unlock()
		return fail(ncclInvalidUsage, "%s: no matching ncclGroupStart on this thread", fn)
	}
	g.depth--
	if g.depth > 0 {
		groups.Unlock()
		return ncclSuccess
	}
	delete(groups.byThread, k)
	groups.open.Add(-1)
	groups.Unlock()

	defer g.release()
	if err := parallel(len(g.inits), func(i int) error { return g.inits[i]() }); err != nil {
		return failErr(fn, err)
	}
	if simulate {
		return ncclSuccess
	}
	r := failErr(fn, runOps(g.ops))
	if len(g.ops) > 0 {
		g.ops[0].c.prof.Since(callGroupEnd, start)
	}
	return r
}

// parallel runs f(0..n-1), each on its own locked OS thread (the real NCCL
// and CUDA keep per-thread state), and returns the errors joined.
func parallel(n int, f func(i int) error) error {
	if n == 1 {
		return f(0)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			defer func() {
				if p := recover(); p != nil {
					errs[i] = fmt.Errorf("panic: %v: %w", p, hal.ErrInternal)
				}
			}()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runOps runs queued operations, grouped by communicator (in order of first
// appearance), communicators in parallel.
func runOps(ops []*op) error {
	if oneComm(ops) {
		return ops[0].c.run(ops)
	}
	var order []*comm
	byComm := map[*comm][]*op{}
	for _, o := range ops {
		if _, ok := byComm[o.c]; !ok {
			order = append(order, o.c)
		}
		byComm[o.c] = append(byComm[o.c], o)
	}
	return parallel(len(order), func(i int) error { return order[i].run(byComm[order[i]]) })
}

// oneComm reports whether ops (at least one) are all of one communicator,
// the common group, which runOps then runs without sorting.
func oneComm(ops []*op) bool {
	for _, o := range ops {
		if o.c != ops[0].c {
			return false
		}
	}
	return len(ops) > 0
}

// run executes one communicator's operations of a group: collectives in
// call order, then the point-to-point operations as one LaunchP2P (on
// several streams: joined, runP2PJoined). On backends without CUDA streams
// it waits for the work.
func (c *comm) run(ops []*op) error {
	if err := c.usable(); err != nil {
		return err
	}
	defer c.prof.Since(callGroupRun, c.prof.Now())
	if h, ok := p2pOnOneStream(ops); ok {
		// Sends and receives on one stream (a sendrecv, a Gather, an
		// all-to-all-v): one LaunchP2P, nothing to sort.
		if err := c.runP2P(ops, h); err != nil {
			return err
		}
		return c.syncHost()
	}
	var streams []uintptr
	p2p := map[uintptr][]*op{}
	for _, o := range ops {
		if o.kind.p2p() {
			if _, ok := p2p[o.stream]; !ok {
				streams = append(streams, o.stream)
			}
			p2p[o.stream] = append(p2p[o.stream], o)
			continue
		}
		if err := c.runColl(o); err != nil {
			return err
		}
	}
	if len(streams) > 1 && c.w != nil {
		if err := c.runP2PJoined(streams, p2p); err != nil {
			return err
		}
	} else {
		for _, h := range streams {
			if err := c.runP2P(p2p[h], h); err != nil {
				return err
			}
		}
	}
	return c.syncHost()
}

// p2pOnOneStream reports whether ops are all point-to-point on one stream,
// and which.
func p2pOnOneStream(ops []*op) (uintptr, bool) {
	for _, o := range ops {
		if !o.kind.p2p() || o.stream != ops[0].stream {
			return 0, false
		}
	}
	if len(ops) == 0 {
		return 0, false
	}
	return ops[0].stream, true
}

// syncHost waits for the communicator's work on backends without CUDA
// streams (their calls are synchronous, as NCCL's are to the caller).
func (c *comm) syncHost() error {
	if c.synchronous() && c.w != nil {
		s, err := c.stream(0)
		if err != nil {
			return err
		}
		return c.w.Synchronize(s)
	}
	return nil
}

func (c *comm) runColl(o *op) error {
	var why error = c.noWeft
	if c.w != nil {
		t := c.prof.Now()
		s, err := c.stream(o.stream)
		if err != nil {
			return err
		}
		t = c.prof.Since(callStream, t)
		err = c.w.Launch(o.call, s)
		c.prof.Since(callLaunch, t)
		if err == nil {
			c.countServed(o.kind, false, nil)
			return nil
		}
		if !errors.Is(err, hal.ErrNotSupported) {
			return err
		}
		why = err
	}
	fb, err := c.fallback(why)
	if err != nil {
		return err
	}
	ncOp := o.ncOp
	if o.call.Op == plan.PreMulSum {
		if ncOp, err = c.realPreMul(o.ncOp); err != nil {
			return err
		}
	}
	if err := realColl(c.cuCtx, o.kind, uintptr(o.call.Send), uintptr(o.call.Recv), o.count, o.dtype, ncOp, o.call.Root, fb, o.stream); err != nil {
		return err
	}
	c.countServed(o.kind, true, why)
	return nil
}

// realPreMul returns the fallback communicator's twin of a PreMulSum
// operator, creating it on first use.
func (c *comm) realPreMul(h int32) (int32, error) {
	p, ok := c.preMul(h)
	if !ok {
		return 0, fmt.Errorf("op %d was destroyed: %w", h, hal.ErrInvalidArgument)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.realOp >= 0 {
		return p.realOp, nil
	}
	op, err := realPreMulSum(c.cuCtx, p.scalar, p.scalarPtr, int32(p.dtype), p.residence, c.fb)
	if err != nil {
		return 0, err
	}
	p.realOp = op
	return op, nil
}

// runP2PJoined runs the point-to-point operations of a group that came on
// several streams as NCCL does: one launch, on the first stream, after the
// work queued on every stream of the group, and every stream then waits
// for that launch. Launched per stream instead, a send on one stream could
// wait for a receive that weft.Comm's call order queues behind it on
// another stream (on both ranks: a deadlock).
func (c *comm) runP2PJoined(streams []uintptr, p2p map[uintptr][]*op) error {
	ss := make([]*cudadev.Stream, len(streams))
	var all []*op
	for i, h := range streams {
		s, err := c.stream(h)
		if err != nil {
			return err
		}
		cs, ok := s.(*cudadev.Stream)
		if !ok {
			return fmt.Errorf("point-to-point group on %d streams: backend %s has no CUDA streams: %w", len(streams), c.backend, hal.ErrInvalidArgument)
		}
		ss[i] = cs
		all = append(all, p2p[h]...)
	}
	for _, s := range ss[1:] {
		if err := ss[0].Join(s); err != nil {
			return err
		}
	}
	if err := c.runP2P(all, streams[0]); err != nil {
		return err
	}
	for _, s := range ss[1:] {
		if err := s.Join(ss[0]); err != nil {
			return err
		}
	}
	return nil
}

func (c *comm) runP2P(ops []*op, h uintptr) error {
	t := c.prof.Now()
	n := 0
	for _, o := range ops {
		n += len(o.p2p)
	}
	entries := make([]p2pEntry, 0, n)
	calls := make([]weft.P2P, 0, n)
	for _, o := range ops {
		for _, e := range o.p2p {
			if e.bytes == 0 {
				continue
			}
			entries = append(entries, e)
			calls = append(calls, weft.P2P{Peer: e.peer, Send: e.send, Buf: uint64(e.buf), Bytes: e.bytes})
		}
	}
	count := func(forwarded bool, why error) {
		for _, o := range ops {
			c.countServed(o.kind, forwarded, why)
		}
	}
	if len(calls) == 0 {
		count(false, nil)
		return nil
	}
	var why error = c.noWeft
	if c.w != nil {
		s, err := c.stream(h)
		if err != nil {
			return err
		}
		t = c.prof.Since(callP2PCollect, t)
		err = c.w.LaunchP2P(calls, s)
		c.prof.Since(callLaunchP2P, t)
		if err == nil {
			count(false, nil)
			return nil
		}
		if !errors.Is(err, hal.ErrNotSupported) {
			return err
		}
		why = err
	}
	fb, err := c.fallback(why)
	if err != nil {
		return err
	}
	if err := realP2P(c.cuCtx, entries, fb, h); err != nil {
		return err
	}
	count(true, why)
	return nil
}

// ---- calls ------------------------------------------------------------------

// collArgs are the arguments of one collective or point-to-point call.
type collArgs struct {
	fn         string
	kind       kind
	send, recv uintptr
	count      uint64
	dtype      int32
	op         int32
	root       int // rooted kinds; peer for Send and Recv
	comm       uintptr
	stream     uintptr
}

// collective checks a call's arguments as NCCL does and runs it, or queues
// it when the calling thread is inside a group.
func collective(a collArgs) result {
	c, r := lookup(a.fn, a.comm)
	if r != ncclSuccess {
		return r
	}
	t0 := c.prof.Now()
	o, r := c.check(a)
	if r != ncclSuccess {
		return r
	}
	c.prof.Since(callCheck, t0)
	if g := threadGroup(); g != nil && g.depth > 0 {
		groups.Lock()
		g.ops = append(g.ops, o)
		groups.Unlock()
		c.prof.Since(callQueued, t0)
		return ncclSuccess
	}
	r = failErr(a.fn, c.run([]*op{o}))
	c.prof.Since(callWhole, t0)
	c.kindProf.Since(int(a.kind), t0)
	return r
}

// Stages of a collective call in this layer timed under
// WEFT_PROXY_PROFILE=1 (comm.prof), beside weft.Comm's launch path.
const (
	callCheck      = iota // argument checks and the operation built
	callStream            // the caller's stream wrapped (cached after the first call)
	callLaunch            // weft.Comm.Launch
	callWhole             // the whole call after the communicator lookup
	callP2PCollect        // a group's sends and receives gathered for LaunchP2P
	callLaunchP2P         // weft.Comm.LaunchP2P
	callGroupRun          // run: one call, or a group's operations of this communicator at ncclGroupEnd
	callQueued            // a call inside a group after the communicator lookup (checks, queued)
	callGroupEnd          // ncclGroupEnd, whole (counted on the first operation's communicator)
)

var callStages = []string{"argument checks", "stream lookup", "weft Launch", "whole call",
	"point-to-point gathered", "weft LaunchP2P", "run (one call, or a group's at ncclGroupEnd)",
	"call queued in a group (whole)", "ncclGroupEnd (whole)"}

// check validates a call and builds its operation. Errors name the
// argument, as NCCL's do.
func (c *comm) check(a collArgs) (*op, result) {
	bad := func(f string, x ...any) (*op, result) {
		return nil, fail(ncclInvalidArgument, "%s: %s", a.fn, fmt.Sprintf(f, x...))
	}
	t := plan.DataType(a.dtype)
	if a.dtype < 0 || a.dtype > math.MaxUint8 || !t.Valid() {
		return bad("invalid datatype %d (argument datatype)", a.dtype)
	}
	es := uint64(t.Size())
	if a.count > math.MaxInt64/es/uint64(max(c.size, 1)) {
		return bad("count %d is too large (argument count)", a.count)
	}
	o := &op{c: c, kind: a.kind, stream: a.stream, dtype: a.dtype, ncOp: a.op, count: a.count}
	o.call = weft.Call{Send: uint64(a.send), Recv: uint64(a.recv), Count: int64(a.count), Type: t, Root: a.root}
	rooted := a.kind == kBroadcast || a.kind == kReduce || a.kind == kGather || a.kind == kScatter
	if rooted && (a.root < 0 || a.root >= c.size) {
		return bad("root %d is out of range for %d ranks (argument root)", a.root, c.size)
	}
	if (a.kind == kSend || a.kind == kRecv) && (a.root < 0 || a.root >= c.size) {
		return bad("peer %d is out of range for %d ranks (argument peer)", a.root, c.size)
	}
	switch a.kind {
	case kAllReduce, kReduceScatter, kReduce:
		switch {
		case a.op >= 0 && a.op <= int32(plan.Avg):
			o.call.Op = plan.RedOp(a.op)
		case a.op >= 5:
			p, ok := c.preMul(a.op)
			if !ok {
				return bad("invalid reduction operation %d (argument op): not a built-in op nor one made by ncclRedOpCreatePreMulSum on this comm", a.op)
			}
			if p.dtype != t {
				return bad("reduction operation %d was made for datatype %v, the call uses %v (argument op)", a.op, p.dtype, t)
			}
			o.call.Op = plan.PreMulSum
			o.call.Scalar = p.scalar
			o.call.ScalarPtr = uint64(p.scalarPtr)
		default:
			return bad("invalid reduction operation %d (argument op)", a.op)
		}
	}
	// Buffers: which must be non-NULL, and their extents in bytes.
	n := int64(a.count) * int64(es)
	nr := int64(c.size)
	type need struct {
		name  string
		p     uintptr
		bytes int64
	}
	var needs []need
	me := c.rank == a.root
	switch a.kind {
	case kAllReduce:
		needs = []need{{"sendbuff", a.send, n}, {"recvbuff", a.recv, n}}
	case kAllGather:
		needs = []need{{"sendbuff", a.send, n}, {"recvbuff", a.recv, n * nr}}
	case kReduceScatter:
		needs = []need{{"sendbuff", a.send, n * nr}, {"recvbuff", a.recv, n}}
	case kAllToAll:
		needs = []need{{"sendbuff", a.send, n * nr}, {"recvbuff", a.recv, n * nr}}
	case kBroadcast:
		needs = []need{{"recvbuff", a.recv, n}}
		if me {
			needs = append(needs, need{"sendbuff", a.send, n})
		}
	case kReduce:
		needs = []need{{"sendbuff", a.send, n}}
		if me {
			needs = append(needs, need{"recvbuff", a.recv, n})
		}
	case kGather:
		needs = []need{{"sendbuff", a.send, n}}
		if me {
			needs = append(needs, need{"recvbuff", a.recv, n * nr})
		}
	case kScatter:
		needs = []need{{"recvbuff", a.recv, n}}
		if me {
			needs = append(needs, need{"sendbuff", a.send, n * nr})
		}
	case kSend:
		needs = []need{{"sendbuff", a.send, n}}
	case kRecv:
		needs = []need{{"recvbuff", a.recv, n}}
	}
	if err := c.usable(); err != nil {
		return nil, failErr(a.fn, err)
	}
	host := c.synchronous()
	if host && a.stream != 0 {
		return bad("stream must be NULL on backend %s, which has no CUDA streams (argument stream)", c.backend)
	}
	for _, nd := range needs {
		if n == 0 {
			break
		}
		if nd.p == 0 {
			return bad("%s is NULL (argument %s)", nd.name, nd.name)
		}
		if host && !devices.contains(nd.p, nd.bytes) {
			return bad("%s %#x (%d bytes) is not inside memory from ncclMemAlloc; backend %s can only reach that (argument %s)", nd.name, nd.p, nd.bytes, c.backend, nd.name)
		}
	}
	switch a.kind {
	case kAllReduce:
		o.call.Coll = algorithms.AllReduce
	case kAllGather:
		o.call.Coll = algorithms.AllGather
	case kReduceScatter:
		o.call.Coll = algorithms.ReduceScatter
	case kBroadcast:
		o.call.Coll = algorithms.Broadcast
	case kReduce:
		o.call.Coll = algorithms.Reduce
	case kAllToAll:
		o.call.Coll = algorithms.AllToAll
	case kSend:
		o.one[0] = p2pEntry{peer: a.root, send: true, buf: a.send, bytes: n}
		o.p2p = o.one[:]
	case kRecv:
		o.one[0] = p2pEntry{peer: a.root, send: false, buf: a.recv, bytes: n}
		o.p2p = o.one[:]
	case kGather:
		o.p2p = []p2pEntry{{peer: a.root, send: true, buf: a.send, bytes: n}}
		if me {
			for r := 0; r < c.size; r++ {
				o.p2p = append(o.p2p, p2pEntry{peer: r, buf: a.recv + uintptr(int64(r)*n), bytes: n})
			}
		}
	case kScatter:
		if me {
			for r := 0; r < c.size; r++ {
				o.p2p = append(o.p2p, p2pEntry{peer: r, send: true, buf: a.send + uintptr(int64(r)*n), bytes: n})
			}
		}
		o.p2p = append(o.p2p, p2pEntry{peer: a.root, buf: a.recv, bytes: n})
	}
	return o, ncclSuccess
}

// ---- communicators --------------------------------------------------------

func getUniqueID() ([uniqueIDBytes]byte, error) {
	id, err := bootstrap.NewUniqueID()
	if err != nil {
		return [uniqueIDBytes]byte{}, err
	}
	return encodeID(id)
}

// config is what weft takes from an ncclConfig_t. minCTAs and maxCTAs
// are 0 where the config leaves them undefined (NCCL_CONFIG_UNDEF_INT).
type config struct {
	blocking         bool
	name             string
	minCTAs, maxCTAs int
}

// ctaBudget is the block budget of a communicator made with cfg, as NCCL
// resolves minCTAs and maxCTAs (init.cc, envConfigOverride): NCCL_MIN_CTAS
// and NCCL_MAX_CTAS override the config's fields, values that are not
// positive integers are ignored (logged), and a minimum above the maximum
// becomes the maximum. NCCL also caps both at its channel limit
// (MAXCHANNELS); weft does not, since a plan never holds more blocks than
// its default shape gives it whatever the cap. 0 leaves a bound to
// weft's own configuration (WEFT_MAX_CTAS, WEFT_MIN_CTAS; else none).
func ctaBudget(cfg config, log *slog.Logger) (minCTAs, maxCTAs int) {
	minCTAs, maxCTAs = cfg.minCTAs, cfg.maxCTAs
	for _, v := range []struct {
		name string
		dst  *int
	}{{"NCCL_MIN_CTAS", &minCTAs}, {"NCCL_MAX_CTAS", &maxCTAs}} {
		s := strings.TrimSpace(env.String(v.name))
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			log.Info("weft: "+v.name+" is not a positive integer, ignored as NCCL ignores it", "value", s, "kept", *v.dst)
			continue
		}
		*v.dst = n
	}
	if minCTAs > 0 && maxCTAs > 0 && minCTAs > maxCTAs {
		log.Info("weft: minCTAs is above maxCTAs; set to maxCTAs, as NCCL does", "minCTAs", minCTAs, "maxCTAs", maxCTAs)
		minCTAs = maxCTAs
	}
	return minCTAs, maxCTAs
}

// initRank is ncclCommInitRank(Config): it binds the communicator to the
// calling thread's device, then connects — now, at the group's end inside
// a group, or in the background for a non-blocking communicator
// (ncclInProgress until ncclCommGetAsyncError says otherwise).
func initRank(fn string, nranks int, rawID [uniqueIDBytes]byte, rank int, cfg config) (uintptr, result) {
	if nranks < 1 {
		return 0, fail(ncclInvalidArgument, "%s: nranks %d is below 1 (argument nranks)", fn, nranks)
	}
	if rank < 0 || rank >= nranks {
		return 0, fail(ncclInvalidArgument, "%s: rank %d is out of range for %d ranks (argument rank)", fn, rank, nranks)
	}
	installStackDump()
	id, err := decodeID(rawID)
	if err != nil {
		return 0, failErr(fn, err)
	}
	b, ord, err := current()
	if err != nil {
		return 0, failErr(fn, err)
	}
	c := newComm(rank, nranks, b, ord, cfg.blocking, cfg.name)
	c.minCTAs, c.maxCTAs = cfg.minCTAs, cfg.maxCTAs
	h := registerComm(c)
	return started(h, startInit(fn, c, func() error { c.init(id); return c.initErr }))
}

// started returns the handle of a communicator whose init was started,
// or NULL when the init failed at once.
func started(h uintptr, r result) (uintptr, result) {
	if r != ncclSuccess && r != ncclInProgress {
		return 0, r
	}
	return h, r
}

// startInit runs init now, at the group's end, or in the background (a
// non-blocking communicator). c, when not nil, is the communicator init
// makes; init must close c.ready whatever happens.
func startInit(fn string, c *comm, init func() error) result {
	if g := threadGroup(); g != nil && g.depth > 0 {
		if c != nil {
			c.pending.Store(true)
		}
		groups.Lock()
		g.inits = append(g.inits, func() error {
			if c != nil {
				defer c.pending.Store(false)
			}
			return init()
		})
		groups.Unlock()
		return ncclSuccess
	}
	if c != nil && !c.blocking {
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			init()
		}()
		return ncclInProgress
	}
	if err := init(); err != nil {
		if c != nil {
			forgetComm(c)
		}
		return failErr(fn, err)
	}
	return ncclSuccess
}

// initAll is ncclCommInitAll: ndev ranks of one process, rank i on device
// devlist[i] (or i), created together.
func initAll(fn string, ndev int, devlist []int) ([]uintptr, result) {
	if ndev < 1 {
		return nil, fail(ncclInvalidArgument, "%s: ndev %d is below 1 (argument ndev)", fn, ndev)
	}
	b, _, err := current()
	if err != nil {
		return nil, failErr(fn, err)
	}
	id, err := bootstrap.NewUniqueID()
	if err != nil {
		return nil, failErr(fn, err)
	}
	comms := make([]*comm, ndev)
	for i := range comms {
		ord := i
		if devlist != nil {
			ord = devlist[i]
		}
		if b != "nvlink" {
			ord = 0 // one host device per process
		}
		comms[i] = newComm(i, ndev, b, ord, true, "")
	}
	err = parallel(ndev, func(i int) error {
		comms[i].init(id)
		return comms[i].initErr
	})
	if err != nil {
		for _, c := range comms {
			if c.initErr == nil {
				c.destroy()
			}
		}
		return nil, failErr(fn, err)
	}
	hs := make([]uintptr, ndev)
	for i, c := range comms {
		hs[i] = registerComm(c)
	}
	return hs, ncclSuccess
}

// split is ncclCommSplit: collective over the parent; ranks of one color
// form a communicator ordered by key (then parent rank), on the parent's
// device. Two all-gathers over the parent's bootstrap carry the colors and
// keys, then each new communicator's bootstrap id, made by its rank 0.
// Inside a group the whole split runs at the group's end, so that one
// thread can split the communicators of several GPUs.
func split(fn string, parent *comm, color, key int, cfg config) (uintptr, result) {
	if color < splitNoColor {
		return 0, fail(ncclInvalidArgument, "%s: color %d is negative (argument color; NCCL_SPLIT_NOCOLOR is -1)", fn, color)
	}
	if parent.pending.Load() {
		return 0, fail(ncclInvalidUsage, "%s: the parent communicator is still being created in this group", fn)
	}
	if g := threadGroup(); g == nil || g.depth == 0 {
		// The exchanges run now, on the caller's thread, so that they never
		// overlap the parent's other bootstrap traffic; only the new
		// communicator's init may run in the background.
		rank, size, id, err := splitExchange(parent, color, key)
		if err != nil {
			return 0, failErr(fn, err)
		}
		if color == splitNoColor {
			return 0, ncclSuccess
		}
		c := newComm(rank, size, parent.backend, parent.ordinal, cfg.blocking, cfg.name)
		c.minCTAs, c.maxCTAs = cfg.minCTAs, cfg.maxCTAs
		h := registerComm(c)
		return started(h, startInit(fn, c, func() error { c.init(id); return c.initErr }))
	}
	if color == splitNoColor {
		return 0, startInit(fn, nil, func() error {
			_, _, _, err := splitExchange(parent, color, key)
			return err
		})
	}
	c := newComm(-1, 0, parent.backend, parent.ordinal, cfg.blocking, cfg.name)
	c.minCTAs, c.maxCTAs = cfg.minCTAs, cfg.maxCTAs
	h := registerComm(c)
	return started(h, startInit(fn, c, func() error {
		rank, size, id, err := splitExchange(parent, color, key)
		if err != nil {
			c.initErr = err
			close(c.ready)
			return err
		}
		c.rank, c.size = rank, size
		c.init(id)
		return c.initErr
	}))
}

// splitExchange runs the split's exchanges over the parent's bootstrap and
// returns this rank's place in its color and the new bootstrap's id.
func splitExchange(parent *comm, color, key int) (rank, size int, id bootstrap.UniqueID, err error) {
	if err := parent.usable(); err != nil {
		return 0, 0, id, err
	}
	ctx := context.Background()
	var me [8]byte
	binary.LittleEndian.PutUint32(me[:4], uint32(int32(color)))
	binary.LittleEndian.PutUint32(me[4:], uint32(int32(key)))
	all, err := parent.boot.AllGather(ctx, me[:])
	if err != nil {
		return 0, 0, id, err
	}
	colors := make([]int, len(all))
	keys := make([]int, len(all))
	for r, b := range all {
		if len(b) != 8 {
			return 0, 0, id, fmt.Errorf("split: rank %d sent %d bytes of color and key: %w", r, len(b), hal.ErrInternal)
		}
		colors[r] = int(int32(binary.LittleEndian.Uint32(b[:4])))
		keys[r] = int(int32(binary.LittleEndian.Uint32(b[4:])))
	}
	var members []int
	for r, col := range colors {
		if col == color {
			members = append(members, r)
		}
	}
	sortMembers(members, keys)
	rank = -1
	for i, r := range members {
		if r == parent.rank {
			rank = i
		}
	}
	idText := ""
	if color != splitNoColor && rank == 0 {
		nid, err := bootstrap.NewUniqueID()
		var bin []byte
		if err == nil {
			bin, err = nid.MarshalBinary() // with the secret: the parent's bootstrap is the job's own
		}
		if err != nil {
			idText = "error: " + err.Error()
		} else {
			idText = hex.EncodeToString(bin)
		}
	}
	ids, err := parent.boot.AllGather(ctx, []byte(idText))
	if err != nil {
		return 0, 0, id, err
	}
	if color == splitNoColor {
		return -1, 0, id, nil
	}
	leader := string(ids[members[0]])
	if strings.HasPrefix(leader, "error: ") {
		return 0, 0, id, fmt.Errorf("split: rank %d (new rank 0 of color %d) could not make a bootstrap id: %s: %w", members[0], color, leader, hal.ErrSystem)
	}
	bin, err := hex.DecodeString(leader)
	if err != nil {
		return 0, 0, id, fmt.Errorf("split: rank %d sent a unique id that is not hex: %w", members[0], hal.ErrInternal)
	}
	err = id.UnmarshalBinary(bin)
	return rank, len(members), id, err
}

// createPreMulSum is ncclRedOpCreatePreMulSum; scalar holds the host
// scalar's bytes (residence 1) and scalarPtr the device address (0).
func createPreMulSum(fn string, c *comm, dtype int32, residence int32, scalar []byte, scalarPtr uintptr) (int32, result) {
	t := plan.DataType(dtype)
	if dtype < 0 || dtype > math.MaxUint8 || !t.Valid() {
		return 0, fail(ncclInvalidArgument, "%s: invalid datatype %d (argument datatype)", fn, dtype)
	}
	p := &preMulSum{dtype: t, residence: residence, realOp: -1}
	switch residence {
	case 1:
		var b [8]byte
		copy(b[:], scalar)
		p.scalar = binary.LittleEndian.Uint64(b[:])
	case 0:
		if scalarPtr == 0 {
			return 0, fail(ncclInvalidArgument, "%s: scalar is NULL (argument scalar)", fn)
		}
		p.scalarPtr = scalarPtr
	default:
		return 0, fail(ncclInvalidArgument, "%s: invalid residence %d (argument residence)", fn, residence)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nextOp == math.MaxInt32 {
		return 0, fail(ncclInvalidUsage, "%s: no operator handles left on this comm", fn)
	}
	op := c.nextOp
	c.nextOp++
	c.ops[op] = p
	return op, ncclSuccess
}

func destroyOp(fn string, c *comm, op int32) result {
	if op >= 0 && op < 5 {
		return fail(ncclInvalidArgument, "%s: op %d is a built-in operator (argument op)", fn, op)
	}
	c.mu.Lock()
	p, ok := c.ops[op]
	delete(c.ops, op)
	fb := c.fb
	c.mu.Unlock()
	if !ok {
		return fail(ncclInvalidArgument, "%s: op %d was not made by ncclRedOpCreatePreMulSum on this comm (argument op)", fn, op)
	}
	if p.realOp >= 0 && fb != 0 {
		return failErr(fn, realOpDestroy(c.cuCtx, p.realOp, fb))
	}
	return ncclSuccess
}

// dtypeSize is the size of an ncclDataType_t in bytes, 0 when invalid.
func dtypeSize(t int32) int {
	if t < 0 || t > math.MaxUint8 {
		return 0
	}
	return plan.DataType(t).Size()
}

// version is NCCL_VERSION_CODE of the ABI weft implements (2.28.3).
const version = 22803

var _ = strconv.Itoa
