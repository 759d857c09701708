package weft_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// writeTuning writes a tuning file with one entry for hal/host at n ranks
// (the device name hal/host reports) and returns its path.
func writeTuning(t *testing.T, n int, tiers ...string) string {
	t.Helper()
	dev, err := hal.Open("host", hal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	name := dev.Info().Name
	dev.Close()
	path := filepath.Join(t.TempDir(), "weft", "tuning.json")
	tu := &algorithms.Tuning{}
	tu.Put(algorithms.TuningEntry{Backend: "otherbackend", Device: name, NRanks: n, AllReduce: []string{"2pa-1x32-u0"}})
	tu.Put(algorithms.TuningEntry{Backend: "host", Device: name, NRanks: n + 1, AllReduce: []string{"2pa-1x32-u0"}})
	tu.Put(algorithms.TuningEntry{Backend: "host", Device: name, NRanks: n, AllReduce: tiers})
	if err := algorithms.SaveTuning(path, tu); err != nil {
		t.Fatal(err)
	}
	return path
}

// plansAndCheck runs AllReduce at sizes on every rank and returns rank 0's
// plan list, source and the plan that served each size.
func plansAndCheck(t *testing.T, n int, opts weft.Options, sizes []int64) (plans []string, source string, served []string) {
	t.Helper()
	errs := runRanksOpts(t, "host", n, opts, func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
		if rank == 0 {
			plans, source = c.Plans(), c.PlanSource()
			for _, b := range sizes {
				served = append(served, c.AllReducePlan(b/4, plan.Float32, plan.Sum))
			}
		}
		return sweep(sizes, plan.Float32, plan.Sum)(rank, c, dev, s)
	})
	reportRanks(t, errs)
	return plans, source, served
}

// Selection order: explicit configuration > WEFT_ALLREDUCE > tuning file
// > defaults; each source's plans serve the sizes they claim, correctly.
func TestTuningPrecedence(t *testing.T) {
	const n = 3
	sizes := []int64{16, 4096, 64 << 10, 300 << 10}
	tuned := []string{"1pa-LL8-1x32@4K", "1pa-LL16-2x64@64K", "2pa-push-2x32-u0-w8K"}
	path := writeTuning(t, n, tuned...)
	t.Setenv("WEFT_TUNING_FILE", path)
	t.Setenv("WEFT_ALLREDUCE", "")

	_, source, served := plansAndCheck(t, n, weft.Options{}, sizes)
	if source != "tuning file "+path {
		t.Errorf("source %q, want the tuning file", source)
	}
	want := []string{"allreduce-1pa-LL8-1x32", "allreduce-1pa-LL8-1x32", "allreduce-1pa-LL16-2x64", "allreduce-2pa-push-2x32-u0-w8K"}
	if strings.Join(served, " ") != strings.Join(want, " ") {
		t.Errorf("tuning file: plans %v, want %v", served, want)
	}

	t.Setenv("WEFT_ALLREDUCE", "1pa-LL16-1x32@1K,2pa-2x64-u0")
	plans, source, served := plansAndCheck(t, n, weft.Options{}, sizes)
	if source != "WEFT_ALLREDUCE" || len(plans) != 2 || served[0] != "allreduce-1pa-LL16-1x32" || served[1] != "allreduce-2pa-2x64-u0" {
		t.Errorf("WEFT_ALLREDUCE over the tuning file: source %q, plans %v, served %v", source, plans, served)
	}

	cfgFor := func(r int) *algorithms.Config {
		c := algorithms.DefaultConfig(r, n, 2, false)
		return &c
	}
	errs := runRanksWith(t, "host", n, func(r int, dev hal.Device) weft.Options { return weft.Options{Config: cfgFor(r)} },
		func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
			if got, want := c.AllReducePlan(300<<10, plan.Float32, plan.Sum), "allreduce-2pa-"; c.PlanSource() != "Options.Config" || !strings.HasPrefix(got, want) {
				t.Errorf("rank %d: an explicit Config: source %q, plan %q", rank, c.PlanSource(), got)
			}
			return nil
		})
	reportRanks(t, errs)

	t.Setenv("WEFT_ALLREDUCE", "")
	t.Setenv("WEFT_TUNING_FILE", "off")
	if _, source, _ := plansAndCheck(t, n, weft.Options{}, sizes[:1]); source != "default" {
		t.Errorf("WEFT_TUNING_FILE=off: source %q", source)
	}
	// An entry for another rank count is not used.
	t.Setenv("WEFT_TUNING_FILE", path)
	if _, source, _ := plansAndCheck(t, 2, weft.Options{}, sizes[:1]); source != "default" {
		t.Errorf("2 ranks with an entry for %d: source %q", n, source)
	}
}

