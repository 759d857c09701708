package socket

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/netcore"
	"github.com/weftccl/weft/internal/auth"
	"github.com/weftccl/weft/internal/stageprof"
)

// ringSize is the number of requests an engine holds that are not yet
// complete at the source; Put, Copy and Signal wait (bounded by the
// timeout) while it is full. It covers four proxy FIFOs (plan.FifoSlots).
const ringSize = 4096

// sendQueue is the capacity of a connection's queue of staged frames.
const sendQueue = 1024

// Engine is an engine to a peer over TCP. The proxy's calls only queue
// requests; three kinds of goroutines do the work:
//
//   - the stager takes requests in order, copies each chunk of a put into
//     a staging slot with the device's own engine (Copy, then Mark), numbers
//     the frames 0, 1, 2, … and hands frame s to connection s mod Conns;
//     Copy requests go to the own engine in the same order, and a Signal
//     takes a ticket of the own engine covering every earlier request;
//   - the completer polls the own engine and publishes how far it got;
//     a request is complete at the source when its last own-engine ticket
//     is, which is what Mark and Completed report;
//   - a sender per connection writes its frames once their staging is
//     complete, and returns the slot; a reader per connection takes the
//     receiver's replies (refusals, goodbyes).
//
// So staging of chunk k+1 overlaps the sending of chunk k, and no call of
// the proxy waits for the network; only a full request ring makes it wait.
//
// Small messages skip those goroutines: a request that finds the engine
// idle — a put of at most inlineMax bytes, a signal, a copy — runs on the
// caller's goroutine (the proxy's), which stages a put, polls the own
// engine and writes the frame itself (issueInline); a put whose source is
// host-visible (a registration of this NetDevice with a host view: a
// plan's scratch in host windows, where the kernel staged the window)
// is written straight from it, with no device copy. During a pass of the
// proxy (BeginBatch … EndBatch, hal.EngineBatcher) such a put waits for
// the next request, and a signal that follows it leaves with it as one
// frame (framePutSignal): one write per hop instead of two. Every hand-off
// between goroutines costs a wake-up (5–20 µs on a virtual machine), and
// a small message paid three of them before its frame left; now it pays
// the device copy, the poll and the write. The proxy is busy meanwhile,
// which costs nothing when the engine was idle anyway.
//
// WEFT_PROXY_PROFILE=1 times the stages (issue → queued → staged → written,
// the inline path, the own engine's completions) and logs them at Close.
type Engine struct {
	nd      *NetDevice
	peer    int
	nonce   uint64 // the peer's incarnation
	remote  string // the peer's listen address, for messages
	desc    string // describe()'s text, set once dial has connected
	id      uint64
	chunk   int
	timeout time.Duration
	log     *slog.Logger

	prof    *stageprof.Set // WEFT_PROXY_PROFILE; nil: off
	conns   []*sendConn
	own     hal.Engine // the device's own engine
	ownMu   sync.Mutex
	staging hal.Buffer
	slots   chan int // free staging slots

	// issue side (the proxy's goroutine)
	mu      sync.Mutex
	ring    [ringSize]request
	head    uint64 // requests issued
	taken   uint64 // requests the stager has taken
	closed  bool
	staged  atomic.Uint64 // requests whose staging is done (the stager's or inline)
	inlined atomic.Uint64 // requests run inline (statistics, tests)
	// fromHost counts puts written straight from a host-visible source,
	// inline or through the ring (statistics, tests); merged those
	// written with the signal after them as one frame (framePutSignal).
	fromHost atomic.Uint64
	merged   atomic.Uint64
	// batch: the proxy's pass is under way (BeginBatch); held is an
	// inline put from a host-visible source kept back until the next
	// request, which it is sent with if that is a signal (issue-side
	// goroutine only).
	batch bool
	held  *heldPut
	// hostSrcs are the ring puts sent from host sources (hostSource),
	// until written or shutdown.
	hostMu   sync.Mutex
	hostSrcs []*hostSource
	// inlineHdr is the header buffer of frames the issuing goroutine
	// writes itself (issueInline), inlineBufs the vector of their writes
	// and heldBuf the held put (held points to it): kept in the engine,
	// so that an inline frame allocates nothing.
	inlineHdr     [headerSize]byte
	inlineTrailer [trailerSize]byte
	inlineBufs    [3][]byte
	heldBuf       heldPut

	wakeStager    chan struct{}
	wakeCompleter chan struct{}
	progress      notifier // any of the counters below advanced

	// stager → completer
	retMu     sync.Mutex
	ret       [ringSize]retireEntry
	retHead   int
	retCount  int
	ownIssued atomic.Uint64 // last own-engine ticket taken
	ownTick   atomic.Int64  // stageprof tick of that ticket (profiling)
	ownDone   atomic.Uint64 // own-engine tickets complete
	srcDone   atomic.Uint64 // requests complete at the source
	nextSeq   atomic.Uint64 // next frame sequence number
	queued    atomic.Uint64 // frames handed to senders
	written   atomic.Uint64 // frames written

	// tickets over the request counts and srcDone: marks with the same
	// request count merge, so at most ringSize+1 are outstanding
	marks *netcore.Marks

	st           netcore.EngineState // failure, reported, shutdown
	dead         chan struct{}
	stop         chan struct{}
	remoteClosed atomic.Bool
	wg           sync.WaitGroup
}

type reqKind uint8

const (
	reqPut reqKind = iota + 1
	reqCopy
	reqSignal
)

