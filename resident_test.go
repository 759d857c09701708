package weft_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/host"
	"github.com/weftccl/weft/hal/plan"
)

// refusingDevice is a hal/host device whose Prepare refuses the plans
// named with the prefix refuse as a GPU backend's residency check does
// (hal.ErrNotResident: its blocks cannot all be resident), or, with other,
// with an unrelated device error.
type refusingDevice struct {
	*host.Device
	refuse string
	other  bool
}

func (d refusingDevice) Prepare(spec hal.PlanSpec) (hal.Program, error) {
	if d.refuse != "" && strings.HasPrefix(spec.Plan.Name, d.refuse) {
		if d.other {
			return nil, fmt.Errorf("test: prepare %s: the module did not load: %w", spec.Plan.Name, hal.ErrDevice)
		}
		return nil, fmt.Errorf("test: prepare %s: 5 blocks of 64 threads cannot all be resident: %w", spec.Plan.Name, hal.ErrNotResident)
	}
	return d.Device.Prepare(spec)
}

// runRefusing runs f on n hal/host ranks whose devices refuse, per rank,
// what refusals[rank] says ("": nothing, "resident": the large two-phase
// LL AllReduce plan as not resident, "other": that plan with another
// error), with the large two-phase LL plan configured as in
// TestAllReduce2PALLLargeHost (5 × 64 above 384 KiB to 768 KiB).
func runRefusing(t *testing.T, refusals []string, f func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error) []error {
	t.Helper()
	t.Setenv("WEFT_ALLREDUCE_LL2_LARGE_SHAPE", "5x64")
	t.Setenv("WEFT_ALLREDUCE_LL2_LARGE_MAX_BYTES", "768K")
	job := sanitize(t.Name())
	open := func(r int) (hal.Device, error) {
		dev, err := hal.Open(host.Name, hal.Config{Ordinal: r, Rank: r, JobID: job})
		if err != nil {
			return nil, err
		}
		d := refusingDevice{Device: dev.(*host.Device)}
		if refusals[r] != "" {
			d.refuse, d.other = "all_reduce-2pa-LL128-5x64", refusals[r] == "other"
		}
		return d, nil
	}
	return runRanksOn(len(refusals), open, func(int, hal.Device) weft.Options { return weft.Options{Timeout: 20 * time.Second} }, f)
}

// TestNotResidentFallsBack: when a backend refuses a plan because its
// blocks cannot all be resident (hal.ErrNotResident: a wide plan on a GPU
// with fewer multiprocessors, or a kernel that needs more registers),
// Launch takes the next plan that can run the call, on every rank alike
// even when only one rank's backend refused: the results are right, the
// refusal is remembered (later calls and PlanName take the next plan at
// once), and other calls keep their plans. A refusal for another reason
// on any rank makes every rank fail with an error naming it (no fallback,
// no hang).
func TestNotResidentFallsBack(t *testing.T) {
	cases := []collCase{
		{coll: algorithms.AllReduce, t: plan.Float32, op: plan.Sum, count: 150001}, // 600 KB: the large two-phase LL plan's range
		{coll: algorithms.AllReduce, t: plan.Float32, op: plan.Sum, count: 120007, inPlace: true},
		{coll: algorithms.AllReduce, t: plan.Int32, op: plan.Avg, count: 130003},
		{coll: algorithms.AllReduce, t: plan.Float32, op: plan.Sum, count: 70001}, // the first two-phase LL plan: not refused
	}
	for _, refusals := range [][]string{{"resident", "resident", "resident"}, {"", "resident", ""}} {
		t.Run(strings.Join(refusals, ","), func(t *testing.T) {
			errs := runRefusing(t, refusals, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
				defer releaseCaseBuffers(c, dev)
				for round := 0; round < 2; round++ {
					for _, k := range cases {
						wrong, err := runColl(rank, c, dev, s, k)
						if err != nil {
							return fmt.Errorf("round %d, %v: %w", round, k, err)
						}
						if wrong != 0 {
							return fmt.Errorf("round %d, %v: %d wrong elements", round, k, wrong)
						}
					}
				}
				for _, k := range []struct {
					count int64
					want  string
				}{{150001, "all_reduce-hb-"}, {70001, "all_reduce-2pa-LL128-3x32"}} {
					call := weft.Call{Coll: algorithms.AllReduce, Count: k.count, Type: plan.Float32, Op: plan.Sum, Send: 1 << 20, Recv: 64 << 20}
					if got := c.PlanName(call); !strings.HasPrefix(got, k.want) {
						return fmt.Errorf("PlanName(AllReduce of %d floats) = %q after the refusal, want %s…", k.count, got, k.want)
					}
				}
				return nil
			})
			reportRanks(t, errs)
		})
	}
	t.Run("resident,other", func(t *testing.T) {
		errs := runRefusing(t, []string{"", "resident", "other"}, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
			defer releaseCaseBuffers(c, dev)
			_, err := runColl(rank, c, dev, s, cases[0])
			return err
		})
		for r, err := range errs {
			switch {
			case err == nil:
				t.Errorf("rank %d: no error where rank 2's backend failed to prepare the plan", r)
			case errors.Is(err, hal.ErrNotResident):
				t.Errorf("rank %d: %v: wraps ErrNotResident though rank 2 failed otherwise (some ranks would fall back, others not)", r, err)
			case r != 2 && !strings.Contains(err.Error(), "rank 2"):
				t.Errorf("rank %d: %v: does not name rank 2", r, err)
			}
		}
	})
}
