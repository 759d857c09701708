// Package check builds collective inputs from rank and index, and the exact
// results the collectives must produce, for tests, benchmarks and the
// conformance suite (architecture.md §7).
//
// Values are small integers: sums of up to 8 ranks stay within ±64 and
// products within ±256, so every result is exactly representable in every
// data type, including half and bfloat16 (8 significant bits), and a result
// is right only if every element is bit-for-bit the expected one.
package check

import (
	"encoding/binary"
	"math"

	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/half"
)

// Value is rank's input element i for operator op.
func Value(op plan.RedOp, rank int, i int64) float64 {
	if op == plan.Prod {
		// Magnitudes 1 or 2, the sign negative now and then.
		v := 1.0
		if (i+int64(rank))%3 == 0 {
			v = 2
		}
		if (i*5+int64(rank))%7 == 0 {
			v = -v
		}
		return v
	}
	return float64((i*7+int64(rank)*13+i/97)%17) - 8
}

// Input returns rank's input of count elements of type t for operator op.
func Input(t plan.DataType, op plan.RedOp, rank int, count int64) []byte {
	out := make([]byte, count*int64(t.Size()))
	for i := int64(0); i < count; i++ {
		Put(t, out, i, Value(op, rank, i))
	}
	return out
}

// AllReduce returns the expected AllReduce output of nranks ranks.
func AllReduce(t plan.DataType, op plan.RedOp, nranks int, count int64) []byte {
	out := make([]byte, count*int64(t.Size()))
	for i := int64(0); i < count; i++ {
		acc := Value(op, 0, i)
		for r := 1; r < nranks; r++ {
			v := Value(op, r, i)
			switch op {
			case plan.Sum:
				acc += v
			case plan.Prod:
				acc *= v
			case plan.Max:
				acc = math.Max(acc, v)
			case plan.Min:
				acc = math.Min(acc, v)
			}
		}
		Put(t, out, i, acc)
	}
	return out
}

// Put stores v as element i of b in type t (v is a small integer).
func Put(t plan.DataType, b []byte, i int64, v float64) {
	le := binary.LittleEndian
	switch t {
	case plan.Float32:
		le.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	case plan.Float16:
		le.PutUint16(b[2*i:], half.FromFloat32(float32(v)))
	case plan.BFloat16:
		le.PutUint16(b[2*i:], half.BF16FromFloat32(float32(v)))
	case plan.Int32:
		le.PutUint32(b[4*i:], uint32(int32(v)))
	case plan.Int64:
		le.PutUint64(b[8*i:], uint64(int64(v)))
	case plan.Uint8:
		b[i] = byte(int8(v))
	}
}

// Wrong counts the elements of got that differ from want (bitwise; the
// values are exact). A length difference counts every missing element.
func Wrong(t plan.DataType, got, want []byte) int64 {
	es := t.Size()
	n := min(len(got), len(want)) / es
	var wrong int64
	for i := 0; i < n; i++ {
		for k := 0; k < es; k++ {
			if got[i*es+k] != want[i*es+k] {
				wrong++
				break
			}
		}
	}
	return wrong + int64(max(len(got), len(want))/es-n)
}
