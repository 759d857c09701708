package plan

import (
	"fmt"
	"strings"
)

// DataType is the element type of a collective. Values match ncclDataType_t
// where NCCL has the type (nccl.h, NCCL 2.28): ncclInt32=2, ncclInt64=4,
// ncclFloat16=6, ncclFloat32=7, ncclBfloat16=9. Uint8 is weft's raw-byte
// type for channel transfers (ncclUint8=1).
type DataType uint8

const (
	Uint8    DataType = 1
	Int32    DataType = 2
	Int64    DataType = 4
	Float16  DataType = 6
	Float32  DataType = 7
	BFloat16 DataType = 9
)

// DataTypes lists the types collectives accept, in a stable order.
var DataTypes = []DataType{Float32, Float16, BFloat16, Int32, Int64}

// Size is the element size in bytes.
func (t DataType) Size() int {
	switch t {
	case Uint8:
		return 1
	case Float16, BFloat16:
		return 2
	case Int32, Float32:
		return 4
	case Int64:
		return 8
	}
	return 0
}

// Valid reports whether t is a known type.
func (t DataType) Valid() bool { return t.Size() != 0 }

// String is the nccl-tests spelling ("float", "half", "bfloat16", "int32", "int64").
func (t DataType) String() string {
	switch t {
	case Uint8:
		return "uint8"
	case Int32:
		return "int32"
	case Int64:
		return "int64"
	case Float16:
		return "half"
	case Float32:
		return "float"
	case BFloat16:
		return "bfloat16"
	}
	return fmt.Sprintf("datatype(%d)", uint8(t))
}

// ParseDataType accepts the nccl-tests spellings and common aliases
// (float32, fp32, float16, fp16, bf16, int, int32, int64, uint8).
func ParseDataType(s string) (DataType, error) {
	switch strings.ToLower(s) {
	case "float", "float32", "fp32", "f32":
		return Float32, nil
	case "half", "float16", "fp16", "f16":
		return Float16, nil
	case "bfloat16", "bf16":
		return BFloat16, nil
	case "int", "int32", "i32":
		return Int32, nil
	case "int64", "i64":
		return Int64, nil
	case "uint8", "u8", "byte":
		return Uint8, nil
	}
	return 0, fmt.Errorf("unknown data type %q (want float, half, bfloat16, int32 or int64)", s)
}

// RedOp is a reduction operator. Values match ncclRedOp_t.
type RedOp uint8

const (
	Sum  RedOp = 0
	Prod RedOp = 1
	Max  RedOp = 2
	Min  RedOp = 3
)

// RedOps lists the supported operators.
var RedOps = []RedOp{Sum, Prod, Max, Min}

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
	}
	return fmt.Sprintf("redop(%d)", uint8(o))
}

// Valid reports whether o is a known operator.
func (o RedOp) Valid() bool { return o <= Min }

// ParseRedOp accepts sum, prod, max and min.
func ParseRedOp(s string) (RedOp, error) {
	for _, o := range RedOps {
		if strings.EqualFold(s, o.String()) {
			return o, nil
		}
	}
	return 0, fmt.Errorf("unknown reduction op %q (want sum, prod, max or min)", s)
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
)

func (p Protocol) String() string {
	switch p {
	case Simple:
		return "HB"
	case LL16:
		return "LL16"
	case LL8:
		return "LL8"
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
	}
	return 0
}
