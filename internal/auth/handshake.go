package auth

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/weftccl/weft/hal"
)

// Proto names the protocol and stage a handshake opens. It is part of every
// key derivation and proof, so a transcript of one cannot open another.
type Proto uint8

const (
	ProtoBootRoot Proto = 1 // a rank's connection to the bootstrap root
	ProtoBootMesh Proto = 2 // a bootstrap mesh connection between ranks
	ProtoSocket   Proto = 3 // a connection of the socket transport (hal/socket)
)

func (p Proto) String() string {
	switch p {
	case ProtoBootRoot:
		return "bootstrap root"
	case ProtoBootMesh:
		return "bootstrap mesh"
	case ProtoSocket:
		return "socket transport"
	}
	return fmt.Sprintf("protocol %d", uint8(p))
}

// Wire layout of the handshake (big-endian; sizes in bytes):
//
//	hello,     client → server, 44: "WEFTAUTH" | version 1 | proto | flags | 0 | client nonce (32)
//	challenge, server → client, 76: "WEFTAUTH" | version 1 | proto | flags | 0 | server nonce (32) | server proof (32)
//	proof,     client → server, 32: client proof
//
// flags bit 0: encrypt what follows. A proof is
//
//	HMAC-SHA256(K, label | proto | flags | len(context) (2) | context | client nonce | server nonce)
//
// with K = HKDF-SHA256(secret, salt "weft-auth-v1", info "auth " + proto,
// 32 bytes) and label "weft-auth-v1 server" or "weft-auth-v1 client".
const (
	magic          = "WEFTAUTH"
	version        = 1
	NonceBytes     = 32
	HelloBytes     = 12 + NonceBytes
	ChallengeBytes = 12 + NonceBytes + sha256.Size
	ProofBytes     = sha256.Size
	flagEncrypt    = 1
	maxContext     = 1024
)

// MaxPending is the default cap on connections a listener holds before
// they authenticate; see Gate.
const MaxPending = 64

// DefaultHandshakeTimeout is how long a handshake may take at most; callers
// bound it further by their own timeout (HandshakeTimeout).
const DefaultHandshakeTimeout = 5 * time.Second

// HandshakeTimeout is min(DefaultHandshakeTimeout, limit), or the default
// when limit ≤ 0.
func HandshakeTimeout(limit time.Duration) time.Duration {
	if limit <= 0 || limit > DefaultHandshakeTimeout {
		return DefaultHandshakeTimeout
	}
	return limit
}

// Config is one side's view of a handshake.
type Config struct {
	Secret  Secret // must not be zero
	Proto   Proto
	Encrypt bool   // AES-GCM after the handshake; both sides must agree
	Context string // job-specific binding both sides know (≤ 1 KiB), e.g. a job id
	// Timeout bounds the whole handshake; ≤ 0 takes DefaultHandshakeTimeout.
	Timeout time.Duration
}

// helloMsg is the parsed first message.
type helloMsg struct {
	proto Proto
	flags byte
	nonce [NonceBytes]byte
}

func encodeHello(p Proto, flags byte, nonce []byte) []byte {
	b := make([]byte, 0, HelloBytes)
	b = append(b, magic...)
	b = append(b, version, byte(p), flags, 0)
	return append(b, nonce...)
}

// ParseHello parses the client's first message. It checks the format only
// and never panics (it is fuzzed); the error says what is wrong in words and
// quotes no bytes.
func ParseHello(b []byte) (proto Proto, flags byte, nonce [NonceBytes]byte, err error) {
	h, err := parseHeader(b, HelloBytes)
	if err != nil {
		return 0, 0, nonce, err
	}
	copy(nonce[:], b[12:])
	return h.proto, h.flags, nonce, nil
}

