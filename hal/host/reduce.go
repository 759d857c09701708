package host

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/half"
)

// reduceInto computes acc[i] = acc[i] ⊕ src[i] element-wise; acc and src are
// the bytes of n elements of type t. Aligned buffers take a typed fast path.
func reduceInto(acc, src []byte, t plan.DataType, op plan.RedOp) {
	n := len(acc) / t.Size()
	if n == 0 {
		return
	}
	aligned := uintptr(unsafe.Pointer(&acc[0]))%uintptr(t.Size()) == 0 &&
		uintptr(unsafe.Pointer(&src[0]))%uintptr(t.Size()) == 0
	switch t {
	case plan.Float32:
		if aligned {
			a := unsafe.Slice((*float32)(unsafe.Pointer(&acc[0])), n)
			s := unsafe.Slice((*float32)(unsafe.Pointer(&src[0])), n)
			reduceFloat(a, s, op)
			return
		}
		for i := 0; i < n; i++ {
			x := math.Float32frombits(binary.LittleEndian.Uint32(acc[4*i:]))
			y := math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
			binary.LittleEndian.PutUint32(acc[4*i:], math.Float32bits(apply(x, y, op)))
		}
	case plan.Int32:
		if aligned {
			reduceInt(unsafe.Slice((*int32)(unsafe.Pointer(&acc[0])), n), unsafe.Slice((*int32)(unsafe.Pointer(&src[0])), n), op)
			return
		}
		for i := 0; i < n; i++ {
			x := int32(binary.LittleEndian.Uint32(acc[4*i:]))
			y := int32(binary.LittleEndian.Uint32(src[4*i:]))
			binary.LittleEndian.PutUint32(acc[4*i:], uint32(apply(x, y, op)))
		}
	case plan.Int64:
		if aligned {
			reduceInt(unsafe.Slice((*int64)(unsafe.Pointer(&acc[0])), n), unsafe.Slice((*int64)(unsafe.Pointer(&src[0])), n), op)
			return
		}
		for i := 0; i < n; i++ {
			x := int64(binary.LittleEndian.Uint64(acc[8*i:]))
			y := int64(binary.LittleEndian.Uint64(src[8*i:]))
			binary.LittleEndian.PutUint64(acc[8*i:], uint64(apply(x, y, op)))
		}
	case plan.Uint8:
		reduceInt(acc, src, op)
	case plan.Float16, plan.BFloat16:
		toF, fromF := half.ToFloat32, half.FromFloat32
		if t == plan.BFloat16 {
			toF, fromF = half.BF16ToFloat32, half.BF16FromFloat32
		}
		for i := 0; i < n; i++ {
			x := toF(binary.LittleEndian.Uint16(acc[2*i:]))
			y := toF(binary.LittleEndian.Uint16(src[2*i:]))
			// One rounding per operation, as the GPU's add.rn.f16x2 does:
			// the float32 result of a half op is exact before rounding.
			binary.LittleEndian.PutUint16(acc[2*i:], fromF(apply(x, y, op)))
		}
	}
}

type number interface {
	~float32 | ~int32 | ~int64 | ~uint8
}

func apply[T number](x, y T, op plan.RedOp) T {
	switch op {
	case plan.Prod:
		return x * y
	case plan.Max:
		return max(x, y)
	case plan.Min:
		return min(x, y)
	}
	return x + y
}

func reduceFloat(a, s []float32, op plan.RedOp) {
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

func reduceInt[T ~int32 | ~int64 | ~uint8](a, s []T, op plan.RedOp) {
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
