package plan

import (
	"fmt"
	"strings"
)

// DataType is the element type of a collective. Values are those of
// ncclDataType_t (nccl.h, NCCL 2.28): ncclInt8=0, ncclUint8=1, ncclInt32=2,
// ncclUint32=3, ncclInt64=4, ncclUint64=5, ncclFloat16=6, ncclFloat32=7,
// ncclFloat64=8, ncclBfloat16=9, ncclFloat8e4m3=10, ncclFloat8e5m2=11.
// Uint8 is also the raw-byte type of channel transfers and point-to-point
// operations.
type DataType uint8

const (
	Int8       DataType = 0
	Uint8      DataType = 1
	Int32      DataType = 2
	Uint32     DataType = 3
	Int64      DataType = 4
	Uint64     DataType = 5
	Float16    DataType = 6
	Float32    DataType = 7
	Float64    DataType = 8
	BFloat16   DataType = 9
	Float8E4M3 DataType = 10
	Float8E5M2 DataType = 11
)

// DataTypes lists every type collectives accept, in a stable order.
var DataTypes = []DataType{Float32, Float16, BFloat16, Int32, Int64, Int8, Uint8, Uint32, Uint64, Float64, Float8E4M3, Float8E5M2}

// Size is the element size in bytes; 0 for an unknown type.
func (t DataType) Size() int {
	switch t {
	case Int8, Uint8, Float8E4M3, Float8E5M2:
		return 1
	case Float16, BFloat16:
		return 2
	case Int32, Uint32, Float32:
		return 4
	case Int64, Uint64, Float64:
		return 8
	}
	return 0
}

// Valid reports whether t is a known type.
func (t DataType) Valid() bool { return t.Size() != 0 }

// Float reports whether t is a floating-point type.
func (t DataType) Float() bool {
	switch t {
	case Float16, Float32, Float64, BFloat16, Float8E4M3, Float8E5M2:
		return true
	}
	return false
}

var typeNames = map[DataType]string{
	Int8: "int8", Uint8: "uint8", Int32: "int32", Uint32: "uint32", Int64: "int64", Uint64: "uint64",
	Float16: "half", Float32: "float", Float64: "double", BFloat16: "bfloat16", Float8E4M3: "f8e4m3", Float8E5M2: "f8e5m2",
}

// String is the nccl-tests spelling ("float", "half", "bfloat16", "int32",
// "double", "f8e4m3", …).
func (t DataType) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("datatype(%d)", uint8(t))
}

// ParseDataType accepts the nccl-tests spellings and common aliases
// (float32, fp32, float16, fp16, bf16, int, float64, fp64, e4m3, e5m2, …).
func ParseDataType(s string) (DataType, error) {
	switch strings.ToLower(s) {
	case "float", "float32", "fp32", "f32":
		return Float32, nil
	case "half", "float16", "fp16", "f16":
		return Float16, nil
	case "bfloat16", "bf16":
		return BFloat16, nil
	case "double", "float64", "fp64", "f64":
		return Float64, nil
	case "int", "int32", "i32":
		return Int32, nil
	case "uint32", "u32":
		return Uint32, nil
	case "int64", "i64":
		return Int64, nil
	case "uint64", "u64":
		return Uint64, nil
	case "int8", "i8", "char":
		return Int8, nil
	case "uint8", "u8", "byte":
		return Uint8, nil
	case "f8e4m3", "fp8_e4m3", "e4m3", "float8e4m3":
		return Float8E4M3, nil
	case "f8e5m2", "fp8_e5m2", "e5m2", "float8e5m2":
		return Float8E5M2, nil
	}
	return 0, fmt.Errorf("unknown data type %q (want int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3 or f8e5m2)", s)
}

// RedOp is a reduction operator. Sum to Avg are the values of ncclRedOp_t;
// PreMulSum is weft's code for the operators ncclRedOpCreatePreMulSum
// makes (NCCL numbers those dynamically from ncclNumOps = 5 up).
type RedOp uint8

const (
	Sum  RedOp = 0
	Prod RedOp = 1
	Max  RedOp = 2
	Min  RedOp = 3
	// Avg is the sum divided by the number of ranks. As in NCCL, floating
	// types multiply every contribution by 1/nranks before summing
	// (PreMulSum with that scalar); integer types sum, then divide
	// (truncating towards zero).
	Avg RedOp = 4
	// PreMulSum multiplies every contribution by the scalar of the rank it
	// comes from (Args.Scalar, of the data type; each rank may pass its
	// own) before summing: Σ s_r·x_r (premul.go).
	PreMulSum RedOp = 5
)

