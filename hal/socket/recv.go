package socket

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/auth"
	"github.com/weftccl/weft/internal/stageprof"
)

// The receiving side. Every connection that passes the handshake belongs
// to the session of its engine (source rank, engine id). The session
// applies the engine's frames in sequence order whatever connection they
// came on: a reader holding frame s waits until frames 0 … s−1 have been
// applied. Applying a put chunk queues a copy from the connection's
// staging memory to the destination on the session's own device engine;
// applying a signal queues the signal on the same engine, which executes
// in order: the semaphore is stored after the data of every earlier put.
// Into a host-visible window (netcore.Registry.ResolveHost) an in-order
// put is read straight from the socket and a signal is an atomic add by
// the CPU once the engine's earlier copies are done (putDirect, awaitOwn).

// Profile stages of a session (WEFT_PROXY_PROFILE).
const (
	profRead      = iota // a frame's header and payload read, from its first byte buffered
	profApplyWait        // waiting for the frames before it
	profApply            // the own-engine calls that apply it
	profFree             // waiting for a staging half to come free
)

var recvStages = []string{"frame read", "apply: wait for earlier frames", "apply: own-engine calls", "staging half free"}

type sessionKey struct {
	src    int
	engine uint64
}

type session struct {
	nd    *NetDevice
	key   sessionKey
	conns int
	chunk int
	own   hal.Engine // the device's own engine; calls under mu
	prof  *stageprof.Set

	mu       sync.Mutex
	next     uint64 // next sequence number to apply
	members  []*recvConn
	joined   int
	ended    int
	failed   error
	stopped  bool // the NetDevice closes
	finished bool
	progress notifier

	waited        atomic.Uint64 // frames that arrived before an earlier frame (statistics, tests)
	signalsWaited atomic.Uint64 // of which signals
	direct        atomic.Uint64 // puts read straight into a host-visible window (statistics, tests)
	// ownLast is the engine ticket of the last staged put's copy (under
	// mu): a put read into a host-visible window, or a signal stored by
	// the CPU, waits for it.
	ownLast uint64
}

// recvConn is one connection of a session.
type recvConn struct {
	s      *session
	index  int
	conn   net.Conn
	remote string
	br     *bufio.Reader
	stage  hal.Buffer // two halves of chunk bytes
	busy   [2]uint64  // own-engine ticket of the last copy out of each half
	wmu    sync.Mutex // replies
}

// serve runs one accepted connection: authentication (when the job has a
// secret), the transport's hello, then frames. Until the hello is checked
// the connection holds a slot of nd.gate, and at most helloSize bytes are
// read from it.
func (nd *NetDevice) serve(raw net.Conn) {
	defer nd.wg.Done()
	defer nd.forgetConn(raw)
	left := sync.OnceFunc(nd.gate.Leave)
	defer left()
	c := raw
	remote := c.RemoteAddr().String()
	if !nd.secret.IsZero() {
		ac, err := auth.Server(c, nd.authConfig(nd.cfg.Rank))
		if err != nil {
			if !nd.closing.Load() {
				nd.refuse(fmt.Errorf("socket: rank %d: %w", nd.cfg.Rank, err))
			}
			c.Close()
			return
		}
		c = ac
	}
	c.SetDeadline(time.Now().Add(nd.opts.Timeout))
	var hb [helloSize]byte
	if n, err := io.ReadFull(c, hb[:]); err != nil {
		if !nd.closing.Load() {
			nd.refuse(fmt.Errorf("socket: rank %d: connection from %s: handshake cut short after %d of %d bytes: %v: %w", nd.cfg.Rank, remote, n, helloSize, err, hal.ErrRemote))
		}
		c.Close()
		return
	}
	h, err := decodeHello(hb[:])
	if err == nil {
		err = nd.checkHello(h)
	}
	var rc *recvConn
	if err == nil {
		// Frames come in through the descriptor itself, polled for
		// Options.Spin between them (rawconn_linux.go).
		c = detach(c, nd.opts.Spin, !nd.opts.NoPeek)
		rc, err = nd.join(h, c, remote)
	}
	if err != nil {
		if !nd.closing.Load() {
			nd.refuse(fmt.Errorf("socket: rank %d: refused connection from %s: %v: %w", nd.cfg.Rank, remote, err, hal.ErrRemote))
		}
		c.Write(encodeReply(replyReject, fmt.Sprintf("rank %d refused the connection: %v", nd.cfg.Rank, err)))
		c.Close()
		return
	}
	left()
	if err := rc.reply(replyAccept, ""); err != nil {
		rc.s.fail(rc, rc.lost(err, "accept reply"))
		rc.end()
		return
	}
	c.SetDeadline(time.Time{})
	rc.run()
}