// request is one ring entry; for a signal dst is the semaphore, src the
// count word and n the count.
type request struct {
	kind     reqKind
	dst, src uint64
	n        uint64
	t        int64 // stageprof tick of the issue (0: not profiled)
}

// retireEntry: request req is complete at the source once own-engine
// ticket is and, for a put sent from a host-visible source, once every
// one of its frames is written (src).
type retireEntry struct {
	req, ticket uint64
	src         *hostSource
}

// hostSource is a ring put sent straight from a host-visible source: its
// frames not yet written, and the hold on the source's registration
// (netcore.Registry.LocalHost) that the last one releases.
type hostSource struct {
	pending atomic.Int64
	hold    netcore.Hold
	once    sync.Once
}

// written counts k frames of the put written (or never to be: a failed
// engine), releasing the source after the last.
func (h *hostSource) written(k int64) {
	if h.pending.Add(-k) <= 0 {
		h.once.Do(h.hold.Release)
	}
}

// heldPut is an inline put kept back during a batch: request number idx,
// its payload (a host view, held against Unexport by hold), own
// ticket t to retire it with.
type heldPut struct {
	r       request
	idx, t  uint64
	payload []byte
	hold    netcore.Hold
}

// sendConn is one connection of an engine.
type sendConn struct {
	e     *Engine
	index int
	conn  net.Conn
	q     chan outFrame
	acked atomic.Bool // the receiver acknowledged the goodbye
}

// outFrame is a frame staged for a connection: slot is the staging slot
// holding a put's payload (−1: none), ticket the own-engine ticket that
// must complete before it is written.
type outFrame struct {
	f      frame
	slot   int
	ticket uint64
	// payload, for a chunk of a put whose source is host-visible, is the
	// chunk itself, written from there instead of from staging slot
	// (which still bounds the frames in flight); src counts the put's
	// frames not yet written.
	payload []byte
	src     *hostSource
	// stageprof ticks (0: not profiled): the request's issue, the hand-off
	// to the connection
	issued, queued int64
}

// Profile stages of an engine (WEFT_PROXY_PROFILE).
const (
	profStage     = iota // issue → frame queued on its connection (the stager's wake-up and staging)
	profOwn              // queued → the sender sees the own engine's ticket complete
	profWrite            // the write of the frame
	profTotal            // issue → frame written
	profOwnDone          // an own-engine ticket: taken → completion published by the completer
	profInline           // inline request: issue → frame written (or copy queued)
	profInlineOwn        // inline put or signal: own-engine work queued → its completion seen
)

var profStages = []string{
	"issue to frame queued", "queued to staging complete seen", "frame write", "issue to frame written", "own-engine ticket to completion seen",
	"inline: issue to frame written", "inline: own engine queued to complete",
}

var _ hal.Engine = (*Engine)(nil)

// dial connects an engine to the NetDevice at a.
func (nd *NetDevice) dial(a address) (*Engine, error) {
	o := nd.opts
	e := &Engine{
		nd: nd, peer: a.rank, nonce: a.nonce, remote: a.addrs[0], id: rand.Uint64(), chunk: o.Chunk, timeout: o.Timeout,
		wakeStager: make(chan struct{}, 1), wakeCompleter: make(chan struct{}, 1),
		dead: make(chan struct{}), stop: make(chan struct{}), marks: netcore.NewMarks(ringSize + 2),
	}
	e.log = nd.log.With("peer", a.rank)
	e.prof = stageprof.New(fmt.Sprintf("socket engine of rank %d to rank %d", nd.cfg.Rank, a.rank), profStages...)
	nslots := max(4, 2*o.Conns)
	var err error
	if e.staging, err = nd.dev.AllocHost(int64(nslots) * int64(o.Chunk)); err != nil {
		return nil, fmt.Errorf("%s: staging memory: %w", e.describe(), err)
	}
	undo := func() {
		for _, c := range e.conns {
			c.conn.Close()
		}
		if e.own != nil {
			e.own.Close()
		}
		e.staging.Free()
	}
	if len(e.staging.Host()) < nslots*o.Chunk {
		undo()
		return nil, fmt.Errorf("%s: the device's host allocations are not host-accessible (Host() is nil): %w", e.describe(), hal.ErrNotSupported)
	}
	e.slots = make(chan int, nslots)
	for i := range nslots {
		e.slots <- i
	}
	if e.own, err = nd.pm.NewEngine(nd.dev.Endpoint()); err != nil {
		undo()
		return nil, fmt.Errorf("%s: the device's own engine: %w", e.describe(), err)
	}
	for i := range o.Conns {
		c, err := e.connect(a, i, o.Conns)
		if err != nil {
			undo()
			return nil, err
		}
		e.conns = append(e.conns, c)
	}
	nd.mu.Lock()
	if nd.closed {
		nd.mu.Unlock()
		undo()
		return nil, fmt.Errorf("%s: the NetDevice is closed: %w", e.describe(), hal.ErrInvalidUsage)
	}
	nd.engines[e] = struct{}{}
	nd.mu.Unlock()
	e.desc = e.describe() // final: every connection is open, nothing runs yet
	e.wg.Add(2 + 2*len(e.conns))
	go e.stager()
	go e.completer()
	for _, c := range e.conns {
		go c.sender()
		go c.reader()
	}
	e.log.Info("socket engine connected", "remote", e.remote, "conns", len(e.conns), "chunk", e.chunk, "engine", e.id)
	return e, nil
}

