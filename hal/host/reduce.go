package host

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/half"
)

// Element-wise math of reducing transfers, for every plan.DataType. The
// results are bit for bit those of the device library
// (channels/device/weft_reduce.h):
//
//   - Integer types wrap (two's complement for signed types); Max, Min and
//     division are unsigned for unsigned types.
//   - Float32 and Float64 operate natively, one rounding per operation.
//   - Float16 and BFloat16 round once per operation: the operation is done
//     in float32 and rounded to the type, which equals the GPU's packed
//     add.rn/mul.rn.f16x2 and bf16x2 (float32 has more than twice their
//     precision plus two bits, so the extra rounding cannot change a
//     result).
//   - FP8 (E4M3, E5M2) operates through half precision, as the GPU does:
//     both operands convert exactly to binary16, the operation rounds to
//     binary16, and the result converts back to FP8 rounding to nearest even
//     and saturating to the largest finite value (cvt.rn.satfinite). For a
//     single operation this equals rounding the exact result to FP8
//     directly, except that E5M2 sums beyond the binary16 range saturate
//     as well.
//   - Max and Min of floating types return the other operand when one is
//     NaN (fmaxf/fminf and max/min.f16x2 semantics).

// reduceInto computes acc[i] = acc[i] ⊕ src[i] element-wise; acc and src are
// the bytes of n elements of type t. Avg and PreMulSum reduce with their
// base operator, Sum (the scaling and division are scaleInto's and
// divInto's). Aligned buffers take a typed fast path; unaligned ones are
// read byte-wise (a typed slice over a misaligned address would be
// invalid, and -race's checkptr rejects it).
func reduceInto(acc, src []byte, t plan.DataType, op plan.RedOp) {
	op = op.Base()
	es := t.Size()
	n := len(acc) / es
	if n == 0 {
		return
	}
	aligned := uintptr(unsafe.Pointer(&acc[0]))%uintptr(es) == 0 &&
		uintptr(unsafe.Pointer(&src[0]))%uintptr(es) == 0
	switch t {
	case plan.Int8:
		reduceTyped[int8](acc, src, n, op, true)
	case plan.Uint8:
		reduceSlice(acc[:n], src[:n], op)
	case plan.Int32:
		reduceTyped[int32](acc, src, n, op, aligned)
	case plan.Uint32:
		reduceTyped[uint32](acc, src, n, op, aligned)
	case plan.Int64:
		reduceTyped[int64](acc, src, n, op, aligned)
	case plan.Uint64:
		reduceTyped[uint64](acc, src, n, op, aligned)
	case plan.Float32:
		reduceTyped[float32](acc, src, n, op, aligned)
	case plan.Float64:
		reduceTyped[float64](acc, src, n, op, aligned)
	case plan.Float16, plan.BFloat16, plan.Float8E4M3, plan.Float8E5M2:
		c := narrowOf(t)
		for i := 0; i < n; i++ {
			c.put(acc, i, apply(c.get(acc, i), c.get(src, i), op))
		}
	}
}

// scaleInto multiplies every element of buf (elements of type t) by the
// scalar s, one element of type t in the low bytes of scalar
// (little-endian, as plan.Args.Scalar): buf[i] = buf[i] × s, rounded once
// per multiply for floating types (through binary16 for FP8, as
// reduceInto), wrapping for integer types.
func scaleInto(buf []byte, t plan.DataType, scalar uint64) {
	es := t.Size()
	n := len(buf) / es
	if n == 0 {
		return
	}
	aligned := uintptr(unsafe.Pointer(&buf[0]))%uintptr(es) == 0
	switch t {
	case plan.Int8:
		scaleTyped(buf, n, int8(scalar), true)
	case plan.Uint8:
		scaleTyped(buf, n, uint8(scalar), true)
	case plan.Int32:
		scaleTyped(buf, n, int32(scalar), aligned)
	case plan.Uint32:
		scaleTyped(buf, n, uint32(scalar), aligned)
	case plan.Int64:
		scaleTyped(buf, n, int64(scalar), aligned)
	case plan.Uint64:
		scaleTyped(buf, n, scalar, aligned)
	case plan.Float32:
		scaleTyped(buf, n, math.Float32frombits(uint32(scalar)), aligned)
	case plan.Float64:
		scaleTyped(buf, n, math.Float64frombits(scalar), aligned)
	case plan.Float16, plan.BFloat16, plan.Float8E4M3, plan.Float8E5M2:
		c := narrowOf(t)
		var s [8]byte
		binary.LittleEndian.PutUint64(s[:], scalar)
		sv := c.get(s[:], 0)
		for i := 0; i < n; i++ {
			c.put(buf, i, c.get(buf, i)*sv)
		}
	}
}