// Bad tuning input is an error naming what is wrong, on every rank.
func TestTuningErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"version": 1, "entries": [{"backend": "host", "device": "x", "nranks": 2, "allreduce": ["1pa-LL16-8x32"]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, allreduce, want string }{
		{filepath.Join(dir, "missing.json"), "", "missing.json"},
		{bad, "", "cannot be last"},
		{"off", "2pa-8x32-u2@1M", "takes no bound"},
		{"off", "4pa-8x32", "WEFT_ALLREDUCE"},
	} {
		t.Setenv("WEFT_TUNING_FILE", tc.file)
		t.Setenv("WEFT_ALLREDUCE", tc.allreduce)
		errs := runRanks(t, "host", 2, func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
		for r, err := range errs {
			if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("WEFT_TUNING_FILE=%s WEFT_ALLREDUCE=%q: rank %d: %v; want ErrInvalidArgument naming %q", tc.file, tc.allreduce, r, err, tc.want)
			}
		}
	}
}

// Ranks that chose different plans fail at NewComm, naming the rank.
func TestTuningRanksDisagree(t *testing.T) {
	t.Setenv("WEFT_TUNING_FILE", "off")
	t.Setenv("WEFT_ALLREDUCE", "")
	errs := runRanksWith(t, "host", 3, func(r int, dev hal.Device) weft.Options {
		if r != 2 {
			return weft.Options{}
		}
		c := algorithms.DefaultConfig(r, 3, dev.Info().Multiprocessors, false)
		c.LLMaxBytes = 1 << 10
		return weft.Options{Config: &c}
	}, func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "rank 2 AllReduce 1pa-LL16-2x32@1K") {
			t.Errorf("rank %d: %v; want ErrInvalidUsage naming rank 2's tiers", r, err)
		}
	}
}

// WEFT_P2P_LL_MAX_BYTES moves the LL/windowed point-to-point boundary; a
// malformed value is refused, and ranks with different bounds (a sender
// and its receiver would pick different plans) fail NewComm naming the
// rank.
func TestP2PLLBoundSetting(t *testing.T) {
	t.Setenv("WEFT_TUNING_FILE", "off")
	t.Setenv("WEFT_P2P_LL_MAX_BYTES", "lots")
	errs := runRanksWith(t, "host", 2, func(int, hal.Device) weft.Options { return weft.Options{} },
		func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "WEFT_P2P_LL_MAX_BYTES") {
			t.Errorf("rank %d with WEFT_P2P_LL_MAX_BYTES=lots: %v; want ErrInvalidArgument naming the variable", r, err)
		}
	}
	t.Setenv("WEFT_P2P_LL_MAX_BYTES", "")
	errs = runRanksWith(t, "host", 3, func(r int, dev hal.Device) weft.Options {
		if r != 1 {
			return weft.Options{}
		}
		c := algorithms.DefaultConfig(r, 3, dev.Info().Multiprocessors, false)
		c.P2PLLWideMaxBytes = 256 << 10
		return weft.Options{Config: &c}
	}, func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "rank 1 262144 bytes") {
			t.Errorf("rank %d: %v; want ErrInvalidUsage naming rank 1's LL point-to-point bound", r, err)
		}
	}
}

