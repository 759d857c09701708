package socket

import (
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft/hal"
)

// lone opens rank 0 of a two-rank job with a 64 KiB window exported
// (registration 1); the tests play rank 1 with raw bytes.
func lone(t *testing.T) (*NetDevice, hal.Buffer) {
	t.Helper()
	job := newJob()
	dev, err := hal.Open("host", hal.Config{JobID: job})
	if err != nil {
		t.Fatal(err)
	}
	nd, err := Open(dev, hal.NetConfig{Rank: 0, NRanks: 2, JobID: job}, Options{IfName: "lo"})
	if err != nil {
		t.Fatal(err)
	}
	win, err := dev.Alloc(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nd.ExportPort(win); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		nd.Close()
		win.Free()
		dev.Close()
	})
	return nd, win
}

// validHello is rank 1's handshake to nd: one connection, 4 KiB chunks.
func validHello(nd *NetDevice) hello {
	return hello{index: 0, conns: 1, job: nd.job, nonce: nd.nonce, src: 1, dst: 0, engine: 77, chunk: 4096}
}

func rawDial(t *testing.T, nd *NetDevice) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", nd.ListenAddr(), failBound)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(failBound))
	t.Cleanup(func() { c.Close() })
	return c
}

// readReplyKind reads one reply and returns its kind and reason.
func readReplyKind(t *testing.T, c net.Conn) (replyKind, string) {
	t.Helper()
	k, reason, err := readReply(c)
	if err != nil {
		t.Fatalf("reading the receiver's reply: %v", err)
	}
	return k, reason
}

