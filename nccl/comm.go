//go:build cgo

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftccl/weft"
	_ "github.com/weftccl/weft/backends" // registers every backend (one list for all binaries)
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/cudadev"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/stageprof"
)

// kind is the NCCL call a queued operation came from.
type kind int

const (
	kAllReduce kind = iota
	kAllGather
	kReduceScatter
	kBroadcast
	kReduce
	kAllToAll
	kGather
	kScatter
	kSend
	kRecv
	numKinds
)

var kindNames = [numKinds]string{"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "AlltoAll", "Gather", "Scatter", "Send", "Recv"}

func (k kind) String() string { return kindNames[k] }

// p2p reports whether the kind runs as point-to-point operations of a group.
func (k kind) p2p() bool { return k >= kGather }

// preMulSum is an operator made by ncclRedOpCreatePreMulSum.
type preMulSum struct {
	dtype     plan.DataType
	residence int32 // 0 device, 1 host immediate
	scalar    uint64
	scalarPtr uintptr
	realOp    int32 // the operator on the fallback communicator, or -1
}

// comm is one ncclComm_t.
type comm struct {
	handle   uintptr
	rank     int
	size     int
	backend  string
	ordinal  int
	blocking bool
	name     string
	// minCTAs and maxCTAs are ncclConfig_t's (0: undefined), before
	// NCCL_MIN_CTAS and NCCL_MAX_CTAS (ctaBudget); a split without a
	// config inherits them, as in NCCL.
	minCTAs, maxCTAs int
	// prof times a collective call's stages in this layer
	// (WEFT_PROXY_PROFILE=1; callStages), logged at destroy; nil when off.
	prof *stageprof.Set
	// kindProf times whole calls outside groups by collective (kind), so
	// that one collective's host cost stands apart from the others'.
	kindProf *stageprof.Set

	ready   chan struct{} // closed when init has finished (initErr set)
	initErr error
	pending atomic.Bool // init queued in a group that has not ended

	boot bootstrap.Bootstrap
	dev  hal.Device
	w    *weft.Comm
	// noWeft says why weft could not make its communicator: every call is
	// forwarded.
	noWeft error
	cuCtx  uintptr // CUcontext of the device (GPU backends), for the real NCCL

	mu      sync.Mutex
	streams map[uintptr]hal.Stream
	ops     map[int32]*preMulSum
	nextOp  int32

	fbOnce sync.Once
	fb     uintptr // the real NCCL's communicator, 0 until made
	fbErr  error

	stats   [numKinds]struct{ served, forwarded atomic.Int64 }
	aborted atomic.Bool
	closed  atomic.Bool
	log     *slog.Logger
}

func newComm(rank, size int, backend string, ordinal int, blocking bool, name string) *comm {
	return &comm{
		rank: rank, size: size, backend: backend, ordinal: ordinal, blocking: blocking, name: name,
		ready: make(chan struct{}), streams: map[uintptr]hal.Stream{}, ops: map[int32]*preMulSum{}, nextOp: 5,
		log:      newLogger("INIT"),
		prof:     stageprof.New(fmt.Sprintf("NCCL-layer calls of rank %d", rank), callStages...),
		kindProf: stageprof.New(fmt.Sprintf("NCCL-layer whole calls by collective of rank %d", rank), kindNames[:]...),
	}
}

// isReady reports whether init has finished.
func (c *comm) isReady() bool {
	select {
	case <-c.ready:
		return true
	default:
		return false
	}
}

// usable waits for init and returns its error, or an error for an aborted
// or destroyed communicator.
func (c *comm) usable() error {
	if c.pending.Load() {
		return fmt.Errorf("communicator is created by the group this call is in; end the group first: %w", hal.ErrInvalidUsage)
	}
	<-c.ready
	switch {
	case c.initErr != nil:
		return fmt.Errorf("communicator failed to initialise: %w", c.initErr)
	case c.aborted.Load():
		return fmt.Errorf("communicator was aborted: %w", hal.ErrInvalidUsage)
	case c.closed.Load():
		return fmt.Errorf("communicator was destroyed: %w", hal.ErrInvalidUsage)
	}
	return nil
}

// init connects the bootstrap and makes weft's communicator. It closes
// c.ready whatever happens.
func (c *comm) init(id bootstrap.UniqueID) {
	defer close(c.ready)
	c.log = newLogger("INIT").With("rank", c.rank, "nranks", c.size)
	c.initErr = c.connect(id)
	if c.initErr != nil {
		c.log.Warn("weft: communicator init failed", "err", c.initErr)
	}
}

func (c *comm) connect(id bootstrap.UniqueID) error {
	ctx := context.Background()
	boot, err := bootstrap.Connect(ctx, id, c.rank, c.size)
	if err != nil {
		return fmt.Errorf("rank %d of %d: %w", c.rank, c.size, err)
	}
	return c.attach(boot)
}

// attach opens the device and makes weft's communicator over boot.
func (c *comm) attach(boot bootstrap.Bootstrap) error {
	c.boot = boot
	dev, err := devices.open(c.backend, c.ordinal, c.rank)
	if err != nil {
		boot.Close()
		return err
	}
	c.dev = dev
	if cx, ok := dev.(interface{ Context() uintptr }); ok {
		c.cuCtx = cx.Context()
	}
	minCTAs, maxCTAs := ctaBudget(config{minCTAs: c.minCTAs, maxCTAs: c.maxCTAs}, c.log)
	var w *weft.Comm
	if forwardAll() {
		// Every call to the real NCCL, through this library: measures what
		// loading weft costs a program apart from weft's own kernels.
		err = fmt.Errorf("WEFT_NCCL_FALLBACK=all forwards every call to NCCL: %w", hal.ErrNotSupported)
	} else {
		w, err = weft.NewComm(context.Background(), boot, dev, weft.Options{MinCTAs: minCTAs, MaxCTAs: maxCTAs})
	}
	switch {
	case err == nil:
		c.w = w
	case errors.Is(err, hal.ErrNotSupported) && fallbackEnabled():
		c.noWeft = err
	default:
		boot.Close()
		return err
	}
	info := dev.Info()
	served := "weft"
	if c.noWeft != nil {
		served = "NCCL (weft cannot: " + c.noWeft.Error() + ")"
	}
	c.log.Info("weft: communicator ready", "backend", info.Backend, "device", info.Name, "ordinal", c.ordinal,
		"served_by", served, "name", c.name, "min_ctas", minCTAs, "max_ctas", maxCTAs)
	return nil
}

// stream returns the hal stream for a cudaStream_t.
func (c *comm) stream(h uintptr) (hal.Stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.streams[h]; ok {
		return s, nil
	}
	var s hal.Stream
	switch d := c.dev.(type) {
	case cudaStreams:
		s = d.WrapStream(h)
	default:
		if h != 0 {
			return nil, fmt.Errorf("stream: backend %s has no CUDA streams; pass NULL: %w", c.backend, hal.ErrInvalidArgument)
		}
		ns, err := c.dev.NewStream()
		if err != nil {
			return nil, err
		}
		s = ns
	}
	c.streams[h] = s
	return s, nil
}

// synchronous reports whether calls complete before they return: on
// backends without CUDA streams (hal/host) there is no stream to order
// later work after them.
func (c *comm) synchronous() bool {
	_, ok := c.dev.(cudaStreams)
	return !ok
}

// cudaStreams is implemented by the CUDA backends (hal/nvlink, hal/pcie):
// a cudaStream_t of the caller becomes a hal stream.
type cudaStreams interface {
	WrapStream(h uintptr) *cudadev.Stream
}

// syncStreams waits, with weft's deadline, for the work queued on every
// stream the communicator used.
func (c *comm) syncStreams() error {
	if c.w == nil {
		return nil
	}
	c.mu.Lock()
	ss := make([]hal.Stream, 0, len(c.streams))
	for _, s := range c.streams {
		ss = append(ss, s)
	}
	c.mu.Unlock()
	var errs []error
	for _, s := range ss {
		errs = append(errs, c.w.Synchronize(s))
	}
	return errors.Join(errs...)
}

// fallback returns the real NCCL's communicator for the same ranks,
// making it collectively on first use: every rank loads the library and
// says whether it could; rank 0 makes NCCL's unique id and broadcasts it
// through weft's bootstrap; every rank joins.
func (c *comm) fallback(why error) (uintptr, error) {
	if !fallbackEnabled() {
		return 0, fmt.Errorf("weft does not serve this call (%v) and WEFT_NCCL_FALLBACK=0: %w", why, hal.ErrInvalidUsage)
	}
	c.fbOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		status := "ok"
		if err := loadReal(); err != nil {
			status = err.Error()
		}
		all, err := c.boot.AllGather(ctx, []byte(status))
		if err != nil {
			c.fbErr = err
			return
		}
		for r, st := range all {
			if string(st) != "ok" {
				c.fbErr = fmt.Errorf("cannot forward to NCCL: rank %d: %s: %w", r, st, hal.ErrNotSupported)
				return
			}
		}
		var id [uniqueIDBytes]byte
		msg := []byte{1}
		if c.rank == 0 {
			if id, err = realGetUniqueID(); err != nil {
				msg = append([]byte{0}, err.Error()...)
			} else {
				msg = append(msg, id[:]...)
			}
		}
		msg, err = c.boot.Broadcast(ctx, 0, msg)
		if err != nil {
			c.fbErr = err
			return
		}
		if len(msg) != 1+uniqueIDBytes || msg[0] != 1 {
			c.fbErr = fmt.Errorf("cannot forward to NCCL: rank 0: %s: %w", msg[1:], hal.ErrNotSupported)
			return
		}
		copy(id[:], msg[1:])
		c.fb, c.fbErr = realInit(c.cuCtx, c.size, id, c.rank)
		if c.fbErr == nil {
			c.log.Info("weft: NCCL communicator created for forwarded calls", "nccl", realDescription())
		}
	})
	return c.fb, c.fbErr
}

