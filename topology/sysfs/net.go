package sysfs

import (
	"errors"
	"sort"
	"strconv"
	"strings"
)

// NetDevice is a network interface under class/net that belongs to a PCI
// function. Virtual interfaces (lo, bridges, veth, ifb) have no PCI
// function and are not returned.
type NetDevice struct {
	Name string
	BDF  string // owning PCI function
	// Bus is "pci" when the interface's device is the PCI function itself,
	// or the bus of the device between them ("virtio" for virtio-net).
	Bus string
	// SpeedMbps is the negotiated speed; 0 when unknown (link down, or a
	// driver that reports -1).
	SpeedMbps int
	OperState string // "up", "down", "unknown"
	Address   string // link-layer address
	// Type is the ARPHRD type: 1 for Ethernet, 32 for InfiniBand (IPoIB).
	Type int
}

// ReadNetDevices reads class/net, keeping interfaces backed by a PCI
// function, sorted by name.
func (f *FS) ReadNetDevices() ([]NetDevice, error) {
	names, err := f.List("class/net")
	if err != nil {
		return nil, err
	}
	var out []NetDevice
	var errs []error
	for _, n := range names {
		rel := "class/net/" + n
		bdf, ok, err := f.PCIDeviceOf(rel + "/device")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			continue
		}
		d := NetDevice{Name: n, BDF: bdf, Bus: "pci"}
		if real, err := f.Resolve(rel + "/device"); err == nil && !strings.HasSuffix(real, "/"+bdf) {
			d.Bus = strings.TrimRight(real[strings.LastIndex(real, "/")+1:], "0123456789")
		}
		// Reading speed fails with EINVAL while the link is down; that is
		// "unknown", not an error.
		speed, err := optAttr(f, rel+"/speed", 0, ParseInt)
		errs = append(errs, err)
		if speed > 0 && speed < 1<<31 {
			d.SpeedMbps = int(speed)
		}
		d.OperState, _ = optAttr(f, rel+"/operstate", "", func(s string) (string, error) { return s, nil })
		d.Address, _ = optAttr(f, rel+"/address", "", func(s string) (string, error) { return s, nil })
		typ, err := optAttr(f, rel+"/type", 0, ParseInt)
		errs = append(errs, err)
		d.Type = int(typ)
		out = append(out, d)
	}
	return out, errors.Join(errs...)
}

// RDMAPort is one port of an RDMA device.
type RDMAPort struct {
	Port      int
	LinkLayer string  // "InfiniBand" or "Ethernet" (RoCE)
	State     string  // "ACTIVE", "DOWN", …
	RateGbps  float64 // signalling rate, 0 when unknown
	// Netdev is the interface carrying RoCE traffic (gid_attrs/ndevs/0),
	// "" for InfiniBand ports or when unknown.
	Netdev string
}

// RDMADevice is one device under class/infiniband.
type RDMADevice struct {
	Name     string // "mlx5_0"
	BDF      string // owning PCI function, "" for software devices (rxe)
	NodeGUID uint64
	Ports    []RDMAPort
	// Netdevs are the interfaces of the same PCI function (device/net).
	Netdevs []string
}

// RDMALister enumerates RDMA devices and their ports. The live system uses
// github.com/Mellanox/rdmamap, whose paths are fixed to /sys; other roots
// use a reader of the same directories (see NewRDMALister).
type RDMALister interface {
	Devices() []string
	Ports(dev string) []string
}

// dirLister lists class/infiniband under an FS root. Like rdmamap it takes
// the entries that are links (the kernel's class entries) and port
// directories by name.
type dirLister struct{ f *FS }

func (l dirLister) Devices() []string {
	names, _ := l.f.List("class/infiniband")
	var out []string
	for _, n := range names {
		if l.f.LinkBase("class/infiniband/"+n) != "" {
			out = append(out, n)
		}
	}
	return out
}

func (l dirLister) Ports(dev string) []string {
	names, _ := l.f.List("class/infiniband/" + dev + "/ports")
	return names
}

// ReadRDMADevices reads class/infiniband with the given lister (nil: the
// FS's own, NewRDMALister(f)), sorted by name.
func (f *FS) ReadRDMADevices(l RDMALister) ([]RDMADevice, error) {
	if l == nil {
		l = NewRDMALister(f)
	}
	var out []RDMADevice
	var errs []error
	for _, n := range l.Devices() {
		rel := "class/infiniband/" + n
		d := RDMADevice{Name: n}
		bdf, ok, err := f.PCIDeviceOf(rel + "/device")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			d.BDF = bdf
		}
		d.NodeGUID, err = optAttr(f, rel+"/node_guid", 0, ParseGUID)
		errs = append(errs, err)
		for _, p := range l.Ports(n) {
			num, err := strconv.Atoi(p)
			if err != nil || num < 0 {
				continue
			}
			prel := rel + "/ports/" + p
			port := RDMAPort{Port: num}
			port.LinkLayer, _ = optAttr(f, prel+"/link_layer", "", func(s string) (string, error) { return s, nil })
			port.State, err = optAttr(f, prel+"/state", "", func(s string) (string, error) {
				_, name, err := ParseIBState(s)
				return name, err
			})
			errs = append(errs, err)
			port.RateGbps, err = optAttr(f, prel+"/rate", 0, ParseIBRate)
			errs = append(errs, err)
			port.Netdev, _ = optAttr(f, prel+"/gid_attrs/ndevs/0", "", func(s string) (string, error) { return s, nil })
			d.Ports = append(d.Ports, port)
		}
		sort.Slice(d.Ports, func(i, j int) bool { return d.Ports[i].Port < d.Ports[j].Port })
		if ok {
			d.Netdevs, _ = f.List(rel + "/device/net")
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errors.Join(errs...)
}

// DirLister returns the lister that reads class/infiniband below f's root
// directly; NewRDMALister uses it for every root but /sys.
func DirLister(f *FS) RDMALister { return dirLister{f: f} }
