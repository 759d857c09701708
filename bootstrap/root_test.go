package bootstrap

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/auth"
)

// dialAuthed connects to the root of id as a rank does: with the
// handshake when the job has a secret.
func dialAuthed(t *testing.T, id UniqueID) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", id.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if id.Secret.IsZero() {
		return conn
	}
	ac, err := auth.Client(conn, auth.Config{Secret: id.Secret, Proto: auth.ProtoBootRoot, Context: rootContext(id.Magic)})
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	return ac
}

// closeWrite half-closes the TCP connection under c.
func closeWrite(c net.Conn) {
	type underlying interface{ NetConn() net.Conn }
	if u, ok := c.(underlying); ok {
		c = u.NetConn()
	}
	if tcp, ok := c.(*net.TCPConn); ok {
		tcp.CloseWrite()
	}
}

// TestRootRejectsBadClients writes raw bytes to the root: each bad client
// is refused with a specific error naming it, and the job then forms as if
// nothing happened.
func TestRootRejectsBadClients(t *testing.T) {
	id, root, err := newRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(root.close)
	helloHdr := func(magic uint64, length uint32) []byte {
		return rawHeader(header{magic: magic, typ: msgHello, src: 0, length: length})
	}
	tests := []struct {
		name    string
		send    []byte
		wantErr error
		msg     string
	}{
		{"wrong magic", helloHdr(id.Magic^1, 0), errBadMagic, "wrong magic"},
		{"http", []byte("GET / HTTP/1.1\r\nHost: weft\r\n\r\n"), errBadMagic, "not a weft bootstrap client"},
		{"truncated header", helloHdr(id.Magic, 0)[:10], errTruncated, "header: got 10 of 24 bytes"},
		{"nothing", nil, errTruncated, "closed before a header"},
		{"truncated payload", append(helloHdr(id.Magic, 100), 1, 2, 3, 4, 5), errTruncated, "hello payload: got 5 of 100 bytes"},
		{"oversized", helloHdr(id.Magic, MaxMessageSize+1), errTooLarge, "limit 518"},
		{"hello of 64 MiB", helloHdr(id.Magic, MaxMessageSize), errTooLarge, "hello payload of 67108864 bytes, limit 518"},
		{"not a hello", rawHeader(header{magic: id.Magic, typ: msgData}), errBadType, "got data, want hello"},
		{"malformed hello", append(helloHdr(id.Magic, 3), 0, 0, 0), errMalformed, "hello of 3 bytes"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn := dialAuthed(t, id)
			if _, err := conn.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			closeWrite(conn)
			waitFor(t, func() bool { return len(root.rejections()) > i })
			got := root.rejections()[i]
			if !errors.Is(got, tc.wantErr) || !errors.Is(got, hal.ErrRemote) {
				t.Errorf("rejection = %v, want %v and ErrRemote", got, tc.wantErr)
			}
			for _, want := range []string{tc.msg, conn.LocalAddr().String()} {
				if !strings.Contains(got.Error(), want) {
					t.Errorf("rejection %q lacks %q", got, want)
				}
			}
			// The root closed the connection without answering.
			conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			if n, err := conn.Read(make([]byte, 1)); n != 0 || err == nil {
				t.Errorf("root answered a bad client: n=%d err=%v", n, err)
			}
			conn.Close()
		})
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bs, errs := connectRanks(ctx, id, 3)
	noErrors(t, "Connect after bad clients", errs)
	t.Cleanup(func() { closeAll(bs) })
	got, errs := onAll(bs, func(b Bootstrap) ([][]byte, error) { return b.AllGather(ctx, []byte{byte(b.Rank())}) })
	noErrors(t, "AllGather", errs)
	if diff := cmp.Diff([][]byte{{0}, {1}, {2}}, got[2]); diff != "" {
		t.Errorf("AllGather (-want +got):\n%s", diff)
	}
}

func TestRootRefusesRankOutOfRange(t *testing.T) {
	id, root, err := newRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(root.close)
	conn := dialAuthed(t, id)
	defer conn.Close()
	if err := writeFrame(conn, header{magic: id.Magic, typ: msgHello, src: 5}, encodeHello(hello{size: 4, addr: "127.0.0.1:1"})); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	h, payload, err := readFrame(conn, id.Magic)
	if err != nil {
		t.Fatal(err)
	}
	if h.typ != msgReject || h.tag != rejectInvalid || string(payload) != "rank 5 outside [0, 4)" {
		t.Errorf("root answered %v tag %d %q, want a reject of rank 5", h.typ, h.tag, payload)
	}
}

