package netplugin

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/weftccl/weft/hal/netcore"
	"github.com/weftccl/weft/internal/ncclnet"
)

// Wire formats. Every integer is big-endian; the layouts are in the
// package documentation. Decoders check every field and never panic (they
// are fuzzed): a message comes from a plugin connection whose far end has
// not proven anything until the handshake is done, and is hostile input
// even after.

const protocolVersion = 1

const (
	msgMagic     = 0x574E504D // "WNPM": a message
	handleMagic  = 0x574E5048 // "WNPH": an exported registration
	addressMagic = 0x574E5041 // "WNPA": a NetDevice's address
)

// Sizes in bytes.
const (
	headerSize = 48
	maxReason  = 1024
)

// Limits.
const (
	// MinChunk and MaxChunk bound Options.Chunk, the payload of one
	// message.
	MinChunk = 4 << 10
	MaxChunk = 64 << 20
	// maxEngines bounds the engines one peer may open towards this rank
	// (the receiver keeps a sequence number for each).
	maxEngines = 4096
)

var (
	errMalformed = errors.New("malformed")
	errMagic     = errors.New("bad magic")
	errVersion   = errors.New("protocol version")
)

// Remote addresses are netcore's (bit 63 set, a 23-bit registration id,
// a 40-bit byte offset; see netcore.EncodeAddr); tests build them with
// encodeAddr.
func encodeAddr(reg uint32, off uint64) uint64 { return netcore.EncodeAddr(reg, off) }

// jobHash is FNV-1a 64 of the job id.
func jobHash(job string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(job))
	return h.Sum64()
}

// Messages: a 48-byte header, then a payload.
//
//	[0:4)   "WNPM"
//	[4]     kind
//	[5:8)   zero
//	[8:16)  e: engine id (put, signal, bye, bye-ack); hello: job hash
//	[16:24) s: sequence number within the engine; hello: receiver's nonce
//	[24:32) a: put destination / signal semaphore; hello: source rank << 32 | destination rank
//	[32:40) b: put payload bytes / signal count-word address (0: none); hello: sender's chunk
//	[40:48) c: signal count; hello: sender's nonce
type msgKind uint8

const (
	msgHello   msgKind = iota + 1 // first message of a direction; payload: the sender's listen handle for the receiver
	msgAuth                       // bytes of the challenge–response handshake
	msgPut                        // payload: the bytes to store at a
	msgSignal                     // store c at b (b ≠ 0), then add one to the word at a
	msgBye                        // engine e closes after s messages
	msgByeAck                     // every message of engine e was applied (receiver → sender)
	msgReject                     // the receiver refused this link; payload: the reason
	msgClosing                    // the sender's NetDevice closes; nothing more is applied
)

func (k msgKind) String() string {
	switch k {
	case msgHello:
		return "hello"
	case msgAuth:
		return "auth"
	case msgPut:
		return "put"
	case msgSignal:
		return "signal"
	case msgBye:
		return "bye"
	case msgByeAck:
		return "bye-ack"
	case msgReject:
		return "reject"
	case msgClosing:
		return "closing"
	}
	return "kind " + strconv.Itoa(int(k))
}

type message struct {
	kind          msgKind
	e, s, a, b, c uint64
}

func encodeHeader(b []byte, m message) {
	binary.BigEndian.PutUint32(b[0:], msgMagic)
	b[4], b[5], b[6], b[7] = byte(m.kind), 0, 0, 0
	binary.BigEndian.PutUint64(b[8:], m.e)
	binary.BigEndian.PutUint64(b[16:], m.s)
	binary.BigEndian.PutUint64(b[24:], m.a)
	binary.BigEndian.PutUint64(b[32:], m.b)
	binary.BigEndian.PutUint64(b[40:], m.c)
}

// decodeMessage checks a received message of len(b) bytes (header and
// payload) whose payload may be at most chunk bytes, and returns the
// header and the payload. Addresses and sequence numbers are checked by
// the receiver against its own state.
func decodeMessage(b []byte, chunk int) (message, []byte, error) {
	if len(b) < headerSize {
		return message{}, nil, fmt.Errorf("%w message: %d bytes, shorter than the %d-byte header", errMalformed, len(b), headerSize)
	}
	if m := binary.BigEndian.Uint32(b); m != msgMagic {
		return message{}, nil, fmt.Errorf("%w %#08x in a message header, want %#08x", errMagic, m, msgMagic)
	}
	m := message{kind: msgKind(b[4]),
		e: binary.BigEndian.Uint64(b[8:]), s: binary.BigEndian.Uint64(b[16:]), a: binary.BigEndian.Uint64(b[24:]),
		b: binary.BigEndian.Uint64(b[32:]), c: binary.BigEndian.Uint64(b[40:])}
	p := b[headerSize:]
	if b[5]|b[6]|b[7] != 0 {
		return message{}, nil, fmt.Errorf("%w %v message: reserved bytes are not zero", errMalformed, m.kind)
	}
	if len(p) > chunk {
		return message{}, nil, fmt.Errorf("%w %v message: payload of %d bytes, more than the chunk size %d", errMalformed, m.kind, len(p), chunk)
	}
	switch m.kind {
	case msgHello:
		if len(p) != ncclnet.HandleSize {
			return message{}, nil, fmt.Errorf("%w hello: payload of %d bytes, want a %d-byte listen handle", errMalformed, len(p), ncclnet.HandleSize)
		}
		if m.b < MinChunk || m.b > MaxChunk {
			return message{}, nil, fmt.Errorf("%w hello: chunk of %d bytes, want %d to %d", errMalformed, m.b, MinChunk, MaxChunk)
		}
	case msgAuth:
		if len(p) == 0 || m.e|m.s|m.a|m.b|m.c != 0 {
			return message{}, nil, fmt.Errorf("%w auth message: empty, or header fields set", errMalformed)
		}
	case msgPut:
		if len(p) == 0 || uint64(len(p)) != m.b || m.c != 0 {
			return message{}, nil, fmt.Errorf("%w put: header says %d bytes, the message carries %d", errMalformed, m.b, len(p))
		}
	case msgSignal, msgBye, msgByeAck, msgClosing:
		if len(p) != 0 {
			return message{}, nil, fmt.Errorf("%w %v message: unexpected payload of %d bytes", errMalformed, m.kind, len(p))
		}
		if m.kind != msgSignal && m.a|m.b|m.c != 0 {
			return message{}, nil, fmt.Errorf("%w %v message: header fields set", errMalformed, m.kind)
		}
	case msgReject:
		if len(p) > maxReason {
			return message{}, nil, fmt.Errorf("%w reject: reason of %d bytes", errMalformed, len(p))
		}
	default:
		return message{}, nil, fmt.Errorf("%w message: unknown kind %d", errMalformed, m.kind)
	}
	return m, p, nil
}

