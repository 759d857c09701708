package main

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/hal"
)

// svgSummary parses an SVG file as XML and returns the text of its <text>
// elements and the number of dashed strokes (the baseline's curves).
func svgSummary(t *testing.T, path string) (texts []string, dashed int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := xml.NewDecoder(f)
	inText := false
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s is not valid XML: %v", path, err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			inText = e.Name.Local == "text"
			for _, a := range e.Attr {
				if a.Name.Local == "style" && strings.Contains(a.Value, "stroke-dasharray") {
					dashed++
				}
			}
		case xml.CharData:
			if inText {
				texts = append(texts, strings.TrimSpace(string(e)))
			}
		case xml.EndElement:
			inText = false
		}
	}
	return texts, dashed
}

// TestPlotFromJSON draws the fixture (a `weft bench -J` file of a run
// beside NCCL) and checks the SVG: both series in both legends, axis
// labels, and the title naming collective, type, machine and date.
func TestPlotFromJSON(t *testing.T) {
	r, err := readReport(filepath.Join("testdata", "bench-plot.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "p.svg")
	if err := writePlot(out, r); err != nil {
		t.Fatal(err)
	}
	texts, dashed := svgSummary(t, out)
	count := map[string]int{}
	for _, s := range texts {
		count[s]++
	}
	want := map[string]int{
		"weft": 2, "nccl 2.28.3": 2, // one legend entry per panel
		"all_reduce float sum, out of place":                       2,
		"2 × NVIDIA H100 80GB HBM3 (nvlink), 2026-11-25 10:00 UTC": 2,
		"bus bandwidth (GB/s)":                                     1, "time (µs)": 1, "message size (B)": 2,
		"8": 2, "2K": 2, "128M": 2, // log2 size ticks
	}
	got := map[string]int{}
	for k := range want {
		got[k] = count[k]
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("SVG texts (-want +got):\n%s\nall: %q", d, texts)
	}
	// The baseline's curve is dashed in both panels (line and legend).
	if dashed < 2 {
		t.Errorf("%d dashed strokes, want the baseline's curve in both panels", dashed)
	}

	// Without a baseline: weft alone.
	r.Results = r.Results[:2]
	for i := range r.Results {
		r.Results[i].Baseline = nil
	}
	if err := writePlot(out, r); err != nil {
		t.Fatal(err)
	}
	texts, dashed = svgSummary(t, out)
	if strings.Contains(strings.Join(texts, "|"), "nccl") || dashed != 0 {
		t.Errorf("a run without a baseline draws one: %q, %d dashed", texts, dashed)
	}
}

func TestPlotErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"results": []}`), 0o644)
	if _, err := readReport(bad); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("no results: %v, want ErrInvalidArgument", err)
	}
	os.WriteFile(bad, []byte(`{"results": [`), 0o644)
	if _, err := readReport(bad); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("malformed: %v, want ErrInvalidArgument", err)
	}
	r := &benchReport{Results: []sizeResult{{Size: 8, OutOfPlace: measurement{TimeUS: -1}}}}
	if err := writePlot(filepath.Join(dir, "x.svg"), r); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("nothing measured: %v, want ErrInvalidArgument", err)
	}
}

// TestPlotFromCbench draws the C-ABI acceptance format (testdata: the
// all_gather table of examples/cbench's output, weft's and NCCL's) and
// checks the SVG: one file per collective and type, both series, the
// title with the machine and date given.
func TestPlotFromCbench(t *testing.T) {
	w, err := readCbench(filepath.Join("testdata", "cbench-weft.log"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := readCbench(filepath.Join("testdata", "cbench-nccl.log"))
	if err != nil {
		t.Fatal(err)
	}
	if w.nranks != 2 || len(w.tables["allgather/float"]) != 6 {
		t.Fatalf("parsed %d ranks, tables %v", w.nranks, w.tables)
	}
	dir := t.TempDir()
	files, err := writeCbenchPlots(dir, cbenchReports(w, b, "nccl", "2 × NVIDIA H100 80GB HBM3 (nvlink)", "2026-11-26"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || filepath.Base(files[0]) != "all_gather-float.svg" {
		t.Fatalf("files %q, want all_gather-float.svg", files)
	}
	texts, dashed := svgSummary(t, files[0])
	joined := strings.Join(texts, "|")
	for _, want := range []string{"weft", "nccl", "all_gather float, out of place", "2 × NVIDIA H100 80GB HBM3 (nvlink), 2026-11-26"} {
		if !strings.Contains(joined, want) {
			t.Errorf("SVG texts lack %q: %q", want, texts)
		}
	}
	if dashed < 2 {
		t.Errorf("%d dashed strokes, want the baseline's curve in both panels", dashed)
	}
	bad := filepath.Join(dir, "bad.log")
	os.WriteFile(bad, []byte("# cbench: 2 ranks\n# allgather\n 8 2 float none -1 x 1 1 0\n"), 0o644)
	if _, err := readCbench(bad); !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("malformed row: %v, want ErrInvalidArgument naming line 3", err)
	}
	os.WriteFile(bad, []byte("no table here\n"), 0o644)
	if _, err := readCbench(bad); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("no table: %v, want ErrInvalidArgument", err)
	}
}
