package pcie

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/cudadev"
)

// Port handle format, version 1 (integers little-endian): what ExportPort
// returns. A peer with peer access imports the embedded CUDA IPC handle
// and maps the buffer; a host-staged peer keeps the exporter's address,
// which its engine names in descriptors and the exporter's receiver copies
// to.
//
//	off  size  field
//	  0     8  magic "WEFTPCP1"
//	  8     2  version (1)
//	 10     2  flags (bit 0: a CUDA IPC handle follows)
//	 12     4  exporter pid
//	 16     8  job hash (first 8 bytes of SHA-256 of the JobID)
//	 24     8  host hash (the same of the exporter's HostID)
//	 32    16  exporter GPU UUID
//	 48     4  exporter CUDA ordinal
//	 52     4  reserved, zero
//	 56     8  buffer address in the exporter's address space
//	 64     8  buffer size in bytes
//	 72   136  CUDA IPC handle of the buffer (internal/cudadev format), or zeros
//	208        end
const (
	portMagic   = "WEFTPCP1"
	portVersion = 1
	flagIPC     = 1
	// PortHandleSize is the length of a pcie port handle in bytes.
	PortHandleSize = 72 + cudadev.HandleSize
)

type portHandle struct {
	flags   uint16
	pid     uint32
	job     uint64
	host    uint64
	uuid    cuda.UUID
	ordinal uint32
	addr    uint64
	size    uint64
	ipc     []byte // cudadev.HandleSize bytes when flags&flagIPC
}

func (h *portHandle) encode() hal.Handle {
	b := make([]byte, PortHandleSize)
	le := binary.LittleEndian
	copy(b, portMagic)
	le.PutUint16(b[8:], portVersion)
	le.PutUint16(b[10:], h.flags)
	le.PutUint32(b[12:], h.pid)
	le.PutUint64(b[16:], h.job)
	le.PutUint64(b[24:], h.host)
	copy(b[32:48], h.uuid[:])
	le.PutUint32(b[48:], h.ordinal)
	le.PutUint64(b[56:], h.addr)
	le.PutUint64(b[64:], h.size)
	copy(b[72:], h.ipc)
	return b
}

// decodePortHandle parses b. Errors wrap hal.ErrInvalidArgument: a handle
// of the wrong size, another backend's (magic), another format version,
// unknown flags, a zero size or a buffer that wraps around the address
// space.
func decodePortHandle(b []byte) (*portHandle, error) {
	if len(b) != PortHandleSize {
		return nil, fmt.Errorf("pcie port handle is %d bytes, want %d: %w", len(b), PortHandleSize, hal.ErrInvalidArgument)
	}
	if !bytes.Equal(b[:8], []byte(portMagic)) {
		return nil, fmt.Errorf("not a pcie port handle (magic %q, want %q; exported by another backend?): %w", b[:8], portMagic, hal.ErrInvalidArgument)
	}
	le := binary.LittleEndian
	if v := le.Uint16(b[8:]); v != portVersion {
		return nil, fmt.Errorf("pcie port handle format version %d, this build reads version %d (mixed weft versions in one job?): %w", v, portVersion, hal.ErrInvalidArgument)
	}
	h := &portHandle{
		flags:   le.Uint16(b[10:]),
		pid:     le.Uint32(b[12:]),
		job:     le.Uint64(b[16:]),
		host:    le.Uint64(b[24:]),
		ordinal: le.Uint32(b[48:]),
		addr:    le.Uint64(b[56:]),
		size:    le.Uint64(b[64:]),
	}
	copy(h.uuid[:], b[32:48])
	if h.flags&^flagIPC != 0 || le.Uint32(b[52:]) != 0 {
		return nil, fmt.Errorf("pcie port handle has unknown flags %#x: %w", h.flags, hal.ErrInvalidArgument)
	}
	if h.size == 0 || h.size > 1<<62 || h.addr == 0 || h.addr+h.size < h.addr {
		return nil, fmt.Errorf("pcie port handle names %d bytes at %#x: %w", h.size, h.addr, hal.ErrInvalidArgument)
	}
	if h.flags&flagIPC != 0 {
		h.ipc = append([]byte(nil), b[72:]...)
	} else if !bytes.Equal(b[72:], make([]byte, cudadev.HandleSize)) {
		return nil, fmt.Errorf("pcie port handle without a CUDA IPC part carries one: %w", hal.ErrInvalidArgument)
	}
	return h, nil
}
