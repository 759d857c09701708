package topology

import (
	"errors"
	"fmt"
	"os"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/topology/amdsmi"
	"github.com/weftccl/weft/topology/kfd"
	"github.com/weftccl/weft/topology/nvml"
	"github.com/weftccl/weft/topology/sysfs"
)

// Options control Discover. The zero value discovers the live machine.
type Options struct {
	// SysfsRoot is the sysfs tree to read. "" means WEFT_SYSFS_ROOT, and
	// /sys when that is unset (explicit option > environment > default).
	SysfsRoot string
	// NVML and AMDSMI are the library sources; nil means the system
	// library (nvml.Open, amdsmi.Open). Tests and fixtures pass
	// nvml.Static and amdsmi.Static.
	NVML   nvml.Source
	AMDSMI amdsmi.Source
	// SkipNVML and SkipAMDSMI leave a library source out; it is then listed
	// as skipped. The KFD reader is part of the sysfs tree and always runs.
	SkipNVML, SkipAMDSMI bool
	// Hostname overrides os.Hostname (fixtures).
	Hostname string
}

// Discover reads every source and builds the System. Only an unusable
// sysfs root is an error (wrapping hal.ErrNotSupported); a missing library
// or driver becomes a SourceStatus with its reason, and a malformed file a
// Warning naming it, so that the rest of the machine is still described.
func Discover(opts Options) (*System, error) {
	log := env.Logger("TOPO")
	root := opts.SysfsRoot
	if root == "" {
		root = env.String("WEFT_SYSFS_ROOT")
	}
	f, err := sysfs.Open(root)
	if err != nil {
		return nil, fmt.Errorf("topology discovery: %w", err)
	}
	in := &inputs{root: f.Root(), hostname: opts.Hostname}
	if in.hostname == "" {
		in.hostname, _ = os.Hostname()
	}
	warn := func(err error) {
		for _, e := range flatten(err) {
			in.warnings = append(in.warnings, e.Error())
			log.Warn("sysfs", "err", e)
		}
	}
	in.cpu, err = f.ReadCPUID()
	warn(err)
	in.numa, err = f.ReadNUMANodes()
	warn(err)
	in.pci, err = f.ReadPCIDevices()
	warn(err)
	in.nets, err = f.ReadNetDevices()
	warn(err)
	in.rdma, err = f.ReadRDMADevices(nil)
	warn(err)
	in.sources = append(in.sources, SourceStatus{Name: "sysfs", Available: true,
		Detail: fmt.Sprintf("%s: %d NUMA nodes, %d PCI functions, %d PCI network interfaces, %d RDMA devices",
			f.Root(), len(in.numa), len(in.pci), len(in.nets), len(in.rdma))})
	log.Info("sysfs read", "root", f.Root(), "pci", len(in.pci), "numa", len(in.numa))

	switch {
	case opts.SkipNVML:
		in.sources = append(in.sources, SourceStatus{Name: "nvml", Detail: "skipped"})
	default:
		src := opts.NVML
		if src == nil {
			src = nvml.Open()
		}
		snap, err := src.Snapshot()
		if err != nil {
			in.sources = append(in.sources, SourceStatus{Name: "nvml", Detail: err.Error()})
			log.Info("nvml unavailable", "err", err)
		} else {
			in.nv = &snap
			in.sources = append(in.sources, SourceStatus{Name: "nvml", Available: true,
				Detail: fmt.Sprintf("driver %s, %d GPUs", snap.DriverVersion, len(snap.Devices))})
		}
	}

	nodes, err := kfd.Read(f)
	switch {
	case nodes == nil && err != nil:
		in.sources = append(in.sources, SourceStatus{Name: "kfd", Detail: firstLine(err)})
		if !errors.Is(err, hal.ErrNotSupported) {
			warn(err)
		}
	default:
		warn(err)
		in.kfd = nodes
		gpus := 0
		for _, n := range nodes {
			if n.IsGPU() {
				gpus++
			}
		}
		in.sources = append(in.sources, SourceStatus{Name: "kfd", Available: true,
			Detail: fmt.Sprintf("%d nodes, %d GPUs", len(nodes), gpus)})
	}

	switch {
	case opts.SkipAMDSMI:
		in.sources = append(in.sources, SourceStatus{Name: "amdsmi", Detail: "skipped"})
	default:
		src := opts.AMDSMI
		if src == nil {
			src = amdsmi.Open()
		}
		snap, err := src.Snapshot()
		if err != nil {
			in.sources = append(in.sources, SourceStatus{Name: "amdsmi", Detail: err.Error()})
			log.Info("amdsmi unavailable", "err", err)
		} else {
			in.amd = &snap
			in.sources = append(in.sources, SourceStatus{Name: "amdsmi", Available: true,
				Detail: fmt.Sprintf("%s, %d GPUs", snap.Library, len(snap.Devices))})
		}
	}
	return build(in), nil
}

// flatten splits errors.Join results into their parts.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

func firstLine(err error) string {
	parts := flatten(err)
	if len(parts) == 0 {
		return ""
	}
	return parts[0].Error()
}

// inputs is everything the sources reported.
type inputs struct {
	root, hostname string
	cpu            sysfs.CPUID
	numa           []sysfs.NUMANode
	pci            []sysfs.PCIDevice
	nets           []sysfs.NetDevice
	rdma           []sysfs.RDMADevice
	nv             *nvml.Snapshot
	kfd            []kfd.Node
	amd            *amdsmi.Snapshot
	sources        []SourceStatus
	warnings       []string
}