func parseHeader(b []byte, size int) (helloMsg, error) {
	var h helloMsg
	switch {
	case len(b) != size:
		return h, fmt.Errorf("handshake message of %d bytes, want %d", len(b), size)
	case string(b[:8]) != magic:
		return h, errors.New("not a weft authentication handshake (is the peer of another weft version, unauthenticated, or not weft?)")
	case b[8] != version:
		return h, fmt.Errorf("handshake version %d, want %d", b[8], version)
	case b[9] < byte(ProtoBootRoot) || b[9] > byte(ProtoSocket):
		return h, fmt.Errorf("handshake for unknown protocol %d", b[9])
	case b[10]&^flagEncrypt != 0 || b[11] != 0:
		return h, errors.New("handshake with unknown flags or reserved bytes set")
	}
	h.proto, h.flags = Proto(b[9]), b[10]
	return h, nil
}

func flagsOf(encrypt bool) byte {
	if encrypt {
		return flagEncrypt
	}
	return 0
}

func authKey(s Secret, p Proto) []byte {
	k, err := hkdf.Key(sha256.New, s.bytes(), []byte("weft-auth-v1"), "auth "+p.String(), 32)
	if err != nil {
		panic("auth: hkdf: " + err.Error())
	}
	return k
}

func proof(key []byte, label string, p Proto, flags byte, ctx string, nc, ns []byte) []byte {
	var l [2]byte
	binary.BigEndian.PutUint16(l[:], uint16(len(ctx)))
	return mac(key, []byte(label), []byte{byte(p), flags}, l[:], []byte(ctx), nc, ns)
}

func (cfg Config) check() error {
	switch {
	case cfg.Secret.IsZero():
		return fmt.Errorf("auth: %v handshake without a secret: %w", cfg.Proto, hal.ErrInvalidArgument)
	case len(cfg.Context) > maxContext:
		return fmt.Errorf("auth: %v handshake context of %d bytes, limit %d: %w", cfg.Proto, len(cfg.Context), maxContext, hal.ErrInvalidArgument)
	}
	return nil
}

// failure is the error of a handshake that did not authenticate: it names
// the peer's address and the reason in words, never a value.
func failure(c net.Conn, p Proto, reason string) error {
	return fmt.Errorf("%v: %w from %s: %s: %w", p, ErrAuth, c.RemoteAddr(), reason, hal.ErrRemote)
}

// ioFailure describes a connection that broke or timed out mid-handshake.
func ioFailure(c net.Conn, p Proto, step string, err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%v: %w from %s: no %s within the handshake deadline: %w", p, ErrAuth, c.RemoteAddr(), step, hal.ErrTimeout)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return failure(c, p, "the connection closed during the "+step+" (the peer refused this side's proof, or is not of this job)")
	}
	return fmt.Errorf("%v: %w from %s: %s: %v: %w", p, ErrAuth, c.RemoteAddr(), step, err, hal.ErrRemote)
}

// Server runs the listening side of the handshake on c, which must be
// fresh. It returns the connection to use from now on: c itself, or c
// wrapped in AES-GCM when cfg.Encrypt. The deadline of c is cleared on
// success. On failure c is left open for the caller to close; the error
// wraps ErrAuth and hal.ErrRemote (or hal.ErrTimeout), names the remote
// address, and contains no secret, nonce or proof.
func Server(c net.Conn, cfg Config) (net.Conn, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(HandshakeTimeout(cfg.Timeout)))
	var hb [HelloBytes]byte
	if _, err := io.ReadFull(c, hb[:]); err != nil {
		return nil, ioFailure(c, cfg.Proto, "hello", err)
	}
	p, flags, nc, err := ParseHello(hb[:])
	if err != nil {
		return nil, failure(c, cfg.Proto, err.Error())
	}
	if p != cfg.Proto {
		return nil, failure(c, cfg.Proto, "handshake of the "+p.String()+", not of this listener")
	}
	if flags != flagsOf(cfg.Encrypt) {
		return nil, failure(c, cfg.Proto, fmt.Sprintf("the peer asks for encryption %v, this side has it %v (set WEFT_SOCKET_ENCRYPT alike on every rank)", flags&flagEncrypt != 0, cfg.Encrypt))
	}
	ns := make([]byte, NonceBytes)
	if _, err := rand.Read(ns); err != nil {
		return nil, fmt.Errorf("auth: random nonce: %v: %w", err, hal.ErrSystem)
	}
	key := authKey(cfg.Secret, p)
	msg := encodeHello(p, flags, ns)
	msg = append(msg, proof(key, "weft-auth-v1 server", p, flags, cfg.Context, nc[:], ns)...)
	if _, err := c.Write(msg); err != nil {
		return nil, ioFailure(c, cfg.Proto, "challenge", err)
	}
	got := make([]byte, ProofBytes)
	if _, err := io.ReadFull(c, got); err != nil {
		return nil, ioFailure(c, cfg.Proto, "proof", err)
	}
	if !hmac.Equal(got, proof(key, "weft-auth-v1 client", p, flags, cfg.Context, nc[:], ns)) {
		return nil, failure(c, cfg.Proto, "wrong proof (another job's secret, or a replayed handshake)")
	}
	c.SetDeadline(time.Time{})
	if !cfg.Encrypt {
		return c, nil
	}
	return newSealed(c, cfg, nc[:], ns, false)
}