// divInto divides every element of buf (elements of integer type t) by n
// ≥ 1, truncating toward zero; unsigned types divide unsigned. It is the
// last step of Avg for integer types. Floating types are left unchanged:
// their Avg multiplies every contribution by plan.AvgScalar instead.
func divInto(buf []byte, t plan.DataType, n int) {
	es := t.Size()
	cnt := len(buf) / es
	if cnt == 0 || n == 1 {
		return
	}
	aligned := uintptr(unsafe.Pointer(&buf[0]))%uintptr(es) == 0
	switch t {
	case plan.Int8:
		divTyped(buf, cnt, int8(n), true)
	case plan.Uint8:
		divTyped(buf, cnt, uint8(n), true)
	case plan.Int32:
		divTyped(buf, cnt, int32(n), aligned)
	case plan.Uint32:
		divTyped(buf, cnt, uint32(n), aligned)
	case plan.Int64:
		divTyped(buf, cnt, int64(n), aligned)
	case plan.Uint64:
		divTyped(buf, cnt, uint64(n), aligned)
	}
}

type integer interface {
	~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64
}

type number interface {
	integer | ~float32 | ~float64
}

// apply is x ⊕ y for a base operator.
func apply[T number](x, y T, op plan.RedOp) T {
	switch op {
	case plan.Prod:
		return x * y
	case plan.Max:
		// y != y only for a NaN: the other operand wins, as fmaxf.
		if x > y || y != y {
			return x
		}
		return y
	case plan.Min:
		if x < y || y != y {
			return x
		}
		return y
	}
	return x + y
}

func reduceSlice[T number](a, s []T, op plan.RedOp) {
	switch op {
	case plan.Sum:
		for i := range a {
			a[i] += s[i]
		}
	default:
		for i := range a {
			a[i] = apply(a[i], s[i], op)
		}
	}
}

// typed views b as n elements of T; b's first byte must be aligned for T.
func typed[T number](b []byte, n int) []T { return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n) }

// load and store access element i of b byte-wise, for any alignment (the
// host is little-endian, as every GPU host weft runs on).
func load[T number](b []byte, i int) T {
	var v T
	sz := int(unsafe.Sizeof(v))
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&v)), sz), b[i*sz:(i+1)*sz])
	return v
}

func store[T number](b []byte, i int, v T) {
	sz := int(unsafe.Sizeof(v))
	copy(b[i*sz:(i+1)*sz], unsafe.Slice((*byte)(unsafe.Pointer(&v)), sz))
}

func reduceTyped[T number](acc, src []byte, n int, op plan.RedOp, aligned bool) {
	if aligned {
		reduceSlice(typed[T](acc, n), typed[T](src, n), op)
		return
	}
	for i := 0; i < n; i++ {
		store(acc, i, apply(load[T](acc, i), load[T](src, i), op))
	}
}

func scaleTyped[T number](buf []byte, n int, s T, aligned bool) {
	if aligned {
		a := typed[T](buf, n)
		for i := range a {
			a[i] *= s
		}
		return
	}
	for i := 0; i < n; i++ {
		store(buf, i, load[T](buf, i)*s)
	}
}

func divTyped[T integer](buf []byte, n int, d T, aligned bool) {
	if aligned {
		a := typed[T](buf, n)
		for i := range a {
			a[i] /= d
		}
		return
	}
	for i := 0; i < n; i++ {
		store(buf, i, load[T](buf, i)/d)
	}
}

// narrow is element access for the types narrower than float32, whose
// arithmetic is float32 arithmetic rounded to the type by put.
type narrow struct {
	get func(b []byte, i int) float32
	put func(b []byte, i int, v float32)
}

func narrowOf(t plan.DataType) narrow {
	le := binary.LittleEndian
	switch t {
	case plan.Float16:
		return narrow{
			func(b []byte, i int) float32 { return half.ToFloat32(le.Uint16(b[2*i:])) },
			func(b []byte, i int, v float32) { le.PutUint16(b[2*i:], half.FromFloat32(v)) },
		}
	case plan.BFloat16:
		return narrow{
			func(b []byte, i int) float32 { return half.BF16ToFloat32(le.Uint16(b[2*i:])) },
			func(b []byte, i int, v float32) { le.PutUint16(b[2*i:], half.BF16FromFloat32(v)) },
		}
	case plan.Float8E4M3:
		return narrow{
			func(b []byte, i int) float32 { return half.E4M3ToFloat32(b[i]) },
			func(b []byte, i int, v float32) { b[i] = half.E4M3FromFloat32(viaHalf(v)) },
		}
	}
	return narrow{
		func(b []byte, i int) float32 { return half.E5M2ToFloat32(b[i]) },
		func(b []byte, i int, v float32) { b[i] = half.E5M2FromFloat32(viaHalf(v)) },
	}
}

// viaHalf rounds v to binary16: the FP8 operations of the GPU produce a
// binary16 result before converting it to FP8.
func viaHalf(v float32) float32 { return half.ToFloat32(half.FromFloat32(v)) }
