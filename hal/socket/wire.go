package socket

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"

	"github.com/weftccl/weft/hal/netcore"
)

// Wire formats. Every integer is big-endian. The layouts are described in
// the package documentation; the decoders here check every field and
// never panic (they are fuzzed).

// protocolVersion is bumped on any incompatible change of a format below.
const protocolVersion = 1

// Magic numbers that start each kind of message, so that bytes of one kind
// read as another are refused at once.
const (
	helloMagic   = "WEFTSOCK" // connection handshake, dialler → listener
	frameMagic   = 0x57534B46 // "WSKF": data frame, engine → receiver
	replyMagic   = 0x57534B52 // "WSKR": reply frame, receiver → engine
	handleMagic  = 0x57534B48 // "WSKH": exported registration
	addressMagic = 0x57534B41 // "WSKA": NetDevice address
)

// Sizes of the fixed parts, in bytes.
const (
	helloSize  = 56
	headerSize = 40
	replySize  = 16
)

// Limits.
const (
	// MaxConns is the most connections one engine may open to a peer
	// (NCCL's MAX_SOCKETS is 64 too).
	MaxConns = 64
	// MinChunk and MaxChunk bound WEFT_SOCKET_CHUNK: the payload of one
	// frame.
	MinChunk = 1 << 10
	MaxChunk = 64 << 20
	// maxReason bounds the text of a reject reply.
	maxReason = 1024
	// maxAddrs bounds the listen addresses in one Address.
	maxAddrs = 8
)

// Remote addresses are netcore's (bit 63 set, a 23-bit registration id,
// a 40-bit byte offset; see netcore.EncodeAddr); tests build them with
// encodeAddr.
func encodeAddr(reg uint32, off uint64) uint64 { return netcore.EncodeAddr(reg, off) }

// jobHash is the 64-bit FNV-1a hash of the job id that handshakes, handles
// and addresses carry.
func jobHash(job string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(job))
	return h.Sum64()
}

// Errors of the decoders; callers wrap them with the sentinel that fits
// (hal.ErrInvalidArgument for a caller's bytes, hal.ErrRemote for a
// peer's).
var (
	errMagic     = errors.New("bad magic")
	errVersion   = errors.New("unsupported protocol version")
	errMalformed = errors.New("malformed")
)

// hello opens every connection.
//
//	[0:8)   "WEFTSOCK"
//	[8:10)  protocol version
//	[10:12) connection index within the engine
//	[12:14) connections of the engine
//	[14:16) zero
//	[16:24) job hash
//	[24:32) destination nonce (the listening NetDevice's incarnation)
//	[32:36) source rank
//	[36:40) destination rank
//	[40:48) engine id
//	[48:52) chunk bytes (largest payload of a frame)
//	[52:56) zero
type hello struct {
	index, conns int
	job, nonce   uint64
	src, dst     int
	engine       uint64
	chunk        int
}

func encodeHello(h hello) []byte {
	b := make([]byte, helloSize)
	copy(b, helloMagic)
	binary.BigEndian.PutUint16(b[8:], protocolVersion)
	binary.BigEndian.PutUint16(b[10:], uint16(h.index))
	binary.BigEndian.PutUint16(b[12:], uint16(h.conns))
	binary.BigEndian.PutUint64(b[16:], h.job)
	binary.BigEndian.PutUint64(b[24:], h.nonce)
	binary.BigEndian.PutUint32(b[32:], uint32(h.src))
	binary.BigEndian.PutUint32(b[36:], uint32(h.dst))
	binary.BigEndian.PutUint64(b[40:], h.engine)
	binary.BigEndian.PutUint32(b[48:], uint32(h.chunk))
	return b
}

// decodeHello checks the format only; the receiver checks job, ranks and
// nonce against itself.
func decodeHello(b []byte) (hello, error) {
	if len(b) != helloSize {
		return hello{}, fmt.Errorf("%w handshake: %d bytes, want %d", errMalformed, len(b), helloSize)
	}
	if string(b[:8]) != helloMagic {
		return hello{}, fmt.Errorf("%w %q: not a weft socket-transport handshake", errMagic, b[:8])
	}
	if v := binary.BigEndian.Uint16(b[8:]); v != protocolVersion {
		return hello{}, fmt.Errorf("%w %d, want %d (mixed weft versions in one job?)", errVersion, v, protocolVersion)
	}
	h := hello{
		index:  int(binary.BigEndian.Uint16(b[10:])),
		conns:  int(binary.BigEndian.Uint16(b[12:])),
		job:    binary.BigEndian.Uint64(b[16:]),
		nonce:  binary.BigEndian.Uint64(b[24:]),
		src:    int(binary.BigEndian.Uint32(b[32:])),
		dst:    int(binary.BigEndian.Uint32(b[36:])),
		engine: binary.BigEndian.Uint64(b[40:]),
		chunk:  int(binary.BigEndian.Uint32(b[48:])),
	}
	switch {
	case binary.BigEndian.Uint16(b[14:]) != 0 || binary.BigEndian.Uint32(b[52:]) != 0:
		return hello{}, fmt.Errorf("%w handshake: reserved bytes are not zero", errMalformed)
	case h.conns < 1 || h.conns > MaxConns:
		return hello{}, fmt.Errorf("%w handshake: %d connections, want 1 to %d", errMalformed, h.conns, MaxConns)
	case h.index >= h.conns:
		return hello{}, fmt.Errorf("%w handshake: connection index %d of %d", errMalformed, h.index, h.conns)
	case h.chunk < MinChunk || h.chunk > MaxChunk:
		return hello{}, fmt.Errorf("%w handshake: chunk of %d bytes, want %d to %d", errMalformed, h.chunk, MinChunk, MaxChunk)
	}
	return h, nil
}

