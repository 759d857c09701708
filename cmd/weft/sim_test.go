package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSimSmallCase(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "s.svg")
	var out, errb bytes.Buffer
	code := run([]string{"sim", "all_reduce", "--preset", "h100x2", "--family", "all-pairs", "-b", "8", "-e", "128M", "-f", "64", "--plot", svg}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var row8, row512 []string
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(l)
		if len(f) == 8 && f[0] == "8" {
			row8 = f
		}
		if len(f) == 8 && f[0] == "134217728" {
			row512 = f
		}
	}
	if row8 == nil || row8[7] != "allreduce-1pa-LL16-8x1024" || row512 == nil || !strings.HasPrefix(row512[7], "allreduce-2pa-") {
		t.Fatalf("rows for 8 B and 128 MiB missing or served by other plans:\n%s", out.String())
	}
	if st, err := os.Stat(svg); err != nil || st.Size() < 1000 {
		t.Errorf("plot %s: %v", svg, err)
	}
}

func TestSimBadFlagsExit5(t *testing.T) {
	for _, args := range [][]string{
		{"sim", "--bogus"},
		{"sim", "--preset", "nope"},
		{"sim", "broadcast", "--preset", "h100x2"},
		{"sim", "--preset", "h100x2", "-f", "1"},
		{"sim", "--preset", "h100x2", "--family", "none"},
		{"sim", "--nodes", "0"},
		{"sim", "--switching", "torus"},
		{"sim", "--cluster", "/nonexistent.yaml"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 5 {
			t.Errorf("%v: exit %d, want 5 (%s)", args, code, errb.String())
		}
	}
}
