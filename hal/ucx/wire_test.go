package ucx

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// The decoders read bytes that come from peers (side channel, active
// messages, exchanged addresses and handles). Their fuzz tests hold them
// to three properties: no input panics; what they accept is within the
// bounds the format states; and what they accept is the canonical encoding
// of what they return (re-encoding gives the same bytes), so reserved
// bytes and lengths are all checked.

// rkey is a well-framed packed remote key: a map of two memory domains,
// memory type 0, then a 3-byte and a 1-byte transport key.
func rkey() []byte {
	k := binary.NativeEndian.AppendUint64(nil, 0b101)
	return append(k, 0, 3, 'a', 'b', 'c', 1, 'z')
}

func FuzzDecodeAddress(f *testing.F) {
	f.Add(encodeAddress(address{job: jobHash("job"), nonce: 7, rank: 1, nranks: 4, side: "10.0.0.1:4242"}))
	f.Add(encodeAddress(address{job: 1, rank: 0, nranks: 1, side: "h:1"}))
	f.Add([]byte("WUXA"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := decodeAddress(b)
		if err != nil {
			return
		}
		if a.nranks < 1 || a.nranks > maxRanks || a.rank < 0 || a.rank >= a.nranks || a.side == "" {
			t.Fatalf("accepted an address of rank %d of %d, side %q", a.rank, a.nranks, a.side)
		}
		if e := encodeAddress(a); !bytes.Equal(e, b) {
			t.Fatalf("accepted %x, which is not the encoding %x of what it returned", b, e)
		}
	})
}

func FuzzDecodeHandle(f *testing.F) {
	f.Add(encodeHandle(handle{job: 3, nonce: 9, rank: 2, reg: 5, addr: 0x7f0000001000, size: 1 << 20, rkey: rkey()}))
	f.Add(encodeHandle(handle{staged: true, job: 3, rank: 0, addr: 1, size: 1, rkey: rkey()}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHandle(b)
		if err != nil {
			return
		}
		if h.size < 1 || h.size > maxBytes || h.addr+uint64(h.size) < h.addr || len(h.rkey) == 0 || len(h.rkey) > maxRkey {
			t.Fatalf("accepted a handle of %d bytes at %#x with a key of %d bytes", h.size, h.addr, len(h.rkey))
		}
		if checkRkey(h.rkey) != nil {
			t.Fatalf("accepted a handle whose remote key fails checkRkey")
		}
		if e := encodeHandle(h); !bytes.Equal(e, b) {
			t.Fatalf("accepted %x, which is not the encoding %x of what it returned", b, e)
		}
	})
}

func FuzzCheckRkey(f *testing.F) {
	f.Add(rkey())
	f.Add(binary.NativeEndian.AppendUint64(nil, 1))
	f.Fuzz(func(t *testing.T, k []byte) {
		if checkRkey(k) != nil {
			return
		}
		// Accepted: walking the domains' keys lands exactly on the end.
		mds, p := binary.NativeEndian.Uint64(k), 9
		for ; mds != 0; mds &= mds - 1 {
			p += 1 + int(k[p])
		}
		if p != len(k) || k[8] >= 16 {
			t.Fatalf("accepted a key of %d bytes whose framing ends at %d (memory type %d)", len(k), p, k[8])
		}
	})
}

func FuzzDecodeHello(f *testing.F) {
	f.Add(encodeHello(hello{job: 1, clientNonce: 2, serverNonce: 3, client: 4, server: 5, engine: 6}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHello(b)
		if err != nil {
			return
		}
		if h.client < 0 || h.client >= maxRanks || h.server < 0 || h.server >= maxRanks {
			t.Fatalf("accepted a hello from rank %d to rank %d", h.client, h.server)
		}
		if e := encodeHello(h); !bytes.Equal(e, b) {
			t.Fatalf("accepted %x, which is not the encoding %x of what it returned", b, e)
		}
	})
}

func FuzzDecodeReplyHeader(f *testing.F) {
	f.Add(encodeReply(true, 99, []byte("worker address"))[:replyHeader])
	f.Add(encodeReply(false, 0, []byte("job mismatch"))[:replyHeader])
	f.Fuzz(func(t *testing.T, b []byte) {
		accept, token, n, err := decodeReplyHeader(b)
		if err != nil {
			return
		}
		if n < 0 || n > maxReplyBody {
			t.Fatalf("accepted a reply announcing %d body bytes", n)
		}
		if e := encodeReply(accept, token, make([]byte, n))[:replyHeader]; !bytes.Equal(e, b) {
			t.Fatalf("accepted %x, which is not the header %x of what it returned", b, e)
		}
	})
}

func FuzzDecodeSignal(f *testing.F) {
	f.Add(encodeSignal(signalMsg{kind: kindSignal, rank: 1, engine: 2, token: 3, seq: 4, sem: 0x1000, cnt: 0x2000, count: 5}))
	f.Add(encodeSignal(signalMsg{kind: kindRanges, rank: 0, token: 1, ranges: []span{{0x1000, 64}, {0x9000, 1 << 20}}}))
	f.Add(encodeSignal(signalMsg{kind: kindPutSignal, rank: 1, token: 1, sem: 0x1000, ranges: []span{{0x1000, 64}}, putDst: 0x4000, put: []byte("eight by")}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeSignal(b)
		if err != nil {
			return
		}
		if m.rank < 0 || m.rank >= maxRanks || len(m.ranges) > maxRanges || (m.kind != kindSignal && m.kind != kindRanges && m.kind != kindPutSignal) {
			t.Fatalf("accepted a signal of kind %d from rank %d with %d ranges", m.kind, m.rank, len(m.ranges))
		}
		if (m.kind == kindPutSignal) != (len(m.put) > 0) || len(m.put) > maxInline || m.putDst+uint64(len(m.put)) < m.putDst {
			t.Fatalf("accepted a signal of kind %d carrying a put of %d bytes at %#x", m.kind, len(m.put), m.putDst)
		}
		for i, r := range m.ranges {
			if r.n == 0 || r.n > maxBytes || r.addr+r.n < r.addr {
				t.Fatalf("accepted range %d of %d bytes at %#x", i, r.n, r.addr)
			}
		}
		if e := encodeSignal(m); !bytes.Equal(e, b) {
			t.Fatalf("accepted %x, which is not the encoding %x of what it returned", b, e)
		}
	})
}
