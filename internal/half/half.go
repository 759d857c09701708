// Package half converts between float32 and the narrow float formats of
// GPU collectives: IEEE 754 binary16 and bfloat16 (rounding to nearest even,
// as the GPU's cvt.rn instructions do), and the two 8-bit formats of the OCP
// FP8 specification, E4M3 and E5M2 (rounding to nearest even and saturating
// to the largest finite value, as cvt.rn.satfinite does).
package half

import "math"

// Decoding tables: every code of each narrow format, decoded once at init
// by the arithmetic decoders below (the CPU reference backend and the
// checker decode millions of elements per test).
var (
	binary16Table [1 << 16]float32
	e4m3Table     [1 << 8]float32
	e5m2Table     [1 << 8]float32
)

func init() {
	for c := range binary16Table {
		binary16Table[c] = decodeBinary16(uint16(c))
	}
	for c := range e4m3Table {
		e4m3Table[c] = decodeE4M3(uint8(c))
		e5m2Table[c] = decodeE5M2(uint8(c))
	}
}

// ToFloat32 converts IEEE 754 binary16 bits to float32 (exactly).
func ToFloat32(h uint16) float32 { return binary16Table[h] }

// decodeBinary16 is ToFloat32 by arithmetic.
func decodeBinary16(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf, NaN
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: normalise
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// FromFloat32 converts to binary16, rounding to nearest even.
func FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 // quiet NaN
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		m := mant | 0x800000
		shift := uint32(14 - e)
		half := m >> shift
		rem := m & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return sign | uint16(half)
	}
	half := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++ // may carry into the exponent, which is right
	}
	return sign | uint16(half)
}

// BF16ToFloat32 converts bfloat16 bits to float32 (exactly).
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// BF16FromFloat32 converts to bfloat16, rounding to nearest even.
func BF16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40 // quiet NaN
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// The 8-bit formats (OCP 8-bit Floating Point Specification, 2023):
//
//	E4M3: sign, 4 exponent bits (bias 7), 3 mantissa bits. No infinity;
//	      S.1111.111 is NaN; largest finite ±448, smallest subnormal 2^-9.
//	E5M2: sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like:
//	      exponent 31 is ±Inf (mantissa 0) or NaN; largest finite ±57344,
//	      smallest subnormal 2^-16. An E5M2 value is the high byte of the
//	      binary16 value it equals.
//
// Conversions from float32 round to nearest even and saturate (the
// .satfinite behaviour of the GPU's cvt.rn.satfinite.e4m3x2/e5m2x2): a
// magnitude above the largest finite value, infinity included, becomes
// the largest finite value with the same sign, so E5M2FromFloat32(±Inf) is
// ±57344 (0x7b/0xfb), not ±Inf. NaN becomes the NaN code 0x7f.
const (
	e4m3Mant, e4m3Bias, e4m3Max = 3, 7, 0x7e  // 0x7e = 1.75 × 2^8 = 448
	e5m2Mant, e5m2Bias, e5m2Max = 2, 15, 0x7b // 0x7b = 1.75 × 2^15 = 57344
	f8NaN                       = 0x7f
)

// E4M3ToFloat32 converts FP8 E4M3 bits to float32 (exactly).
func E4M3ToFloat32(c uint8) float32 { return e4m3Table[c] }

// E5M2ToFloat32 converts FP8 E5M2 bits to float32 (exactly).
func E5M2ToFloat32(c uint8) float32 { return e5m2Table[c] }

// decodeE4M3 is E4M3ToFloat32 by arithmetic.
func decodeE4M3(c uint8) float32 {
	if c&0x7f == 0x7f {
		return f8NaNFloat(c)
	}
	return f8ToFloat32(c, e4m3Mant, e4m3Bias)
}

// decodeE5M2 is E5M2ToFloat32 by arithmetic.
func decodeE5M2(c uint8) float32 {
	switch {
	case c&0x7f == 0x7c:
		return float32(math.Inf(1 - 2*int(c>>7)))
	case c&0x7f > 0x7c:
		return f8NaNFloat(c)
	}
	return f8ToFloat32(c, e5m2Mant, e5m2Bias)
}

// E4M3FromFloat32 converts to FP8 E4M3, rounding to nearest even and
// saturating to ±448.
func E4M3FromFloat32(f float32) uint8 { return f8FromFloat32(f, e4m3Mant, e4m3Bias, e4m3Max) }

// E5M2FromFloat32 converts to FP8 E5M2, rounding to nearest even and
// saturating to ±57344 (infinities included).
func E5M2FromFloat32(f float32) uint8 { return f8FromFloat32(f, e5m2Mant, e5m2Bias, e5m2Max) }

func f8NaNFloat(c uint8) float32 { return math.Float32frombits(uint32(c>>7)<<31 | 0x7fc00000) }

// f8ToFloat32 decodes a finite code with mant mantissa bits and the given
// exponent bias.
func f8ToFloat32(c uint8, mant, bias uint32) float32 {
	sign := uint32(c>>7) << 31
	exp := uint32(c&0x7f) >> mant
	m := uint32(c) & (1<<mant - 1)
	if exp == 0 { // zero or subnormal: m × 2^(1-bias-mant), exact in float32
		v := float32(math.Ldexp(float64(m), 1-int(bias)-int(mant)))
		return math.Float32frombits(sign | math.Float32bits(v))
	}
	return math.Float32frombits(sign | (exp-bias+127)<<23 | m<<(23-mant))
}

// f8FromFloat32 encodes f with mant mantissa bits and the given exponent
// bias, rounding to nearest even; magnitudes above the code maxCode
// saturate to it.
func f8FromFloat32(f float32, mant, bias uint32, maxCode uint8) uint8 {
	b := math.Float32bits(f)
	sign := uint8(b>>24) & 0x80
	a := b & 0x7fffffff
	if a > 0x7f800000 {
		return f8NaN
	}
	exp := int32(a >> 23) // biased float32 exponent
	if exp == 0 {         // float32 zero or subnormal: far below half the smallest fp8 subnormal
		return sign
	}
	e := exp - 127 + int32(bias) // biased fp8 exponent
	if e >= 1<<(7-mant) {
		return sign | maxCode
	}
	m := a&0x7fffff | 0x800000 // 24-bit significand
	shift := uint32(23 - mant)
	code := uint32(e) << mant
	if e <= 0 { // subnormal in fp8: shift the implicit bit in
		shift += uint32(1 - e)
		if shift > 24 {
			return sign // below half the smallest subnormal
		}
		code = 0
	} else {
		m &= 0x7fffff
	}
	code |= m >> shift
	rem := m & (1<<shift - 1)
	mid := uint32(1) << (shift - 1)
	if rem > mid || (rem == mid && code&1 == 1) {
		code++ // may carry into the exponent, which is right
	}
	if code > uint32(maxCode) {
		code = uint32(maxCode)
	}
	return sign | uint8(code)
}