// describe names the engine in messages. Put, Copy and Signal pass it to
// their checks on every request, so once dial has connected it is the
// string formatted then (desc), not a new one per request.
func (e *Engine) describe() string {
	if e.desc != "" {
		return e.desc
	}
	return fmt.Sprintf("socket: rank %d: engine to rank %d (%s)", e.nd.cfg.Rank, e.peer, e.remote)
}

// connect opens connection index of conns: dial, handshake, wait for the
// receiver's answer.
func (e *Engine) connect(a address, index, conns int) (*sendConn, error) {
	var (
		c       net.Conn
		lastErr error
	)
	d := net.Dialer{Timeout: e.timeout}
	for _, addr := range a.addrs {
		if c, lastErr = d.Dial("tcp", addr); lastErr == nil {
			e.remote = addr
			break
		}
	}
	if c == nil {
		return nil, fmt.Errorf("%s: connection %d: %v: %w", e.describe(), index, lastErr, hal.ErrRemote)
	}
	fail := func(err error) (*sendConn, error) {
		c.Close()
		return nil, fmt.Errorf("%s: connection %d: %w", e.describe(), index, err)
	}
	if !e.nd.secret.IsZero() {
		ac, err := auth.Client(c, e.nd.authConfig(a.rank))
		if err != nil {
			return fail(err)
		}
		c = ac
	}
	c.SetDeadline(time.Now().Add(e.timeout))
	h := hello{index: index, conns: conns, job: e.nd.job, nonce: a.nonce, src: e.nd.cfg.Rank, dst: a.rank, engine: e.id, chunk: e.chunk}
	if _, err := c.Write(encodeHello(h)); err != nil {
		return fail(fmt.Errorf("handshake: %v: %w", err, hal.ErrRemote))
	}
	k, reason, err := readReply(c)
	if err != nil {
		return fail(fmt.Errorf("handshake answer: %v: %w", err, hal.ErrRemote))
	}
	if k != replyAccept {
		return fail(fmt.Errorf("refused: %s: %w", reason, hal.ErrRemote))
	}
	c.SetDeadline(time.Time{})
	// Frames go out through the descriptor itself (rawconn_linux.go); the
	// replies read from it are rare, so its reads do not poll.
	c = detach(c, 0, false)
	return &sendConn{e: e, index: index, conn: c, q: make(chan outFrame, sendQueue)}, nil
}

// readReply reads one reply frame.
func readReply(r io.Reader) (replyKind, string, error) {
	var b [replySize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, "", err
	}
	k, n, err := decodeReplyHeader(b[:])
	if err != nil {
		return 0, "", err
	}
	reason := make([]byte, n)
	if _, err := io.ReadFull(r, reason); err != nil {
		return 0, "", err
	}
	return k, string(reason), nil
}

// Put queues a copy of bytes from local address src to dst, an address
// inside a buffer imported from this engine's peer. The range must lie in
// that buffer (else hal.ErrInvalidArgument, returned at once).
func (e *Engine) Put(dst, src uint64, bytes int64) error {
	if err := e.nd.reg.CheckPut(e.describe(), e.peer, e.nonce, dst, bytes); err != nil {
		return err
	}
	return e.issue(request{kind: reqPut, dst: dst, src: src, n: uint64(bytes), t: e.prof.Tick()})
}

// Copy queues a copy between two local addresses of the device, ordered
// with the engine's other requests: it starts after the staging of every
// earlier put, and a later Signal is sent after it has finished.
func (e *Engine) Copy(dst, src uint64, bytes int64) error {
	if err := netcore.CheckCopy(e.describe(), dst, src, bytes); err != nil {
		return err
	}
	return e.issue(request{kind: reqCopy, dst: dst, src: src, n: uint64(bytes), t: e.prof.Tick()})
}

// Signal queues: once the data of every earlier put has been applied at
// the peer and every earlier copy has finished, store count at countAddr
// (0: nothing) and add one to the semaphore at semAddr, both 8-byte words
// in buffers imported from the peer.
func (e *Engine) Signal(semAddr, countAddr, count uint64) error {
	if err := e.nd.reg.CheckSignal(e.describe(), e.peer, e.nonce, semAddr, countAddr); err != nil {
		return err
	}
	return e.issue(request{kind: reqSignal, dst: semAddr, src: countAddr, n: count, t: e.prof.Tick()})
}

// issue puts r in the ring, waiting (at most the timeout without progress)
// while ringSize requests are not complete at the source.
func (e *Engine) issue(r request) error {
	if err := e.check(); err != nil {
		return err
	}
	if e.held != nil {
		// Anything but its signal, run inline, sends the held put first,
		// so that no frame overtakes it.
		e.mu.Lock()
		merge := r.kind == reqSignal && !e.closed && e.inlineable(r, e.head)
		e.mu.Unlock()
		if !merge {
			if err := e.sendHeld(nil); err != nil {
				return e.report(err)
			}
		}
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return fmt.Errorf("%s is closed: %w", e.describe(), hal.ErrInvalidUsage)
	}
	h := e.head
	if h-e.srcDone.Load() >= ringSize {
		e.mu.Unlock()
		if err := e.await("request ring full", func() bool { return h-e.srcDone.Load() < ringSize }); err != nil {
			return e.report(err)
		}
		e.mu.Lock()
	}
	if e.inlineable(r, h) {
		e.head, e.taken = h+1, h+1
		e.mu.Unlock()
		if err := e.issueInline(r, h+1); err != nil {
			if !errors.Is(err, errStopped) {
				e.fail(err, false)
			}
			return e.report(e.Err())
		}
		return nil
	}
	e.ring[h%ringSize] = r
	e.head = h + 1
	e.mu.Unlock()
	select {
	case e.wakeStager <- struct{}{}:
	default:
	}
	return nil
}

