package weft_test

import (
	"fmt"
	"testing"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/nvlink"
	"github.com/weftccl/weft/hal/plan"
)

// checkCandidates runs every candidate of the tuner's search space
// (algorithms.TuneCandidates) as a communicator's AllReduce on n goroutine
// ranks of backend, at sizes inside the candidate's range (a few elements,
// sizes that are not multiples of the blocks' parts, and for the
// store-only 2PA sizes that cross several windows), out of place and in
// place, every element checked: the tuner may pick any of them.
func checkCandidates(t *testing.T, backend string, n, sms int, gpu bool, sizes []int64, types []plan.DataType) {
	for _, c := range algorithms.TuneCandidates(sms, gpu) {
		var in []int64
		for _, b := range sizes {
			if b >= c.MinBytes && (c.MaxBytes == 0 || b <= c.MaxBytes) {
				in = append(in, b)
			}
		}
		t.Run(c.Tier.Name(), func(t *testing.T) {
			errs := runRanksWith(t, backend, n, func(r int, dev hal.Device) weft.Options {
				cfg := algorithms.DefaultConfig(r, n, dev.Info().Multiprocessors, gpu)
				last := cfg.AllReduceTiers()
				tiers, ok := algorithms.CandidateTiers(c, in, last[len(last)-1])
				if !ok {
					t.Fatalf("no size of %v in the candidate's range", sizes)
				}
				cfg.AllReduce = tiers
				return weft.Options{Config: &cfg}
			}, func(rank int, cm *weft.Comm, dev hal.Device, s hal.Stream) error {
				for _, b := range in {
					if got, want := cm.AllReducePlan(b, plan.Uint8, plan.Sum), "allreduce-"+c.Tier.Name(); got != want {
						return fmt.Errorf("%d bytes served by %s, want %s", b, got, want)
					}
				}
				for _, dt := range types {
					if err := sweep(in, dt, plan.Sum)(rank, cm, dev, s); err != nil {
						return fmt.Errorf("%v: %w", dt, err)
					}
				}
				return nil
			})
			reportRanks(t, errs)
		})
	}
}

func TestTuneCandidatesHost(t *testing.T) {
	sizes := []int64{4, 1000, 4096 + 12, 64 << 10, 300000 + 4}
	checkCandidates(t, "host", 3, 4, false, sizes, []plan.DataType{plan.Float32, plan.BFloat16})
}

// TestTuneCandidatesNVLink: every GPU candidate on the GPUs, one rank per
// GPU (two ranks share the GPU of a one-GPU host; the sweep keeps its
// buffers, since freeing device memory while a peer on the same GPU spins
// would deadlock until the deadline).
func TestTuneCandidatesNVLink(t *testing.T) {
	n := requireGPUs(t)
	sizes := []int64{4, 4096 + 12, 64<<10 + 36, 1 << 20, 20<<20 + 4}
	checkCandidates(t, nvlink.Name, max(n, 2), 132, true, sizes, []plan.DataType{plan.Float32, plan.BFloat16})
}
