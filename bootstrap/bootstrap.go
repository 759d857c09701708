package bootstrap

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/auth"
)

// Bootstrap is the out-of-band channel between the ranks of a job. It
// carries small blobs (memory handles, addresses, topology) before and
// beside the data path.
//
// Collectives (AllGather, Broadcast, Barrier) must be called by every rank,
// in the same order, and not concurrently on one Bootstrap; a rank that
// calls a different collective than its peers at the same position gets an
// error wrapping hal.ErrInvalidUsage. Send and Recv may be called from any
// number of goroutines.
//
// Every blocking method returns by the deadline of its ctx or, when ctx has
// none, after WEFT_BOOTSTRAP_TIMEOUT (60 s by default); a timeout wraps
// hal.ErrTimeout and names the ranks still awaited. Once a peer disappears,
// Err reports it, Failed is closed, and every pending and later call returns
// that error (wrapping hal.ErrRemote) at once. After Close, calls return an
// error wrapping hal.ErrInvalidUsage.
type Bootstrap interface {
	// Rank is this process's rank, in [0, Size()).
	Rank() int
	// Size is the number of ranks in the job.
	Size() int
	// AllGather sends data to every rank and returns, in result[r], the
	// data of rank r (result[Rank()] is a copy of data). Sizes may differ
	// between ranks; each is at most MaxMessageSize bytes.
	AllGather(ctx context.Context, data []byte) ([][]byte, error)
	// Broadcast returns root's data on every rank; the data argument of
	// other ranks is ignored. On root it returns data itself.
	Broadcast(ctx context.Context, root int, data []byte) ([]byte, error)
	// Barrier returns once every rank has entered it.
	Barrier(ctx context.Context) error
	// Send queues data (at most MaxMessageSize bytes) for peer under tag and
	// returns once it is handed to the operating system; it does not wait
	// for a matching Recv. Messages with the same peer and tag arrive in the
	// order they were sent. Sending to oneself is allowed.
	Send(ctx context.Context, peer int, tag uint32, data []byte) error
	// Recv returns the oldest message that peer sent with tag, waiting for
	// one if none has arrived. It returns an error wrapping hal.ErrRemote
	// at once if peer has closed its Bootstrap and sent nothing more.
	Recv(ctx context.Context, peer int, tag uint32) ([]byte, error)
	// Err returns the first failure seen (a peer that disappeared or sent
	// a malformed message), or nil. It wraps hal.ErrRemote.
	Err() error
	// Failed is closed when Err becomes non-nil.
	Failed() <-chan struct{}
	// Close tells every peer goodbye and releases the connections. Peers
	// that see the goodbye do not report this rank as failed. Close is
	// idempotent; it does not wait for peers.
	Close() error
}

// KeyDeriver is implemented by the Bootstraps that Connect and NewLocal
// return: DeriveKey gives a 32-byte key for one use of the job's secret,
// named by label (HKDF-SHA256; different labels give independent keys), or
// nil when the job has no secret. Package channels keys the network
// transport's handshakes with it; the secret itself never leaves the
// bootstrap.
type KeyDeriver interface {
	DeriveKey(label string) []byte
}

// UniqueID names one job's bootstrap: the random magic that every message
// of the job carries, the host:port of the root that ranks rendezvous
// with, and the job's secret, which every connection of the job proves it
// knows (a mutual challenge–response; docs/security.md). A zero Secret
// makes an unauthenticated job: only the magic is checked, and a warning
// is logged once.
//
// The text form (String, ParseUniqueID) is what WEFT_UNIQUE_ID holds; it
// carries the magic and the address but never the secret, which travels
// in WEFT_JOB_SECRET or WEFT_JOB_SECRET_FILE, or with the whole id in the
// binary form (MarshalBinary) that ncclUniqueId holds.
type UniqueID struct {
	Magic  uint64
	Addr   string // root host:port
	Secret Secret // zero: unauthenticated
}

// Secret is a job's shared secret (at least 128 bits). Its String and
// GoString never show the bytes; Hex does, for WEFT_JOB_SECRET.
type Secret = auth.Secret

// NewSecret returns a random 256-bit secret from crypto/rand. The error
// wraps hal.ErrSystem.
func NewSecret() (Secret, error) { return auth.NewSecret() }

// ParseSecret reads a secret written as 32 to 128 hex digits, the form of
// WEFT_JOB_SECRET. The error wraps hal.ErrInvalidArgument and does not quote
// the text.
func ParseSecret(text string) (Secret, error) { return auth.ParseSecret(text) }

// String returns the hex text form: 16 hex digits of Magic followed by the
// hex bytes of Addr. It never contains the secret.
func (id UniqueID) String() string {
	b := binary.BigEndian.AppendUint64(nil, id.Magic)
	return hex.EncodeToString(append(b, id.Addr...))
}

// JobName is a name for the job's local resources (shared-memory segments,
// hal.Config.JobID): 16 hex digits of SHA-256 over a label, the magic and
// the root address. It is neither the magic nor the secret, and nothing
// authenticates with it, so it may appear in file names and logs.
func (id UniqueID) JobName() string {
	b := binary.BigEndian.AppendUint64([]byte("weft-job-name\x00"), id.Magic)
	sum := sha256.Sum256(append(b, id.Addr...))
	return hex.EncodeToString(sum[:8])
}