func (nd *NetDevice) checkHello(h hello) error {
	switch {
	// The job hash and the nonce are the credentials of an unauthenticated
	// job: neither the expected nor the received value is ever printed.
	case h.job != nd.job:
		return fmt.Errorf("%w: handshake of another job", auth.ErrAuth)
	case h.dst != nd.cfg.Rank:
		return fmt.Errorf("handshake for rank %d, this is rank %d", h.dst, nd.cfg.Rank)
	case h.nonce != nd.nonce:
		return fmt.Errorf("%w: handshake for another incarnation of rank %d", auth.ErrAuth, h.dst)
	case h.src < 0 || h.src >= nd.cfg.NRanks || h.src == nd.cfg.Rank:
		return fmt.Errorf("handshake from rank %d, not a peer in a job of %d ranks", h.src, nd.cfg.NRanks)
	}
	return nil
}

// join adds a connection to its engine's session, creating the session
// (and its own engine) on the first one.
func (nd *NetDevice) join(h hello, c net.Conn, remote string) (*recvConn, error) {
	stage, err := nd.dev.AllocHost(2 * int64(h.chunk))
	if err != nil {
		return nil, fmt.Errorf("staging memory for rank %d: %v", h.src, err)
	}
	if len(stage.Host()) < 2*h.chunk {
		stage.Free()
		return nil, fmt.Errorf("the device's host allocations are not host-accessible (Host() is nil)")
	}
	// A small buffer: frame headers and small frames come through it in one
	// read, and a payload read of 4 KiB or more with the buffer empty goes
	// straight into place (bufio reads into the caller's slice), where a
	// 64 KiB buffer copied up to 64 KiB of every large frame twice. One
	// connection's 64 MiB put on 2×H100's host: 2.48–3.01 → 3.10–3.34 GB/s
	// (docs/bench/2026-11-27-h100x2, call 13).
	rc := &recvConn{index: h.index, conn: c, remote: remote, br: bufio.NewReaderSize(c, 4<<10), stage: stage}
	key := sessionKey{h.src, h.engine}
	nd.mu.Lock()
	defer nd.mu.Unlock()
	fail := func(err error) (*recvConn, error) {
		stage.Free()
		return nil, err
	}
	if nd.closing.Load() {
		return fail(fmt.Errorf("rank %d is closing its socket transport", nd.cfg.Rank))
	}
	s := nd.sessions[key]
	if s == nil {
		own, err := nd.pm.NewEngine(nd.dev.Endpoint())
		if err != nil {
			return fail(fmt.Errorf("own engine of the device: %v", err))
		}
		s = &session{nd: nd, key: key, conns: h.conns, chunk: h.chunk, own: own, members: make([]*recvConn, h.conns)}
		s.prof = stageprof.New(fmt.Sprintf("socket receiver of rank %d from rank %d", nd.cfg.Rank, h.src), recvStages...)
		nd.sessions[key] = s
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.failed != nil || s.stopped:
		return fail(fmt.Errorf("engine %#x of rank %d has failed: %v", h.engine, h.src, s.failed))
	case s.conns != h.conns || s.chunk != h.chunk:
		return fail(fmt.Errorf("connection %d of engine %#x announces %d connections and %d-byte chunks, its first announced %d and %d",
			h.index, h.engine, h.conns, h.chunk, s.conns, s.chunk))
	case s.members[h.index] != nil:
		return fail(fmt.Errorf("connection %d of engine %#x of rank %d is already open", h.index, h.engine, h.src))
	}
	rc.s = s
	s.members[h.index] = rc
	s.joined++
	return rc, nil
}

func (rc *recvConn) reply(k replyKind, reason string) error {
	rc.wmu.Lock()
	defer rc.wmu.Unlock()
	rc.conn.SetWriteDeadline(time.Now().Add(rc.s.nd.opts.Timeout))
	_, err := rc.conn.Write(encodeReply(k, reason))
	return err
}

// describe names the connection in errors.
func (rc *recvConn) describe() string {
	return fmt.Sprintf("socket: rank %d: receiving from rank %d (%s), connection %d", rc.s.nd.cfg.Rank, rc.s.key.src, rc.remote, rc.index)
}

