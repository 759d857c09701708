package ucx

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
)

// Wire formats (big-endian). Every decoder checks lengths, magic, version,
// reserved bytes and ranges: these bytes come from peers.
//
// Address (Endpoint.Net["ucx"]), 32 bytes + the side channel's host:port:
//
//	[0:4) "WUXA" [4] version [5:8) zero [8:16) job hash [16:24) nonce
//	[24:28) rank [28:32) ranks [32:34) length of host:port, then host:port
//
// Handle (ExportPort), 56 bytes + the packed remote key:
//
//	[0:4) "WUXH" [4] version [5] flags (bit 0: staged through host memory)
//	[6:8) zero [8:16) job hash [16:24) nonce [24:28) rank
//	[28:32) registration id [32:40) remote address [40:48) size
//	[48:50) length of the packed key (1 to 4096) [50:56) zero, then the key
//
// Hello (side channel, client → server after authentication), 48 bytes:
//
//	[0:4) "WUXC" [4] version [5:8) zero [8:16) job hash
//	[16:24) client nonce [24:32) server nonce [32:36) client rank
//	[36:40) server rank [40:44) engine id [44:48) zero
//
// Reply (server → client), 16 bytes + body (≤ 64 KiB):
//
//	[0:4) "WUXR" [4] 0 accept, 1 reject [5] zero [6:8) body length
//	[8:16) session token; body: accept, the server's UCX worker address;
//	reject, the reason in words
//
// After the reply the side channel carries one 8-byte word each way at
// most: "WUXBYE\0\0" and the number of signals the engine sent (8)
// (client: the engine closes) and "WUXCLOSE" (server: its NetDevice
// closes).
//
// Signal (UCP active message), 56 bytes + 16 per range (+ a put's bytes):
//
//	[0:4) "WUXS" [4] version [5] kind: 1 signal, 2 ranges only, 3 put
//	and signal [6:8) ranges (≤ maxRanges) [8:12) source rank [12:16)
//	engine id [16:24) session token [24:32) sequence number [32:40)
//	semaphore [40:48) count word or 0 [48:56) count, then per range:
//	remote address (8), bytes (8) of a staged registration to copy to
//	device memory before the semaphore; kind 3 then carries a put: its
//	remote address (8) and its bytes (1 to maxInline, the rest of the
//	message), placed before the ranges are copied and the semaphore
//	is signalled
const (
	wireVersion  = 1
	addrMagic    = 0x57555841 // "WUXA"
	handleMagic  = 0x57555848 // "WUXH"
	helloMagic   = 0x57555843 // "WUXC"
	replyMagic   = 0x57555852 // "WUXR"
	signalMagic  = 0x57555853 // "WUXS"
	addrHeader   = 34
	handleHeader = 56
	helloSize    = 48
	replyHeader  = 16
	signalHeader = 56
	maxRkey      = 4096
	maxReplyBody = 64 << 10
	maxRanges    = 128
	maxSignal    = signalHeader + 16*maxRanges + 8 + maxInline
	maxRanks     = 1 << 20
	maxBytes     = 1 << 40
	byeWord      = "WUXBYE\x00\x00"
	closeWord    = "WUXCLOSE"

	kindSignal    = 1
	kindRanges    = 2
	kindPutSignal = 3

	// maxInline is the largest put that travels inside its signal's
	// message (kind 3) instead of as a ucp_put_nbx before it.
	maxInline = 4 << 10
)

func jobHash(job string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(job))
	return h.Sum64()
}

type address struct {
	job, nonce   uint64
	rank, nranks int
	side         string // host:port of the side channel
}

func encodeAddress(a address) []byte {
	b := binary.BigEndian.AppendUint32(nil, addrMagic)
	b = append(b, wireVersion, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, a.job)
	b = binary.BigEndian.AppendUint64(b, a.nonce)
	b = binary.BigEndian.AppendUint32(b, uint32(a.rank))
	b = binary.BigEndian.AppendUint32(b, uint32(a.nranks))
	b = binary.BigEndian.AppendUint16(b, uint16(len(a.side)))
	return append(b, a.side...)
}

