package bootstrap

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weftccl/weft/hal"
)

const testMagic = 0x1122334455667788

func rawHeader(h header) []byte {
	b := make([]byte, headerSize)
	encodeHeader(b, h)
	return b
}

func TestDecodeHeader(t *testing.T) {
	good := header{magic: testMagic, typ: msgData, src: 3, tag: 42, length: 1000}
	withVersion := func(v byte) []byte { b := rawHeader(good); b[9] = v; return b }
	tests := []struct {
		name    string
		in      []byte
		want    header
		wantErr error
		msg     string // substring of the error
	}{
		{name: "valid", in: rawHeader(good), want: good},
		{name: "max length", in: rawHeader(header{magic: testMagic, typ: msgData, length: MaxMessageSize}),
			want: header{magic: testMagic, typ: msgData, length: MaxMessageSize}},
		{name: "bye with a payload", in: rawHeader(header{magic: testMagic, typ: msgBye, length: 1}), wantErr: errTooLarge, msg: "bye payload of 1 bytes, limit 0"},
		{name: "hello too long", in: rawHeader(header{magic: testMagic, typ: msgHello, length: 519}), wantErr: errTooLarge, msg: "limit 518"},
		{name: "empty", in: nil, wantErr: errTruncated, msg: "header of 0 bytes, want 24"},
		{name: "short", in: rawHeader(good)[:23], wantErr: errTruncated, msg: "header of 23 bytes"},
		{name: "wrong magic", in: rawHeader(header{magic: 0xdead, typ: msgData}), wantErr: errBadMagic,
			msg: "wrong magic (a process of another job"},
		{name: "http request", in: []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), wantErr: errBadMagic},
		{name: "type zero", in: rawHeader(header{magic: testMagic}), wantErr: errBadType, msg: "unknown message type 0"},
		{name: "type past end", in: rawHeader(header{magic: testMagic, typ: msgTypeEnd}), wantErr: errBadType},
		{name: "version", in: withVersion(2), wantErr: errVersion, msg: "version 2, want 1"},
		{name: "oversized", in: rawHeader(header{magic: testMagic, typ: msgData, length: MaxMessageSize + 1}), wantErr: errTooLarge,
			msg: "payload of 67108865 bytes, limit 67108864"},
		{name: "max uint32 length", in: rawHeader(header{magic: testMagic, typ: msgData, length: 1<<32 - 1}), wantErr: errTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeHeader(tc.in, testMagic)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("decodeHeader error = %v, want %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q lacks %q", err, tc.msg)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(header{})); diff != "" {
				t.Errorf("header (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadFrame(t *testing.T) {
	frame := func(h header, payload []byte) []byte {
		var b bytes.Buffer
		if err := writeFrame(&b, h, payload); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	full := frame(header{magic: testMagic, typ: msgData, src: 1, tag: 9}, []byte("payload"))
	tests := []struct {
		name        string
		in          []byte
		wantHeader  header
		wantPayload []byte
		wantErr     error
		msg         string
	}{
		{name: "whole", in: full, wantHeader: header{magic: testMagic, typ: msgData, src: 1, tag: 9, length: 7}, wantPayload: []byte("payload")},
		{name: "empty payload", in: frame(header{magic: testMagic, typ: msgBarrier}, nil),
			wantHeader: header{magic: testMagic, typ: msgBarrier}, wantPayload: []byte{}},
		{name: "clean end", in: nil, wantErr: io.EOF},
		{name: "header cut", in: full[:10], wantErr: errTruncated, msg: "header: got 10 of 24 bytes"},
		{name: "payload cut", in: full[:headerSize+3], wantErr: errTruncated, msg: "data payload: got 3 of 7 bytes"},
		{name: "payload missing", in: full[:headerSize], wantErr: errTruncated, msg: "got 0 of 7 bytes"},
		{name: "oversized", in: rawHeader(header{magic: testMagic, typ: msgData, length: MaxMessageSize + 1}), wantErr: errTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, p, err := readFrame(bytes.NewReader(tc.in), testMagic)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("readFrame error = %v, want %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q lacks %q", err, tc.msg)
			}
			if diff := cmp.Diff(tc.wantHeader, h, cmp.AllowUnexported(header{})); diff != "" {
				t.Errorf("header (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPayload, p); diff != "" {
				t.Errorf("payload (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPayloadCodecs(t *testing.T) {
	h := hello{size: 8, addr: "10.0.0.7:41234"}
	got, err := decodeHello(encodeHello(h))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(h, got, cmp.AllowUnexported(hello{})); diff != "" {
		t.Errorf("hello round trip (-want +got):\n%s", diff)
	}
	addrs := []string{"127.0.0.1:1000", "[::1]:2000", "node7:3000"}
	gotAddrs, err := decodePeers(encodePeers(addrs), 3)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(addrs, gotAddrs); diff != "" {
		t.Errorf("peers round trip (-want +got):\n%s", diff)
	}

	bad := []struct {
		name string
		err  error
	}{
		{"short hello", func() error { _, err := decodeHello([]byte{0, 0}); return err }()},
		{"zero size", func() error { _, err := decodeHello(encodeHello(hello{size: 0, addr: "a:1"})); return err }()},
		{"huge size", func() error { _, err := decodeHello(encodeHello(hello{size: maxRanks + 1, addr: "a:1"})); return err }()},
		{"no port", func() error { _, err := decodeHello(encodeHello(hello{size: 2, addr: "host"})); return err }()},
		{"trailing", func() error { _, err := decodeHello(append(encodeHello(h), 0)); return err }()},
		{"peers count", func() error { _, err := decodePeers(encodePeers(addrs), 4); return err }()},
		{"peers cut", func() error { b := encodePeers(addrs); _, err := decodePeers(b[:len(b)-2], 3); return err }()},
	}
	for _, tc := range bad {
		if !errors.Is(tc.err, errMalformed) {
			t.Errorf("%s: error = %v, want errMalformed", tc.name, tc.err)
		}
	}
}

func TestUniqueIDText(t *testing.T) {
	id := UniqueID{Magic: 0x0123456789abcdef, Addr: "127.0.0.1:29500"}
	s := id.String()
	if want := "0123456789abcdef3132372e302e302e313a3239353030"; s != want {
		t.Errorf("String() = %s, want %s", s, want)
	}
	got, err := ParseUniqueID(s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(id, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "zz", "0123456789abcdef", "0123456789abcdef" + "686f7374"} {
		if _, err := ParseUniqueID(bad); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Errorf("ParseUniqueID(%q) error = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// FuzzDecodeHeader checks that the decoder never panics, accepts only
// headers within the limits, and that what it accepts re-encodes to the
// same bytes.
func FuzzDecodeHeader(f *testing.F) {
	f.Add(rawHeader(header{magic: testMagic, typ: msgData, src: 1, tag: 2, length: 3}))
	f.Add(rawHeader(header{magic: testMagic, typ: msgHello, length: MaxMessageSize + 1}))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHeader(b, testMagic)
		if err != nil {
			return
		}
		if h.length > MaxMessageSize || h.typ == 0 || h.typ >= msgTypeEnd || h.magic != testMagic {
			t.Fatalf("accepted out-of-range header %+v", h)
		}
		if re := rawHeader(h); !bytes.Equal(re[:10], b[:10]) || !bytes.Equal(re[12:], b[12:headerSize]) {
			t.Fatalf("re-encoded %x, decoded from %x", re, b[:headerSize])
		}
	})
}

func FuzzDecodePeers(f *testing.F) {
	f.Add(encodePeers([]string{"127.0.0.1:1", "[::1]:2"}), 2)
	f.Add([]byte{0, 0, 0, 1, 0xff, 0xff}, 1)
	f.Fuzz(func(t *testing.T, b []byte, size int) {
		if size < 0 || size > 1<<16 {
			return
		}
		addrs, err := decodePeers(b, size)
		if err == nil && len(addrs) != size {
			t.Fatalf("decoded %d addresses, want %d", len(addrs), size)
		}
	})
}

func FuzzParseUniqueID(f *testing.F) {
	f.Add(UniqueID{Magic: 1, Addr: "127.0.0.1:5"}.String())
	f.Add("nothex")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseUniqueID(s)
		if err != nil {
			return
		}
		again, err := ParseUniqueID(id.String())
		if err != nil || again != id {
			t.Fatalf("round trip of %q: %+v, %v", s, again, err)
		}
	})
}
