package archcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// xgmiBudget is issue 10's limit on hal/xgmi (Go and device header): the
// porting proof is that a second vendor fits in fewer lines than MSCCL++'s
// AMD port took (about 1,300).
const xgmiBudget = 1300

// TestLayering checks weft's own tree: it prints every backend's line
// count (go test -v) and fails on any import that breaks the layering, or
// if hal/xgmi outgrows its budget.
func TestLayering(t *testing.T) {
	g, err := Load(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	backends := g.Backends()
	if len(backends) < 2 {
		t.Fatalf("found %d backends under hal/ (%v): the walk is broken", len(backends), backends)
	}
	t.Logf("%-14s %6s %7s %6s  %s", "backend", "go", "device", "total", "runtime packages it builds on")
	for _, b := range backends {
		l, err := g.Count(b)
		if err != nil {
			t.Fatal(err)
		}
		var rt []string
		for _, d := range g.Deps[b] {
			if rel := strings.TrimPrefix(d, g.Module+"/"); strings.HasPrefix(rel, "internal/") {
				rt = append(rt, rel)
			}
		}
		t.Logf("%-14s %6d %7d %6d  %s", l.Package, l.Go, l.Device, l.Total(), strings.Join(rt, " "))
		if l.Package == "hal/xgmi" && l.Total() > xgmiBudget {
			t.Errorf("hal/xgmi is %d lines (Go %d + device %d), over its budget of %d", l.Total(), l.Go, l.Device, xgmiBudget)
		}
	}
	for _, v := range g.Violations() {
		t.Error(v)
	}
}

// writeModule lays out a module from a map of relative path -> contents.
func writeModule(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for rel, src := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestViolationsFound builds a small module that breaks every rule once,
// directly and through an intermediate package, and checks that each
// breach is reported with its chain and nothing else is.
func TestViolationsFound(t *testing.T) {
	root := writeModule(t, map[string]string{
		"go.mod":                  "module example.com/m\n\ngo 1.22\n",
		"hal/hal.go":              "package hal\n",
		"hal/plan/plan.go":        "package plan\nimport _ \"example.com/m/hal\"\n",
		"hal/a/a.go":              "package a\nimport _ \"example.com/m/internal/shared\"\n",
		"hal/a/device/weft_hal.h": "// one\n// two\n",
		"hal/b/b.go":              "package b\n\nimport _ \"example.com/m/channels\"\n",
		"hal/c/c.go":              "package c\nimport _ \"example.com/m/hal/plan\"\n",
		"hal/c/c_test.go":         "package c\nimport _ \"example.com/m/hal/a\"\n",
		"internal/shared/s.go":    "package shared\nimport _ \"example.com/m/hal/c\"\n",
		"channels/ch.go":          "package channels\nimport _ \"example.com/m/hal\"\n",
		"algorithms/al.go":        "package algorithms\nimport _ \"example.com/m/internal/shared\"\n",
		"topology/topo.go":        "package topology\nimport _ \"example.com/m/hal/b\"\n",
		"testdata/x/x.go":         "package x\nimport _ \"example.com/m/hal/a\"\n",
		"backends/b.go":           "package backends\nimport (\n_ \"example.com/m/hal/a\"\n_ \"example.com/m/hal/b\"\n_ \"example.com/m/hal/c\"\n)\n",
	})
	g, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"example.com/m/hal/a", "example.com/m/hal/b", "example.com/m/hal/c"}, g.Backends()); diff != "" {
		t.Errorf("backends (-want +got):\n%s", diff)
	}
	want := []string{
		"algorithms imports a backend: algorithms -> internal/shared -> hal/c",
		"backend imports another backend or an upper layer: hal/a -> internal/shared -> hal/c",
		"backend imports another backend or an upper layer: hal/b -> channels",
		"names a backend outside the backends list: internal/shared -> hal/c",
		"topology imports a backend: topology -> hal/b",
	}
	if diff := cmp.Diff(want, g.Violations()); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
	l, err := g.Count("example.com/m/hal/a")
	if err != nil {
		t.Fatal(err)
	}
	if l.Go != 2 || l.Device != 2 || l.Total() != 4 {
		t.Errorf("hal/a counted %+v, want Go 2 Device 2", l)
	}
}

// imp is a Go file of package pkg that imports each of paths (module
// example.com/m) for its side effects only: a package's import edges for
// the rule tests.
func imp(pkg string, paths ...string) string {
	s := "package " + pkg + "\nimport (\n"
	for _, p := range paths {
		s += "\t_ \"example.com/m/" + p + "\"\n"
	}
	return s + ")\n"
}

