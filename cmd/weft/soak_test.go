package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal/plan"
)

// TestSoakHost runs a soak of 10⁴ randomized operations (2000 with
// -short) over 3 goroutine ranks on hal/host and expects every element
// right.
func TestSoakHost(t *testing.T) {
	ops := 10000
	if testing.Short() {
		ops = 2000
	}
	const n = 3
	cfg := &soakConfig{seed: 20261123, ops: ops, maxBytes: 64 << 10, halName: "host",
		colls: algorithms.Collectives, types: plan.DataTypes}
	boots := bootstrap.NewLocal(n)
	sums := make([]*soakSummary, n)
	errs := make([]error, n)
	var outs [n]bytes.Buffer
	job := fmt.Sprintf("soak-%d", time.Now().UnixNano())
	start := time.Now()
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			defer boots[r].Close()
			sums[r], errs[r] = soakRank(context.Background(), cfg, boots[r], r, job, weft.Options{Timeout: 20 * time.Second}, &outs[r])
		}(r)
	}
	wg.Wait()
	t.Logf("%d ops on %d ranks in %v:\n%s", ops, n, time.Since(start).Round(time.Millisecond), outs[0].String())
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	if s := sums[0]; s == nil || s.Ops != ops || s.Wrong != 0 || len(s.Failures) != 0 {
		t.Fatalf("summary %+v, want %d ops, 0 wrong, no failures", s, ops)
	}
	if !strings.Contains(outs[0].String(), fmt.Sprintf("soak: %d ops on %d ranks (host, seed %d): 0 wrong elements", ops, n, cfg.seed)) {
		t.Errorf("summary line: %q", outs[0].String())
	}
}

// TestSoakDraws: ranks drawing from one seed agree on every operation,
// the sends and receives of each drawn group pair up in order and size,
// and every region fits the buffers.
func TestSoakDraws(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		cfg := &soakConfig{ops: 3000, maxBytes: 8 << 10, colls: algorithms.Collectives, types: plan.DataTypes}
		ds := make([]*soakDrawer, n)
		for r := range ds {
			ds[r] = newSoakDrawer(cfg, 99, n)
		}
		seen := map[algorithms.Collective]int{}
		inPlaceA2A := 0
		for i := 0; i < cfg.ops; i++ {
			calls := make([]collCall, n)
			for r := range calls {
				calls[r] = ds[r].draw(r, nil, nil)
			}
			c0 := calls[0]
			seen[c0.coll]++
			for r, c := range calls {
				if c.coll != c0.coll || c.dtype != c0.dtype || c.count != c0.count || c.op != c0.op || c.root != c0.root || c.inPlace != c0.inPlace {
					t.Fatalf("n=%d op %d: rank %d drew %s, rank 0 %s", n, i, r, describe(&c), describe(&c0))
				}
				if c.coll == algorithms.SendRecv {
					if !cmp.Equal(c.matrix, c0.matrix) {
						t.Fatalf("n=%d op %d: rank %d drew matrix %v, rank 0 %v", n, i, r, c.matrix, c0.matrix)
					}
					continue
				}
				if end := max(c.sendOff+c.sendBytes(n), c.recvOff+c.recvBytes(n)); end > cfg.maxBytes {
					t.Fatalf("n=%d op %d: %s ends at byte %d of %d", n, i, describe(&c), end, cfg.maxBytes)
				}
				if c.coll == algorithms.AllToAll && c.inPlace {
					inPlaceA2A++
				}
			}
			if c0.coll != algorithms.SendRecv {
				continue
			}
			// Pair every rank's sends to each peer with the peer's
			// receives from it, in order.
			for src := 0; src < n; src++ {
				for dst := 0; dst < n; dst++ {
					var sends, recvs []int64
					var sendTotal int64
					for _, o := range calls[src].p2p {
						if o.send && o.peer == dst {
							sends = append(sends, o.bytes)
							sendTotal += o.bytes
						}
					}
					for _, o := range calls[dst].p2p {
						if !o.send && o.peer == src {
							recvs = append(recvs, o.bytes)
						}
					}
					if !cmp.Equal(sends, recvs) {
						t.Fatalf("n=%d op %d: rank %d sends %v to rank %d, which receives %v", n, i, src, sends, dst, recvs)
					}
					if want := c0.matrix[src][dst] * int64(c0.dtype.Size()); sendTotal != want {
						t.Fatalf("n=%d op %d: rank %d sends %d bytes to %d, matrix says %d", n, i, src, sendTotal, dst, want)
					}
				}
				for _, o := range calls[src].p2p {
					if o.off+o.bytes > cfg.maxBytes {
						t.Fatalf("n=%d op %d: rank %d: %v ends past %d", n, i, src, o, cfg.maxBytes)
					}
				}
			}
		}
		for _, c := range algorithms.Collectives {
			if seen[c] < cfg.ops/len(algorithms.Collectives)/2 {
				t.Errorf("n=%d: %v drawn %d times of %d", n, c, seen[c], cfg.ops)
			}
		}
		if inPlaceA2A == 0 {
			t.Errorf("n=%d: no in-place AllToAll drawn in %d operations", n, cfg.ops)
		}
	}
}

// TestSoakReport: the summary combines the ranks and names each failed
// operation with its parameters and the seed to rerun.
func TestSoakReport(t *testing.T) {
	boots := bootstrap.NewLocal(2)
	mine := []soakSummary{
		{Seed: 5, Ops: 10, Wrong: 3, Seconds: 1, Failures: []soakFailure{{Op: 7, Rank: 0, Call: "all_gather count=4 type=half", Wrong: 3, First: 2}}},
		{Seed: 5, Ops: 10, Seconds: 2, Failures: []soakFailure{{Op: 4, Rank: 1, Call: "reduce count=1 type=int8 op=sum root=1", Error: "weft: boom"}}},
	}
	sums := make([]*soakSummary, 2)
	var wg sync.WaitGroup
	for r := range boots {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			var err error
			if sums[r], err = gatherSoak(context.Background(), boots[r], mine[r]); err != nil {
				t.Error(err)
			}
		}(r)
	}
	wg.Wait()
	var b bytes.Buffer
	printSoak(&b, sums[0], "host")
	want := `soak: 10 ops on 2 ranks (host, seed 5): 3 wrong elements, 2.0 s: FAILED
  op 4 rank 1: reduce count=1 type=int8 op=sum root=1: weft: boom
  op 7 rank 0: all_gather count=4 type=half: 3 wrong elements, the first at element 2
  rerun with --seed 5 (and the same -n, --max-bytes, --collectives, --types and rank count)
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("report (-want +got):\n%s", d)
	}
}

func TestSoakFlags(t *testing.T) {
	o := soakOptions{ops: 10, maxBytes: "64K", nproc: 1, colls: "broadcast, all_gather", types: "bf16,int8"}
	c, err := o.validate()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]algorithms.Collective{algorithms.Broadcast, algorithms.AllGather}, c.colls); d != "" {
		t.Error(d)
	}
	if d := cmp.Diff([]plan.DataType{plan.BFloat16, plan.Int8}, c.types); d != "" {
		t.Error(d)
	}
	if c.maxBytes != 64<<10 {
		t.Errorf("maxBytes %d", c.maxBytes)
	}
	for _, bad := range []soakOptions{{ops: 1, maxBytes: "8", nproc: 1}, {ops: -1, maxBytes: "1K", nproc: 1},
		{ops: 1, maxBytes: "1K", nproc: 1, colls: "allfoo"}, {ops: 1, maxBytes: "1K", nproc: 1, types: "float7"}} {
		if _, err := bad.validate(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
