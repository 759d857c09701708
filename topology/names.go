package topology

import "fmt"

// pciNames names the GPUs weft is most often run on, by PCI vendor and
// device id (from the PCI ID database), for machines where no vendor
// library is available to say.
var pciNames = map[[2]uint16]string{
	{0x10de, 0x20b0}: "NVIDIA A100-SXM4-40GB",
	{0x10de, 0x20b2}: "NVIDIA A100-SXM4-80GB",
	{0x10de, 0x20b5}: "NVIDIA A100 80GB PCIe",
	{0x10de, 0x2330}: "NVIDIA H100 80GB HBM3",
	{0x10de, 0x2331}: "NVIDIA H100 PCIe",
	{0x10de, 0x2335}: "NVIDIA H200",
	{0x10de, 0x2342}: "NVIDIA GH200",
	{0x10de, 0x2901}: "NVIDIA B200",
	{0x10de, 0x26b5}: "NVIDIA L40",
	{0x10de, 0x26b9}: "NVIDIA L40S",
	{0x10de, 0x2684}: "NVIDIA GeForce RTX 4090",
	{0x10de, 0x2230}: "NVIDIA RTX A6000",
	{0x1002, 0x738c}: "AMD Instinct MI100",
	{0x1002, 0x740c}: "AMD Instinct MI250X/MI250",
	{0x1002, 0x740f}: "AMD Instinct MI210",
	{0x1002, 0x74a1}: "AMD Instinct MI300X",
	{0x1002, 0x74a5}: "AMD Instinct MI325X",
}

func pciName(vendor, device uint16) string {
	if n, ok := pciNames[[2]uint16{vendor, device}]; ok {
		return n
	}
	switch vendor {
	case 0x10de:
		return fmt.Sprintf("NVIDIA device %04x", device)
	case 0x1002:
		return fmt.Sprintf("AMD device %04x", device)
	}
	return fmt.Sprintf("%04x:%04x", vendor, device)
}

// className names a PCI class code by its base class and subclass (PCI
// Code and ID Assignment Specification).
func className(class uint32) string {
	switch class >> 8 {
	case 0x0100:
		return "SCSI controller"
	case 0x0106:
		return "SATA controller"
	case 0x0108:
		return "NVMe controller"
	case 0x0180:
		return "Mass storage controller"
	case 0x0200:
		return "Ethernet controller"
	case 0x0207:
		return "InfiniBand controller"
	case 0x0280:
		return "Network controller"
	case 0x0300:
		return "VGA compatible controller"
	case 0x0302:
		return "3D controller"
	case 0x0380:
		return "Display controller"
	case 0x0600:
		return "Host bridge"
	case 0x0601:
		return "ISA bridge"
	case 0x0604:
		return "PCI bridge"
	case 0x0680:
		return "Bridge"
	case 0x0880:
		return "System peripheral"
	case 0x0c03:
		return "USB controller"
	case 0x0c05:
		return "SMBus"
	case 0x1200:
		return "Processing accelerator"
	}
	if class>>16 == 0xff {
		return "Unassigned class"
	}
	switch class >> 16 {
	case 0x01:
		return "Mass storage controller"
	case 0x02:
		return "Network controller"
	case 0x03:
		return "Display controller"
	case 0x06:
		return "Bridge"
	case 0x08:
		return "System peripheral"
	case 0x0c:
		return "Serial bus controller"
	}
	return fmt.Sprintf("Class %04x", class>>8)
}
