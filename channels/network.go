package channels

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/env"
)

// Network is a communicator's network transport (hal.Network) opened for
// its device: the port-mapped capability towards peers on other nodes
// (Endpoint.Node differs, so the device offers no link to them). A
// communicator opens it once ([OpenNetwork]) when some peer is on another
// node; [Setup] then builds the port channels to those peers from the
// NetDevice's engines instead of the device's hal.PortMapped ones — the
// same proxy, FIFO and plans — and publishes this rank's Address in
// Endpoint.Net before the endpoints are exchanged.
//
// The NetDevice is closed when the owner has called Close and every plan
// set up over it is closed, so engines always close before it.
type Network struct {
	Name string
	dev  hal.Device
	nd   hal.NetDevice
	ep   hal.Endpoint // dev's endpoint with this rank's Address
	// nodes is every rank's node (hal.NodeOf) as it offered at open.
	nodes []string

	mu     sync.Mutex
	refs   int // the owner's and one per Resources
	closed bool
}

// nets are the opened networks by device, for Setup (one communicator per
// device at a time, as the shared proxy).
var nets struct {
	sync.Mutex
	m map[hal.Device]*Network
}

// OpenNetwork opens the network for dev: the one WEFT_NET names, else
// hal.AutoNetwork's choice. It is collective over ex (the ranks agree on a
// job id for the network's frames and handles). Plans set up on dev after
// it use the network for channels to peers of other nodes. Close releases
// it.
//
// Errors wrap hal.ErrInvalidArgument (WEFT_NET names no registered
// network), hal.ErrNotSupported (no network usable here, with the
// reasons), hal.ErrInvalidUsage (a network already open for dev) or the
// network's errors.
func OpenNetwork(ctx context.Context, ex Exchanger, dev hal.Device) (*Network, error) {
	var (
		n   hal.Network
		err error
	)
	if name := env.String("WEFT_NET"); name != "" {
		if n, err = hal.LookupNetwork(name); err != nil {
			return nil, fmt.Errorf("channels: WEFT_NET: %w", err)
		}
		if a := n.Probe(); !a.Available {
			return nil, fmt.Errorf("channels: network %s (WEFT_NET) is not usable: %s: %w", name, a.Reason, hal.ErrNotSupported)
		}
	} else if n, _, err = hal.AutoNetwork(); err != nil {
		return nil, fmt.Errorf("channels: rank %d has peers on other nodes: %w", ex.Rank(), err)
	}
	return OpenNetworkOf(ctx, ex, dev, n)
}

// OpenNetworkOf is OpenNetwork with an explicit network.
func OpenNetworkOf(ctx context.Context, ex Exchanger, dev hal.Device, n hal.Network) (*Network, error) {
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("channels: network job id: %v: %w", err, hal.ErrSystem)
	}
	// Each rank offers: network name, a random id (rank 0's names the
	// network's job), its host and its node, NUL-separated.
	self := dev.Endpoint()
	host, node := self.HostID, hal.NodeOf(self.HostID, self.Node)
	all, err := ex.AllGather(ctx, []byte(n.Name()+"\x00"+hex.EncodeToString(id[:])+"\x00"+host+"\x00"+node))
	if err != nil {
		return nil, fmt.Errorf("channels: open network %s: %w", n.Name(), err)
	}
	oneHost := true
	var job string
	nodes := make([]string, len(all))
	for r, b := range all {
		f := strings.SplitN(string(b), "\x00", 4)
		if len(f) != 4 || len(f[1]) != 2*len(id) {
			return nil, fmt.Errorf("channels: open network %s: rank %d sent a malformed network offer (%d bytes): %w", n.Name(), r, len(b), hal.ErrRemote)
		}
		nodes[r] = f[3]
		if f[0] != n.Name() {
			return nil, fmt.Errorf("channels: rank %d opens network %s but rank %d opens %q (set WEFT_NET alike on every rank): %w",
				ex.Rank(), n.Name(), r, f[0], hal.ErrInvalidUsage)
		}
		if r == 0 {
			job = "weft-net-" + f[1]
		}
		oneHost = oneHost && f[2] == host && host != ""
	}
	cfg := hal.NetConfig{Rank: ex.Rank(), NRanks: ex.Size(), JobID: job, OneHost: oneHost}
	// A bootstrap that holds the job's secret (bootstrap.KeyDeriver) keys
	// the network's handshakes with a key derived for this network alone.
	if kd, ok := ex.(interface{ DeriveKey(string) []byte }); ok {
		cfg.Secret = kd.DeriveKey("network " + job)
	}
	nd, err := n.Open(dev, cfg)
	if err != nil {
		return nil, fmt.Errorf("channels: open network %s on rank %d: %w", n.Name(), ex.Rank(), err)
	}
	nw := &Network{Name: n.Name(), dev: dev, nd: nd, ep: dev.Endpoint(), nodes: nodes, refs: 1}
	nw.ep.Net = map[string][]byte{n.Name(): nd.Address()}
	nets.Lock()
	defer nets.Unlock()
	if nets.m == nil {
		nets.m = map[hal.Device]*Network{}
	}
	if nets.m[dev] != nil {
		nd.Close()
		return nil, fmt.Errorf("channels: a network is already open for device %d of rank %d: %w", dev.Info().Ordinal, ex.Rank(), hal.ErrInvalidUsage)
	}
	nets.m[dev] = nw
	return nw, nil
}

