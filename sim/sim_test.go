package sim

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal/plan"
)

// calibration is weft's measured figures the model is fitted to: time (µs)
// or, where busbw is set, bus bandwidth (GB/s), float AllReduce with the
// all-pairs plans, out of place.
var calibration = []struct {
	preset, source string
	bytes          int64
	us, busbw      float64
}{
	// /work/shared/measurements/2026-11-25-h100x2/README.md §2, tuner sweep.
	{"h100x2", "2026-11-25-h100x2 §2", 8, 3.56, 0},
	{"h100x2", "2026-11-25-h100x2 §2", 8 << 10, 3.60, 0},
	{"h100x2", "2026-11-25-h100x2 §2", 32 << 10, 3.77, 0},
	{"h100x2", "2026-11-25-h100x2 §2", 128 << 10, 5.41, 0},
	{"h100x2", "2026-11-25-h100x2 §2", 512 << 10, 9.55, 0},
	{"h100x2", "2026-11-25-h100x2 §2", 2 << 20, 13.97, 0},
	{"h100x2", "2026-11-25-h100x2 §2", 32 << 20, 107.4, 0},
	{"h100x2", "2026-11-25-h100x2 §2", 512 << 20, 1572, 0},
	// docs/bench/notes.md, "Final figures (v5)".
	{"h200x2", "notes.md v5 2×H200", 8, 3.55, 0},
	{"h200x2", "notes.md v5 2×H200", 8 << 10, 3.70, 0},
	{"h200x2", "notes.md v5 2×H200", 128 << 20, 0, 337.3},
	{"h200x2", "notes.md v5 2×H200", 512 << 20, 0, 342.0},
	{"h200x4", "notes.md v5 4×H200", 8, 5.40, 0},
	{"h200x4", "notes.md v5 4×H200", 8 << 10, 5.17, 0},
	{"h200x4", "notes.md v5 4×H200", 128 << 20, 0, 317.3},
	{"h200x4", "notes.md v5 4×H200", 512 << 20, 0, 323.3},
}

// CalibrationTolerance is the largest relative error the model keeps at
// every calibration point.
const CalibrationTolerance = 0.15

func predict(t *testing.T, cl Cluster, family string, coll algorithms.Collective, bytes int64) Row {
	t.Helper()
	f, err := Lookup(family)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPredictor(cl, f, coll, plan.Float32)
	if err != nil {
		t.Fatal(err)
	}
	row, ok, err := p.Predict(bytes)
	if err != nil || !ok {
		t.Fatalf("%s %v %d bytes: ok %v, %v", family, coll, bytes, ok, err)
	}
	return row
}

func TestCalibrationPoints(t *testing.T) {
	worst := 0.0
	for _, c := range calibration {
		cl, err := Preset(c.preset)
		if err != nil {
			t.Fatal(err)
		}
		row := predict(t, cl, "all-pairs", algorithms.AllReduce, c.bytes)
		got, want, unit := row.TimeUs, c.us, "µs"
		if c.busbw > 0 {
			got, want, unit = row.BusBW, c.busbw, "GB/s"
		}
		rel := got/want - 1
		worst = max(worst, math.Abs(rel))
		t.Logf("%s %10d B: model %8.2f %s, measured %8.2f (%+.1f%%) [%s, %s]", c.preset, c.bytes, got, unit, want, 100*rel, row.Plan, c.source)
		if math.Abs(rel) > CalibrationTolerance {
			t.Errorf("%s %d B: model %.2f %s, measured %.2f: %+.1f%% beyond ±%.0f%%", c.preset, c.bytes, got, unit, want, 100*rel, 100*CalibrationTolerance)
		}
	}
	t.Logf("worst calibration error %.1f%%", 100*worst)
}

