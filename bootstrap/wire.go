package bootstrap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/weftccl/weft/hal"
)

// MaxMessageSize is the largest payload, in bytes, that one bootstrap
// message may carry (64 MiB). Send, AllGather and Broadcast reject larger
// data with an error wrapping hal.ErrInvalidArgument; a header announcing a
// larger payload is rejected as a protocol error before anything is
// allocated. The bootstrap is meant for small out-of-band blobs (memory
// handles, addresses, topology), not for bulk data.
const MaxMessageSize = 64 << 20

// headerSize is the size of a message header in bytes.
//
// Layout, all integers big-endian (network order):
//
//	[0:8)   magic    job magic of the UniqueID
//	[8]     type     msgType
//	[9]     version  protocolVersion
//	[10:12) reserved zero
//	[12:16) src      sending rank
//	[16:20) tag      user tag (Send/Recv) or collective sequence number
//	[20:24) length   payload bytes that follow, at most MaxMessageSize
const headerSize = 24

// protocolVersion is bumped on any incompatible change of the wire format.
const protocolVersion = 1

// maxRanks bounds the size a rank may announce to the root, so that a
// forged hello cannot make the root allocate without limit.
const maxRanks = 1 << 20

// msgType is the kind of a bootstrap message.
type msgType uint8

const (
	msgHello     msgType = iota + 1 // rank → root: size, listen address
	msgPeers                        // root → rank: listen address of every rank
	msgReject                       // root → rank: rendezvous refused; payload is the reason
	msgMeshHello                    // dialling rank → accepting rank
	msgMeshAck                      // accepting rank → dialling rank
	msgData                         // Send/Recv payload
	msgAllGather                    // AllGather contribution
	msgBroadcast                    // Broadcast payload
	msgBarrier                      // Barrier arrival
	msgBye                          // clean Close: no more messages follow
	// Progress probes (progress.go): a query's tag is the probe id; a
	// report answers it under that tag, or is an announcement (tag 0).
	msgProgressQuery
	msgProgress
	msgTypeEnd // one past the last valid type
)

var msgTypeNames = [...]string{
	msgHello:     "hello",
	msgPeers:     "peers",
	msgReject:    "reject",
	msgMeshHello: "mesh-hello",
	msgMeshAck:   "mesh-ack",
	msgData:      "data",
	msgAllGather: "AllGather",
	msgBroadcast: "Broadcast",
	msgBarrier:   "Barrier",
	msgBye:       "bye",

	msgProgressQuery: "progress-query",
	msgProgress:      "progress",
}

func (t msgType) String() string {
	if t > 0 && t < msgTypeEnd {
		return msgTypeNames[t]
	}
	return "type " + strconv.Itoa(int(t))
}

// Protocol errors. Each error returned for a bad message wraps one of these
// and, where a peer sent it, hal.ErrRemote.
var (
	errBadMagic  = errors.New("wrong magic")
	errTruncated = errors.New("truncated message")
	errTooLarge  = errors.New("message too large")
	errBadType   = errors.New("unknown message type")
	errVersion   = errors.New("unsupported protocol version")
	errMalformed = errors.New("malformed payload")
)

// header is the fixed part of every message.
type header struct {
	magic  uint64
	typ    msgType
	src    uint32
	tag    uint32
	length uint32
}

// encodeHeader writes h into b, which must hold headerSize bytes.
func encodeHeader(b []byte, h header) {
	binary.BigEndian.PutUint64(b[0:8], h.magic)
	b[8] = byte(h.typ)
	b[9] = protocolVersion
	b[10], b[11] = 0, 0
	binary.BigEndian.PutUint32(b[12:16], h.src)
	binary.BigEndian.PutUint32(b[16:20], h.tag)
	binary.BigEndian.PutUint32(b[20:24], h.length)
}

// decodeHeader parses the first headerSize bytes of b and checks them
// against the job's magic. It returns an error wrapping errTruncated,
// errBadMagic, errVersion, errBadType or errTooLarge; it never panics.
func decodeHeader(b []byte, magic uint64) (header, error) {
	if len(b) < headerSize {
		return header{}, fmt.Errorf("%w: header of %d bytes, want %d", errTruncated, len(b), headerSize)
	}
	h := header{
		magic:  binary.BigEndian.Uint64(b[0:8]),
		typ:    msgType(b[8]),
		src:    binary.BigEndian.Uint32(b[12:16]),
		tag:    binary.BigEndian.Uint32(b[16:20]),
		length: binary.BigEndian.Uint32(b[20:24]),
	}
	if h.magic != magic {
		// The expected magic is never printed: in an unauthenticated job
		// it is the only credential.
		return header{}, fmt.Errorf("%w (a process of another job, or not a weft bootstrap client)", errBadMagic)
	}
	if v := b[9]; v != protocolVersion {
		return header{}, fmt.Errorf("%w %d, want %d (mixed weft versions in one job?)", errVersion, v, protocolVersion)
	}
	if h.typ == 0 || h.typ >= msgTypeEnd {
		return header{}, fmt.Errorf("%w %d", errBadType, uint8(h.typ))
	}
	if limit := payloadLimit(h.typ); int64(h.length) > int64(limit) {
		return header{}, fmt.Errorf("%w: %v payload of %d bytes, limit %d", errTooLarge, h.typ, h.length, limit)
	}
	return h, nil
}

