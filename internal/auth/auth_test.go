package auth

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft/hal"
)

func secret(t testing.TB) Secret {
	t.Helper()
	s, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// recorder keeps every byte written through it.
type recorder struct {
	net.Conn
	sent bytes.Buffer
}

func (r *recorder) Write(p []byte) (int, error) { r.sent.Write(p); return r.Conn.Write(p) }

// pair runs Client and Server over a loopback TCP connection.
func pair(t *testing.T, cc, sc Config) (client, server net.Conn, cerr, serr error, clientSent []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	done := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- res{nil, err}
			return
		}
		s, err := Server(c, sc)
		if err != nil {
			c.Close()
		}
		done <- res{s, err}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{Conn: raw}
	client, cerr = Client(rec, cc)
	if cerr != nil {
		raw.Close()
	}
	r := <-done
	t.Cleanup(func() {
		raw.Close()
		if r.c != nil {
			r.c.Close()
		}
	})
	return client, r.c, cerr, r.err, rec.sent.Bytes()
}

func TestHandshake(t *testing.T) {
	s := secret(t)
	for _, enc := range []bool{false, true} {
		cfg := Config{Secret: s, Proto: ProtoSocket, Encrypt: enc, Context: "job 1"}
		c, sv, cerr, serr, _ := pair(t, cfg, cfg)
		if cerr != nil || serr != nil {
			t.Fatalf("encrypt=%v: client %v, server %v", enc, cerr, serr)
		}
		if Encrypted(c) != enc || Encrypted(sv) != enc {
			t.Errorf("encrypt=%v: Encrypted = %v, %v", enc, Encrypted(c), Encrypted(sv))
		}
		msg := bytes.Repeat([]byte("weft"), 100_000) // 400 KB: several records
		go c.Write(msg)
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(sv, got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("encrypt=%v: server read %v, equal %v", enc, err, bytes.Equal(got, msg))
		}
		go sv.Write([]byte("back"))
		b := make([]byte, 4)
		if _, err := io.ReadFull(c, b); err != nil || string(b) != "back" {
			t.Fatalf("encrypt=%v: client read %q %v", enc, b, err)
		}
	}
}

// TestHandshakeRefuses: a wrong secret, another protocol or context, a
// mismatched encryption setting, and a replayed client transcript all fail
// on the server, with errors that wrap ErrAuth and contain no secret.
func TestHandshakeRefuses(t *testing.T) {
	s, other := secret(t), secret(t)
	base := Config{Secret: s, Proto: ProtoBootRoot, Context: "ctx"}
	with := func(f func(*Config)) Config { c := base; f(&c); return c }
	cases := []struct {
		name   string
		client Config
		msg    string
	}{
		{"wrong secret", with(func(c *Config) { c.Secret = other }), "proof is wrong"},
		{"other protocol", with(func(c *Config) { c.Proto = ProtoBootMesh }), "not of this listener"},
		{"other context", with(func(c *Config) { c.Context = "ctx2" }), "proof is wrong"},
		{"encryption differs", with(func(c *Config) { c.Encrypt = true }), "encryption"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, cerr, serr, _ := pair(t, tc.client, base)
			if cerr == nil || serr == nil {
				t.Fatalf("client %v, server %v: want both to fail", cerr, serr)
			}
			for _, err := range []error{cerr, serr} {
				if !errors.Is(err, ErrAuth) || !errors.Is(err, hal.ErrRemote) {
					t.Errorf("error %v does not wrap ErrAuth and ErrRemote", err)
				}
				for _, sec := range []Secret{s, other} {
					if strings.Contains(err.Error(), sec.Hex()) {
						t.Errorf("error %q contains a secret", err)
					}
				}
			}
			if !strings.Contains(cerr.Error()+serr.Error(), tc.msg) {
				t.Errorf("errors %q / %q lack %q", cerr, serr, tc.msg)
			}
		})
	}

	t.Run("replayed transcript", func(t *testing.T) {
		_, _, cerr, serr, sent := pair(t, base, base)
		if cerr != nil || serr != nil {
			t.Fatal(cerr, serr)
		}
		if len(sent) != HelloBytes+ProofBytes {
			t.Fatalf("client sent %d bytes, want %d", len(sent), HelloBytes+ProofBytes)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		errc := make(chan error, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				errc <- err
				return
			}
			defer c.Close()
			_, err = Server(c, base)
			errc <- err
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(sent) // the whole recorded client side, without reading
		if err := <-errc; !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "wrong proof") {
			t.Errorf("replay: server = %v, want ErrAuth: wrong proof", err)
		}
	})
}

