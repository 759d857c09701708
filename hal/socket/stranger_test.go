package socket

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftccl/weft/internal/auth"
)

// syncBuffer collects log output from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStrangerCannotWrite attacks rank 0's listener of a two-rank job with
// a secret, the way issue 18 did from outside: garbage, an old-style
// handshake with the right job hash and nonce followed by a put of a huge
// length, a replayed handshake transcript of a legitimate connection, a
// handshake with a guessed secret, and a flood of idle connections. No
// byte lands in the window, every stranger is logged by its address, no
// message holds the secret, the job hash or the nonce, memory stays
// bounded, and the job's own put then arrives with 0 wrong bytes.
func TestStrangerCannotWrite(t *testing.T) {
	for _, encrypt := range []bool{false, true} {
		t.Run(fmt.Sprintf("encrypt=%v", encrypt), func(t *testing.T) { strangerTest(t, encrypt) })
	}
}

func strangerTest(t *testing.T, encrypt bool) {
	secret, err := auth.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	key := secret.Derive("network test")
	logs := &syncBuffer{}
	opts := Options{Chunk: 4096, Conns: 2, Timeout: 2 * time.Second, Encrypt: encrypt,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	const winBytes = 64 << 10
	rs := openRanksWith(t, 2, winBytes, winBytes, opts, key)
	nd := rs[0].nd
	// The engines openRanks made are closed: the strangers go first.
	for _, x := range rs {
		for p, e := range x.eng {
			if e != nil {
				e.Close()
				x.eng[p] = nil
			}
		}
	}
	win := rs[0].win.Host()
	clear(win)
	addr := nd.ListenAddr()
	var strangers []string // local addresses of the strangers
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", addr, failBound)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(failBound))
		strangers = append(strangers, c.LocalAddr().String())
		return c
	}
	// The old attack: the right job hash and nonce (learned from an old
	// rejection message), then a put of every byte of the window, then
	// a header announcing 2^40 bytes.
	oldHello := encodeHello(hello{index: 0, conns: 1, job: nd.job, nonce: nd.nonce, src: 1, dst: 0, engine: 9, chunk: MaxChunk})
	put := make([]byte, headerSize)
	encodeHeader(put, frame{kind: framePut, seq: 0, a: encodeAddr(1, 0), b: 4096})
	attack := append(append(append([]byte(nil), oldHello...), put...), bytes.Repeat([]byte{0xEE}, 4096)...)
	huge := make([]byte, headerSize)
	encodeHeader(huge, frame{kind: framePut, seq: 1, a: encodeAddr(1, 0), b: 1 << 40})
	attack = append(attack, huge...)

	// A legitimate handshake, recorded: what a stranger on the path sees.
	var transcript bytes.Buffer
	{
		c := dial()
		rec := &recordConn{Conn: c, w: &transcript}
		if _, err := auth.Client(rec, nd.authConfig(0)); err != nil {
			t.Fatalf("legitimate handshake: %v", err)
		}
		c.Close()
	}
	garbage := make([]byte, 4096)
	rand.Read(garbage)
	for name, payload := range map[string][]byte{
		"garbage":   garbage,
		"old hello": attack,
		"replay":    append(transcript.Bytes(), attack...),
	} {
		c := dial()
		c.Write(payload)
		c.SetReadDeadline(time.Now().Add(failBound))
		reply, _ := readAll(c)
		if bytes.Contains(reply, []byte("WSKR")) {
			t.Errorf("%s: the listener answered a stranger with a transport reply %q", name, reply)
		}
		c.Close()
	}
	// Guessed secrets.
	for range 3 {
		wrong, _ := auth.NewSecret()
		c := dial()
		cfg := nd.authConfig(0)
		cfg.Secret, _ = auth.SecretFromBytes(wrong.Derive("network test"))
		if _, err := auth.Client(c, cfg); err == nil {
			t.Error("a handshake with a guessed secret succeeded")
		}
		c.Close()
	}
	// A flood of idle connections: at most auth.MaxPending are held.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	refusedBefore := strings.Count(logs.String(), "connection refused")
	var flood []net.Conn
	for range 4 * auth.MaxPending {
		c, err := net.DialTimeout("tcp", addr, failBound)
		if err != nil {
			t.Fatal(err)
		}
		flood = append(flood, c)
	}
	deadline := time.Now().Add(failBound)
	for nd.gate.Pending() < auth.MaxPending && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if p := nd.gate.Pending(); p > auth.MaxPending {
		t.Errorf("%d unauthenticated connections pending, cap %d", p, auth.MaxPending)
	}
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 8<<20 {
		t.Errorf("heap grew by %d bytes under %d hostile connections", grew, len(flood))
	}
	for _, c := range flood {
		c.Close()
	}
	// Wait until every flood connection is refused (the listener may still
	// be accepting the flood's backlog: under load, a legitimate connection
	// could otherwise meet a gate still full of it) and the gate is free.
	deadline = time.Now().Add(failBound)
	for strings.Count(logs.String(), "connection refused") < refusedBefore+len(flood) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	for nd.gate.Pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := bytes.Count(win, []byte{0}); n != winBytes {
		t.Fatalf("a stranger wrote into rank 0's window: %d of %d bytes changed", winBytes-n, winBytes)
	}

	// The job goes on: rank 1 puts its whole source into rank 0's window.
	src := rs[1].src.Host()
	fill(src, 7)
	e, err := rs[1].nd.NewEngine(endpointOf(rs[0]))
	if err != nil {
		t.Fatalf("engine after the strangers: %v", err)
	}
	rs[1].eng[0] = e
	dst := rs[1].remote[0].Addr()
	if err := e.Put(dst, rs[1].src.Addr(), winBytes-8); err != nil {
		t.Fatal(err)
	}
	if err := e.Signal(dst+winBytes-8, 0, 1); err != nil {
		t.Fatal(err)
	}
	waitWord(t, rs[0].win, winBytes-8, 1, nd.Err)
	wrong := 0
	for i := range winBytes - 8 {
		if win[i] != src[i] {
			wrong++
		}
	}
	if wrong != 0 {
		t.Errorf("%d wrong bytes in rank 0's window after the job's put", wrong)
	}

	// Every stranger logged by its address; nothing secret anywhere.
	text := logs.String()
	for _, err := range nd.Refused() {
		text += "\n" + err.Error()
	}
	for _, s := range strangers[1:] { // [0] is the legitimate recording
		if !strings.Contains(logs.String(), s) {
			t.Errorf("stranger %s is not in the log:\n%s", s, logs.String())
		}
	}
	if !strings.Contains(text, "authentication failed from") {
		t.Errorf("no \"authentication failed from\" in the log:\n%s", text)
	}
	for what, v := range map[string]string{
		"secret": secret.Hex(), "key": fmt.Sprintf("%x", key),
		"job hash": fmt.Sprintf("%x", nd.job), "job hash (decimal)": fmt.Sprint(nd.job),
		"nonce": fmt.Sprintf("%x", nd.nonce), "nonce (decimal)": fmt.Sprint(nd.nonce),
	} {
		if strings.Contains(text, v) {
			t.Errorf("a log line or error holds the %s", what)
		}
	}
}

type recordConn struct {
	net.Conn
	w *bytes.Buffer
}

func (r *recordConn) Write(p []byte) (int, error) { r.w.Write(p); return r.Conn.Write(p) }

// readAll reads until the connection closes or its deadline passes.
func readAll(c net.Conn) ([]byte, error) {
	var out []byte
	b := make([]byte, 4096)
	for {
		n, err := c.Read(b)
		out = append(out, b[:n]...)
		if err != nil {
			return out, err
		}
	}
}