// ringAlphaBeta is the ring's closed form (Thakur, Rabenseifner and Gropp,
// "Optimization of collective communication operations in MPICH", IJHPCA
// 2005; the busbw derivation of nccl-tests' doc/PERFORMANCE.md):
// AllReduce 2(n−1)(α + S/(nβ)), AllGather and ReduceScatter (n−1)(α +
// S/(nβ)) with S the nccl-tests size, plus the launch and the closing
// handshake's hop. α is the step's hop and issue cost, β the slowest
// link's rate (GB/s = 10³ bytes/µs).
func ringAlphaBeta(cl Cluster, coll algorithms.Collective, n, blocks int, bytes int64) float64 {
	m := cl.Model
	alpha, beta := m.SignalHopUs, min(m.GroupRate(cl.NVLink.GBps, blocks), cl.NVLink.GBps*m.LinkEfficiency)
	if cl.Nodes > 1 {
		alpha, beta = cl.NIC.LatencyUs, min(beta, cl.NIC.Gbps/8)
	}
	hop := alpha
	alpha += m.OpUs + m.OperandUs
	steps := float64(n - 1)
	if coll == algorithms.AllReduce {
		steps *= 2
	}
	// The last step only copies (reduces, for ReduceScatter) locally.
	last := 2.0
	if coll == algorithms.ReduceScatter {
		last = 3
	}
	local := m.OpUs + last*float64(bytes)/float64(n)/(cl.HBMGBps*1e3)
	return m.LaunchUs + m.BlockUs*float64(blocks) + hop + steps*(alpha+float64(bytes)/float64(n)/(beta*1e3)) + local
}

func TestRingMatchesAlphaBeta(t *testing.T) {
	blocks := algorithms.DefaultConfig(0, 2, SMs, true).HB.Blocks
	for _, tc := range []struct {
		nodes, gpus int
		minPerRank  int64 // sizes with at least this many bytes per rank
	}{{1, 2, 0}, {1, 4, 0}, {1, 8, 0}, {2, 8, 4 << 20}, {4, 8, 4 << 20}, {8, 8, 4 << 20}} {
		cl := DGXH100(tc.nodes)
		cl.GPUsPerNode = tc.gpus
		if err := cl.Validate(); err != nil {
			t.Fatal(err)
		}
		n := cl.GPUs()
		for _, coll := range []algorithms.Collective{algorithms.AllReduce, algorithms.AllGather, algorithms.ReduceScatter} {
			for _, b := range Sizes(int64(64*n), int64(n)*(4<<20), 8) {
				if b/int64(n) < tc.minPerRank {
					continue
				}
				row := predict(t, cl, "ring-ref", coll, b)
				want := ringAlphaBeta(cl, coll, n, blocks, row.Bytes)
				// Between nodes the closed form is lockstep (every step pays
				// the NIC's α and β); the plan's ring pays them only on the
				// node-crossing steps, so it is an upper bound, within 10%
				// at 4 MiB per rank.
				lo, hi := -0.05, 0.05
				if tc.nodes > 1 {
					lo, hi = -0.10, 0
				}
				if rel := row.TimeUs/want - 1; rel < lo || rel > hi {
					t.Errorf("%d×%d %v %d B: simulated %.2f µs, α–β %.2f µs (%+.1f%%)", tc.nodes, tc.gpus, coll, row.Bytes, row.TimeUs, want, 100*rel)
				}
			}
		}
	}
}

// TestAllPairsMatchesAlphaBeta: 1PA on one node, LL: the put to n−1 peers
// shares the group's rate (β·LLFactor) and moves 2× the bytes as packets;
// α is the launch, the reduce's issue and operands, and the LL hop or the
// put's issue and operands, whichever is longer (they overlap).
func TestAllPairsMatchesAlphaBeta(t *testing.T) {
	for _, n := range []int{2, 4, 8} {
		cl, _ := Preset("h200x4")
		cl.GPUsPerNode = n
		m := cl.Model
		c := algorithms.DefaultConfig(0, n, SMs, true)
		for _, b := range []int64{8, 1 << 10, 16 << 10, 64 << 10} {
			row := predict(t, cl, "all-pairs", algorithms.AllReduce, b)
			beta := m.GroupRate(cl.NVLink.GBps, c.LLBlocks) * m.LLFactor * 1e3
			issue := m.OpUs + float64(n-1)*m.OperandUs
			alpha := m.LaunchUs + m.BlockUs*float64(c.LLBlocks) + issue + max(m.LLHopUs, issue)
			local := float64(b) * float64(n+1+n-1) / (cl.HBMGBps * 1e3)
			want := alpha + 2*float64(n-1)*float64(b)/beta + local
			if rel := row.TimeUs/want - 1; math.Abs(rel) > 0.03 {
				t.Errorf("1PA n=%d %d B: simulated %.3f µs, α–β %.3f µs (%+.1f%%)", n, b, row.TimeUs, want, 100*rel)
			}
		}
	}
}

