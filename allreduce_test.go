package weft_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/check"
	"github.com/weftccl/weft/hal"
	_ "github.com/weftccl/weft/hal/host"
	"github.com/weftccl/weft/hal/nvlink"
	_ "github.com/weftccl/weft/hal/nvswitch"
	_ "github.com/weftccl/weft/hal/pcie"
	"github.com/weftccl/weft/hal/plan"
	_ "github.com/weftccl/weft/hal/xgmi"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/env"
)

// runRanks runs f on n goroutine ranks, each with its own host device and
// communicator, and returns their errors.
func runRanks(t *testing.T, backend string, n int, f func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error) []error {
	t.Helper()
	return runRanksOpts(t, backend, n, weft.Options{}, f)
}

func runRanksOpts(t *testing.T, backend string, n int, opts weft.Options, f func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error) []error {
	t.Helper()
	return runRanksWith(t, backend, n, func(int, hal.Device) weft.Options { return opts }, f)
}

// runRanksWith runs f on n goroutine ranks, each with its own device of
// backend, communicator (options from optsFor) and stream, and returns
// their errors.
func runRanksWith(t testing.TB, backend string, n int, optsFor func(rank int, dev hal.Device) weft.Options, f func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error) []error {
	t.Helper()
	job := sanitize(fmt.Sprintf("t%d-%s", n, t.Name()))
	open := func(r int) (hal.Device, error) {
		ordinal := r
		if backend == nvlink.Name {
			n, _ := cuda.DeviceCount()
			ordinal = r % max(n, 1)
		}
		return hal.Open(backend, hal.Config{Ordinal: ordinal, Rank: r, JobID: job})
	}
	return runRanksOn(n, open, optsFor, f)
}

// runRanksOn is runRanksWith over the devices open returns (one per
// rank; each is closed when its rank is done).
func runRanksOn(n int, open func(rank int) (hal.Device, error), optsFor func(rank int, dev hal.Device) weft.Options, f func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error) []error {
	boots := bootstrap.NewLocal(n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			dev, err := open(r)
			if err != nil {
				errs[r] = err
				return
			}
			defer dev.Close()
			c, err := weft.NewComm(context.Background(), boots[r], dev, optsFor(r, dev))
			if err != nil {
				errs[r] = err
				return
			}
			defer func() {
				// A Close that had to give up (releases a peer still owed
				// at the deadline) fails the rank that ran cleanly.
				if err := c.Close(); err != nil && errs[r] == nil {
					errs[r] = fmt.Errorf("close: %w", err)
				}
			}()
			s, err := dev.NewStream()
			if err != nil {
				errs[r] = err
				return
			}
			defer s.Close()
			errs[r] = f(r, c, dev, s)
		}(r)
	}
	wg.Wait()
	return errs
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

func TestAllReduceHost(t *testing.T) {
	t.Parallel() // CPU work that overlaps the waiting process tests
	sizes := []int64{0, 1, 3, 4, 15, 16, 17, 1000, 4096 + 3, 65536, 300000, 1 << 20}
	if testing.Short() {
		sizes = []int64{0, 3, 17, 4096 + 3, 300000}
	}
	for _, n := range []int{2, 3, 4, 8} {
		for ti, dt := range plan.DataTypes {
			if n > 2 && ti%3 != n%3 { // every type on 2 ranks, a third of them on each larger count
				continue
			}
			t.Run(fmt.Sprintf("n%d-%v", n, dt), func(t *testing.T) {
				errs := runRanks(t, "host", n, sweep(sizes, dt, plan.Sum))
				reportRanks(t, errs)
			})
		}
	}
}

func oneAllReduce(c *weft.Comm, dev hal.Device, s hal.Stream, count int64, dt plan.DataType, op plan.RedOp, inPlace bool) error {
	bytes := max(count*int64(dt.Size()), 1)
	in, err := dev.Alloc(bytes)
	if err != nil {
		return err
	}
	defer in.Free()
	out := in
	if !inPlace {
		if out, err = dev.Alloc(bytes); err != nil {
			return err
		}
		defer out.Free()
		defer c.Deregister(out)
	}
	defer c.Deregister(in)
	return allReduceOn(c, dev, s, in, out, count, dt, op)
}