// WEFT_P2P_SHAPE and WEFT_ROOTED_SHAPE reshape the windowed point-to-point
// and Broadcast/Reduce plans: plans of odd shapes stay exact across many
// windows, a malformed value is refused naming the variable, and ranks
// whose shapes differ fail NewComm naming the rank.
func TestShapeSettings(t *testing.T) {
	t.Setenv("WEFT_TUNING_FILE", "off")
	for _, name := range []string{"WEFT_P2P_SHAPE", "WEFT_ROOTED_SHAPE"} {
		t.Setenv(name, "3x33")
		errs := runRanksWith(t, "host", 2, func(int, hal.Device) weft.Options { return weft.Options{} },
			func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
		for r, err := range errs {
			if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "threads") {
				t.Errorf("rank %d with %s=3x33: %v; want ErrInvalidArgument naming the variable and the threads", r, name, err)
			}
		}
		t.Setenv(name, "")
	}

	// 3 blocks of 64 threads, 8 KiB windows: the 9,973-byte multiples of
	// testP2P (all windowed: no LL point-to-point) and 40,000 floats of
	// Broadcast and Reduce cross several.
	t.Setenv("WEFT_P2P_LL_MAX_BYTES", "0")
	t.Setenv("WEFT_P2P_MID_MAX_BYTES", "0") // every operation on the WEFT_P2P_SHAPE plan
	t.Setenv("WEFT_P2P_SHAPE", "3x64w8K")
	t.Setenv("WEFT_ROOTED_SHAPE", "2x96w8K")
	testP2P(t, "host", 3)
	runCases(t, 3, []collCase{
		{coll: algorithms.Broadcast, t: plan.Float32, op: plan.Sum, root: 1, count: 40000},
		{coll: algorithms.Reduce, t: plan.Float32, op: plan.Sum, root: 2, count: 40000},
	})
	// The same windows read by the receivers from the senders' scratch.
	t.Setenv("WEFT_P2P_SHAPE", "3x64w8K,pull")
	testP2P(t, "host", 3)
	// Writers up to 4 (point-to-point) and 5 (Broadcast, Reduce) windows
	// ahead of their readers (Shape.Depth).
	t.Setenv("WEFT_P2P_SHAPE", "3x64w8Kd4p6")
	t.Setenv("WEFT_ROOTED_SHAPE", "2x96w8Kd5")
	testP2P(t, "host", 3)
	// The mid-size plan reshaped, serving every operation up to 64 KiB.
	t.Setenv("WEFT_P2P_MID_MAX_BYTES", "64K")
	t.Setenv("WEFT_P2P_MID_SHAPE", "2x96w4Kd3p1")
	testP2P(t, "host", 3)
	t.Setenv("WEFT_P2P_MID_MAX_BYTES", "0")
	t.Setenv("WEFT_P2P_MID_SHAPE", "")
	// 60,000 floats take the split plans (from 160 KiB on hal/host), one
	// block per group, also 5 windows deep.
	runCases(t, 3, []collCase{
		{coll: algorithms.Broadcast, t: plan.Float32, op: plan.Sum, root: 0, count: 40000},
		{coll: algorithms.Reduce, t: plan.Float32, op: plan.Sum, root: 1, count: 40000},
		{coll: algorithms.Broadcast, t: plan.Float32, op: plan.Sum, root: 2, count: 60000},
		{coll: algorithms.Reduce, t: plan.Float32, op: plan.Max, root: 0, count: 60000},
	})
	// Chunks below a window pipelined from 16 KiB (Shape.PipelineFrom):
	// 40,000 floats (all-pairs) and 60,000 (split, 120 KB chunks) under
	// 256 KiB windows are cut into 4 windows each; point-to-point likewise.
	t.Setenv("WEFT_ROOTED_SHAPE", "2x96w256Kd3p4@16K")
	t.Setenv("WEFT_P2P_SHAPE", "3x64w64Kp4@4K")
	testP2P(t, "host", 3)
	runCases(t, 3, []collCase{
		{coll: algorithms.Broadcast, t: plan.Float32, op: plan.Sum, root: 2, count: 40000},
		{coll: algorithms.Reduce, t: plan.Float32, op: plan.Sum, root: 0, count: 40000},
		{coll: algorithms.Broadcast, t: plan.Float32, op: plan.Sum, root: 1, count: 60000},
		{coll: algorithms.Reduce, t: plan.Float32, op: plan.Min, root: 2, count: 60000},
	})
	t.Setenv("WEFT_P2P_SHAPE", "")
	t.Setenv("WEFT_ROOTED_SHAPE", "")

	// Only the one-hop plans have a window depth.
	t.Setenv("WEFT_HB_SHAPE", "8x64w8Kd4")
	errs := runRanksWith(t, "host", 2, func(int, hal.Device) weft.Options { return weft.Options{} },
		func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "WEFT_HB_SHAPE") || !strings.Contains(err.Error(), "depth") {
			t.Errorf("rank %d with WEFT_HB_SHAPE=8x64w8Kd4: %v; want ErrInvalidArgument naming the variable and the depth", r, err)
		}
	}
	t.Setenv("WEFT_HB_SHAPE", "")

	// Only the point-to-point plan has a direction.
	t.Setenv("WEFT_ROOTED_SHAPE", "pull")
	errs = runRanksWith(t, "host", 2, func(int, hal.Device) weft.Options { return weft.Options{} },
		func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "WEFT_ROOTED_SHAPE") || !strings.Contains(err.Error(), "pull") {
			t.Errorf("rank %d with WEFT_ROOTED_SHAPE=pull: %v; want ErrInvalidArgument naming the variable", r, err)
		}
	}
	t.Setenv("WEFT_ROOTED_SHAPE", "")
	// A puller and a pusher would each wait for the other's window.
	errs = runRanksWith(t, "host", 2, func(r int, dev hal.Device) weft.Options {
		c := algorithms.DefaultConfig(r, 2, dev.Info().Multiprocessors, false)
		c.P2P.Pull = r == 1
		return weft.Options{Config: &c}
	}, func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "WEFT_P2P_SHAPE") || !strings.Contains(err.Error(), "Pull:true") {
			t.Errorf("rank %d: %v; want ErrInvalidUsage naming rank 1's pulling shape", r, err)
		}
	}

	errs = runRanksWith(t, "host", 2, func(r int, dev hal.Device) weft.Options {
		c := algorithms.DefaultConfig(r, 2, dev.Info().Multiprocessors, false)
		if r == 1 {
			c.RootedHB.Window *= 2
		}
		return weft.Options{Config: &c}
	}, func(int, *weft.Comm, hal.Device, hal.Stream) error { return nil })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "WEFT_ROOTED_SHAPE") || !strings.Contains(err.Error(), "rank 1 HB") {
			t.Errorf("rank %d: %v; want ErrInvalidUsage naming rank 1's shapes", r, err)
		}
	}
}
