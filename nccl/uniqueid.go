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
// (4 bytes), the bootstrap magic (8, big-endian), the length of the root
// address (1) and the address ("127.0.0.1:40123"); the rest is zero.
var idPrefix = [4]byte{'w', 'f', 't', '1'}

const maxIDAddr = uniqueIDBytes - 4 - 8 - 1

// encodeID writes a bootstrap id as an ncclUniqueId.
func encodeID(id bootstrap.UniqueID) ([uniqueIDBytes]byte, error) {
	var b [uniqueIDBytes]byte
	if len(id.Addr) > maxIDAddr {
		return b, fmt.Errorf("root address %q longer than %d bytes: %w", id.Addr, maxIDAddr, hal.ErrInvalidArgument)
	}
	copy(b[:4], idPrefix[:])
	binary.BigEndian.PutUint64(b[4:12], id.Magic)
	b[12] = byte(len(id.Addr))
	copy(b[13:], id.Addr)
	return b, nil
}

// decodeID reads an ncclUniqueId written by encodeID. An id of another
// library (NVIDIA's NCCL) or garbage is an error wrapping
// hal.ErrInvalidArgument.
func decodeID(b [uniqueIDBytes]byte) (bootstrap.UniqueID, error) {
	if !bytes.Equal(b[:4], idPrefix[:]) {
		return bootstrap.UniqueID{}, fmt.Errorf("commId is not a unique id made by weft's ncclGetUniqueId (was it made by another NCCL?): %w", hal.ErrInvalidArgument)
	}
	n := int(b[12])
	if n > maxIDAddr {
		return bootstrap.UniqueID{}, fmt.Errorf("commId: root address length %d: %w", n, hal.ErrInvalidArgument)
	}
	if !allZero(b[13+n:]) {
		return bootstrap.UniqueID{}, fmt.Errorf("commId: bytes after the root address: %w", hal.ErrInvalidArgument)
	}
	id := bootstrap.UniqueID{Magic: binary.BigEndian.Uint64(b[4:12]), Addr: string(b[13 : 13+n])}
	// ParseUniqueID validates the address (host:port) and the magic.
	checked, err := bootstrap.ParseUniqueID(id.String())
	if err != nil {
		return bootstrap.UniqueID{}, fmt.Errorf("commId: %w", err)
	}
	return checked, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
