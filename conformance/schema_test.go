package conformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/conformance"
	"github.com/weftccl/weft/internal/jsonschema"
)

const schemaPath = "../docs/conformance/schema.json"

func loadJSON(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func loadSchema(t *testing.T) any {
	t.Helper()
	b, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	return loadJSON(t, b)
}

// TestReportSchema validates a report of a real run, and the committed
// example reports, against the documented schema; and checks that the
// validator rejects what the schema forbids.
func TestReportSchema(t *testing.T) {
	schema := loadSchema(t)
	rep, err := conformance.Run(context.Background(), conformance.Options{Backend: "host", Ranks: 2, Quick: true, NoProcesses: true,
		Run: []string{"device/", "memory-mapped/put-signal-wait", "memory-mapped/signal-latency", "port-mapped/"}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if errs := jsonschema.Validate(schema, loadJSON(t, buf.Bytes())); len(errs) > 0 {
		t.Errorf("report does not follow %s:\n%s", schemaPath, strings.Join(errs, "\n"))
	}
	examples, _ := filepath.Glob("../docs/conformance/*.json")
	for _, f := range examples {
		if filepath.Base(f) == "schema.json" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if errs := jsonschema.Validate(schema, loadJSON(t, b)); len(errs) > 0 {
			t.Errorf("%s does not follow the schema:\n%s", f, strings.Join(errs, "\n"))
		}
	}

	// The validator must be able to fail.
	bad := loadJSON(t, buf.Bytes()).(map[string]any)
	p0 := bad["platforms"].([]any)[0].(map[string]any)
	r0 := p0["results"].([]any)[0].(map[string]any)
	r0["status"] = "passed"
	delete(p0, "backend")
	bad["extra"] = 1
	got := jsonschema.Validate(schema, bad)
	want := []string{
		`$: property "extra" is not in the schema`,
		`$.platforms[0]: missing "backend"`,
		`$.platforms[0].results[0].status: passed is not one of [pass fail not-supported quality-warning]`,
	}
	sort.Strings(got)
	sort.Strings(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("validator findings (-want +got):\n%s", diff)
	}
}

// TestCLI builds the weft command and runs `weft conformance --hal host`,
// as CI and vendors do: it must pass, exit 0 and write reports that follow
// the schema.
func TestCLI(t *testing.T) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		t.Skipf("no go tool to build the weft command: %v", err)
	}
	dir := t.TempDir()
	weft := filepath.Join(dir, "weft")
	build := exec.Command(goTool, "build", "-o", weft, "../cmd/weft")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/weft: %v\n%s", err, out)
	}
	js, md := filepath.Join(dir, "report.json"), filepath.Join(dir, "report.md")
	cmd := exec.Command(weft, "conformance", "--hal", "host", "--quick", "--ranks", "2", "--json", js, "--md", md)
	out, err := cmd.CombinedOutput()
	t.Logf("weft conformance --hal host:\n%s", out)
	if err != nil {
		t.Fatalf("weft conformance --hal host: %v", err)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if errs := jsonschema.Validate(loadSchema(t), loadJSON(t, b)); len(errs) > 0 {
		t.Errorf("report.json does not follow the schema:\n%s", strings.Join(errs, "\n"))
	}
	m, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# weft conformance report", "## Backend `host`", "`memory-mapped/put-signal-wait` | pass"} {
		if !bytes.Contains(m, []byte(want)) {
			t.Errorf("report.md lacks %q", want)
		}
	}

	// An unavailable backend named in WEFT_REQUIRE fails the run.
	cmd = exec.Command(weft, "conformance", "--hal", "nvlink", "--run", "device/info")
	cmd.Env = append(os.Environ(), "WEFT_REQUIRE=nvlink", "WEFT_CUDA_LIB=/nonexistent/libcuda.so.1")
	out, err = cmd.CombinedOutput()
	if err == nil {
		t.Errorf("weft conformance --hal nvlink with WEFT_REQUIRE=nvlink and no driver passed:\n%s", out)
	} else if !bytes.Contains(out, []byte("required by WEFT_REQUIRE")) {
		t.Errorf("the failure does not say the backend is required:\n%s", out)
	}
}
