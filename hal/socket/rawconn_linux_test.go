package socket

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// spinning reports whether c polls for data before it sleeps.
func spinning(c net.Conn) bool {
	rc, ok := c.(*rawConn)
	return ok && rc.spin > 0
}

// rawPair returns two ends of a loopback TCP connection, detached; the
// second (the reader's) spins for spin and peeks where peek is set.
func rawPair(t *testing.T, spin time.Duration, peek ...bool) (*rawConn, *rawConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		t.Fatal("accept failed")
	}
	a, ok1 := detach(d, 0, false).(*rawConn)
	b, ok2 := detach(s, spin, len(peek) > 0 && peek[0]).(*rawConn)
	if !ok1 || !ok2 {
		t.Fatal("detach kept a plain TCP connection in the netpoller")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// A write larger than the socket's buffers, in several slices, arrives
// whole and in order while the reader reads in small pieces (the writer
// waits for room: EAGAIN, then the netpoller), spinning or not.
func TestRawConnLargeWrite(t *testing.T) {
	for i, spin := range []time.Duration{0, 50 * time.Microsecond, 0, 50 * time.Microsecond} {
		a, b := rawPair(t, spin, i >= 2)
		parts := [][]byte{make([]byte, 48), make([]byte, 6<<20+13), make([]byte, 7)}
		var want []byte
		for i, p := range parts {
			for j := range p {
				p[j] = byte(i*31 + j*7)
			}
			want = append(want, p...)
		}
		errc := make(chan error, 1)
		go func() {
			a.SetWriteDeadline(time.Now().Add(failBound))
			n, err := a.writev(append([][]byte(nil), parts...))
			if err == nil && n != int64(len(want)) {
				err = errors.New("short write")
			}
			errc <- err
		}()
		got := make([]byte, 0, len(want))
		buf := make([]byte, 4096+3)
		b.SetReadDeadline(time.Now().Add(failBound))
		for len(got) < len(want) {
			n, err := b.Read(buf)
			if err != nil {
				t.Fatalf("spin %v: read after %d of %d bytes: %v", spin, len(got), len(want), err)
			}
			got = append(got, buf[:n]...)
		}
		if err := <-errc; err != nil {
			t.Fatalf("spin %v: write: %v", spin, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("spin %v: the bytes read differ from those written", spin)
		}
	}
}

// Deadlines end a read with nothing to read and a write that finds no
// room with a timeout (net.Error.Timeout); Close ends a read asleep in
// the netpoller with net.ErrClosed; the peer's close is io.EOF.
func TestRawConnDeadlinesAndClose(t *testing.T) {
	a, b := rawPair(t, 20*time.Microsecond)
	b.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	start := time.Now()
	_, err := b.Read(make([]byte, 8))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past its deadline: %v, want a timeout", err)
	}
	if time.Since(start) > failBound/2 {
		t.Fatalf("the read deadline took %v", time.Since(start))
	}
	a.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := a.Write(make([]byte, 64<<20)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a write nobody reads: %v, want a timeout", err)
	}
	done := make(chan error, 1)
	_, d := rawPair(t, 0)
	go func() {
		_, err := d.Read(make([]byte, 8))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // asleep in the netpoller by now
	d.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read ended by Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(failBound):
		t.Fatal("Close did not end a sleeping read")
	}
	e, f := rawPair(t, 0)
	e.Close()
	if _, err := f.Read(make([]byte, 8)); err != io.EOF {
		t.Fatalf("read after the peer closed: %v, want io.EOF", err)
	}
}

// With peek, frames of many sizes written one at a time with pauses (so
// the reader waits, and peeks, for most of them) are read whole and in
// order through a bufio.Reader as the receiver reads them (a header, then
// a payload that may be larger than the buffer); every peeked byte is
// consumed by the Read after it, and the peer's close after the last
// frame is io.EOF once that frame is consumed.
func TestRawConnPeek(t *testing.T) {
	a, b := rawPair(t, 50*time.Microsecond, true)
	sizes := []int{0, 1, 8, 144, 4096 - 16, 4096, 4097, 70000, 3, 200}
	errc := make(chan error, 1)
	go func() {
		a.SetWriteDeadline(time.Now().Add(failBound))
		for i, n := range sizes {
			frame := make([]byte, 16+n)
			binary.BigEndian.PutUint64(frame, uint64(i))
			binary.BigEndian.PutUint64(frame[8:], uint64(n))
			for j := range n {
				frame[16+j] = byte(i*13 + j)
			}
			if _, err := a.Write(frame); err != nil {
				errc <- err
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		errc <- a.Close()
	}()
	br := bufio.NewReaderSize(b, 4096)
	b.SetReadDeadline(time.Now().Add(failBound))
	for i, n := range sizes {
		var hdr [16]byte
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			t.Fatalf("frame %d: header: %v", i, err)
		}
		if got, gotN := binary.BigEndian.Uint64(hdr[:]), binary.BigEndian.Uint64(hdr[8:]); got != uint64(i) || gotN != uint64(n) {
			t.Fatalf("frame %d: header says frame %d of %d bytes, want %d bytes", i, got, gotN, n)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(br, payload); err != nil {
			t.Fatalf("frame %d: payload: %v", i, err)
		}
		for j, v := range payload {
			if v != byte(i*13+j) {
				t.Fatalf("frame %d: byte %d is %d, want %d", i, j, v, byte(i*13+j))
			}
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("read after the last frame and the peer's close: %v, want io.EOF", err)
	}
	if b.unread != 0 {
		t.Fatalf("%d peeked bytes left unconsumed at EOF", b.unread)
	}
	if b.peeks < len(sizes)/3 {
		t.Fatalf("%d of %d frames were peeked: the test did not exercise peeking", b.peeks, len(sizes))
	}
	if err := <-errc; err != nil {
		t.Fatalf("writer: %v", err)
	}
}
