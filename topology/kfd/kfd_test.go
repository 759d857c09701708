package kfd_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/topology/kfd"
	"github.com/weftccl/weft/topology/sysfs"
	"github.com/weftccl/weft/topology/sysfs/fakesys"
)

func TestParseIOLink(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    kfd.IOLink
		wantErr bool
	}{
		{"xgmi", fakesys.KFDLink(11, 2, 3, 15, 50000, 64000, 1<<31|1),
			kfd.IOLink{Type: kfd.LinkXGMI, From: 2, To: 3, Weight: 15, MinBandwidthMBps: 50000, MaxBandwidthMBps: 64000, Flags: 1<<31 | 1}, false},
		{"pcie", "type 2\nnode_from 2\nnode_to 0\nweight 20\n", kfd.IOLink{Type: kfd.LinkPCIe, From: 2, To: 0, Weight: 20}, false},
		{"no node_to", "type 2\nnode_from 2\n", kfd.IOLink{}, true},
		{"not a number", "type xgmi\nnode_from 2\nnode_to 3\n", kfd.IOLink{}, true},
		{"three fields", "type 2 3\n", kfd.IOLink{}, true},
		{"duplicate", "type 2\ntype 11\nnode_from 1\nnode_to 2\n", kfd.IOLink{}, true},
		{"huge node", "type 2\nnode_from 99999999999\nnode_to 2\n", kfd.IOLink{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := kfd.ParseIOLink(tt.in)
			if tt.wantErr {
				if !errors.Is(err, sysfs.ErrMalformed) {
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

func TestGFXTarget(t *testing.T) {
	for v, want := range map[uint64]string{90402: "gfx942", 90010: "gfx90a", 110000: "gfx1100", 90008: "gfx908", 0: ""} {
		if got := kfd.GFXTarget(v); got != want {
			t.Errorf("GFXTarget(%d) = %q, want %q", v, got, want)
		}
	}
}

func TestRead(t *testing.T) {
	ft := fakesys.New(t, t.TempDir())
	ft.KFDNode(0, 0, "", "cpu_cores_count 64\nsimd_count 0")
	ft.KFDNode(1, 0xbeef, "gfx942", "cpu_cores_count 0\nsimd_count 1216\nvendor_id 4098\ndevice_id 29857\nlocation_id 6656\ndomain 2\ngfx_target_version 90402\nhive_id 7\ndrm_render_minor 128",
		fakesys.KFDLink(2, 1, 0, 20, 0, 0, 1), fakesys.KFDLink(11, 1, 2, 15, 64000, 64000, 1|kfd.FlagNoAtomics64))
	f, err := sysfs.Open(ft.Root)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := kfd.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	want := []kfd.Node{
		{ID: 0, CPUCores: 64, DRMRenderMinor: -1},
		{ID: 1, GPUID: 0xbeef, Name: "gfx942", SIMDs: 1216, VendorID: 0x1002, DeviceID: 0x74a1, BDF: "0002:1a:00.0",
			GFXTarget: "gfx942", HiveID: 7, DRMRenderMinor: 128, IOLinks: []kfd.IOLink{
				{Type: kfd.LinkPCIe, From: 1, To: 0, Weight: 20, Flags: 1},
				{Type: kfd.LinkXGMI, From: 1, To: 2, Weight: 15, MinBandwidthMBps: 64000, MaxBandwidthMBps: 64000, Flags: 1 | kfd.FlagNoAtomics64}}},
	}
	if diff := cmp.Diff(want, nodes); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if dma, atomics := nodes[1].IOLinks[1].P2P(); !dma || atomics {
		t.Errorf("P2P() = %v, %v; want DMA without 64-bit atomics", dma, atomics)
	}
}

func TestReadErrors(t *testing.T) {
	ft := fakesys.New(t, t.TempDir())
	f, _ := sysfs.Open(ft.Root)
	if _, err := kfd.Read(f); !errors.Is(err, hal.ErrNotSupported) {
		t.Fatalf("no KFD: %v, want ErrNotSupported", err)
	}
	ft.KFDNode(0, 1, "x", "simd_count 4\nlocation_id 256", "type eleven")
	ft.KFDNode(1, 0, "", "cpu_cores_count 8")
	nodes, err := kfd.Read(f)
	var ae *sysfs.AttrError
	if !errors.As(err, &ae) || !strings.HasSuffix(ae.File, "nodes/0/io_links/0/properties") {
		t.Fatalf("error %v does not name the io_link file", err)
	}
	if len(nodes) != 1 || nodes[0].ID != 1 {
		t.Errorf("nodes = %+v, want the intact node 1", nodes)
	}
}

func FuzzParseProperties(f *testing.F) {
	f.Add(fakesys.KFDLink(11, 2, 3, 15, 1, 2, 3))
	f.Add("simd_count 1216\nlocation_id 6656\ndrm_render_minor -1")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := kfd.ParseProperties(s)
		if err == nil && len(p.Keys) != len(p.Values) {
			t.Fatalf("%d keys, %d values", len(p.Keys), len(p.Values))
		}
		kfd.ParseIOLink(s)
	})
}
