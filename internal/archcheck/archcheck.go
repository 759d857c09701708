// Package archcheck checks weft's layering rules (architecture.md §1) on the
// source tree and measures what each hardware backend costs in lines:
//
//   - a backend (a package under hal/ other than hal/plan) imports no other
//     backend, and neither channels nor algorithms, directly or through
//     other packages of the module;
//   - channels and algorithms import no backend, directly or indirectly;
//   - topology imports no backend;
//   - the vendor bindings below the contract (internal/cuda, internal/hip,
//     internal/ibverbs, internal/ncclnet, internal/sysnccl, internal/ucx) and topology/sysfs import no hal
//     package (hal, hal/plan, a backend), directly or indirectly: they
//     take the error kinds from the leaf internal/errkind;
//   - internal/errkind imports nothing of the module;
//   - one package, the backends list (backends/), imports the backends,
//     and it imports every one of them; no other package names a backend
//     (test support that only tests import, such as
//     conformance/internal/mutant, excepted, as tests are);
//   - every binary (package main) that uses the HAL imports the backends
//     list directly;
//   - hal/netcore, the pieces the network backends share, is no backend:
//     it imports no backend and no upper layer, and only the network
//     backends (NetBackends) import it (its own subpackages and test
//     support excepted).
//
// Only non-test Go files count: tests may wire several layers together.
// Build constraints are ignored (every file of a package is read), so a
// forbidden import behind a cgo or OS tag is still found. The test in this
// package prints the table of backends and their line counts and fails on
// any violation; `weft`'s porting guide (docs/porting.md) quotes it.
package archcheck

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Graph is the import graph of a module's packages, by import path, from
// their non-test Go files.
type Graph struct {
	Module string
	Root   string              // directory of go.mod
	Dirs   map[string]string   // import path -> directory
	Names  map[string]string   // import path -> package name ("main" for a binary)
	Deps   map[string][]string // import path -> imported paths (module packages only), sorted
}

// Bindings are the vendor bindings below the HAL contract and the sysfs
// reader of topology, relative to the module: they import no hal package.
var Bindings = []string{"internal/cuda", "internal/hip", "internal/ibverbs", "internal/ncclnet", "internal/sysnccl", "internal/ucx", "topology/sysfs"}

// ErrorKinds is the leaf package of error kinds that hal re-exports and
// the bindings use; it imports nothing of the module.
const ErrorKinds = "internal/errkind"

// BackendList is the one package that imports the backends for their
// registration, and that every binary imports.
const BackendList = "backends"

// NetCore is the library the network backends share, relative to the
// module. It sits directly under hal/ but is not a backend.
const NetCore = "hal/netcore"

// NetBackends are the backends that may import NetCore, relative to the
// module.
var NetBackends = []string{"hal/ib", "hal/netplugin", "hal/socket", "hal/ucx"}

