package channels

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/stageprof"
)

// Proxy drains the port-channel FIFOs of one device and hands their
// triggers to the channels' engines (architecture.md §3). MSCCL++ runs one
// such proxy per rank; so does weft (one per opened device and process).
//
// Triggers of one FIFO are handled in FIFO order. A flush does not stop the
// FIFO: the proxy takes the engine's ticket (hal.Engine.Mark), goes on with
// later triggers, and publishes the flush as done (plan.FifoFlushed) when
// the ticket completes, in FIFO order among flushes.
//
// # Polling policy
//
// The proxy is one goroutine. Its loop reads the FIFOs' memory with atomic
// loads and calls the engines, nothing else: no allocation, no system
// call. A device pushes triggers with stores to host memory, which nothing
// signals, so the proxy must poll; how it polls sets the latency of every
// port-channel request (a put-with-signal is two triggers, and a ping-pong
// crosses two proxies):
//
//   - Hot: while a trigger was seen less than SpinFor ago, a flush awaits
//     its engine, or the proxy was kicked less than SpinFor ago, the loop
//     polls without sleeping: bursts of spinBurst polls back to back, then
//     runtime.Gosched so that goroutines sharing its processor run (on
//     hal/host the ranks' kernels are goroutines of the same process).
//   - Warm: for WarmFor after the last trigger or kick, it naps warmNap
//     between polls in the kernel (nanosleep, not time.Sleep: Go rounds
//     sleeps under 1 ms up to 1 ms when the runtime is idle), so that a
//     launch that comes after a pause (the next step's collective, the
//     next size of a benchmark) waits about 100 µs, not a millisecond:
//     about ten thousand short wake-ups a second, a few percent of a core.
//   - Idle: after that it blocks on its wake channel with a timer,
//     sleeping 10 µs, then twice as long each round up to MaxSleep. An
//     idle proxy costs about a thousand wake-ups a second, no core.
//   - Woken: [Proxy.Kick] wakes a sleeping proxy at once and makes it hot.
//     Host-pushed triggers (PortChannel) kick it; so does a registration;
//     the launch path kicks it through [Resources.Launching] before it
//     launches a plan with port channels. Launches that do not go through
//     it (a CUDA graph replayed by its owner) are found by the idle timer,
//     at most MaxSleep late, and then everything runs hot.
//
// A device without a GPU (DeviceInfo.Arch "": hal/host) runs its kernels
// as goroutines on the same CPUs, so its proxy stays hot for
// hostProxySpinFor and warm for hostProxyWarmFor only: with many ranks'
// processes on a few cores, a long spin takes the processor from the very
// kernels whose triggers it waits for (2 cores, 16 ranks on 4 emulated
// nodes: 35 CPU-seconds with the GPU policy, 19 with this one).
//
// The goroutine is not locked to an OS thread: a locked goroutine that
// yields hands its processor to another thread and parks until the
// scheduler hands it back (two futex round trips per idle poll, tens of
// microseconds on a busy host), and the engines need no thread of their
// own (CUDA calls make their context current per call).
//
// WEFT_PROXY_PROFILE=1 times the stages (stageprof): the gap between the
// last empty poll and the one that found a trigger, every engine call by
// kind, a flush's wait for its engine, and the sleeps; the summary is
// logged when the proxy closes.
type Proxy struct {
	dev  hal.Device
	rank int
	log  *slog.Logger
	prof *stageprof.Set

	spinFor  time.Duration // SpinFor, or hostProxySpinFor for a device without a GPU
	warmFor  time.Duration // WarmFor, or hostProxyWarmFor for a device without a GPU
	mu       sync.Mutex    // registration
	fifos    atomic.Pointer[[]*fifo]
	version  atomic.Uint64 // bumped by every registration change
	seen     atomic.Uint64 // version the loop has started an iteration with
	kicked   atomic.Bool   // Kick since the loop last looked
	sleeping atomic.Bool   // the loop is in (or entering) its idle wait
	wake     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopped  atomic.Bool
}