// TestSymmetryMatchesFullSimulation: on 2 nodes, the representative run
// (one node's ranks) and the full run of every rank agree.
func TestSymmetryMatchesFullSimulation(t *testing.T) {
	cl := DGXH100(2)
	f, _ := Lookup("ring-ref")
	p, err := NewPredictor(cl, f, algorithms.AllReduce, plan.Float32)
	if err != nil {
		t.Fatal(err)
	}
	if p.Representatives() != 8 {
		t.Fatalf("representatives %d, want 8 (one node)", p.Representatives())
	}
	full := *p
	full.period = full.n
	for r := len(full.choices); r < full.n; r++ {
		cs, err := full.build(r)
		if err != nil {
			t.Fatal(err)
		}
		full.choices = append(full.choices, cs)
	}
	for _, b := range []int64{8 << 10, 16 << 20} {
		a, _, err1 := p.Predict(b)
		w, _, err2 := full.Predict(b)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if math.Abs(a.TimeUs/w.TimeUs-1) > 1e-9 {
			t.Errorf("%d B: representatives %.4f µs, every rank %.4f µs", b, a.TimeUs, w.TimeUs)
		}
	}
}

func TestOversubscriptionSlowsCrossLeafRing(t *testing.T) {
	cl := DGXH100(4)
	cl.Switching = Switching{Kind: FatTree, NodesPerLeaf: 1, Oversubscription: 4}
	if err := cl.Validate(); err != nil {
		t.Fatal(err)
	}
	slow := predict(t, cl, "ring-ref", algorithms.AllReduce, 1<<30)
	cl.Switching.Oversubscription = 1
	fast := predict(t, cl, "ring-ref", algorithms.AllReduce, 1<<30)
	// One ring flow per node crosses leaves: 50 GB/s of its node's
	// 400/4 = 100 GB/s share is not a bottleneck; the NIC is.
	if math.Abs(slow.BusBW/fast.BusBW-1) > 0.01 || fast.BusBW > 50 || fast.BusBW < 45 {
		t.Errorf("busbw oversubscribed %.1f, non-blocking %.1f GB/s: want both near the NIC's 50", slow.BusBW, fast.BusBW)
	}
	cl.Switching.Oversubscription = 16 // 25 GB/s per node: below the NIC
	slower := predict(t, cl, "ring-ref", algorithms.AllReduce, 1<<30)
	if slower.BusBW > 25.5 || slower.BusBW < 22 {
		t.Errorf("busbw with a 16:1 spine %.1f GB/s, want about 25", slower.BusBW)
	}
}

func TestClusterRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := DGXH100(128)
	want.Switching = Switching{Kind: FatTree, NodesPerLeaf: 16, Oversubscription: 2, HopLatencyUs: 0.5}
	if err := want.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{"yaml", "json"} {
		b, err := want.Marshal(ext == "json")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "c."+ext)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReadCluster(path)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s round trip (-want +got):\n%s", ext, d)
		}
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("nodes: 2\ngpus_per_node: 8\nnvlink: {gbps: 478}\nhbm_gbps: 3000\nnic: {count: 8, gbps: 400}\nswitching: {kind: torus}\n"), 0o644)
	if _, err := ReadCluster(bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("switching torus: %v, want ErrInvalid", err)
	}
	os.WriteFile(bad, []byte("nodes: 2\nbogus: 1\n"), 0o644)
	if _, err := ReadCluster(bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown field: %v, want ErrInvalid", err)
	}
}

