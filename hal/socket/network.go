package socket

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/auth"
	"github.com/weftccl/weft/internal/env"
)

// Name is the network's registry name (WEFT_NET=socket).
const Name = "socket"

// Defaults of the options.
const (
	// DefaultConns and DefaultSpin: one connection per engine whose
	// receiver polls 50 µs after each frame before it parks. Frame s goes
	// on connection s mod Conns, so with two connections consecutive
	// small frames alternate and the reader of each has parked by the
	// time its next one comes: polling paid only on one connection. On
	// 2×H100 as two emulated nodes over loopback, LL port plans, 64 B
	// (µs; docs/bench/2026-11-26k-h100x2/, calls 2–3): all_gather 24–26
	// with one polling connection against 30–36 with two parked ones
	// (NCCL's sockets 15–18), all_reduce 22–29 against 30–37, broadcast
	// 26 against 30, sendrecv 31 against 64. Large one-way transfers
	// lose some: sendrecv of 64 MB 23.3 ms against 16.5 (NCCL 37–40),
	// all_gather 9.9 against 9.3 (NCCL 12.6–15.1). Before the LL plans
	// (two frames per hop) polling hurt: docs/bench/2026-11-26g-h100x2/,
	// call 11.
	DefaultConns = 1
	DefaultChunk = 512 << 10
	DefaultSpin  = 50 * time.Microsecond
	maxSpinUS    = 1_000_000
)

func init() { hal.RegisterNetwork(network{}) }

type network struct{}

func (network) Name() string { return Name }

// Probe reports the interface Open would listen on, or why there is none.
func (network) Probe() hal.Availability {
	ifs, err := systemInterfaces()
	if err != nil {
		return hal.Availability{Reason: err.Error()}
	}
	_, _, reason, ok := chooseInterface(env.String("WEFT_SOCKET_IFNAME"), ifs, false)
	return hal.Availability{Available: ok, Reason: reason}
}

// Open opens the transport for dev with the options of the environment
// (OptionsFromEnv).
func (network) Open(dev hal.Device, cfg hal.NetConfig) (hal.NetDevice, error) {
	opts, err := OptionsFromEnv()
	if err != nil {
		return nil, err
	}
	return Open(dev, cfg, opts)
}

// Options configure a NetDevice. Zero fields take their defaults.
type Options struct {
	// Conns is the number of TCP connections an engine opens to its peer,
	// 1 to MaxConns; chunk k of an engine goes on connection k mod Conns.
	// WEFT_SOCKET_NSOCKS, default DefaultConns.
	Conns int
	// Chunk is the largest payload of one frame in bytes, MinChunk to
	// MaxChunk: puts are cut into chunks of this size, each staged and
	// sent on its own. WEFT_SOCKET_CHUNK, default 512 KiB.
	Chunk int
	// IfName selects the interface to listen on, with NCCL_SOCKET_IFNAME's
	// syntax. WEFT_SOCKET_IFNAME; unset picks the first interface that is
	// up and neither loopback nor docker, else loopback.
	IfName string
	// Timeout bounds every wait: a connection without progress, a frame
	// waiting for its predecessors, staging, Close. WEFT_TIMEOUT, 10 s.
	Timeout time.Duration
	// Encrypt wraps every connection in AES-256-GCM after its handshake
	// (keys derived from hal.NetConfig.Secret and both handshake nonces);
	// it needs a Secret, and every rank must agree. WEFT_SOCKET_ENCRYPT.
	Encrypt bool
	// Spin is how long a receiver polls its socket without blocking
	// when it finds nothing to read, before it sleeps until data comes
	// (plain TCP connections on Linux, rawconn_linux.go): a frame that
	// comes meanwhile costs no wake-up, for a core busy while frames keep
	// coming. WEFT_SOCKET_SPIN_US, default DefaultSpin (0: sleep at once).
	Spin time.Duration
	// NoPeek turns off peeking receivers. By default a receiver that
	// waited for a frame reads it with MSG_PEEK and takes it from the
	// socket's queue only when it comes back for the next one
	// (rawConn.Read): the ACK that Linux sends from the read that drains a
	// one-way connection's queue then leaves after the frame is applied,
	// not before (64 B collectives between 2 emulated nodes on 2×H100:
	// 2–4 µs less, docs/network.md). WEFT_SOCKET_PEEK=0.
	NoPeek bool
	// Logger receives the transport's log records, among them every
	// refused connection with its remote address; nil takes the NET
	// logger of WEFT_DEBUG.
	Logger *slog.Logger

	spinSet bool       // Spin was given (0 included); else DefaultSpin
	hooks   *testHooks // tests only
	// stagedOnly makes the receiver apply every put and signal through
	// the device's engine, even into host-visible windows (tests of the
	// staged path on hal/host, whose memory is all host-visible).
	stagedOnly bool
}

