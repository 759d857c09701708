package half

import (
	"math"
	"testing"
)

// Every binary16 and bfloat16 value converts to float32 and back unchanged
// (NaNs stay NaN), which pins both directions bit for bit.
func TestRoundTripEveryValue(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := ToFloat32(h)
		if got := FromFloat32(f); got != h && !(math.IsNaN(float64(f)) && math.IsNaN(float64(ToFloat32(got)))) {
			t.Fatalf("half %#04x -> %v -> %#04x", h, f, got)
		}
		b := BF16ToFloat32(h)
		if got := BF16FromFloat32(b); got != h && !(math.IsNaN(float64(b)) && math.IsNaN(float64(BF16ToFloat32(got)))) {
			t.Fatalf("bfloat16 %#04x -> %v -> %#04x", h, b, got)
		}
	}
}

// Rounding is to nearest, ties to even, as the GPU's cvt.rn instructions.
func TestRoundToNearestEven(t *testing.T) {
	for _, tc := range []struct {
		f    float32
		half uint16
		bf16 uint16
	}{
		{1, 0x3c00, 0x3f80},
		{1 + 1.0/2048, 0x3c00, 0x3f80},                  // half: tie between 1 and 1+2^-10, to even
		{1 + 3.0/2048, 0x3c02, 0x3f80},                  // half: tie, rounds up to even
		{1 + 1.0/256, 0x3c04, 0x3f80},                   // bfloat16: tie between 1 and 1+2^-7, to even
		{1 + 3.0/256, 0x3c0c, 0x3f82},                   // bfloat16: tie, rounds up to even
		{65520, 0x7c00, 0x4780},                         // half overflows to +Inf
		{float32(math.Copysign(0, -1)), 0x8000, 0x8000}, // sign of zero kept
		{5.960464477539063e-08, 0x0001, 0x3380},         // smallest half subnormal
	} {
		if got := FromFloat32(tc.f); got != tc.half {
			t.Errorf("FromFloat32(%v) = %#04x, want %#04x", tc.f, got, tc.half)
		}
		if got := BF16FromFloat32(tc.f); got != tc.bf16 {
			t.Errorf("BF16FromFloat32(%v) = %#04x, want %#04x", tc.f, got, tc.bf16)
		}
	}
}
