package sysfs_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/weftccl/weft/internal/errkind"
	"github.com/weftccl/weft/topology/sysfs"
	"github.com/weftccl/weft/topology/sysfs/fakesys"
)

// tree is a small machine: a root port, a switch, a GPU and a NIC below
// it, a NIC on the root bus, a virtual interface.
func tree(t *testing.T) *fakesys.Tree {
	ft := fakesys.New(t, t.TempDir())
	ft.CPU(fakesys.X86Modalias(0, 6, 0x8f), "0-7")
	ft.NUMA(0, "0-3", 1024, "10 21")
	ft.NUMA(1, "4-7", 2048, "21 10")
	ft.PCI(fakesys.Dev{BDF: "0000:00:01.0", Parent: "pci0000:00", Class: 0x060400, Vendor: 0x8086, Device: 1, NUMA: 1, Speed: "32.0 GT/s PCIe", Width: 16})
	ft.PCI(fakesys.Dev{BDF: "0000:01:00.0", Parent: "0000:00:01.0", Class: 0x060400, Vendor: 0x1000, Device: 0xc030, NUMA: 1, Speed: "32.0 GT/s PCIe", Width: 16})
	ft.PCI(fakesys.Dev{BDF: "0000:02:00.0", Parent: "0000:01:00.0", Class: 0x060400, Vendor: 0x1000, Device: 0xc030, NUMA: 1, Speed: "32.0 GT/s PCIe", Width: 16})
	ft.PCI(fakesys.Dev{BDF: "0000:03:00.0", Parent: "0000:02:00.0", Class: 0x030200, Vendor: 0x10de, Device: 0x2330, NUMA: 1, Speed: "32.0 GT/s PCIe", Width: 16, Driver: "nvidia"})
	ft.PCI(fakesys.Dev{BDF: "0000:00:02.0", Parent: "pci0000:00", Class: 0x020000, Vendor: 0x15b3, Device: 0x1021, NUMA: -1, Speed: "16.0 GT/s PCIe", Width: 8, Driver: "mlx5_core"})
	ft.NetDev(fakesys.Net{Name: "lo", Type: 772})
	ft.NetDev(fakesys.Net{Name: "ens2", BDF: "0000:00:02.0", Speed: 200000, OperState: "up", Type: 1})
	ft.NetDev(fakesys.Net{Name: "ens3", BDF: "0000:00:02.0", OperState: "down", Type: 1}) // no speed file, as on a down link
	ft.RDMA("mlx5_0", "0000:00:02.0", "0c42:a103:0016:054e",
		fakesys.IBPort{LinkLayer: "Ethernet", State: "4: ACTIVE", Rate: "200 Gb/sec (2X HDR)", Netdev: "ens2"})
	return ft
}