// Load parses every non-test Go file under root (a module root holding
// go.mod), skipping testdata, hidden directories and directories named
// vendor. Errors name the file that could not be read or parsed.
func Load(root string) (*Graph, error) {
	mod, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	g := &Graph{Module: mod, Root: root, Dirs: map[string]string{}, Names: map[string]string{}, Deps: map[string][]string{}}
	deps := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		pkg := mod
		if rel != "." {
			pkg = mod + "/" + filepath.ToSlash(rel)
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return fmt.Errorf("archcheck: parse %s: %w", p, err)
		}
		g.Dirs[pkg] = filepath.Dir(p)
		g.Names[pkg] = f.Name.Name
		if deps[pkg] == nil {
			deps[pkg] = map[string]bool{}
		}
		for _, im := range f.Imports {
			ip, err := strconv.Unquote(im.Path.Value)
			if err != nil {
				return fmt.Errorf("archcheck: %s: import %s: %w", p, im.Path.Value, err)
			}
			if ip == mod || strings.HasPrefix(ip, mod+"/") {
				deps[pkg][ip] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for pkg, set := range deps {
		list := make([]string, 0, len(set))
		for ip := range set {
			list = append(list, ip)
		}
		sort.Strings(list)
		g.Deps[pkg] = list
	}
	return g, nil
}

func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", fmt.Errorf("archcheck: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("archcheck: no module line in %s", gomod)
}

// Backends returns the import paths of the hardware backends: the packages
// directly under hal/ except hal/plan (the plan IR shared by all) and
// hal/netcore (what the network backends share), sorted.
func (g *Graph) Backends() []string {
	var out []string
	for pkg := range g.Dirs {
		rel := strings.TrimPrefix(pkg, g.Module+"/")
		dir, name := path.Split(rel)
		if dir == "hal/" && name != "plan" && rel != NetCore {
			out = append(out, pkg)
		}
	}
	sort.Strings(out)
	return out
}

// Path returns a chain of imports from pkg to a package for which bad
// returns true (pkg first, the bad package last), or nil if none is
// reachable. The search is breadth-first, so the chain is a shortest one.
func (g *Graph) Path(pkg string, bad func(string) bool) []string {
	prev := map[string]string{pkg: ""}
	queue := []string{pkg}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, d := range g.Deps[cur] {
			if _, seen := prev[d]; seen {
				continue
			}
			prev[d] = cur
			if bad(d) {
				chain := []string{d}
				for at := cur; at != ""; at = prev[at] {
					chain = append([]string{at}, chain...)
				}
				return chain
			}
			queue = append(queue, d)
		}
	}
	return nil
}

// Violations lists every breach of the layering rules, one line each with
// the import chain that causes it, sorted.
func (g *Graph) Violations() []string {
	backends := g.Backends()
	isBackend := map[string]bool{}
	for _, b := range backends {
		isBackend[b] = true
	}
	short := func(chain []string) string {
		parts := make([]string, len(chain))
		for i, c := range chain {
			parts[i] = strings.TrimPrefix(c, g.Module+"/")
		}
		return strings.Join(parts, " -> ")
	}
	var out []string
	upper := func(p string) bool {
		rel := strings.TrimPrefix(p, g.Module+"/")
		for _, top := range []string{"channels", "algorithms"} {
			if rel == top || strings.HasPrefix(rel, top+"/") {
				return true
			}
		}
		return false
	}
	out = append(out, g.contractViolations(isBackend, short)...)
	out = append(out, g.netCoreViolations(isBackend, upper, short)...)
	for _, b := range backends {
		if c := g.Path(b, func(p string) bool { return p != b && (isBackend[p] || upper(p)) }); c != nil {
			out = append(out, "backend imports another backend or an upper layer: "+short(c))
		}
	}
	for pkg := range g.Dirs {
		rel := strings.TrimPrefix(pkg, g.Module+"/")
		top := strings.SplitN(rel, "/", 2)[0]
		if top != "channels" && top != "algorithms" && top != "topology" {
			continue
		}
		if c := g.Path(pkg, func(p string) bool { return isBackend[p] }); c != nil {
			out = append(out, top+" imports a backend: "+short(c))
		}
	}
	sort.Strings(out)
	return out
}

// netCoreViolations checks that NetCore imports no backend and no upper
// layer, directly or indirectly, and that no package but a network
// backend, NetCore's own subpackages and test support (a library no
// non-test package imports) imports it.
func (g *Graph) netCoreViolations(isBackend map[string]bool, upper func(string) bool, short func([]string) string) []string {
	core := g.Module + "/" + NetCore
	if _, ok := g.Dirs[core]; !ok {
		return nil
	}
	var out []string
	if c := g.Path(core, func(p string) bool { return isBackend[p] || upper(p) }); c != nil {
		out = append(out, "network core imports a backend or an upper layer: "+short(c))
	}
	importedBy := map[string]bool{}
	for _, deps := range g.Deps {
		for _, d := range deps {
			importedBy[d] = true
		}
	}
	for pkg, deps := range g.Deps {
		rel := strings.TrimPrefix(pkg, g.Module+"/")
		if pkg == core || strings.HasPrefix(rel, NetCore+"/") || slices.Contains(NetBackends, rel) {
			continue
		}
		if g.Names[pkg] != "main" && !importedBy[pkg] {
			continue // test support
		}
		if slices.Contains(deps, core) {
			out = append(out, "imports the network core outside the network backends: "+short([]string{pkg, core}))
		}
	}
	return out
}

