package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// Cluster describes the machine a simulation runs on: Nodes nodes of
// GPUsPerNode GPUs, an NVLink domain inside each node, NICs between nodes
// and the switches between NICs. Bandwidths are per direction; GB/s are
// 10⁹ bytes per second, Gb/s 10⁹ bits per second, latencies µs.
type Cluster struct {
	Name        string    `yaml:"name" json:"name"`
	Nodes       int       `yaml:"nodes" json:"nodes"`
	GPUsPerNode int       `yaml:"gpus_per_node" json:"gpus_per_node"`
	NVLink      Link      `yaml:"nvlink" json:"nvlink"`
	NIC         NIC       `yaml:"nic" json:"nic"`
	Switching   Switching `yaml:"switching" json:"switching"`
	// HBMGBps is a GPU's memory bandwidth (GB/s, reads plus writes), which
	// bounds copies and reductions between local buffers.
	HBMGBps float64 `yaml:"hbm_gbps" json:"hbm_gbps"`
	// Model holds the calibrated constants of the GPU and of weft's
	// kernels (calibrate.go); zero fields take DefaultParams' values.
	Model Params `yaml:"model" json:"model"`
}

// Link is one GPU's NVLink port: GBps per direction (H100/H200 SXM, NV18:
// 18 links × 26.562 GB/s = 478 GB/s; /work/shared/design/gpu-host-facts.md)
// and the one-way latency of a store seen by a poller on the peer, µs.
type Link struct {
	GBps      float64 `yaml:"gbps" json:"gbps"`
	LatencyUs float64 `yaml:"latency_us" json:"latency_us"`
}

// NIC describes the network adapters of one node: Count NICs of Gbps each
// (per direction), shared evenly by the node's GPUs (GPU l uses NIC
// l·Count/GPUsPerNode), and the one-way latency of a put with its signal
// from GPU memory to a peer GPU's memory through them (NIC, proxy and
// first switch included), µs.
type NIC struct {
	Count     int     `yaml:"count" json:"count"`
	Gbps      float64 `yaml:"gbps" json:"gbps"`
	LatencyUs float64 `yaml:"latency_us" json:"latency_us"`
}

// Switching is the network between NICs. Kind "rail" (rail-optimised, as
// a DGX SuperPOD): NIC k of every node of a group of NodesPerLeaf nodes
// shares leaf switch k; traffic between NICs of different indices or
// different groups climbs to the spine. Kind "fattree": the NICs of
// NodesPerLeaf nodes share one leaf; traffic between leaves climbs to the
// spine. The spine is oversubscribed by Oversubscription (1: non-blocking):
// each node's share of its leaf's uplinks carries Count × Gbps /
// Oversubscription. Every switch hop beyond the first adds HopLatencyUs.
type Switching struct {
	Kind             string  `yaml:"kind" json:"kind"`
	NodesPerLeaf     int     `yaml:"nodes_per_leaf" json:"nodes_per_leaf"`
	Oversubscription float64 `yaml:"oversubscription" json:"oversubscription"`
	HopLatencyUs     float64 `yaml:"hop_latency_us" json:"hop_latency_us"`
}

// Switching kinds.
const (
	Rail    = "rail"
	FatTree = "fattree"
)

// GPUs is the number of GPUs (ranks) of the cluster.
func (c *Cluster) GPUs() int { return c.Nodes * c.GPUsPerNode }

// Validate checks the description and fills the model's zero fields from
// DefaultParams.
func (c *Cluster) Validate() error {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("sim: cluster %q: %s: %w", c.Name, fmt.Sprintf(f, a...), ErrInvalid)
	}
	switch {
	case c.Nodes < 1 || c.GPUsPerNode < 1:
		return bad("%d nodes × %d GPUs (want ≥ 1 each)", c.Nodes, c.GPUsPerNode)
	case c.GPUs() > MaxGPUs:
		return bad("%d GPUs (at most %d)", c.GPUs(), MaxGPUs)
	case c.NVLink.GBps <= 0 || c.NVLink.LatencyUs < 0:
		return bad("NVLink %g GB/s, %g µs (want > 0 GB/s, ≥ 0 µs)", c.NVLink.GBps, c.NVLink.LatencyUs)
	case c.Nodes > 1 && (c.NIC.Count < 1 || c.NIC.Gbps <= 0 || c.NIC.LatencyUs < 0):
		return bad("%d NICs of %g Gb/s, %g µs per node (want ≥ 1 NIC of > 0 Gb/s between nodes)", c.NIC.Count, c.NIC.Gbps, c.NIC.LatencyUs)
	case c.HBMGBps <= 0:
		return bad("HBM %g GB/s (want > 0)", c.HBMGBps)
	}
	s := &c.Switching
	if s.Kind == "" {
		s.Kind = Rail
	}
	if s.Kind != Rail && s.Kind != FatTree {
		return bad("switching %q (want %s or %s)", s.Kind, Rail, FatTree)
	}
	if s.NodesPerLeaf == 0 {
		s.NodesPerLeaf = c.Nodes
	}
	if s.Oversubscription == 0 {
		s.Oversubscription = 1
	}
	if s.NodesPerLeaf < 1 || s.Oversubscription < 1 || s.HopLatencyUs < 0 {
		return bad("switching: %d nodes per leaf, oversubscription %g, hop %g µs (want ≥ 1, ≥ 1, ≥ 0)", s.NodesPerLeaf, s.Oversubscription, s.HopLatencyUs)
	}
	return c.Model.fill()
}

