// Package check builds collective inputs from rank and index, and the exact
// results the collectives must produce, for tests, benchmarks and the
// conformance suite (architecture.md §7).
//
// Inputs are small integers chosen per data type and operator so that
// every reduction of up to [MaxRanks] ranks gives the same bits in any
// order of reduction, so a result is right only if every element is
// bit-for-bit the expected one:
//
//   - Sum, Max, Min, PreMulSum: integers of magnitude at most m(t), where
//     m is 8 for the 16-, 32- and 64-bit types, 7 for int8, 2 for FP8 E4M3
//     (exact integers up to 16) and 1 for FP8 E5M2 (exact integers up to
//     8); unsigned types take 0 … 16 (uint8: 0 … 15) instead. Every partial
//     sum, also with each contribution times its rank's [PreMulScalar]
//     (±1 or ±2; 1 to 3 for unsigned types; ±2 for FP8, so that FP8
//     partial sums stay even), is exact: within ±128 for the wide types
//     (half and bfloat16 hold integers to 2048 and 256), ±112 for int8,
//     240 for uint8, and even integers to 32 (E4M3) or 16 (E5M2).
//   - Prod: ±1 and ±2, with a 2 at most three times among 8 ranks, so
//     every partial product is within ±8 (unsigned types: 1 and 2).
//   - Avg of an integer type: the Sum inputs; the result is the sum
//     divided by nranks, truncated toward zero.
//   - Avg of a floating type multiplies every contribution by
//     plan.AvgScalar (1/nranks rounded to the type) before summing, and
//     such sums round. The inputs are therefore sparse: element i is
//     non-zero (1 … m(t)) only on the two ranks r with (r − i) mod 8 ∈
//     {0, 1}. A sum with at most two non-zero terms rounds once, the same
//     in every order, so [AllReduce]'s value (Σ x·AvgScalar in rank order,
//     rounded to the type after every operation) is exact for any
//     algorithm that rounds once per multiply and once per add.
//
// Those rounding rules are the device library's and hal/host's: FP8
// results round through binary16, which for single operations equals
// rounding to FP8 directly.
//
// More than 8 ranks ([ValueN], [InputN]; [Send] and [AllReduce] use them):
// element i of rank r is active on the 8 ranks r with (r − i) mod nranks
// < 8 and takes [Value]'s value for rank j = (r − i) mod nranks there, so
// at most 8 contributions per element are not neutral and every bound
// above holds whatever nranks is. Elsewhere it is neutral: 0 for Sum,
// PreMulSum and Avg, ±1 for Prod (unsigned: 1); Max and Min take [Value]
// for rank r (they are exact for any number of ranks). The 8 active ranks
// are consecutive (cyclically), so the PreMulSum scalars of the active
// ranks sum to at most 17 for unsigned types (uint8: 17 × 15 = 255) and
// have magnitude at most 2 otherwise. Up to 8 ranks the values are
// [Value]'s, unchanged.
package check

import (
	"encoding/binary"
	"math"

	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/half"
)

// MaxRanks is the largest number of ranks for which the results of
// [AllReduce] are checked to be exact (the package tests run every type
// and operator up to it; the construction holds for any count).
const MaxRanks = 64

// denseRanks is the number of ranks up to which every rank contributes to
// every element ([Value]); beyond, 8 ranks per element do ([ValueN]).
const denseRanks = 8

// magnitude is m(t): the largest |input| of Sum, Max, Min, PreMulSum and
// Avg for a signed or floating type t, the largest input for an unsigned
// one.
func magnitude(t plan.DataType) int64 {
	switch t {
	case plan.Int8:
		return 7
	case plan.Uint8:
		return 15
	case plan.Uint32, plan.Uint64:
		return 16
	case plan.Float8E4M3:
		return 2
	case plan.Float8E5M2:
		return 1
	}
	return 8
}

func unsigned(t plan.DataType) bool {
	return t == plan.Uint8 || t == plan.Uint32 || t == plan.Uint64
}

// Value is rank's input element i (i ≥ 0) of type t for operator op (see
// the package documentation for the ranges).
func Value(t plan.DataType, op plan.RedOp, rank int, i int64) float64 {
	if op == plan.Prod {
		// Magnitudes 1 or 2, the sign negative now and then.
		v := 1.0
		if (i+int64(rank))%3 == 0 {
			v = 2
		}
		if !unsigned(t) && (i*5+int64(rank))%7 == 0 {
			v = -v
		}
		return v
	}
	m := magnitude(t)
	k := i*7 + int64(rank)*13 + i/97
	if op == plan.Avg && t.Float() {
		if ((int64(rank)-i)%8+8)%8 >= 2 {
			return 0
		}
		return float64(1 + k%m)
	}
	if unsigned(t) {
		return float64(k % (m + 1))
	}
	return float64(k%(2*m+1) - m)
}

// Input returns rank's input of count elements of type t for operator op,
// for at most 8 ranks ([InputN] for more).
func Input(t plan.DataType, op plan.RedOp, rank int, count int64) []byte {
	out := make([]byte, count*int64(t.Size()))
	for i := int64(0); i < count; i++ {
		Put(t, out, i, Value(t, op, rank, i))
	}
	return out
}