// lost is the error of a connection that broke.
func (rc *recvConn) lost(err error, where string) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%s: no progress within %v %s (peer lost?): %w", rc.describe(), rc.s.nd.opts.Timeout, where, hal.ErrTimeout)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: connection closed %s (peer lost): %w", rc.describe(), where, hal.ErrRemote)
	}
	return fmt.Errorf("%s: connection lost %s: %v: %w", rc.describe(), where, err, hal.ErrRemote)
}

// bad is the error of a malformed frame.
func (rc *recvConn) bad(seq uint64, format string, args ...any) error {
	return fmt.Errorf("%s: frame %d rejected: %s: %w", rc.describe(), seq, fmt.Sprintf(format, args...), hal.ErrRemote)
}

// run reads frames until a bye, a failure or the NetDevice's close.
func (rc *recvConn) run() {
	defer rc.end()
	s, nd := rc.s, rc.s.nd
	expect := uint64(rc.index)
	var hdr [headerSize]byte
	for k := 0; ; k++ {
		if rc.br.Buffered() == 0 {
			rc.conn.SetReadDeadline(time.Time{}) // idle between frames is fine
			if _, err := rc.br.Peek(1); err != nil {
				if errors.Is(err, io.EOF) {
					s.fail(rc, fmt.Errorf("%s: connection closed without goodbye after %d frames (peer lost): %w", rc.describe(), k, hal.ErrRemote))
				} else {
					s.fail(rc, rc.lost(err, "between frames"))
				}
				return
			}
		}
		t0 := s.prof.Tick()
		ts := stageprof.TraceStart()
		rc.conn.SetReadDeadline(time.Now().Add(nd.opts.Timeout))
		if n, err := io.ReadFull(rc.br, hdr[:]); err != nil {
			s.fail(rc, rc.lost(err, fmt.Sprintf("mid-frame (got %d of %d header bytes)", n, headerSize)))
			return
		}
		f, err := decodeHeader(hdr[:], s.chunk)
		if err != nil {
			s.fail(rc, fmt.Errorf("%s: frame rejected: %v: %w", rc.describe(), err, hal.ErrRemote))
			return
		}
		if f.seq != expect {
			s.fail(rc, rc.bad(f.seq, "sequence gap: connection %d of %d expected frame %d next", rc.index, s.conns, expect))
			return
		}
		switch f.kind {
		case frameBye:
			rc.reply(replyByeAck, "")
			return
		case framePut:
			if err := rc.receivePut(f, k, t0, true); err != nil {
				s.fail(rc, err)
				return
			}
		case frameSignal:
			s.prof.SinceTick(profRead, t0)
			if err := rc.applySignal(f.seq, f.a, f.b, f.c); err != nil {
				s.fail(rc, err)
				return
			}
		case framePutSignal:
			// The put, applied without moving the session on, then its
			// signal, which does: no other frame comes between them.
			if err := rc.receivePut(f, k, t0, false); err != nil {
				s.fail(rc, err)
				return
			}
			var tr [trailerSize]byte
			if n, err := io.ReadFull(rc.br, tr[:]); err != nil {
				s.fail(rc, rc.lost(err, fmt.Sprintf("mid-frame (got %d of %d trailer bytes of frame %d)", n, trailerSize, f.seq)))
				return
			}
			if err := rc.applySignal(f.seq, binary.BigEndian.Uint64(tr[:]), binary.BigEndian.Uint64(tr[8:]), f.c); err != nil {
				s.fail(rc, err)
				return
			}
		}
		stageprof.Trace(stageprof.EvRead, nd.cfg.Rank, ts, s.key.engine, f.seq, uint64(f.kind)|uint64(s.key.src)<<8)
		expect += uint64(s.conns)
	}
}