func decodeAddress(b []byte) (address, error) {
	var a address
	if len(b) < addrHeader {
		return a, fmt.Errorf("ucx address of %d bytes, want at least %d", len(b), addrHeader)
	}
	if m := binary.BigEndian.Uint32(b); m != addrMagic {
		return a, fmt.Errorf("bad magic %#08x in a ucx address (the address of another network?)", m)
	}
	if b[4] != wireVersion || b[5]|b[6]|b[7] != 0 {
		return a, fmt.Errorf("ucx address of version %d (want %d) or with reserved bytes set", b[4], wireVersion)
	}
	a.job = binary.BigEndian.Uint64(b[8:])
	a.nonce = binary.BigEndian.Uint64(b[16:])
	r, n := binary.BigEndian.Uint32(b[24:]), binary.BigEndian.Uint32(b[28:])
	if n < 1 || n > maxRanks || r >= n {
		return a, fmt.Errorf("ucx address of rank %d of %d ranks", r, n)
	}
	a.rank, a.nranks = int(r), int(n)
	l := int(binary.BigEndian.Uint16(b[32:]))
	if l == 0 || len(b) != addrHeader+l {
		return a, fmt.Errorf("ucx address of %d bytes with a side-channel address of %d bytes", len(b), l)
	}
	a.side = string(b[addrHeader:])
	return a, nil
}

type handle struct {
	staged bool
	job    uint64
	nonce  uint64
	rank   int
	reg    uint32
	addr   uint64
	size   int64
	rkey   []byte
}

func encodeHandle(h handle) []byte {
	b := binary.BigEndian.AppendUint32(nil, handleMagic)
	flags := byte(0)
	if h.staged {
		flags = 1
	}
	b = append(b, wireVersion, flags, 0, 0)
	b = binary.BigEndian.AppendUint64(b, h.job)
	b = binary.BigEndian.AppendUint64(b, h.nonce)
	b = binary.BigEndian.AppendUint32(b, uint32(h.rank))
	b = binary.BigEndian.AppendUint32(b, h.reg)
	b = binary.BigEndian.AppendUint64(b, h.addr)
	b = binary.BigEndian.AppendUint64(b, uint64(h.size))
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.rkey)))
	b = append(b, 0, 0, 0, 0, 0, 0)
	return append(b, h.rkey...)
}

func decodeHandle(b []byte) (handle, error) {
	var h handle
	if len(b) < handleHeader {
		return h, fmt.Errorf("ucx handle of %d bytes, want at least %d", len(b), handleHeader)
	}
	if m := binary.BigEndian.Uint32(b); m != handleMagic {
		return h, fmt.Errorf("bad magic %#08x in a ucx handle (a handle of another backend?)", m)
	}
	if b[4] != wireVersion || b[5] > 1 || b[6]|b[7] != 0 || binary.BigEndian.Uint32(b[50:])|uint32(binary.BigEndian.Uint16(b[54:])) != 0 {
		return h, fmt.Errorf("ucx handle of version %d (want %d) with flags %#x or reserved bytes set", b[4], wireVersion, b[5])
	}
	h.staged = b[5] == 1
	h.job = binary.BigEndian.Uint64(b[8:])
	h.nonce = binary.BigEndian.Uint64(b[16:])
	h.rank = int(binary.BigEndian.Uint32(b[24:]))
	h.reg = binary.BigEndian.Uint32(b[28:])
	h.addr = binary.BigEndian.Uint64(b[32:])
	size := binary.BigEndian.Uint64(b[40:])
	if size == 0 || size > maxBytes || h.addr+size < h.addr {
		return h, fmt.Errorf("ucx handle of %d bytes at %#x (want 1 byte to 1 TiB, not wrapping)", size, h.addr)
	}
	h.size = int64(size)
	n := int(binary.BigEndian.Uint16(b[48:]))
	if n == 0 || n > maxRkey || len(b) != handleHeader+n {
		return h, fmt.Errorf("ucx handle of %d bytes carrying a remote key of %d bytes (want 1 to %d, filling the handle)", len(b), n, maxRkey)
	}
	if err := checkRkey(b[handleHeader:]); err != nil {
		return h, err
	}
	h.rkey = append([]byte(nil), b[handleHeader:]...)
	return h, nil
}

