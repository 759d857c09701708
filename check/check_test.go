package check

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/hal/plan"
)

// elems decodes a buffer of type t as float64 values (integers sign- or
// zero-extended).
func elems(t plan.DataType, b []byte) []float64 {
	es := t.Size()
	out := make([]float64, len(b)/es)
	for i := range out {
		var w [8]byte
		copy(w[:], b[i*es:(i+1)*es])
		bits := binary.LittleEndian.Uint64(w[:])
		switch {
		case t.Float():
			out[i] = decode(t, bits)
		case unsigned(t):
			out[i] = float64(bits)
		default:
			shift := 64 - 8*es
			out[i] = float64(int64(bits<<shift) >> shift)
		}
	}
	return out
}

// representable reports whether v is exactly a value of type t.
func representable(t plan.DataType, v float64) bool {
	b := make([]byte, t.Size())
	Put(t, b, 0, v)
	return elems(t, b)[0] == v
}

// testRanks are the communicator sizes the exactness tests check: every
// size up to 9, then sizes past powers of two and odd ones up to MaxRanks.
var testRanks = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 31, 33, 48, 63, MaxRanks}

// orders are reduction orders over nranks contributions: rank order,
// reverse, and a pairwise tree (what ring, direct and tree algorithms do).
func orders(nranks int) map[string]func(xs []float64, op func(a, b float64) float64) float64 {
	return map[string]func(xs []float64, op func(a, b float64) float64) float64{
		"forward": func(xs []float64, op func(a, b float64) float64) float64 {
			acc := xs[0]
			for _, x := range xs[1:] {
				acc = op(acc, x)
			}
			return acc
		},
		"reverse": func(xs []float64, op func(a, b float64) float64) float64 {
			acc := xs[len(xs)-1]
			for r := len(xs) - 2; r >= 0; r-- {
				acc = op(xs[r], acc)
			}
			return acc
		},
		"tree": func(xs []float64, op func(a, b float64) float64) float64 {
			level := append([]float64(nil), xs...)
			for len(level) > 1 {
				var next []float64
				for i := 0; i+1 < len(level); i += 2 {
					next = append(next, op(level[i], level[i+1]))
				}
				if len(level)%2 == 1 {
					next = append(next, level[len(level)-1])
				}
				level = next
			}
			return level[0]
		},
	}
}

// Every reduction of Input's values is exact in its type, partial results
// included, so AllReduce's result is what any reduction order gives, bit
// for bit. Avg of floating types rounds, but has at most two non-zero
// terms, so every order rounds the same.
func TestAllReduceInAnyOrder(t *testing.T) {
	const count = 300 // crosses the i/97 steps of the Sum values
	for _, dt := range plan.DataTypes {
		for _, op := range plan.RedOps {
			for _, n := range testRanks {
				t.Run(fmt.Sprintf("%v/%v/%d", dt, op, n), func(t *testing.T) {
					want := AllReduce(dt, op, n, count)
					rounding := op == plan.Avg && dt.Float()
					pre := 1.0
					switch {
					case rounding:
						pre = decode(dt, plan.AvgScalar(dt, n))
					}
					base := func(a, b float64) float64 {
						var r float64
						switch op.Base() {
						case plan.Sum:
							r = a + b
						case plan.Prod:
							r = a * b
						case plan.Max:
							r = math.Max(a, b)
						case plan.Min:
							r = math.Min(a, b)
						}
						if rounding {
							return round(dt, r)
						}
						if !representable(dt, r) {
							t.Fatalf("%v ⊕ %v = %v is not exact in %v", a, b, r, dt)
						}
						return r
					}
					for name, order := range orders(n) {
						got := make([]byte, len(want))
						for i := int64(0); i < count; i++ {
							xs := make([]float64, n)
							for r := range xs {
								xs[r] = ValueN(dt, op, n, r, i)
								if op == plan.PreMulSum {
									// Each rank's own scalar, as the
									// rank passes it (bits of the type).
									xs[r] *= elems(dt, binary.LittleEndian.AppendUint64(nil, PreMulScalar(dt, r)))[0]
									if !representable(dt, xs[r]) {
										t.Fatalf("rank %d: %v × its scalar is not exact in %v", r, ValueN(dt, op, n, r, i), dt)
									}
								} else if rounding {
									xs[r] = round(dt, xs[r]*pre)
								} else if pre != 1 {
									xs[r] *= pre
								}
							}
							v := order(xs, base)
							if op == plan.Avg && !dt.Float() {
								v = math.Trunc(v / float64(n))
							}
							Put(dt, got, i, v)
						}
						if w := Wrong(dt, got, want); w != 0 {
							t.Errorf("%s order: %d elements wrong; want %v, got %v", name, w, elems(dt, want)[:8], elems(dt, got)[:8])
						}
					}
				})
			}
		}
	}
}

