package cudadev

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/devcore"
)

// Handle format, version 1 (all integers little-endian):
//
//	off  size  field
//	  0     8  magic "WEFTNVL1"
//	  8     2  version (1)
//	 10     2  kind (1: CUDA IPC memory handle)
//	 12     4  exporter pid
//	 16     8  exporter host hash (first 8 bytes of SHA-256 of its HostID)
//	 24    16  exporter device UUID
//	 40     8  allocation base address in the exporter
//	 48     8  allocation size
//	 56     8  offset of the buffer within the allocation
//	 64     8  buffer size
//	 72    64  cudaIpcMemHandle of the allocation
//	136        end
//
// The IPC handle names a whole allocation; offset and size select the
// buffer in it, so buffers that are parts of one allocation export too.
const (
	handleMagic   = "WEFTNVL1"
	handleVersion = 1
	kindCUDAIPC   = 1
	// HandleSize is the length of a CUDA IPC handle in bytes.
	HandleSize = 136
)

// handle is the decoded form of an exported buffer.
type handle struct {
	kind      uint16
	pid       uint32
	hostHash  uint64
	uuid      cuda.UUID
	allocBase uint64
	allocSize uint64
	offset    uint64
	size      uint64
	ipc       cuda.IPCMemHandle
}

func (h handle) encode() hal.Handle {
	b := make([]byte, HandleSize)
	copy(b[0:8], handleMagic)
	le := binary.LittleEndian
	le.PutUint16(b[8:], handleVersion)
	le.PutUint16(b[10:], h.kind)
	le.PutUint32(b[12:], h.pid)
	le.PutUint64(b[16:], h.hostHash)
	copy(b[24:40], h.uuid[:])
	le.PutUint64(b[40:], h.allocBase)
	le.PutUint64(b[48:], h.allocSize)
	le.PutUint64(b[56:], h.offset)
	le.PutUint64(b[64:], h.size)
	copy(b[72:136], h.ipc[:])
	return b
}

// decodeHandle parses and validates b. Errors wrap hal.ErrInvalidArgument:
// a handle of the wrong size, of another backend (magic), of another
// format version, or with inconsistent sizes.
func decodeHandle(b []byte) (*handle, error) {
	if len(b) != HandleSize {
		return nil, fmt.Errorf("CUDA IPC handle is %d bytes, want %d: %w", len(b), HandleSize, hal.ErrInvalidArgument)
	}
	if !bytes.Equal(b[0:8], []byte(handleMagic)) {
		return nil, fmt.Errorf("not a CUDA IPC handle (magic %q, want %q; exported by another backend?): %w", b[0:8], handleMagic, hal.ErrInvalidArgument)
	}
	le := binary.LittleEndian
	if v := le.Uint16(b[8:]); v != handleVersion {
		return nil, fmt.Errorf("CUDA IPC handle format version %d, this build reads version %d (mixed weft versions in one job?): %w", v, handleVersion, hal.ErrInvalidArgument)
	}
	h := &handle{
		kind:      le.Uint16(b[10:]),
		pid:       le.Uint32(b[12:]),
		hostHash:  le.Uint64(b[16:]),
		allocBase: le.Uint64(b[40:]),
		allocSize: le.Uint64(b[48:]),
		offset:    le.Uint64(b[56:]),
		size:      le.Uint64(b[64:]),
	}
	copy(h.uuid[:], b[24:40])
	copy(h.ipc[:], b[72:136])
	if h.kind != kindCUDAIPC {
		return nil, fmt.Errorf("CUDA IPC handle of unknown kind %d: %w", h.kind, hal.ErrInvalidArgument)
	}
	if h.size == 0 || h.offset > h.allocSize || h.size > h.allocSize-h.offset || h.allocSize > 1<<62 {
		return nil, fmt.Errorf("CUDA IPC handle is inconsistent: buffer of %d bytes at offset %d in an allocation of %d bytes: %w",
			h.size, h.offset, h.allocSize, hal.ErrInvalidArgument)
	}
	return h, nil
}

// HostHash condenses a HostID (or any identity string, such as a job id)
// into the 64 bits that handles carry: devcore.HashID, the first 8 bytes
// of its SHA-256.
func HostHash(id string) uint64 { return devcore.HashID(id) }