// Back-off of an idle proxy.
const (
	// SpinFor is how long the proxy stays hot (polls without sleeping)
	// after its last trigger or kick: launches that push triggers come in
	// bursts, and a sleeping proxy adds its wake-up latency to the first
	// trigger of the next one.
	SpinFor = 20 * time.Millisecond
	// hostProxySpinFor replaces SpinFor for a device whose kernels run on
	// the host's CPUs (DeviceInfo.Arch ""): long enough to catch the next
	// trigger of a step in flight, short enough that ranks' processes on a
	// few cores do not spend them spinning.
	hostProxySpinFor = 200 * time.Microsecond
	// hostProxyWarmFor replaces WarmFor there, for the same reason: naps
	// are wake-ups the kernels' processes pay for.
	hostProxyWarmFor = 20 * time.Millisecond
	// WarmFor is how long after its last trigger or kick the proxy naps
	// warmNap between polls rather than sleeping on a timer.
	WarmFor = 1 * time.Second
	// MaxSleep bounds the sleep of an idle proxy, and so the delay of the
	// first trigger of a launch that did not kick it.
	MaxSleep = 1 * time.Millisecond
	// warmNap is the nap of a warm proxy (plus the kernel's timer slack).
	warmNap = 50 * time.Microsecond
	// spinBurst is how many empty polls a hot proxy makes between yields
	// of its processor: a few microseconds of polling with one FIFO.
	spinBurst = 64
)

// Profile stages (WEFT_PROXY_PROFILE).
const (
	profGap = iota
	profPut
	profSignal
	profCopy
	profMark
	profFlush
	profSleep
	profLate
	profNap
)

var profStages = []string{
	"poll gap before a trigger (previous poll's end to this poll's start)", "engine put call", "engine signal call", "engine copy call", "engine mark call",
	"flush: mark to completion seen", "idle sleep", "sleep overshoot", "warm nap",
}

// watchEvery is how many polls of a FIFO pass between checks of its
// watch function.
const watchEvery = 256

// maxPendingFlush is how many flushes of one FIFO may await their engines;
// the proxy stops reading that FIFO while the queue is full.
const maxPendingFlush = 64

