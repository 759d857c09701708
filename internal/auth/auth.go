// Package auth is the one implementation of how weft's connections prove
// that both ends belong to the same job: a mutual challenge–response over
// fresh nonces, keyed by the job's secret, and, when asked, AES-GCM
// encryption of everything after it. The bootstrap (root and mesh
// connections) and the socket transport (hal/socket) both use it; see
// docs/security.md for the threat model.
//
// The secret never crosses the wire: each side sends a 32-byte random nonce
// and an HMAC-SHA256 over both nonces, the protocol, the flags and a context
// string, under a key derived from the secret with HKDF-SHA256 and labelled
// by the protocol. The server proves first and the client second; the
// labels of the two proofs differ, so a proof cannot be reflected, and
// every proof covers the peer's fresh nonce, so a recorded transcript does
// not authenticate a later connection.
//
// Nothing in this package logs or formats a secret, a derived key or an
// expected proof: errors say "authentication failed" and why in words.
package auth

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
)

// Sizes of a secret in bytes. NewSecret makes SecretBytes (256 bits);
// ParseSecret accepts MinSecretBytes (128 bits) to MaxSecretBytes.
const (
	SecretBytes    = 32
	MinSecretBytes = 16
	MaxSecretBytes = 64
)

// Secret is a job's shared secret. The zero Secret means "none": the job is
// unauthenticated. Its String and GoString never show the bytes, so a
// Secret inside a struct that is logged or printed with %v or %+v stays
// hidden; Hex gives the bytes explicitly, for handing to a child process.
//
// A Secret is comparable with ==, so structs holding one (bootstrap.UniqueID)
// stay comparable.
type Secret struct {
	b [MaxSecretBytes]byte
	n uint8
}

// bytes is the secret's slice (aliasing s's array; do not retain).
func (s *Secret) bytes() []byte { return s.b[:s.n] }

// NewSecret returns SecretBytes random bytes from crypto/rand. The error
// wraps hal.ErrSystem.
func NewSecret() (Secret, error) {
	s := Secret{n: SecretBytes}
	if _, err := rand.Read(s.b[:SecretBytes]); err != nil {
		return Secret{}, fmt.Errorf("auth: random job secret: %v: %w", err, hal.ErrSystem)
	}
	return s, nil
}

// SecretFromBytes copies b into a Secret. b must hold MinSecretBytes to
// MaxSecretBytes bytes, else the error wraps hal.ErrInvalidArgument.
func SecretFromBytes(b []byte) (Secret, error) {
	if len(b) < MinSecretBytes || len(b) > MaxSecretBytes {
		return Secret{}, fmt.Errorf("auth: a job secret of %d bytes: want %d to %d (at least 128 bits): %w", len(b), MinSecretBytes, MaxSecretBytes, hal.ErrInvalidArgument)
	}
	s := Secret{n: uint8(len(b))}
	copy(s.b[:], b)
	return s, nil
}

// ParseSecret reads a secret written as hex (32 to 128 hex digits;
// surrounding white space is ignored). The error never quotes the text;
// it wraps hal.ErrInvalidArgument.
func ParseSecret(text string) (Secret, error) {
	b, err := hex.DecodeString(strings.TrimSpace(text))
	if err != nil {
		return Secret{}, fmt.Errorf("auth: the job secret is not hex (want %d to %d hex digits): %w", 2*MinSecretBytes, 2*MaxSecretBytes, hal.ErrInvalidArgument)
	}
	return SecretFromBytes(b)
}