// Client runs the dialling side of the handshake on c; see Server. It
// checks the server's proof before sending its own, so a listener without
// the secret learns nothing it could use.
func Client(c net.Conn, cfg Config) (net.Conn, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(HandshakeTimeout(cfg.Timeout)))
	nc := make([]byte, NonceBytes)
	if _, err := rand.Read(nc); err != nil {
		return nil, fmt.Errorf("auth: random nonce: %v: %w", err, hal.ErrSystem)
	}
	flags := flagsOf(cfg.Encrypt)
	if _, err := c.Write(encodeHello(cfg.Proto, flags, nc)); err != nil {
		return nil, ioFailure(c, cfg.Proto, "hello", err)
	}
	var cb [ChallengeBytes]byte
	if _, err := io.ReadFull(c, cb[:]); err != nil {
		return nil, ioFailure(c, cfg.Proto, "challenge", err)
	}
	h, err := parseHeader(cb[:HelloBytes], HelloBytes)
	if err != nil {
		return nil, failure(c, cfg.Proto, err.Error())
	}
	if h.proto != cfg.Proto || h.flags != flags {
		return nil, failure(c, cfg.Proto, "the listener answered for another protocol or encryption setting")
	}
	ns := cb[12:HelloBytes]
	key := authKey(cfg.Secret, cfg.Proto)
	if !hmac.Equal(cb[HelloBytes:], proof(key, "weft-auth-v1 server", cfg.Proto, flags, cfg.Context, nc, ns)) {
		return nil, failure(c, cfg.Proto, "the listener's proof is wrong (it is not of this job, or has another secret)")
	}
	if _, err := c.Write(proof(key, "weft-auth-v1 client", cfg.Proto, flags, cfg.Context, nc, ns)); err != nil {
		return nil, ioFailure(c, cfg.Proto, "proof", err)
	}
	c.SetDeadline(time.Time{})
	if !cfg.Encrypt {
		return c, nil
	}
	return newSealed(c, cfg, nc, ns, true)
}

// Gate caps the connections a listener holds before they authenticate:
// Enter fails at once when n are pending, and the caller closes the new
// connection. Safe for concurrent use.
type Gate struct{ slots chan struct{} }

// NewGate returns a Gate of n slots (MaxPending when n ≤ 0).
func NewGate(n int) *Gate {
	if n <= 0 {
		n = MaxPending
	}
	return &Gate{slots: make(chan struct{}, n)}
}

// Enter takes a slot, or returns false when none is free.
func (g *Gate) Enter() bool {
	select {
	case g.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// Leave frees a slot taken by Enter.
func (g *Gate) Leave() { <-g.slots }

// Pending is the number of slots taken.
func (g *Gate) Pending() int { return len(g.slots) }