// NewProxy starts the proxy of dev. rank is used in messages only. Close
// stops it.
func NewProxy(dev hal.Device, rank int) *Proxy {
	p := &Proxy{dev: dev, rank: rank, spinFor: SpinFor, warmFor: WarmFor, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if dev != nil && dev.Info().Arch == "" {
		// The device's kernels are goroutines on the CPUs this loop would
		// spin on (hal/host): a long hot spin takes the processor from the
		// very kernels whose triggers it waits for, so it stays hot for
		// hostProxySpinFor only.
		p.spinFor, p.warmFor = hostProxySpinFor, hostProxyWarmFor
	}
	p.log = env.Logger("PROXY").With("rank", rank)
	if stageprof.Enabled() {
		backend := "no device"
		if dev != nil {
			backend = dev.Info().Backend
		}
		p.prof = stageprof.New(fmt.Sprintf("port-channel proxy of rank %d (%s)", rank, backend), profStages...)
	}
	empty := []*fifo{}
	p.fifos.Store(&empty)
	go p.loop()
	return p
}

// Kick tells the proxy that triggers are coming: a sleeping proxy wakes
// at once, and it stays hot for SpinFor. It costs an atomic store, and a
// channel send only when the proxy sleeps; any goroutine may call it.
func (p *Proxy) Kick() {
	p.kicked.Store(true)
	if p.sleeping.Load() {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// Launching tells the plan's proxy that a launch of the plan is about to
// start (Proxy.Kick): call it before launching a plan with port channels,
// so that a proxy asleep after an idle stretch does not add its sleep to
// the first trigger. It does nothing for plans without port channels.
func (r *Resources) Launching() {
	if r.proxy != nil {
		r.proxy.Kick()
	}
}

// Close stops the proxy once its FIFOs are unregistered. Triggers still in
// a registered FIFO are dropped; it returns an error naming those FIFOs.
func (p *Proxy) Close() error {
	if p.stopped.Swap(true) {
		return nil
	}
	close(p.stop)
	<-p.done
	p.prof.Log(p.log)
	if err := stageprof.WriteTrace(); err != nil {
		p.log.Warn("proxy timeline", "err", err)
	}
	var names []string
	for _, f := range *p.fifos.Load() {
		names = append(names, f.name)
	}
	if len(names) > 0 {
		return fmt.Errorf("channels: proxy of rank %d closed with FIFOs still registered: %v: %w", p.rank, names, hal.ErrInvalidUsage)
	}
	return nil
}

func (p *Proxy) add(f *fifo) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped.Load() {
		return fmt.Errorf("channels: proxy of rank %d is closed: %w", p.rank, hal.ErrInvalidUsage)
	}
	f.proxy, f.prof = p, p.prof
	list := append(append([]*fifo{}, *p.fifos.Load()...), f)
	p.fifos.Store(&list)
	p.version.Add(1)
	p.Kick()
	return nil
}

// remove unregisters f and returns once the loop no longer touches it.
func (p *Proxy) remove(f *fifo) {
	p.mu.Lock()
	var list []*fifo
	for _, g := range *p.fifos.Load() {
		if g != f {
			list = append(list, g)
		}
	}
	p.fifos.Store(&list)
	v := p.version.Add(1)
	p.mu.Unlock()
	p.Kick()
	deadline := time.Now().Add(plan.DefaultTimeout)
	for p.seen.Load() < v && !p.stopped.Load() && time.Now().Before(deadline) {
		runtime.Gosched()
	}
}

func (p *Proxy) loop() {
	defer close(p.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	lastWork := time.Now()
	var lastPoll time.Time // profiling only
	sleep := time.Duration(0)
	for idle := 0; ; {
		p.seen.Store(p.version.Load())
		list := *p.fifos.Load()
		work, pending := false, false
		var pollStart time.Time
		if p.prof.On() {
			pollStart = time.Now()
		}
		for _, f := range list {
			if f.poll() {
				work = true
			}
			pending = pending || f.pendCount > 0
		}
		if p.prof.On() {
			if work && !lastPoll.IsZero() {
				p.prof.Add(profGap, pollStart.Sub(lastPoll))
			}
			lastPoll = time.Now()
		}
		if work {
			idle, sleep = 0, 0
			lastWork = time.Now()
			continue
		}
		if idle++; idle%spinBurst != 0 {
			continue
		}
		select {
		case <-p.stop:
			return
		default:
		}
		if p.kicked.Load() {
			p.kicked.Store(false)
			lastWork = time.Now()
		}
		quiet := time.Since(lastWork)
		if pending || quiet < p.spinFor {
			// Hot: let goroutines sharing the processor run, and poll on.
			runtime.Gosched()
			continue
		}
		if quiet < p.warmFor {
			start := p.prof.Now()
			nap(warmNap)
			p.prof.Since(profNap, start)
			lastPoll = time.Time{}
			idle = spinBurst - 1 // one poll, then the next nap
			continue
		}
		// Idle. Announce the sleep, then look once more for a kick that
		// raced with the announcement (Kick stores kicked, then reads
		// sleeping; the loop stores sleeping, then reads kicked).
		p.sleeping.Store(true)
		if p.kicked.Load() {
			p.sleeping.Store(false)
			continue
		}
		if sleep == 0 {
			sleep = 10 * time.Microsecond
		} else {
			sleep = min(2*sleep, MaxSleep)
		}
		start := p.prof.Now()
		timer.Reset(sleep)
		select {
		case <-p.stop:
			timer.Stop()
			p.sleeping.Store(false)
			return
		case <-p.wake:
			timer.Stop()
			sleep = 0
		case <-timer.C:
			if p.prof.On() {
				p.prof.Add(profLate, time.Since(start)-sleep)
			}
		}
		p.sleeping.Store(false)
		p.prof.Since(profSleep, start)
		lastPoll = time.Time{} // a trigger found now waited in the sleep, counted there
	}
}

// fifo is one FIFO the proxy drains: a plan's (the device pushes) or a host
// port group's (Go code pushes).
type fifo struct {
	// batched are the engines of the current pass that batch
	// (hal.EngineBatcher), reused from pass to pass.
	batched []hal.EngineBatcher
	name    string
	mem     []byte // plan.FifoBytes, 8-byte aligned
	engines []hal.Engine
	// ackers[i] is engines[i] as a hal.AckSignaler, or nil: a release
	// (plan.TriggerAck) goes to AckSignal where the engine has it.
	ackers  []hal.AckSignaler
	peers   []int
	rank    int
	control []byte // the plan's control block, for failures; nil for host FIFOs
	timeout time.Duration
	log     *slog.Logger
	// watch, when set, reports a failure outside the FIFO's requests (a
	// network's receiver-side error); the proxy checks it every
	// watchEvery polls and fails the FIFO with it.
	watch func() error
	polls uint64
	// proxy and prof are set when the FIFO is registered (Proxy.add):
	// host pushes kick the proxy; prof times the engine calls.
	proxy *Proxy
	prof  *stageprof.Set

	tail                 uint64
	pend                 [maxPendingFlush]pendingFlush
	pendHead, pendCount  int
	err                  atomic.Pointer[proxyError]
	hostMu               sync.Mutex // host pushers
	hostHead             uint64
	triggers, flushWaits atomic.Uint64 // statistics
}

// pendingFlush is a flush, or a counter increment (counter ≥ 0), waiting
// for its engine's ticket.
type pendingFlush struct {
	pos     uint64 // FIFO position + 1
	ch      int
	counter int // -1: a flush
	ticket  uint64
	started time.Time
}

type proxyError struct {
	err error
}

func newFifo(name string, mem []byte, engines []hal.Engine, peers []int, rank int, control []byte, timeout time.Duration, log *slog.Logger) (*fifo, error) {
	if len(mem) < plan.FifoBytes || uintptr(unsafe.Pointer(&mem[0]))%8 != 0 {
		return nil, fmt.Errorf("channels: FIFO %s: %d bytes at an address not 8-byte aligned or short of %d: %w", name, len(mem), plan.FifoBytes, hal.ErrInvalidArgument)
	}
	if timeout <= 0 {
		timeout = plan.DefaultTimeout
	}
	ackers := make([]hal.AckSignaler, len(engines))
	for i, e := range engines {
		ackers[i], _ = e.(hal.AckSignaler)
	}
	return &fifo{name: name, mem: mem, engines: engines, ackers: ackers, peers: peers, rank: rank, control: control, timeout: timeout, log: log}, nil
}

func (f *fifo) word(off int64) *uint64 { return (*uint64)(unsafe.Pointer(&f.mem[off])) }

// poll handles what is ready in the FIFO and reports whether it did work.
// batchWait is how long a pass waits, after an engine that batches
// (hal.EngineBatcher) held a request, for the next trigger, usually the
// put's signal, which a kernel pushes within about a microsecond: sent
// with the put, it saves a frame write (5–6 µs over loopback sockets).
const batchWait = 4 * time.Microsecond

func (f *fifo) poll() bool {
	if f.err.Load() != nil {
		return false
	}
	if f.watch != nil {
		if f.polls++; f.polls%watchEvery == 0 {
			if err := f.watch(); err != nil {
				f.fail(plan.Trigger{Chan: -1}, 0, err)
				return true
			}
		}
	}
	work := f.completeFlushes()
	// Engines that send requests of one pass together (hal.EngineBatcher)
	// get the pass bracketed; f.batched holds them during the pass.
	held := false // the last trigger's engine holds it for the next one
	for n := 0; n < 64 && f.pendCount < maxPendingFlush; n++ {
		off := plan.SlotOffset(f.tail)
		tag := atomic.LoadUint64(f.word(off + 24))
		if plan.TagPosition(tag) != f.tail+1 && held {
			// A kernel pushes a put's signal right after the put: wait
			// a moment for it, so that the engine sends both at once.
			for start := time.Now(); plan.TagPosition(tag) != f.tail+1 && time.Since(start) < batchWait; {
				tag = atomic.LoadUint64(f.word(off + 24))
			}
		}
		if plan.TagPosition(tag) != f.tail+1 {
			break
		}
		kind, alone, ack := plan.TagKind(tag)
		t := plan.Trigger{Kind: kind, Alone: alone, Ack: ack, Chan: int(uint8(tag)),
			A: atomic.LoadUint64(f.word(off)), B: atomic.LoadUint64(f.word(off + 8)), C: atomic.LoadUint64(f.word(off + 16))}
		var b hal.EngineBatcher
		if t.Chan < len(f.engines) {
			var ok bool
			if b, ok = f.engines[t.Chan].(hal.EngineBatcher); ok && !slices.Contains(f.batched, b) {
				b.BeginBatch()
				f.batched = append(f.batched, b)
			}
		}
		pos := f.tail + 1
		f.tail++
		atomic.StoreUint64(f.word(plan.FifoTail), f.tail)
		f.triggers.Add(1)
		work = true
		ts := stageprof.TraceStart()
		if err := f.handle(t, pos); err != nil {
			f.fail(t, pos, err)
			f.endBatches()
			return true
		}
		stageprof.Trace(stageprof.EvTrigger, f.rank, ts, uint64(t.Kind), uint64(t.Chan), pos)
		// A put marked alone (an LL put) has no signal coming to send it
		// with: the pass ends at once when no trigger is ready.
		held = b != nil && !t.Alone && b.Holding()
	}
	f.endBatches()
	return work
}

// endBatches ends the pass on the engines that batch (EndBatch sends what
// they hold).
func (f *fifo) endBatches() {
	for _, b := range f.batched {
		if err := b.EndBatch(); err != nil && f.err.Load() == nil {
			f.fail(plan.Trigger{Chan: -1}, 0, err)
		}
	}
	f.batched = f.batched[:0]
}

func (f *fifo) handle(t plan.Trigger, pos uint64) error {
	if t.Chan >= len(f.engines) || f.engines[t.Chan] == nil {
		return fmt.Errorf("trigger %d (%v) names channel %d, which has no engine (%d channels): %w", pos, t.Kind, t.Chan, len(f.engines), hal.ErrInvalidUsage)
	}
	e := f.engines[t.Chan]
	start := f.prof.Now()
	switch t.Kind {
	case plan.TriggerPut:
		err := e.Put(t.B, t.A, int64(t.C))
		f.prof.Since(profPut, start)
		return err
	case plan.TriggerCopy:
		err := e.Copy(t.B, t.A, int64(t.C))
		f.prof.Since(profCopy, start)
		return err
	case plan.TriggerSignal:
		var err error
		if a := f.ackers[t.Chan]; a != nil && t.Ack {
			err = a.AckSignal(t.B, t.C, t.A)
		} else {
			err = e.Signal(t.B, t.C, t.A)
		}
		f.prof.Since(profSignal, start)
		return err
	case plan.TriggerFlush, plan.TriggerCounter:
		counter := -1
		if t.Kind == plan.TriggerCounter {
			if t.C >= plan.FifoCounters {
				return fmt.Errorf("trigger %d names counter %d of %d: %w", pos, t.C, plan.FifoCounters, hal.ErrInvalidUsage)
			}
			counter = int(t.C)
		}
		tk, err := e.Mark()
		f.prof.Since(profMark, start)
		if err != nil {
			return err
		}
		i := (f.pendHead + f.pendCount) % maxPendingFlush
		f.pend[i] = pendingFlush{pos: pos, ch: t.Chan, counter: counter, ticket: tk, started: time.Now()}
		f.pendCount++
		f.flushWaits.Add(1)
		f.completeFlushes()
		return nil
	}
	return fmt.Errorf("trigger %d has unknown kind %d: %w", pos, t.Kind, hal.ErrInvalidUsage)
}

// completeFlushes publishes the flushes whose tickets completed, oldest
// first, so that FifoFlushed only moves forward.
func (f *fifo) completeFlushes() bool {
	work := false
	for f.pendCount > 0 {
		pf := &f.pend[f.pendHead]
		done, err := f.engines[pf.ch].Completed()
		if err != nil {
			f.fail(plan.Trigger{Kind: plan.TriggerFlush, Chan: pf.ch}, pf.pos, err)
			return true
		}
		if done < pf.ticket {
			if time.Since(pf.started) > f.timeout {
				f.fail(plan.Trigger{Kind: plan.TriggerFlush, Chan: pf.ch}, pf.pos,
					fmt.Errorf("engine did not complete the requests before flush %d within %v (ticket %d, completed %d): %w",
						pf.pos, f.timeout, pf.ticket, done, hal.ErrTimeout))
				return true
			}
			return work
		}
		f.prof.Since(profFlush, pf.started)
		if pf.counter >= 0 {
			atomic.AddUint64(f.word(plan.CounterOffset(pf.counter)), 1)
		} else {
			atomic.StoreUint64(f.word(plan.FifoFlushed), pf.pos)
		}
		f.pendHead = (f.pendHead + 1) % maxPendingFlush
		f.pendCount--
		work = true
	}
	return work
}

// fail records the first failure, in the plan's control block too, so that
// the device's waits give up and Resources.Check reports it.
func (f *fifo) fail(t plan.Trigger, pos uint64, err error) {
	peer := -1
	if t.Chan >= 0 && t.Chan < len(f.peers) {
		peer = f.peers[t.Chan]
	}
	pe := &proxyError{err: fmt.Errorf("rank %d: proxy: %s: %v of channel %d (peer rank %d), trigger %d: %w", f.rank, f.name, t.Kind, t.Chan, peer, pos, err)}
	if t.Chan < 0 {
		pe.err = fmt.Errorf("rank %d: proxy: %s: %w", f.rank, f.name, err)
	}
	if !f.err.CompareAndSwap(nil, pe) {
		return
	}
	f.log.Error("port-channel request failed", "fifo", f.name, "err", pe.err)
	atomic.StoreUint64(f.word(plan.FifoError), 1)
	if c := f.control; c != nil {
		st := (*uint32)(unsafe.Pointer(&c[plan.CtlStatus]))
		if atomic.CompareAndSwapUint32(st, plan.StatusOK, plan.StatusTimeout) {
			le32 := func(off int, v int) { atomic.StoreUint32((*uint32)(unsafe.Pointer(&c[off])), uint32(int32(v))) }
			le32(plan.CtlRank, f.rank)
			le32(plan.CtlPeer, peer)
			le32(plan.CtlChannel, t.Chan)
			le32(plan.CtlSemaphore, -1)
			le32(plan.CtlBlock, -1)
			le32(plan.CtlWhat, plan.WhatProxy)
			atomic.StoreUint64((*uint64)(unsafe.Pointer(&c[plan.CtlExpected])), pos)
		}
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&c[plan.CtlAbort])), 1)
	}
}

