package socket

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/weftccl/weft/hal"
)

// Paired connections. A TCP connection that carries data one way sends a
// pure ACK for each small frame, from the read that drains it, and the
// frame's receiver pays for that segment; when both directions carry
// data, each segment carries the ACK of the other direction. Two ranks
// whose engines talk to each other (every collective's pattern) therefore
// share one connection: on the 2×H100 host a raw 64 B exchange took
// 5.7 µs a round on one connection against 8.7–10.1 with a connection per
// direction (docs/network.md, "One connection per pair of ranks").
//
// Every connection is a link: the engine of the rank that dialled it
// (send at the dialler) and that engine's session at the other rank
// (recv there). An engine of one connection offers its link for pairing
// (helloPairable); the peer's engine to this rank, instead of dialling,
// attaches to it: it sends a hello of its own back on the link
// (helloAttach), the dialler answers it with accept, and from then on the
// link carries the frames of both engines, each with its own sequence
// numbers, and the replies to both. One reader per end takes the first
// four bytes of what comes and hands a frame to the session of the
// peer's engine, a reply to its own engine and a hello (once) to the
// attach; one write lock orders the engine's frames and the reader's
// replies.
//
// Who dials: an engine whose peer has an offered link to it not yet
// taken attaches to the oldest one; otherwise it dials and offers its
// own. When the two ranks' engines dial each other at once, the lower
// rank's connection wins: the lower rank, which registered its dial
// before it started, answers the higher rank's hello with a redirect
// naming its own engine, and the higher rank's engine attaches to that
// link when it arrives. If it was taken meanwhile, closed, or does not
// come within the timeout, the engine dials a connection of its own
// without offering it. So no engine ever waits for another to be
// created, a rank whose peer never opens an engine to it (a one-sided
// pattern) loses nothing, and the pairing only ever moves where frames
// go, never what they are.
//
// A link closes once neither side uses it: its engine has closed (the
// goodbye acknowledged) or never attached, and its session has ended
// (the goodbye applied) or never opened. A link that breaks fails both.

// link is one TCP connection between this rank and peer.
type link struct {
	nd       *NetDevice
	peer     int
	conn     net.Conn
	br       *bufio.Reader
	remote   string // the far end's address, for messages
	dialed   bool   // this rank dialled it
	pairable bool   // offered by its dialler (helloPairable)
	engine   uint64 // the dialler's engine id

	wmu sync.Mutex // every write on conn

	// Under nd.mu. send is this rank's engine's connection on the link
	// (the dialler's, or an engine that attached), recv the session's
	// connection of the peer's engine; the done flags say that side has
	// finished. reserved: a redirect named this link (dialled side);
	// closed: conn is closed or closing.
	send     *sendConn
	recv     *recvConn
	sendDone bool
	recvDone bool
	reserved bool
	closed   bool
}

// errLinkLost ends an attach whose link closed before the dialler
// answered (its engine closed meanwhile): the engine dials instead.
var errLinkLost = errors.New("the connection closed before the attach was answered")

// intent is a pairable dial of this rank under way (the lower rank of
// the two), which a redirect may name before the connection exists.
type intent struct {
	peer     int
	reserved bool
}

// write writes bufs on the link before dl, after any other writer.
func (l *link) write(bufs net.Buffers, dl time.Time) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return writeBuffers(l.conn, bufs, dl)
}

// close closes the connection and takes the link out of the NetDevice.
func (l *link) close() {
	nd := l.nd
	nd.mu.Lock()
	l.closed = true
	delete(nd.links, l)
	nd.mu.Unlock()
	l.conn.Close()
	nd.linkNote.Notify()
}

// release records that one side (send: this rank's engine; else the
// peer's session) has finished with the link, and closes it when the
// other side has too or never came.
func (l *link) release(send bool) {
	nd := l.nd
	nd.mu.Lock()
	if send {
		l.sendDone = true
	} else {
		l.recvDone = true
	}
	idle := !l.closed && (l.send == nil || l.sendDone) && (l.recv == nil || l.recvDone)
	nd.mu.Unlock()
	if idle {
		l.close()
	}
}