// allReduceOn runs one AllReduce of count elements from in to out (in
// place when they are the same buffer), with the output poisoned first,
// and checks every element.
func allReduceOn(c *weft.Comm, dev hal.Device, s hal.Stream, in, out hal.Buffer, count int64, dt plan.DataType, op plan.RedOp) error {
	if err := dev.Write(in, 0, check.Input(dt, op, c.Rank(), count)); err != nil {
		return err
	}
	if out != in && count > 0 {
		poison := make([]byte, count*int64(dt.Size()))
		for i := range poison {
			poison[i] = 0xA5
		}
		if err := dev.Write(out, 0, poison); err != nil {
			return err
		}
	}
	if err := c.AllReduce(in, out, count, dt, op, s); err != nil {
		return err
	}
	if err := c.Synchronize(s); err != nil {
		return err
	}
	got := make([]byte, count*int64(dt.Size()))
	if err := dev.Read(got, out, 0); err != nil {
		return err
	}
	want := check.AllReduce(dt, op, c.Size(), count)
	if wrong := check.Wrong(dt, got, want); wrong != 0 {
		return fmt.Errorf("%d of %d elements wrong; first differences: %s", wrong, count, cmp.Diff(want[:min(len(want), 32)], got[:min(len(got), 32)]))
	}
	return nil
}

// TestAllReduceNVLink runs AllReduce across every visible GPU from one
// process (one goroutine and device per rank), every data type and
// operator, sizes that cross the 1PA/2PA threshold, in and out of place.
// It skips without GPUs, unless WEFT_REQUIRE names nvlink.
func TestAllReduceNVLink(t *testing.T) {
	a, err := hal.Probe(nvlink.Name)
	if err != nil || !a.Available {
		if env.Required(nvlink.Name) {
			t.Fatalf("WEFT_REQUIRE=nvlink but the backend is unavailable: %v %s", err, a.Reason)
		}
		t.Skipf("nvlink backend unavailable: %s", a.Reason)
	}
	n, err := cuda.DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	ranks := max(n, 2) // with one GPU, two ranks share it (a peer mapping of the same device)
	sizes := []int64{0, 3, 8, 17, 4096 + 3, 300000 + 6, 4 << 20}
	for _, dt := range plan.DataTypes {
		for _, op := range plan.RedOps {
			if op == plan.PreMulSum {
				continue // Comm.AllReduce takes no scalar (TestCollectivesNVLink covers it through Launch)
			}
			t.Run(fmt.Sprintf("%v-%v", dt, op), func(t *testing.T) {
				errs := runRanks(t, nvlink.Name, ranks, sweep(sizes, dt, op))
				reportRanks(t, errs)
			})
		}
	}
}

// The largest size the issue names, 64 MB, on 4 goroutine ranks: float
// through the zero-copy 2PA plan; bfloat16 in place at 16 MB.
func TestAllReduceHost64MB(t *testing.T) {
	t.Parallel() // computes while the socket-bound parallel tests wait
	if testing.Short() {
		t.Skip("64 MB per rank: not in -short")
	}
	for _, tc := range []struct {
		dt      plan.DataType
		inPlace bool
		bytes   int64
	}{{plan.Float32, false, 64 << 20}, {plan.BFloat16, true, 16 << 20}} {
		errs := runRanks(t, "host", 4, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
			return oneAllReduce(c, dev, s, tc.bytes/int64(tc.dt.Size()), tc.dt, plan.Sum, tc.inPlace)
		})
		for r, err := range errs {
			if err != nil {
				t.Errorf("%v rank %d: %v", tc.dt, r, err)
			}
		}
	}
}

// The store-only 2PA (push) on hal/host, with 4 KiB windows so that one call
// runs through many windows and both scratch halves: 2–8 ranks, every data
// type, in and out of place, sizes below, at and far above one window.
func TestAllReduce2PAPushHost(t *testing.T) {
	t.Parallel() // CPU work that overlaps the waiting process tests
	sizes := []int64{0, 3, 17, 4096 + 3, 64 << 10, 300000 + 4}
	for _, n := range []int{2, 3, 4, 8} {
		for ti, dt := range plan.DataTypes {
			if n > 2 && ti%3 != n%3 { // every type on 2 ranks, a third of them on each larger count
				continue
			}
			t.Run(fmt.Sprintf("n%d-%v", n, dt), func(t *testing.T) {
				errs := runRanksConfig(t, n, func(c *algorithms.Config) {
					c.LLMaxBytes, c.MidMaxBytes = 16, 16
					c.Large = algorithms.Shape{Blocks: 3, Threads: 32, Push: true, Window: 4096}
				}, sweep(sizes, dt, plan.Sum))
				reportRanks(t, errs)
			})
		}
	}
}