// Err returns the FIFO's first failure, or nil.
func (f *fifo) Err() error {
	if pe := f.err.Load(); pe != nil {
		return pe.err
	}
	return nil
}

// push appends a trigger from the host (a PortChannel), waiting while the
// FIFO is full, and returns its position + 1.
func (f *fifo) push(k plan.TriggerKind, ch int, a, b, c uint64, deadline time.Time) (uint64, error) {
	f.hostMu.Lock()
	defer f.hostMu.Unlock()
	pos := f.hostHead
	for {
		if err := f.Err(); err != nil {
			return 0, err
		}
		tail := atomic.LoadUint64(f.word(plan.FifoTail))
		if pos < tail+plan.FifoSlots {
			break
		}
		if time.Now().After(deadline) {
			return 0, &hal.TimeoutError{Rank: f.rank, Peer: f.peer(ch), Channel: ch, Semaphore: -1, Block: -1,
				What: "port-channel FIFO space (the proxy does not drain it)", Expected: pos + 1, Observed: tail}
		}
		runtime.Gosched()
	}
	f.hostHead++
	off := plan.SlotOffset(pos)
	atomic.StoreUint64(f.word(off), a)
	atomic.StoreUint64(f.word(off+8), b)
	atomic.StoreUint64(f.word(off+16), c)
	atomic.StoreUint64(f.word(off+24), plan.TriggerTag(pos, k, ch))
	if f.proxy != nil {
		f.proxy.Kick()
	}
	return pos + 1, nil
}

