//go:build cgo

package main

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
)

// uniqueIDBytes is NCCL_UNIQUE_ID_BYTES.
const uniqueIDBytes = 128

// idPrefix starts every ncclUniqueId weft makes. The layout is prefix
// (4 bytes), the bootstrap magic (8, big-endian), the length of the job
// secret (1: 0, or 16 to 64; ncclGetUniqueId makes 32), the secret, the
// length of the root address (1) and the address ("127.0.0.1:40123"); the
// rest is zero. The application passes the id to its ranks itself (MPI,
// a file), as with NCCL: whoever reads it can join the job.
var idPrefix = [4]byte{'w', 'f', 't', '2'}

const idFixed = 4 + 8 + 1 + 1

// encodeID writes a bootstrap id as an ncclUniqueId. An address that does
// not fit beside the secret is an error wrapping hal.ErrInvalidArgument.
func encodeID(id bootstrap.UniqueID) ([uniqueIDBytes]byte, error) {
	var b [uniqueIDBytes]byte
	sec := id.Secret.Bytes()
	if room := uniqueIDBytes - idFixed - len(sec); len(id.Addr) > room {
		return b, fmt.Errorf("root address %q longer than the %d bytes left beside the job secret: %w", id.Addr, room, hal.ErrInvalidArgument)
	}
	copy(b[:4], idPrefix[:])
	binary.BigEndian.PutUint64(b[4:12], id.Magic)
	b[12] = byte(len(sec))
	n := copy(b[13:], sec)
	b[13+n] = byte(len(id.Addr))
	copy(b[14+n:], id.Addr)
	return b, nil
}

// decodeID reads an ncclUniqueId written by encodeID. An id of another
// library (NVIDIA's NCCL) or garbage is an error wrapping
// hal.ErrInvalidArgument; no error quotes the secret.
func decodeID(b [uniqueIDBytes]byte) (bootstrap.UniqueID, error) {
	if !bytes.Equal(b[:4], idPrefix[:]) {
		return bootstrap.UniqueID{}, fmt.Errorf("commId is not a unique id made by weft's ncclGetUniqueId (was it made by another NCCL, or an older weft?): %w", hal.ErrInvalidArgument)
	}
	ns := int(b[12])
	if ns > uniqueIDBytes-idFixed {
		return bootstrap.UniqueID{}, fmt.Errorf("commId: secret length %d: %w", ns, hal.ErrInvalidArgument)
	}
	n := int(b[13+ns])
	if n > uniqueIDBytes-idFixed-ns {
		return bootstrap.UniqueID{}, fmt.Errorf("commId: root address length %d: %w", n, hal.ErrInvalidArgument)
	}
	if !allZero(b[14+ns+n:]) {
		return bootstrap.UniqueID{}, fmt.Errorf("commId: bytes after the root address: %w", hal.ErrInvalidArgument)
	}
	// UnmarshalBinary validates the secret's length, the address
	// (host:port) and the magic.
	bin := append([]byte{2}, b[4:12]...)
	bin = append(bin, b[12])
	bin = append(bin, b[13:13+ns]...)
	bin = append(bin, b[14+ns:14+ns+n]...)
	var id bootstrap.UniqueID
	if err := id.UnmarshalBinary(bin); err != nil {
		return bootstrap.UniqueID{}, fmt.Errorf("commId: %w", err)
	}
	return id, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
