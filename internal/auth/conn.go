package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/weftccl/weft/hal"
)

// Encrypted records. After an encrypting handshake every byte either side
// writes travels in records:
//
//	length (4, big-endian: bytes of ciphertext and tag, 17 to MaxRecord+16) | AES-256-GCM ciphertext | tag (16)
//
// Each direction has its own key, HKDF-SHA256(secret, salt client nonce |
// server nonce, info "weft-enc-v1 " + proto + " " + direction + " " +
// context); the 12-byte GCM nonce is 4 zero bytes and a 64-bit record
// counter that starts at 0, so a record replayed, reordered, dropped or
// moved to another connection fails to open. The length is the additional
// data. A record that fails to open, or announces a length outside the
// bounds, breaks the connection: every later Read returns the error.
const MaxRecord = 128 << 10

const tagBytes = 16

type sealed struct {
	net.Conn

	wmu   sync.Mutex
	seal  cipher.AEAD
	wseq  uint64
	wbuf  []byte
	rmu   sync.Mutex
	open  cipher.AEAD
	rseq  uint64
	rbuf  []byte // whole record buffer
	plain []byte // decrypted bytes not yet returned
	rerr  error
	proto Proto
}

func sessionKey(cfg Config, nc, ns []byte, dir string) (cipher.AEAD, error) {
	salt := append(append([]byte(nil), nc...), ns...)
	k, err := hkdf.Key(sha256.New, cfg.Secret.bytes(), salt, "weft-enc-v1 "+cfg.Proto.String()+" "+dir+" "+cfg.Context, 32)
	if err != nil {
		return nil, err
	}
	blk, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(blk)
}

func newSealed(c net.Conn, cfg Config, nc, ns []byte, client bool) (net.Conn, error) {
	c2s, err := sessionKey(cfg, nc, ns, "client-to-server")
	if err == nil {
		var s2c cipher.AEAD
		if s2c, err = sessionKey(cfg, nc, ns, "server-to-client"); err == nil {
			s := &sealed{Conn: c, proto: cfg.Proto}
			if client {
				s.seal, s.open = c2s, s2c
			} else {
				s.seal, s.open = s2c, c2s
			}
			return s, nil
		}
	}
	return nil, fmt.Errorf("auth: session keys: %v: %w", err, hal.ErrInternal)
}

func gcmNonce(seq uint64) []byte {
	var n [12]byte
	binary.BigEndian.PutUint64(n[4:], seq)
	return n[:]
}

// Write seals p into records of at most MaxRecord bytes and writes them.
// Concurrent Writes are serialised; each is written whole or fails.
func (s *sealed) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	done := 0
	for len(p) > 0 || done == 0 {
		n := min(len(p), MaxRecord)
		if n == 0 {
			return 0, nil
		}
		need := 4 + n + tagBytes
		if cap(s.wbuf) < need {
			s.wbuf = make([]byte, 4+min(MaxRecord, max(n, 16<<10))+tagBytes)
		}
		b := s.wbuf[:4]
		binary.BigEndian.PutUint32(b, uint32(n+tagBytes))
		b = s.seal.Seal(b, gcmNonce(s.wseq), p[:n], b[:4])
		s.wseq++
		if _, err := s.Conn.Write(b); err != nil {
			return done, err
		}
		done += n
		p = p[n:]
	}
	return done, nil
}

// Read returns decrypted bytes.
func (s *sealed) Read(p []byte) (int, error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if len(s.plain) == 0 {
		if s.rerr != nil {
			return 0, s.rerr
		}
		if err := s.readRecord(); err != nil {
			return 0, err
		}
	}
	n := copy(p, s.plain)
	s.plain = s.plain[n:]
	return n, nil
}

// readRecord reads and opens the next record. A failure to open is
// sticky; an I/O error other than a timeout is returned as is (io.EOF at a
// record boundary stays io.EOF, so callers see a clean close).
func (s *sealed) readRecord() error {
	var lb [4]byte
	if n, err := io.ReadFull(s.Conn, lb[:]); err != nil {
		if n > 0 && err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	l := int(binary.BigEndian.Uint32(lb[:]))
	if l <= tagBytes || l > MaxRecord+tagBytes {
		s.rerr = fmt.Errorf("%v: %w from %s: encrypted record of %d bytes, want %d to %d: %w", s.proto, ErrAuth, s.RemoteAddr(), l, tagBytes+1, MaxRecord+tagBytes, hal.ErrRemote)
		return s.rerr
	}
	if cap(s.rbuf) < l {
		s.rbuf = make([]byte, min(MaxRecord+tagBytes, max(l, 16<<10)))
	}
	buf := s.rbuf[:l]
	if _, err := io.ReadFull(s.Conn, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	out, err := s.open.Open(buf[:0], gcmNonce(s.rseq), buf, lb[:])
	if err != nil {
		s.rerr = fmt.Errorf("%v: %w from %s: record %d failed to open (tampered, replayed or reordered): %w", s.proto, ErrAuth, s.RemoteAddr(), s.rseq, hal.ErrRemote)
		return s.rerr
	}
	s.rseq++
	s.plain = out
	return nil
}

// Encrypted reports whether c is a connection Server or Client wrapped in
// AES-GCM.
func Encrypted(c net.Conn) bool {
	_, ok := c.(*sealed)
	return ok
}

// NetConn returns the connection under the encryption.
func (s *sealed) NetConn() net.Conn { return s.Conn }