// RedOps lists the supported operators.
var RedOps = []RedOp{Sum, Prod, Max, Min, Avg, PreMulSum}

func (o RedOp) String() string {
	switch o {
	case Sum:
		return "sum"
	case Prod:
		return "prod"
	case Max:
		return "max"
	case Min:
		return "min"
	case Avg:
		return "avg"
	case PreMulSum:
		return "premulsum"
	}
	return fmt.Sprintf("redop(%d)", uint8(o))
}

// Valid reports whether o is a known operator.
func (o RedOp) Valid() bool { return o <= PreMulSum }

// Base is the element-wise operator that combines two values: Sum for Avg
// and PreMulSum, o itself otherwise.
func (o RedOp) Base() RedOp {
	if o == Avg || o == PreMulSum {
		return Sum
	}
	return o
}

// ParseRedOp accepts sum, prod, max, min, avg and premulsum.
func ParseRedOp(s string) (RedOp, error) {
	for _, o := range RedOps {
		if strings.EqualFold(s, o.String()) {
			return o, nil
		}
	}
	return 0, fmt.Errorf("unknown reduction op %q (want sum, prod, max, min, avg or premulsum)", s)
}

// Protocol is the wire format of data written into scratch buffers.
type Protocol uint8

const (
	// Simple (HB, "high bandwidth") moves plain data and synchronises with
	// semaphores.
	Simple Protocol = iota
	// LL16 packs 8 data bytes and two 4-byte flags into one 16-byte store
	// (MSCCL++ LL16Packet; NCCL's LL uses the same 8+8 layout).
	LL16
	// LL8 packs 4 data bytes and a 4-byte flag into one 8-byte store
	// (MSCCL++ LL8Packet).
	LL8
	// LL128 packs 120 data bytes and an 8-byte flag into a 128-byte line
	// that 8 consecutive threads of a warp store with one 16-byte store
	// instruction (NCCL's LL128, src/device/prims_ll128.h). A reader that
	// sees the flag sees the whole line only because NVLink delivers a
	// warp's stores to one 128-byte line as one write: sound over NVLink
	// (hal/nvlink), not over PCIe or in host memory, so only plans of
	// memory channels on NVLink take it (and hal/host, which stores the
	// data before the flag). 94% of the bytes are data, against 50% for
	// LL16.
	LL128
)

func (p Protocol) String() string {
	switch p {
	case Simple:
		return "HB"
	case LL16:
		return "LL16"
	case LL8:
		return "LL8"
	case LL128:
		return "LL128"
	}
	return fmt.Sprintf("protocol(%d)", uint8(p))
}

// PacketBytes is the size of one packet; 0 for Simple.
func (p Protocol) PacketBytes() int {
	switch p {
	case LL16:
		return 16
	case LL8:
		return 8
	case LL128:
		return LL128Line
	}
	return 0
}

// PayloadBytes is the number of data bytes one packet carries; 0 for Simple.
func (p Protocol) PayloadBytes() int {
	switch p {
	case LL16:
		return 8
	case LL8:
		return 4
	case LL128:
		return LL128Line - 8
	}
	return 0
}

// LL128Line is the size of an LL128 line: 15 data words and the flag word.
const LL128Line = 128

// HeaderBytes is the size of the header that starts every scratch slot of
// an LL plan (one LL16 or LL8 packet carrying the sender's count; for
// LL128 that packet padded to a line, so the lines after it stay aligned
// to 128 bytes); 0 for Simple.
func (p Protocol) HeaderBytes() int64 {
	switch p {
	case Simple:
		return 0
	case LL128:
		return LL128Line
	}
	return HeaderBytes
}

// SlotAlign is the alignment of scratch slots (and of the lines in them):
// 128 bytes for LL128, 16 otherwise.
func (p Protocol) SlotAlign() int64 {
	if p == LL128 {
		return LL128Line
	}
	return AlignBytes
}

// PartAlignBytes is the granularity of chunk and block-part boundaries in
// a plan whose scratch holds p: AlignBytes, or for LL128 two lines' data
// (240 bytes, a multiple of 16 and of every element size), so that no
// line holds elements of two blocks' parts.
func (p Protocol) PartAlignBytes() int64 {
	if p == LL128 {
		return 2 * (LL128Line - 8)
	}
	return AlignBytes
}