// MaxGPUs bounds a cluster's size (the largest scale the model is drawn
// for is 16,384 GPUs).
const MaxGPUs = 1 << 17

// ErrInvalid is wrapped by the errors of invalid cluster descriptions,
// parameters and requests.
var ErrInvalid = fmt.Errorf("invalid simulation input")

// DGXH100 is Nodes DGX H100 nodes: 8 H100 SXM on NVLink 4 through
// NVSwitch (NV18, 478 GB/s per direction), 8 ConnectX-7 NICs of
// 400 Gb/s (one per GPU), rail-optimised leaves of 32 nodes (a SuperPOD
// scalable unit) under a non-blocking spine. Latencies: NVLink from the
// calibration (calibrate.go); NIC one-way put-with-signal 4 µs and 0.6 µs
// per extra switch hop are first choices, not measured here (NCCL's
// inter-node ring step on InfiniBand NDR is a few µs; see docs/scale.md).
func DGXH100(nodes int) Cluster {
	return Cluster{Name: fmt.Sprintf("dgx-h100-%dx8", nodes), Nodes: nodes, GPUsPerNode: 8,
		NVLink:    Link{GBps: 478, LatencyUs: DefaultParams().SignalHopUs},
		NIC:       NIC{Count: 8, Gbps: 400, LatencyUs: 4},
		Switching: Switching{Kind: Rail, NodesPerLeaf: 32, Oversubscription: 1, HopLatencyUs: 0.6},
		HBMGBps:   3350}
}

// Preset returns a named cluster: "h100x2" and "h200x2", "h200x4" (one
// node, the calibration machines), "socket2" (2 emulated nodes × 1 H100
// over a VM's TCP interface, calibrated on weft's socket runs), and
// "dgx-h100:N" (DGXH100(N)).
func Preset(name string) (Cluster, error) {
	one := func(n int, hbm float64) Cluster {
		return Cluster{Name: name, Nodes: 1, GPUsPerNode: n, NVLink: Link{GBps: 478, LatencyUs: DefaultParams().SignalHopUs}, HBMGBps: hbm}
	}
	var c Cluster
	switch {
	case name == "h100x2":
		c = one(2, 3350)
	case name == "h200x2":
		c = one(2, 4800)
	case name == "h200x4":
		c = one(4, 4800)
	case name == "socket2":
		c = Cluster{Name: name, Nodes: 2, GPUsPerNode: 1, NVLink: Link{GBps: 478, LatencyUs: DefaultParams().SignalHopUs},
			NIC: NIC{Count: 1, Gbps: SocketGbps, LatencyUs: SocketLatencyUs}, HBMGBps: 3350}
	case strings.HasPrefix(name, "dgx-h100:"):
		var n int
		if _, err := fmt.Sscanf(strings.TrimPrefix(name, "dgx-h100:"), "%d", &n); err != nil || n < 1 {
			return Cluster{}, fmt.Errorf("sim: preset %q: want dgx-h100:NODES: %w", name, ErrInvalid)
		}
		c = DGXH100(n)
	default:
		return Cluster{}, fmt.Errorf("sim: unknown preset %q (want h100x2, h200x2, h200x4, socket2 or dgx-h100:NODES): %w", name, ErrInvalid)
	}
	return c, c.Validate()
}

// ReadCluster reads a cluster description from a YAML (.yaml, .yml) or
// JSON file; unknown fields are errors.
func ReadCluster(path string) (Cluster, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Cluster{}, fmt.Errorf("sim: %w", err)
	}
	var c Cluster
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		err = d.Decode(&c)
	default:
		d := yaml.NewDecoder(bytes.NewReader(b))
		d.KnownFields(true)
		err = d.Decode(&c)
	}
	if err != nil {
		return Cluster{}, fmt.Errorf("sim: cluster file %s: %v: %w", path, err, ErrInvalid)
	}
	return c, c.Validate()
}

// Marshal writes the cluster as YAML, or as JSON when asJSON.
func (c Cluster) Marshal(asJSON bool) ([]byte, error) {
	if asJSON {
		return json.MarshalIndent(c, "", "  ")
	}
	return yaml.Marshal(c)
}