// sides returns the link's live sender and receiver (nil where none).
func (l *link) sides() (*sendConn, *recvConn) {
	l.nd.mu.Lock()
	defer l.nd.mu.Unlock()
	sc, rc := l.send, l.recv
	if l.sendDone {
		sc = nil
	}
	if l.recvDone {
		rc = nil
	}
	return sc, rc
}

// run reads the link until it closes: frames of the peer's engine,
// replies to this rank's engine, and the peer's attach hello. The caller
// counts it in nd.wg.
func (l *link) run() {
	timeout := l.nd.opts.Timeout
	for {
		if l.br.Buffered() == 0 {
			l.conn.SetReadDeadline(time.Time{}) // idle between frames is fine
			if _, err := l.br.Peek(1); err != nil {
				l.broken(err, "between frames", true)
				return
			}
		}
		l.conn.SetReadDeadline(time.Now().Add(timeout))
		m, err := l.br.Peek(4)
		if err != nil {
			l.broken(err, fmt.Sprintf("mid-frame (got %d of 4 bytes)", len(m)), false)
			return
		}
		sc, rc := l.sides()
		switch binary.BigEndian.Uint32(m) {
		case frameMagic:
			if rc == nil {
				l.violation("a frame where no engine of the peer sends")
				return
			}
			bye, err := rc.frame()
			if err != nil {
				rc.s.fail(rc, err)
				l.stop(nil, net.ErrClosed)
				return
			}
			if bye {
				rc.end()
			}
		case replyMagic:
			if sc == nil {
				l.violation("a reply where no engine of this rank sends")
				return
			}
			k, reason, err := readReply(l.br)
			if errors.Is(err, errMagic) || errors.Is(err, errMalformed) {
				l.violation(fmt.Sprintf("bad reply: %v", err))
				return
			} else if err != nil {
				l.broken(err, "mid-reply", false)
				return
			}
			sc.onReply(k, reason)
		case binary.BigEndian.Uint32([]byte(helloMagic)):
			if err := l.attached(); err != nil {
				l.violation(err.Error())
				return
			}
		default:
			l.violation(fmt.Sprintf("%v %#08x, want a frame, a reply or an attach handshake", errMagic, binary.BigEndian.Uint32(m)))
			return
		}
	}
}

// stop ends both sides of a link whose reader stops: the session of the
// peer's engine fails with rcErr (nil: it has failed already), this
// rank's engine is told the link broke with scErr, and the link closes.
func (l *link) stop(rcErr, scErr error) {
	sc, rc := l.sides()
	if rc != nil {
		if rcErr != nil {
			rc.s.fail(rc, rcErr)
		}
		rc.end()
	}
	if sc != nil {
		sc.stopped(scErr)
	}
	l.close()
}

// broken stops a link whose connection failed with err where (idle:
// between frames). A link this rank closed (an engine or session that
// failed, the NetDevice's close) fails no session of the peer's.
func (l *link) broken(err error, where string, idle bool) {
	l.nd.mu.Lock()
	local := l.closed
	l.nd.mu.Unlock()
	_, rc := l.sides()
	var rcErr error
	switch {
	case rc == nil:
	case local:
		rcErr = errStopped
	case idle && errors.Is(err, io.EOF):
		rcErr = fmt.Errorf("%s: connection closed without goodbye after %d frames (peer lost): %w", rc.describe(), rc.frames, hal.ErrRemote)
	default:
		rcErr = rc.lost(err, where)
	}
	l.stop(rcErr, err)
}

// violation stops a link on which the peer sent what the protocol does
// not allow, failing both sides with what.
func (l *link) violation(what string) {
	err := fmt.Errorf("socket: rank %d: connection with rank %d (%s): %s: %w", l.nd.cfg.Rank, l.peer, l.remote, what, hal.ErrRemote)
	sc, rc := l.sides()
	if sc != nil {
		sc.e.fail(err, true)
	}
	if rc == nil && sc == nil {
		l.nd.failPeer(l.peer, err)
	}
	l.stop(err, err)
}