// check returns the engine's sticky error, failing the engine first if
// the NetDevice has recorded a failure of its peer.
func (e *Engine) check() error {
	if err := e.st.Err(); err != nil {
		return e.report(err)
	}
	if e.remoteClosed.Load() {
		e.fail(fmt.Errorf("%s: rank %d closed its socket transport: %w", e.describe(), e.peer, hal.ErrRemote), false)
		return e.report(e.st.Err())
	}
	if e.nd.fails.Count() == 0 {
		return nil
	}
	if err := e.nd.PeerErr(e.peer); err != nil {
		e.fail(fmt.Errorf("%s: rank %d failed: %w", e.describe(), e.peer, err), false)
		return e.report(e.st.Err())
	}
	return nil
}

func (e *Engine) report(err error) error { return e.st.Report(err) }

// Err returns the engine's failure, or nil.
func (e *Engine) Err() error { return e.st.Err() }

// fail records the engine's first failure and closes its connections, so
// that every goroutine of the engine stops. peerFault also records it as
// the peer's failure on the NetDevice.
func (e *Engine) fail(err error, peerFault bool) {
	if !e.st.Fail(err) {
		return
	}
	close(e.dead)
	for _, c := range e.conns {
		c.conn.Close()
	}
	e.progress.Notify()
	if peerFault {
		e.nd.failPeer(e.peer, err)
	} else {
		e.log.Warn("socket engine failed", "err", err)
	}
}

// await waits until ready holds, the engine fails or stops, or nothing
// advances for the timeout.
func (e *Engine) await(what string, ready func() bool) error {
	if ready() {
		return nil
	}
	return e.progress.Await(netcore.Wait{Describe: e.describe, What: what, Timeout: e.timeout, Ready: ready, Err: e.Err,
		Dead: e.dead, Stop: e.stop, Stopped: errStopped})
}

// Mark returns a ticket covering the requests issued so far.
func (e *Engine) Mark() (uint64, error) {
	if err := e.check(); err != nil {
		return 0, err
	}
	e.mu.Lock()
	req, closed := e.head, e.closed
	e.mu.Unlock()
	if closed {
		return 0, fmt.Errorf("%s is closed: %w", e.describe(), hal.ErrInvalidUsage)
	}
	return e.marks.Mark(req, e.srcDone.Load()), nil
}

// Completed returns the largest ticket whose requests are complete at the
// source (put sources staged, copies done), or the engine's failure.
func (e *Engine) Completed() (uint64, error) {
	err := e.check()
	return e.marks.Completed(e.srcDone.Load()), err
}

// stager takes requests in order and stages them.
func (e *Engine) stager() {
	defer e.wg.Done()
	for {
		e.mu.Lock()
		for e.taken == e.head {
			e.mu.Unlock()
			select {
			case <-e.wakeStager:
			case <-e.stop:
				return
			case <-e.dead:
				return
			}
			e.mu.Lock()
		}
		r := e.ring[e.taken%ringSize]
		e.taken++
		idx := e.taken
		e.mu.Unlock()
		if err := e.stage(r, idx); err != nil {
			if !errors.Is(err, errStopped) {
				e.fail(err, false)
			}
			return
		}
		e.staged.Store(idx)
	}
}

// stage issues request number idx to the own engine and the senders.
func (e *Engine) stage(r request, idx uint64) error {
	var t uint64
	var err error
	switch r.kind {
	case reqPut:
		if r.n == 0 {
			t, err = e.ownOp(nil)
			break
		}
		// A source in host memory (a plan's scratch in host windows) is
		// written from where it is, once the own engine's earlier
		// copies, which may write it, are done: no staging copy.
		if host, hold := e.nd.reg.LocalHost(r.src, r.n); host != nil {
			t = e.ownIssued.Load()
			hs := &hostSource{hold: hold}
			hs.pending.Store(int64((r.n + uint64(e.chunk) - 1) / uint64(e.chunk)))
			e.trackHost(hs)
			e.fromHost.Add(1)
			for off := uint64(0); off < r.n; off += uint64(e.chunk) {
				l := min(uint64(e.chunk), r.n-off)
				slot, err := e.takeSlot()
				if err == nil {
					seq := e.nextSeq.Add(1) - 1
					err = e.send(outFrame{f: frame{kind: framePut, seq: seq, a: r.dst + off, b: l}, slot: slot, ticket: t,
						payload: host[off : off+l], src: hs, issued: r.t})
				}
				if err != nil {
					hs.written(int64((r.n - off + uint64(e.chunk) - 1) / uint64(e.chunk)))
					return err
				}
			}
			e.retireEntry(retireEntry{req: idx, ticket: t, src: hs})
			return nil
		}
		for off := uint64(0); off < r.n; off += uint64(e.chunk) {
			l := min(uint64(e.chunk), r.n-off)
			slot, err := e.takeSlot()
			if err != nil {
				return err
			}
			dst := e.staging.Addr() + uint64(slot*e.chunk)
			if t, err = e.ownOp(func(own hal.Engine) error { return own.Copy(dst, r.src+off, int64(l)) }); err != nil {
				return err
			}
			seq := e.nextSeq.Add(1) - 1
			if err := e.send(outFrame{f: frame{kind: framePut, seq: seq, a: r.dst + off, b: l}, slot: slot, ticket: t, issued: r.t}); err != nil {
				return err
			}
		}
	case reqCopy:
		t, err = e.ownOp(func(own hal.Engine) error {
			if r.n == 0 {
				return nil
			}
			return own.Copy(r.dst, r.src, int64(r.n))
		})
	case reqSignal:
		if t, err = e.ownOp(nil); err == nil {
			seq := e.nextSeq.Add(1) - 1
			err = e.send(outFrame{f: frame{kind: frameSignal, seq: seq, a: r.dst, b: r.src, c: r.n}, slot: -1, ticket: t, issued: r.t})
		}
	}
	if err != nil {
		return err
	}
	e.retireEntry(retireEntry{req: idx, ticket: t})
	return nil
}

