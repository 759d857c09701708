package sysfs

import (
	"errors"
	"fmt"
	"strings"
)

// PCIDevice is one PCI function as sysfs describes it. IDs keep the
// kernel's hexadecimal spelling, which is also what NCCL's topology XML
// carries.
type PCIDevice struct {
	BDF string // "0000:17:00.0"
	// Root is the host bridge the function sits under ("pci0000:16"), the
	// first element of its path below /sys/devices.
	Root string
	// Ancestors are the PCI functions (bridges) between Root and the
	// device, nearest to the root first. Empty for a function on a root bus.
	Ancestors []string
	Class     uint32 // 24-bit class code, 0x030200 for a 3D controller
	Vendor    uint16
	Device    uint16
	SubVendor uint16
	SubDevice uint16
	// NUMANode is the node the kernel assigns, -1 when it does not know.
	NUMANode int
	// MaxLinkSpeed is in GT/s and MaxLinkWidth in lanes; 0 when the device
	// has no PCIe link attributes (integrated and virtual devices).
	MaxLinkSpeed float64
	MaxLinkWidth int
	// CurLinkSpeed and CurLinkWidth are the trained values; GPUs lower
	// them when idle, so topology uses the maximum values.
	CurLinkSpeed float64
	CurLinkWidth int
	Driver       string // bound driver ("nvidia", "mlx5_core"), "" when none
}

// Parent returns the BDF of the upstream bridge, or "" for a device on a
// root bus.
func (d PCIDevice) Parent() string {
	if len(d.Ancestors) == 0 {
		return ""
	}
	return d.Ancestors[len(d.Ancestors)-1]
}

// IsBridge reports whether the class is PCI-to-PCI bridge (0x0604xx).
func (d PCIDevice) IsBridge() bool { return d.Class>>8 == 0x0604 }

// ReadPCIDevices reads every function under bus/pci/devices, sorted by BDF.
// A function whose attributes cannot be read or parsed is left out and its
// error (naming the file) is joined into the returned error, so one broken
// device does not hide the others. A missing bus/pci directory is not an
// error: the result is empty.
func (f *FS) ReadPCIDevices() ([]PCIDevice, error) {
	names, err := f.List("bus/pci/devices")
	if err != nil {
		return nil, err
	}
	var out []PCIDevice
	var errs []error
	for _, n := range names {
		d, err := f.readPCIDevice(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, d)
	}
	return out, errors.Join(errs...)
}

// ReadPCIDevice reads one function by its BDF.
func (f *FS) ReadPCIDevice(bdf string) (PCIDevice, error) { return f.readPCIDevice(bdf) }

func (f *FS) readPCIDevice(name string) (PCIDevice, error) {
	if !IsBDF(name) {
		return PCIDevice{}, &AttrError{File: f.Path("bus/pci/devices/" + name), Err: malformed("entry name is not a PCI address")}
	}
	rel := "bus/pci/devices/" + name
	real, err := f.Resolve(rel)
	if err != nil {
		return PCIDevice{}, err
	}
	root, anc, err := splitPCIPath(real, name)
	if err != nil {
		return PCIDevice{}, &AttrError{File: f.Path(rel), Err: err}
	}
	d := PCIDevice{BDF: name, Root: root, Ancestors: anc, NUMANode: -1}
	hex := func(bits int) func(string) (uint64, error) {
		return func(s string) (uint64, error) { return ParseHex(s, bits) }
	}
	class, err := attr(f, rel+"/class", hex(24))
	if err != nil {
		return PCIDevice{}, err
	}
	vendor, err := attr(f, rel+"/vendor", hex(16))
	if err != nil {
		return PCIDevice{}, err
	}
	device, err := attr(f, rel+"/device", hex(16))
	if err != nil {
		return PCIDevice{}, err
	}
	d.Class, d.Vendor, d.Device = uint32(class), uint16(vendor), uint16(device)
	var errs []error
	sv, err := optAttr(f, rel+"/subsystem_vendor", 0, hex(16))
	errs = append(errs, err)
	sd, err := optAttr(f, rel+"/subsystem_device", 0, hex(16))
	errs = append(errs, err)
	d.SubVendor, d.SubDevice = uint16(sv), uint16(sd)
	numa, err := optAttr(f, rel+"/numa_node", -1, ParseInt)
	errs = append(errs, err)
	if numa < -1 || numa > 1<<16 {
		errs = append(errs, &AttrError{File: f.Path(rel + "/numa_node"), Err: malformed("NUMA node %d out of range", numa)})
		numa = -1
	}
	d.NUMANode = int(numa)
	d.MaxLinkSpeed, err = optAttr(f, rel+"/max_link_speed", 0, ParseLinkSpeed)
	errs = append(errs, err)
	d.MaxLinkWidth, err = optAttr(f, rel+"/max_link_width", 0, ParseLinkWidth)
	errs = append(errs, err)
	d.CurLinkSpeed, err = optAttr(f, rel+"/current_link_speed", 0, ParseLinkSpeed)
	errs = append(errs, err)
	d.CurLinkWidth, err = optAttr(f, rel+"/current_link_width", 0, ParseLinkWidth)
	errs = append(errs, err)
	d.Driver = f.LinkBase(rel + "/driver")
	if err := errors.Join(errs...); err != nil {
		return PCIDevice{}, err
	}
	return d, nil
}

// splitPCIPath splits a resolved device path
// ("devices/pci0000:00/0000:00:01.0/0000:01:00.0") into its host bridge and
// the bridges above the device. Elements that are neither (a VMD domain
// "pci10000:00" nested below a function) restart the chain at that bridge.
func splitPCIPath(real, bdf string) (string, []string, error) {
	parts := strings.Split(real, "/")
	if len(parts) < 3 || parts[0] != "devices" || parts[len(parts)-1] != bdf {
		return "", nil, malformed("resolves to %s, not devices/pci*/…/%s", real, bdf)
	}
	root := ""
	var anc []string
	for _, p := range parts[1 : len(parts)-1] {
		switch {
		case strings.HasPrefix(p, "pci"):
			root, anc = p, nil
		case IsBDF(p):
			anc = append(anc, p)
		default:
			return "", nil, malformed("unexpected element %q in PCI path %s", p, real)
		}
	}
	if root == "" {
		return "", nil, malformed("no host bridge (pci*) in PCI path %s", real)
	}
	return root, anc, nil
}

// PCIDeviceOf walks from a class device (a net interface, an RDMA device)
// up to the PCI function that owns it: it resolves rel (usually
// "class/net/eth0/device") and returns the nearest PCI address in the
// resolved path. ok is false for virtual devices without one.
func (f *FS) PCIDeviceOf(rel string) (bdf string, ok bool, err error) {
	if !f.Exists(rel) {
		return "", false, nil
	}
	real, err := f.Resolve(rel)
	if err != nil {
		return "", false, err
	}
	parts := strings.Split(real, "/")
	for i := len(parts) - 1; i >= 0; i-- {
		if IsBDF(parts[i]) {
			return parts[i], true, nil
		}
	}
	return "", false, nil
}

// String renders the device as lspci does ("0000:17:00.0 [0302] 10de:2335").
func (d PCIDevice) String() string {
	return fmt.Sprintf("%s [%04x] %04x:%04x", d.BDF, d.Class>>8, d.Vendor, d.Device)
}
