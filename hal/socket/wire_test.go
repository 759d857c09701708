package socket

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The address layout is netcores (netcore.TestAddr tests it).

func TestRoundTrips(t *testing.T) {
	h := hello{index: 3, conns: 4, job: 0xfeed, nonce: 0xbeef, src: 7, dst: 2, engine: 99, chunk: 1 << 19}
	gotH, err := decodeHello(encodeHello(h))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(h, gotH, cmp.AllowUnexported(hello{})); diff != "" {
		t.Errorf("hello (-want +got):\n%s", diff)
	}
	f := frame{kind: frameSignal, seq: 1 << 40, a: encodeAddr(3, 8), b: encodeAddr(3, 16), c: 12}
	b := make([]byte, headerSize)
	encodeHeader(b, f)
	gotF, err := decodeHeader(b, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(f, gotF, cmp.AllowUnexported(frame{})); diff != "" {
		t.Errorf("frame (-want +got):\n%s", diff)
	}
	hd := handle{Job: 1, Nonce: 2, Rank: 3, Reg: 4, Size: 5}
	gotHd, err := decodeHandle(encodeHandle(hd))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(hd, gotHd, cmp.AllowUnexported(handle{})); diff != "" {
		t.Errorf("handle (-want +got):\n%s", diff)
	}
	a := address{job: 1, nonce: 2, rank: 3, addrs: []string{"10.0.0.1:4000", "[fd00::2]:4001"}}
	gotA, err := decodeAddress(encodeAddress(a))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, gotA, cmp.AllowUnexported(address{})); diff != "" {
		t.Errorf("address (-want +got):\n%s", diff)
	}
	r := encodeReply(replyReject, "no")
	k, n, err := decodeReplyHeader(r[:replySize])
	if err != nil || k != replyReject || n != 2 || string(r[replySize:]) != "no" {
		t.Errorf("reply: %d %d %v %q", k, n, err, r[replySize:])
	}
}

// TestDecodeRefusals lists what each decoder refuses.
func TestDecodeRefusals(t *testing.T) {
	set := func(b []byte, i int, v byte) []byte {
		b = bytes.Clone(b)
		b[i] = v
		return b
	}
	good := encodeHello(hello{conns: 1, chunk: 4096})
	put := make([]byte, headerSize)
	encodeHeader(put, frame{kind: framePut, a: encodeAddr(1, 0), b: 10})
	bye := make([]byte, headerSize)
	encodeHeader(bye, frame{kind: frameBye})
	cases := []struct {
		name string
		err  error
		want error
		text string
	}{
		{"hello short", second(decodeHello(good[:10])), errMalformed, "10 bytes"},
		{"hello magic", second(decodeHello(set(good, 0, 'X'))), errMagic, "not a weft"},
		{"hello reserved", second(decodeHello(set(good, 15, 1))), errMalformed, "reserved"},
		{"hello zero conns", second(decodeHello(set(good, 13, 0))), errMalformed, "0 connections"},
		{"hello small chunk", second(decodeHello(encodeHello(hello{conns: 1, chunk: 10}))), errMalformed, "chunk of 10"},
		{"put empty", second(decodeHeader(set(put, 31, 0), 4096)), errMalformed, "payload of 0 bytes"},
		{"put beyond chunk", second(decodeHeader(put, 8)), errMalformed, "chunk size 8"},
		{"frame reserved", second(decodeHeader(set(put, 6, 1), 4096)), errMalformed, "reserved"},
		{"bye with fields", second(decodeHeader(set(bye, 39, 1), 4096)), errMalformed, "bye"},
		{"handle reg 0", second(decodeHandle(encodeHandle(handle{Size: 1}))), errMalformed, "registration id 0"},
		{"handle size 0", second(decodeHandle(encodeHandle(handle{Reg: 1}))), errMalformed, "size 0"},
		{"address no listen addr", second(decodeAddress(encodeAddress(address{}))), errMalformed, "0 listen addresses"},
		{"address port 0", second(decodeAddress(encodeAddress(address{addrs: []string{"1.2.3.4:0"}}))), errMalformed, "not host:port"},
		{"address trailing", second(decodeAddress(append(encodeAddress(address{addrs: []string{"a:1"}}), 0))), errMalformed, "trailing"},
		{"reply kind", second3(decodeReplyHeader(set(encodeReply(replyAccept, ""), 4, 9))), errMalformed, "kind 9"},
		{"reply reason on accept", second3(decodeReplyHeader(set(encodeReply(replyAccept, ""), 11, 3))), errMalformed, "payload"},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) || !strings.Contains(fmtErr(c.err), c.text) {
			t.Errorf("%s: err = %v, want %v mentioning %q", c.name, c.err, c.want, c.text)
		}
	}
}

func second[T any](_ T, err error) error          { return err }
func second3[A, B any](_ A, _ B, err error) error { return err }
func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// The decoders take bytes from the network: they must never panic, and
// what they accept must encode back to the same bytes.

func FuzzDecodeHello(f *testing.F) {
	f.Add(encodeHello(hello{conns: 2, index: 1, chunk: 1 << 19, src: 1}))
	f.Add([]byte("WEFTSOCK"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHello(b)
		if err == nil && !bytes.Equal(encodeHello(h), b) {
			t.Fatalf("accepted %x, re-encodes as %x", b, encodeHello(h))
		}
	})
}

func FuzzDecodeHeader(f *testing.F) {
	b := make([]byte, headerSize)
	encodeHeader(b, frame{kind: framePut, seq: 3, a: encodeAddr(1, 5), b: 100})
	f.Add(b, 4096)
	f.Fuzz(func(t *testing.T, b []byte, chunk int) {
		fr, err := decodeHeader(b, chunk)
		if err != nil {
			return
		}
		out := make([]byte, headerSize)
		encodeHeader(out, fr)
		if !bytes.Equal(out, b) {
			t.Fatalf("accepted %x, re-encodes as %x", b, out)
		}
		if fr.kind == framePut && (fr.b == 0 || fr.b > uint64(chunk)) {
			t.Fatalf("accepted a put of %d bytes with chunk %d", fr.b, chunk)
		}
	})
}

func FuzzDecodeHandle(f *testing.F) {
	f.Add(encodeHandle(handle{Job: 1, Nonce: 2, Rank: 3, Reg: 4, Size: 5}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHandle(b)
		if err == nil && !bytes.Equal(encodeHandle(h), b) {
			t.Fatalf("accepted %x, re-encodes as %x", b, encodeHandle(h))
		}
	})
}

func FuzzDecodeAddress(f *testing.F) {
	f.Add(encodeAddress(address{job: 1, nonce: 2, rank: 3, addrs: []string{"127.0.0.1:5000"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := decodeAddress(b)
		if err == nil && !bytes.Equal(encodeAddress(a), b) {
			t.Fatalf("accepted %x, re-encodes as %x", b, encodeAddress(a))
		}
	})
}

func FuzzDecodeReply(f *testing.F) {
	f.Add(encodeReply(replyReject, "why")[:replySize])
	f.Fuzz(func(t *testing.T, b []byte) {
		k, n, err := decodeReplyHeader(b)
		if err == nil && (k < replyAccept || k > replyClosing || n > maxReason) {
			t.Fatalf("accepted kind %d length %d", k, n)
		}
	})
}