// Data frames, engine → receiver: a 40-byte header, then for a put the
// payload; a put with its signal (framePutSignal: a small put and the
// signal the proxy issued right after it, one sequence number, applied
// put first) has the payload and then a 16-byte trailer, the signal's
// semaphore and count-word addresses (big-endian).
//
//	[0:4)   "WSKF"
//	[4]     kind
//	[5:8)   zero
//	[8:16)  sequence number within the engine
//	[16:24) a: put destination / signal semaphore (remote addresses)
//	[24:32) b: put payload bytes / signal count-word address (0: none)
//	[32:40) c: put zero / signal count value / put-with-signal count value
type frameKind uint8

const (
	framePut frameKind = iota + 1
	frameSignal
	frameBye       // the engine closes; a = 0, b = 0, c = 0
	framePutSignal // a put, then its signal: payload, then trailerSize bytes
)

// trailerSize is the trailer of a framePutSignal: semaphore, count word.
const trailerSize = 16

func (k frameKind) String() string {
	switch k {
	case framePut:
		return "put"
	case frameSignal:
		return "signal"
	case frameBye:
		return "bye"
	case framePutSignal:
		return "put with signal"
	}
	return "kind " + strconv.Itoa(int(k))
}

type frame struct {
	kind    frameKind
	seq     uint64
	a, b, c uint64
}

func encodeHeader(b []byte, f frame) {
	binary.BigEndian.PutUint32(b[0:], frameMagic)
	b[4] = byte(f.kind)
	b[5], b[6], b[7] = 0, 0, 0
	binary.BigEndian.PutUint64(b[8:], f.seq)
	binary.BigEndian.PutUint64(b[16:], f.a)
	binary.BigEndian.PutUint64(b[24:], f.b)
	binary.BigEndian.PutUint64(b[32:], f.c)
}

// decodeHeader checks the format of a header and, for a put, that the
// payload fits a chunk of chunk bytes. Addresses are checked by the
// receiver against its registrations.
func decodeHeader(b []byte, chunk int) (frame, error) {
	if len(b) != headerSize {
		return frame{}, fmt.Errorf("%w frame header: %d bytes, want %d", errMalformed, len(b), headerSize)
	}
	if m := binary.BigEndian.Uint32(b); m != frameMagic {
		return frame{}, fmt.Errorf("%w %#08x in a frame header, want %#08x", errMagic, m, frameMagic)
	}
	f := frame{
		kind: frameKind(b[4]),
		seq:  binary.BigEndian.Uint64(b[8:]),
		a:    binary.BigEndian.Uint64(b[16:]),
		b:    binary.BigEndian.Uint64(b[24:]),
		c:    binary.BigEndian.Uint64(b[32:]),
	}
	if b[5]|b[6]|b[7] != 0 {
		return frame{}, fmt.Errorf("%w %v frame: reserved bytes are not zero", errMalformed, f.kind)
	}
	switch f.kind {
	case framePut:
		if f.b == 0 || f.b > uint64(chunk) || f.c != 0 {
			return frame{}, fmt.Errorf("%w put frame: payload of %d bytes, want 1 to the chunk size %d", errMalformed, f.b, chunk)
		}
	case framePutSignal:
		if f.b == 0 || f.b > min(uint64(chunk), inlineMax) {
			return frame{}, fmt.Errorf("%w put-with-signal frame: payload of %d bytes, want 1 to %d", errMalformed, f.b, min(chunk, inlineMax))
		}
	case frameSignal:
	case frameBye:
		if f.a|f.b|f.c != 0 {
			return frame{}, fmt.Errorf("%w bye frame: non-zero fields", errMalformed)
		}
	default:
		return frame{}, fmt.Errorf("%w frame: unknown kind %d", errMalformed, f.kind)
	}
	return f, nil
}

// Reply frames, receiver → engine: a 16-byte header and, for a reject, the
// reason as text.
//
//	[0:4)   "WSKR"
//	[4]     kind
//	[5:8)   zero
//	[8:12)  payload bytes (≤ 1024)
//	[12:16) zero
type replyKind uint8

const (
	replyAccept  replyKind = iota + 1 // handshake accepted
	replyReject                       // refused: the payload says why; the connection closes
	replyByeAck                       // every frame of this connection was applied
	replyClosing                      // the receiving NetDevice closes; nothing more is applied
)