// ValueN is rank's input element i (i ≥ 0) of type t for operator op among
// nranks ranks: [Value] up to 8 ranks; beyond, Value's value for rank
// (rank − i) mod nranks on the 8 ranks where that is below 8, a neutral
// value elsewhere (see the package documentation), so that every
// reduction over any number of ranks stays exact.
func ValueN(t plan.DataType, op plan.RedOp, nranks, rank int, i int64) float64 {
	if nranks <= denseRanks {
		return Value(t, op, rank, i)
	}
	switch op {
	case plan.Max, plan.Min:
		return Value(t, op, rank, i)
	}
	j := ((int64(rank)-i)%int64(nranks) + int64(nranks)) % int64(nranks)
	if j < denseRanks {
		return Value(t, op, int(j), i)
	}
	if op == plan.Prod {
		if !unsigned(t) && (i*5+int64(rank))%7 == 0 {
			return -1
		}
		return 1
	}
	return 0
}

// InputN returns rank's input of count elements of type t for operator op
// among nranks ranks ([ValueN]; the same bytes as [Input] up to 8 ranks).
func InputN(t plan.DataType, op plan.RedOp, nranks, rank int, count int64) []byte {
	out := make([]byte, count*int64(t.Size()))
	for i := int64(0); i < count; i++ {
		Put(t, out, i, ValueN(t, op, nranks, rank, i))
	}
	return out
}

// PreMulScalar is the PreMulSum multiplier rank passes in the tests, for
// type t, as plan.Args.Scalar bits ([PreMulValue] converted to t; the
// rank must not be negative).
func PreMulScalar(t plan.DataType, rank int) uint64 { return plan.ScalarBits(t, PreMulValue(t, rank)) }

// PreMulValue is rank's PreMulSum multiplier for type t: 2, −1, −2, 1 for
// ranks 0, 1, 2, 3 (mod 4); 2, 1, 3, 1 for the unsigned types; 2, −2,
// −2, 2 for the FP8 types. Ranks pass different scalars, so a
// result is wrong when a rank's contribution is scaled by another rank's
// scalar, or not at all; the magnitudes keep every result exact (see the
// package documentation). rank must not be negative.
func PreMulValue(t plan.DataType, rank int) float64 {
	switch {
	case t == plan.Float8E4M3 || t == plan.Float8E5M2:
		return [4]float64{2, -2, -2, 2}[rank%4]
	case unsigned(t):
		return [4]float64{2, 1, 3, 1}[rank%4]
	}
	return [4]float64{2, -1, -2, 1}[rank%4]
}

// AllReduce returns the expected AllReduce output of nranks ranks
// (1 … MaxRanks) for inputs made by [InputN] (the same as [Input] up to 8
// ranks): PreMulSum multiplies rank r's
// input by rank r's [PreMulValue]; Avg of an integer type is the sum divided by nranks,
// truncated toward zero; Avg of a floating type is Σ x·plan.AvgScalar in
// rank order, rounded to the type after every operation.
func AllReduce(t plan.DataType, op plan.RedOp, nranks int, count int64) []byte {
	out := make([]byte, count*int64(t.Size()))
	var scalar float64
	if op == plan.Avg && t.Float() {
		scalar = decode(t, plan.AvgScalar(t, nranks))
	}
	for i := int64(0); i < count; i++ {
		var acc float64
		for r := 0; r < nranks; r++ {
			v := ValueN(t, op, nranks, r, i)
			switch op {
			case plan.Sum:
				acc += v
			case plan.Prod:
				if r == 0 {
					acc = 1
				}
				acc *= v
			case plan.Max:
				if r == 0 {
					acc = v
				}
				acc = math.Max(acc, v)
			case plan.Min:
				if r == 0 {
					acc = v
				}
				acc = math.Min(acc, v)
			case plan.PreMulSum:
				acc += v * PreMulValue(t, r)
			case plan.Avg:
				if t.Float() {
					acc = round(t, acc+round(t, v*scalar))
				} else {
					acc += v
				}
			}
		}
		if op == plan.Avg && !t.Float() {
			acc = math.Trunc(acc / float64(nranks))
		}
		Put(t, out, i, acc)
	}
	return out
}

// Put stores v as element i of b in type t: floating types round to
// nearest even, integer types truncate toward zero (plan.ScalarBits).
func Put(t plan.DataType, b []byte, i int64, v float64) {
	es := int64(t.Size())
	var w [8]byte
	binary.LittleEndian.PutUint64(w[:], plan.ScalarBits(t, v))
	copy(b[i*es:(i+1)*es], w[:es])
}

// Wrong counts the elements of got that differ from want (bitwise; the
// values are exact). A length difference counts every missing element.
func Wrong(t plan.DataType, got, want []byte) int64 {
	es := t.Size()
	n := min(len(got), len(want)) / es
	var wrong int64
	for i := 0; i < n; i++ {
		if string(got[i*es:(i+1)*es]) != string(want[i*es:(i+1)*es]) {
			wrong++
		}
	}
	return wrong + int64(max(len(got), len(want))/es-n)
}

// decode converts the bits of one element of floating type t to float64.
func decode(t plan.DataType, bits uint64) float64 {
	switch t {
	case plan.Float64:
		return math.Float64frombits(bits)
	case plan.Float32:
		return float64(math.Float32frombits(uint32(bits)))
	case plan.Float16:
		return float64(half.ToFloat32(uint16(bits)))
	case plan.BFloat16:
		return float64(half.BF16ToFloat32(uint16(bits)))
	case plan.Float8E4M3:
		return float64(half.E4M3ToFloat32(uint8(bits)))
	case plan.Float8E5M2:
		return float64(half.E5M2ToFloat32(uint8(bits)))
	}
	return math.NaN()
}

// round rounds v to floating type t, to nearest even. Applied to a float64
// sum or product of two values of t, it rounds once: float64 carries more
// than twice the precision of float32 plus two bits, so the conversion's
// two steps (to float32, then to t) cannot differ from one.
func round(t plan.DataType, v float64) float64 { return decode(t, plan.ScalarBits(t, v)) }
