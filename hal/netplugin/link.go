package netplugin

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/netcore"
	"github.com/weftccl/weft/internal/auth"
	"github.com/weftccl/weft/internal/ncclnet"
)

// link is this rank's connection with one peer: a send comm (this rank's
// connect to the peer's listen handle for it) and a receive comm (the
// peer's connect, accepted on this rank's listen handle for the peer).
// Every engine to the peer shares the send comm; every engine of the peer
// to this rank arrives on the receive comm. Fields are the progress
// goroutine's unless marked.
type link struct {
	nd   *NetDevice
	peer int

	// Under nd.mu.
	wantSend   bool // an engine asked for the link, or the peer connected
	haveAddr   bool // the peer's Address is known (an engine to it was made)
	addrHandle ncclnet.Handle
	addrNonce  uint64
	addrChunk  int
	peerNonce  uint64 // the peer's incarnation, from its hello (0: none yet)
	ready      bool
	engByID    map[uint64]*Engine

	// Read without a lock by engine calls.
	err          atomic.Pointer[error] // the link's failure
	remoteClosed atomic.Bool           // the peer said closing

	// The sending direction.
	haveHello   bool // the peer's hello gave its handle (haveAddr false)
	helloHandle ncclnet.Handle
	helloChunk  int
	connecting  bool
	connStart   time.Time
	dialer      *ncclnet.Dialer // the connect in progress
	send        *ncclnet.SendComm
	sendMR      *ncclnet.MR
	sendStage   hal.Buffer
	chunk       int // payload bytes of this side's messages: min(own chunk, the peer's)
	freeSend    []int
	sendq       []outMsg
	inflight    []inflightMsg
	lastSend    time.Time // last send completion, or when sending started after idling
	helloSent   bool
	closingSent bool

	// The receiving direction.
	recv      *ncclnet.RecvComm
	recvMR    *ncclnet.MR
	recvStage hal.Buffer
	recvOwn   hal.Engine // the device's own engine that applies received messages, in order
	freeRecv  []int
	posted    []postedRecv
	busy      []busyRecv
	recvEnded bool      // the peer closed; receives are no longer posted
	recvSince time.Time // when the receive comm was accepted
	helloRecv bool
	remote    map[uint64]*remoteEngine

	ac      *authConn // the handshake in progress, or nil
	authRes chan error
	authed  bool

	dead bool // failed: nothing more is applied or staged
}

// outMsg is a message waiting to be sent. Engine messages (put, signal)
// hold the staging slot their payload was copied into and wait for the
// own-engine ticket of that copy; link messages (hello, auth, bye,
// bye-ack, reject, closing) take a slot when they reach the head.
type outMsg struct {
	m       message
	payload []byte // link messages
	size    int    // payload bytes
	slot    int    // −1: none yet
	eng     *Engine
	ticket  uint64
}

type inflightMsg struct {
	req  *ncclnet.Request
	slot int
	eng  *Engine
}

type postedRecv struct {
	req  *ncclnet.Request
	slot int
	done bool
	n    int
}

type busyRecv struct {
	slot   int
	ticket uint64
}

type remoteEngine struct{ next uint64 }

func newLink(nd *NetDevice, peer int) *link {
	return &link{nd: nd, peer: peer, engByID: map[uint64]*Engine{}}
}

func (l *link) slotSize() int { return headerSize + l.chunk }

func (l *link) recvSlotSize() int { return headerSize + l.nd.opts.Chunk }

func hostAddr(b hal.Buffer) uint64 { return uint64(uintptr(unsafe.Pointer(&b.Host()[0]))) }

func (l *link) describe() string {
	return fmt.Sprintf("netplugin: rank %d: link to rank %d", l.nd.cfg.Rank, l.peer)
}

