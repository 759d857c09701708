package host

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/hal/plan"
)

// enc returns the bytes of vals as elements of type t (plan.ScalarBits:
// integers wrap, floats round to nearest even).
func enc(t plan.DataType, vals ...float64) []byte {
	es := t.Size()
	b := make([]byte, len(vals)*es)
	for i, v := range vals {
		bits := plan.ScalarBits(t, v)
		for k := 0; k < es; k++ {
			b[i*es+k] = byte(bits >> (8 * k))
		}
	}
	return b
}

// misaligned returns a copy of b that starts one byte past an aligned
// address, so that the byte-wise paths run.
func misaligned(b []byte) []byte {
	buf := make([]byte, len(b)+16)
	return append(buf[1:1], b...)[:len(b):len(b)]
}

var (
	nan  = math.NaN()
	inf  = math.Inf(1)
	big8 = float64(1 << 62) // wraps in int64 products
)

// Each case reduces a = a ⊕ b for one type and operator; want is the result
// as values of the type (encoded like the operands).
var reduceCases = []struct {
	t       plan.DataType
	op      plan.RedOp
	a, b    []float64
	want    []float64
	wantHex []byte // when set, the expected bytes (NaN codes, wrapped values)
}{
	{t: plan.Int8, op: plan.Sum, a: []float64{1, -2, 100, -100}, b: []float64{2, -3, 100, -100}, want: []float64{3, -5, -56, 56}},
	{t: plan.Int8, op: plan.Prod, a: []float64{3, -4, 16}, b: []float64{-5, -6, 16}, want: []float64{-15, 24, 0}},
	{t: plan.Int8, op: plan.Max, a: []float64{-1, 5, -128}, b: []float64{1, -5, 127}, want: []float64{1, 5, 127}},
	{t: plan.Int8, op: plan.Min, a: []float64{-1, 5, -128}, b: []float64{1, -5, 127}, want: []float64{-1, -5, -128}},
	{t: plan.Uint8, op: plan.Sum, a: []float64{1, 200}, b: []float64{2, 100}, want: []float64{3, 44}},
	{t: plan.Uint8, op: plan.Max, a: []float64{255, 1}, b: []float64{1, 128}, want: []float64{255, 128}}, // unsigned compare
	{t: plan.Uint8, op: plan.Min, a: []float64{255, 1}, b: []float64{1, 128}, want: []float64{1, 1}},
	{t: plan.Uint8, op: plan.Prod, a: []float64{16, 3}, b: []float64{17, 5}, want: []float64{16, 15}},
	{t: plan.Int32, op: plan.Sum, a: []float64{1, math.MaxInt32}, b: []float64{-3, 1}, want: []float64{-2, math.MinInt32}},
	{t: plan.Int32, op: plan.Max, a: []float64{-7, 3}, b: []float64{-8, 4}, want: []float64{-7, 4}},
	{t: plan.Uint32, op: plan.Max, a: []float64{4e9, 1}, b: []float64{1, 2}, want: []float64{4e9, 2}},
	{t: plan.Uint32, op: plan.Min, a: []float64{4e9, 1}, b: []float64{1, 2}, want: []float64{1, 1}},
	{t: plan.Uint32, op: plan.Sum, a: []float64{4e9}, b: []float64{4e9}, want: []float64{8e9 - 1<<32}},
	{t: plan.Int64, op: plan.Prod, a: []float64{big8, -3}, b: []float64{4, 5}, want: []float64{0, -15}},
	{t: plan.Int64, op: plan.Min, a: []float64{-1, 2}, b: []float64{1, -2}, want: []float64{-1, -2}},
	{t: plan.Uint64, op: plan.Max, a: []float64{1 << 63, 1}, b: []float64{1, 2}, want: []float64{1 << 63, 2}},
	{t: plan.Uint64, op: plan.Sum, a: []float64{1 << 63, 1}, b: []float64{1 << 63, 2}, want: []float64{0, 3}},
	{t: plan.Float32, op: plan.Sum, a: []float64{1, 1 << 24}, b: []float64{2, 1}, want: []float64{3, 1 << 24}},
	{t: plan.Float32, op: plan.Prod, a: []float64{1.5, -2}, b: []float64{2, 3}, want: []float64{3, -6}},
	{t: plan.Float32, op: plan.Max, a: []float64{nan, 1, -1}, b: []float64{2, nan, -2}, want: []float64{2, 1, -1}},
	{t: plan.Float32, op: plan.Min, a: []float64{nan, 1, -1}, b: []float64{2, nan, -2}, want: []float64{2, 1, -2}},
	{t: plan.Float64, op: plan.Sum, a: []float64{1, 1 << 53}, b: []float64{1e-300, 1}, want: []float64{1, 1 << 53}},
	{t: plan.Float64, op: plan.Prod, a: []float64{0.1}, b: []float64{3}, want: []float64{0.30000000000000004}}, // rounded once at run time, unlike the constant 0.1 * 3,
	{t: plan.Float16, op: plan.Sum, a: []float64{1, 2048, 65504}, b: []float64{2, 1, 65504}, want: []float64{3, 2048, inf}},
	{t: plan.Float16, op: plan.Sum, a: []float64{2048}, b: []float64{3}, want: []float64{2052}}, // tie 2050|2052 → even
	{t: plan.BFloat16, op: plan.Sum, a: []float64{256, 256}, b: []float64{1, 3}, want: []float64{256, 260}},
	{t: plan.BFloat16, op: plan.Max, a: []float64{-1, 2}, b: []float64{-2, 3}, want: []float64{-1, 3}},
	{t: plan.Float8E4M3, op: plan.Sum, a: []float64{1, 16, 16, 448, -448}, b: []float64{2, 1, 3, 448, -64}, want: []float64{3, 16, 20, 448, -448}},
	{t: plan.Float8E4M3, op: plan.Prod, a: []float64{1.5, 20, -3}, b: []float64{1.5, 24, 3}, want: []float64{2.25, 448, -9}},
	{t: plan.Float8E4M3, op: plan.Max, a: []float64{-1, 0.5}, b: []float64{-2, 0.25}, want: []float64{-1, 0.5}},
	{t: plan.Float8E4M3, op: plan.Min, a: []float64{-1, 0.5}, b: []float64{-2, 0.25}, want: []float64{-2, 0.25}},
	{t: plan.Float8E5M2, op: plan.Sum, a: []float64{1, 8, 8, 57344, -57344}, b: []float64{2, 1, 3, 57344, -1}, want: []float64{3, 8, 12, 57344, -57344}},
	{t: plan.Float8E5M2, op: plan.Prod, a: []float64{1.5, -3}, b: []float64{1.5, 3}, want: []float64{2, -8}}, // 2.25: tie between 2 and 2.5, to even
	{t: plan.Float8E5M2, op: plan.Min, a: []float64{inf, -inf}, b: []float64{1, 1}, want: []float64{1, -57344}},
	// NaN operands: E4M3 and E5M2 sums keep the NaN (code 0x7f).
	{t: plan.Float8E4M3, op: plan.Sum, a: []float64{nan}, b: []float64{1}, wantHex: []byte{0x7f}},
	{t: plan.Float8E5M2, op: plan.Sum, a: []float64{nan}, b: []float64{1}, wantHex: []byte{0x7f}},
	// Avg and PreMulSum combine with Sum.
	{t: plan.Int32, op: plan.Avg, a: []float64{1, 2}, b: []float64{3, 4}, want: []float64{4, 6}},
	{t: plan.Float16, op: plan.PreMulSum, a: []float64{1, 2}, b: []float64{3, 4}, want: []float64{4, 6}},
}

