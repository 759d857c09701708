package ib

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/ibverbs"
	"github.com/weftccl/weft/topology/sysfs"
)

// Name is the network's name in WEFT_NET and reports.
const Name = "ib"

func init() { hal.RegisterNetwork(network{}) }

type network struct{}

func (network) Name() string { return Name }

// Probe reports whether an RDMA port is usable: a device under
// /sys/class/infiniband (listed with github.com/Mellanox/rdmamap, or below
// WEFT_SYSFS_ROOT), the verbs library, a device that WEFT_IB_HCA selects
// and an active port on it. It opens devices only to query their ports.
func (network) Probe() hal.Availability {
	opts, err := OptionsFromEnv()
	if err != nil {
		return hal.Availability{Reason: err.Error()}
	}
	return probe(opts)
}

// Open opens the network for dev with OptionsFromEnv.
func (network) Open(dev hal.Device, cfg hal.NetConfig) (hal.NetDevice, error) {
	opts, err := OptionsFromEnv()
	if err != nil {
		return nil, fmt.Errorf("ib: %v: %w", err, hal.ErrInvalidArgument)
	}
	return Open(dev, cfg, opts)
}

// Staging says how memory that peers write into is registered.
type Staging int

const (
	// StagingAuto registers host memory (Buffer.Host non-nil) directly,
	// device memory through dma-buf where the device is a DmaBufExporter,
	// and stages the rest through host memory.
	StagingAuto Staging = iota
	// StagingAlways stages every buffer through a registered host bounce
	// region, as for a device the NIC cannot reach (tests use it over
	// hal/host).
	StagingAlways
)

// Options configure a NetDevice. Zero fields take their defaults.
type Options struct {
	// Library is the verbs library (default ibverbs.Library():
	// WEFT_IBVERBS_LIB or libibverbs.so.1).
	Library string
	// HCA selects devices and ports, NCCL_IB_HCA syntax (WEFT_IB_HCA).
	HCA string
	// GIDIndex is the RoCE GID index; -1 chooses the first IPv4-mapped GID
	// (RoCEv2 over IPv4), else index 0 (WEFT_IB_GID_INDEX).
	GIDIndex int
	// SysfsRoot is where Probe looks for class/infiniband (default
	// WEFT_SYSFS_ROOT, else /sys).
	SysfsRoot string
	// Chunk is the largest RDMA write a put is split into (default 1 MiB,
	// capped by the port's max_msg_sz).
	Chunk int64
	// QueueDepth is the send queue and completion queue depth of each
	// queue pair (default 512).
	QueueDepth int
	// Staging selects how exported buffers are registered.
	Staging Staging
}

// OptionsFromEnv reads WEFT_IBVERBS_LIB, WEFT_IB_HCA, WEFT_IB_GID_INDEX and
// WEFT_SYSFS_ROOT.
func OptionsFromEnv() (Options, error) {
	o := Options{Library: ibverbs.Library(), HCA: env.String("WEFT_IB_HCA"), GIDIndex: -1, SysfsRoot: env.String("WEFT_SYSFS_ROOT")}
	if v, ok, err := env.Int("WEFT_IB_GID_INDEX"); err != nil {
		return o, err
	} else if ok {
		o.GIDIndex = v
	}
	return o, nil
}

func (o Options) withDefaults() (Options, error) {
	if o.Library == "" {
		o.Library = ibverbs.Library()
	}
	if o.Chunk == 0 {
		o.Chunk = 1 << 20
	}
	if o.QueueDepth == 0 {
		o.QueueDepth = 512
	}
	if o.Chunk < 8 || o.Chunk > 1<<30 || o.QueueDepth < 4 || o.QueueDepth > 16384 || o.GIDIndex < -1 || o.GIDIndex > 255 {
		return o, fmt.Errorf("ib: options %+v: chunk 8 B to 1 GiB, queue depth 4 to 16384, GID index -1 to 255: %w", o, hal.ErrInvalidArgument)
	}
	return o, nil
}

// HCAFilter is a parsed NCCL_IB_HCA-style list: "mlx5_0,mlx5_1:1" selects
// devices by name prefix (and optionally a port); a leading "^" excludes
// the listed ones instead; a leading "=" matches names exactly.
type HCAFilter struct {
	Exclude, Exact bool
	Items          []HCAItem
}

// HCAItem is one entry: a device name (or prefix) and a port (0: any).
type HCAItem struct {
	Name string
	Port int
}