// retireEntry queues the retirement of a staged request and wakes the
// completer.
func (e *Engine) retireEntry(r retireEntry) {
	e.retMu.Lock()
	e.ret[(e.retHead+e.retCount)%ringSize] = r
	e.retCount++
	e.retMu.Unlock()
	select {
	case e.wakeCompleter <- struct{}{}:
	default:
	}
}

// trackHost records a put sent from a host source until shutdown, which
// releases what a failure left unwritten.
func (e *Engine) trackHost(h *hostSource) {
	e.hostMu.Lock()
	e.hostSrcs = append(slices.DeleteFunc(e.hostSrcs, func(x *hostSource) bool { return x.pending.Load() <= 0 }), h)
	e.hostMu.Unlock()
}

// ownOp runs op (nil: none) on the own engine (ownInline) and returns a
// ticket covering it and everything before it, waking the completer.
func (e *Engine) ownOp(op func(hal.Engine) error) (uint64, error) {
	prev := e.ownIssued.Load()
	t, err := e.ownInline(op)
	if err == nil && t > prev {
		// A wake more than needed (another goroutine's op raised
		// ownIssued meanwhile) costs the completer one look.
		select {
		case e.wakeCompleter <- struct{}{}:
		default:
		}
	}
	return t, err
}

func (e *Engine) takeSlot() (int, error) {
	select {
	case s := <-e.slots:
		return s, nil
	default:
	}
	timer := time.NewTimer(e.timeout)
	defer timer.Stop()
	select {
	case s := <-e.slots:
		return s, nil
	case <-e.dead:
		return 0, errStopped
	case <-e.stop:
		return 0, errStopped
	case <-timer.C:
		return 0, fmt.Errorf("%s: no frame was written within %v, so no staging slot came free (the peer stopped reading?): %w", e.describe(), e.timeout, hal.ErrTimeout)
	}
}

// send hands a frame to its connection.
func (e *Engine) send(of outFrame) error {
	c := e.conns[of.f.seq%uint64(len(e.conns))]
	e.queued.Add(1)
	of.queued = e.prof.SinceTick(profStage, of.issued)
	select {
	case c.q <- of:
		return nil
	case <-e.dead:
		return errStopped
	case <-e.stop:
		return errStopped
	}
}

// completer publishes the own engine's progress.
func (e *Engine) completer() {
	defer e.wg.Done()
	last := time.Now()
	for {
		e.retire(e.ownDone.Load())
		done := e.ownDone.Load()
		if done >= e.ownIssued.Load() {
			select {
			case <-e.wakeCompleter:
			case <-e.stop:
				return
			case <-e.dead:
				return
			}
			last = time.Now()
			continue
		}
		e.ownMu.Lock()
		d, err := e.own.Completed()
		e.ownMu.Unlock()
		if err != nil {
			e.fail(fmt.Errorf("%s: the device's own engine: %w", e.describe(), err), false)
			return
		}
		if d > done {
			if e.prof.On() && d >= e.ownIssued.Load() {
				e.prof.SinceTick(profOwnDone, e.ownTick.Load())
			}
			e.advanceOwnDone(d)
			e.progress.Notify()
			last = time.Now()
			continue
		}
		if time.Since(last) > e.timeout {
			e.fail(fmt.Errorf("%s: the device's own engine did not finish staging within %v (ticket %d, completed %d): %w",
				e.describe(), e.timeout, e.ownIssued.Load(), d, hal.ErrTimeout), false)
			return
		}
		select {
		case <-e.stop:
			return
		default:
		}
		backoff(last)
	}
}

// retire advances srcDone over the requests whose tickets are complete.
func (e *Engine) retire(done uint64) {
	e.retMu.Lock()
	moved := false
	for e.retCount > 0 && e.ret[e.retHead].ticket <= done && (e.ret[e.retHead].src == nil || e.ret[e.retHead].src.pending.Load() <= 0) {
		e.srcDone.Store(e.ret[e.retHead].req)
		e.retHead = (e.retHead + 1) % ringSize
		e.retCount--
		moved = true
	}
	e.retMu.Unlock()
	if moved {
		e.progress.Notify()
	}
}

