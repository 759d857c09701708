package nvswitch

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/hal"
)

func validBuffer() handle {
	return handle{kind: kindBuffer, pid: 4242, hostHash: 1, jobHash: 2, pidNS: 3, uuid: [16]byte{0xaa, 1}, fd: 17, tagFD: 18, tagID: 0x1234,
		id: 99, extent: 4 << 20, offset: 2 << 20, size: 1 << 20}
}

func validMulticast() handle {
	return handle{kind: kindMulticast, pid: 4242, hostHash: 1, jobHash: 2, pidNS: 3, uuid: [16]byte{0xbb}, fd: 23, tagFD: 24, tagID: 0x5678,
		ranks: 4, id: 7, extent: 512 << 20, offset: 2 << 20}
}

func TestHandleRoundTrip(t *testing.T) {
	for _, h := range []handle{validBuffer(), validMulticast()} {
		b := h.encode()
		if len(b) != HandleSize || !isHandle(b) {
			t.Fatalf("encode: %d bytes, isHandle %v", len(b), isHandle(b))
		}
		got, err := decodeHandle(b, h.kind)
		if err != nil {
			t.Fatalf("decode(kind %d): %v", h.kind, err)
		}
		if d := cmp.Diff(h, *got, cmp.AllowUnexported(handle{})); d != "" {
			t.Errorf("round trip (-want +got):\n%s", d)
		}
	}
}

func TestDecodeHandleRefuses(t *testing.T) {
	le := binary.LittleEndian
	edit := func(h handle, f func(b []byte)) []byte {
		b := h.encode()
		f(b)
		return b
	}
	tests := []struct {
		name string
		b    []byte
		kind uint16
	}{
		{"empty", nil, kindBuffer},
		{"short", validBuffer().encode()[:HandleSize-1], kindBuffer},
		{"long", append(validBuffer().encode(), 0), kindBuffer},
		{"CUDA IPC handle of the core", edit(validBuffer(), func(b []byte) { copy(b, "WEFTNVL1") }), kindBuffer},
		{"host backend", edit(validBuffer(), func(b []byte) { copy(b, "WEFTHOST") }), kindBuffer},
		{"version 2", edit(validBuffer(), func(b []byte) { le.PutUint16(b[8:], 2) }), kindBuffer},
		{"multicast handle to Import", validMulticast().encode(), kindBuffer},
		{"buffer handle to ImportMulticast", validBuffer().encode(), kindMulticast},
		{"unknown kind", edit(validBuffer(), func(b []byte) { le.PutUint16(b[10:], 9) }), kindBuffer},
		{"pid 0", edit(validBuffer(), func(b []byte) { le.PutUint32(b[12:], 0) }), kindBuffer},
		{"negative descriptor", edit(validBuffer(), func(b []byte) { le.PutUint32(b[56:], 0xffffffff) }), kindBuffer},
		{"negative tag descriptor", edit(validBuffer(), func(b []byte) { le.PutUint32(b[60:], 0xffffffff) }), kindBuffer},
		{"tag is the descriptor", edit(validBuffer(), func(b []byte) { le.PutUint32(b[60:], 17) }), kindBuffer},
		{"reserved field set", edit(validBuffer(), func(b []byte) { le.PutUint32(b[76:], 1) }), kindBuffer},
		{"zero extent", edit(validBuffer(), func(b []byte) { le.PutUint64(b[88:], 0) }), kindBuffer},
		{"huge extent", edit(validBuffer(), func(b []byte) { le.PutUint64(b[88:], 1<<62) }), kindBuffer},
		{"buffer past its allocation", edit(validBuffer(), func(b []byte) { le.PutUint64(b[104:], 3<<20) }), kindBuffer},
		{"offset past the allocation", edit(validBuffer(), func(b []byte) { le.PutUint64(b[96:], 5<<20) }), kindBuffer},
		{"empty buffer", edit(validBuffer(), func(b []byte) { le.PutUint64(b[104:], 0) }), kindBuffer},
		{"buffer with ranks", edit(validBuffer(), func(b []byte) { le.PutUint32(b[72:], 2) }), kindBuffer},
		{"group of 0 ranks", edit(validMulticast(), func(b []byte) { le.PutUint32(b[72:], 0) }), kindMulticast},
		{"granularity 0", edit(validMulticast(), func(b []byte) { le.PutUint64(b[96:], 0) }), kindMulticast},
		{"granularity not a power of 2", edit(validMulticast(), func(b []byte) { le.PutUint64(b[96:], 3<<20) }), kindMulticast},
		{"size not a multiple of the granularity", edit(validMulticast(), func(b []byte) { le.PutUint64(b[88:], 3<<20) }), kindMulticast},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := decodeHandle(tt.b, tt.kind); !errors.Is(err, hal.ErrInvalidArgument) {
				t.Errorf("decodeHandle = %v, want an error wrapping ErrInvalidArgument", err)
			}
		})
	}
}

// FuzzDecodeHandle: decoding arbitrary bytes never panics, and whatever it
// accepts encodes back to the same bytes.
func FuzzDecodeHandle(f *testing.F) {
	f.Add([]byte(validBuffer().encode()), uint8(kindBuffer))
	f.Add([]byte(validMulticast().encode()), uint8(kindMulticast))
	f.Add([]byte("WEFTNVS1"), uint8(kindBuffer))
	f.Fuzz(func(t *testing.T, b []byte, kind uint8) {
		h, err := decodeHandle(b, uint16(kind))
		if err != nil {
			if !errors.Is(err, hal.ErrInvalidArgument) {
				t.Fatalf("error %v does not wrap ErrInvalidArgument", err)
			}
			return
		}
		if d := cmp.Diff([]byte(h.encode()), b); d != "" {
			t.Fatalf("accepted handle re-encodes differently:\n%s", d)
		}
	})
}