// Handles (ExportPort) are netcore's 40-byte registration handles
// (netcore.HandleFormat documents the layout, encodes and checks them)
// with magic "WNPH" and this transport's protocol version.
type handle = netcore.Handle

var handleFormat = netcore.HandleFormat{Magic: handleMagic, Version: protocolVersion,
	ErrMalformed: errMalformed, ErrMagic: errMagic, ErrVer: errVersion}

func encodeHandle(h handle) []byte { return handleFormat.Encode(h) }

func decodeHandle(b []byte) (handle, error) { return handleFormat.Decode(b) }

// Addresses (NetDevice.Address):
//
//	[0:4)   "WNPA"   [4] version   [5:8) zero
//	[8:16)  job hash
//	[16:24) nonce (the NetDevice's incarnation)
//	[24:28) rank     [28:32) ranks of the job (n)
//	[32:36) chunk bytes
//	then n listen handles, one per rank (the one for this rank itself
//	empty): a 1-byte length L ≤ 128 and the handle's first L bytes; the
//	remaining bytes of the 128 are zero (trailing zeros are not sent).
type address struct {
	job, nonce uint64
	rank       int
	chunk      int
	handles    []ncclnet.Handle // by rank
}

func encodeAddress(a address) []byte {
	b := binary.BigEndian.AppendUint32(nil, addressMagic)
	b = append(b, protocolVersion, 0, 0, 0)
	b = binary.BigEndian.AppendUint64(b, a.job)
	b = binary.BigEndian.AppendUint64(b, a.nonce)
	b = binary.BigEndian.AppendUint32(b, uint32(a.rank))
	b = binary.BigEndian.AppendUint32(b, uint32(len(a.handles)))
	b = binary.BigEndian.AppendUint32(b, uint32(a.chunk))
	for _, h := range a.handles {
		n := len(h)
		for n > 0 && h[n-1] == 0 {
			n--
		}
		b = append(b, byte(n))
		b = append(b, h[:n]...)
	}
	return b
}

// decodeAddress checks the format; nranks is the job's size, which the
// address must agree with.
func decodeAddress(b []byte, nranks int) (address, error) {
	if len(b) < 36 {
		return address{}, fmt.Errorf("%w address: %d bytes, want at least 36", errMalformed, len(b))
	}
	if m := binary.BigEndian.Uint32(b); m != addressMagic {
		return address{}, fmt.Errorf("%w %#08x in an address, want %#08x (the address of another network?)", errMagic, m, addressMagic)
	}
	if b[4] != protocolVersion {
		return address{}, fmt.Errorf("%w %d in an address, want %d", errVersion, b[4], protocolVersion)
	}
	if b[5]|b[6]|b[7] != 0 {
		return address{}, fmt.Errorf("%w address: reserved bytes are not zero", errMalformed)
	}
	a := address{job: binary.BigEndian.Uint64(b[8:]), nonce: binary.BigEndian.Uint64(b[16:]),
		rank: int(binary.BigEndian.Uint32(b[24:])), chunk: int(binary.BigEndian.Uint32(b[32:]))}
	n := int(binary.BigEndian.Uint32(b[28:]))
	switch {
	case n != nranks:
		return address{}, fmt.Errorf("%w address: %d listen handles for a job of %d ranks", errMalformed, n, nranks)
	case a.rank < 0 || a.rank >= n:
		return address{}, fmt.Errorf("%w address: rank %d of %d", errMalformed, a.rank, n)
	case a.chunk < MinChunk || a.chunk > MaxChunk:
		return address{}, fmt.Errorf("%w address: chunk of %d bytes, want %d to %d", errMalformed, a.chunk, MinChunk, MaxChunk)
	}
	rest := b[36:]
	a.handles = make([]ncclnet.Handle, n)
	for i := range n {
		if len(rest) < 1 || int(rest[0]) > ncclnet.HandleSize || len(rest)-1 < int(rest[0]) {
			return address{}, fmt.Errorf("%w address: listen handle %d cut short or longer than %d bytes", errMalformed, i, ncclnet.HandleSize)
		}
		l := int(rest[0])
		copy(a.handles[i][:], rest[1:1+l])
		rest = rest[1+l:]
	}
	if len(rest) != 0 {
		return address{}, fmt.Errorf("%w address: %d trailing bytes", errMalformed, len(rest))
	}
	return a, nil
}