// TestRefuseHandshakes writes raw handshakes to the listener: each is
// refused with a reply that says why, the refusal names the remote
// address, and the NetDevice carries on (its peers are not failed).
func TestRefuseHandshakes(t *testing.T) {
	nd, _ := lone(t)
	mod := func(f func(*hello)) []byte {
		h := validHello(nd)
		f(&h)
		return encodeHello(h)
	}
	badVersion := encodeHello(validHello(nd))
	badVersion[9] = 9
	cases := []struct {
		name  string
		bytes []byte
		want  string
	}{
		{"not weft", []byte(strings.Repeat("GET / HTTP/1.1\r\nHost: x\r\n", 3)[:helloSize]), "bad magic"},
		{"version", badVersion, "unsupported protocol version 9"},
		{"another job", mod(func(h *hello) { h.job ^= 1 }), "another job"},
		{"another rank", mod(func(h *hello) { h.dst = 1 }), "handshake for rank 1, this is rank 0"},
		{"earlier incarnation", mod(func(h *hello) { h.nonce ^= 2 }), "another incarnation"},
		{"rank outside the job", mod(func(h *hello) { h.src = 5 }), "from rank 5, not a peer"},
		{"from itself", mod(func(h *hello) { h.src = 0 }), "from rank 0, not a peer"},
		{"index beyond conns", mod(func(h *hello) { h.index = 3; h.conns = 2 }), "connection index 3 of 2"},
		{"too many conns", mod(func(h *hello) { h.conns = MaxConns + 1 }), "connections, want 1 to 64"},
		{"chunk too large", mod(func(h *hello) { h.chunk = MaxChunk + 1 }), "chunk of"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn := rawDial(t, nd)
			if _, err := conn.Write(c.bytes); err != nil {
				t.Fatal(err)
			}
			k, reason := readReplyKind(t, conn)
			if k != replyReject || !strings.Contains(reason, c.want) {
				t.Fatalf("reply %d %q, want a refusal mentioning %q", k, reason, c.want)
			}
			local := conn.LocalAddr().String()
			deadline := time.Now().Add(failBound)
			for {
				ref := nd.Refused()
				if len(ref) > 0 && strings.Contains(ref[len(ref)-1].Error(), local) {
					errorMentions(t, ref[len(ref)-1], hal.ErrRemote, local, c.want)
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no refusal naming %s recorded: %v", local, ref)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	// A handshake cut short is recorded too.
	conn := rawDial(t, nd)
	conn.Write([]byte("WEFT"))
	conn.Close()
	deadline := time.Now().Add(failBound)
	for !strings.Contains(lastRefusal(nd), "cut short after 4 of 56 bytes") {
		if time.Now().After(deadline) {
			t.Fatalf("no refusal of the short handshake: %s", lastRefusal(nd))
		}
		time.Sleep(time.Millisecond)
	}
	if err := nd.Err(); err != nil {
		t.Errorf("refused strangers failed the NetDevice: %v", err)
	}
}

func lastRefusal(nd *NetDevice) string {
	ref := nd.Refused()
	if len(ref) == 0 {
		return ""
	}
	return ref[len(ref)-1].Error()
}

// TestRejectMalformedFrames completes a valid handshake as rank 1 and then
// sends one bad frame: the receiver refuses it with a reply that says
// what was wrong, closes the connection, and records the failure of rank
// 1, naming it and its address.
func TestRejectMalformedFrames(t *testing.T) {
	put := func(seq uint64, a, n uint64) []byte {
		b := make([]byte, headerSize)
		encodeHeader(b, frame{kind: framePut, seq: seq, a: a, b: n})
		return append(b, make([]byte, n)...)
	}
	signal := func(seq uint64, sem uint64) []byte {
		b := make([]byte, headerSize)
		encodeHeader(b, frame{kind: frameSignal, seq: seq, a: sem})
		return b
	}
	putSignal := func(seq uint64, a, n uint64) []byte {
		b := make([]byte, headerSize)
		encodeHeader(b, frame{kind: framePutSignal, seq: seq, a: a, b: n, c: 1})
		if n > 4096 {
			return b // the header alone is refused
		}
		b = append(b, make([]byte, n)...)
		tr := make([]byte, trailerSize)
		binary.BigEndian.PutUint64(tr, encodeAddr(1, 4)) // an unaligned semaphore
		return append(b, tr...)
	}
	badMagic := put(0, encodeAddr(1, 0), 8)
	badMagic[0] = 'X'
	badKind := signal(0, encodeAddr(1, 0))
	badKind[4] = 9
	cases := []struct {
		name  string
		bytes []byte
		want  string
	}{
		{"bad magic", badMagic, "bad magic"},
		{"unknown kind", badKind, "unknown kind 9"},
		{"length beyond the registration", put(0, encodeAddr(1, 64<<10-10), 100), "beyond registration 1"},
		{"unknown registration", put(0, encodeAddr(5, 0), 8), "unknown registration id 5"},
		{"untagged address", put(0, 0x7f0000001000, 8), "not a socket-transport address"},
		{"payload beyond the chunk", put(0, encodeAddr(1, 0), 8192)[:headerSize], "chunk size 4096"},
		{"put with signal beyond the chunk", putSignal(0, encodeAddr(1, 0), 8192), "put-with-signal frame: payload of 8192 bytes"},
		{"put with signal to an unaligned semaphore", putSignal(0, encodeAddr(1, 0), 8), "not 8-byte aligned"},
		{"sequence gap", put(5, encodeAddr(1, 0), 8), "sequence gap"},
		{"unaligned semaphore", signal(0, encodeAddr(1, 4)), "not 8-byte aligned"},
		{"cut short", put(0, encodeAddr(1, 0), 100)[:headerSize+10], "connection closed mid-frame"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nd, _ := lone(t)
			conn := rawDial(t, nd)
			if _, err := conn.Write(encodeHello(validHello(nd))); err != nil {
				t.Fatal(err)
			}
			if k, reason := readReplyKind(t, conn); k != replyAccept {
				t.Fatalf("valid handshake answered %d %q", k, reason)
			}
			conn.Write(c.bytes)
			if c.name == "cut short" {
				conn.(*net.TCPConn).CloseWrite()
			}
			k, reason := readReplyKind(t, conn)
			if k != replyReject || !strings.Contains(reason, c.want) {
				t.Fatalf("reply %d %q, want a refusal mentioning %q", k, reason, c.want)
			}
			var b [1]byte
			if _, err := conn.Read(b[:]); err == nil {
				t.Errorf("the connection stayed open after the refusal")
			}
			err := nd.PeerErr(1)
			errorMentions(t, err, nil, "rank 1", conn.LocalAddr().String(), c.want)
			if !errors.Is(err, hal.ErrRemote) && !errors.Is(err, hal.ErrTimeout) {
				t.Errorf("err = %v, want ErrRemote", err)
			}
			if nd.Err() == nil {
				t.Errorf("Err() = nil after rank 1 failed")
			}
		})
	}
}

// TestImportRefusals feeds ImportPort and the engines malformed and
// foreign handles and addresses.
func TestImportRefusals(t *testing.T) {
	rs := openRanks(t, 2, semArea+4096, 4096, Options{})
	s, d := rs[0], rs[1]
	h, err := d.nd.ExportPort(d.win)
	if err != nil {
		t.Fatal(err)
	}
	other := append(hal.Handle(nil), h...)
	other[8] ^= 1 // job hash
	far := append(hal.Handle(nil), h...)
	far[27] = 9 // rank 9
	badVersion := append(hal.Handle(nil), h...)
	badVersion[4] = 2
	cases := []struct {
		name string
		h    hal.Handle
		want error
		text string
	}{
		{"empty", nil, hal.ErrInvalidArgument, "0 bytes"},
		{"short", h[:20], hal.ErrInvalidArgument, "20 bytes"},
		{"host backend handle", hal.Handle(strings.Repeat("x", 40)), hal.ErrInvalidArgument, "bad magic"},
		{"version", badVersion, hal.ErrInvalidArgument, "version 2"},
		{"another job", other, hal.ErrInvalidUsage, "another job"},
		{"rank outside the job", far, hal.ErrInvalidArgument, "rank 9"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.nd.ImportPort(c.h)
			errorMentions(t, err, c.want, c.text)
		})
	}
	if _, err := s.nd.ExportPort(nil); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("export nil: %v, want ErrInvalidArgument", err)
	}
	e := s.eng[1]
	base := s.remote[1].Addr()
	errorMentions(t, e.Put(base+semArea+4000, s.src.Addr(), 200), hal.ErrInvalidArgument, "beyond registration")
	errorMentions(t, e.Put(s.src.Addr(), s.src.Addr(), 8), hal.ErrInvalidArgument, "not the address of a buffer imported")
	errorMentions(t, e.Put(encodeAddr(99, 0), s.src.Addr(), 8), hal.ErrInvalidArgument, "registration 99", "not imported from rank 1")
	errorMentions(t, e.Signal(s.src.Addr(), 0, 0), hal.ErrInvalidArgument, "semaphore")
	errorMentions(t, e.Copy(base, s.src.Addr(), 8), hal.ErrInvalidArgument, "local addresses")
	imp, err := s.nd.ImportPort(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := imp.Free(); err != nil {
		t.Fatal(err)
	}
	errorMentions(t, imp.Free(), hal.ErrInvalidUsage, "already freed")
	// The engine is unharmed by refused calls.
	if err := e.Put(base+semArea, s.src.Addr(), 8); err != nil {
		t.Fatalf("put after refusals: %v", err)
	}
	// Endpoints.
	ep := endpointOf(d)
	ep.Net[Name] = append([]byte(nil), ep.Net[Name]...)
	ep.Net[Name][8] ^= 1
	_, err = s.nd.NewEngine(ep)
	errorMentions(t, err, hal.ErrInvalidUsage, "another job")
	_, err = s.nd.NewEngine(d.dev.Endpoint())
	errorMentions(t, err, hal.ErrInvalidArgument, "carries no socket address")
	ep.Net[Name] = []byte("garbage")
	_, err = s.nd.NewEngine(ep)
	errorMentions(t, err, hal.ErrInvalidArgument, "peer address")
}
