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

// Every FP8 code converts to float32 and back unchanged, NaNs to the NaN
// code 0x7f; the E5M2 infinities saturate to the largest finite value, as
// cvt.rn.satfinite does.
func TestFP8RoundTripEveryCode(t *testing.T) {
	for _, f := range []struct {
		name string
		to   func(uint8) float32
		from func(float32) uint8
	}{
		{"e4m3", E4M3ToFloat32, E4M3FromFloat32},
		{"e5m2", E5M2ToFloat32, E5M2FromFloat32},
	} {
		nans, infs := 0, 0
		for i := 0; i < 256; i++ {
			c := uint8(i)
			v := f.to(c)
			want := c
			switch {
			case math.IsNaN(float64(v)):
				nans++
				want = 0x7f
			case math.IsInf(float64(v), 0):
				infs++
				want = c - 1 // ±57344
			}
			if got := f.from(v); got != want {
				t.Errorf("%s: %#02x -> %v -> %#02x, want %#02x", f.name, c, v, got, want)
			}
		}
		wantNaNs, wantInfs := 2, 0
		if f.name == "e5m2" {
			wantNaNs, wantInfs = 6, 2
		}
		if nans != wantNaNs || infs != wantInfs {
			t.Errorf("%s: %d NaN and %d Inf codes, want %d and %d", f.name, nans, infs, wantNaNs, wantInfs)
		}
	}
}

// Decoded values of the codes that pin the formats.
func TestFP8Values(t *testing.T) {
	for _, tc := range []struct {
		code       uint8
		e4m3, e5m2 float32
	}{
		{0x00, 0, 0},
		{0x01, 1.0 / 512, 1.0 / 65536}, // smallest subnormals
		{0x07, 7.0 / 512, 7.0 / 65536}, // e4m3: largest subnormal; e5m2: 1.75 × 2^-14
		{0x08, 1.0 / 64, 1.0 / 8192},   // smallest normals
		{0x38, 1, 0.5},
		{0x3c, 1.5, 1},
		{0x7b, 352, 57344}, // e5m2 largest finite
		{0x7e, 448, float32(math.NaN())},
		{0xb8, -1, -0.5},
		{0xc0, -2, -2},
	} {
		if got := E4M3ToFloat32(tc.code); got != tc.e4m3 {
			t.Errorf("E4M3ToFloat32(%#02x) = %v, want %v", tc.code, got, tc.e4m3)
		}
		if got := E5M2ToFloat32(tc.code); got != tc.e5m2 && !(math.IsNaN(float64(got)) && math.IsNaN(float64(tc.e5m2))) {
			t.Errorf("E5M2ToFloat32(%#02x) = %v, want %v", tc.code, got, tc.e5m2)
		}
	}
}

// Rounding is to nearest, ties to even, with saturation at the largest
// finite value.
func TestFP8RoundToNearestEvenSaturating(t *testing.T) {
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		f          float32
		e4m3, e5m2 uint8
	}{
		{1 + 1.0/16, 0x38, 0x3c}, // e4m3: tie between 1 (0x38) and 1.125, to even
		{1 + 3.0/16, 0x3a, 0x3d}, // e4m3: tie between 1.125 and 1.25, up to even
		{1 + 1.0/16 + 1.0/1024, 0x39, 0x3c},
		{1 + 1.0/8, 0x39, 0x3c}, // e5m2: tie between 1 and 1.25, to even
		{1 + 3.0/8, 0x3b, 0x3e}, // e5m2: tie between 1.25 and 1.5, up to even
		{17, 0x58, 0x4c},        // e4m3: tie 16|18 to 16; e5m2: 16
		{19, 0x5a, 0x4d},        // e4m3: tie 18|20 to 20; e5m2: 20
		{464, 0x7e, 0x5f},       // e4m3: midpoint to the (NaN) next code saturates; e5m2: 448
		{1e6, 0x7e, 0x7b},       // both saturate
		{-1e6, 0xfe, 0xfb},
		{inf, 0x7e, 0x7b}, // infinity saturates too
		{-inf, 0xfe, 0xfb},
		{61440, 0x7e, 0x7b},      // e5m2: midpoint 57344|65536 saturates
		{1.0 / 1024, 0x00, 0x14}, // e4m3: half the smallest subnormal, tie to 0
		{3.0 / 1024, 0x02, 0x1a}, // e4m3: tie 1|2 subnormal, to even
		{1.0/1024 + 1.0/65536, 0x01, 0x14},
		{1.0 / 131072, 0x00, 0x00}, // e5m2: half the smallest subnormal, tie to 0
		{3.0 / 131072, 0x00, 0x02}, // e5m2: tie 1|2 subnormal, to even
		{15.0 / 1024, 0x08, 0x24},  // e4m3: 7.5 subnormal ulps round up to the smallest normal; e5m2: tie 1.75|2 × 2^-7, to even
		{float32(math.Copysign(0, -1)), 0x80, 0x80},
		{1e-30, 0x00, 0x00},
		{float32(math.NaN()), 0x7f, 0x7f},
	} {
		if got := E4M3FromFloat32(tc.f); got != tc.e4m3 {
			t.Errorf("E4M3FromFloat32(%v) = %#02x, want %#02x", tc.f, got, tc.e4m3)
		}
		if got := E5M2FromFloat32(tc.f); got != tc.e5m2 {
			t.Errorf("E5M2FromFloat32(%v) = %#02x, want %#02x", tc.f, got, tc.e5m2)
		}
	}
}

// Conversions agree with rounding in float64 arithmetic: for a dense sweep
// of float32 values, the result is the nearest code (ties to the even
// code), or the largest finite one above it.
func TestFP8NearestAgainstReference(t *testing.T) {
	for _, f := range []struct {
		name string
		to   func(uint8) float32
		from func(float32) uint8
		max  uint8
	}{
		{"e4m3", E4M3ToFloat32, E4M3FromFloat32, 0x7e},
		{"e5m2", E5M2ToFloat32, E5M2FromFloat32, 0x7b},
	} {
		for i := 0; i < 1<<16; i++ {
			x := math.Float32frombits(uint32(i) << 15) // positive float32 values, every exponent
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				continue
			}
			want := f.max
			best := math.Inf(1)
			for c := uint8(0); c <= f.max && x < f.to(f.max); c++ {
				d := math.Abs(float64(f.to(c)) - float64(x))
				if d < best || (d == best && c&1 == 0) {
					best, want = d, c
				}
			}
			if got := f.from(x); got != want {
				t.Fatalf("%s: from(%v) = %#02x, want %#02x", f.name, x, got, want)
			}
		}
	}
}