// TestRootAbortsWhenARankLeaves: a rank that registers and then vanishes
// before the others arrive makes the root refuse the whole rendezvous at
// once, instead of leaving the rest to time out.
func TestRootAbortsWhenARankLeaves(t *testing.T) {
	id, root, err := newRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(root.close)
	ctx := testCtx(t)
	waiting := make(chan error, 1)
	go func() { _, err := Connect(ctx, id, 0, 3); waiting <- err }()
	waitFor(t, func() bool { return root.registered.Load() == 1 })

	conn := dialAuthed(t, id)
	if err := writeFrame(conn, header{magic: id.Magic, typ: msgHello, src: 1}, encodeHello(hello{size: 3, addr: "127.0.0.1:1"})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return root.registered.Load() == 2 })
	conn.Close() // rank 1 dies

	select {
	case err := <-waiting:
		if !errors.Is(err, hal.ErrRemote) || !strings.Contains(err.Error(), "rank 1 disconnected from the root") {
			t.Errorf("rank 0 Connect = %v, want ErrRemote naming rank 1", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("rank 0 still waiting after rank 1 left")
	}
	if _, err := Connect(ctx, id, 2, 3); !errors.Is(err, hal.ErrRemote) || !strings.Contains(err.Error(), "rendezvous aborted") {
		t.Errorf("late rank 2 Connect = %v, want ErrRemote: rendezvous aborted", err)
	}
}

// TestMeshRejectsBadMessages writes raw bytes into an established
// connection, from rank 0's end, and checks what rank 1 reports.
func TestMeshRejectsBadMessages(t *testing.T) {
	tests := []struct {
		name    string
		send    func(magic uint64) []byte
		crash   bool // close rank 0's sockets afterwards
		wantErr error
		msg     string
	}{
		{"wrong magic", func(m uint64) []byte { return rawHeader(header{magic: m + 1, typ: msgData}) }, false, errBadMagic, "bad message from rank 0: wrong magic"},
		{"oversized", func(m uint64) []byte { return rawHeader(header{magic: m, typ: msgData, length: MaxMessageSize + 1}) }, false, errTooLarge, "bad message from rank 0"},
		{"bad type", func(m uint64) []byte { return rawHeader(header{magic: m, typ: msgHello}) }, false, errBadType, "hello on a mesh connection"},
		{"wrong source", func(m uint64) []byte { return rawHeader(header{magic: m, typ: msgData, src: 7}) }, false, errMalformed, "claims source rank 7"},
		{"truncated payload", func(m uint64) []byte {
			return append(rawHeader(header{magic: m, typ: msgData, length: 100}), make([]byte, 10)...)
		}, true, errTruncated, "rank 0 disconnected"},
		{"truncated header", func(m uint64) []byte { return rawHeader(header{magic: m, typ: msgData})[:7] }, true, errTruncated, "header: got 7 of 24 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bs := connectTCP(t, 2)
			b0 := bs[0].(*tcpBootstrap)
			if _, err := b0.peers[1].conn.Write(tc.send(b0.magic)); err != nil {
				t.Fatal(err)
			}
			if tc.crash {
				b0.crash()
			}
			select {
			case <-bs[1].Failed():
			case <-time.After(2 * time.Second):
				t.Fatal("rank 1 did not fail")
			}
			err := bs[1].Err()
			if !errors.Is(err, tc.wantErr) || !errors.Is(err, hal.ErrRemote) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("rank 1 Err() = %v, want %v, ErrRemote and %q", err, tc.wantErr, tc.msg)
			}
			if !tc.crash {
				if err := bs[0].Err(); err != nil {
					t.Errorf("sender's Err() = %v, want nil", err)
				}
			}
		})
	}
}

// TestMeshListenerIgnoresStrangers connects a wrong-magic client and a
// garbage client to a rank's mesh listener before the real peer: the
// strangers are dropped and the mesh forms.
func TestMeshListenerIgnoresStrangers(t *testing.T) {
	const magic = 0xabcdef
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := &connector{core: newCore(0, 2, time.Second), magic: magic, start: time.Now()}
	ctx := testCtx(t)
	type res struct {
		conns []net.Conn
		err   error
	}
	done := make(chan res, 1)
	go func() {
		conns, err := c.mesh(ctx, ln, []string{ln.Addr().String(), "127.0.0.1:1"})
		done <- res{conns, err}
	}()

	dial := func(send []byte) net.Conn {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(send); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	strangers := []net.Conn{
		dial(rawHeader(header{magic: magic + 1, typ: msgMeshHello, src: 1, tag: 2})),
		dial([]byte("garbage that is long enough for a header")),
		dial(rawHeader(header{magic: magic, typ: msgMeshHello, src: 0, tag: 2})), // rank 0 must not dial itself
		dial(rawHeader(header{magic: magic, typ: msgMeshHello, src: 1, tag: 3})), // wrong size
	}
	for i, s := range strangers {
		s.SetReadDeadline(time.Now().Add(2 * time.Second))
		if n, err := s.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Errorf("stranger %d got an answer", i)
		}
		s.Close()
	}
	peer := dial(rawHeader(header{magic: magic, typ: msgMeshHello, src: 1, tag: 2}))
	defer peer.Close()
	peer.SetReadDeadline(time.Now().Add(2 * time.Second))
	h, _, err := readFrame(peer, magic)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(header{magic: magic, typ: msgMeshAck, src: 0, tag: 2}, h, cmp.AllowUnexported(header{})); diff != "" {
		t.Errorf("ack (-want +got):\n%s", diff)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.conns[0] != nil || r.conns[1] == nil {
		t.Errorf("mesh connections = %v, want only rank 1's", r.conns)
	}
	r.conns[1].Close()
}
