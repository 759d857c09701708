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

	"github.com/weftccl/weft/internal/jsonschema"
	"github.com/weftccl/weft/topology"
	"github.com/weftccl/weft/topology/fixtures"
	"github.com/weftccl/weft/topology/ncclxml"
	"github.com/weftccl/weft/topology/nvml"
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
		{"h200x4", "gpu0", "nic0", "PHB"},
		{"h200x4", "gpu3", "nic0", "PHB"},
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
			if errs := jsonschema.Validate(schema, doc); len(errs) > 0 {
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
		{"unknown field", func(d map[string]any) { d["extra"] = 1 }, `$: property "extra" is not in the schema`},
		{"missing field", func(d map[string]any) { delete(d, "paths") }, `$: missing "paths"`},
		{"bad enum", func(d map[string]any) { d["paths"].([]any)[0].(map[string]any)["class"] = "FAST" }, "$.paths[0].class: FAST is not one of [LOC NVL NVB C2C PIX PXB PHB NODE SYS NET]"},
		{"bad type", func(d map[string]any) { d["gpus"].([]any)[0].(map[string]any)["index"] = "0" }, "$.gpus[0].index: string is not a JSON integer"},
		{"negative", func(d map[string]any) { d["links"].([]any)[0].(map[string]any)["gbps"] = -1.0 }, "$.links[0].gbps: -1 below the minimum 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var doc map[string]any
			json.Unmarshal(b.Bytes(), &doc)
			tt.mutate(doc)
			errs := jsonschema.Validate(schema, doc)
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

// TestNCCLXML parses what weft writes with NCCL's grammar and checks what
// NCCL reads from it: CPUs with the attributes ncclTopoAddCpu requires,
// every GPU with dev, sm and rank, its NVLink count and target class, and
// every NIC's net.
func TestNCCLXML(t *testing.T) {
	type gpu struct {
		Busid, Dev, SM string
		Links          int
		TClass         string
	}
	tests := []struct {
		fixture string
		cpus    int
		gpus    []gpu
		nets    []string
	}{
		{"h200x4", 1, []gpu{{"0000:00:06.0", "0", "90", 18, "0x068000"}, {"0000:00:07.0", "1", "90", 18, "0x068000"},
			{"0000:00:08.0", "2", "90", 18, "0x068000"}, {"0000:00:09.0", "3", "90", 18, "0x068000"}}, []string{"eth0"}},
		{"pcie-workstation", 1, []gpu{{"0000:03:00.0", "0", "86", 0, ""}, {"0000:04:00.0", "1", "86", 0, ""},
			{"0000:23:00.0", "2", "86", 0, ""}, {"0000:24:00.0", "3", "86", 0, ""}}, []string{"enp5s0"}},
		{"cpu-only", 1, nil, []string{"eno1"}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			s := discover(t, tt.fixture)
			var b bytes.Buffer
			if err := ncclxml.Write(&b, s); err != nil {
				t.Fatal(err)
			}
			sys, err := ncclxml.Parse(&b)
			if err != nil {
				t.Fatalf("NCCL's grammar rejects weft's XML: %v\n%s", err, b.String())
			}
			var gpus []gpu
			var nets []string
			cpus := 0
			var walk func(n *ncclxml.Node, busid string)
			walk = func(n *ncclxml.Node, busid string) {
				switch n.Name {
				case "cpu":
					cpus++
					for _, k := range []string{"numaid", "arch", "vendor", "familyid", "modelid"} {
						if _, ok := n.Get(k); !ok {
							t.Errorf("<cpu> lacks %s", k)
						}
					}
				case "pci":
					busid, _ = n.Get("busid")
					for _, k := range []string{"class", "link_speed", "link_width"} {
						if _, ok := n.Get(k); !ok {
							t.Errorf("<pci busid=%s> lacks %s", busid, k)
						}
					}
				case "gpu":
					g := gpu{Busid: busid}
					g.Dev, _ = n.Get("dev")
					g.SM, _ = n.Get("sm")
					for _, l := range n.Subs {
						c, _ := l.Get("count")
						var k int
						fmt.Sscan(c, &k)
						g.Links += k
						g.TClass, _ = l.Get("tclass")
					}
					gpus = append(gpus, g)
				case "net":
					name, _ := n.Get("name")
					nets = append(nets, name)
				}
				for _, c := range n.Subs {
					walk(c, busid)
				}
			}
			walk(sys, "")
			got := struct {
				CPUs int
				GPUs []gpu
				Nets []string
			}{cpus, gpus, nets}
			want := struct {
				CPUs int
				GPUs []gpu
				Nets []string
			}{tt.cpus, tt.gpus, tt.nets}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestMalformedSysfs: a broken attribute file becomes a warning that names
// it; the rest of the machine is still described.
func TestMalformedSysfs(t *testing.T) {
	dir := t.TempDir()
	fx := fixtures.Build(t, "h200x4", dir)
	bad := filepath.Join(dir, "devices", "pci0000:00", "0000:00:08.0", "class")
	if err := os.WriteFile(bad, []byte("not-a-class\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := topology.Discover(fx.Options())
	if err != nil {
		t.Fatal(err)
	}
	named := filepath.Join(dir, "bus", "pci", "devices", "0000:00:08.0", "class")
	if len(s.Warnings) != 1 || !strings.HasPrefix(s.Warnings[0], named+": ") {
		t.Fatalf("warnings = %q, want one naming %s", s.Warnings, named)
	}
	// NVML still reports GPU2; it is kept, attached to its NUMA node.
	if len(s.GPUs) != 4 || s.GPUs[2].Parent != "numa0" {
		t.Errorf("GPUs = %d, GPU2 parent %q; want 4 and numa0", len(s.GPUs), s.GPUs[2].Parent)
	}
}

// TestNVMLAncestorMismatch: when NVML's common ancestor disagrees with the
// PCI model, a note says so (a check for real hosts).
func TestNVMLAncestorMismatch(t *testing.T) {
	fx := fixtures.Build(t, "pcie-workstation", t.TempDir())
	st := fx.NVML.(nvml.Static)
	pairs := append([]nvml.Pair(nil), st.S.Pairs...)
	pairs[0].Ancestor = nvml.AncestorSystem
	st.S.Pairs = pairs
	fx.NVML = st
	s, err := topology.Discover(fx.Options())
	if err != nil {
		t.Fatal(err)
	}
	want := "NVML places the common ancestor of GPU0 and GPU1 at SYS; weft's PCI model says PIX"
	if !containsString(s.Notes, want) {
		t.Errorf("notes %q lack %q", s.Notes, want)
	}
}