// Device is the opened NetDevice.
func (nw *Network) Device() hal.NetDevice { return nw.nd }

// Endpoint is the device's endpoint with this rank's network address.
func (nw *Network) Endpoint() hal.Endpoint { return nw.ep }

// remote reports whether rank peer is on another node than this rank, by
// the nodes the ranks offered when the network opened.
func (nw *Network) remote(peer int) bool {
	me := hal.NodeOf(nw.ep.HostID, nw.ep.Node)
	return peer >= 0 && peer < len(nw.nodes) && nw.nodes[peer] != me
}

// HostWindows reports whether plans whose every channel goes over this
// network keep their scratch and semaphores in host memory mapped into
// the device: the NetDevice's receivers store into such windows with the
// CPU (hal.HostWindowed) and WEFT_NET_HOST_WINDOWS is not 0. The
// communicator's port plans then stage their puts' sources there
// (algorithms.Config.HostWindows).
func (nw *Network) HostWindows() bool {
	if hw, ok := nw.nd.(hal.HostWindowed); !ok || !hw.HostWindows() {
		return false
	}
	on, _ := env.Bool("WEFT_NET_HOST_WINDOWS", true)
	return on
}

// hostWindows reports whether a plan over channels chs places its scratch
// and semaphores in host memory mapped into the device: when every
// channel is a port channel to a peer on another node, or one the plan
// carries over the network (plan.Channel.Net), and the NetDevice's
// receivers store into host-visible windows with the CPU
// (hal.HostWindowed), unless WEFT_NET_HOST_WINDOWS=0. The peers' puts and
// signals then land with no call on the device's engine, and the
// kernel's waits poll host memory (system-scope loads). A plan with a
// channel within the node keeps device memory: its peers there map it or
// reach it with copy engines.
func (nw *Network) hostWindows(chs []plan.Channel) bool {
	if !nw.HostWindows() {
		return false
	}
	for _, c := range chs {
		if !c.Port || !(c.Net || nw.remote(c.Peer)) {
			return false
		}
	}
	return len(chs) > 0
}

// unexport withdraws the NetDevice's registration of b before b is freed
// (hal.PortUnexporter), so that no late frame of a peer lands in freed
// memory.
func (nw *Network) unexport(b hal.Buffer) error {
	u, ok := nw.nd.(hal.PortUnexporter)
	if !ok {
		return nil
	}
	if err := u.UnexportPort(b); err != nil {
		return fmt.Errorf("channels: network %s: %w", nw.Name, err)
	}
	return nil
}

// Err is the NetDevice's first receiver-side failure (it names the peer's
// rank), or nil.
func (nw *Network) Err() error { return nw.nd.Err() }

// FailPeer tells the network that rank peer is lost: the communicator
// found it stopped (err says how). Engines to it fail at once, and closing
// them does not wait for the peer's goodbye. Networks that keep no such
// state ignore it.
func (nw *Network) FailPeer(peer int, err error) {
	if f, ok := nw.nd.(interface{ FailPeer(int, error) }); ok {
		f.FailPeer(peer, err)
	}
}

// Close detaches the network from the device; the NetDevice closes once
// the plans set up over it are closed too.
func (nw *Network) Close() error {
	nets.Lock()
	if nets.m[nw.dev] == nw {
		delete(nets.m, nw.dev)
	}
	nets.Unlock()
	nw.mu.Lock()
	if nw.closed {
		nw.mu.Unlock()
		return nil
	}
	nw.closed = true
	nw.mu.Unlock()
	return nw.release()
}

// networkOf returns dev's open network with a reference taken, or nil.
func networkOf(dev hal.Device) *Network {
	nets.Lock()
	nw := nets.m[dev]
	nets.Unlock()
	if nw == nil {
		return nil
	}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.refs == 0 {
		return nil
	}
	nw.refs++
	return nw
}

func (nw *Network) release() error {
	nw.mu.Lock()
	nw.refs--
	last := nw.refs == 0
	nw.mu.Unlock()
	if !last {
		return nil
	}
	if err := nw.nd.Close(); err != nil {
		return fmt.Errorf("channels: close network %s: %w", nw.Name, err)
	}
	return nil
}