// Payload limits by message type, checked before anything is allocated:
// a hello holds a size and one host:port, a reject a reason, and the
// handshake and control messages nothing at all.
const (
	maxHelloPayload  = 4 + 2 + 512
	maxRejectPayload = 4096
)

// payloadLimit is the largest payload, in bytes, a message of type t may
// carry.
func payloadLimit(t msgType) int {
	switch t {
	case msgHello:
		return maxHelloPayload
	case msgReject:
		return maxRejectPayload
	case msgMeshHello, msgMeshAck, msgBarrier, msgBye:
		return 0
	}
	return MaxMessageSize
}

// readFrame reads one message. A clean end of stream before the first
// header byte returns io.EOF unwrapped; a stream that ends inside a message
// returns an error wrapping errTruncated (and io.ErrUnexpectedEOF).
func readFrame(r io.Reader, magic uint64) (header, []byte, error) {
	var hb [headerSize]byte
	if n, err := io.ReadFull(r, hb[:]); err != nil {
		if err == io.EOF {
			return header{}, nil, io.EOF
		}
		if err == io.ErrUnexpectedEOF {
			return header{}, nil, fmt.Errorf("%w: header: got %d of %d bytes: %w", errTruncated, n, headerSize, err)
		}
		return header{}, nil, err
	}
	h, err := decodeHeader(hb[:], magic)
	if err != nil {
		return header{}, nil, err
	}
	payload := make([]byte, h.length)
	if n, err := io.ReadFull(r, payload); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return header{}, nil, fmt.Errorf("%w: %v payload: got %d of %d bytes: %w", errTruncated, h.typ, n, h.length, io.ErrUnexpectedEOF)
		}
		return header{}, nil, err
	}
	return h, payload, nil
}

// writeFrame writes one message with a single vectored write. The caller
// serialises writers of one connection and checks len(payload) beforehand.
func writeFrame(w io.Writer, h header, payload []byte) error {
	h.length = uint32(len(payload))
	hb := make([]byte, headerSize)
	encodeHeader(hb, h)
	bufs := net.Buffers{hb, payload}
	_, err := bufs.WriteTo(w)
	return err
}

// remoteErr wraps a protocol error caused by what a peer sent.
func remoteErr(from string, err error) error {
	return fmt.Errorf("bootstrap: bad message from %s: %w: %w", from, err, hal.ErrRemote)
}

// Payload encodings. Strings are a big-endian uint16 length followed by the
// bytes.

// hello is what a rank tells the root.
type hello struct {
	size int    // number of ranks in the job
	addr string // host:port of the rank's mesh listener
}

func encodeHello(h hello) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(h.size))
	return appendString(b, h.addr)
}

func decodeHello(b []byte) (hello, error) {
	if len(b) < 4 {
		return hello{}, fmt.Errorf("%w: hello of %d bytes", errMalformed, len(b))
	}
	size := binary.BigEndian.Uint32(b)
	addr, rest, err := readString(b[4:])
	if err != nil {
		return hello{}, fmt.Errorf("hello address: %w", err)
	}
	if len(rest) != 0 {
		return hello{}, fmt.Errorf("%w: %d trailing bytes after hello", errMalformed, len(rest))
	}
	if size < 1 || size > maxRanks {
		return hello{}, fmt.Errorf("%w: hello announces %d ranks, want 1 to %d", errMalformed, size, maxRanks)
	}
	if err := checkHostPort(addr); err != nil {
		return hello{}, err
	}
	return hello{size: int(size), addr: addr}, nil
}

// encodePeers encodes the root's table: the listen address of every rank,
// indexed by rank.
func encodePeers(addrs []string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(addrs)))
	for _, a := range addrs {
		b = appendString(b, a)
	}
	return b
}

// decodePeers parses a peer table and checks that it holds exactly size
// well-formed host:port addresses.
func decodePeers(b []byte, size int) ([]string, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: peer table of %d bytes", errMalformed, len(b))
	}
	n := binary.BigEndian.Uint32(b)
	if int64(n) != int64(size) {
		return nil, fmt.Errorf("%w: peer table lists %d ranks, want %d", errMalformed, n, size)
	}
	b = b[4:]
	addrs := make([]string, 0, min(size, len(b)/2+1))
	for r := range size {
		var (
			a   string
			err error
		)
		if a, b, err = readString(b); err != nil {
			return nil, fmt.Errorf("peer table entry of rank %d: %w", r, err)
		}
		if err := checkHostPort(a); err != nil {
			return nil, fmt.Errorf("peer table entry of rank %d: %w", r, err)
		}
		addrs = append(addrs, a)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes after peer table", errMalformed, len(b))
	}
	return addrs, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func readString(b []byte) (string, []byte, error) {
	if len(b) < 2 {
		return "", nil, fmt.Errorf("%w: string length cut short", errMalformed)
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b)-2 < n {
		return "", nil, fmt.Errorf("%w: string of %d bytes, %d left", errMalformed, n, len(b)-2)
	}
	return string(b[2 : 2+n]), b[2+n:], nil
}

func checkHostPort(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" {
		return fmt.Errorf("%w: address %q is not host:port", errMalformed, a)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%w: address %q has no valid port", errMalformed, a)
	}
	return nil
}
