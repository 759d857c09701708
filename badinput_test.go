package weft_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/check"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

func TestAllReduceBadInput(t *testing.T) {
	errs := runRanks(t, "host", 2, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		buf, err := dev.Alloc(64)
		if err != nil {
			return err
		}
		defer buf.Free()
		cases := []struct {
			name    string
			in, out hal.Buffer
			count   int64
			t       plan.DataType
			op      plan.RedOp
			stream  hal.Stream
			wantMsg string
		}{
			{"nil input", nil, buf, 4, plan.Float32, plan.Sum, s, "input buffer is nil"},
			{"nil output", buf, nil, 4, plan.Float32, plan.Sum, s, "output buffer is nil"},
			{"nil stream", buf, buf, 4, plan.Float32, plan.Sum, nil, "stream is nil"},
			{"negative count", buf, buf, -1, plan.Float32, plan.Sum, s, "negative count"},
			{"count beyond buffer", buf, buf, 17, plan.Float32, plan.Sum, s, "exceeds the 64-byte input buffer"},
			{"count overflow", buf, buf, 1 << 62, plan.Int64, plan.Sum, s, "overflows"},
			{"unsupported type", buf, buf, 4, plan.DataType(42), plan.Sum, s, "unsupported data type"},
			{"PreMulSum without its scalar", buf, buf, 4, plan.Float32, plan.PreMulSum, s, "PreMulSum needs a scalar"},
			{"unsupported op", buf, buf, 4, plan.Float32, plan.RedOp(9), s, "unsupported reduction op"},
		}
		for _, tc := range cases {
			err := c.AllReduce(tc.in, tc.out, tc.count, tc.t, tc.op, tc.stream)
			if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("rank %d, %s: error %v, want ErrInvalidArgument containing %q", rank, tc.name, err, tc.wantMsg)
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// Counts that differ across ranks end in an error naming the ranks: at a
// plan's first use through the host-side exchange, later through the
// device-side checks (LL header packets, semaphore count words).
func TestAllReduceCountMismatch(t *testing.T) {
	for _, tc := range []struct {
		name         string
		first        int64 // agreed call that prepares the plan
		rank0, rank1 int64 // then these counts
	}{
		{"first use", 0, 100, 200},
		{"LL after first use", 64, 100, 200},
		{"2PA after first use", 1 << 20, 1 << 20, 1<<20 + 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := runRanksOpts(t, "host", 2, weft.Options{Timeout: 2 * time.Second}, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
				buf, err := dev.Alloc(8 << 20)
				if err != nil {
					return err
				}
				defer buf.Free()
				defer c.Deregister(buf)
				if tc.first > 0 {
					if err := dev.Write(buf, 0, check.Input(plan.Float32, plan.Sum, rank, tc.first)); err != nil {
						return err
					}
					if err := c.AllReduce(buf, buf, tc.first, plan.Float32, plan.Sum, s); err != nil {
						return err
					}
					if err := c.Synchronize(s); err != nil {
						return err
					}
				}
				count := tc.rank0
				if rank == 1 {
					count = tc.rank1
				}
				if err := c.AllReduce(buf, buf, count, plan.Float32, plan.Sum, s); err != nil {
					return err
				}
				return c.Synchronize(s)
			})
			failed := 0
			for r, err := range errs {
				if err == nil {
					continue
				}
				failed++
				msg := err.Error()
				if !strings.Contains(msg, "rank 0") || !strings.Contains(msg, "rank 1") {
					t.Errorf("rank %d: error does not name both ranks: %v", r, err)
				}
				if !errors.Is(err, hal.ErrInvalidUsage) && !errors.Is(err, hal.ErrTimeout) {
					t.Errorf("rank %d: error %v wraps neither ErrInvalidUsage nor ErrTimeout", r, err)
				}
			}
			if failed == 0 {
				t.Fatal("counts differ across ranks but no rank reported an error")
			}
		})
	}
}