// runRanksConfig is runRanks on hal/host with an edited default algorithm
// configuration.
func runRanksConfig(t *testing.T, n int, edit func(*algorithms.Config), f func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error) []error {
	t.Helper()
	return runRanksWith(t, "host", n, func(r int, dev hal.Device) weft.Options {
		cfg := algorithms.DefaultConfig(r, n, dev.Info().Multiprocessors, false)
		edit(&cfg)
		return weft.Options{Config: &cfg}
	}, f)
}

// sweep returns a rank body that runs AllReduce of type dt and operator op
// at every size of sizes (bytes), out of place and in place, checking
// every element.
func sweep(sizes []int64, dt plan.DataType, op plan.RedOp) func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
	return func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		// One pair of buffers for the whole sweep: freeing device memory
		// synchronises the whole device, so per-call buffers would make a
		// rank wait, in cuMemFree, for a peer's kernel that waits for this
		// rank's next launch when ranks share a GPU.
		var top int64 = 1
		for _, b := range sizes {
			top = max(top, b)
		}
		in, err := dev.Alloc(top)
		if err != nil {
			return err
		}
		defer in.Free()
		defer c.Deregister(in)
		out, err := dev.Alloc(top)
		if err != nil {
			return err
		}
		defer out.Free()
		defer c.Deregister(out)
		for _, bytes := range sizes {
			count := bytes / int64(dt.Size())
			for _, inPlace := range []bool{false, true} {
				dst := out
				if inPlace {
					dst = in
				}
				if err := allReduceOn(c, dev, s, in, dst, count, dt, op); err != nil {
					return fmt.Errorf("%d bytes in-place=%v: %w", bytes, inPlace, err)
				}
			}
		}
		return nil
	}
}