// ParseHCA parses s; "" selects everything.
func ParseHCA(s string) (HCAFilter, error) {
	var f HCAFilter
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "^") {
		f.Exclude, s = true, s[1:]
	}
	if strings.HasPrefix(s, "=") {
		f.Exact, s = true, s[1:]
	}
	for _, it := range strings.Split(s, ",") {
		it = strings.TrimSpace(it)
		if it == "" {
			continue
		}
		name, port, hasPort := strings.Cut(it, ":")
		item := HCAItem{Name: name}
		if hasPort {
			p, err := strconv.Atoi(port)
			if err != nil || p < 1 || p > 255 {
				return HCAFilter{}, fmt.Errorf("WEFT_IB_HCA=%q: bad port %q in %q", s, port, it)
			}
			item.Port = p
		}
		if name == "" {
			return HCAFilter{}, fmt.Errorf("WEFT_IB_HCA=%q: empty device name in %q", s, it)
		}
		f.Items = append(f.Items, item)
	}
	return f, nil
}

// Match reports whether device dev, port port is selected.
func (f HCAFilter) Match(dev string, port int) bool {
	if len(f.Items) == 0 {
		return true
	}
	hit := false
	for _, it := range f.Items {
		nameOK := dev == it.Name || (!f.Exact && strings.HasPrefix(dev, it.Name))
		if nameOK && (it.Port == 0 || it.Port == port) {
			hit = true
			break
		}
	}
	return hit != f.Exclude
}

// candidate is a usable port.
type candidate struct {
	dev  string
	port int
	attr ibverbs.PortAttr
}

// findPorts opens lib and lists the selected ports with their state. why
// explains an empty result.
func findPorts(opts Options) (lib *ibverbs.Lib, active []candidate, why string) {
	filter, err := ParseHCA(opts.HCA)
	if err != nil {
		return nil, nil, err.Error()
	}
	root := opts.SysfsRoot
	fs, err := sysfs.Open(root)
	if err != nil {
		return nil, nil, fmt.Sprintf("no RDMA device (checked %s/class/infiniband: %v)", strings.TrimRight(rootOr(root), "/"), err)
	}
	if len(sysfs.NewRDMALister(fs).Devices()) == 0 {
		return nil, nil, fmt.Sprintf("no RDMA device (checked %s/class/infiniband)", strings.TrimRight(rootOr(root), "/"))
	}
	lib, err = ibverbs.Open(opts.Library)
	if err != nil {
		return nil, nil, err.Error()
	}
	names, err := lib.Devices()
	if err != nil || len(names) == 0 {
		return lib, nil, fmt.Sprintf("no RDMA device (%s lists none: %v)", opts.Library, err)
	}
	var down []string
	for _, n := range names {
		ctx, err := lib.OpenDevice(n)
		if err != nil {
			down = append(down, fmt.Sprintf("%s: %v", n, err))
			continue
		}
		attr, err := ctx.QueryDevice()
		ports := attr.PhysPorts
		if err != nil || ports < 1 {
			ports = 1
		}
		for p := 1; p <= ports; p++ {
			if !filter.Match(n, p) {
				continue
			}
			pa, err := ctx.QueryPort(p)
			switch {
			case err != nil:
				down = append(down, fmt.Sprintf("%s:%d: %v", n, p, err))
			case pa.State != ibverbs.PortActive:
				down = append(down, fmt.Sprintf("%s:%d %s", n, p, pa.StateName()))
			default:
				active = append(active, candidate{dev: n, port: p, attr: pa})
			}
		}
		ctx.Close()
	}
	if len(active) == 0 {
		if len(down) == 0 {
			return lib, nil, fmt.Sprintf("no RDMA device matches WEFT_IB_HCA=%q (devices: %s)", opts.HCA, strings.Join(names, ", "))
		}
		return lib, nil, "port down: " + strings.Join(down, "; ")
	}
	return lib, active, ""
}

func rootOr(r string) string {
	if r == "" {
		return sysfs.DefaultRoot
	}
	return r
}

// Probe is the network's Probe with explicit options.
func Probe(opts Options) hal.Availability { return probe(opts) }

func probe(opts Options) hal.Availability {
	opts, err := opts.withDefaults()
	if err != nil {
		return hal.Availability{Reason: err.Error()}
	}
	_, active, why := findPorts(opts)
	if len(active) == 0 {
		return hal.Availability{Reason: why}
	}
	var found []string
	for _, c := range active {
		found = append(found, fmt.Sprintf("%s:%d (%s)", c.dev, c.port, linkName(c.attr.LinkLayer)))
	}
	return hal.Availability{Available: true, Reason: strings.Join(found, ", ")}
}

func linkName(l int) string {
	if l == ibverbs.LinkEthernet {
		return "RoCE"
	}
	return "InfiniBand"
}
