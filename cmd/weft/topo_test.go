package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/sysnccl"
	"github.com/weftccl/weft/topology"
)

func runTopoCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	resetTopoFlags()
	defer resetTopoFlags()
	var out, errOut bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetErr(&errOut)
	rootCmd.SetArgs(append([]string{"topo"}, args...))
	err := rootCmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// resetTopoFlags restores every topo flag to its default: cobra keeps
// values between Execute calls.
func resetTopoFlags() {
	topoCmd.Flags().VisitAll(func(fl *pflag.Flag) {
		fl.Value.Set(fl.DefValue)
		fl.Changed = false
	})
}

func TestTopoFixtureFormats(t *testing.T) {
	tests := []struct {
		format string
		want   []string
	}{
		{"text", []string{"GPU0  X     NV18  NV18  NV18", "NV#  = Connection traversing a bonded set of # NVLinks", "sysfs fixture:h200x4"}},
		{"xml", []string{`<system version="1" name="weft:h200x4">`, `<nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/>`}},
		{"dot", []string{`graph "weft topology: h200x4" {`, `"gpu0" -- "nvs0" [color="#76b900"`}},
		{"svg", []string{`<svg xmlns="http://www.w3.org/2000/svg"`, "NVSwitch NVS0"}},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			out, _, err := runTopoCmd(t, "--fixture", "h200x4", "--format", tt.format)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q", w)
				}
			}
		})
	}
}

func TestTopoJSON(t *testing.T) {
	out, _, err := runTopoCmd(t, "--fixture", "cpu-only", "-f", "json")
	if err != nil {
		t.Fatal(err)
	}
	var s topology.System
	d := json.NewDecoder(strings.NewReader(out))
	d.DisallowUnknownFields()
	if err := d.Decode(&s); err != nil {
		t.Fatal(err)
	}
	if s.SysfsRoot != "fixture:cpu-only" || len(s.GPUs) != 0 || len(s.NICs) != 1 || !strings.HasPrefix(s.Notes[0], "no GPU found") {
		t.Errorf("root %q, %d GPUs, %d NICs, notes %q", s.SysfsRoot, len(s.GPUs), len(s.NICs), s.Notes)
	}
}

func TestTopoBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--format", "yaml"}, {"--fixture", "nope"}, {"--fixture", "h200x4", "--sysfs-root", "/sys"}} {
		_, _, err := runTopoCmd(t, args...)
		if exitCode(err) != 1+int(sysnccl.ResultOf(fmt.Errorf("%w", hal.ErrInvalidArgument))) {
			t.Errorf("%v: error %v, want an invalid-argument exit code", args, err)
		}
	}
}

// fakeMeter returns bandwidth 10*a+b so that the matrix can be checked.
type fakeMeter struct{ names []string }

func (f fakeMeter) Devices() []string { return f.names }
func (f fakeMeter) Close() error      { return nil }
func (f fakeMeter) Measure(_ context.Context, a, b int) topology.MeasuredPair {
	if a == 2 && b == 0 {
		return topology.MeasuredPair{Error: "link down"}
	}
	return topology.MeasuredPair{GBps: float64(10*a + b), LatencyUS: float64(a + b)}
}

func TestTopoRunMeter(t *testing.T) {
	m := topoRunMeter(context.Background(), fakeMeter{names: []string{"gpu0", "gpu1", "gpu2"}}, &bytes.Buffer{})
	want := []topology.MeasuredPair{
		{A: "gpu0", B: "gpu1", GBps: 1, LatencyUS: 1}, {A: "gpu0", B: "gpu2", GBps: 2, LatencyUS: 2},
		{A: "gpu1", B: "gpu0", GBps: 10, LatencyUS: 1}, {A: "gpu1", B: "gpu2", GBps: 12, LatencyUS: 3},
		{A: "gpu2", B: "gpu0", Error: "link down"}, {A: "gpu2", B: "gpu1", GBps: 21, LatencyUS: 3},
	}
	if diff := cmp.Diff(want, m.Pairs); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	m.Backend, m.Bytes, m.Iterations, m.Blocks = "fake", 1<<20, 1, 1
	var b bytes.Buffer
	topoWriteMeasurement(&b, &topology.System{Measured: m})
	for _, w := range []string{"GPU1                10.0   X     12.0", "GPU2                error  21.0", "GPU2 → GPU0: link down"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("measurement output lacks %q:\n%s", w, b.String())
		}
	}
}

// TestTopoMeasureHost runs the real measurement path on the CPU reference
// backend: two hal/host devices, channels setup, plan execution.
func TestTopoMeasureHost(t *testing.T) {
	out, errOut, err := runTopoCmd(t, "--fixture", "cpu-only", "--measure")
	if err != nil || !strings.Contains(errOut, "--measure ignored") || strings.Contains(out, "Measured put") {
		t.Fatalf("fixture with --measure: %v, stderr %q", err, errOut)
	}
	sys := &topology.System{}
	m, why := topoMeasure(context.Background(), sys, topoMeasureOptions{backend: "host", size: "1M", iters: 2, blocks: 2}, &bytes.Buffer{})
	if m == nil {
		t.Fatalf("no measurement: %s", why)
	}
	if len(m.Pairs) != 2 {
		t.Fatalf("pairs = %+v, want 2", m.Pairs)
	}
	for _, p := range m.Pairs {
		if p.Error != "" || p.GBps <= 0 || p.LatencyUS <= 0 {
			t.Errorf("pair %+v: want a positive bandwidth and latency", p)
		}
	}
}

func TestTopoBackendChoice(t *testing.T) {
	name, why := topoBackend("no-such-backend")
	if name != "" || !strings.Contains(why, "unknown HAL backend") {
		t.Errorf("topoBackend(unknown) = %q, %q", name, why)
	}
	if name, _ := topoBackend("host"); name != "host" {
		t.Errorf("topoBackend(host) = %q", name)
	}
}
