package sysfs

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsers(t *testing.T) {
	tests := []struct {
		name    string
		parse   func(string) (any, error)
		in      string
		want    any
		wantErr bool
	}{
		{"hex class", func(s string) (any, error) { return ParseHex(s, 24) }, "0x030200\n", uint64(0x030200), false},
		{"hex no prefix", func(s string) (any, error) { return ParseHex(s, 16) }, "10de", uint64(0x10de), false},
		{"hex overflow", func(s string) (any, error) { return ParseHex(s, 16) }, "0x10000", nil, true},
		{"hex empty", func(s string) (any, error) { return ParseHex(s, 16) }, "0x", nil, true},
		{"int numa", func(s string) (any, error) { return ParseInt(s) }, "-1", int64(-1), false},
		{"cpulist", func(s string) (any, error) { return ParseCPUList(s) }, "0-3,8,10-11", []int{0, 1, 2, 3, 8, 10, 11}, false},
		{"cpulist empty", func(s string) (any, error) { return ParseCPUList(s) }, "", []int(nil), false},
		{"cpulist reversed", func(s string) (any, error) { return ParseCPUList(s) }, "3-1", nil, true},
		{"cpulist unsorted", func(s string) (any, error) { return ParseCPUList(s) }, "4,2", nil, true},
		{"cpulist huge", func(s string) (any, error) { return ParseCPUList(s) }, "0-4294967295", nil, true},
		{"cpumask", func(s string) (any, error) { return ParseCPUMask(s) }, "00000001,80000003", []int{0, 1, 31, 32}, false},
		{"cpumask bad word", func(s string) (any, error) { return ParseCPUMask(s) }, "123456789", nil, true},
		{"speed new", func(s string) (any, error) { return ParseLinkSpeed(s) }, "16.0 GT/s PCIe", 16.0, false},
		{"speed old", func(s string) (any, error) { return ParseLinkSpeed(s) }, "8 GT/s", 8.0, false},
		{"speed 2.5", func(s string) (any, error) { return ParseLinkSpeed(s) }, "2.5 GT/s PCIe", 2.5, false},
		{"speed unknown", func(s string) (any, error) { return ParseLinkSpeed(s) }, "Unknown", 0.0, false},
		{"speed junk", func(s string) (any, error) { return ParseLinkSpeed(s) }, "fast", nil, true},
		{"width", func(s string) (any, error) { return ParseLinkWidth(s) }, "16", 16, false},
		{"width 255 unknown", func(s string) (any, error) { return ParseLinkWidth(s) }, "255", 0, false},
		{"width negative", func(s string) (any, error) { return ParseLinkWidth(s) }, "-4", nil, true},
		{"distances", func(s string) (any, error) { return ParseDistances(s) }, "10 21", []int{10, 21}, false},
		{"memtotal", func(s string) (any, error) { return ParseMemTotal(s) }, "Node 0 MemTotal:  1024 kB\nNode 0 MemFree: 5 kB", int64(1 << 20), false},
		{"memtotal missing", func(s string) (any, error) { return ParseMemTotal(s) }, "Node 0 MemFree: 5 kB", nil, true},
		{"ib rate", func(s string) (any, error) { return ParseIBRate(s) }, "400 Gb/sec (4X NDR)", 400.0, false},
		{"ib rate sdr", func(s string) (any, error) { return ParseIBRate(s) }, "2.5 Gb/sec (1X SDR)", 2.5, false},
		{"ib rate bad", func(s string) (any, error) { return ParseIBRate(s) }, "400 Mb/sec", nil, true},
		{"guid", func(s string) (any, error) { return ParseGUID(s) }, "0c42:a103:0016:054e", uint64(0x0c42a1030016054e), false},
		{"guid short", func(s string) (any, error) { return ParseGUID(s) }, "0c42:a103:0016", nil, true},
		{"bdf", func(s string) (any, error) { return ParseBDF(s) }, "0000:18:00.0", "0000:18:00.0", false},
		{"bdf nvml", func(s string) (any, error) { return ParseBDF(s) }, "00000000:1A:00.0", "0000:1a:00.0", false},
		{"bdf big domain", func(s string) (any, error) { return ParseBDF(s) }, "10000:e0:1f.7", "00010000:e0:1f.7", false},
		{"bdf bad device", func(s string) (any, error) { return ParseBDF(s) }, "0000:18:20.0", nil, true},
		{"bdf invisible switch", func(s string) (any, error) { return ParseBDF(s) }, "fffffff:ffff:ff", nil, true},
		{"modalias intel", func(s string) (any, error) { return ParseCPUModalias(s) }, "cpu:type:x86,ven0000fam0006mod008F:feature:,0000",
			CPUID{Arch: "x86_64", Vendor: "GenuineIntel", Family: 6, Model: 0x8f}, false},
		{"modalias amd", func(s string) (any, error) { return ParseCPUModalias(s) }, "cpu:type:x86,ven0002fam0019mod0011:feature:",
			CPUID{Arch: "x86_64", Vendor: "AuthenticAMD", Family: 0x19, Model: 0x11}, false},
		{"modalias arm", func(s string) (any, error) { return ParseCPUModalias(s) }, "cpu:type:aarch64:feature:,0000", CPUID{Arch: "arm64"}, false},
		{"modalias junk", func(s string) (any, error) { return ParseCPUModalias(s) }, "cpu:type:x86,vendor:feature", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.parse(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("error %v does not wrap ErrMalformed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestState(t *testing.T) {
	n, name, err := ParseIBState("4: ACTIVE")
	if err != nil || n != 4 || name != "ACTIVE" {
		t.Errorf("ParseIBState = %d, %q, %v; want 4, ACTIVE", n, name, err)
	}
}

func TestCPUListFormats(t *testing.T) {
	tests := []struct {
		cpus       []int
		list, mask string
	}{
		{[]int{0, 1, 2, 3}, "0-3", "0000000f"},
		{[]int{0, 2, 33}, "0,2,33", "00000002,00000005"},
		{nil, "", "00000000"},
	}
	for _, tt := range tests {
		if got := FormatCPUList(tt.cpus); got != tt.list {
			t.Errorf("FormatCPUList(%v) = %q, want %q", tt.cpus, got, tt.list)
		}
		if got := FormatCPUMask(tt.cpus); got != tt.mask {
			t.Errorf("FormatCPUMask(%v) = %q, want %q", tt.cpus, got, tt.mask)
		}
	}
}

// Fuzz targets: no input may panic; accepted input must round-trip where a
// formatter exists.

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0-3,8", "", "5", "0-1,3-4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := ParseCPUList(s)
		if err != nil {
			return
		}
		back, err := ParseCPUList(FormatCPUList(cpus))
		if err != nil || !cmp.Equal(cpus, back) {
			t.Fatalf("%q → %v → %q → %v, %v", s, cpus, FormatCPUList(cpus), back, err)
		}
	})
}

func FuzzParseCPUMask(f *testing.F) {
	for _, s := range []string{"ffffffff", "00000001,00000000", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := ParseCPUMask(s)
		if err != nil {
			return
		}
		back, err := ParseCPUMask(FormatCPUMask(cpus))
		if err != nil || !cmp.Equal(cpus, back) {
			t.Fatalf("%q → %v → %v, %v", s, cpus, back, err)
		}
	})
}

