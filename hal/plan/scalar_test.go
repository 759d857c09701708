package plan_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/weftccl/weft/hal/plan"
)

func TestScalarBits(t *testing.T) {
	for _, tc := range []struct {
		t    plan.DataType
		v    float64
		want uint64
	}{
		{plan.Float64, 0.1, math.Float64bits(0.1)},
		{plan.Float32, 0.1, uint64(math.Float32bits(0.1))},
		{plan.Float32, 2, 0x40000000},
		{plan.Float16, 2, 0x4000},
		{plan.Float16, -1.5, 0xbe00},
		{plan.Float16, 1.0 / 3, 0x3555},
		{plan.BFloat16, 2, 0x4000},
		{plan.BFloat16, 1.0 / 3, 0x3eab},
		{plan.Float8E4M3, 2, 0x40},
		{plan.Float8E4M3, 1.0 / 3, 0x2b}, // 1.375 × 2^-2
		{plan.Float8E4M3, 1000, 0x7e},    // saturates at 448
		{plan.Float8E5M2, 2, 0x40},
		{plan.Float8E5M2, 1.0 / 3, 0x35}, // 1.25 × 2^-2
		{plan.Float8E5M2, math.Inf(-1), 0xfb},
		{plan.Int8, 2, 2},
		{plan.Int8, -1, 0xff},
		{plan.Int8, -2.7, 0xfe}, // truncated toward zero
		{plan.Uint8, 200.9, 200},
		{plan.Int32, -2, 0xfffffffe},
		{plan.Uint32, 3e9, 3000000000},
		{plan.Int64, -2, 0xfffffffffffffffe},
		{plan.Uint64, 1 << 63, 1 << 63},
	} {
		if got := plan.ScalarBits(tc.t, tc.v); got != tc.want {
			t.Errorf("ScalarBits(%v, %v) = %#x, want %#x", tc.t, tc.v, got, tc.want)
		}
	}
}

func TestAvgScalar(t *testing.T) {
	for _, tc := range []struct {
		t      plan.DataType
		nranks int
		want   uint64
	}{
		{plan.Float32, 1, 0x3f800000},
		{plan.Float32, 3, uint64(math.Float32bits(1.0 / 3))},
		{plan.Float32, 8, 0x3e000000},
		{plan.Float64, 3, math.Float64bits(1.0 / 3)},
		{plan.Float64, 7, math.Float64bits(1.0 / 7)},
		{plan.Float16, 3, 0x3555},
		{plan.Float16, 6, 0x3155}, // 0.16666 rounds to 0x3155 (1.3330 × 2^-3)
		{plan.BFloat16, 3, 0x3eab},
		{plan.BFloat16, 5, 0x3e4d},
		{plan.Float8E4M3, 3, 0x2b},
		{plan.Float8E4M3, 5, 0x25}, // 0.2 → 1.625 × 2^-3
		{plan.Float8E4M3, 7, 0x21}, // 0.142857 → 1.125 × 2^-3
		{plan.Float8E5M2, 3, 0x35},
		{plan.Float8E5M2, 6, 0x31}, // 0.16666 → 1.25 × 2^-3
		{plan.Float8E5M2, 2, 0x38},
		{plan.Int32, 4, 0},
		{plan.Uint8, 4, 0},
	} {
		if got := plan.AvgScalar(tc.t, tc.nranks); got != tc.want {
			t.Errorf("AvgScalar(%v, %d) = %#x, want %#x", tc.t, tc.nranks, got, tc.want)
		}
	}
}

// Avg of three ranks in float32 multiplies by the float32 nearest 1/3.
func ExampleAvgScalar() {
	fmt.Printf("%#x\n", plan.AvgScalar(plan.Float32, 3))
	// Output: 0x3eaaaaab
}