// receivePut applies put frame f (the k-th frame of the connection, first
// byte seen at tick t0): straight into a host-visible window when it is
// next in order (putDirect), else read into a staging half and copied by
// the own engine. advance says whether applying it moves the session to
// the next frame (false: a put-with-signal's put, whose signal follows).
// The error fails the session.
func (rc *recvConn) receivePut(f frame, k int, t0 int64, advance bool) error {
	s, nd := rc.s, rc.s.nd
	dst, host, hold, err := nd.reg.ResolveHost(f.a, f.b, 1)
	if err != nil {
		return rc.bad(f.seq, "put of %d bytes: %v", f.b, err)
	}
	if host != nil && !nd.opts.stagedOnly {
		direct, err := s.putDirect(rc, f, host, advance)
		hold.Release()
		if err != nil {
			return err
		} else if direct {
			s.prof.SinceTick(profRead, t0)
			return nil
		}
	} else {
		// The staged path's copy is the engine's: freeing host-mapped
		// memory synchronises with the device first.
		hold.Release()
	}
	half := k % 2
	tf := s.prof.Tick()
	if err := rc.waitFree(half); err != nil {
		return err
	}
	s.prof.SinceTick(profFree, tf)
	buf := rc.stage.Host()[half*s.chunk : half*s.chunk+int(f.b)]
	if n, err := io.ReadFull(rc.br, buf); err != nil {
		return rc.lost(err, fmt.Sprintf("mid-frame (got %d of %d payload bytes of frame %d)", n, f.b, f.seq))
	}
	s.prof.SinceTick(profRead, t0)
	src := rc.stage.Addr() + uint64(half*s.chunk)
	return s.apply(rc, f.seq, false, advance, func(own hal.Engine) error {
		if err := own.Copy(dst, src, int64(f.b)); err != nil {
			return err
		}
		t, err := own.Mark()
		rc.busy[half], s.ownLast = t, t
		return err
	})
}

// applySignal applies the signal of frame seq: add one to the semaphore
// at sem after storing count at cnt (0: none), once the frames before it
// and their copies are applied; with the CPU into a host-visible window,
// else on the own engine. The error fails the session.
func (rc *recvConn) applySignal(seq, sem, cnt, count uint64) error {
	s, nd := rc.s, rc.s.nd
	w, err := nd.reg.ResolveSignal(sem, cnt)
	if err != nil {
		return rc.bad(seq, "signal: %v", err)
	}
	defer w.Release()
	if w.SemHost != nil && !nd.opts.stagedOnly {
		// A word in a host-visible window is always stored by the CPU (an
		// atomic add), never by the engine, which may keep its own count
		// of the word: one writer per word.
		return s.apply(rc, seq, true, true, func(own hal.Engine) error {
			if err := rc.awaitOwn(true, "the copies before a signal", func() uint64 { return s.ownLast }); err != nil {
				return err
			}
			if w.CntHost != nil {
				atomic.StoreUint64((*uint64)(unsafe.Pointer(&w.CntHost[0])), count)
			}
			atomic.AddUint64((*uint64)(unsafe.Pointer(&w.SemHost[0])), 1)
			return nil
		})
	}
	return s.apply(rc, seq, true, true, func(own hal.Engine) error { return own.Signal(w.Sem, w.Cnt, count) })
}

// apply runs fn on the session's own engine once every frame before seq
// has been applied, then (advance) counts frame seq applied.
func (s *session) apply(rc *recvConn, seq uint64, signal, advance bool, fn func(hal.Engine) error) error {
	s.mu.Lock()
	if s.next != seq {
		s.waited.Add(1)
		if signal {
			s.signalsWaited.Add(1)
		}
	}
	var timer *time.Timer
	t0 := s.prof.Tick()
	for s.next != seq {
		if s.failed != nil || s.stopped {
			s.mu.Unlock()
			return errStopped
		}
		if timer == nil {
			timer = time.NewTimer(s.nd.opts.Timeout)
			defer timer.Stop()
		}
		ch := s.progress.Wait()
		next := s.next
		s.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			return fmt.Errorf("%s: frame %d waited %v for frame %d, which no connection delivered (peer lost?): %w",
				rc.describe(), seq, s.nd.opts.Timeout, next, hal.ErrTimeout)
		}
		s.mu.Lock()
	}
	t1 := s.prof.SinceTick(profApplyWait, t0)
	err := fn(s.own)
	s.prof.SinceTick(profApply, t1)
	if advance {
		s.next++
	}
	s.mu.Unlock()
	s.progress.Notify()
	if err != nil {
		return fmt.Errorf("%s: applying frame %d on the device's engine: %w", rc.describe(), seq, err)
	}
	return nil
}