// sender writes a connection's frames in order.
func (c *sendConn) sender() {
	e := c.e
	defer e.wg.Done()
	hdr := make([]byte, headerSize)
	var vec [2][]byte // a frame's write vector, reused
	hooks := e.nd.opts.hooks
	for {
		var of outFrame
		select {
		case of = <-c.q:
		case <-e.stop:
			return
		case <-e.dead:
			return
		}
		staged := func() bool { return e.ownDone.Load() >= of.ticket }
		if !spinUntil(staged) {
			err := e.await("staging a chunk", staged)
			if err != nil {
				if !errors.Is(err, errStopped) {
					e.fail(err, false)
				}
				return
			}
		}
		wstart := e.prof.SinceTick(profOwn, of.queued)
		if hooks != nil && hooks.beforeSend != nil {
			hooks.beforeSend(c.index, of.f.seq)
		}
		encodeHeader(hdr, of.f)
		bufs := append(vec[:0], hdr)
		switch {
		case of.payload != nil:
			bufs = append(bufs, of.payload)
		case of.slot >= 0:
			off := of.slot * e.chunk
			bufs = append(bufs, e.staging.Host()[off:off+int(of.f.b)])
		}
		ts := stageprof.TraceStart()
		if err := writeBuffers(c.conn, bufs, time.Now().Add(e.timeout)); err != nil {
			e.fail(c.lost(err, fmt.Sprintf("writing %v frame %d", of.f.kind, of.f.seq)), true)
			return
		}
		stageprof.Trace(stageprof.EvWrite, e.nd.cfg.Rank, ts, e.id, of.f.seq, uint64(of.f.kind)|uint64(e.peer)<<8)
		if e.prof.On() {
			e.prof.SinceTick(profWrite, wstart)
			e.prof.SinceTick(profTotal, of.issued)
		}
		if of.slot >= 0 {
			e.slots <- of.slot
		}
		if of.src != nil {
			of.src.written(1)
			e.retire(e.ownDone.Load())
		}
		e.written.Add(1)
		e.progress.Notify()
	}
}

// lost is the error of a connection that broke.
func (c *sendConn) lost(err error, where string) error {
	e := c.e
	if err := e.st.Err(); err != nil {
		return err
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%s: connection %d: no progress within %v %s (peer lost?): %w", e.describe(), c.index, e.timeout, where, hal.ErrTimeout)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: connection %d closed by the peer %s (peer lost): %w", e.describe(), c.index, where, hal.ErrRemote)
	}
	return fmt.Errorf("%s: connection %d lost %s: %v: %w", e.describe(), c.index, where, err, hal.ErrRemote)
}

// reader takes the receiver's replies.
func (c *sendConn) reader() {
	e := c.e
	defer e.wg.Done()
	for {
		k, reason, err := readReply(c.conn)
		if err != nil {
			select {
			case <-e.stop:
				return
			default:
			}
			if c.acked.Load() || e.remoteClosed.Load() {
				return
			}
			if errors.Is(err, errMagic) || errors.Is(err, errMalformed) {
				e.fail(fmt.Errorf("%s: connection %d: bad reply: %v: %w", e.describe(), c.index, err, hal.ErrRemote), true)
				return
			}
			e.fail(c.lost(err, "while waiting for replies"), true)
			return
		}
		switch k {
		case replyReject:
			e.fail(fmt.Errorf("%s: connection %d: the receiver refused: %s: %w", e.describe(), c.index, reason, hal.ErrRemote), true)
			return
		case replyByeAck:
			c.acked.Store(true)
			e.progress.Notify()
		case replyClosing:
			e.remoteClosed.Store(true)
			if e.pending() {
				e.fail(fmt.Errorf("%s: rank %d closed its socket transport with requests of this engine in flight: %w", e.describe(), e.peer, hal.ErrRemote), true)
			}
			e.progress.Notify()
			return
		default:
			e.fail(fmt.Errorf("%s: connection %d: unexpected %d reply: %w", e.describe(), c.index, k, hal.ErrRemote), true)
			return
		}
	}
}

// pending reports whether requests are not yet written to the network.
func (e *Engine) pending() bool {
	e.mu.Lock()
	h := e.head
	e.mu.Unlock()
	return e.srcDone.Load() < h || e.written.Load() < e.queued.Load()
}

// Close waits until every queued request is written (at most the timeout
// without progress), says goodbye on every connection and waits for the
// receiver's acknowledgement (every frame applied or queued on its
// device), then closes the connections and releases staging. It returns
// the engine's failure, naming the peer, if it had one.
func (e *Engine) Close() error { return e.st.Close(e.describe, e.shutdown) }

// closeQuiet closes for NetDevice.Close: a second close is no error, and
// a failure already returned by a call is not repeated.
func (e *Engine) closeQuiet() error { return e.st.CloseQuiet(e.shutdown) }

func (e *Engine) shutdown() error {
	e.mu.Lock()
	e.closed = true
	h := e.head
	e.mu.Unlock()
	err := e.Err()
	if err == nil && e.nd.fails.Count() > 0 {
		// The peer is known lost (a receiver saw it go, an engine to it
		// timed out closing, or the communicator found it stopped):
		// nothing it would acknowledge is worth waiting for.
		if perr := e.nd.PeerErr(e.peer); perr != nil {
			err = fmt.Errorf("%s: rank %d failed: %w", e.describe(), e.peer, perr)
		}
	}
	if err == nil {
		err = e.await("close: draining the queue", func() bool {
			return e.srcDone.Load() >= h && e.written.Load() >= e.queued.Load() || e.remoteClosed.Load()
		})
	}
	if err == nil && !e.remoteClosed.Load() {
		next := e.nextSeq.Load()
		n := uint64(len(e.conns))
		for _, c := range e.conns {
			seq := next + (uint64(c.index)+n-next%n)%n
			e.queued.Add(1)
			select {
			case c.q <- outFrame{f: frame{kind: frameBye, seq: seq}, slot: -1}:
			case <-e.dead:
			}
		}
		for _, c := range e.conns {
			if err = e.await("close: waiting for the receiver's goodbye", func() bool { return c.acked.Load() || e.remoteClosed.Load() }); err != nil {
				break
			}
		}
	}
	if err == nil {
		err = e.Err()
	}
	if err != nil && e.Err() == nil {
		// A peer that made no progress for the timeout while this
		// engine closed is lost for every engine to it: recording it on
		// the NetDevice lets the others close at once instead of each
		// waiting the timeout again.
		e.fail(err, errors.Is(err, hal.ErrTimeout))
	}
	close(e.stop)
	for _, c := range e.conns {
		c.conn.Close()
	}
	e.wg.Wait()
	// Puts from host sources that a failure left unwritten hold their
	// registrations no longer.
	e.hostMu.Lock()
	for _, h := range e.hostSrcs {
		h.written(h.pending.Load())
	}
	e.hostSrcs = nil
	e.hostMu.Unlock()
	e.prof.Log(e.log)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	if cerr := e.own.Close(); cerr != nil && err == nil {
		errs = append(errs, fmt.Errorf("%s: close the device's own engine: %w", e.describe(), cerr))
	}
	if ferr := e.staging.Free(); ferr != nil {
		errs = append(errs, fmt.Errorf("%s: free staging: %w", e.describe(), ferr))
	}
	e.nd.mu.Lock()
	delete(e.nd.engines, e)
	e.nd.mu.Unlock()
	return errors.Join(errs...)
}

