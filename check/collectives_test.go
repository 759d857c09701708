package check_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/check"
	"github.com/weftccl/weft/hal/plan"
)

// decode reads int32 or float32 elements as float64.
func decode(t plan.DataType, b []byte) []float64 {
	out := make([]float64, len(b)/4)
	for i := range out {
		u := binary.LittleEndian.Uint32(b[4*i:])
		if t == plan.Float32 {
			out[i] = float64(math.Float32frombits(u))
		} else {
			out[i] = float64(int32(u))
		}
	}
	return out
}

func combine(op plan.RedOp, a, b float64) float64 {
	switch op {
	case plan.Prod:
		return a * b
	case plan.Max:
		return math.Max(a, b)
	case plan.Min:
		return math.Min(a, b)
	}
	return a + b
}

// TestExpectedByHand checks Expected against each collective's definition
// (nccl.h), applied element by element to the buffers Send returns: a
// second, independent statement of the semantics.
func TestExpectedByHand(t *testing.T) {
	type want func(sends [][]float64, n, rank, root int, count int64) []float64
	seg := func(b []float64, s int, count int64) []float64 { return b[int64(s)*count : int64(s+1)*count] }
	reduce := func(op plan.RedOp) func(sends [][]float64, idx int64) float64 {
		return func(sends [][]float64, idx int64) float64 {
			acc := sends[0][idx]
			for r := 1; r < len(sends); r++ {
				acc = combine(op, acc, sends[r][idx])
			}
			return acc
		}
	}
	defs := map[algorithms.Collective]func(op plan.RedOp) want{
		algorithms.AllReduce: func(op plan.RedOp) want {
			return func(sends [][]float64, n, rank, root int, count int64) []float64 {
				out := make([]float64, count)
				for i := range out {
					out[i] = reduce(op)(sends, int64(i))
				}
				return out
			}
		},
		algorithms.Reduce: func(op plan.RedOp) want {
			return func(sends [][]float64, n, rank, root int, count int64) []float64 {
				if rank != root {
					return nil
				}
				out := make([]float64, count)
				for i := range out {
					out[i] = reduce(op)(sends, int64(i))
				}
				return out
			}
		},
		algorithms.ReduceScatter: func(op plan.RedOp) want {
			return func(sends [][]float64, n, rank, root int, count int64) []float64 {
				out := make([]float64, count)
				for i := range out {
					out[i] = reduce(op)(sends, int64(rank)*count+int64(i))
				}
				return out
			}
		},
		algorithms.AllGather: func(plan.RedOp) want {
			return func(sends [][]float64, n, rank, root int, count int64) []float64 {
				var out []float64
				for r := 0; r < n; r++ {
					out = append(out, sends[r]...)
				}
				return out
			}
		},
		algorithms.Broadcast: func(plan.RedOp) want {
			return func(sends [][]float64, n, rank, root int, count int64) []float64 { return sends[root] }
		},
		algorithms.AllToAll: func(plan.RedOp) want {
			return func(sends [][]float64, n, rank, root int, count int64) []float64 {
				var out []float64
				for r := 0; r < n; r++ {
					out = append(out, seg(sends[r], rank, count)...)
				}
				return out
			}
		},
		algorithms.SendRecv: func(plan.RedOp) want {
			return func(sends [][]float64, n, rank, root int, count int64) []float64 { return sends[(rank+n-1)%n] }
		},
	}
	for _, coll := range algorithms.Collectives {
		for _, dt := range []plan.DataType{plan.Int32, plan.Float32} {
			for _, op := range []plan.RedOp{plan.Sum, plan.Prod, plan.Max, plan.Min} {
				if !coll.Reduces() && op != plan.Sum {
					continue
				}
				for _, n := range []int{1, 2, 3} {
					for _, count := range []int64{0, 1, 5, 130} {
						root := n - 1
						name := fmt.Sprintf("%v/%v/%v/n%d/count%d", coll, dt, op, n, count)
						sends := make([][]float64, n)
						for r := range sends {
							sends[r] = decode(dt, check.Send(coll, dt, op, n, r, count))
							if s, _ := coll.Segments(n); int64(len(sends[r])) != int64(s)*count {
								t.Fatalf("%s: Send of rank %d has %d elements, want %d", name, r, len(sends[r]), int64(s)*count)
							}
						}
						for r := 0; r < n; r++ {
							got := check.Expected(coll, dt, op, n, r, root, count)
							w := defs[coll](op)(sends, n, r, root, count)
							if coll == algorithms.Reduce && r != root {
								if got != nil {
									t.Errorf("%s rank %d: Expected = %d bytes, want nil", name, r, len(got))
								}
								continue
							}
							if got == nil {
								t.Errorf("%s rank %d: Expected = nil", name, r)
							}
							if d := cmp.Diff(w, decode(dt, got), cmpopts.EquateEmpty()); d != "" {
								t.Errorf("%s rank %d (-want +got):\n%s", name, r, d)
							}
						}
					}
				}
			}
		}
	}
}

