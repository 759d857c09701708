package cuda

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// exportedFuncs returns "recv.Name(params) results" for every exported
// function and method declared in files.
func exportedFuncs(t *testing.T, files ...string) []string {
	t.Helper()
	fset := token.NewFileSet()
	var out []string
	for _, name := range files {
		if _, err := os.Stat(name); err != nil {
			t.Skipf("source not here (test binary run outside its package directory): %v", err)
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !fd.Name.IsExported() {
				continue
			}
			var recv string
			if fd.Recv != nil {
				var b bytes.Buffer
				printer.Fprint(&b, fset, fd.Recv.List[0].Type)
				recv = b.String() + "."
			}
			var typ bytes.Buffer
			printer.Fprint(&typ, fset, fd.Type)
			out = append(out, recv+fd.Name.Name+" "+typ.String())
		}
	}
	sort.Strings(out)
	return out
}

// TestStubMatchesCgo keeps the !cgo build's API identical to the cgo one,
// so that CGO_ENABLED=0 builds of code using this package keep compiling.
func TestStubMatchesCgo(t *testing.T) {
	cgo := exportedFuncs(t, "driver_cgo.go", "nvrtc_cgo.go")
	stub := exportedFuncs(t, "stub_nocgo.go")
	if diff := cmp.Diff(cgo, stub); diff != "" {
		t.Errorf("stub_nocgo.go differs from the cgo API (-cgo +stub):\n%s", diff)
	}
}
