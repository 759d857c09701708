package weft

import (
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal/plan"
)

// The vocabulary of calls. These are aliases of the types the plans and
// backends use, so a program that imports weft needs no other package to
// name a collective, an element type or an operator: weft.Float32 and
// plan.Float32 are the same value of the same type.

// DataType is the element type of a collective; its values are those of
// ncclDataType_t (plan.DataType).
type DataType = plan.DataType

// The element types of collectives.
const (
	Int8       = plan.Int8
	Uint8      = plan.Uint8
	Int32      = plan.Int32
	Uint32     = plan.Uint32
	Int64      = plan.Int64
	Uint64     = plan.Uint64
	Float16    = plan.Float16
	Float32    = plan.Float32
	Float64    = plan.Float64
	BFloat16   = plan.BFloat16
	Float8E4M3 = plan.Float8E4M3
	Float8E5M2 = plan.Float8E5M2
)

// RedOp is a reduction operator; Sum to Avg are the values of
// ncclRedOp_t (plan.RedOp).
type RedOp = plan.RedOp

// The reduction operators. Avg divides the sum by the number of ranks;
// PreMulSum multiplies each rank's contribution by its scalar
// (Call.Scalar) before summing, and goes through Launch only.
const (
	Sum       = plan.Sum
	Prod      = plan.Prod
	Max       = plan.Max
	Min       = plan.Min
	Avg       = plan.Avg
	PreMulSum = plan.PreMulSum
)

// Collective names a collective operation (algorithms.Collective).
type Collective = algorithms.Collective

// The collectives. SendRecv is point-to-point: PlanName names LaunchP2P's
// plan for it, and Launch refuses it.
const (
	AllReduce     = algorithms.AllReduce
	AllGather     = algorithms.AllGather
	ReduceScatter = algorithms.ReduceScatter
	Broadcast     = algorithms.Broadcast
	Reduce        = algorithms.Reduce
	AllToAll      = algorithms.AllToAll
	SendRecv      = algorithms.SendRecv
)