// TestExpectedLiteral pins two small cases written out by hand from
// Input's values, so that a change of layout shows as a readable diff.
func TestExpectedLiteral(t *testing.T) {
	in := func(rank int, count int64) []float64 {
		return decode(plan.Int32, check.Input(plan.Int32, plan.Sum, rank, count))
	}
	// AllToAll over 2 ranks, 2 elements per peer: rank 1 receives rank 0's
	// elements 2, 3 then its own elements 2, 3.
	a0, a1 := in(0, 4), in(1, 4)
	want := []float64{a0[2], a0[3], a1[2], a1[3]}
	if d := cmp.Diff(want, decode(plan.Int32, check.Expected(algorithms.AllToAll, plan.Int32, plan.Sum, 2, 1, 0, 2))); d != "" {
		t.Errorf("AllToAll rank 1 (-want +got):\n%s", d)
	}
	// ReduceScatter over 3 ranks, 1 element each: rank 2 gets the sum of
	// element 2 of every rank.
	b0, b1, b2 := in(0, 3), in(1, 3), in(2, 3)
	want = []float64{b0[2] + b1[2] + b2[2]}
	if d := cmp.Diff(want, decode(plan.Int32, check.Expected(algorithms.ReduceScatter, plan.Int32, plan.Sum, 3, 2, 0, 1))); d != "" {
		t.Errorf("ReduceScatter rank 2 (-want +got):\n%s", d)
	}
	// Segments of one rank differ: a misplaced segment is caught.
	s := decode(plan.Int32, check.Send(algorithms.AllToAll, plan.Int32, plan.Sum, 3, 0, 4))
	if cmp.Equal(s[0:4], s[4:8]) || cmp.Equal(s[4:8], s[8:12]) {
		t.Errorf("AllToAll segments of rank 0 repeat: %v", s)
	}
	if check.Expected(algorithms.Broadcast, plan.Int32, plan.Sum, 2, 0, 5, 1) != nil {
		t.Error("Broadcast with root 5 of 2 ranks: want nil")
	}
	if check.Expected(algorithms.AllReduce, plan.Int32, plan.Sum, 2, 2, 0, 1) != nil {
		t.Error("rank 2 of 2: want nil")
	}
}

// TestExpectedEveryType: every type and op gives buffers of the right
// length (the values themselves are Input's and AllReduce's, tested in
// check_test.go).
func TestExpectedEveryType(t *testing.T) {
	for _, coll := range algorithms.Collectives {
		for _, dt := range plan.DataTypes {
			for _, op := range plan.RedOps {
				const n, count = 3, 7
				s, r := coll.Segments(n)
				if got := len(check.Send(coll, dt, op, n, 1, count)); got != s*count*dt.Size() {
					t.Errorf("%v %v %v: Send %d bytes, want %d", coll, dt, op, got, s*count*dt.Size())
				}
				if got := len(check.Expected(coll, dt, op, n, 0, 0, count)); got != r*count*dt.Size() {
					t.Errorf("%v %v %v: Expected %d bytes, want %d", coll, dt, op, got, r*count*dt.Size())
				}
			}
		}
	}
}