// waitFlushed waits until flush position me is published: it polls,
// yielding the processor between polls, for hostSpinFor, then sleeps
// hostSleep between polls (a flush that long is a large copy).
func (f *fifo) waitFlushed(me uint64, ch int, deadline time.Time) error {
	start := time.Now()
	for spins := 0; ; spins++ {
		v := atomic.LoadUint64(f.word(plan.FifoFlushed))
		if v >= me {
			return nil
		}
		if err := f.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return &hal.TimeoutError{Rank: f.rank, Peer: f.peer(ch), Channel: ch, Semaphore: -1, Block: -1,
				What: "port-channel flush", Expected: me, Observed: v}
		}
		hostBackoff(spins, start)
	}
}

// Host-side waits (Flush, Wait of a PortChannel): poll, yielding the
// processor, for hostSpinFor, then sleep hostSleep between polls. A
// sub-millisecond sleep on an idle Go runtime lasts about a millisecond,
// so a wait that sleeps at once is a millisecond late.
const (
	hostSpinFor = 2 * time.Millisecond
	hostSleep   = 50 * time.Microsecond
)

// hostBackoff pauses between two polls of a host-side wait that started
// at start (spins: polls so far); the clock is read from the 64th poll on.
func hostBackoff(spins int, start time.Time) {
	if spins < 64 || time.Since(start) < hostSpinFor {
		runtime.Gosched()
		return
	}
	time.Sleep(hostSleep)
}

