package nvswitch

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
)

// Handle format, version 1 (all integers little-endian). Both exported
// buffers and multicast groups are virtual-memory objects whose shareable
// handle is a POSIX file descriptor of the exporting process; an importer
// fetches it by pid and descriptor number (cuda.DupFD).
//
//	off  size  field
//	  0     8  magic "WEFTNVS1"
//	  8     2  version (1)
//	 10     2  kind (1: buffer of a cuMemCreate allocation, 2: multicast group)
//	 12     4  exporter pid
//	 16     8  exporter host hash (first 8 bytes of SHA-256 of its HostID)
//	 24     8  job hash (of hal.Config.JobID)
//	 32     8  PID namespace hash (the pid is only meaningful inside it)
//	 40    16  exporter GPU UUID
//	 56     4  descriptor number in the exporter
//	 60     4  tag descriptor number in the exporter (cuda.NewFDTag)
//	 64     8  tag identity: an importer that finds another identity
//	           behind the tag number knows the export was closed since
//	 72     4  multicast: number of member GPUs; buffer: 0
//	 76     4  reserved (0)
//	 80     8  id: random, of the allocation or group
//	 88     8  extent: allocation size, or group size
//	 96     8  buffer: offset in the allocation; multicast: granularity
//	104     8  buffer: size; multicast: 0
//	112        end
const (
	handleMagic   = "WEFTNVS1"
	handleVersion = 1
	kindBuffer    = 1
	kindMulticast = 2
	// HandleSize is the length of this backend's handles in bytes.
	HandleSize = 112
)

// handle is the decoded form of an exported buffer or multicast group.
type handle struct {
	kind     uint16
	pid      uint32
	hostHash uint64
	jobHash  uint64
	pidNS    uint64
	uuid     cuda.UUID
	fd       int32
	tagFD    int32
	tagID    uint64
	ranks    uint32
	reserved uint32
	id       uint64
	extent   uint64
	offset   uint64 // buffer; multicast: granularity
	size     uint64 // buffer
}

func (h handle) encode() hal.Handle {
	b := make([]byte, HandleSize)
	copy(b[0:8], handleMagic)
	le := binary.LittleEndian
	le.PutUint16(b[8:], handleVersion)
	le.PutUint16(b[10:], h.kind)
	le.PutUint32(b[12:], h.pid)
	le.PutUint64(b[16:], h.hostHash)
	le.PutUint64(b[24:], h.jobHash)
	le.PutUint64(b[32:], h.pidNS)
	copy(b[40:56], h.uuid[:])
	le.PutUint32(b[56:], uint32(h.fd))
	le.PutUint32(b[60:], uint32(h.tagFD))
	le.PutUint64(b[64:], h.tagID)
	le.PutUint32(b[72:], h.ranks)
	le.PutUint32(b[76:], h.reserved)
	le.PutUint64(b[80:], h.id)
	le.PutUint64(b[88:], h.extent)
	le.PutUint64(b[96:], h.offset)
	le.PutUint64(b[104:], h.size)
	return b
}

// isHandle reports whether b carries this backend's magic (of any version),
// as opposed to a CUDA IPC handle of the device core.
func isHandle(b []byte) bool { return len(b) >= 8 && string(b[0:8]) == handleMagic }

// maxExtent bounds sizes in handles: no GPU has 2^48 bytes.
const maxExtent = 1 << 48

// decodeHandle parses and validates b as a handle of kind want. Errors wrap
// hal.ErrInvalidArgument: wrong size, another backend's magic, another
// format version, another kind, inconsistent fields.
func decodeHandle(b []byte, want uint16) (*handle, error) {
	what := map[uint16]string{kindBuffer: "nvswitch buffer handle", kindMulticast: "nvswitch multicast handle"}[want]
	if len(b) != HandleSize {
		return nil, fmt.Errorf("%s is %d bytes, want %d: %w", what, len(b), HandleSize, hal.ErrInvalidArgument)
	}
	if !bytes.Equal(b[0:8], []byte(handleMagic)) {
		return nil, fmt.Errorf("not an %s (magic %q, want %q; exported by another backend?): %w", what, b[0:8], handleMagic, hal.ErrInvalidArgument)
	}
	le := binary.LittleEndian
	if v := le.Uint16(b[8:]); v != handleVersion {
		return nil, fmt.Errorf("%s format version %d, this build reads version %d (mixed weft versions in one job?): %w", what, v, handleVersion, hal.ErrInvalidArgument)
	}
	h := &handle{
		kind:     le.Uint16(b[10:]),
		pid:      le.Uint32(b[12:]),
		hostHash: le.Uint64(b[16:]),
		jobHash:  le.Uint64(b[24:]),
		pidNS:    le.Uint64(b[32:]),
		fd:       int32(le.Uint32(b[56:])),
		tagFD:    int32(le.Uint32(b[60:])),
		tagID:    le.Uint64(b[64:]),
		ranks:    le.Uint32(b[72:]),
		reserved: le.Uint32(b[76:]),
		id:       le.Uint64(b[80:]),
		extent:   le.Uint64(b[88:]),
		offset:   le.Uint64(b[96:]),
		size:     le.Uint64(b[104:]),
	}
	copy(h.uuid[:], b[40:56])
	if h.kind != want {
		names := map[uint16]string{kindBuffer: "a buffer", kindMulticast: "a multicast group"}
		got, ok := names[h.kind]
		if !ok {
			got = fmt.Sprintf("unknown kind %d", h.kind)
		}
		return nil, fmt.Errorf("%s expected, the handle describes %s: %w", what, got, hal.ErrInvalidArgument)
	}
	bad := func(why string, args ...any) error {
		return fmt.Errorf("%s is inconsistent: %s: %w", what, fmt.Sprintf(why, args...), hal.ErrInvalidArgument)
	}
	switch {
	case h.pid == 0 || h.pid > 1<<30:
		return nil, bad("exporter pid %d", h.pid)
	case h.fd < 0 || h.tagFD < 0 || h.fd == h.tagFD:
		return nil, bad("descriptors %d and %d", h.fd, h.tagFD)
	case h.reserved != 0:
		return nil, bad("reserved field %#x", h.reserved)
	case h.extent == 0 || h.extent > maxExtent:
		return nil, bad("extent of %d bytes", h.extent)
	}
	if h.kind == kindBuffer {
		if h.ranks != 0 || h.size == 0 || h.offset > h.extent || h.size > h.extent-h.offset {
			return nil, bad("buffer of %d bytes at offset %d in an allocation of %d bytes", h.size, h.offset, h.extent)
		}
		return h, nil
	}
	gran := h.offset
	if h.ranks == 0 || h.ranks > 1<<16 || h.size != 0 || gran == 0 || gran&(gran-1) != 0 || h.extent%gran != 0 {
		return nil, bad("group of %d ranks, %d bytes, granularity %d", h.ranks, h.extent, gran)
	}
	return h, nil
}