func open(t *testing.T, root string) *sysfs.FS {
	f, err := sysfs.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestReadTree(t *testing.T) {
	ft := tree(t)
	f := open(t, ft.Root)
	devs, err := f.ReadPCIDevices()
	if err != nil {
		t.Fatal(err)
	}
	gpu := devs[len(devs)-1]
	want := sysfs.PCIDevice{BDF: "0000:03:00.0", Root: "pci0000:00", Ancestors: []string{"0000:00:01.0", "0000:01:00.0", "0000:02:00.0"},
		Class: 0x030200, Vendor: 0x10de, Device: 0x2330, NUMANode: 1, MaxLinkSpeed: 32, MaxLinkWidth: 16,
		CurLinkSpeed: 32, CurLinkWidth: 16, Driver: "nvidia"}
	if diff := cmp.Diff(want, gpu); diff != "" {
		t.Errorf("GPU (-want +got):\n%s", diff)
	}
	numa, err := f.ReadNUMANodes()
	if err != nil {
		t.Fatal(err)
	}
	wantNUMA := []sysfs.NUMANode{{ID: 0, CPUs: []int{0, 1, 2, 3}, MemoryBytes: 1 << 20, Distances: []int{10, 21}},
		{ID: 1, CPUs: []int{4, 5, 6, 7}, MemoryBytes: 2 << 20, Distances: []int{21, 10}}}
	if diff := cmp.Diff(wantNUMA, numa); diff != "" {
		t.Errorf("NUMA (-want +got):\n%s", diff)
	}
	nets, err := f.ReadNetDevices()
	if err != nil {
		t.Fatal(err)
	}
	wantNets := []sysfs.NetDevice{
		{Name: "ens2", BDF: "0000:00:02.0", Bus: "pci", SpeedMbps: 200000, OperState: "up", Type: 1},
		{Name: "ens3", BDF: "0000:00:02.0", Bus: "pci", OperState: "down", Type: 1},
	}
	if diff := cmp.Diff(wantNets, nets); diff != "" {
		t.Errorf("net (-want +got; lo is virtual and left out):\n%s", diff)
	}
	rdma, err := f.ReadRDMADevices(nil)
	if err != nil {
		t.Fatal(err)
	}
	wantRDMA := []sysfs.RDMADevice{{Name: "mlx5_0", BDF: "0000:00:02.0", NodeGUID: 0x0c42a1030016054e,
		Ports:   []sysfs.RDMAPort{{Port: 1, LinkLayer: "Ethernet", State: "ACTIVE", RateGbps: 200, Netdev: "ens2"}},
		Netdevs: []string{"ens2", "ens3"}}}
	if diff := cmp.Diff(wantRDMA, rdma); diff != "" {
		t.Errorf("RDMA (-want +got):\n%s", diff)
	}
	id, err := f.ReadCPUID()
	if err != nil || id != (sysfs.CPUID{Arch: "x86_64", Vendor: "GenuineIntel", Family: 6, Model: 0x8f}) {
		t.Errorf("ReadCPUID = %+v, %v", id, err)
	}
}

// TestMalformed: a broken or missing attribute gives an error naming the
// file (never a panic), and the other devices are still read.
func TestMalformed(t *testing.T) {
	tests := []struct {
		name     string
		break_   func(ft *fakesys.Tree)
		file     string // relative to the device directory of 0000:03:00.0
		sentinel error
	}{
		{"class not hex", func(ft *fakesys.Tree) {
			ft.WriteFile(ft.DevicePath("0000:03:00.0")+"/class", "three-d")
		}, "class", sysfs.ErrMalformed},
		{"vendor missing", func(ft *fakesys.Tree) { ft.Remove(ft.DevicePath("0000:03:00.0") + "/vendor") }, "vendor", fs.ErrNotExist},
		{"speed garbage", func(ft *fakesys.Tree) {
			ft.WriteFile(ft.DevicePath("0000:03:00.0")+"/max_link_speed", "quick")
		}, "max_link_speed", sysfs.ErrMalformed},
		{"numa out of range", func(ft *fakesys.Tree) {
			ft.WriteFile(ft.DevicePath("0000:03:00.0")+"/numa_node", "-7")
		}, "numa_node", sysfs.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ft := tree(t)
			tt.break_(ft)
			devs, err := open(t, ft.Root).ReadPCIDevices()
			if !errors.Is(err, tt.sentinel) {
				t.Fatalf("error %v does not wrap %v", err, tt.sentinel)
			}
			var ae *sysfs.AttrError
			if !errors.As(err, &ae) || !strings.HasSuffix(ae.File, "0000:03:00.0/"+tt.file) || !strings.HasPrefix(ae.File, ft.Root) {
				t.Fatalf("error %v does not name %s", err, tt.file)
			}
			if len(devs) != 4 {
				t.Errorf("read %d devices, want the 4 intact ones", len(devs))
			}
		})
	}
}

func TestLinkOutOfRoot(t *testing.T) {
	ft := tree(t)
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(outside, "devices", "pci0000:00", "0000:00:09.0"), 0o755)
	link := filepath.Join(ft.Root, "bus", "pci", "devices", "0000:00:09.0")
	if err := os.Symlink(filepath.Join(outside, "devices", "pci0000:00", "0000:00:09.0"), link); err != nil {
		t.Fatal(err)
	}
	_, err := open(t, ft.Root).ReadPCIDevices()
	if !errors.Is(err, sysfs.ErrMalformed) || !strings.Contains(err.Error(), "out of the sysfs root") {
		t.Fatalf("error = %v, want a link leaving the root refused", err)
	}
}

func TestOpenMissingRoot(t *testing.T) {
	_, err := sysfs.Open(filepath.Join(t.TempDir(), "nope"))
	if !errors.Is(err, errkind.ErrNotSupported) {
		t.Fatalf("Open(missing) = %v, want ErrNotSupported", err)
	}
}

// TestNoNUMA: a kernel without NUMA support has no node directory; all
// online CPUs form node 0.
func TestNoNUMA(t *testing.T) {
	ft := fakesys.New(t, t.TempDir())
	ft.CPU(fakesys.X86Modalias(2, 0x19, 1), "0-5")
	nodes, err := open(t, ft.Root).ReadNUMANodes()
	if err != nil {
		t.Fatal(err)
	}
	want := []sysfs.NUMANode{{ID: 0, CPUs: []int{0, 1, 2, 3, 4, 5}, Distances: []int{10}}}
	if diff := cmp.Diff(want, nodes); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestRDMAListers: on the live /sys the rdmamap lister and the directory
// lister must list the same devices.
func TestRDMAListers(t *testing.T) {
	live, err := sysfs.Open("")
	if err != nil {
		t.Skipf("no /sys: %v", err)
	}
	viaRdmamap, err1 := live.ReadRDMADevices(sysfs.NewRDMALister(live))
	viaDir, err2 := live.ReadRDMADevices(sysfs.DirLister(live))
	if err1 != nil || err2 != nil {
		t.Fatalf("errors: %v, %v", err1, err2)
	}
	if diff := cmp.Diff(viaDir, viaRdmamap, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("rdmamap and directory listers disagree (-dir +rdmamap):\n%s", diff)
	}
}