// preMul returns the operator behind a dynamic ncclRedOp_t.
func (c *comm) preMul(op int32) (*preMulSum, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.ops[op]
	return p, ok
}

// countServed records one call and logs the first of its kind.
func (c *comm) countServed(k kind, forwarded bool, why error) {
	var n int64
	if forwarded {
		n = c.stats[k].forwarded.Add(1)
	} else {
		n = c.stats[k].served.Add(1)
	}
	if n != 1 {
		return
	}
	l := newLogger("COLL").With("rank", c.rank, "nranks", c.size)
	if forwarded {
		l.Info("weft: first "+k.String()+" forwarded to NCCL", "reason", fmt.Sprint(why))
	} else {
		l.Info("weft: first " + k.String() + " served by weft")
	}
}

// summary is the destroy-time line: calls served/forwarded per kind.
func (c *comm) summary() string {
	var parts []string
	for k := kind(0); k < numKinds; k++ {
		s, f := c.stats[k].served.Load(), c.stats[k].forwarded.Load()
		if s+f > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d/%d", k, s, f))
		}
	}
	if len(parts) == 0 {
		return "no calls"
	}
	return strings.Join(parts, " ") + " (served by weft/forwarded to NCCL)"
}

// destroy releases everything after the queued work finished.
func (c *comm) destroy() error {
	<-c.ready
	if c.initErr != nil || c.aborted.Load() || c.closed.Swap(true) {
		return nil
	}
	err := c.syncStreams()
	peak := 0             // the most thread blocks one of weft's launches held
	var windowCalls int64 // collectives run zero-copy through symmetric windows
	var ceP2P int64       // point-to-point operations moved by copy engines
	var exported int64    // Reduces and AllReduces into outputs exported at the call
	if c.w != nil {
		peak = c.w.PeakBlocks()
		windowCalls = c.w.WindowCalls()
		ceP2P = c.w.CopyEngineP2POps()
		exported = c.w.ExportedCalls()
		err = errors.Join(err, c.w.Close())
	}
	windows.forget(c)
	if c.fb != 0 {
		err = errors.Join(err, realDestroy(c.cuCtx, c.fb))
	}
	c.closeStreams()
	err = errors.Join(err, c.boot.Close())
	c.log.Info("weft: communicator destroyed", "calls", c.summary(), "peak_blocks", peak, "window_calls", windowCalls, "ce_p2p_ops", ceP2P, "exported_calls", exported)
	c.prof.Log(c.log)
	c.kindProf.Log(c.log)
	return err
}