// The inline path. A small message pays every hand-off between the
// engine's goroutines: the stager's wake-up, the completer's, the
// sender's (each a futex wake and a thread switch, 5–20 µs on a virtual
// machine). When the engine is idle — the stager has staged every
// request and every frame is written — the goroutine that issues a
// request (the proxy's) runs it itself: a put of at most inlineMax bytes
// is copied to a staging slot on the own engine, polled to completion and
// written to its connection; a signal waits for the own engine's earlier
// work (a Copy before it) and is written; a copy is queued on the own
// engine and left to the completer. Nothing is reordered: the connection
// of the frame has nothing queued or being written, the own engine runs
// in order, and frames keep their sequence numbers. Larger puts, and
// requests that find the engine busy, take the ring, whose pipeline
// overlaps staging with sending.

// inlineMax is the largest put the issuing goroutine stages and sends
// itself (a 64 KiB device-to-host copy takes a few microseconds).
const inlineMax = 64 << 10

// inlineable reports, under e.mu, whether request r, number h+1, can run
// inline: the engine is idle and r is a signal, a copy or a put of at
// most inlineMax bytes (and of one chunk).
func (e *Engine) inlineable(r request, h uint64) bool {
	if e.taken != h || e.staged.Load() != h || e.written.Load() != e.queued.Load() {
		return false
	}
	switch r.kind {
	case reqPut:
		return r.n > 0 && r.n <= min(inlineMax, uint64(e.chunk))
	case reqSignal, reqCopy:
		return true
	}
	return false
}

// issueInline runs request number idx (see inlineable) on the calling
// goroutine.
func (e *Engine) issueInline(r request, idx uint64) error {
	defer e.staged.Store(idx)
	e.inlined.Add(1)
	switch r.kind {
	case reqCopy:
		t, err := e.ownOp(func(own hal.Engine) error {
			if r.n == 0 {
				return nil
			}
			return own.Copy(r.dst, r.src, int64(r.n))
		})
		if err != nil {
			return err
		}
		e.retireLater(idx, t)
		e.prof.SinceTick(profInline, r.t)
		return nil
	case reqSignal:
		t, err := e.ownInline(nil)
		if err != nil {
			return err
		}
		if err := e.awaitOwn(t, "the copies before a signal"); err != nil {
			return err
		}
		if e.held != nil {
			// The put before it goes with it, as one frame.
			if err := e.sendHeld(&r); err != nil {
				return err
			}
			e.retireLater(idx, t)
			break
		}
		seq := e.nextSeq.Add(1) - 1
		if err := e.writeInline(frame{kind: frameSignal, seq: seq, a: r.dst, b: r.src, c: r.n}, nil); err != nil {
			return err
		}
		e.retireLater(idx, t)
	case reqPut:
		if host, hold := e.nd.reg.LocalHost(r.src, r.n); host != nil {
			// The source is host memory (a plan's scratch in host
			// windows, where the kernel staged it): the frame leaves
			// from it once the own engine's earlier copies, which may
			// write it, are done. No device copy, no slot. In a batch
			// it waits for the next request: a signal goes with it.
			t := e.ownIssued.Load()
			if err := e.awaitOwn(t, "the copies before a put"); err != nil {
				hold.Release()
				return err
			}
			e.fromHost.Add(1)
			e.heldBuf = heldPut{r: r, idx: idx, t: t, payload: host, hold: hold}
			e.held = &e.heldBuf
			if !e.batch {
				return e.sendHeld(nil)
			}
			break
		}
		slot, err := e.takeSlot() // free: every frame is written
		if err != nil {
			return err
		}
		dst := e.staging.Addr() + uint64(slot*e.chunk)
		t, err := e.ownInline(func(own hal.Engine) error { return own.Copy(dst, r.src, int64(r.n)) })
		if err == nil {
			err = e.awaitOwn(t, "staging a chunk")
		}
		if err != nil {
			e.slots <- slot
			return err
		}
		seq := e.nextSeq.Add(1) - 1
		off := slot * e.chunk
		err = e.writeInline(frame{kind: framePut, seq: seq, a: r.dst, b: r.n}, e.staging.Host()[off:off+int(r.n)])
		e.slots <- slot
		if err != nil {
			return err
		}
		e.retireLater(idx, t)
	}
	e.prof.SinceTick(profInline, r.t)
	return nil
}