// checkRkey checks the framing of a packed UCX remote key before UCX
// parses it (ucp_ep_rkey_unpack trusts its buffer): the layout
// ucp_rkey_pack has written from UCX 1.12 to today (ucp_rkey.c,
// ucp_rkey_packed_copy): a native-endian 64-bit map of the sender's memory
// domains, a memory-type byte, then for each domain in the map a length
// byte and that many bytes of the transport's key, and nothing after
// (ucp_rkey_pack writes no system-device trailer). The keys of the
// transports themselves are UCX's to interpret.
func checkRkey(k []byte) error {
	if len(k) < 9 {
		return fmt.Errorf("packed remote key of %d bytes, want at least 9", len(k))
	}
	mds := binary.NativeEndian.Uint64(k)
	if mds == 0 {
		return fmt.Errorf("packed remote key naming no memory domain")
	}
	if t := k[8]; t >= 16 {
		return fmt.Errorf("packed remote key of memory type %d", t)
	}
	p := 9
	for ; mds != 0; mds &= mds - 1 {
		if p >= len(k) {
			return fmt.Errorf("packed remote key of %d bytes ends before the key of a memory domain its map names", len(k))
		}
		p += 1 + int(k[p])
	}
	if p != len(k) {
		return fmt.Errorf("packed remote key of %d bytes whose domains' keys fill %d", len(k), p)
	}
	return nil
}

type hello struct {
	job                      uint64
	clientNonce, serverNonce uint64
	client, server           int
	engine                   uint32
}

func encodeHello(h hello) []byte {
	b := binary.BigEndian.AppendUint32(nil, helloMagic)
	b = append(b, wireVersion, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, h.job)
	b = binary.BigEndian.AppendUint64(b, h.clientNonce)
	b = binary.BigEndian.AppendUint64(b, h.serverNonce)
	b = binary.BigEndian.AppendUint32(b, uint32(h.client))
	b = binary.BigEndian.AppendUint32(b, uint32(h.server))
	b = binary.BigEndian.AppendUint32(b, h.engine)
	return binary.BigEndian.AppendUint32(b, 0)
}

func decodeHello(b []byte) (hello, error) {
	var h hello
	if len(b) != helloSize || binary.BigEndian.Uint32(b) != helloMagic {
		return h, fmt.Errorf("not a weft ucx hello (bad size or magic)")
	}
	if b[4] != wireVersion || b[5]|b[6]|b[7] != 0 || binary.BigEndian.Uint32(b[44:]) != 0 {
		return h, fmt.Errorf("ucx hello of version %d (want %d) or with reserved bytes set", b[4], wireVersion)
	}
	h.job = binary.BigEndian.Uint64(b[8:])
	h.clientNonce = binary.BigEndian.Uint64(b[16:])
	h.serverNonce = binary.BigEndian.Uint64(b[24:])
	c, s := binary.BigEndian.Uint32(b[32:]), binary.BigEndian.Uint32(b[36:])
	if c >= maxRanks || s >= maxRanks {
		return h, fmt.Errorf("ucx hello from rank %d to rank %d", c, s)
	}
	h.client, h.server = int(c), int(s)
	h.engine = binary.BigEndian.Uint32(b[40:])
	return h, nil
}

func encodeReply(accept bool, token uint64, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, replyMagic)
	st := byte(1)
	if accept {
		st = 0
	}
	b = append(b, st, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(body)))
	b = binary.BigEndian.AppendUint64(b, token)
	return append(b, body...)
}

// decodeReplyHeader checks the 16-byte reply header and returns whether
// it accepts, the token and the body's length.
func decodeReplyHeader(b []byte) (accept bool, token uint64, n int, err error) {
	if len(b) != replyHeader || binary.BigEndian.Uint32(b) != replyMagic || b[4] > 1 || b[5] != 0 {
		return false, 0, 0, fmt.Errorf("not a weft ucx reply (bad magic, status or reserved byte)")
	}
	return b[4] == 0, binary.BigEndian.Uint64(b[8:]), int(binary.BigEndian.Uint16(b[6:])), nil
}