// abort makes the communicator's waits give up and releases it in the
// background; it returns within about a second even when peers are dead.
func (c *comm) abort() {
	if c.aborted.Swap(true) {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-c.ready
		if c.initErr != nil || c.closed.Swap(true) {
			return
		}
		peak := 0
		if c.w != nil {
			peak = c.w.PeakBlocks()
			c.w.Abort()
		}
		if c.boot != nil {
			c.boot.Close()
		}
		if c.fb != 0 {
			realAbort(c.cuCtx, c.fb)
		}
		if c.w != nil {
			c.w.Close()
		}
		c.closeStreams()
		c.log.Info("weft: communicator aborted", "calls", c.summary(), "peak_blocks", peak)
	}()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
}

func (c *comm) closeStreams() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for h, s := range c.streams {
		s.Close()
		delete(c.streams, h)
	}
}

// asyncError is what ncclCommGetAsyncError reports.
func (c *comm) asyncError() (result, error) {
	if !c.isReady() {
		return ncclInProgress, nil
	}
	if c.initErr != nil {
		return codeOf(c.initErr), c.initErr
	}
	if c.closed.Load() || c.aborted.Load() {
		return ncclSuccess, nil
	}
	if c.w != nil {
		if err := c.w.AsyncError(); err != nil {
			return codeOf(err), err
		}
	} else if err := c.boot.Err(); err != nil {
		return codeOf(err), err
	}
	if c.fb != 0 {
		if err := realAsyncError(c.fb); err != nil {
			return codeOf(err), err
		}
	}
	return ncclSuccess, nil
}