// testHooks let tests of this package disturb the transport.
type testHooks struct {
	// beforeSend runs on a connection's sender goroutine before it writes
	// the frame with sequence number seq.
	beforeSend func(conn int, seq uint64)
}

// OptionsFromEnv reads WEFT_SOCKET_NSOCKS, WEFT_SOCKET_CHUNK,
// WEFT_SOCKET_SPIN_US, WEFT_SOCKET_PEEK, WEFT_SOCKET_IFNAME and
// WEFT_TIMEOUT. A malformed or out-of-range value is
// an error wrapping hal.ErrInvalidArgument that names the variable.
func OptionsFromEnv() (Options, error) {
	var o Options
	n, ok, err := env.Int("WEFT_SOCKET_NSOCKS")
	if err != nil {
		return o, fmt.Errorf("socket: %v: %w", err, hal.ErrInvalidArgument)
	}
	if ok {
		if n < 1 || n > MaxConns {
			return o, fmt.Errorf("socket: WEFT_SOCKET_NSOCKS=%d: want 1 to %d: %w", n, MaxConns, hal.ErrInvalidArgument)
		}
		o.Conns = n
	}
	if s := env.String("WEFT_SOCKET_CHUNK"); s != "" {
		c, err := parseBytes(s)
		if err != nil || c < MinChunk || c > MaxChunk {
			return o, fmt.Errorf("socket: WEFT_SOCKET_CHUNK=%q: want a size from 1KiB to 64MiB such as 512KiB: %w", s, hal.ErrInvalidArgument)
		}
		o.Chunk = int(c)
	}
	if us, ok, err := env.Int("WEFT_SOCKET_SPIN_US"); err != nil || (ok && (us < 0 || us > maxSpinUS)) {
		return o, fmt.Errorf("socket: WEFT_SOCKET_SPIN_US=%q: want 0 to %d microseconds: %w", env.String("WEFT_SOCKET_SPIN_US"), maxSpinUS, hal.ErrInvalidArgument)
	} else if ok {
		o.Spin, o.spinSet = time.Duration(us)*time.Microsecond, true
	}
	peek, err := env.Bool("WEFT_SOCKET_PEEK", true)
	if err != nil {
		return o, fmt.Errorf("socket: %v: %w", err, hal.ErrInvalidArgument)
	}
	o.NoPeek = !peek
	o.IfName = env.String("WEFT_SOCKET_IFNAME")
	o.Timeout = env.Timeout()
	if o.Encrypt, err = auth.EncryptRequested(); err != nil {
		return o, fmt.Errorf("socket: %w", err)
	}
	return o, nil
}

func (o Options) withDefaults() (Options, error) {
	if o.Conns == 0 {
		o.Conns = DefaultConns
	}
	if o.Chunk == 0 {
		o.Chunk = DefaultChunk
	}
	if !o.spinSet {
		o.Spin = DefaultSpin
	}
	if o.Timeout <= 0 {
		o.Timeout = env.Timeout()
	}
	if o.Logger == nil {
		o.Logger = env.Logger("NET")
	}
	if o.Conns < 1 || o.Conns > MaxConns {
		return o, fmt.Errorf("socket: %d connections per engine: want 1 to %d: %w", o.Conns, MaxConns, hal.ErrInvalidArgument)
	}
	if o.Chunk < MinChunk || o.Chunk > MaxChunk {
		return o, fmt.Errorf("socket: chunk of %d bytes: want %d to %d: %w", o.Chunk, MinChunk, MaxChunk, hal.ErrInvalidArgument)
	}
	return o, nil
}

// parseBytes parses a byte count: a decimal integer with an optional
// binary unit, K/KB/KiB, M/MB/MiB or G/GB/GiB (case-insensitive; all
// powers of 1024, as NCCL's sizes).
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("size %q: no number", s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %v", s, err)
	}
	var shift uint
	switch strings.ToLower(strings.TrimSpace(t[i:])) {
	case "", "b":
	case "k", "kb", "kib":
		shift = 10
	case "m", "mb", "mib":
		shift = 20
	case "g", "gb", "gib":
		shift = 30
	default:
		return 0, fmt.Errorf("size %q: unknown unit %q", s, t[i:])
	}
	if n > (1<<62)>>shift {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return n << shift, nil
}
