package ib_test

import (
	"os"
	"path/filepath"
	"testing"
)

// fakeSysfs makes a sysfs root whose class/infiniband lists devs, as the
// kernel does (links into devices/).
func fakeSysfs(t *testing.T, devs ...string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "class", "infiniband"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		target := filepath.Join(root, "devices", "virtual", "infiniband", d)
		if err := os.MkdirAll(filepath.Join(target, "ports", "1"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(root, "class", "infiniband", d)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