// newLogger returns the logger of a subsystem: weft's (WEFT_DEBUG,
// WEFT_DEBUG_SUBSYS) when WEFT_DEBUG is set, else one that follows
// NCCL_DEBUG (WARN, INFO, TRACE), so that NCCL users see weft in the path.
func newLogger(sub string) *slog.Logger {
	if env.String("WEFT_DEBUG") != "" {
		return env.Logger(sub).With("lib", "weft-nccl")
	}
	var lvl slog.Level
	switch strings.ToUpper(env.String("NCCL_DEBUG")) {
	case "WARN":
		lvl = slog.LevelWarn
	case "INFO":
		lvl = slog.LevelInfo
	case "TRACE", "DEBUG":
		lvl = slog.LevelDebug
	default:
		return slog.New(slog.DiscardHandler)
	}
	h := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})
	host, _ := os.Hostname()
	return slog.New(h).With("lib", "weft-nccl", "subsys", sub, "host", host, "pid", os.Getpid())
}

// fallbackEnabled is WEFT_NCCL_FALLBACK != 0.
func fallbackEnabled() bool {
	v := strings.TrimSpace(env.String("WEFT_NCCL_FALLBACK"))
	return v != "0" && !strings.EqualFold(v, "false") && !strings.EqualFold(v, "off")
}

// forwardAll is WEFT_NCCL_FALLBACK=all: communicators are the real NCCL's
// alone and every call is forwarded (weft's own communicator is not made),
// so that a program can be timed with the library loaded but none of
// weft's plans running.
func forwardAll() bool {
	return strings.EqualFold(strings.TrimSpace(env.String("WEFT_NCCL_FALLBACK")), "all")
}

// sortMembers orders the ranks of one split color by key, then parent rank.
func sortMembers(members []int, keys []int) {
	sort.SliceStable(members, func(i, j int) bool {
		a, b := members[i], members[j]
		if keys[a] != keys[b] {
			return keys[a] < keys[b]
		}
		return a < b
	})
}