func TestReduceIntoEveryType(t *testing.T) {
	seen := map[plan.DataType]bool{}
	for _, tc := range reduceCases {
		seen[tc.t] = true
		want := tc.wantHex
		if want == nil {
			want = enc(tc.t, tc.want...)
		}
		for _, align := range []string{"aligned", "misaligned"} {
			t.Run(fmt.Sprintf("%v/%v/%s/%v", tc.t, tc.op, align, tc.a), func(t *testing.T) {
				acc, src := enc(tc.t, tc.a...), enc(tc.t, tc.b...)
				if align == "misaligned" {
					acc, src = misaligned(acc), misaligned(src)
				}
				reduceInto(acc, src, tc.t, tc.op)
				if diff := cmp.Diff(want, acc); diff != "" {
					t.Errorf("reduceInto(%v ⊕ %v) bytes (-want +got):\n%s", tc.a, tc.b, diff)
				}
			})
		}
	}
	for _, dt := range plan.DataTypes {
		if !seen[dt] {
			t.Errorf("no reduceInto case for %v", dt)
		}
	}
}

// FP8 arithmetic rounds through binary16 and then to FP8; for single
// operations on FP8 values that is the exact result rounded to nearest
// even, saturated. Every pair of finite E4M3 and E5M2 codes is checked
// against that statement, in float64.
func TestReduceIntoFP8AllPairs(t *testing.T) {
	for _, dt := range []plan.DataType{plan.Float8E4M3, plan.Float8E5M2} {
		for _, op := range []plan.RedOp{plan.Sum, plan.Prod, plan.Max, plan.Min} {
			var acc, src []byte
			for a := 0; a < 256; a++ {
				for b := 0; b < 256; b++ {
					acc, src = append(acc, byte(a)), append(src, byte(b))
				}
			}
			reduceInto(acc, src, dt, op)
			for i, got := range acc {
				x, y := decode(dt, []byte{byte(i >> 8)}), decode(dt, []byte{byte(i)})
				if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) {
					continue
				}
				var exact float64
				switch op {
				case plan.Sum:
					exact = x + y
				case plan.Prod:
					exact = x * y
				case plan.Max:
					exact = math.Max(x, y)
				case plan.Min:
					exact = math.Min(x, y)
				}
				// ScalarBits rounds float64 through float32, exact for these
				// sums and products.
				want := byte(plan.ScalarBits(dt, exact))
				if exact == 0 && got&0x7f == 0 {
					continue // the sign of a zero result may differ (-0 + 0)
				}
				if got != want {
					t.Fatalf("%v %v: %v ⊕ %v = %#02x, want %#02x", dt, op, x, y, got, want)
				}
			}
		}
	}
}

