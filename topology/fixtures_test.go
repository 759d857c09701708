package topology_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weftccl/weft/topology"
	"github.com/weftccl/weft/topology/fixtures"
	"github.com/weftccl/weft/topology/ncclxml"
	"github.com/weftccl/weft/topology/render"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// discover builds fixture name and discovers it; paths to the temporary
// tree are replaced by "fixture:NAME" in every text, as weft topo does.
func discover(t *testing.T, name string) *topology.System {
	t.Helper()
	dir := t.TempDir()
	fx := fixtures.Build(t, name, dir)
	s, err := topology.Discover(fx.Options())
	if err != nil {
		t.Fatalf("Discover(%s): %v", name, err)
	}
	return s
}

func scrub(out []byte, root string) []byte {
	return bytes.ReplaceAll(out, []byte(root), []byte("fixture"))
}

// TestGolden renders every fixture in every format and compares with
// testdata/<fixture>.<format>; go test -run TestGolden -update rewrites them.
func TestGolden(t *testing.T) {
	formats := []struct {
		ext    string
		render func(*bytes.Buffer, *topology.System) error
	}{
		{"txt", func(b *bytes.Buffer, s *topology.System) error { return render.Text(b, s) }},
		{"json", func(b *bytes.Buffer, s *topology.System) error { return render.JSON(b, s) }},
		{"xml", func(b *bytes.Buffer, s *topology.System) error { return ncclxml.Write(b, s) }},
		{"dot", func(b *bytes.Buffer, s *topology.System) error { return render.DOT(b, s) }},
		{"svg", func(b *bytes.Buffer, s *topology.System) error { return render.SVG(b, s) }},
	}
	for _, name := range fixtures.Names() {
		t.Run(name, func(t *testing.T) {
			s := discover(t, name)
			root := s.SysfsRoot
			for _, f := range formats {
				var b bytes.Buffer
				if err := f.render(&b, s); err != nil {
					t.Fatalf("%s: %v", f.ext, err)
				}
				got := scrub(b.Bytes(), root)
				file := filepath.Join("testdata", name+"."+f.ext)
				if *update {
					if err := os.WriteFile(file, got, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(file)
				if err != nil {
					t.Fatalf("%v (run go test -run TestGolden -update to create it)", err)
				}
				if diff := cmp.Diff(string(want), string(got)); diff != "" {
					t.Errorf("%s (-want +got):\n%s", file, diff)
				}
			}
		})
	}
}

// cell is the path matrix entry between two devices.
func cell(t *testing.T, s *topology.System, a, b string) string {
	t.Helper()
	p, ok := s.Path(a, b)
	if !ok {
		t.Fatalf("no path %s–%s", a, b)
	}
	return render.Cell(s, p)
}

// TestPathClasses checks, independently of the golden files, the entries
// the fixtures were built to show.
func TestPathClasses(t *testing.T) {
	tests := []struct {
		fixture string
		a, b    string
		want    string
	}{
		// 4×H200 host: NV18 between every pair, as nvidia-smi topo -m.
		{"h200x4", "gpu0", "gpu1", "NV18"},
		{"h200x4", "gpu0", "gpu3", "NV18"},
		{"h200x4", "gpu2", "gpu3", "NV18"},
		{"h200x4", "gpu0", "nic0", "NODE"},
		{"h200x4", "gpu3", "nic0", "SYS"},
		// DGX H100: NV18 through four NVSwitches; each GPU shares a switch
		// with its NIC; other NICs of the socket are NODE, of the other SYS.
		{"dgx-h100", "gpu0", "gpu7", "NV18"},
		{"dgx-h100", "gpu0", "nic0", "PIX"},
		{"dgx-h100", "gpu0", "nic1", "NODE"},
		{"dgx-h100", "gpu0", "nic4", "SYS"},
		{"dgx-h100", "nic6", "nic7", "NODE"},
		// MI300X: one xGMI link between every pair.
		{"mi300x", "gpu0", "gpu7", "XG1"},
		{"mi300x", "gpu5", "nic5", "PIX"},
		{"mi300x", "gpu5", "nic1", "SYS"},
		// PCIe workstation: PIX within a switch, PHB across the root.
		{"pcie-workstation", "gpu0", "gpu1", "PIX"},
		{"pcie-workstation", "gpu2", "gpu3", "PIX"},
		{"pcie-workstation", "gpu1", "gpu2", "PHB"},
		{"pcie-workstation", "gpu0", "nic0", "PHB"},
	}
	systems := map[string]*topology.System{}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s-%s", tt.fixture, tt.a, tt.b), func(t *testing.T) {
			s, ok := systems[tt.fixture]
			if !ok {
				s = discover(t, tt.fixture)
				systems[tt.fixture] = s
			}
			if got := cell(t, s, tt.a, tt.b); got != tt.want {
				t.Errorf("path %s–%s = %s, want %s", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

// TestPathDetails checks bandwidth, hops, route and P2P of selected paths.
func TestPathDetails(t *testing.T) {
	tests := []struct {
		fixture, a, b string
		want          topology.Path
	}{
		{"h200x4", "gpu0", "gpu1", topology.Path{A: "gpu0", B: "gpu1", Class: topology.PathNVL, Hops: 2,
			GBps: 478.116, LinkCount: 18, Via: []string{"nvs0"},
			P2P: &topology.P2P{Read: true, Write: true, Atomics: true, Source: "nvml"}}},
		{"dgx-h100", "gpu0", "nic0", topology.Path{A: "gpu0", B: "nic0", Class: topology.PathPIX, Hops: 2,
			GBps: 63.015, Via: []string{"sw1"}}},
		{"dgx-h100", "gpu0", "nic4", topology.Path{A: "gpu0", B: "nic4", Class: topology.PathSYS, Hops: 7,
			GBps: 22, Via: []string{"sw1", "hb2", "numa0", "numa1", "hb6", "sw5"}}},
		{"mi300x", "gpu0", "gpu1", topology.Path{A: "gpu0", B: "gpu1", Class: topology.PathNVL, Hops: 1,
			GBps: 64, LinkCount: 1, Via: []string{},
			P2P: &topology.P2P{Read: true, Write: true, Atomics: true, Source: "amdsmi"}}},
		{"pcie-workstation", "gpu0", "gpu2", topology.Path{A: "gpu0", B: "gpu2", Class: topology.PathPHB, Hops: 4,
			GBps: 15.754, Via: []string{"sw0", "hb0", "sw1"},
			P2P: &topology.P2P{Source: "nvml", Reason: "read: IOH topology not supported"}}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture+"/"+tt.a+"-"+tt.b, func(t *testing.T) {
			s := discover(t, tt.fixture)
			got, ok := s.Path(tt.a, tt.b)
			if !ok {
				t.Fatalf("no path")
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("path (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCPUOnly is the acceptance case for a machine without GPUs: CPUs,
// NUMA nodes, PCI devices and NICs are reported, and the notes say why no
// GPU was found, naming each missing source.
func TestCPUOnly(t *testing.T) {
	s := discover(t, "cpu-only")
	if len(s.GPUs) != 0 {
		t.Fatalf("GPUs = %v, want none", s.GPUs)
	}
	got := struct {
		NUMA, PCI int
		NICs      []string
		CPUs      string
	}{len(s.NUMANodes), len(s.PCIDevices), nil, s.NUMANodes[0].CPUs}
	for _, n := range s.NICs {
		got.NICs = append(got.NICs, n.Name)
	}
	want := struct {
		NUMA, PCI int
		NICs      []string
		CPUs      string
	}{1, 6, []string{"eno1"}, "0-15"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(s.Notes) == 0 || !strings.HasPrefix(s.Notes[0], "no GPU found: ") {
		t.Fatalf("notes = %q, want a first note explaining the missing GPU", s.Notes)
	}
	for _, want := range []string{"6 PCI functions", "nvml: ", "libnvidia-ml.so.1 not found", "kfd: ", "amdgpu driver not loaded", "amdsmi: "} {
		if !strings.Contains(s.Notes[0], want) {
			t.Errorf("no-GPU note lacks %q: %s", want, s.Notes[0])
		}
	}
}

// TestJSONSchema validates every fixture's JSON against the documented
// schema, docs/topology/schema.json.
func TestJSONSchema(t *testing.T) {
	raw, err := os.ReadFile("../docs/topology/schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("schema: %v", err)
	}
	for _, name := range fixtures.Names() {
		t.Run(name, func(t *testing.T) {
			s := discover(t, name)
			if name == "h200x4" {
				// Cover the optional measurement too.
				s.Measured = &topology.Measurement{Backend: "nvlink", Bytes: 1 << 28, Iterations: 10, Blocks: 32,
					Pairs: []topology.MeasuredPair{{A: "gpu0", B: "gpu1", GBps: 350.5, LatencyUS: 9.5}, {A: "gpu1", B: "gpu0", Error: "x"}}}
			}
			var b bytes.Buffer
			if err := render.JSON(&b, s); err != nil {
				t.Fatal(err)
			}
			var doc any
			if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			if errs := validate(schema, schema, doc, "$"); len(errs) > 0 {
				t.Errorf("JSON does not match docs/topology/schema.json:\n%s", strings.Join(errs, "\n"))
			}
		})
	}
}

// TestValidatorRejects makes sure the schema check can fail.
func TestValidatorRejects(t *testing.T) {
	raw, err := os.ReadFile("../docs/topology/schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	json.Unmarshal(raw, &schema)
	s := discover(t, "h200x4")
	var b bytes.Buffer
	render.JSON(&b, s)
	tests := []struct {
		name   string
		mutate func(map[string]any)
		want   string
	}{
		{"unknown field", func(d map[string]any) { d["extra"] = 1 }, "$.extra: not in the schema"},
		{"missing field", func(d map[string]any) { delete(d, "paths") }, "$: missing required paths"},
		{"bad enum", func(d map[string]any) { d["paths"].([]any)[0].(map[string]any)["class"] = "FAST" }, `$.paths[0].class: "FAST" not in enum`},
		{"bad type", func(d map[string]any) { d["gpus"].([]any)[0].(map[string]any)["index"] = "0" }, "$.gpus[0].index: want integer, got string"},
		{"negative", func(d map[string]any) { d["links"].([]any)[0].(map[string]any)["gbps"] = -1.0 }, "$.links[0].gbps: -1 below minimum 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var doc map[string]any
			json.Unmarshal(b.Bytes(), &doc)
			tt.mutate(doc)
			errs := validate(schema, schema, doc, "$")
			if !containsString(errs, tt.want) {
				t.Errorf("errors %q do not include %q", errs, tt.want)
			}
		})
	}
}

func containsString(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
