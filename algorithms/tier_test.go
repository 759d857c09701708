package algorithms_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal/plan"
	"pgregory.net/rapid"
)

func TestParseTiers(t *testing.T) {
	got, err := algorithms.ParseTiers(" 1pa-LL16-1x1024@4K, 1pa-ll8-8x512@128K,2pa-64x1024-u4@16M , 2pa-push-128x512-u2-w8M")
	if err != nil {
		t.Fatal(err)
	}
	want := []algorithms.Tier{
		{Algo: algorithms.Algo1PA, LL: plan.LL16, Shape: algorithms.Shape{Blocks: 1, Threads: 1024}, MaxBytes: 4 << 10},
		{Algo: algorithms.Algo1PA, LL: plan.LL8, Shape: algorithms.Shape{Blocks: 8, Threads: 512}, MaxBytes: 128 << 10},
		{Algo: algorithms.Algo2PA, Shape: algorithms.Shape{Blocks: 64, Threads: 1024, Unroll: 4}, MaxBytes: 16 << 20},
		{Algo: algorithms.Algo2PAPush, Shape: algorithms.Shape{Blocks: 128, Threads: 512, Unroll: 2, Push: true, Window: 8 << 20}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("ParseTiers (-want +got):\n%s", d)
	}
	if s := algorithms.FormatTiers(got); s != "1pa-LL16-1x1024@4K,1pa-LL8-8x512@128K,2pa-64x1024-u4@16M,2pa-push-128x512-u2-w8M" {
		t.Errorf("FormatTiers = %q", s)
	}
}

func TestParseTiersRejects(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "no AllReduce tiers"},
		{"3pa-8x1024", "want an algorithm"},
		{"1pa-8x1024@4K,2pa-8x1024-u2", "protocol"},
		{"1pa-LL32-8x1024@4K,2pa-8x1024-u2", "protocol \"LL32\""},
		{"1pa-LL16-8x1024,2pa-8x1024-u2", "is unbounded but is not the last"},
		{"1pa-LL16-8x1024@4K", "cannot be last"},
		{"1pa-LL16-8x1024@4K,2pa-8x1024-u2@1M", "takes no bound"},
		{"2pa-8x1024-u2@1M,2pa-16x1024-u2@1M,2pa-16x512-u2", "bounds must increase"},
		{"1pa-LL16-8x1024@4K,2pa-16x512-u2@4K,2pa-16x512-u2", "bounds must increase"},
		{"2pa-8x1000-u2", "32 to 1024 threads"},
		{"2pa-0x1024-u2", "at least 1 block"},
		{"2pa-8x1024-u99", "unroll 99"},
		{"2pa-8x1024-w8M", "unknown part"},
		{"2pa-push-8x1024-u2", "window 0 bytes"},
		{"2pa-push-8x1024-u2-w1000", "window 1000 bytes"},
		{"2pa-8x1024-u2@0", "want a positive size"},
		{"2pa-8by1024", "BLOCKSxTHREADS"},
		{"1pa-LL16-8x1024-u2@4K,2pa-8x1024", "unknown part"},
	} {
		_, err := algorithms.ParseTiers(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseTiers(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

// Every well-formed tier list survives its text form unchanged.
func TestTiersRoundTrip(t *testing.T) {
	rapid.Check(t, func(r *rapid.T) {
		n := rapid.IntRange(1, 5).Draw(r, "n")
		var tiers []algorithms.Tier
		bound := int64(0)
		for i := 0; i < n; i++ {
			tr := algorithms.Tier{Shape: algorithms.Shape{
				Blocks:  rapid.IntRange(1, 256).Draw(r, "blocks"),
				Threads: 32 * rapid.IntRange(1, 32).Draw(r, "warps"),
			}}
			last := i == n-1
			switch a := rapid.IntRange(0, 2).Draw(r, "algo"); {
			case a == 0 && !last:
				tr.Algo, tr.LL = algorithms.Algo1PA, rapid.SampledFrom([]plan.Protocol{plan.LL16, plan.LL8}).Draw(r, "ll")
			case a == 1:
				tr.Algo, tr.Unroll = algorithms.Algo2PA, rapid.IntRange(0, 16).Draw(r, "unroll")
			default:
				tr.Algo, tr.Push, tr.Unroll = algorithms.Algo2PAPush, true, rapid.IntRange(0, 16).Draw(r, "unroll")
				tr.Window = 16 * rapid.Int64Range(1, 1<<22).Draw(r, "window16")
			}
			if !last {
				bound += rapid.Int64Range(1, 1<<30).Draw(r, "step")
				tr.MaxBytes = bound
			}
			tiers = append(tiers, tr)
		}
		if err := algorithms.ValidateTiers(tiers); err != nil {
			r.Fatalf("generated tiers invalid: %v", err)
		}
		s := algorithms.FormatTiers(tiers)
		back, err := algorithms.ParseTiers(s)
		if err != nil {
			r.Fatalf("ParseTiers(%q): %v", s, err)
		}
		if d := cmp.Diff(tiers, back); d != "" {
			r.Fatalf("round trip of %q (-want +got):\n%s", s, d)
		}
	})
}

// The legacy fields and the tier list they describe build the same plans.
func TestAllReduceTiersMatchLegacyFields(t *testing.T) {
	for _, gpu := range []bool{false, true} {
		c := algorithms.DefaultConfig(1, 4, 132, gpu)
		c.Large.Push, c.Large.Window = true, 8<<20
		legacy, err := algorithms.AllReducePlans(c)
		if err != nil {
			t.Fatal(err)
		}
		c.AllReduce = c.AllReduceTiers()
		if err := algorithms.ValidateTiers(c.AllReduce); err != nil {
			t.Fatal(err)
		}
		c.Mid, c.Large, c.LLBlocks, c.LLMaxBytes = algorithms.Shape{}, algorithms.Shape{}, 0, 0
		tiered, err := algorithms.AllReducePlans(c)
		if err != nil {
			t.Fatal(err)
		}
		if len(legacy) != len(tiered) {
			t.Fatalf("gpu=%v: %d plans from the fields, %d from the tiers", gpu, len(legacy), len(tiered))
		}
		for i := range legacy {
			if legacy[i].MaxBytes != tiered[i].MaxBytes || legacy[i].Plan.String() != tiered[i].Plan.String() {
				t.Errorf("gpu=%v plan %d: fields give %s ≤ %d, tiers %s ≤ %d", gpu, i, legacy[i].Plan, legacy[i].MaxBytes, tiered[i].Plan, tiered[i].MaxBytes)
			}
			if want := "allreduce-" + c.AllReduce[i].Name(); tiered[i].Plan.Name != want {
				t.Errorf("plan %d is named %q, want %q (the tier's name)", i, tiered[i].Plan.Name, want)
			}
		}
	}
}

func TestAllReducePlansFromTiers(t *testing.T) {
	c := algorithms.DefaultConfig(0, 2, 132, true)
	var err error
	if c.AllReduce, err = algorithms.ParseTiers("1pa-LL8-1x256@2K,1pa-LL16-4x1024@64K,2pa-push-32x1024-u4-w2M"); err != nil {
		t.Fatal(err)
	}
	cs, err := algorithms.AllReducePlans(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		bytes int64
		plan  string
	}{{8, "allreduce-1pa-LL8-1x256"}, {2048, "allreduce-1pa-LL8-1x256"}, {2049, "allreduce-1pa-LL16-4x1024"},
		{64 << 10, "allreduce-1pa-LL16-4x1024"}, {1 << 30, "allreduce-2pa-push-32x1024-u4-w2M"}} {
		if got := cs[algorithms.Select(cs, tc.bytes)].Plan.Name; got != tc.plan {
			t.Errorf("%d bytes: %s, want %s", tc.bytes, got, tc.plan)
		}
	}
	if p := cs[0].Plan; p.Threads != 256 || p.Groups[0].Blocks != 1 || p.Scratch != plan.LL8 || p.MaxBytes != 2048 {
		t.Errorf("first plan %v: want 1 block of 256 threads, LL8 scratch, 2048 bytes", p)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "8": 8, "4K": 4 << 10, "4kb": 4 << 10, " 16M ": 16 << 20, "1G": 1 << 30, "100B": 100} {
		if got, err := algorithms.ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "K", "1T", "1.5M", "2000000G"} {
		if _, err := algorithms.ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q): no error", in)
		}
	}
	for _, b := range []int64{0, 8, 1000, 4 << 10, 48 << 10, 8 << 20, 3 << 30} {
		if got, err := algorithms.ParseSize(algorithms.FormatSize(b)); err != nil || got != b {
			t.Errorf("FormatSize(%d) = %q reads back as %d, %v", b, algorithms.FormatSize(b), got, err)
		}
	}
}

func TestParseHBShape(t *testing.T) {
	base := algorithms.Shape{Blocks: 32, Threads: 1024, Unroll: 4, Window: 4 << 20}
	for _, c := range []struct {
		in   string
		want algorithms.Shape
		bad  bool
	}{
		{in: "64x512", want: algorithms.Shape{Blocks: 64, Threads: 512, Unroll: 4, Window: 4 << 20}},
		{in: " 16x1024w8M ", want: algorithms.Shape{Blocks: 16, Threads: 1024, Unroll: 4, Window: 8 << 20}},
		{in: "3x64w4K", want: algorithms.Shape{Blocks: 3, Threads: 64, Unroll: 4, Window: 4 << 10}},
		{in: "64x512w2M,pull", want: algorithms.Shape{Blocks: 64, Threads: 512, Unroll: 4, Window: 2 << 20, Pull: true}},
		{in: "64x512,push", want: algorithms.Shape{Blocks: 64, Threads: 512, Unroll: 4, Window: 4 << 20}},
		{in: "64x512,sideways", bad: true},
		{in: "pull", want: algorithms.Shape{Blocks: 32, Threads: 1024, Unroll: 4, Window: 4 << 20, Pull: true}},
		{in: ",pull", want: algorithms.Shape{Blocks: 32, Threads: 1024, Unroll: 4, Window: 4 << 20, Pull: true}},
		{in: "64", bad: true},
		{in: "0x512", bad: true},
		{in: "300x512", bad: true},
		{in: "64x500", bad: true},
		{in: "64x2048", bad: true},
		{in: "64x512w1K", bad: true},
		{in: "64x512wjunk", bad: true},
		{in: "64x512w2Md4p4@512K", want: algorithms.Shape{Blocks: 64, Threads: 512, Unroll: 4, Window: 2 << 20, Depth: 4, Pipeline: 4, PipelineFrom: 512 << 10}},
		{in: "64x512p8@4M", want: algorithms.Shape{Blocks: 64, Threads: 512, Unroll: 4, Window: 4 << 20, Pipeline: 8, PipelineFrom: 4 << 20}},
		{in: "64x512p4@8M", bad: true},   // from above the window
		{in: "64x512p1@512K", bad: true}, // a pipeline of one window cuts nothing
		{in: "64x512p4@100", bad: true},  // not a multiple of plan.AlignBytes
		{in: "64x512p4@", bad: true},
	} {
		got, err := algorithms.ParseHBShape(c.in, base)
		if c.bad {
			if err == nil {
				t.Errorf("ParseHBShape(%q) = %+v, want an error", c.in, got)
			} else if got != base {
				t.Errorf("ParseHBShape(%q) on error = %+v, want the base shape", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseHBShape(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}