func FuzzReadCluster(f *testing.F) {
	b, _ := DGXH100(4).Marshal(false)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "c.yaml")
		os.WriteFile(path, data, 0o644)
		c, err := ReadCluster(path)
		if err == nil && (c.GPUs() < 1 || c.GPUs() > MaxGPUs || c.Switching.Oversubscription < 1) {
			t.Errorf("accepted an invalid cluster: %+v", c)
		}
	})
}

// TestSymmetryPerChoice: one node's ranks represent the cluster only for
// a plan that is translation-symmetric and a size whose chunks are all of
// one size. On 2 nodes the bounded family's trees run every rank and its
// rings one node; a ring AllReduce of 8 bytes (empty chunks) runs every
// rank and equals that full run, and on 16,384 GPUs it is refused with
// ErrNotSimulated rather than computed from a node that does not
// represent the others.
func TestSymmetryPerChoice(t *testing.T) {
	cases := []struct {
		family string
		bytes  int64
		sim    int
	}{
		{"bounded", 8, 16},         // tree LL
		{"bounded", 512 << 10, 16}, // tree HB
		{"bounded", 64 << 20, 8},   // ring HB
		{"ring-ref", 8, 16},        // 2 elements: 14 empty chunks
		{"ring-ref", 16 << 20, 8},
	}
	for _, k := range cases {
		f, err := Lookup(k.family)
		if err != nil {
			t.Fatal(err)
		}
		p, err := NewPredictor(DGXH100(2), f, algorithms.AllReduce, plan.Float32)
		if err != nil {
			t.Fatal(err)
		}
		row, _, err := p.Predict(k.bytes)
		if err != nil {
			t.Fatal(err)
		}
		if row.Simulated != k.sim {
			t.Errorf("%s %d B (%s): %d ranks simulated, want %d", k.family, k.bytes, row.Plan, row.Simulated, k.sim)
		}
		full := *p
		full.period = full.n
		full.choices = nil
		for r := 0; r < full.n; r++ {
			cs, err := full.build(r)
			if err != nil {
				t.Fatal(err)
			}
			full.choices = append(full.choices, cs)
		}
		w, _, err := full.Predict(k.bytes)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(row.TimeUs/w.TimeUs-1) > 1e-9 {
			t.Errorf("%s %d B: %.4f µs with %d ranks, %.4f µs with every rank", k.family, k.bytes, row.TimeUs, row.Simulated, w.TimeUs)
		}
	}
	f, _ := Lookup("ring-ref")
	p, err := NewPredictor(DGXH100(2048), f, algorithms.AllReduce, plan.Float32)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Predict(8); !errors.Is(err, ErrNotSimulated) {
		t.Errorf("ring-ref, 8 B on 16,384 GPUs: error %v, want ErrNotSimulated", err)
	}
}

// TestTreeRingSwitch: the tree→ring switch of BoundedPlans' AllReduce
// (algorithms.TreeMaxBytes, a table from `weft sim`, docs/scale.md) is
// where this simulator puts it, for the entries up to 128 GPUs (cheap to
// simulate): at 0.8× the switch the forced tree is faster than the forced
// ring, at 1.25× the ring is.
func TestTreeRingSwitch(t *testing.T) {
	for _, gpus := range []int{16, 32, 64, 128} {
		sw := algorithms.TreeMaxBytes(gpus)
		for _, k := range []struct {
			bytes      int64
			treeFaster bool
		}{{sw * 4 / 5 / 4096 * 4096, true}, {sw * 5 / 4 / 4096 * 4096, false}} {
			tree := predict(t, DGXH100(gpus/8), "tree", algorithms.AllReduce, k.bytes)
			ring := predict(t, DGXH100(gpus/8), "ring", algorithms.AllReduce, k.bytes)
			if (tree.TimeUs < ring.TimeUs) != k.treeFaster {
				t.Errorf("%d GPUs, %d bytes (switch at %d): tree %.1f µs (%s), ring %.1f µs (%s); want the tree faster: %v",
					gpus, k.bytes, sw, tree.TimeUs, tree.Plan, ring.TimeUs, ring.Plan, k.treeFaster)
			}
		}
	}
}