// ReadSecretFile reads a hex secret from path. The file must be a regular
// file that neither its group nor others can read or write (mode 0600 or
// stricter), as ssh demands of private keys; otherwise the error wraps
// hal.ErrInvalidArgument and says which chmod fixes it. Other errors wrap
// hal.ErrSystem.
func ReadSecretFile(path string) (Secret, error) {
	f, err := os.Open(path)
	if err != nil {
		return Secret{}, fmt.Errorf("auth: job secret file %s: %v: %w", path, err, hal.ErrSystem)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Secret{}, fmt.Errorf("auth: job secret file %s: %v: %w", path, err, hal.ErrSystem)
	}
	if !st.Mode().IsRegular() {
		return Secret{}, fmt.Errorf("auth: job secret file %s is not a regular file: %w", path, hal.ErrInvalidArgument)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return Secret{}, fmt.Errorf("auth: job secret file %s has mode %04o: group or others may access it; run `chmod 600 %s`: %w", path, perm, path, hal.ErrInvalidArgument)
	}
	buf := make([]byte, 4*MaxSecretBytes)
	n, err := f.Read(buf)
	if err != nil {
		return Secret{}, fmt.Errorf("auth: job secret file %s: %v: %w", path, err, hal.ErrSystem)
	}
	s, err := ParseSecret(string(buf[:n]))
	if err != nil {
		return Secret{}, fmt.Errorf("job secret file %s: %w", path, err)
	}
	return s, nil
}

// IsZero reports whether s is the zero Secret (no secret).
func (s Secret) IsZero() bool { return s.n == 0 }

// Hex returns the secret as hex, the form WEFT_JOB_SECRET holds. Only a
// launcher passing it to its children should call it.
func (s Secret) Hex() string { return hex.EncodeToString(s.bytes()) }

// Bytes returns a copy of the secret's bytes.
func (s Secret) Bytes() []byte { return append([]byte(nil), s.bytes()...) }

// Equal reports whether s and t hold the same bytes (in constant time).
func (s Secret) Equal(t Secret) bool { return subtle.ConstantTimeCompare(s.bytes(), t.bytes()) == 1 }

// String hides the bytes.
func (s Secret) String() string {
	if s.IsZero() {
		return "no secret"
	}
	return "secret(redacted)"
}

// GoString hides the bytes from %#v.
func (s Secret) GoString() string { return "auth.Secret{" + s.String() + "}" }

// Derive returns a 32-byte key for one use of the secret, named by label
// (HKDF-SHA256, no salt, info "weft-derive-v1 " + label). Different labels
// give independent keys; none reveals the secret. It returns nil for the
// zero Secret.
func (s Secret) Derive(label string) []byte {
	if s.IsZero() {
		return nil
	}
	k, err := hkdf.Key(sha256.New, s.bytes(), nil, "weft-derive-v1 "+label, 32)
	if err != nil {
		panic("auth: hkdf: " + err.Error()) // only for lengths beyond 255×32
	}
	return k
}

// mac is HMAC-SHA256 of the parts under key.
func mac(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// ErrAuth is wrapped by every error of a connection that failed to
// authenticate or whose encrypted frame failed to open.
var ErrAuth = errors.New("authentication failed")

var unauthOnce sync.Once

// WarnUnauthenticated logs, once per process, that the job runs without a
// secret: connections are checked only against public job values, so any
// process that can reach a listener may join. what names the caller.
func WarnUnauthenticated(log *slog.Logger, what string) {
	unauthOnce.Do(func() {
		log.Warn("weft job is unauthenticated: no job secret (set WEFT_JOB_SECRET or WEFT_JOB_SECRET_FILE, or use a unique id from NewUniqueID / weft run); any process that reaches a weft listener can join the job, read its exchanges and write into its memory",
			"where", what)
	})
}

// EncryptRequested reads WEFT_SOCKET_ENCRYPT: 1, true, on or yes ask for
// AES-GCM on the bootstrap and the socket transport; 0, false, off, no or
// unset leave them in clear. Another value is an error wrapping
// hal.ErrInvalidArgument.
func EncryptRequested() (bool, error) {
	switch v := strings.ToLower(strings.TrimSpace(env.String("WEFT_SOCKET_ENCRYPT"))); v {
	case "", "0", "false", "off", "no":
		return false, nil
	case "1", "true", "on", "yes":
		return true, nil
	default:
		return false, fmt.Errorf("WEFT_SOCKET_ENCRYPT=%q: want 1 or 0: %w", v, hal.ErrInvalidArgument)
	}
}