func TestScaleInto(t *testing.T) {
	for _, tc := range []struct {
		t    plan.DataType
		s    float64
		in   []float64
		want []float64
	}{
		{plan.Int8, 2, []float64{3, -4, 100}, []float64{6, -8, -56}},
		{plan.Int8, -1, []float64{-128, 5}, []float64{-128, -5}},
		{plan.Uint8, 3, []float64{5, 100}, []float64{15, 44}},
		{plan.Int32, -2, []float64{3, math.MinInt32}, []float64{-6, 0}},
		{plan.Uint32, 2, []float64{3e9}, []float64{6e9 - 1<<32}},
		{plan.Int64, 3, []float64{-5}, []float64{-15}},
		{plan.Uint64, 2, []float64{1 << 63, 7}, []float64{0, 14}},
		{plan.Float32, 1.0 / 3, []float64{3, 1}, []float64{float64(float32(3) * float32(1.0/3)), float64(float32(1.0 / 3))}},
		{plan.Float64, 0.5, []float64{3, -1}, []float64{1.5, -0.5}},
		{plan.Float16, 1.0 / 3, []float64{3, 7}, []float64{1, 2.33203125}},          // 3 × 0x3555 rounds to 1
		{plan.BFloat16, 1.0 / 3, []float64{3, 7}, []float64{1, 2.34375}},            // 3 × 0x3eab rounds to 1
		{plan.Float8E4M3, 1.0 / 3, []float64{3, 2, 448}, []float64{1, 0.6875, 160}}, // s = 0.34375
		{plan.Float8E5M2, 1.0 / 3, []float64{3, 2, 7}, []float64{1, 0.625, 2}},      // s = 0.3125: 0.9375 → 1, 2.1875 → 2
		{plan.Float8E4M3, 2, []float64{300}, []float64{448}},                        // saturates
	} {
		for _, align := range []string{"aligned", "misaligned"} {
			buf := enc(tc.t, tc.in...)
			if align == "misaligned" {
				buf = misaligned(buf)
			}
			scaleInto(buf, tc.t, plan.ScalarBits(tc.t, tc.s))
			if diff := cmp.Diff(enc(tc.t, tc.want...), buf); diff != "" {
				t.Errorf("%v %s: %v × %v bytes (-want +got):\n%s", tc.t, align, tc.in, tc.s, diff)
			}
		}
	}
}

func TestDivInto(t *testing.T) {
	for _, tc := range []struct {
		t    plan.DataType
		n    int
		in   []float64
		want []float64
	}{
		{plan.Int8, 3, []float64{7, -7, -128, 127}, []float64{2, -2, -42, 42}}, // toward zero
		{plan.Uint8, 3, []float64{255, 7}, []float64{85, 2}},                   // unsigned: 0xff is 255
		{plan.Int32, 4, []float64{-9, 9, math.MinInt32}, []float64{-2, 2, math.MinInt32 / 4}},
		{plan.Uint32, 2, []float64{4e9}, []float64{2e9}},
		{plan.Int64, 8, []float64{-63, 64}, []float64{-7, 8}},
		{plan.Uint64, 2, []float64{1 << 63}, []float64{1 << 62}},
		{plan.Int32, 1, []float64{-9}, []float64{-9}},
		{plan.Float32, 4, []float64{8}, []float64{8}}, // floats: unchanged
		{plan.Float8E4M3, 4, []float64{8}, []float64{8}},
	} {
		for _, align := range []string{"aligned", "misaligned"} {
			buf := enc(tc.t, tc.in...)
			if align == "misaligned" {
				buf = misaligned(buf)
			}
			divInto(buf, tc.t, tc.n)
			if diff := cmp.Diff(enc(tc.t, tc.want...), buf); diff != "" {
				t.Errorf("%v %s: %v / %d bytes (-want +got):\n%s", tc.t, align, tc.in, tc.n, diff)
			}
		}
	}
}

// decode reads one element of type t as float64.
func decode(t plan.DataType, b []byte) float64 {
	c := narrowOf(t)
	return float64(c.get(b, 0))
}