func (f *fifo) peer(ch int) int {
	if ch >= 0 && ch < len(f.peers) {
		return f.peers[ch]
	}
	return -1
}

// closeEngines closes the FIFO's engines (after the proxy dropped it).
func closeEngines(engines []hal.Engine) error {
	var errs []error
	for _, e := range engines {
		if e != nil {
			errs = append(errs, e.Close())
		}
	}
	return errors.Join(errs...)
}

// shared proxies: plans set up by Setup share one proxy per device.
var shared struct {
	sync.Mutex
	m map[hal.Device]*sharedProxy
}

type sharedProxy struct {
	p    *Proxy
	refs int
}

func acquireProxy(dev hal.Device, rank int) *Proxy {
	shared.Lock()
	defer shared.Unlock()
	if shared.m == nil {
		shared.m = map[hal.Device]*sharedProxy{}
	}
	sp := shared.m[dev]
	if sp == nil {
		sp = &sharedProxy{p: NewProxy(dev, rank)}
		shared.m[dev] = sp
	}
	sp.refs++
	return sp.p
}

func releaseProxy(dev hal.Device) error {
	shared.Lock()
	defer shared.Unlock()
	sp := shared.m[dev]
	if sp == nil {
		return nil
	}
	if sp.refs--; sp.refs > 0 {
		return nil
	}
	delete(shared.m, dev)
	return sp.p.Close()
}