// attached takes the peer's attach hello on a link this rank dialled and
// offered (sc: its engine on it): the peer's engine joins a session whose
// connection is this link, and the hello is answered with accept. A hello
// this link cannot take (not offered, taken, malformed, of another job)
// is the peer's fault: the error fails the link.
func (l *link) attached() error {
	nd := l.nd
	var hb [helloSize]byte
	if n, err := io.ReadFull(l.br, hb[:]); err != nil {
		return fmt.Errorf("attach handshake cut short after %d of %d bytes: %v", n, helloSize, err)
	}
	h, err := decodeHello(hb[:])
	if err == nil {
		err = nd.checkHello(h)
	}
	switch {
	case err != nil:
		return fmt.Errorf("attach handshake: %v", err)
	case h.flags&helloAttach == 0:
		return fmt.Errorf("a handshake without the attach flag on an open connection")
	case h.src != l.peer:
		return fmt.Errorf("attach handshake of rank %d on the connection with rank %d", h.src, l.peer)
	}
	nd.mu.Lock()
	ok := l.dialed && l.pairable && l.recv == nil && !l.closed
	nd.mu.Unlock()
	if !ok {
		return fmt.Errorf("attach handshake on a connection that was not offered or is taken")
	}
	rc, err := nd.join(h, l)
	if err != nil {
		// This rank cannot take the engine (closing, no staging memory):
		// it is told why, and the link goes on for this rank's engine.
		return l.write(net.Buffers{encodeReply(replyReject, fmt.Sprintf("rank %d refused the attach: %v", nd.cfg.Rank, err))}, time.Now().Add(nd.opts.Timeout))
	}
	nd.paired.Add(1)
	if err := rc.reply(replyAccept, ""); err != nil {
		rc.s.fail(rc, rc.lost(err, "accept reply"))
		rc.end()
	}
	return nil
}

// addLink registers an accepted link of the peer's engine (serve): this
// rank's engines may attach to it if its dialler offered it.
func (nd *NetDevice) addLink(l *link) error {
	nd.mu.Lock()
	if nd.closing.Load() {
		nd.mu.Unlock()
		return fmt.Errorf("rank %d is closing its socket transport", nd.cfg.Rank)
	}
	nd.links[l] = struct{}{}
	nd.mu.Unlock()
	nd.linkNote.Notify()
	return nil
}

// redirectFor decides, for a hello offering a link from rank peer, whether
// this rank is dialling peer itself with a link the peer's engine should
// take instead: only the lower rank redirects, to a pairable dial of its
// own under way or a link it dialled that no engine of the peer has
// attached to or been sent to. The chosen one is reserved; its engine id
// is returned. Otherwise the link counts as being accepted (nd.accepting)
// until settled runs: an engine of this rank to peer waits for it rather
// than dial past it.
func (nd *NetDevice) redirectFor(peer int) (id uint64, redirect bool, settled func()) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cfg.Rank < peer {
		if id, ok := nd.redirectLocked(peer); ok {
			return id, true, nil
		}
	}
	nd.accepting[peer]++
	return 0, false, sync.OnceFunc(func() {
		nd.mu.Lock()
		nd.accepting[peer]--
		nd.mu.Unlock()
		nd.linkNote.Notify()
	})
}

func (nd *NetDevice) redirectLocked(peer int) (uint64, bool) {
	for id, in := range nd.intents {
		if in.peer == peer && !in.reserved {
			in.reserved = true
			return id, true
		}
	}
	var best *link
	for l := range nd.links {
		if l.dialed && l.pairable && l.peer == peer && l.recv == nil && !l.reserved && !l.closed && !l.sendDone {
			if best == nil || l.engine < best.engine {
				best = l
			}
		}
	}
	if best == nil {
		return 0, false
	}
	best.reserved = true
	return best.engine, true
}

// claim takes for sc a link that rank peer dialled and offered, not yet
// taken and still carrying the peer's engine: the one whose engine is id,
// or (id 0) any. It returns nil if there is none; with id, taken reports
// that the link exists but is no longer free.
func (nd *NetDevice) claim(peer int, id uint64, sc *sendConn) (l *link, taken bool) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.claimLocked(peer, id, sc)
}

func (nd *NetDevice) claimLocked(peer int, id uint64, sc *sendConn) (l *link, taken bool) {
	for c := range nd.links {
		if c.dialed || c.peer != peer || (id != 0 && c.engine != id) {
			continue
		}
		if c.pairable && c.send == nil && c.recv != nil && !c.recvDone && !c.closed {
			if id != 0 || l == nil || c.engine < l.engine {
				l = c
			}
		} else if id != 0 {
			return nil, true
		}
	}
	if l != nil {
		l.send, sc.l = sc, l
	}
	return l, false
}