// contractViolations checks the rules about what sits below the contract
// (bindings, error kinds) and about who names a backend (the backends list
// and the binaries).
func (g *Graph) contractViolations(isBackend map[string]bool, short func([]string) string) []string {
	var out []string
	abs := func(rel string) string { return g.Module + "/" + rel }
	isHAL := func(p string) bool { return p == abs("hal") || strings.HasPrefix(p, abs("hal")+"/") }
	for _, b := range Bindings {
		if _, ok := g.Dirs[abs(b)]; !ok {
			continue
		}
		if c := g.Path(abs(b), isHAL); c != nil {
			out = append(out, "binding imports a hal package: "+short(c))
		}
	}
	if len(g.Deps[abs(ErrorKinds)]) > 0 {
		out = append(out, "error kinds import the module: "+short([]string{abs(ErrorKinds), g.Deps[abs(ErrorKinds)][0]}))
	}
	importedBy := map[string]bool{}
	for _, deps := range g.Deps {
		for _, d := range deps {
			importedBy[d] = true
		}
	}
	list := abs(BackendList)
	_, haveList := g.Dirs[list]
	for pkg, name := range g.Names {
		if pkg == list || isBackend[pkg] {
			continue
		}
		// Test support (a library that only tests import) may wire
		// backends, as the tests themselves do.
		support := name != "main" && !importedBy[pkg]
		for _, d := range g.Deps[pkg] {
			if isBackend[d] && !support {
				out = append(out, "names a backend outside the backends list: "+short([]string{pkg, d}))
			}
		}
		if name == "main" && g.Path(pkg, isHAL) != nil && !slices.Contains(g.Deps[pkg], list) {
			out = append(out, "binary does not import the backends list: "+short([]string{pkg})+" (import _ \""+list+"\")")
		}
	}
	if haveList {
		for b := range isBackend {
			if !slices.Contains(g.Deps[list], b) {
				out = append(out, "backends list misses a backend: "+short([]string{list, b}))
			}
		}
	} else if len(isBackend) > 0 {
		out = append(out, "no backends list: "+BackendList+"/ must import every backend")
	}
	return out
}

// Lines counts the lines of a backend's non-test Go files and of the files
// under its device/ directory (its device headers), which is what a vendor
// writes to port weft.
type Lines struct {
	Package string
	Go      int
	Device  int
}

// Total is Go + Device.
func (l Lines) Total() int { return l.Go + l.Device }

// Count returns the line counts of pkg (a package of g).
func (g *Graph) Count(pkg string) (Lines, error) {
	dir := g.Dirs[pkg]
	l := Lines{Package: strings.TrimPrefix(pkg, g.Module+"/")}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return l, fmt.Errorf("archcheck: %w", err)
	}
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		c, err := countLines(filepath.Join(dir, n))
		if err != nil {
			return l, err
		}
		l.Go += c
	}
	devDir := filepath.Join(dir, "device")
	ents, err = os.ReadDir(devDir)
	if err != nil && !os.IsNotExist(err) {
		return l, fmt.Errorf("archcheck: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		c, err := countLines(filepath.Join(devDir, e.Name()))
		if err != nil {
			return l, err
		}
		l.Device += c
	}
	return l, nil
}

func countLines(p string) (int, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, fmt.Errorf("archcheck: %w", err)
	}
	n := strings.Count(string(b), "\n")
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n, nil
}
