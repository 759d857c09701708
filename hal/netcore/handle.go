package netcore

import (
	"encoding/binary"
	"fmt"

	"github.com/weftccl/weft/hal"
)

// HandleSize is the size of a registration handle, in bytes.
//
// Layout (big-endian): magic u32 | version u8 | 3 reserved zero bytes |
// job hash u64 | nonce u64 | rank u32 | registration id u32 | size u64.
const HandleSize = 40

// Handle is what a registration handle says: the exporting NetDevice (job
// hash, nonce, rank), the registration id (1 to MaxReg) and its size in
// bytes (1 to MaxBytes).
type Handle struct {
	Job, Nonce uint64
	Rank       int
	Reg        uint32
	Size       int64
}

// Owner is the handle's exporter, as hal.CheckImport takes it.
func (h Handle) Owner() hal.HandleOwner {
	return hal.HandleOwner{Job: h.Job, Rank: h.Rank, Nonce: h.Nonce}
}

// HandleFormat is one backend's handle: its magic and protocol version,
// and the sentinels decode errors wrap (the backend's own, which its
// tests and its other decoders use).
type HandleFormat struct {
	Magic                          uint32
	Version                        byte
	ErrMalformed, ErrMagic, ErrVer error
}

// Encode lays h out in HandleSize bytes.
func (f HandleFormat) Encode(h Handle) []byte {
	b := make([]byte, HandleSize)
	binary.BigEndian.PutUint32(b, f.Magic)
	b[4] = f.Version
	binary.BigEndian.PutUint64(b[8:], h.Job)
	binary.BigEndian.PutUint64(b[16:], h.Nonce)
	binary.BigEndian.PutUint32(b[24:], uint32(h.Rank))
	binary.BigEndian.PutUint32(b[28:], h.Reg)
	binary.BigEndian.PutUint64(b[32:], uint64(h.Size))
	return b
}

// Decode checks every byte of b (a peer's, so hostile) and returns the
// handle. Errors wrap f.ErrMalformed (size, reserved bytes, registration
// id, size field), f.ErrMagic or f.ErrVer; it never panics.
func (f HandleFormat) Decode(b []byte) (Handle, error) {
	if len(b) != HandleSize {
		return Handle{}, fmt.Errorf("%w handle: %d bytes, want %d (a handle of another backend or network?)", f.ErrMalformed, len(b), HandleSize)
	}
	if m := binary.BigEndian.Uint32(b); m != f.Magic {
		return Handle{}, fmt.Errorf("%w %#08x in a handle, want %#08x (a handle of another backend or network?)", f.ErrMagic, m, f.Magic)
	}
	if b[4] != f.Version {
		return Handle{}, fmt.Errorf("%w %d in a handle, want %d", f.ErrVer, b[4], f.Version)
	}
	h := Handle{
		Job:   binary.BigEndian.Uint64(b[8:]),
		Nonce: binary.BigEndian.Uint64(b[16:]),
		Rank:  int(binary.BigEndian.Uint32(b[24:])),
		Reg:   binary.BigEndian.Uint32(b[28:]),
		Size:  int64(binary.BigEndian.Uint64(b[32:])),
	}
	switch {
	case b[5]|b[6]|b[7] != 0:
		return Handle{}, fmt.Errorf("%w handle: reserved bytes are not zero", f.ErrMalformed)
	case h.Reg == 0 || h.Reg > MaxReg:
		return Handle{}, fmt.Errorf("%w handle: registration id %d", f.ErrMalformed, h.Reg)
	case h.Size <= 0 || h.Size > MaxBytes:
		return Handle{}, fmt.Errorf("%w handle: size %d", f.ErrMalformed, h.Size)
	}
	return h, nil
}