// Inputs keep to the documented ranges: unsigned types and Avg of floating
// types non-negative, FP8 within its exact range; Avg of floating types
// has at most two non-zero inputs per element.
func TestInputRanges(t *testing.T) {
	for _, dt := range plan.DataTypes {
		for _, op := range plan.RedOps {
			lo, hi := math.Inf(1), math.Inf(-1)
			nonzero := make([]int, 500)
			for r := 0; r < denseRanks; r++ {
				for i, v := range elems(dt, Input(dt, op, r, 500)) {
					lo, hi = math.Min(lo, v), math.Max(hi, v)
					if v != 0 {
						nonzero[i]++
					}
				}
			}
			m := float64(magnitude(dt))
			wantLo, wantHi := -m, m
			switch {
			case op == plan.Prod && unsigned(dt):
				wantLo, wantHi = 1, 2
			case op == plan.Prod:
				wantLo, wantHi = -2, 2
			case unsigned(dt) || (op == plan.Avg && dt.Float()):
				wantLo = 0
			}
			if lo != wantLo || hi != wantHi {
				t.Errorf("%v %v: inputs span [%v, %v], want [%v, %v]", dt, op, lo, hi, wantLo, wantHi)
			}
			if op == plan.Avg && dt.Float() {
				for i, k := range nonzero {
					if k != 2 {
						t.Fatalf("%v avg: element %d is non-zero on %d of %d ranks, want 2", dt, i, k, denseRanks)
					}
				}
			}
		}
	}
}

// PreMulSum's expected result depends on every rank's own scalar, so a
// reduction that ignores the scalars, or scales every contribution by the
// local rank's scalar, fails.
func TestPreMulScalarMatters(t *testing.T) {
	for _, dt := range plan.DataTypes {
		for r := 0; r < MaxRanks; r++ {
			if s := elems(dt, binary.LittleEndian.AppendUint64(nil, PreMulScalar(dt, r)))[0]; s != PreMulValue(dt, r) {
				t.Errorf("%v rank %d: PreMulScalar is %v, want %v", dt, r, s, PreMulValue(dt, r))
			}
		}
		for _, n := range testRanks[1:] {
			want := AllReduce(dt, plan.PreMulSum, n, 64)
			if Wrong(dt, want, AllReduce(dt, plan.Sum, n, 64)) == 0 {
				t.Errorf("%v, %d ranks: PreMulSum and Sum expect the same result", dt, n)
			}
			// What a reduction that scales every contribution by the
			// scalar of rank `local` computes.
			for local := 0; local < n; local++ {
				uniform := make([]byte, len(want))
				for i := int64(0); i < 64; i++ {
					var acc float64
					for r := 0; r < n; r++ {
						acc += ValueN(dt, plan.PreMulSum, n, r, i) * PreMulValue(dt, local)
					}
					Put(dt, uniform, i, acc)
				}
				if Wrong(dt, want, uniform) == 0 {
					t.Errorf("%v, %d ranks: scaling by rank %d's scalar alone gives the expected result", dt, n, local)
				}
			}
		}
	}
}

