package bootstrap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/auth"
	"github.com/weftccl/weft/internal/env"
)

// rootContext and meshContext bind a handshake to the job's magic, so that
// two jobs sharing a secret (a reused WEFT_JOB_SECRET) cannot join each
// other either.
func rootContext(magic uint64) string {
	return string(binary.BigEndian.AppendUint64([]byte("root "), magic))
}

func meshContext(magic uint64, size int) string {
	b := binary.BigEndian.AppendUint64([]byte("mesh "), magic)
	return string(binary.BigEndian.AppendUint32(b, uint32(size)))
}

// encryptFromEnv reads WEFT_SOCKET_ENCRYPT (1/true/on: encrypt the
// bootstrap and the socket transport). Encryption needs the job secret;
// asking for it without one is an error wrapping hal.ErrInvalidArgument.
func encryptFromEnv(secret Secret) (bool, error) {
	on, err := auth.EncryptRequested()
	if err != nil {
		return false, fmt.Errorf("bootstrap: %v: %w", err, hal.ErrInvalidArgument)
	}
	if on && secret.IsZero() {
		return false, fmt.Errorf("bootstrap: WEFT_SOCKET_ENCRYPT=1 needs a job secret to derive keys from: set WEFT_JOB_SECRET or WEFT_JOB_SECRET_FILE (or use weft run / NewUniqueID, which make one): %w", hal.ErrInvalidArgument)
	}
	return on, nil
}

// Tags of a msgReject, telling the rank which sentinel to wrap.
const (
	rejectInvalid = 0 // the rank's own hello was wrong: hal.ErrInvalidArgument
	rejectRemote  = 1 // another rank failed: hal.ErrRemote
)

// rootServer is the rendezvous point of one job. Every rank connects, says
// hello (rank, size, the address of its mesh listener) and waits; when all
// ranks have arrived the root sends each the table of addresses and exits.
//
// Connections with a wrong magic, a truncated or oversized header, or a
// malformed hello are logged and closed without disturbing the
// rendezvous. A rank that claims an already registered rank, or a size
// different from the first rank's, is refused with a msgReject. A
// registered rank whose connection drops before all have arrived aborts
// the rendezvous: every waiting rank, and any that arrives later, is
// refused with the reason.
type rootServer struct {
	magic       uint64
	secret      Secret // zero: unauthenticated
	encrypt     bool   // WEFT_SOCKET_ENCRYPT: AES-GCM after the handshake
	gate        *auth.Gate
	ln          net.Listener
	log         *slog.Logger
	helloWait   time.Duration // deadline for a new connection's hello
	abortLinger time.Duration // how long an aborted root keeps refusing

	events chan rootEvent
	abortc chan error
	stop   chan struct{}
	once   sync.Once
	done   chan struct{} // closed when serve returns

	registered atomic.Int32 // ranks waiting at the root, for tests

	mu       sync.Mutex
	rejected []error // connections refused, for tests and diagnostics
}

type rootEvent struct {
	conn net.Conn
	rank int
	h    hello
	lost error // non-nil: a registered connection ended
}

type rootMember struct {
	conn net.Conn
	addr string
}

// startRoot serves the rendezvous of job id on ln. log nil takes the BOOT
// logger. It fails (hal.ErrInvalidArgument) when WEFT_SOCKET_ENCRYPT asks
// for encryption but the job has no secret.
func startRoot(id UniqueID, ln net.Listener, log *slog.Logger) (*rootServer, error) {
	timeout, err := bootstrapTimeout()
	if err != nil {
		timeout = defaultTimeout
	}
	encrypt, err := encryptFromEnv(id.Secret)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = env.Logger("BOOT")
	}
	s := &rootServer{
		magic:       id.Magic,
		secret:      id.Secret,
		encrypt:     encrypt,
		gate:        auth.NewGate(auth.MaxPending),
		ln:          ln,
		log:         log.With("root", ln.Addr().String()),
		helloWait:   10 * time.Second,
		abortLinger: timeout,
		events:      make(chan rootEvent),
		abortc:      make(chan error),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
	}
	if id.Secret.IsZero() {
		auth.WarnUnauthenticated(s.log, "bootstrap root")
	}
	s.log.Info("bootstrap root listening", "authenticated", !id.Secret.IsZero(), "encrypted", encrypt)
	go s.acceptLoop()
	go s.serve()
	return s, nil
}

// close stops the root and closes its listener and connections.
func (s *rootServer) close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// abort refuses the rendezvous with err, if it has not completed.
func (s *rootServer) abort(err error) {
	select {
	case s.abortc <- err:
	case <-s.done:
	}
}

func (s *rootServer) rejections() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.rejected...)
}

func (s *rootServer) reject(conn net.Conn, err error) {
	if errors.Is(err, auth.ErrAuth) {
		s.log.Warn("bootstrap root: authentication failed from "+conn.RemoteAddr().String(), "remote", conn.RemoteAddr().String(), "err", err)
	} else {
		s.log.Warn("bootstrap root refused a connection", "remote", conn.RemoteAddr().String(), "err", err)
	}
	s.mu.Lock()
	s.rejected = append(s.rejected, err)
	s.mu.Unlock()
	conn.Close()
}

// refuse tells a rank why it cannot join, then closes its connection.
func (s *rootServer) refuse(conn net.Conn, rank int, kind uint32, err error) {
	conn.SetWriteDeadline(time.Now().Add(time.Second))
	writeFrame(conn, header{magic: s.magic, typ: msgReject, src: uint32(rank), tag: kind}, rejectReason(err))
	s.reject(conn, err)
}

// rejectReason is the payload of a msgReject: the error's text, cut to
// the limit of the message type.
func rejectReason(err error) []byte {
	b := []byte(err.Error())
	return b[:min(len(b), maxRejectPayload)]
}