func FuzzParseBDF(f *testing.F) {
	for _, s := range []string{"0000:18:00.0", "00000000:1A:00.0", "fffffff:ffff:ff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseBDF(s)
		if err != nil {
			return
		}
		if c2, err := ParseBDF(c); err != nil || c2 != c {
			t.Fatalf("%q → %q → %q, %v", s, c, c2, err)
		}
	})
}

// FuzzAttributes runs every other attribute parser on the same input.
func FuzzAttributes(f *testing.F) {
	for _, s := range []string{"16.0 GT/s PCIe", "400 Gb/sec (4X NDR)", "0c42:a103:0016:054e", "4: ACTIVE",
		"cpu:type:x86,ven0000fam0006mod008F:feature:", "Node 0 MemTotal: 1 kB", "10 21", "0x10de", "-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ParseHex(s, 16)
		ParseInt(s)
		if v, err := ParseLinkSpeed(s); err == nil && v < 0 {
			t.Fatalf("negative speed %v", v)
		}
		if v, err := ParseLinkWidth(s); err == nil && (v < 0 || v > 254) {
			t.Fatalf("width %d", v)
		}
		ParseDistances(s)
		ParseMemTotal(s)
		ParseIBRate(s)
		ParseIBState(s)
		ParseGUID(s)
		ParseCPUModalias(s)
	})
}