// BeginBatch starts a pass of the proxy (hal.EngineBatcher): until
// EndBatch, an inline put from a host-visible source is held until the
// next request, and sent with it as one frame when that is a signal (one
// write instead of two: on loopback each is 5–6 µs).
func (e *Engine) BeginBatch() { e.batch = true }

// Holding reports whether a put is held for the request after it.
func (e *Engine) Holding() bool { return e.held != nil }

// EndBatch ends the pass and sends a put still held.
func (e *Engine) EndBatch() error {
	e.batch = false
	if e.held == nil {
		return nil
	}
	if err := e.sendHeld(nil); err != nil {
		return e.report(err)
	}
	return nil
}

// sendHeld writes the held put: alone as a put frame, or with the signal
// sig as one put-with-signal frame, whose request the caller retires.
// The held put is retired either way.
func (e *Engine) sendHeld(sig *request) error {
	h := *e.held
	e.held, e.heldBuf = nil, heldPut{}
	defer h.hold.Release()
	f := frame{kind: framePut, seq: e.nextSeq.Add(1) - 1, a: h.r.dst, b: h.r.n}
	var trailer []byte
	if sig != nil {
		f.kind, f.c = framePutSignal, sig.n
		trailer = e.inlineTrailer[:]
		binary.BigEndian.PutUint64(trailer, sig.dst)
		binary.BigEndian.PutUint64(trailer[8:], sig.src)
		e.merged.Add(1)
	}
	err := e.writeInline(f, h.payload, trailer)
	if err != nil {
		if !errors.Is(err, errStopped) {
			e.fail(err, false)
		}
		return err
	}
	e.retireLater(h.idx, h.t)
	e.prof.SinceTick(profInline, h.r.t)
	return nil
}

// ownInline runs op (nil: none) on the own engine and returns a ticket
// covering it and everything before it. It does not wake the completer:
// the inline path's caller polls the own engine itself (awaitOwn); ownOp
// does.
func (e *Engine) ownInline(op func(hal.Engine) error) (uint64, error) {
	e.ownMu.Lock()
	var err error
	if op != nil {
		err = op(e.own)
	}
	var t uint64
	if err == nil {
		t, err = e.own.Mark()
	}
	e.ownMu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("%s: the device's own engine: %w", e.describe(), err)
	}
	if t > e.ownIssued.Load() {
		if e.prof.On() {
			e.ownTick.Store(e.prof.Tick())
		}
		e.ownIssued.Store(t)
	}
	return t, nil
}

// awaitOwn polls the own engine until ticket t completes (at most the
// timeout without progress).
func (e *Engine) awaitOwn(t uint64, what string) error {
	start := e.prof.Tick()
	last := time.Now()
	for i := 0; ; i++ {
		if e.ownDone.Load() >= t {
			break
		}
		e.ownMu.Lock()
		d, err := e.own.Completed()
		e.ownMu.Unlock()
		if err != nil {
			return fmt.Errorf("%s: the device's own engine: %w", e.describe(), err)
		}
		if d >= t {
			e.advanceOwnDone(d)
			break
		}
		if i%16 == 15 && time.Since(last) > e.timeout {
			return fmt.Errorf("%s: the device's own engine did not finish %s within %v (ticket %d, completed %d): %w",
				e.describe(), what, e.timeout, t, d, hal.ErrTimeout)
		}
		runtime.Gosched()
	}
	e.prof.SinceTick(profInlineOwn, start)
	return nil
}

// advanceOwnDone raises ownDone to d (the completer and the inline path
// both publish).
func (e *Engine) advanceOwnDone(d uint64) {
	for {
		cur := e.ownDone.Load()
		if d <= cur || e.ownDone.CompareAndSwap(cur, d) {
			return
		}
	}
}

// retireLater records that request idx is complete at the source once
// own-engine ticket t is, and lets the completer publish it (at once when
// t is already complete).
func (e *Engine) retireLater(idx, t uint64) {
	e.retMu.Lock()
	e.ret[(e.retHead+e.retCount)%ringSize] = retireEntry{req: idx, ticket: t}
	e.retCount++
	e.retMu.Unlock()
	if done := e.ownDone.Load(); done >= t {
		e.retire(done)
		return
	}
	select {
	case e.wakeCompleter <- struct{}{}:
	default:
	}
}

// writeInline writes frame f (and a put's payload) on its connection from
// the issuing goroutine; the connection's sender has nothing queued.
func (e *Engine) writeInline(f frame, payload []byte, trailer ...[]byte) error {
	c := e.conns[f.seq%uint64(len(e.conns))]
	e.queued.Add(1)
	if hooks := e.nd.opts.hooks; hooks != nil && hooks.beforeSend != nil {
		hooks.beforeSend(c.index, f.seq)
	}
	encodeHeader(e.inlineHdr[:], f)
	bufs := append(e.inlineBufs[:0], e.inlineHdr[:])
	if len(payload) > 0 {
		bufs = append(bufs, payload)
	}
	for _, t := range trailer {
		if len(t) > 0 {
			bufs = append(bufs, t)
		}
	}
	start := e.prof.Tick()
	ts := stageprof.TraceStart()
	if err := writeBuffers(c.conn, bufs, time.Now().Add(e.timeout)); err != nil {
		err = c.lost(err, fmt.Sprintf("writing %v frame %d", f.kind, f.seq))
		e.fail(err, true)
		return err
	}
	e.prof.SinceTick(profWrite, start)
	stageprof.Trace(stageprof.EvWrite, e.nd.cfg.Rank, ts, e.id, f.seq, uint64(f.kind)|uint64(e.peer)<<8)
	e.written.Add(1)
	e.progress.Notify()
	return nil
}