// putDirect applies put frame f by reading its payload straight into host,
// the host view of its destination window (hal/host memory, host-mapped
// device memory), instead of into staging and then through the device's
// engine: no engine call and no staging half to wait for. It does so only
// when every earlier frame is applied and the engine has finished their
// copies, so the payload cannot land before, or be overwritten by, an
// earlier frame's data; otherwise it returns false and the frame takes the
// staged path. Frame f is applied when it returns true.
func (s *session) putDirect(rc *recvConn, f frame, host []byte, advance bool) (bool, error) {
	s.mu.Lock()
	ready := s.next == f.seq && s.failed == nil && !s.stopped
	if ready && s.ownLast != 0 {
		done, err := s.own.Completed()
		if err != nil {
			s.mu.Unlock()
			return false, fmt.Errorf("%s: the device's engine failed: %w", rc.describe(), err)
		}
		ready = done >= s.ownLast
	}
	s.mu.Unlock()
	if !ready {
		return false, nil
	}
	// No other frame is applied before this one (s.next == f.seq), so
	// nothing else writes the window meanwhile.
	if n, err := io.ReadFull(rc.br, host); err != nil {
		return false, rc.lost(err, fmt.Sprintf("mid-frame (got %d of %d payload bytes of frame %d)", n, f.b, f.seq))
	}
	if advance {
		s.mu.Lock()
		s.next++
		s.mu.Unlock()
	}
	s.direct.Add(1)
	s.progress.Notify()
	return true, nil
}

// errStopped ends a reader whose session failed or stopped elsewhere.
var errStopped = errors.New("session stopped")

// waitFree waits until the copy out of staging half h has finished.
func (rc *recvConn) waitFree(h int) error {
	return rc.awaitOwn(false, "copying a chunk out of staging", func() uint64 { return rc.busy[h] })
}

// awaitOwn waits until the device's engine has completed the ticket that
// ticket gives (read at every poll, under s.mu), at most the timeout;
// what names the copies in the timeout's error. held says the caller
// holds s.mu (apply: the engine's calls are made under it); otherwise
// every poll takes it, and the wait ends with errStopped once the session
// has failed or stopped.
func (rc *recvConn) awaitOwn(held bool, what string, ticket func() uint64) error {
	s := rc.s
	start := time.Now()
	for {
		if !held {
			s.mu.Lock()
		}
		t := ticket()
		done, err := s.own.Completed()
		stopped := !held && (s.failed != nil || s.stopped)
		if !held {
			s.mu.Unlock()
		}
		switch {
		case err != nil:
			return fmt.Errorf("%s: the device's engine failed: %w", rc.describe(), err)
		case done >= t:
			return nil
		case stopped:
			return errStopped
		case time.Since(start) > s.nd.opts.Timeout:
			return fmt.Errorf("%s: the device's engine did not finish %s within %v (ticket %d, completed %d): %w",
				rc.describe(), what, s.nd.opts.Timeout, t, done, hal.ErrTimeout)
		}
		backoff(start)
	}
}

// fail records the session's first failure, tells the engine why on every
// connection, and closes them. Failures of a stopping NetDevice, and the
// errStopped of readers that follow a failure, are not recorded.
func (s *session) fail(rc *recvConn, err error) {
	s.mu.Lock()
	first := s.failed == nil && !s.stopped && !errors.Is(err, errStopped) && !s.nd.closing.Load()
	if first {
		s.failed = err
	}
	members := append([]*recvConn(nil), s.members...)
	s.mu.Unlock()
	s.progress.Notify()
	if !first {
		rc.conn.Close()
		return
	}
	s.nd.failPeer(s.key.src, err)
	for _, m := range members {
		if m != nil {
			m.reply(replyReject, err.Error())
			m.conn.Close()
		}
	}
}

// shutdown tells the engine that nothing more will be applied and closes
// the connections (the NetDevice closes).
func (s *session) shutdown(k replyKind, reason string) {
	s.mu.Lock()
	s.stopped = true
	members := append([]*recvConn(nil), s.members...)
	s.mu.Unlock()
	s.progress.Notify()
	for _, m := range members {
		if m != nil {
			m.reply(k, reason)
			m.conn.Close()
		}
	}
}

// end retires a connection; the last one of a session closes the
// session's own engine (draining its copies) and frees staging memory.
func (rc *recvConn) end() {
	rc.conn.Close()
	s := rc.s
	s.mu.Lock()
	s.ended++
	last := !s.finished && s.ended == s.joined && (s.ended == s.conns || s.failed != nil || s.stopped)
	if last {
		s.finished = true
	}
	members := append([]*recvConn(nil), s.members...)
	s.mu.Unlock()
	if !last {
		return
	}
	nd := s.nd
	nd.mu.Lock()
	if nd.sessions[s.key] == s {
		delete(nd.sessions, s.key)
	}
	nd.mu.Unlock()
	if err := s.own.Close(); err != nil && s.failed == nil {
		nd.log.Warn("socket transport: closing the receiver's device engine", "peer", s.key.src, "err", err)
	}
	s.prof.Log(nd.log)
	for _, m := range members {
		if m != nil {
			m.stage.Free()
		}
	}
}
