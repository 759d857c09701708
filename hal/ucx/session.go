package ucx

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/netcore"
	"github.com/weftccl/weft/internal/auth"
	"github.com/weftccl/weft/internal/stageprof"
)

type sessionKey struct {
	rank   int
	engine uint32
}

// session is a peer engine connected here: its authenticated side
// channel, the token its signals carry, the next sequence number, and the
// device engine that applies them (the only writer of the semaphores that
// the remote engine signals, as hal.Engine requires).
type session struct {
	nd    *NetDevice
	key   sessionKey
	token uint64
	conn  net.Conn

	mu        sync.Mutex // serialises apply and shutdown
	own       hal.Engine
	ownIssued uint64 // ticket of the last request given to own
	nextSeq   uint64
	done      bool

	// ended is closed once shutdown has closed own (it drained).
	ended chan struct{}
}

// accept runs the side channel's listener (netcore.Acceptor).
func (nd *NetDevice) accept() {
	defer nd.wg.Done()
	a := netcore.Acceptor{Name: Name, What: "side-channel connections", LogName: "ucx transport", Rank: nd.cfg.Rank,
		Listener: nd.ln, Gate: nd.gate, Log: nd.log, Closing: nd.closing.Load, Refuse: nd.refuse,
		Mu: &nd.mu, Inbound: nd.inbound, WG: &nd.wg, Serve: nd.serve}
	a.Run()
}

// serve authenticates a side-channel connection, checks its hello, opens
// a session and answers with this worker's address; then it waits for the
// engine's goodbye or the connection's end.
func (nd *NetDevice) serve(raw net.Conn) {
	defer nd.wg.Done()
	defer func() {
		nd.mu.Lock()
		delete(nd.inbound, raw)
		nd.mu.Unlock()
	}()
	c := raw
	left := false
	leave := func() {
		if !left {
			left = true
			nd.gate.Leave()
		}
	}
	defer leave()
	refuse := func(reason string) {
		nd.refuse(fmt.Errorf("ucx: rank %d: side channel from %s refused: %s: %w", nd.cfg.Rank, raw.RemoteAddr(), reason, hal.ErrRemote))
		writeAll(c, encodeReply(false, 0, []byte(reason)), nd.opts.Timeout)
		raw.Close()
	}
	hs := auth.HandshakeTimeout(nd.opts.Timeout)
	if !nd.secret.IsZero() {
		var err error
		if c, err = auth.Server(raw, nd.authConfig(nd.cfg.Rank)); err != nil {
			nd.refuse(fmt.Errorf("ucx: rank %d: side channel from %s: %w", nd.cfg.Rank, raw.RemoteAddr(), err))
			raw.Close()
			return
		}
	}
	buf := make([]byte, helloSize)
	if err := readFull(c, buf, hs); err != nil {
		nd.refuse(fmt.Errorf("ucx: rank %d: side channel from %s: no hello: %v: %w", nd.cfg.Rank, raw.RemoteAddr(), err, hal.ErrRemote))
		raw.Close()
		return
	}
	h, err := decodeHello(buf)
	switch {
	case err != nil:
		refuse(err.Error())
		return
	case h.job != nd.job:
		refuse("hello of another job")
		return
	case h.server != nd.cfg.Rank || h.serverNonce != nd.nonce:
		refuse(fmt.Sprintf("hello for rank %d (nonce %#x), this is rank %d of another incarnation", h.server, h.serverNonce, nd.cfg.Rank))
		return
	case h.client >= nd.cfg.NRanks || h.client == nd.cfg.Rank:
		refuse(fmt.Sprintf("hello from rank %d in a job of %d ranks", h.client, nd.cfg.NRanks))
		return
	}
	s := &session{nd: nd, key: sessionKey{h.client, h.engine}, token: rand.Uint64() | 1, conn: c, ended: make(chan struct{})}
	if s.own, err = nd.pm.NewEngine(nd.dev.Endpoint()); err != nil {
		refuse("this rank's device engine: " + err.Error())
		return
	}
	nd.mu.Lock()
	if nd.closing.Load() || nd.sessions[s.key] != nil {
		dup := nd.sessions[s.key] != nil
		nd.mu.Unlock()
		s.own.Close()
		if dup {
			refuse(fmt.Sprintf("engine %d of rank %d is already connected", h.engine, h.client))
		} else {
			raw.Close()
		}
		return
	}
	nd.sessions[s.key] = s
	nd.mu.Unlock()
	if err := writeAll(c, encodeReply(true, s.token, nd.waddr), nd.opts.Timeout); err != nil {
		s.shutdown(false)
		return
	}
	leave()
	// The session lives until the goodbye, the connection's end or Close.
	word := make([]byte, len(byeWord)+8)
	_, err = io.ReadFull(c, word)
	switch {
	case err == nil && string(word[:len(byeWord)]) == byeWord:
		s.drain(binary.BigEndian.Uint64(word[len(byeWord):]))
		s.shutdown(false)
	case nd.closing.Load():
	default:
		why := "sent a word that is not a goodbye"
		if err != nil {
			why = fmt.Sprintf("its side channel ended without a goodbye (%v)", err)
		}
		nd.failPeer(h.client, fmt.Errorf("ucx: rank %d: peer rank %d is lost: engine %d %s: %w", nd.cfg.Rank, h.client, h.engine, why, hal.ErrRemote))
		s.shutdown(false)
	}
}