// reportRanks fails t for every rank that returned an error.
func reportRanks(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestAllReduce2PALLHost: the scratch AllReduce (Launch, the NCCL API's
// path) from 3 ranks takes the two-phase LL plan between the wide 1PA's
// bound and Config.ScratchLL2PAMaxBytes (192–384 KiB on hal/host), element
// by element right for operators that scale (PreMulSum, floating Avg) or
// divide (integer Avg), in and out of place, with counts that do not
// divide into n chunks evenly; back to back, so launches reuse both scratch
// halves. PlanName says which plan served, and WEFT_ALLREDUCE_LL2_MAX_BYTES=0
// turns it off. Both packet formats (LL128, hal/host's default, and LL16 by
// WEFT_LL128=0), each with slots of one chunk.
func TestAllReduce2PALLHost(t *testing.T) {
	for _, proto := range []string{"LL128", "LL16"} {
		t.Run(proto, func(t *testing.T) {
			if proto == "LL16" {
				t.Setenv("WEFT_LL128", "0")
			}
			allReduce2PALLHost(t, proto)
		})
	}
}

// TestAllReduce2PALLLargeHost: the second two-phase LL plan
// (Config.LL2Large, WEFT_ALLREDUCE_LL2_LARGE_SHAPE and _MAX_BYTES; on GPUs
// 160 × 512 to 8 MiB on 4 ranks) serves the sizes between the first one's
// bound and its own on hal/host, with its own shape, element by element
// right in and out of place, for 3 and 4 ranks; the windowed plan beyond.
func TestAllReduce2PALLLargeHost(t *testing.T) {
	t.Setenv("WEFT_ALLREDUCE_LL2_LARGE_SHAPE", "5x64")
	t.Setenv("WEFT_ALLREDUCE_LL2_LARGE_MAX_BYTES", "768K")
	cases := []collCase{
		{coll: algorithms.AllReduce, t: plan.Float32, op: plan.Sum, count: 150001}, // 600 KB
		{coll: algorithms.AllReduce, t: plan.Int32, op: plan.Avg, count: 120007, inPlace: true},
		{coll: algorithms.AllReduce, t: plan.BFloat16, op: plan.Max, count: 300001},
		{coll: algorithms.AllReduce, t: plan.Float64, op: plan.PreMulSum, count: 98305, inPlace: true},
	}
	for _, n := range []int{3, 4} {
		runCasesThen(t, "host", n, cases, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
			for _, k := range []struct {
				count int64
				want  string
			}{{96000, "all_reduce-2pa-LL128-3x32"}, {98305, "all_reduce-2pa-LL128-5x64"}, {196608, "all_reduce-2pa-LL128-5x64"}, {196609, "all_reduce-hb-"}} {
				call := weft.Call{Coll: algorithms.AllReduce, Count: k.count, Type: plan.Float32, Op: plan.Sum, Send: 1 << 20, Recv: 64 << 20}
				if got := c.PlanName(call); !strings.HasPrefix(got, k.want) {
					return fmt.Errorf("%d ranks: PlanName(AllReduce of %d floats) = %q, want %s…", n, k.count, got, k.want)
				}
			}
			return nil
		})
	}
}

func allReduce2PALLHost(t *testing.T, proto string) {
	cases := []collCase{
		{coll: algorithms.AllReduce, t: plan.Float32, op: plan.Sum, count: 70001}, // 280 KB
		{coll: algorithms.AllReduce, t: plan.Int32, op: plan.Avg, count: 80003},
		{coll: algorithms.AllReduce, t: plan.Float32, op: plan.Avg, count: 60007, inPlace: true},
		{coll: algorithms.AllReduce, t: plan.BFloat16, op: plan.Max, count: 150001, inPlace: true},
		{coll: algorithms.AllReduce, t: plan.Float64, op: plan.PreMulSum, count: 40001},
		{coll: algorithms.AllReduce, t: plan.Int8, op: plan.Prod, count: 330001},
		{coll: algorithms.AllReduce, t: plan.Float32, op: plan.Sum, count: 70001},
	}
	for _, n := range []int{3, 4} {
		runCasesThen(t, "host", n, cases, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
			for _, k := range []struct {
				count int64
				want  string
			}{{40000, "allreduce-1pa-"}, {70001, "all_reduce-2pa-" + proto + "-"}, {96000, "all_reduce-2pa-" + proto + "-"}, {100000, "all_reduce-hb-"}} {
				call := weft.Call{Coll: algorithms.AllReduce, Count: k.count, Type: plan.Float32, Op: plan.Sum, Send: 1 << 20, Recv: 64 << 20}
				if got := c.PlanName(call); !strings.HasPrefix(got, k.want) {
					return fmt.Errorf("%d ranks: PlanName(AllReduce of %d floats) = %q, want %s…", n, k.count, got, k.want)
				}
			}
			return nil
		})
	}
	t.Setenv("WEFT_ALLREDUCE_LL2_MAX_BYTES", "0")
	for r, err := range runRanks(t, "host", 3, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		call := weft.Call{Coll: algorithms.AllReduce, Count: 70001, Type: plan.Float32, Op: plan.Sum, Send: 1 << 20, Recv: 64 << 20}
		if got := c.PlanName(call); !strings.HasPrefix(got, "all_reduce-hb-") {
			return fmt.Errorf("WEFT_ALLREDUCE_LL2_MAX_BYTES=0: PlanName(AllReduce of 70001 floats) = %q, the windowed plan expected", got)
		}
		return nil
	}) {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestAllReduceTakesLaunchLL: Comm.AllReduce with the default tiers takes
// Launch's LL plan for the sizes where its own tiers would run a 2PA and
// Launch serves LL packets, up to Config.WindowLLMaxBytes
// (Comm.allReduceLaunchLL): on hal/host the wide 1PA at 128–192 KiB on 2
// ranks and the two-phase LL to 384 KiB on 3; its own tiers below (the
// narrow 1PA) and above (the 2PA). AllReducePlan names the plan that
// served, and every element is right in and out of place.
func TestAllReduceTakesLaunchLL(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d-ranks", n), func(t *testing.T) {
			sizes := []int64{64 << 10, 160 << 10, 300 << 10, 2 << 20}
			errs := runRanks(t, "host", n, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
				for _, b := range sizes {
					count := b / 4
					call := weft.Call{Coll: algorithms.AllReduce, Send: 16, Recv: 16, Count: count, Type: plan.Float32, Op: plan.Sum}
					own, launch := c.AllReducePlan(count, plan.Float32, plan.Sum), c.PlanName(call)
					wantLaunch := b == 160<<10 || (b == 300<<10 && n >= 3)
					zeroCopy2PA := strings.Contains(own, "-2pa-") && !strings.Contains(own, "-LL")
					switch {
					case wantLaunch && (own != launch || !strings.Contains(launch, "-LL")):
						return fmt.Errorf("%d bytes: Comm.AllReduce's plan %q, want Launch's LL plan (%q)", b, own, launch)
					case b == 64<<10 && !strings.Contains(own, "-1pa-LL"):
						return fmt.Errorf("%d bytes: Comm.AllReduce's plan %q, want its narrow 1PA tier", b, own)
					case !wantLaunch && b > 64<<10 && (!zeroCopy2PA || own == launch):
						return fmt.Errorf("%d bytes: Comm.AllReduce's plan %q, want its zero-copy 2PA (Launch: %q)", b, own, launch)
					}
				}
				return sweep(sizes, plan.Float32, plan.Sum)(rank, c, dev, s)
			})
			reportRanks(t, errs)
		})
	}
}
