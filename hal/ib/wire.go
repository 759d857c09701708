package ib

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"github.com/weftccl/weft/internal/ibverbs"
)

// Address layout (big-endian): magic "WIBA", version, link layer, active
// MTU, GID index, job hash (8), nonce (8), rank (4), ranks (4), LID (2),
// GID (16), then one queue-pair number (4) per rank: the QP this rank
// keeps for that peer (0 for itself).
//
// Handle layout (big-endian, 56 bytes): magic "WIBH", version, flags
// (bit 0: staged through a host bounce region), 2 reserved, job hash (8),
// nonce (8), rank (4), registration id (4), rkey (4), 4 reserved, remote
// address (8), size (8).
const (
	addressMagic = 0x57494241 // "WIBA"
	handleMagic  = 0x57494248 // "WIBH"
	version      = 1
	addrHeader   = 4 + 4 + 8 + 8 + 4 + 4 + 2 + 16
	handleSize   = 56
	maxRanks     = 1 << 16
)

func jobHash(job string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(job))
	return h.Sum64()
}

type address struct {
	link, mtu, gidIndex int
	job, nonce          uint64
	rank, nranks        int
	lid                 uint16
	gid                 ibverbs.GID
	qpns                []uint32
}

func encodeAddress(a address) []byte {
	b := binary.BigEndian.AppendUint32(nil, addressMagic)
	b = append(b, version, byte(a.link), byte(a.mtu), byte(a.gidIndex))
	b = binary.BigEndian.AppendUint64(b, a.job)
	b = binary.BigEndian.AppendUint64(b, a.nonce)
	b = binary.BigEndian.AppendUint32(b, uint32(a.rank))
	b = binary.BigEndian.AppendUint32(b, uint32(a.nranks))
	b = binary.BigEndian.AppendUint16(b, a.lid)
	b = append(b, a.gid[:]...)
	for _, q := range a.qpns {
		b = binary.BigEndian.AppendUint32(b, q)
	}
	return b
}

func decodeAddress(b []byte) (address, error) {
	var a address
	if len(b) < addrHeader {
		return a, fmt.Errorf("ib address of %d bytes, want at least %d", len(b), addrHeader)
	}
	if m := binary.BigEndian.Uint32(b); m != addressMagic {
		return a, fmt.Errorf("bad magic %#08x in an ib address (the address of another network?)", m)
	}
	if b[4] != version {
		return a, fmt.Errorf("ib address version %d, want %d", b[4], version)
	}
	a.link, a.mtu, a.gidIndex = int(b[5]), int(b[6]), int(b[7])
	a.job = binary.BigEndian.Uint64(b[8:])
	a.nonce = binary.BigEndian.Uint64(b[16:])
	a.rank = int(binary.BigEndian.Uint32(b[24:]))
	a.nranks = int(binary.BigEndian.Uint32(b[28:]))
	a.lid = binary.BigEndian.Uint16(b[32:])
	copy(a.gid[:], b[34:50])
	if a.nranks < 1 || a.nranks > maxRanks || a.rank >= a.nranks {
		return a, fmt.Errorf("ib address of rank %d of %d ranks", a.rank, a.nranks)
	}
	if len(b) != addrHeader+4*a.nranks {
		return a, fmt.Errorf("ib address of %d bytes for %d ranks, want %d", len(b), a.nranks, addrHeader+4*a.nranks)
	}
	if a.mtu < 1 || a.mtu > 5 || (a.link != ibverbs.LinkInfiniBand && a.link != ibverbs.LinkEthernet) {
		return a, fmt.Errorf("ib address with link layer %d and MTU code %d", a.link, a.mtu)
	}
	a.qpns = make([]uint32, a.nranks)
	for i := range a.qpns {
		a.qpns[i] = binary.BigEndian.Uint32(b[addrHeader+4*i:])
	}
	return a, nil
}

type handle struct {
	staged    bool
	job       uint64
	nonce     uint64
	rank      int
	reg, rkey uint32
	addr      uint64
	size      int64
}

func encodeHandle(h handle) []byte {
	b := binary.BigEndian.AppendUint32(nil, handleMagic)
	flags := byte(0)
	if h.staged {
		flags = 1
	}
	b = append(b, version, flags, 0, 0)
	b = binary.BigEndian.AppendUint64(b, h.job)
	b = binary.BigEndian.AppendUint64(b, h.nonce)
	b = binary.BigEndian.AppendUint32(b, uint32(h.rank))
	b = binary.BigEndian.AppendUint32(b, h.reg)
	b = binary.BigEndian.AppendUint32(b, h.rkey)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint64(b, h.addr)
	b = binary.BigEndian.AppendUint64(b, uint64(h.size))
	return b
}

func decodeHandle(b []byte) (handle, error) {
	var h handle
	if len(b) != handleSize {
		return h, fmt.Errorf("ib handle of %d bytes, want %d", len(b), handleSize)
	}
	if m := binary.BigEndian.Uint32(b); m != handleMagic {
		return h, fmt.Errorf("bad magic %#08x in an ib handle (a handle of another backend?)", m)
	}
	if b[4] != version || b[5] > 1 || b[6]|b[7] != 0 || binary.BigEndian.Uint32(b[36:]) != 0 {
		return h, fmt.Errorf("ib handle of version %d with flags %#x or reserved bytes set", b[4], b[5])
	}
	h.staged = b[5] == 1
	h.job = binary.BigEndian.Uint64(b[8:])
	h.nonce = binary.BigEndian.Uint64(b[16:])
	h.rank = int(binary.BigEndian.Uint32(b[24:]))
	h.reg = binary.BigEndian.Uint32(b[28:])
	h.rkey = binary.BigEndian.Uint32(b[32:])
	h.addr = binary.BigEndian.Uint64(b[40:])
	size := binary.BigEndian.Uint64(b[48:])
	if size == 0 || size > 1<<40 || h.addr+size < h.addr {
		return h, fmt.Errorf("ib handle of %d bytes at %#x", size, h.addr)
	}
	h.size = int64(size)
	return h, nil
}
