package host

// Stand-ins until reduce.go provides the combine steps for every type
// (helper-1 replaces this file): enough for float32 and the integer types
// in the meantime.

import (
	"encoding/binary"
	"math"

	"github.com/weftccl/weft/hal/plan"
)

func scaleInto(buf []byte, t plan.DataType, scalar uint64) {
	if t != plan.Float32 {
		panic("host: scaleInto stand-in supports float32 only")
	}
	s := math.Float32frombits(uint32(scalar))
	for i := 0; i+4 <= len(buf); i += 4 {
		v := math.Float32frombits(binary.LittleEndian.Uint32(buf[i:]))
		binary.LittleEndian.PutUint32(buf[i:], math.Float32bits(v*s))
	}
}

func divInto(buf []byte, t plan.DataType, n int) {
	switch t {
	case plan.Int32:
		for i := 0; i+4 <= len(buf); i += 4 {
			binary.LittleEndian.PutUint32(buf[i:], uint32(int32(binary.LittleEndian.Uint32(buf[i:]))/int32(n)))
		}
	case plan.Int64:
		for i := 0; i+8 <= len(buf); i += 8 {
			binary.LittleEndian.PutUint64(buf[i:], uint64(int64(binary.LittleEndian.Uint64(buf[i:]))/int64(n)))
		}
	default:
		panic("host: divInto stand-in supports int32 and int64 only")
	}
}