// Worked examples of the expected values.
func TestAllReduceValues(t *testing.T) {
	for _, tc := range []struct {
		t      plan.DataType
		op     plan.RedOp
		nranks int
		want   []float64 // the first elements
	}{
		// Inputs of element 0: Sum int32 ranks 0, 1, 2 → -8, 5, 1.
		{plan.Int32, plan.Sum, 3, []float64{-2}},
		{plan.Int32, plan.PreMulSum, 3, []float64{-23}}, // -8×2 + 5×(−1) + 1×(−2): each rank its own scalar
		{plan.Int32, plan.Avg, 3, []float64{0}},         // -2/3 truncates to 0
		{plan.Int8, plan.Avg, 2, []float64{0, -1, 6}},   // (-7+6)/2 truncates to 0, (0-2)/2, (7+5)/2
		// Avg of floats, element 0: inputs 1 and 6 (float32) or 1 and 2
		// (E4M3) on ranks 0 and 1, zero elsewhere.
		{plan.Float32, plan.Avg, 3, []float64{2.3333332538604736}}, // 0.33333334 + 2 (6 × 0.33333334 rounds to 2)
		{plan.Float32, plan.Avg, 4, []float64{1.75, 1.75}},
		{plan.Float8E4M3, plan.Avg, 3, []float64{1}},     // 0.34375 + 0.6875 = 1.03125 rounds to 1
		{plan.Float8E5M2, plan.Avg, 3, []float64{0.625}}, // 0.3125 + 0.3125
	} {
		got := elems(tc.t, AllReduce(tc.t, tc.op, tc.nranks, int64(len(tc.want))))
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("AllReduce(%v, %v, %d) (-want +got):\n%s", tc.t, tc.op, tc.nranks, diff)
		}
	}
}

func TestWrong(t *testing.T) {
	for _, tc := range []struct {
		name      string
		t         plan.DataType
		got, want []byte
		wrong     int64
	}{
		{"equal", plan.Float32, []byte{0, 0, 0x80, 0x3f}, []byte{0, 0, 0x80, 0x3f}, 0},
		{"one ulp off", plan.Float32, []byte{1, 0, 0x80, 0x3f}, []byte{0, 0, 0x80, 0x3f}, 1},
		{"-0 is not +0", plan.Float16, []byte{0, 0x80}, []byte{0, 0}, 1},
		{"missing elements count", plan.Float16, []byte{0, 0x3c}, []byte{0, 0x3c, 0, 0x40, 0, 0x42}, 2},
		{"extra elements count", plan.Uint8, []byte{1, 2, 3}, []byte{1, 2}, 1},
		{"one wrong byte is one element", plan.Int64, []byte{1, 0, 0, 0, 0, 0, 0, 1}, make([]byte, 8), 1},
	} {
		if got := Wrong(tc.t, tc.got, tc.want); got != tc.wrong {
			t.Errorf("%s: Wrong = %d, want %d", tc.name, got, tc.wrong)
		}
	}
}

// Beyond 8 ranks every element has exactly 8 active contributions (the
// others neutral), the active ones are 8 consecutive ranks, every rank is
// active somewhere, and up to 8 ranks InputN is Input.
func TestInputNSparse(t *testing.T) {
	for _, dt := range []plan.DataType{plan.Float32, plan.Uint8, plan.Float8E4M3} {
		for _, op := range []plan.RedOp{plan.Sum, plan.Prod, plan.PreMulSum} {
			for _, n := range []int{3, 8} {
				for r := 0; r < n; r++ {
					if Wrong(dt, InputN(dt, op, n, r, 100), Input(dt, op, r, 100)) != 0 {
						t.Fatalf("%v %v, %d ranks: InputN differs from Input for rank %d", dt, op, n, r)
					}
				}
			}
			for _, n := range []int{9, 33, 64} {
				active := make([]int, n)
				for i := int64(0); i < 200; i++ {
					k := 0
					for r := 0; r < n; r++ {
						j := ((r-int(i))%n + n) % n
						v := ValueN(dt, op, n, r, i)
						neutral := v == 0 || (op == plan.Prod && math.Abs(v) == 1)
						if j >= denseRanks && !neutral {
							t.Fatalf("%v %v, %d ranks: element %d of rank %d is %v, want neutral", dt, op, n, i, r, v)
						}
						if j < denseRanks {
							k++
							if v != Value(dt, op, j, i) {
								t.Fatalf("%v %v, %d ranks: element %d of rank %d is %v, want Value of rank %d", dt, op, n, i, r, v, j)
							}
							if v != 0 {
								active[r]++
							}
						}
					}
					if k != denseRanks {
						t.Fatalf("%v %v: element %d active on %d ranks, want %d", dt, op, i, k, denseRanks)
					}
				}
				for r, a := range active {
					if a == 0 {
						t.Errorf("%v %v, %d ranks: rank %d contributes nothing in 200 elements", dt, op, n, r)
					}
				}
			}
		}
	}
}
