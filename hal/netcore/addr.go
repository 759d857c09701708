package netcore

// Remote addresses. An engine's Put destinations and Signal targets are
// 64-bit values that name a registration of the peer and an offset in it:
// bit 63 set (no user-space host pointer or GPU virtual address has it), a
// 23-bit registration id in bits 40–62, and a 40-bit byte offset. Adding an
// offset to an imported buffer's Addr therefore works as it does for a
// mapped buffer, up to 1 TiB per registration.
const (
	AddrTag  = uint64(1) << 63     // marks a remote address
	OffBits  = 40                  // bits of the byte offset
	MaxReg   = 1<<23 - 1           // the most registrations of one NetDevice
	MaxBytes = int64(1) << OffBits // the largest registration, 1 TiB
	offMask  = uint64(1)<<OffBits - 1
)

// EncodeAddr is the remote address of byte off of registration reg
// (1..MaxReg; off below MaxBytes).
func EncodeAddr(reg uint32, off uint64) uint64 {
	return AddrTag | uint64(reg)<<OffBits | off
}

// DecodeAddr splits a remote address. ok is false for an address without
// the tag bit or with registration id 0.
func DecodeAddr(a uint64) (reg uint32, off uint64, ok bool) {
	if a&AddrTag == 0 {
		return 0, 0, false
	}
	reg = uint32((a &^ AddrTag) >> OffBits)
	return reg, a & offMask, reg != 0
}
