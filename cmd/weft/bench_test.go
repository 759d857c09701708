package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal/plan"
)

// TestBenchCount pins nccl-tests' sizing (rows of its 4-rank float output
// in /work/shared/baselines): size in bytes → the count column and the
// size it prints.
func TestBenchCount(t *testing.T) {
	tests := []struct {
		coll              algorithms.Collective
		n                 int
		t                 plan.DataType
		bytes             int64
		count, printBytes int64
	}{
		{algorithms.AllGather, 4, plan.Float32, 8, 0, 0},
		{algorithms.AllGather, 4, plan.Float32, 32, 0, 0},
		{algorithms.AllGather, 4, plan.Float32, 128, 8, 128},
		{algorithms.AllGather, 4, plan.Float32, 536870912, 33554432, 536870912},
		{algorithms.ReduceScatter, 4, plan.Float32, 512, 32, 512},
		{algorithms.AllToAll, 4, plan.Float32, 2048, 128, 2048},
		{algorithms.AllToAll, 3, plan.Float16, 100, 16, 96}, // 50 elements, 16 per rank: 8-element (16-byte) multiples
		{algorithms.AllGather, 2, plan.Uint8, 100, 48, 96},
		{algorithms.Broadcast, 4, plan.Float32, 8, 2, 8},
		{algorithms.SendRecv, 4, plan.Float32, 128, 32, 128},
		{algorithms.AllReduce, 4, plan.Float64, 24, 3, 24},
		{algorithms.Reduce, 2, plan.BFloat16, 6, 3, 6},
	}
	for _, tt := range tests {
		got := benchCount(tt.coll, tt.bytes, tt.t, tt.n)
		c := layout(tt.coll, nil, nil, 0, got, tt.t, false)
		printed := max(c.sendBytes(tt.n), c.recvBytes(tt.n))
		if got != tt.count || printed != tt.printBytes {
			t.Errorf("%v n=%d %v %d B: count %d, size %d; want %d, %d", tt.coll, tt.n, tt.t, tt.bytes, got, printed, tt.count, tt.printBytes)
		}
	}
}

// TestBenchFlags: every collective name parses; the old flags keep their
// meaning.
func TestBenchFlags(t *testing.T) {
	for _, name := range []string{"allreduce", "all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv"} {
		o := benchOptions{minBytes: "8", maxBytes: "1K", factor: 2, iters: 1, nproc: 1, dtype: "float", op: "sum"}
		if _, err := o.validate(name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	o := benchOptions{minBytes: "8", maxBytes: "1K", factor: 2, iters: 1, nproc: 1, dtype: "float", op: "sum", root: -1}
	if _, err := o.validate("broadcast"); err == nil {
		t.Error("-r -1: no error")
	}
	o.root = 0
	if _, err := o.validate("gather"); err == nil {
		t.Error("gather: no error")
	}
}

var rowRE = regexp.MustCompile(`^\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(-?\d+)\s+\S+\s+\S+\s+\S+\s+(\S+)\s+\S+\s+\S+\s+\S+\s+(\S+)(\s+\S+)?$`)

// TestBenchHost runs `weft bench <collective>` for every collective over
// 3 goroutine ranks on hal/host and checks the table: a row per size,
// #wrong 0 out of place and in place (every collective, AllToAll
// included: none is N/A), the plan column, and the closing OK line.
func TestBenchHost(t *testing.T) {
	const n = 3
	for _, coll := range algorithms.Collectives {
		t.Run(coll.String(), func(t *testing.T) {
			o := benchOptions{minBytes: "0", maxBytes: "8K", factor: 8, warmup: 1, iters: 2, check: 1, nproc: 1,
				dtype: "bfloat16", op: "max", hal: "host", root: 1}
			cfg, err := o.validate(coll.String())
			if err != nil {
				t.Fatal(err)
			}
			out, errs := benchRanks(cfg, n, fmt.Sprintf("bench-%s-%d", strings.ReplaceAll(coll.String(), "_", ""), time.Now().UnixNano()))
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
			var rows int
			for _, line := range strings.Split(out.String(), "\n") {
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				m := rowRE.FindStringSubmatch(line)
				if m == nil {
					t.Errorf("row %q does not parse", line)
					continue
				}
				rows++
				wantRoot := "-1"
				if coll.Rooted() {
					wantRoot = "1"
				}
				wantOp := "none"
				if coll.Reduces() {
					wantOp = "max"
				}
				if m[3] != "bfloat16" || m[4] != wantOp || m[5] != wantRoot {
					t.Errorf("row %q: type, redop, root = %s %s %s; want bfloat16 %s %s", line, m[3], m[4], m[5], wantOp, wantRoot)
				}
				if m[6] != "0" || m[7] != "0" { // in place too: every collective, AllToAll included
					t.Errorf("row %q: #wrong %s, %s", line, m[6], m[7])
				}
				if m[8] == "" || strings.TrimSpace(m[8]) == "-" {
					t.Errorf("row %q: no plan", line)
				}
				// Up to 8 KiB the zero-copy AllReduce is the 1PA tier.
				if coll == algorithms.AllReduce && !strings.HasPrefix(strings.TrimSpace(m[8]), "allreduce-1pa-LL16-") {
					t.Errorf("row %q: plan %q, want the 1PA tier", line, m[8])
				}
			}
			if rows != 5 { // 0, 8, 64, 512 and 4096 bytes
				t.Errorf("%d rows, want 5:\n%s", rows, out.String())
			}
			if !strings.Contains(out.String(), "# Out of bounds values : 0 OK") {
				t.Errorf("no OK line:\n%s", out.String())
			}
		})
	}
}

// benchRanks runs `weft bench` with cfg on n goroutine ranks of job and
// returns rank 0's output and every rank's error.
func benchRanks(cfg *benchConfig, n int, job string) (bytes.Buffer, []error) {
	boots := bootstrap.NewLocal(n)
	errs := make([]error, n)
	var out bytes.Buffer
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			defer boots[r].Close()
			var w bytes.Buffer
			errs[r] = benchRank(context.Background(), cfg, boots[r], r, job, &w)
			if r == 0 {
				out = w
			}
		}(r)
	}
	wg.Wait()
	return out, errs
}