// acceptLoop accepts connections; at most auth.MaxPending may be between
// accept and a checked hello at once, the excess is closed at once.
func (s *rootServer) acceptLoop() {
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			return // listener closed
		}
		if !s.gate.Enter() {
			s.reject(conn, fmt.Errorf("bootstrap root: %d connections from %s and others have not authenticated yet: closed at once: %w",
				auth.MaxPending, conn.RemoteAddr(), hal.ErrRemote))
			continue
		}
		go func() {
			defer s.gate.Leave()
			s.handshake(conn)
		}()
	}
}

// handshake authenticates a connection (when the job has a secret), then
// reads and checks a hello; only a well-formed one reaches serve.
func (s *rootServer) handshake(conn net.Conn) {
	from := conn.RemoteAddr().String() + " (a connection to the root)"
	if !s.secret.IsZero() {
		c, err := auth.Server(conn, auth.Config{Secret: s.secret, Proto: auth.ProtoBootRoot, Encrypt: s.encrypt,
			Context: rootContext(s.magic), Timeout: s.helloWait})
		if err != nil {
			s.reject(conn, err)
			return
		}
		conn = c
	}
	conn.SetReadDeadline(time.Now().Add(s.helloWait))
	h, payload, err := readFrame(conn, s.magic)
	if err != nil {
		if err == io.EOF {
			err = fmt.Errorf("%w: closed before a header", errTruncated)
		}
		s.reject(conn, remoteErr(from, err))
		return
	}
	if h.typ != msgHello {
		s.reject(conn, remoteErr(from, fmt.Errorf("%w: got %v, want hello", errBadType, h.typ)))
		return
	}
	hl, err := decodeHello(payload)
	if err != nil {
		s.reject(conn, remoteErr(from, err))
		return
	}
	rank := int(h.src)
	if int64(h.src) >= int64(hl.size) {
		s.refuse(conn, rank, rejectInvalid, fmt.Errorf("rank %d outside [0, %d)", h.src, hl.size))
		return
	}
	conn.SetReadDeadline(time.Time{})
	select {
	case s.events <- rootEvent{conn: conn, rank: rank, h: hl}:
	case <-s.done:
		conn.Close()
	}
}

// watch reports when a registered rank's connection ends: the rank gave up
// or died. A rank sends nothing after its hello, so any read returns only
// on close.
func (s *rootServer) watch(rank int, conn net.Conn) {
	var b [1]byte
	_, err := conn.Read(b[:])
	if err == nil {
		err = errors.New("unexpected data after hello")
	}
	select {
	case s.events <- rootEvent{conn: conn, rank: rank, lost: err}:
	case <-s.done:
	}
}

func (s *rootServer) serve() {
	defer close(s.done)
	defer s.ln.Close()
	members := map[int]rootMember{}
	size, first := 0, -1
	var aborted error
	var linger <-chan time.Time
	closeAll := func() {
		for _, m := range members {
			m.conn.Close()
		}
		clear(members)
		s.registered.Store(0)
	}
	defer closeAll()
	abort := func(err error) {
		aborted = err
		s.log.Warn("bootstrap rendezvous aborted", "err", err)
		for r, m := range members {
			m.conn.SetWriteDeadline(time.Now().Add(time.Second))
			writeFrame(m.conn, header{magic: s.magic, typ: msgReject, src: uint32(r), tag: rejectRemote}, rejectReason(err))
		}
		closeAll()
		linger = time.After(s.abortLinger)
	}
	for {
		select {
		case <-s.stop:
			return
		case <-linger:
			return
		case err := <-s.abortc:
			if aborted == nil {
				abort(err)
			}
		case ev := <-s.events:
			switch m, registered := members[ev.rank]; {
			case ev.lost != nil:
				if registered && m.conn == ev.conn && aborted == nil {
					abort(fmt.Errorf("rank %d disconnected from the root before all %d ranks arrived (%d had): %v", ev.rank, size, len(members), ev.lost))
				}
			case aborted != nil:
				s.refuse(ev.conn, ev.rank, rejectRemote, fmt.Errorf("rendezvous aborted: %w", aborted))
			case size != 0 && ev.h.size != size:
				s.refuse(ev.conn, ev.rank, rejectInvalid, fmt.Errorf("rank %d says the job has %d ranks, but rank %d said %d", ev.rank, ev.h.size, first, size))
			case registered:
				s.refuse(ev.conn, ev.rank, rejectInvalid, fmt.Errorf("rank %d is already registered (its mesh address %s); two processes claim the same rank", ev.rank, m.addr))
			default:
				if size == 0 {
					size, first = ev.h.size, ev.rank
				}
				members[ev.rank] = rootMember{conn: ev.conn, addr: ev.h.addr}
				s.registered.Store(int32(len(members)))
				s.log.Debug("bootstrap rank arrived", "rank", ev.rank, "addr", ev.h.addr, "have", len(members), "size", size)
				if len(members) == size {
					s.complete(members)
					return
				}
				go s.watch(ev.rank, ev.conn)
			}
		}
	}
}

// complete sends the peer table to every rank.
func (s *rootServer) complete(members map[int]rootMember) {
	addrs := make([]string, len(members))
	for r, m := range members {
		addrs[r] = m.addr
	}
	table := encodePeers(addrs)
	for r, m := range members {
		m.conn.SetWriteDeadline(time.Now().Add(s.helloWait))
		if err := writeFrame(m.conn, header{magic: s.magic, typ: msgPeers, src: uint32(r)}, table); err != nil {
			s.log.Warn("bootstrap root could not send the peer table", "rank", r, "err", err)
		}
	}
	s.log.Info("bootstrap rendezvous complete", "size", len(members))
}