// TestSealedRejectsTampering: a flipped bit, a replayed record and an
// oversized length break the encrypted connection.
func TestSealedRejectsTampering(t *testing.T) {
	s := secret(t)
	cfg := Config{Secret: s, Proto: ProtoSocket, Encrypt: true}
	for _, tc := range []struct {
		name   string
		mangle func(rec []byte) []byte
		msg    string
	}{
		{"bit flip", func(r []byte) []byte { r[len(r)-1] ^= 1; return r }, "failed to open"},
		{"replayed record", func(r []byte) []byte { return append(r, r...) }, "failed to open"},
		{"huge length", func(r []byte) []byte { return []byte{0x7f, 0xff, 0xff, 0xff} }, "encrypted record of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, sv, cerr, serr, _ := pair(t, cfg, cfg)
			if cerr != nil || serr != nil {
				t.Fatal(cerr, serr)
			}
			// Seal one record with the client's key, then write it mangled
			// on the raw connection.
			cap := &capture{}
			sc := c.(*sealed)
			sc.Conn, cap.Conn = cap, sc.Conn
			sc.Write([]byte("payload"))
			cap.Conn.Write(tc.mangle(cap.buf.Bytes()))
			sv.SetReadDeadline(time.Now().Add(5 * time.Second))
			b := make([]byte, 64)
			var err error
			for err == nil {
				_, err = sv.Read(b)
			}
			if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("server read = %v, want ErrAuth %q", err, tc.msg)
			}
		})
	}
}

type capture struct {
	net.Conn
	buf bytes.Buffer
}

func (c *capture) Write(p []byte) (int, error) { return c.buf.Write(p) }

func TestSecretForms(t *testing.T) {
	s := secret(t)
	p, err := ParseSecret(" " + s.Hex() + "\n")
	if err != nil || !p.Equal(s) || p != s {
		t.Fatalf("ParseSecret(Hex) = %v, %v", p, err)
	}
	for _, bad := range []string{"", "zz", strings.Repeat("ab", 15), strings.Repeat("ab", 65)} {
		if _, err := ParseSecret(bad); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Errorf("ParseSecret(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := sprintf(f, struct{ S Secret }{s}); strings.Contains(out, s.Hex()) || strings.Contains(out, "171") {
			t.Errorf("%s shows the secret: %s", f, out)
		}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "secret")
	os.WriteFile(file, []byte(s.Hex()+"\n"), 0o600)
	if got, err := ReadSecretFile(file); err != nil || got != s {
		t.Errorf("ReadSecretFile(0600) = %v", err)
	}
	os.Chmod(file, 0o640)
	if _, err := ReadSecretFile(file); !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "chmod 600") || strings.Contains(err.Error(), s.Hex()) {
		t.Errorf("ReadSecretFile(0640) = %v, want ErrInvalidArgument naming chmod 600", err)
	}
	if a, b := s.Derive("x"), s.Derive("y"); len(a) != 32 || bytes.Equal(a, b) || bytes.Contains(a, s.Bytes()[:16]) {
		t.Errorf("Derive gives %x and %x", a, b)
	}
	if (Secret{}).Derive("x") != nil {
		t.Error("zero Secret derives a key")
	}
}

func TestGate(t *testing.T) {
	g := NewGate(2)
	if !g.Enter() || !g.Enter() || g.Enter() {
		t.Fatal("gate of 2 admitted a third")
	}
	g.Leave()
	if !g.Enter() || g.Pending() != 2 {
		t.Errorf("after Leave: pending %d", g.Pending())
	}
}

// FuzzParseHello: the handshake parser never panics, and accepts exactly
// the messages encodeHello makes.
func FuzzParseHello(f *testing.F) {
	n := make([]byte, NonceBytes)
	f.Add(encodeHello(ProtoSocket, 0, n))
	f.Add(encodeHello(ProtoBootRoot, flagEncrypt, n))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, flags, nonce, err := ParseHello(b)
		if err != nil {
			return
		}
		if again := encodeHello(p, flags, nonce[:]); !bytes.Equal(again, b) {
			t.Errorf("ParseHello accepted %x, which re-encodes as %x", b, again)
		}
	})
}