// idBinaryVersion starts the binary form.
const idBinaryVersion = 2

// MarshalBinary encodes the whole id, secret included: version (1, = 2),
// magic (8, big-endian), secret length (1, 0 or 16 to 64), secret, root
// address (the rest, 3 to 1024 bytes). It is for channels that are
// themselves protected (an ncclUniqueId the application broadcasts, an
// authenticated bootstrap); never log it.
func (id UniqueID) MarshalBinary() ([]byte, error) {
	if len(id.Addr) > 1024 {
		return nil, fmt.Errorf("bootstrap: unique id: root address of %d bytes, limit 1024: %w", len(id.Addr), hal.ErrInvalidArgument)
	}
	sec := id.Secret.Bytes()
	b := append([]byte{idBinaryVersion}, binary.BigEndian.AppendUint64(nil, id.Magic)...)
	b = append(b, byte(len(sec)))
	b = append(b, sec...)
	return append(b, id.Addr...), nil
}

// UnmarshalBinary decodes MarshalBinary's form. Errors wrap
// hal.ErrInvalidArgument and quote no secret.
func (id *UniqueID) UnmarshalBinary(b []byte) error {
	if len(b) < 10 || b[0] != idBinaryVersion {
		return fmt.Errorf("bootstrap: binary unique id of %d bytes or of an unknown version: %w", len(b), hal.ErrInvalidArgument)
	}
	magic := binary.BigEndian.Uint64(b[1:9])
	n := int(b[9])
	rest := b[10:]
	if n > len(rest) {
		return fmt.Errorf("bootstrap: binary unique id cut short in its secret: %w", hal.ErrInvalidArgument)
	}
	var sec Secret
	if n > 0 {
		var err error
		if sec, err = auth.SecretFromBytes(rest[:n]); err != nil {
			return fmt.Errorf("bootstrap: binary unique id: %w", err)
		}
	}
	addr := string(rest[n:])
	if len(addr) > 1024 || checkHostPort(addr) != nil || magic == 0 {
		return fmt.Errorf("bootstrap: binary unique id: no valid root address or magic: %w", hal.ErrInvalidArgument)
	}
	*id = UniqueID{Magic: magic, Addr: addr, Secret: sec}
	return nil
}

// ParseUniqueID parses the text form written by UniqueID.String (no
// secret: set Secret from WEFT_JOB_SECRET, as FromEnv does). It
// returns an error wrapping hal.ErrInvalidArgument when s is not hex, is too
// short, or holds no valid host:port.
func ParseUniqueID(s string) (UniqueID, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return UniqueID{}, fmt.Errorf("bootstrap: unique id %.40q is not hex: %w", s, hal.ErrInvalidArgument)
	}
	if len(b) < 8+3 || len(b) > 8+1024 {
		return UniqueID{}, fmt.Errorf("bootstrap: unique id of %d bytes, want 11 to 1032: %w", len(b), hal.ErrInvalidArgument)
	}
	id := UniqueID{Magic: binary.BigEndian.Uint64(b), Addr: string(b[8:])}
	if err := checkHostPort(id.Addr); err != nil {
		return UniqueID{}, fmt.Errorf("bootstrap: unique id: %w: %w", err, hal.ErrInvalidArgument)
	}
	return id, nil
}

// NewUniqueID creates the id of a new job, like ncclGetUniqueId: a random
// 64-bit magic and a 256-bit secret from crypto/rand, and a root listener that this process
// serves from a background goroutine until every rank of the job has
// connected. The root listens on a free port of the interface named by
// WEFT_SOCKET_IFNAME, or of the loopback interface when it is unset (a
// single-node job). Errors wrap hal.ErrSystem (no randomness, no socket) or
// hal.ErrInvalidArgument (unknown interface).
func NewUniqueID() (UniqueID, error) {
	id, _, err := newRoot()
	return id, err
}

// newMagic returns a random non-zero magic.
func newMagic() (uint64, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("bootstrap: random magic: %w: %w", err, hal.ErrSystem)
		}
		if m := binary.BigEndian.Uint64(b[:]); m != 0 {
			return m, nil
		}
	}
}

// newRoot starts the root of a new job on a free port and returns its id
// and handle.
func newRoot() (UniqueID, *rootServer, error) {
	magic, err := newMagic()
	if err != nil {
		return UniqueID{}, nil, err
	}
	secret, err := NewSecret()
	if err != nil {
		return UniqueID{}, nil, err
	}
	host := "127.0.0.1"
	if env := socketIfname(); env != "" {
		ip, err := interfaceIP(env)
		if err != nil {
			return UniqueID{}, nil, err
		}
		host = ip.String()
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return UniqueID{}, nil, fmt.Errorf("bootstrap: root listener on %s: %w: %w", host, err, hal.ErrSystem)
	}
	id := UniqueID{Magic: magic, Addr: ln.Addr().String(), Secret: secret}
	s, err := startRoot(id, ln, nil)
	if err != nil {
		ln.Close()
		return UniqueID{}, nil, err
	}
	return id, s, nil
}