// TestContractRulesFound builds a module that breaks each rule about the
// bindings, the error kinds and the backends list once (a binding reaching
// hal directly and through internal/env, error kinds importing the module,
// a list missing a backend, a binary without the list, a library naming a
// backend) beside packages that keep them (a clean binding, a binary that
// imports the list, a binary that needs no HAL, test support that only
// tests import, a test file naming a backend), and checks that exactly the
// breaches are reported.
func TestContractRulesFound(t *testing.T) {
	root := writeModule(t, map[string]string{
		"go.mod":                      "module example.com/m\n\ngo 1.22\n",
		"weft.go":                     imp("m", "hal", "hal/y"),
		"hal/hal.go":                  imp("hal", "hal/plan", "internal/errkind"),
		"hal/plan/plan.go":            "package plan\n",
		"hal/x/x.go":                  imp("x", "hal", "internal/cuda"),
		"hal/y/y.go":                  imp("y", "hal", "internal/ibverbs"),
		"internal/errkind/errkind.go": imp("errkind", "internal/half"),
		"internal/half/half.go":       "package half\n",
		"internal/env/env.go":         imp("env", "hal"),
		"internal/cuda/cuda.go":       imp("cuda", "internal/errkind", "internal/env"),
		"internal/hip/hip.go":         imp("hip", "hal/plan"),
		"internal/ibverbs/ibverbs.go": imp("ibverbs", "internal/errkind"),
		"internal/sysnccl/sysnccl.go": imp("sysnccl", "internal/errkind"),
		"topology/sysfs/sysfs.go":     imp("sysfs", "hal"),
		"backends/backends.go":        imp("backends", "hal/x"),
		"cmd/good/main.go":            "package main\nimport (\n_ \"example.com/m\"\n_ \"example.com/m/backends\"\n)\n",
		"cmd/good/main_test.go":       imp("main", "hal/y"),
		"cmd/tool/main.go":            imp("main", "hal"),
		"cmd/gen/main.go":             imp("main", "internal/half"),
		"support/fake/fake.go":        imp("fake", "hal/x"),
	})
	g, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"backends list misses a backend: backends -> hal/y",
		`binary does not import the backends list: cmd/tool (import _ "example.com/m/backends")`,
		"binding imports a hal package: internal/cuda -> internal/env -> hal",
		"binding imports a hal package: internal/hip -> hal/plan",
		"binding imports a hal package: topology/sysfs -> hal",
		"error kinds import the module: internal/errkind -> internal/half",
		"names a backend outside the backends list: example.com/m -> hal/y",
	}
	if diff := cmp.Diff(want, g.Violations()); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}

	// Without a backends list at all, that is the one breach reported.
	root = writeModule(t, map[string]string{
		"go.mod":     "module example.com/m\n",
		"hal/hal.go": "package hal\n",
		"hal/y/y.go": imp("y", "hal"),
	})
	if g, err = Load(root); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"no backends list: backends/ must import every backend"}, g.Violations()); diff != "" {
		t.Errorf("module without a list: violations (-want +got):\n%s", diff)
	}
}

func TestLoadErrors(t *testing.T) {
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "go.mod") {
		t.Errorf("no go.mod: err = %v, want one naming go.mod", err)
	}
	root := writeModule(t, map[string]string{"go.mod": "module example.com/m\n", "bad/b.go": "package b\nimport (\n"})
	if _, err := Load(root); err == nil || !strings.Contains(err.Error(), "b.go") {
		t.Errorf("broken file: err = %v, want one naming b.go", err)
	}
}

// TestNetCoreRules builds a module whose network core imports a backend
// and is imported by a package that is not a network backend, and checks
// that both breaches are reported, and that the core is not listed as a
// backend.
func TestNetCoreRules(t *testing.T) {
	root := writeModule(t, map[string]string{
		"go.mod":                 "module example.com/m\n",
		"weft.go":                imp("m", "channels"),
		"hal/hal.go":             "package hal\n",
		"hal/netcore/core.go":    imp("netcore", "hal", "hal/pcie"),
		"hal/netcore/sub/sub.go": imp("sub", "hal/netcore"),
		"hal/socket/socket.go":   imp("socket", "hal", "hal/netcore"),
		"hal/pcie/pcie.go":       imp("pcie", "hal"),
		"channels/channels.go":   imp("channels", "hal/netcore"),
		"backends/backends.go":   imp("backends", "hal/socket", "hal/pcie"),
		"support/fake/fake.go":   imp("fake", "hal/netcore"),
	})
	g, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"example.com/m/hal/pcie", "example.com/m/hal/socket"}, g.Backends()); diff != "" {
		t.Errorf("backends (-want +got):\n%s", diff)
	}
	want := []string{
		"backend imports another backend or an upper layer: hal/socket -> hal/netcore -> hal/pcie",
		"channels imports a backend: channels -> hal/netcore -> hal/pcie",
		"imports the network core outside the network backends: channels -> hal/netcore",
		"names a backend outside the backends list: hal/netcore -> hal/pcie",
		"network core imports a backend or an upper layer: hal/netcore -> hal/pcie",
	}
	if diff := cmp.Diff(want, g.Violations()); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
}