// failure returns the link's failure, or nil.
func (l *link) failure() error {
	if p := l.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (l *link) isReady() bool {
	l.nd.mu.Lock()
	defer l.nd.mu.Unlock()
	return l.ready
}

func (l *link) peerClosed() bool { return l.remoteClosed.Load() }

// stage says how far the link got, for a timeout's message.
func (l *link) stage() string {
	l.nd.mu.Lock()
	defer l.nd.mu.Unlock()
	switch {
	case l.ready:
		return "ready"
	case !l.wantSend:
		return "not asked for"
	}
	return "connecting, waiting for the peer's connection back, or authenticating (is the peer's NetDevice open, with the same plugin?)"
}

// fail records the link's first failure, drops what was waiting to be
// sent and, when the peer is at fault, records it as the peer's failure.
func (l *link) fail(err error, peerFault bool) {
	nd := l.nd
	first := l.err.CompareAndSwap(nil, &err)
	l.dead = true
	for _, m := range l.sendq {
		if m.slot >= 0 {
			l.freeSend = append(l.freeSend, m.slot)
		}
	}
	l.sendq = l.sendq[:0]
	if l.ac != nil {
		close(l.ac.dead)
		l.ac = nil
	}
	if first && peerFault {
		nd.failPeer(l.peer, err)
	}
	nd.changed.Notify()
}

func (l *link) markReady() {
	l.nd.mu.Lock()
	l.ready = true
	l.nd.mu.Unlock()
	l.nd.changed.Notify()
	l.nd.log.Info("net plugin link ready", "peer", l.peer, "authenticated", !l.nd.secret.IsZero())
}

// queue appends a link message.
func (l *link) queue(m message, payload []byte) {
	l.push(outMsg{m: m, payload: payload, size: len(payload), slot: -1})
}

// push appends a message to the send queue.
func (l *link) push(o outMsg) {
	if len(l.sendq) == 0 && len(l.inflight) == 0 {
		l.lastSend = time.Now()
	}
	l.sendq = append(l.sendq, o)
}

// takeSlot returns a free send slot, or −1.
func (l *link) takeSlot() int {
	if len(l.freeSend) == 0 {
		return -1
	}
	s := l.freeSend[0]
	l.freeSend = l.freeSend[1:]
	return s
}

// step connects, receives and runs the handshake.
func (l *link) step() bool {
	if l.dead {
		// Only a reject queued at the failure still goes out.
		return false
	}
	nd := l.nd
	busy := false
	nd.mu.Lock()
	want, haveAddr := l.wantSend, l.haveAddr
	nd.mu.Unlock()
	if l.send == nil && want && (haveAddr || l.haveHello) {
		busy = l.stepConnect() || busy
	}
	if l.ac != nil && l.send != nil {
		busy = l.drainAuth() || busy
	}
	if l.dead {
		return true
	}
	busy = l.stepRecv() || busy
	if l.dead {
		return true
	}
	switch {
	case l.authed || !l.helloSent || !l.helloRecv:
	case nd.secret.IsZero():
		l.authed = true
		l.markReady()
		busy = true
	case l.ac == nil:
		l.startAuth()
		busy = true
	default:
		select {
		case err := <-l.authRes:
			if err != nil {
				err = fmt.Errorf("%s: the connection claiming rank %d failed the challenge: %w", l.describe(), l.peer, err)
				nd.mu.Lock()
				haveAddr := l.haveAddr
				nd.mu.Unlock()
				if !haveAddr {
					l.refuse(err)
					return true
				}
				// This side connected to the address the bootstrap
				// gave, and the far end could not prove the secret:
				// the engines waiting for the link fail.
				l.fail(err, false)
				l.closeSend()
				l.closeRecv()
				return true
			}
			// The handshake's last bytes were written before it
			// returned: queue them ahead of any data.
			l.drainAuth()
			l.ac = nil
			l.authed = true
			l.markReady()
			busy = true
		default:
		}
	}
	return busy
}

// stepConnect calls the plugin's connect until it gives a send comm, then
// sets up staging and queues the hello.
func (l *link) stepConnect() bool {
	nd := l.nd
	if !l.connecting {
		h := l.helloHandle
		nd.mu.Lock()
		if l.haveAddr {
			h, l.chunk = l.addrHandle, min(nd.opts.Chunk, l.addrChunk)
		} else {
			l.chunk = min(nd.opts.Chunk, l.helloChunk)
		}
		nd.mu.Unlock()
		l.dialer = nd.p.Dial(nd.opts.Device, h)
		l.connecting, l.connStart = true, time.Now()
	}
	sc, err := l.dialer.Connect()
	if err != nil {
		l.dialer.Free()
		l.dialer, l.connecting = nil, false
		l.fail(fmt.Errorf("%s: connect: %w", l.describe(), err), true)
		return true
	}
	if sc == nil {
		if time.Since(l.connStart) > nd.opts.Timeout {
			l.fail(fmt.Errorf("%s: the plugin's connect did not complete within %v (rank %d lost, or not listening?): %w",
				l.describe(), nd.opts.Timeout, l.peer, hal.ErrTimeout), true)
			return true
		}
		return false
	}
	l.dialer.Free()
	l.dialer, l.connecting = nil, false
	l.send = sc
	n := nd.opts.SendSlots
	stage, err := nd.dev.AllocHost(int64(n * l.slotSize()))
	if err != nil {
		l.fail(fmt.Errorf("%s: send staging: %w", l.describe(), err), false)
		return true
	}
	l.sendStage = stage
	if len(stage.Host()) < n*l.slotSize() {
		l.fail(fmt.Errorf("%s: the device's host allocations are not host-accessible (Host() is nil): %w", l.describe(), hal.ErrNotSupported), false)
		return true
	}
	if l.sendMR, err = sc.RegMr(hostAddr(stage), n*l.slotSize(), ncclnet.PtrHost); err != nil {
		l.fail(fmt.Errorf("%s: register send staging: %w", l.describe(), err), false)
		return true
	}
	for i := range n {
		l.freeSend = append(l.freeSend, i)
	}
	nd.mu.Lock()
	dstNonce := l.peerNonce
	if l.haveAddr {
		dstNonce = l.addrNonce
	}
	nd.mu.Unlock()
	h := nd.handles[l.peer]
	l.queue(message{kind: msgHello, e: nd.job, s: dstNonce, a: uint64(nd.cfg.Rank)<<32 | uint64(l.peer), b: uint64(nd.opts.Chunk), c: nd.nonce}, h[:])
	l.helloSent = true
	return true
}

func (l *link) startAuth() {
	nd := l.nd
	l.ac = newAuthConn(l.peer, nd.kick)
	l.authRes = make(chan error, 1)
	ac, res, cfg, client := l.ac, l.authRes, nd.authConfig(l.peer), nd.cfg.Rank < l.peer
	go func() {
		var err error
		if client {
			_, err = auth.Client(ac, cfg)
		} else {
			_, err = auth.Server(ac, cfg)
		}
		res <- err
		nd.kick()
	}()
}

// drainAuth queues what the handshake wrote.
func (l *link) drainAuth() bool {
	busy := false
	for {
		select {
		case p := <-l.ac.out:
			for len(p) > 0 {
				k := min(len(p), l.chunk)
				l.queue(message{kind: msgAuth}, p[:k])
				p = p[k:]
			}
			busy = true
		default:
			return busy
		}
	}
}

// refuse forgets a connection that proved nothing (a hello of another
// job, rank or incarnation, a failed challenge): it is recorded, its comms
// closed, and the listening comm for the rank polled again; the job is not
// disturbed. The send side goes too unless it was connected to the
// address the bootstrap gave.
func (l *link) refuse(err error) {
	nd := l.nd
	nd.refuse(err)
	if l.ac != nil {
		close(l.ac.dead)
		l.ac = nil
	}
	l.closeRecv()
	l.helloRecv, l.authed = false, false
	nd.mu.Lock()
	haveAddr := l.haveAddr
	if !haveAddr {
		l.peerNonce = 0
		l.wantSend = false
	}
	nd.mu.Unlock()
	if !haveAddr {
		l.closeSend()
		l.haveHello, l.helloSent = false, false
	}
}

// stepSend completes sends and starts the next ones.
func (l *link) stepSend() bool {
	if l.send == nil {
		return false
	}
	nd := l.nd
	busy := false
	for len(l.inflight) > 0 {
		f := l.inflight[0]
		done, _, err := f.req.Test()
		if err != nil {
			l.inflight = l.inflight[1:]
			if !l.dead {
				l.fail(fmt.Errorf("%s: a send failed (rank %d lost?): %w", l.describe(), l.peer, err), true)
			}
			return true
		}
		if !done {
			break
		}
		l.inflight = l.inflight[1:]
		l.freeSend = append(l.freeSend, f.slot)
		if f.eng != nil {
			f.eng.sentMsgs++
			f.eng.progress.Notify()
		}
		l.lastSend = time.Now()
		busy = true
	}
	for len(l.sendq) > 0 && len(l.inflight) < nd.opts.SendSlots {
		m := &l.sendq[0]
		if m.eng != nil && m.eng.finished {
			// A failed engine's messages are not sent.
			if m.slot >= 0 {
				l.freeSend = append(l.freeSend, m.slot)
			}
			l.sendq = l.sendq[1:]
			continue
		}
		if m.eng != nil && m.eng.ownDone < m.ticket {
			break
		}
		if m.slot < 0 {
			if len(l.freeSend) == 0 {
				break
			}
			m.slot = l.freeSend[0]
			l.freeSend = l.freeSend[1:]
			off := m.slot * l.slotSize()
			copy(l.sendStage.Host()[off+headerSize:], m.payload)
		}
		off := m.slot * l.slotSize()
		hdr := l.sendStage.Host()[off : off+headerSize]
		encodeHeader(hdr, m.m)
		if h := nd.opts.hooks; h != nil && h.beforeSend != nil {
			h.beforeSend(hdr)
		}
		req, err := l.send.ISend(hostAddr(l.sendStage)+uint64(off), headerSize+m.size, 0, l.sendMR)
		if err != nil {
			if !l.dead {
				l.fail(fmt.Errorf("%s: isend: %w", l.describe(), err), true)
			}
			return true
		}
		if req == nil {
			break
		}
		l.inflight = append(l.inflight, inflightMsg{req: req, slot: m.slot, eng: m.eng})
		l.sendq = l.sendq[1:]
		busy = true
	}
	if !l.dead && (len(l.inflight) > 0 || len(l.sendq) > 0) && time.Since(l.lastSend) > nd.opts.Timeout {
		l.fail(fmt.Errorf("%s: no message to rank %d completed within %v (rank %d lost, or not receiving?): %w",
			l.describe(), l.peer, nd.opts.Timeout, l.peer, hal.ErrTimeout), true)
		return true
	}
	return busy
}

// setupRecv takes an accepted receive comm.
func (l *link) setupRecv(rc *ncclnet.RecvComm) error {
	nd := l.nd
	l.recv = rc
	n, size := nd.opts.RecvSlots, l.recvSlotSize()
	var err error
	if l.recvStage, err = nd.dev.AllocHost(int64(n * size)); err != nil {
		return fmt.Errorf("%s: receive staging: %w", l.describe(), err)
	}
	if len(l.recvStage.Host()) < n*size {
		return fmt.Errorf("%s: the device's host allocations are not host-accessible (Host() is nil): %w", l.describe(), hal.ErrNotSupported)
	}
	if l.recvMR, err = rc.RegMr(hostAddr(l.recvStage), n*size, ncclnet.PtrHost); err != nil {
		return fmt.Errorf("%s: register receive staging: %w", l.describe(), err)
	}
	if l.recvOwn, err = nd.pm.NewEngine(nd.dev.Endpoint()); err != nil {
		return fmt.Errorf("%s: the device's own engine: %w", l.describe(), err)
	}
	l.freeRecv = l.freeRecv[:0]
	for i := range n {
		l.freeRecv = append(l.freeRecv, i)
	}
	l.remote = map[uint64]*remoteEngine{}
	l.recvSince = time.Now()
	return nil
}

// closeRecv releases the receiving direction (progress goroutine).
func (l *link) closeRecv() {
	if l.recvOwn != nil {
		l.recvOwn.Close()
		l.recvOwn = nil
	}
	if l.recvMR != nil {
		l.recvMR.Dereg()
		l.recvMR = nil
	}
	if l.recv != nil {
		l.recv.Close()
		l.recv = nil
	}
	if l.recvStage != nil {
		l.recvStage.Free()
		l.recvStage = nil
	}
	l.posted, l.busy, l.freeRecv = nil, nil, nil
}

// closeSend releases the sending direction (progress goroutine).
func (l *link) closeSend() {
	if l.sendMR != nil {
		l.sendMR.Dereg()
		l.sendMR = nil
	}
	if l.send != nil {
		l.send.Close()
		l.send = nil
	}
	if l.sendStage != nil {
		l.sendStage.Free()
		l.sendStage = nil
	}
	if l.dialer != nil {
		l.dialer.Free()
		l.dialer = nil
	}
	l.sendq, l.inflight, l.freeSend, l.connecting = nil, nil, nil, false
}

// stepRecv keeps receives posted and applies what arrived, in order.
func (l *link) stepRecv() bool {
	if l.recv == nil || l.recvEnded {
		return false
	}
	nd := l.nd
	busy := false
	if len(l.busy) > 0 {
		done, err := l.recvOwn.Completed()
		if err != nil {
			l.fail(fmt.Errorf("%s: the device's engine applying received data: %w", l.describe(), err), false)
			return true
		}
		for len(l.busy) > 0 && l.busy[0].ticket <= done {
			l.freeRecv = append(l.freeRecv, l.busy[0].slot)
			l.busy = l.busy[1:]
			busy = true
		}
	}
	size := l.recvSlotSize()
	for len(l.freeRecv) > 0 {
		s := l.freeRecv[0]
		req, err := l.recv.IRecv(hostAddr(l.recvStage)+uint64(s*size), size, 0, l.recvMR)
		if err != nil {
			l.fail(fmt.Errorf("%s: irecv: %w", l.describe(), err), true)
			return true
		}
		if req == nil {
			break
		}
		l.freeRecv = l.freeRecv[1:]
		l.posted = append(l.posted, postedRecv{req: req, slot: s})
		busy = true
	}
	for len(l.posted) > 0 {
		pr := &l.posted[0]
		if !pr.done {
			done, n, err := pr.req.Test()
			if err != nil {
				if l.peerClosed() {
					l.recvEnded = true
					return true
				}
				if !l.authed {
					l.refuse(fmt.Errorf("%s: a connection claiming rank %d broke before the handshake completed: %w", l.describe(), l.peer, err))
					return true
				}
				l.fail(fmt.Errorf("%s: receiving: %v (rank %d lost): %w", l.describe(), err, l.peer, hal.ErrRemote), true)
				return true
			}
			if !done {
				break
			}
			pr.done, pr.n = true, n
		}
		slot := pr.slot
		hold, ticket := l.apply(slot, pr.n)
		if hold {
			break
		}
		if l.dead || l.recv == nil {
			// Failed, or refused: the receive side is gone.
			return true
		}
		l.posted = l.posted[1:]
		busy = true
		if ticket > 0 {
			l.busy = append(l.busy, busyRecv{slot: slot, ticket: ticket})
		} else {
			l.freeRecv = append(l.freeRecv, slot)
		}
	}
	if !l.helloRecv && time.Since(l.recvSince) > nd.opts.Timeout {
		// A connection that says nothing must not hold the listen
		// handle of the rank it claims.
		l.refuse(fmt.Errorf("%s: a connection claiming rank %d sent no hello within %v: %w", l.describe(), l.peer, nd.opts.Timeout, hal.ErrRemote))
		return true
	}
	return busy
}

// bad fails the link over a message the peer should not have sent and
// tells the peer why.
func (l *link) bad(format string, args ...any) {
	reason := fmt.Sprintf(format, args...)
	err := fmt.Errorf("%s: rank %d sent a message this rank refuses: %s: %w", l.describe(), l.peer, reason, hal.ErrRemote)
	l.fail(err, true)
	if l.send != nil {
		r := fmt.Sprintf("rank %d refused a message of rank %d: %s", l.nd.cfg.Rank, l.peer, reason)
		if len(r) > maxReason {
			r = r[:maxReason]
		}
		l.queue(message{kind: msgReject}, []byte(r))
	}
}

// apply handles the message of n bytes in receive slot s. hold: leave it
// for later (data that arrived while the handshake still runs). ticket:
// the own-engine ticket of the copy out of the slot (0: the slot is free).
func (l *link) apply(s, n int) (hold bool, ticket uint64) {
	nd := l.nd
	size := l.recvSlotSize()
	if n < 0 || n > size {
		l.bad("the plugin reports a message of %d bytes in a receive of %d", n, size)
		return false, 0
	}
	raw := l.recvStage.Host()[s*size : s*size+n]
	m, p, err := decodeMessage(raw, nd.opts.Chunk)
	if err != nil {
		if !l.authed {
			l.refuse(fmt.Errorf("%s: a connection claiming rank %d sent a malformed message: %v: %w", l.describe(), l.peer, err, hal.ErrRemote))
			return false, 0
		}
		l.bad("%v", err)
		return false, 0
	}
	if !l.helloRecv {
		if m.kind != msgHello {
			l.refuse(fmt.Errorf("%s: a connection claiming rank %d began with a %v message, not a hello: %w", l.describe(), l.peer, m.kind, hal.ErrRemote))
			return false, 0
		}
		l.hello(m, p)
		return false, 0
	}
	switch m.kind {
	case msgHello:
		l.bad("a second hello")
	case msgAuth:
		if l.authed || nd.secret.IsZero() {
			l.bad("an auth message outside the handshake")
			return false, 0
		}
		if l.ac == nil {
			// The peer started the handshake before this side's step
			// did (both hellos crossed): keep it for the handshake.
			return true, 0
		}
		select {
		case l.ac.in <- append([]byte(nil), p...):
		default:
			l.refuse(fmt.Errorf("%s: a connection claiming rank %d flooded the handshake: %w", l.describe(), l.peer, hal.ErrRemote))
		}
	case msgPut, msgSignal, msgBye, msgByeAck:
		if !l.authed {
			// The peer finished its side of the handshake (or, without
			// a secret, has both hellos) before this side's step saw
			// it: apply once this side has too. A connection that
			// never completes it is refused when the handshake fails
			// or the link times out.
			return true, 0
		}
		return false, l.data(m, s)
	case msgReject:
		l.fail(fmt.Errorf("%s: rank %d refused this rank's messages: %s: %w", l.describe(), l.peer, p, hal.ErrRemote), false)
	case msgClosing:
		l.remoteClosed.Store(true)
		nd.changed.Notify()
	}
	return false, 0
}

// hello checks the first message of a receive comm.
func (l *link) hello(m message, p []byte) {
	nd := l.nd
	src, dst := int(m.a>>32), int(uint32(m.a))
	var why string
	switch {
	case m.e != nd.job:
		why = "a hello of another job"
	case src != l.peer:
		why = fmt.Sprintf("a hello from rank %d on the listen handle of rank %d", src, l.peer)
	case dst != nd.cfg.Rank:
		why = fmt.Sprintf("a hello for rank %d", dst)
	case m.s != nd.nonce:
		why = "a hello for another incarnation of this rank"
	case m.c == 0:
		why = "a hello without the sender's incarnation"
	}
	nd.mu.Lock()
	if why == "" && l.haveAddr && l.addrNonce != m.c {
		why = "a hello from another incarnation than the rank's address"
	}
	if why == "" && l.peerNonce != 0 && l.peerNonce != m.c {
		why = "a hello from another incarnation than the one connected before"
	}
	if why == "" {
		l.peerNonce = m.c
		l.wantSend = true
	}
	nd.mu.Unlock()
	if why != "" {
		l.refuse(fmt.Errorf("%s: refused a connection: %s: %w", l.describe(), why, errors.Join(auth.ErrAuth, hal.ErrRemote)))
		return
	}
	if !l.haveHello {
		copy(l.helloHandle[:], p)
		l.haveHello = true
	}
	l.helloChunk = int(m.b)
	l.helloRecv = true
}

// data applies a put, signal, bye or bye-ack of an authenticated link.
func (l *link) data(m message, s int) uint64 {
	nd := l.nd
	if m.kind == msgByeAck {
		nd.mu.Lock()
		e := l.engByID[m.e]
		nd.mu.Unlock()
		if e == nil {
			l.bad("a goodbye acknowledgement for unknown engine %#x", m.e)
			return 0
		}
		e.byeAcked = true
		return 0
	}
	re := l.remote[m.e]
	if re == nil {
		if len(l.remote) >= maxEngines {
			l.bad("more than %d engines", maxEngines)
			return 0
		}
		re = &remoteEngine{}
		l.remote[m.e] = re
	}
	if m.s != re.next {
		l.bad("%v message %d of engine %#x, expected message %d next (a message was lost or reordered)", m.kind, m.s, m.e, re.next)
		return 0
	}
	re.next++
	switch m.kind {
	case msgPut:
		dst, err := nd.reg.Resolve(m.a, m.b, 1)
		if err != nil {
			l.bad("put of %d bytes: %v", m.b, err)
			return 0
		}
		src := l.recvStage.Addr() + uint64(s*l.recvSlotSize()+headerSize)
		t, err := netcore.CopyMark(l.recvOwn, dst, src, int64(m.b))
		if err != nil {
			l.fail(fmt.Errorf("%s: applying a put on the device's engine: %w", l.describe(), err), false)
			return 0
		}
		return t
	case msgSignal:
		w, err := nd.reg.ResolveSignal(m.a, m.b)
		if err != nil {
			l.bad("signal: %v", err)
			return 0
		}
		err = l.recvOwn.Signal(w.Sem, w.Cnt, m.c)
		w.Release()
		if err != nil {
			l.fail(fmt.Errorf("%s: applying a signal on the device's engine: %w", l.describe(), err), false)
		}
	case msgBye:
		delete(l.remote, m.e)
		l.queue(message{kind: msgByeAck, e: m.e}, nil)
	}
	return 0
}

// progress is the goroutine that makes every plugin call of the
// NetDevice: accepts, connects, sends, receives, and the engines'
// staging. It runs until Close, then says closing on every link, waits
// (at most the timeout) for what is in flight, and releases everything.
func (nd *NetDevice) progress() {
	defer close(nd.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	last, naps := time.Now(), 0
	var (
		links     []*link
		engines   []*Engine
		stopping  bool
		stopUntil time.Time
	)
	stop := nd.stop
	for {
		if !stopping {
			select {
			case <-nd.stop:
				stopping, stopUntil, stop = true, time.Now().Add(nd.opts.Timeout), nil
			default:
			}
		}
		nd.mu.Lock()
		links, engines = links[:0], engines[:0]
		for _, l := range nd.links {
			links = append(links, l)
		}
		for e := range nd.engines {
			engines = append(engines, e)
		}
		nd.mu.Unlock()
		busy := false
		if !stopping {
			busy = nd.acceptAll() || busy
		}
		for _, l := range links {
			busy = l.step() || busy
		}
		for _, e := range engines {
			busy = e.step() || busy
		}
		pending, stuck := false, false
		for _, l := range links {
			lost := nd.fails.Count() > 0 && nd.PeerErr(l.peer) != nil
			if stopping && l.send != nil && !l.dead && !lost && !l.closingSent && l.authed && !nd.crash.Load() {
				l.queue(message{kind: msgClosing}, nil)
				l.closingSent = true
			}
			busy = l.stepSend() || busy
			p := len(l.inflight) > 0 || len(l.sendq) > 0 || len(l.busy) > 0 || l.connecting || l.ac != nil
			pending = pending || p
			// At Close, what is in flight to a lost peer is not waited for.
			stuck = stuck || p && !l.dead && !lost
		}
		if stopping && (!stuck || time.Now().After(stopUntil) || nd.crash.Load()) {
			for _, l := range links {
				l.closeSend()
				l.closeRecv()
			}
			for _, lc := range nd.listens {
				if lc != nil {
					lc.Close()
				}
			}
			return
		}
		if busy {
			last, naps = time.Now(), 0
			continue
		}
		pause(time.Since(last), pending, naps, nd.wake, stop, timer)
		naps++
	}
}

// acceptBatch bounds the listening comms one poll of the progress
// goroutine tries: in a large job most peers never connect to this rank,
// and an accept is a system call in most plugins.
const acceptBatch = 8

// acceptAll polls, round robin, up to acceptBatch listening comms of
// peers whose link has no receive comm.
func (nd *NetDevice) acceptAll() bool {
	busy := false
	n := len(nd.listens)
	for tried, i := 0, 0; i < n && tried < acceptBatch; i++ {
		r := (nd.acceptNext + i) % n
		lc := nd.listens[r]
		if lc == nil {
			continue
		}
		nd.mu.Lock()
		l := nd.links[r]
		nd.mu.Unlock()
		if l != nil && (l.recv != nil || l.dead) {
			continue
		}
		tried++
		nd.acceptNext = (r + 1) % n
		rc, err := lc.Accept()
		if err != nil {
			nd.refuse(fmt.Errorf("netplugin: rank %d: accept on the listen handle of rank %d: %w; no further connection from rank %d is accepted", nd.cfg.Rank, r, err, r))
			lc.Close()
			nd.listens[r] = nil
			continue
		}
		if rc == nil {
			continue
		}
		busy = true
		nd.mu.Lock()
		l = nd.linkLocked(r)
		nd.mu.Unlock()
		if err := l.setupRecv(rc); err != nil {
			l.fail(err, false)
		}
	}
	return busy
}
