package ib

import (
	"bytes"
	"testing"

	"github.com/weftccl/weft/internal/ibverbs"
)

// The decoders read the addresses and handles peers exchange. Their fuzz
// tests: no input panics, what is accepted is within the format's bounds,
// and it is the canonical encoding of what is returned (re-encoding gives
// the same bytes: every reserved byte and length is checked).

func FuzzDecodeAddress(f *testing.F) {
	gid := ibverbs.GID{0xfe, 0x80, 15: 1}
	f.Add(encodeAddress(address{link: ibverbs.LinkInfiniBand, mtu: 5, gidIndex: 0, job: jobHash("j"), nonce: 1, rank: 1, nranks: 3, lid: 7, gid: gid, qpns: []uint32{11, 0, 13}}))
	f.Add(encodeAddress(address{link: ibverbs.LinkEthernet, mtu: 3, gidIndex: 3, job: 2, rank: 0, nranks: 1, gid: gid, qpns: []uint32{0}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := decodeAddress(b)
		if err != nil {
			return
		}
		if a.nranks < 1 || a.nranks > maxRanks || a.rank < 0 || a.rank >= a.nranks || len(a.qpns) != a.nranks || a.mtu < 1 || a.mtu > 5 {
			t.Fatalf("accepted an address of rank %d of %d with %d queue pairs, MTU code %d", a.rank, a.nranks, len(a.qpns), a.mtu)
		}
		if e := encodeAddress(a); !bytes.Equal(e, b) {
			t.Fatalf("accepted %x, which is not the encoding %x of what it returned", b, e)
		}
	})
}

func FuzzDecodeHandle(f *testing.F) {
	f.Add(encodeHandle(handle{job: 1, nonce: 2, rank: 3, reg: 4, rkey: 5, addr: 0x7f0000000000, size: 1 << 30}))
	f.Add(encodeHandle(handle{staged: true, addr: 0, size: 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHandle(b)
		if err != nil {
			return
		}
		if h.size < 1 || h.size > 1<<40 || h.addr+uint64(h.size) < h.addr {
			t.Fatalf("accepted a handle of %d bytes at %#x", h.size, h.addr)
		}
		if e := encodeHandle(h); !bytes.Equal(e, b) {
			t.Fatalf("accepted %x, which is not the encoding %x of what it returned", b, e)
		}
	})
}
