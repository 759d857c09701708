// Package apicheck compares the exported functions of Go source files. The
// cgo bindings (internal/cuda, internal/sysnccl) use it in tests to keep their
// !cgo stubs' API identical to the cgo one, so that CGO_ENABLED=0 builds of
// code using them keep compiling.
package apicheck

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"sort"
)

// ErrNoSource is returned when a file is missing, as when a test binary
// runs outside its package directory (on a GPU host).
var ErrNoSource = fmt.Errorf("source file not present")

// ExportedFuncs returns "Recv.Name func(params) results" for every exported
// function and method declared in files, sorted.
func ExportedFuncs(files ...string) ([]string, error) {
	fset := token.NewFileSet()
	var out []string
	for _, name := range files {
		if _, err := os.Stat(name); err != nil {
			return nil, fmt.Errorf("%s: %w", name, ErrNoSource)
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, err
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
	return out, nil
}
