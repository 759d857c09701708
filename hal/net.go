package hal

import (
	"fmt"
	"sort"
	"strings"
)

// Network is a transport between devices that share no memory-mapped or
// port-mapped link: devices on different nodes (or on emulated nodes of one
// host, WEFT_NODE_ID). It is the port-mapped capability carried over a
// network: RDMA verbs (hal/ib) or TCP sockets (hal/socket), as NCCL's net
// plugins are. A network registers itself from init with RegisterNetwork;
// package channels opens it for the local device and uses its engines
// exactly as it uses a device's [PortMapped] engines, through the same
// proxy and FIFO.
type Network interface {
	// Name is the short name used by WEFT_NET and in reports ("ib",
	// "socket").
	Name() string
	// Probe reports whether the transport can run here ("no RDMA device",
	// "no interface matches WEFT_SOCKET_IFNAME=eth9"). Cheap; never fails;
	// leaves nothing behind.
	Probe() Availability
	// Open readies the transport for dev, the device whose memory its
	// engines read and write (directly where the NIC reaches it, else
	// staged through host memory with dev's copies). cfg names this rank
	// and the job.
	Open(dev Device, cfg NetConfig) (NetDevice, error)
}

// NetConfig is what a Network needs to open.
type NetConfig struct {
	Rank   int    // this process's rank, for messages and frames
	NRanks int    // ranks of the job, ≥ 1
	JobID  string // the job; frames and handles of another job are refused
	// Secret is the key (16 to 64 bytes) with which every connection of
	// the network proves it belongs to the job, by challenge and response;
	// it never crosses the wire. Package channels derives it from the
	// job's bootstrap secret. nil: the network is unauthenticated (only
	// JobID is checked) and logs a warning once.
	Secret []byte
	// OneHost says that every rank of the job runs on this host (one
	// HostID: emulated nodes): a network that picks an interface keeps to
	// loopback unless told otherwise, so nothing listens beyond the host.
	OneHost bool
}

// NetDevice is one rank's side of a Network. It is port-mapped: ExportPort
// registers local memory as a destination of peers' engines (an RDMA
// memory region, a socket receiver's window), ImportPort resolves a peer's
// registration to the remote address an engine takes, NewEngine connects
// to a peer. The peer's Endpoint must carry its Address under the
// network's name in Endpoint.Net (package channels exchanges them through
// the bootstrap before connecting).
//
// Received puts and signals are applied by the NetDevice itself (a
// receiver goroutine per connection for sockets; the NIC for RDMA) in the
// order each engine issued them: a signal's semaphore is stored only after
// the data of earlier puts of that engine is visible in the destination
// device's memory.
type NetDevice interface {
	PortMapped
	// Address is this rank's connection information (listening addresses,
	// queue-pair numbers), opaque to everything but the network itself.
	Address() []byte
	// Err reports the first failure of the link to any peer that is not
	// the answer of an engine call: a peer lost while feeding this rank, a
	// malformed or foreign frame (sockets), a queue pair in error (RDMA).
	// It names the peer's rank; nil while every link is healthy.
	Err() error
	// Close stops receiving, closes every connection and engine, and
	// releases registrations. Errors of a peer lost earlier are not
	// repeated here.
	Close() error
}

// PortUnexporter is implemented by port-mapped devices whose registrations
// a peer can reach until they are withdrawn (every NetDevice of weft: a
// socket receiver's window table, an RDMA memory region): UnexportPort
// withdraws ExportPort's registration of b, after which peers' puts and
// signals naming it are refused, and returns once nothing of the network
// is writing into b, so that its owner may free it. Package channels calls
// it before freeing a plan's scratch and semaphores. Errors wrap
// ErrInvalidArgument when b is not exported there.
type PortUnexporter interface {
	UnexportPort(b Buffer) error
}

// HostWindowed is implemented by NetDevices whose receivers store into
// registrations with a host view (Buffer.Host: memory from
// Device.AllocHost, hal/host memory) with the CPU: a put read from the
// wire straight into the window, a signal as an atomic add, with no call
// on the device's engine on the path. HostWindows reports whether they do
// (a transport may be configured not to); package channels then places the
// scratch and semaphores of plans whose every channel goes over the
// network in host memory mapped into the device (docs/network.md, "Small
// messages: the host-memory path"), as NCCL's socket transport keeps its
// buffers in host memory.
type HostWindowed interface {
	HostWindows() bool
}

var (
	netRegistry = map[string]Network{}
	// netPreference is AutoNetwork's order where no RDMA port is active:
	// UCX then runs over TCP, which on the 2×H100 host (two emulated
	// nodes, docs/bench/2026-11-26l-h100x2/) still trailed hal/socket at
	// small sizes (64 B all_gather 28 against 19–26 µs) and one-way at
	// 256 KB – 1 MB, so it comes after socket there.
	netPreference = []string{"ib", "socket", "ucx"}
	// rdmaPreference is the order where the ib network is available (an
	// active RDMA port): UCX first, driving the NIC with its own verbs
	// transports (RC, DC) as Open MPI does and tuned by the UCX_*
	// variables clusters set, ahead of hal/ib, weft's own verbs, which has
	// not yet run on RDMA hardware.
	rdmaPreference = []string{"ucx", "ib", "socket"}
)

// RegisterNetwork adds a network to the registry; it panics if the name is
// taken (a programming error found at init).
func RegisterNetwork(n Network) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := netRegistry[n.Name()]; dup {
		panic(fmt.Sprintf("hal: network %q registered twice", n.Name()))
	}
	netRegistry[n.Name()] = n
}

// Networks returns the registered networks sorted by name.
func Networks() []Network {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]Network, 0, len(netRegistry))
	for _, n := range netRegistry {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// LookupNetwork returns the network called name; the error wraps
// ErrInvalidArgument and lists the registered names.
func LookupNetwork(name string) (Network, error) {
	registryMu.Lock()
	n, ok := netRegistry[name]
	registryMu.Unlock()
	if !ok {
		var names []string
		for _, n := range Networks() {
			names = append(names, n.Name())
		}
		return nil, fmt.Errorf("unknown network %q (registered: %s): %w", name, strings.Join(names, ", "), ErrInvalidArgument)
	}
	return n, nil
}

// AutoNetwork returns the first available registered network, with the
// reasons the others were skipped: where the ib network is available (an
// active RDMA port), in the order ucx, ib, socket — UCX drives the NIC
// where its libraries load; elsewhere ib, socket, ucx (socket is always
// available, so UCX over TCP only by WEFT_NET=ucx).
func AutoNetwork() (Network, []string, error) {
	order := netPreference
	if n, err := LookupNetwork("ib"); err == nil && n.Probe().Available {
		order = rdmaPreference
	}
	var skipped []string
	for _, name := range order {
		n, err := LookupNetwork(name)
		if err != nil {
			continue
		}
		if a := n.Probe(); a.Available {
			return n, skipped, nil
		} else {
			skipped = append(skipped, name+": "+a.Reason)
		}
	}
	return nil, skipped, fmt.Errorf("no network transport available (%s): %w", strings.Join(skipped, "; "), ErrNotSupported)
}
