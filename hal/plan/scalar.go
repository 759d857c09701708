package plan

import (
	"math"

	"github.com/weftccl/weft/internal/half"
)

// ScalarBits returns v as one element of type t, in the low bytes of the
// result (little-endian, the layout of Args.Scalar): floating types round to
// nearest even (FP8 saturates to its largest finite value, as the GPU's
// cvt.rn.satfinite does), integer types truncate toward zero and wrap to
// the type's width. A NaN v gives the type's NaN; an integer type's value
// for a NaN or out-of-range v is unspecified.
func ScalarBits(t DataType, v float64) uint64 {
	switch t {
	case Float64:
		return math.Float64bits(v)
	case Float32:
		return uint64(math.Float32bits(float32(v)))
	// Rounding through float32 first is exact enough: float32 carries more
	// than twice the precision of these formats plus two bits, so the two
	// roundings give the correctly rounded result.
	case Float16:
		return uint64(half.FromFloat32(float32(v)))
	case BFloat16:
		return uint64(half.BF16FromFloat32(float32(v)))
	case Float8E4M3:
		return uint64(half.E4M3FromFloat32(float32(v)))
	case Float8E5M2:
		return uint64(half.E5M2FromFloat32(float32(v)))
	}
	var i uint64
	if v < 0 {
		i = uint64(int64(v))
	} else {
		i = uint64(v)
	}
	if s := t.Size(); s > 0 && s < 8 {
		i &= 1<<(8*s) - 1
	}
	return i
}

// AvgScalar is the multiplier of Avg for a floating type t: 1/nranks
// rounded to nearest even in t, as bits for Args.Scalar (NCCL likewise
// computes 1/nranks in double precision and converts it to the type). Every
// contribution is multiplied by it before the sum, so the result is
// Σ x·AvgScalar, not Σ x / nranks. nranks must be at least 1. Integer
// types have no multiplier (their Avg divides the sum); AvgScalar returns 0
// for them.
func AvgScalar(t DataType, nranks int) uint64 {
	if !t.Float() {
		return 0
	}
	return ScalarBits(t, 1/float64(nranks))
}
