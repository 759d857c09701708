package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/check"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

func TestBudgetShape(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name                  string
		per                   time.Duration
		iters, replays, min   int
		budget                time.Duration
		wantIters, wantReplay int
	}{
		{"fits", 1 * ms, 20, 0, 1, time.Second, 20, 0},
		{"plain launches cut", 100 * ms, 20, 0, 1, time.Second, 10, 0},
		{"1 GB with graphs: iterations cut", 3 * ms, 20, 20, 1, time.Second, 16, 20},
		{"replays cut after iterations", 100 * ms, 20, 20, 1, time.Second, 1, 10},
		{"the tuner keeps 2 iterations", 2 * ms, 20, 20, 2, 100 * ms, 2, 20},
		{"at least one of each", 10 * time.Second, 20, 20, 1, time.Second, 1, 1},
		{"no budget", 10 * time.Second, 20, 20, 1, 0, 20, 20},
		{"no estimate", 0, 20, 20, 1, time.Second, 20, 20},
		{"never more than asked", ms, 3, 2, 5, time.Second, 3, 2},
	} {
		it, rp := budgetShape(tc.per, tc.iters, tc.replays, tc.min, tc.budget)
		if it != tc.wantIters || rp != tc.wantReplay {
			t.Errorf("%s: %d×%d, want %d×%d", tc.name, it, rp, tc.wantIters, tc.wantReplay)
		}
	}
}

// TestCheckerData: the checker's data for every call of a sweep is
// check.Send's and check.Expected's for that call, also where it slices
// data computed for the sweep's largest count.
func TestCheckerData(t *testing.T) {
	const n, maxCount = 3, 4096
	for _, coll := range []algorithms.Collective{algorithms.AllReduce, algorithms.Reduce, algorithms.Broadcast,
		algorithms.SendRecv, algorithms.AllGather, algorithms.ReduceScatter, algorithms.AllToAll} {
		for _, dt := range []plan.DataType{plan.Float32, plan.BFloat16, plan.Int8} {
			for rank := 0; rank < n; rank++ {
				k := newChecker(nil, rank, n, maxCount)
				for _, count := range []int64{1, 7, 512, maxCount, 100} {
					c := collCall{coll: coll, count: count, dtype: dt, op: plan.Max, root: 1}
					send, want := k.data(&c)
					if ws := check.Send(coll, dt, plan.Max, n, rank, count); !bytes.Equal(send, ws) {
						t.Fatalf("%v %v rank %d count %d: send differs from check.Send", coll, dt, rank, count)
					}
					we := check.Expected(coll, dt, plan.Max, n, rank, 1, count)
					if !bytes.Equal(want, we) || (want == nil) != (we == nil) {
						t.Fatalf("%v %v rank %d count %d: expected differs from check.Expected", coll, dt, rank, count)
					}
				}
			}
		}
	}
}

// TestCheckerVerify writes a result on hal/host, spoils some elements and
// checks that the checker counts them and finds the first.
func TestCheckerVerify(t *testing.T) {
	dev, err := hal.Open("host", hal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	const count = 3<<20 + 5 // several compare pieces and a ragged end
	buf, err := dev.Alloc(count * 4)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	in, err := dev.Alloc(count * 4)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Free()
	c := collCall{coll: algorithms.AllReduce, send: in, recv: buf, count: count, dtype: plan.Float32, op: plan.Sum}
	k := newChecker(dev, 0, 2, count)
	if err := k.prepare(&c); err != nil {
		t.Fatal(err)
	}
	if w, first, err := k.verify(&c); err != nil || w != count || first != 0 {
		t.Fatalf("poisoned output: %d wrong, first %d, %v; want %d, 0", w, first, err, count)
	}
	_, want := k.data(&c)
	got := bytes.Clone(want)
	for _, i := range []int{1 << 20, 2<<20 + 3, count - 1} {
		got[i*4+1] ^= 0x40
	}
	if err := dev.Write(buf, 0, got); err != nil {
		t.Fatal(err)
	}
	if w, first, err := k.verify(&c); err != nil || w != 3 || first != 1<<20 {
		t.Errorf("3 spoilt elements: %d wrong, first %d, %v; want 3, %d", w, first, err, 1<<20)
	}
	if w := wrongElems(plan.Float32, plan.Sum, got[:len(got)-8], want); w != 3+1 {
		t.Errorf("short result: %d wrong, want 4 (2 missing, one of the spoilt cut off)", w)
	}
}