// drain waits (up to the timeout) until the session has applied sent
// signals, the number the engine's goodbye announced: they come through
// UCX and may still be in the worker when the goodbye arrives.
func (s *session) drain(sent uint64) {
	nd := s.nd
	deadline := time.Now().Add(nd.opts.Timeout)
	for {
		s.mu.Lock()
		applied, done := s.nextSeq, s.done
		s.mu.Unlock()
		if applied >= sent || done || nd.closing.Load() {
			return
		}
		if time.Now().After(deadline) {
			nd.failPeer(s.key.rank, fmt.Errorf("ucx: rank %d: engine %d of peer rank %d said goodbye after %d signals, %d arrived within %v: %w",
				nd.cfg.Rank, s.key.engine, s.key.rank, sent, applied, nd.opts.Timeout, hal.ErrRemote))
			return
		}
		nd.wake()
		time.Sleep(50 * time.Microsecond)
	}
}

// shutdown ends the session: closing says this NetDevice closes (the
// engine is told so it stops without error). Its device engine drains.
func (s *session) shutdown(closing bool) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return
	}
	s.done = true
	s.mu.Unlock()
	if closing {
		writeAll(s.conn, []byte(closeWord), time.Second)
	}
	s.conn.Close()
	nd := s.nd
	nd.mu.Lock()
	if nd.sessions[s.key] == s {
		delete(nd.sessions, s.key)
	}
	nd.draining[s] = struct{}{}
	nd.mu.Unlock()
	if err := s.own.Close(); err != nil {
		nd.log.Warn("ucx transport: close a session's device engine", "peer", s.key.rank, "engine", s.key.engine, "err", err)
	}
	nd.mu.Lock()
	delete(nd.draining, s)
	nd.mu.Unlock()
	close(s.ended)
}

// quiesce waits until the session's device engine has finished what
// apply gave it so far (staged copies, semaphore and count stores), or
// the session has ended and its device engine drained, at most until
// deadline (then an error wrapping hal.ErrTimeout). An apply under way
// finishes first: it holds s.mu. A device engine that failed runs
// nothing more: quiesce logs its error and returns.
func (s *session) quiesce(deadline time.Time) error {
	nd := s.nd
	s.mu.Lock()
	want, done := s.ownIssued, s.done
	s.mu.Unlock()
	for !done && want > 0 {
		s.mu.Lock()
		if done = s.done; done {
			s.mu.Unlock()
			break
		}
		got, err := s.own.Completed()
		s.mu.Unlock()
		if err != nil {
			nd.log.Warn("ucx transport: a session's device engine failed", "peer", s.key.rank, "engine", s.key.engine, "err", err)
			return nil
		}
		if got >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the device engine applying engine %d of peer rank %d completed ticket %d of %d within %v: %w",
				s.key.engine, s.key.rank, got, want, nd.opts.Timeout, hal.ErrTimeout)
		}
		time.Sleep(20 * time.Microsecond)
	}
	if !done {
		return nil
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-s.ended:
		return nil
	case <-t.C:
		return fmt.Errorf("the device engine of the ended session of engine %d of peer rank %d did not drain within %v: %w",
			s.key.engine, s.key.rank, nd.opts.Timeout, hal.ErrTimeout)
	}
}

