package sysfs

import "github.com/Mellanox/rdmamap"

// NewRDMALister returns the lister for f. For the live /sys it is backed by
// github.com/Mellanox/rdmamap; rdmamap reads package-level paths fixed to
// /sys, which weft does not rewrite (that would be global mutable state),
// so any other root is listed by an equivalent reader of
// class/infiniband below that root.
func NewRDMALister(f *FS) RDMALister {
	if f.root == DefaultRoot {
		return rdmamapLister{}
	}
	return dirLister{f: f}
}

type rdmamapLister struct{}

func (rdmamapLister) Devices() []string         { return rdmamap.GetRdmaDeviceList() }
func (rdmamapLister) Ports(dev string) []string { return rdmamap.GetPorts(dev) }
