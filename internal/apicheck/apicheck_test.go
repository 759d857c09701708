package apicheck

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExportedFuncs(t *testing.T) {
	dir := t.TempDir()
	src := "package p\nfunc A(x int) error { return nil }\nfunc b() {}\ntype T struct{}\nfunc (t *T) M() (int, error) { return 0, nil }\n"
	f := filepath.Join(dir, "p.go")
	os.WriteFile(f, []byte(src), 0o644)
	got, err := ExportedFuncs(f)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"*T.M func() (int, error)", "A func(x int) error"}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, err := ExportedFuncs(filepath.Join(dir, "missing.go")); !errors.Is(err, ErrNoSource) {
		t.Errorf("missing file: %v", err)
	}
}