// apply checks a received signal against its session and this
// NetDevice's registrations and queues it on the session's device engine:
// a copy of each staged range from the bounce region to device memory,
// then the count and the semaphore. A message of no known session is
// refused (counted, the job undisturbed); a malformed one or one out of
// order fails the sending rank.
func (nd *NetDevice) apply(b []byte, popped time.Time) {
	m, err := decodeSignal(b)
	if err != nil {
		nd.refuse(fmt.Errorf("ucx: rank %d: active message: %v: %w", nd.cfg.Rank, err, hal.ErrRemote))
		return
	}
	defer stageprof.Trace(stageprof.EvRead, nd.cfg.Rank, popped, uint64(m.engine), m.seq, uint64(ucxTraceKind+m.kind)|uint64(m.rank)<<8)
	nd.mu.Lock()
	s := nd.sessions[sessionKey{m.rank, m.engine}]
	nd.mu.Unlock()
	if s == nil && nd.closing.Load() {
		return // the session ended with this NetDevice: nothing more is applied
	}
	if s == nil || s.token != m.token {
		nd.refuse(fmt.Errorf("ucx: rank %d: signal claiming rank %d engine %d: no such authenticated session: %w", nd.cfg.Rank, m.rank, m.engine, hal.ErrRemote))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	fail := func(format string, a ...any) {
		nd.failPeer(m.rank, fmt.Errorf("ucx: rank %d: signal of peer rank %d engine %d: %s: %w", nd.cfg.Rank, m.rank, m.engine, fmt.Sprintf(format, a...), hal.ErrRemote))
	}
	if m.seq != s.nextSeq {
		fail("sequence number %d, want %d (lost or reordered)", m.seq, s.nextSeq)
		return
	}
	s.nextSeq++
	if m.kind == kindPutSignal {
		// The put the message carries, placed first: a staged one's
		// range is among the ranges copied to device memory below.
		t, err := nd.resolve(m.putDst, uint64(len(m.put)), 1)
		switch {
		case err != nil:
			fail("put of %d bytes: %v", len(m.put), err)
			return
		case t.host != nil && !t.staged:
			copy(t.host, m.put)
		case t.staged && t.bounceHost != nil:
			copy(t.bounceHost, m.put)
		default:
			fail("put of %d bytes at %#x: the registration has no host view to place it in", len(m.put), m.putDst)
			return
		}
	}
	for _, r := range m.ranges {
		t, err := nd.resolve(r.addr, r.n, 1)
		if err == nil && !t.staged {
			err = fmt.Errorf("bytes [%#x, %#x) are not in a staged registration", r.addr, r.addr+r.n)
		}
		if err != nil {
			fail("staged range [%#x, +%d): %v", r.addr, r.n, err)
			return
		}
		tk, err := netcore.CopyMark(s.own, t.dev, t.bounce, int64(r.n))
		if err != nil {
			fail("copy of a received range: %v", err)
			return
		}
		s.ownIssued = tk
	}
	if m.kind == kindRanges {
		return
	}
	sem, err := nd.resolve(m.sem, 8, 8)
	if err != nil {
		fail("semaphore: %v", err)
		return
	}
	var cnt target
	if m.cnt != 0 {
		if cnt, err = nd.resolve(m.cnt, 8, 8); err != nil {
			fail("count word: %v", err)
			return
		}
	}
	// Host memory registered directly (hal/host, and a GPU's host windows:
	// NetDevice.HostWindows) is signalled here, with the same atomics
	// hal/host's engine uses, once the session's device engine has
	// finished what it was given: one goroutine hand-off less per signal
	// and no device-engine call. Other memory is signalled by the device
	// engine. UnexportPort waits for these stores: they are made under
	// s.mu.
	if !sem.staged && !cnt.staged && len(m.ranges) == 0 && sem.host != nil && (m.cnt == 0 || cnt.host != nil) && s.ownIdle() {
		if m.cnt != 0 {
			atomic.StoreUint64((*uint64)(unsafe.Pointer(&cnt.host[0])), m.count)
		}
		atomic.AddUint64((*uint64)(unsafe.Pointer(&sem.host[0])), 1)
		return
	}
	if err := s.own.Signal(sem.dev, cnt.dev, m.count); err != nil {
		fail("signal on the device engine: %v", err)
		return
	}
	if s.ownIssued, err = s.own.Mark(); err != nil {
		fail("signal on the device engine: %v", err)
	}
}

// ownIdle reports whether the session's device engine has finished every
// request it was given (s.mu held).
func (s *session) ownIdle() bool {
	if s.ownIssued == 0 {
		return true
	}
	done, err := s.own.Completed()
	return err == nil && done >= s.ownIssued
}