// takeOffered claims for sc an offered link of rank peer's engine,
// waiting (at most the timeout) while one is being accepted; if there is
// none, the lower rank of the two registers the dial its engine id is
// about to make (an intent, which a redirect may name) in the same
// critical section, so that the peer's hello either finds the intent or
// was offered before. It reports whether a link was claimed.
func (nd *NetDevice) takeOffered(peer int, id uint64, sc *sendConn) bool {
	deadline := time.Now().Add(nd.opts.Timeout)
	for {
		ch := nd.linkNote.Wait()
		nd.mu.Lock()
		l, _ := nd.claimLocked(peer, 0, sc)
		wait := time.Until(deadline)
		done := l != nil || nd.accepting[peer] == 0 || wait <= 0 || nd.closing.Load()
		if l == nil && done && nd.cfg.Rank < peer {
			nd.intents[id] = &intent{peer: peer}
		}
		nd.mu.Unlock()
		if done {
			return l != nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
}

// awaitLink waits, at most the timeout, for the link of rank peer's
// engine id (named by a redirect) to arrive and claims it for sc; nil if
// it was taken, closed or did not come.
func (nd *NetDevice) awaitLink(peer int, id uint64, sc *sendConn) *link {
	deadline := time.Now().Add(nd.opts.Timeout)
	for {
		ch := nd.linkNote.Wait()
		l, taken := nd.claim(peer, id, sc)
		if l != nil || taken || nd.closing.Load() {
			return l
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
}

// pairedConn gives an engine of one connection its link to a: an offered
// link of the peer's engine it attaches to, else one it dials and offers
// (attaching instead to the link a redirect names), else, when that
// attach cannot happen, one of its own.
func (e *Engine) pairedConn(a address) (*sendConn, error) {
	nd := e.nd
	if nd.opts.NoPair {
		return e.connect(a, 0, 1, false)
	}
	sc := e.newSendConn(0)
	if nd.takeOffered(a.rank, e.id, sc) {
		err := e.attach(sc, a)
		if !errors.Is(err, errLinkLost) {
			return sc, err
		}
		sc = e.newSendConn(0)
	}
	defer func() {
		nd.mu.Lock()
		delete(nd.intents, e.id)
		nd.mu.Unlock()
	}()
	c, err := e.connect(a, 0, 1, true)
	var rd redirected
	if !errors.As(err, &rd) {
		return c, err
	}
	if l := nd.awaitLink(a.rank, rd.engine, sc); l != nil {
		err := e.attach(sc, a)
		if !errors.Is(err, errLinkLost) {
			return sc, err
		}
	}
	e.log.Debug("socket engine: the link a redirect named was not free; dialling one of its own", "engine", rd.engine)
	return e.connect(a, 0, 1, false)
}

// redirected is connect's error when the peer answered with a redirect
// to its link of engine id.
type redirected struct{ engine uint64 }

func (r redirected) Error() string {
	return fmt.Sprintf("redirected to the link of engine %#x", r.engine)
}

// attach sends the attach hello on sc's claimed link and waits for the
// dialler's answer: nil once accepted, errLinkLost if the link closed
// first, else the refusal or the timeout.
func (e *Engine) attach(sc *sendConn, a address) error {
	l := sc.l
	h := hello{flags: helloAttach, conns: 1, job: e.nd.job, nonce: a.nonce, src: e.nd.cfg.Rank, dst: a.rank, engine: e.id, chunk: e.chunk}
	sc.attaching.Store(true)
	if err := l.write(net.Buffers{encodeHello(h)}, time.Now().Add(e.timeout)); err != nil {
		l.release(true)
		return errLinkLost
	}
	t := time.NewTimer(e.timeout)
	defer t.Stop()
	var err error
	select {
	case err = <-sc.answer:
	case <-t.C:
		err = fmt.Errorf("%s: no answer to the attach within %v (peer lost?): %w", e.describe(), e.timeout, hal.ErrTimeout)
	}
	if err != nil {
		l.release(true)
		return err
	}
	e.remote = l.remote
	e.log.Debug("socket engine attached to the peer's connection", "engine", l.engine)
	return nil
}