// DebugState describes the FIFOs of every shared proxy in this process,
// one line each, for a hang report (libweft_nccl's WEFT_DEBUG_STACKS dump):
// the triggers consumed, what the next slot holds (a trigger the proxy
// has not taken yet, an older one, or nothing), flushes waited for and the
// FIFO's failure, then each of its engines that describes itself (copy
// engines: the value last queued for each semaphore they signal). It reads
// while the proxies run: a snapshot, not a consistent cut. The root
// package logs it when a wait times out; libweft_nccl also on SIGUSR1
// (WEFT_DEBUG_STACKS).
func DebugState() string {
	shared.Lock()
	var ps []*Proxy
	for _, sp := range shared.m {
		ps = append(ps, sp.p)
	}
	shared.Unlock()
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "proxy of rank %d: sleeping %v\n", p.rank, p.sleeping.Load())
		for _, f := range *p.fifos.Load() {
			tail := atomic.LoadUint64(f.word(plan.FifoTail))
			tag := atomic.LoadUint64(f.word(plan.SlotOffset(tail) + 24))
			next := "empty"
			switch pos := plan.TagPosition(tag); {
			case pos == tail+1:
				k, _, _ := plan.TagKind(tag)
				next = fmt.Sprintf("trigger %d ready, not taken (kind %d, channel %d)", pos, k, uint8(tag))
			case tag != 0:
				next = fmt.Sprintf("older trigger %d", pos)
			}
			state := "ok"
			if e := f.err.Load(); e != nil {
				state = e.err.Error()
			}
			fmt.Fprintf(&b, "  fifo %s: consumed %d, next slot: %s; triggers %d, flush waits %d; %s\n",
				f.name, tail, next, f.triggers.Load(), f.flushWaits.Load(), state)
			for _, e := range f.engines {
				if d, ok := e.(interface{ DebugState() string }); ok {
					fmt.Fprintf(&b, "    engine %s\n", d.DebugState())
				}
			}
		}
	}
	return b.String()
}