func encodeReply(k replyKind, reason string) []byte {
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	b := make([]byte, replySize+len(reason))
	binary.BigEndian.PutUint32(b, replyMagic)
	b[4] = byte(k)
	binary.BigEndian.PutUint32(b[8:], uint32(len(reason)))
	copy(b[replySize:], reason)
	return b
}

// decodeReplyHeader returns the kind and payload length of a reply.
func decodeReplyHeader(b []byte) (replyKind, int, error) {
	if len(b) != replySize {
		return 0, 0, fmt.Errorf("%w reply: %d bytes, want %d", errMalformed, len(b), replySize)
	}
	if m := binary.BigEndian.Uint32(b); m != replyMagic {
		return 0, 0, fmt.Errorf("%w %#08x in a reply, want %#08x", errMagic, m, replyMagic)
	}
	k := replyKind(b[4])
	n := binary.BigEndian.Uint32(b[8:])
	switch {
	case b[5]|b[6]|b[7] != 0 || binary.BigEndian.Uint32(b[12:]) != 0:
		return 0, 0, fmt.Errorf("%w reply: reserved bytes are not zero", errMalformed)
	case k < replyAccept || k > replyClosing:
		return 0, 0, fmt.Errorf("%w reply: unknown kind %d", errMalformed, k)
	case n > maxReason || (n != 0 && k != replyReject):
		return 0, 0, fmt.Errorf("%w reply: payload of %d bytes", errMalformed, n)
	}
	return k, int(n), nil
}

// Handles (ExportPort) are netcore's 40-byte registration handles
// (netcore.HandleFormat documents the layout, encodes and checks them)
// with magic "WSKH" and this transport's protocol version.
type handle = netcore.Handle

var handleFormat = netcore.HandleFormat{Magic: handleMagic, Version: protocolVersion,
	ErrMalformed: errMalformed, ErrMagic: errMagic, ErrVer: errVersion}

func encodeHandle(h handle) []byte { return handleFormat.Encode(h) }

func decodeHandle(b []byte) (handle, error) { return handleFormat.Decode(b) }

// Addresses (NetDevice.Address):
//
//	[0:4)   "WSKA"
//	[4]     protocol version
//	[5]     number of listen addresses, 1 to 8
//	[6:8)   zero
//	[8:16)  job hash
//	[16:24) nonce (this NetDevice's incarnation)
//	[24:28) rank
//	then per listen address: a 16-bit length and "host:port"
type address struct {
	job, nonce uint64
	rank       int
	addrs      []string
}

func encodeAddress(a address) []byte {
	b := binary.BigEndian.AppendUint32(nil, addressMagic)
	b = append(b, protocolVersion, byte(len(a.addrs)), 0, 0)
	b = binary.BigEndian.AppendUint64(b, a.job)
	b = binary.BigEndian.AppendUint64(b, a.nonce)
	b = binary.BigEndian.AppendUint32(b, uint32(a.rank))
	for _, s := range a.addrs {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
	}
	return b
}

func decodeAddress(b []byte) (address, error) {
	if len(b) < 28 {
		return address{}, fmt.Errorf("%w address: %d bytes, want at least 28", errMalformed, len(b))
	}
	if m := binary.BigEndian.Uint32(b); m != addressMagic {
		return address{}, fmt.Errorf("%w %#08x in an address, want %#08x (the address of another network?)", errMagic, m, addressMagic)
	}
	if b[4] != protocolVersion {
		return address{}, fmt.Errorf("%w %d in an address, want %d", errVersion, b[4], protocolVersion)
	}
	n := int(b[5])
	if n < 1 || n > maxAddrs || b[6]|b[7] != 0 {
		return address{}, fmt.Errorf("%w address: %d listen addresses or reserved bytes set", errMalformed, n)
	}
	a := address{
		job:   binary.BigEndian.Uint64(b[8:]),
		nonce: binary.BigEndian.Uint64(b[16:]),
		rank:  int(binary.BigEndian.Uint32(b[24:])),
	}
	rest := b[28:]
	for i := 0; i < n; i++ {
		if len(rest) < 2 {
			return address{}, fmt.Errorf("%w address: listen address %d cut short", errMalformed, i)
		}
		l := int(binary.BigEndian.Uint16(rest))
		if len(rest)-2 < l {
			return address{}, fmt.Errorf("%w address: listen address %d of %d bytes, %d left", errMalformed, i, l, len(rest)-2)
		}
		s := string(rest[2 : 2+l])
		if host, port, err := net.SplitHostPort(s); err != nil || host == "" || port == "" || port == "0" {
			return address{}, fmt.Errorf("%w address: listen address %q is not host:port", errMalformed, s)
		}
		a.addrs = append(a.addrs, s)
		rest = rest[2+l:]
	}
	if len(rest) != 0 {
		return address{}, fmt.Errorf("%w address: %d trailing bytes", errMalformed, len(rest))
	}
	return a, nil
}