type span struct{ addr, n uint64 }

type signalMsg struct {
	kind       byte
	rank       int
	engine     uint32
	token, seq uint64
	sem, cnt   uint64
	count      uint64
	ranges     []span
	// kind 3: the put placed before the signal, at putDst.
	putDst uint64
	put    []byte
}

func encodeSignal(m signalMsg) []byte {
	b := make([]byte, 0, signalHeader+16*len(m.ranges)+8+len(m.put))
	b = binary.BigEndian.AppendUint32(b, signalMagic)
	b = append(b, wireVersion, m.kind)
	b = binary.BigEndian.AppendUint16(b, uint16(len(m.ranges)))
	b = binary.BigEndian.AppendUint32(b, uint32(m.rank))
	b = binary.BigEndian.AppendUint32(b, m.engine)
	b = binary.BigEndian.AppendUint64(b, m.token)
	b = binary.BigEndian.AppendUint64(b, m.seq)
	b = binary.BigEndian.AppendUint64(b, m.sem)
	b = binary.BigEndian.AppendUint64(b, m.cnt)
	b = binary.BigEndian.AppendUint64(b, m.count)
	for _, r := range m.ranges {
		b = binary.BigEndian.AppendUint64(b, r.addr)
		b = binary.BigEndian.AppendUint64(b, r.n)
	}
	if m.kind == kindPutSignal {
		b = binary.BigEndian.AppendUint64(b, m.putDst)
		b = append(b, m.put...)
	}
	return b
}

func decodeSignal(b []byte) (signalMsg, error) {
	var m signalMsg
	if len(b) < signalHeader || binary.BigEndian.Uint32(b) != signalMagic {
		return m, fmt.Errorf("active message of %d bytes is not a weft ucx signal (bad size or magic)", len(b))
	}
	if b[4] != wireVersion || (b[5] != kindSignal && b[5] != kindRanges && b[5] != kindPutSignal) {
		return m, fmt.Errorf("ucx signal of version %d (want %d) and kind %d", b[4], wireVersion, b[5])
	}
	m.kind = b[5]
	n := int(binary.BigEndian.Uint16(b[6:]))
	end := signalHeader + 16*n
	if m.kind == kindPutSignal {
		if n > maxRanges || len(b) < end+8+1 || len(b) > end+8+maxInline {
			return m, fmt.Errorf("ucx put and signal of %d bytes announcing %d ranges (at most %d) and a put of 1 to %d bytes", len(b), n, maxRanges, maxInline)
		}
		m.putDst = binary.BigEndian.Uint64(b[end:])
		m.put = b[end+8:]
		if m.putDst+uint64(len(m.put)) < m.putDst {
			return m, fmt.Errorf("ucx put of %d bytes at %#x wraps around", len(m.put), m.putDst)
		}
	} else if n > maxRanges || len(b) != end {
		return m, fmt.Errorf("ucx signal of %d bytes announcing %d ranges (at most %d)", len(b), n, maxRanges)
	}
	r := binary.BigEndian.Uint32(b[8:])
	if r >= maxRanks {
		return m, fmt.Errorf("ucx signal from rank %d", r)
	}
	m.rank = int(r)
	m.engine = binary.BigEndian.Uint32(b[12:])
	m.token = binary.BigEndian.Uint64(b[16:])
	m.seq = binary.BigEndian.Uint64(b[24:])
	m.sem = binary.BigEndian.Uint64(b[32:])
	m.cnt = binary.BigEndian.Uint64(b[40:])
	m.count = binary.BigEndian.Uint64(b[48:])
	for i := 0; i < n; i++ {
		o := signalHeader + 16*i
		s := span{binary.BigEndian.Uint64(b[o:]), binary.BigEndian.Uint64(b[o+8:])}
		if s.n == 0 || s.n > maxBytes || s.addr+s.n < s.addr {
			return m, fmt.Errorf("ucx signal range %d of %d bytes at %#x", i, s.n, s.addr)
		}
		m.ranges = append(m.ranges, s)
	}
	return m, nil
}
