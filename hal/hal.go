// Package hal is weft's hardware-abstraction contract.
//
// A backend (one directory under hal/, one per interconnect) registers itself
// from init with [Register] and answers [Backend.Probe] with an
// [Availability]: "no NVIDIA driver" is a reason, not an error. Opened, a
// backend gives a [Device]: memory, streams, and the capabilities it offers
// on each link to a peer:
//
//   - memory-mapped ([MemoryMapped]): a peer's buffer is exported as opaque
//     handle bytes, imported and mapped, and kernels load and store to it;
//   - port-mapped ([PortMapped]): an engine executes put/signal/flush requests
//     that a CPU proxy drains from a FIFO;
//   - switch-mapped ([SwitchMapped]): a multicast group over several devices.
//
// Devices also execute plans ([Executor]): the size-independent programs of
// package [github.com/weftccl/weft/hal/plan] that algorithms build. GPU
// backends generate device source from a plan and compile it at run time
// ([KernelCompiler]); hal/host interprets it in Go.
//
// channels/ and algorithms/ are written only against this package; a backend
// is chosen at run time from the registry. Errors wrap the sentinels of
// errors.go so that callers test them with errors.Is.
package hal

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/env"
)

// Availability is a backend's answer to Probe.
type Availability struct {
	Available bool
	// Reason says why the backend is unavailable ("no NVIDIA driver:
	// libcuda.so.1 not found"), or describes what was found when it is.
	Reason string
}

// Backend is one hardware backend. Implementations register from init.
type Backend interface {
	// Name is the short name used by --hal and WEFT_REQUIRE ("host", "nvlink").
	Name() string
	// Probe reports whether the backend can open a device on this machine.
	// It must be cheap, must not fail, and must not leave state behind.
	Probe() Availability
	// Open opens one device for this process.
	Open(cfg Config) (Device, error)
}

// Config selects and labels the device a process opens.
type Config struct {
	// Ordinal is the backend-local device index (CUDA ordinal for nvlink).
	Ordinal int
	// Rank is the caller's rank, used only in messages.
	Rank int
	// JobID names the job; processes of one job that share memory must pass
	// the same value. hal/host uses it to name shared-memory objects.
	JobID string
}

// Capability is a set of link capabilities.
type Capability uint8

const (
	// CapMemoryMapped: peer memory can be mapped and accessed by loads/stores.
	CapMemoryMapped Capability = 1 << iota
	// CapPortMapped: an engine executes put/signal/flush requests (DMA, RDMA).
	CapPortMapped
	// CapSwitchMapped: multicast groups with in-switch reduction.
	CapSwitchMapped
)

func (c Capability) String() string {
	var parts []string
	if c&CapMemoryMapped != 0 {
		parts = append(parts, "memory-mapped")
	}
	if c&CapPortMapped != 0 {
		parts = append(parts, "port-mapped")
	}
	if c&CapSwitchMapped != 0 {
		parts = append(parts, "switch-mapped")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}

// Endpoint identifies a device across processes. It is exchanged through the
// bootstrap (JSON) so that each side can ask its device which capabilities
// the link offers.
type Endpoint struct {
	Backend  string `json:"backend"`
	Hostname string `json:"hostname"`
	// HostID distinguishes machines (and containers) sharing a hostname:
	// boot id plus IPC namespace.
	HostID   string `json:"host_id"`
	Ordinal  int    `json:"ordinal"`
	UUID     string `json:"uuid,omitempty"`
	PCIBusID string `json:"pci_bus_id,omitempty"`
	PID      int    `json:"pid"`
	// Node is the node the device belongs to: HostID unless WEFT_NODE_ID
	// names an emulated node. Devices of different nodes reach each other
	// only through a Network.
	Node string `json:"node,omitempty"`
	// Net holds this rank's Address on each opened network, by network
	// name (package channels fills it before the endpoints are exchanged).
	Net map[string][]byte `json:"net,omitempty"`
}

// NodeOf is the node of a device whose host is hostID: nodeID (the value
// of WEFT_NODE_ID, which backends read) when set, else hostID.
func NodeOf(hostID, nodeID string) string {
	if nodeID != "" {
		return nodeID
	}
	return hostID
}

// OtherNode reports why peer is on another node than e: "different node
// (node A vs node B)", or "" when they share one. An endpoint without a
// Node is on its HostID's node.
func (e Endpoint) OtherNode(peer Endpoint) string {
	a, b := NodeOf(e.HostID, e.Node), NodeOf(peer.HostID, peer.Node)
	if a == b {
		return ""
	}
	return fmt.Sprintf("different node (node %s vs node %s)", a, b)
}

// Link describes what a device can do on the link to one peer.
type Link struct {
	Caps Capability
	// Reason explains missing capabilities ("different hosts", "no peer
	// access between GPU 0 and GPU 3").
	Reason string
}

// DeviceInfo describes an opened device.
type DeviceInfo struct {
	Backend         string
	Ordinal         int
	Name            string // "NVIDIA H200", "host"
	Arch            string // "sm_90", "" for host
	UUID            string
	PCIBusID        string
	MemoryBytes     int64
	Multiprocessors int // SMs or CUs; host: GOMAXPROCS
	Driver          string
	Runtime         string
}

// Device is one opened device. Methods are safe for concurrent use unless
// noted. A Device may also implement MemoryMapped, PortMapped,
// SwitchMapped, Executor, KernelCompiler and GraphCapturer; test for them
// with type assertions.
type Device interface {
	Info() DeviceInfo
	Endpoint() Endpoint
	// Link reports the capabilities this device has towards peer.
	Link(peer Endpoint) Link
	// Alloc allocates bytes of zeroed device memory. bytes must be > 0;
	// errors wrap ErrInvalidArgument or ErrDevice (out of memory).
	Alloc(bytes int64) (Buffer, error)
	// AllocHost allocates zeroed host memory that the device can access
	// (pinned and mapped); used for FIFOs and control blocks.
	AllocHost(bytes int64) (Buffer, error)
	// Write copies src into dst at byte offset off, synchronously.
	Write(dst Buffer, off int64, src []byte) error
	// Read copies len(dst) bytes from src at byte offset off, synchronously.
	Read(dst []byte, src Buffer, off int64) error
	// NewStream creates an ordered queue of device work.
	NewStream() (Stream, error)
	// Close releases the device. Buffers and streams must be released first.
	Close() error
}

// Buffer is a region of memory addressable by one device.
type Buffer interface {
	// Addr is the address of the first byte in the owning device's address
	// space: a GPU virtual address, or a host virtual address for hal/host
	// and for host-pinned buffers.
	Addr() uint64
	// Size is the length in bytes.
	Size() int64
	// Host returns the bytes of a host-accessible buffer (hal/host buffers,
	// AllocHost buffers), or nil.
	Host() []byte
	// Free releases the memory, or unmaps an imported buffer. Using the
	// buffer afterwards is ErrInvalidUsage.
	Free() error
}

// Handle is an exported buffer: opaque bytes that another process of the same
// job imports. Its format belongs to the backend that made it.
type Handle []byte

// MemoryMapped is the memory-mapped capability.
type MemoryMapped interface {
	// Export makes b importable by other processes of the job. Errors wrap
	// ErrInvalidArgument for a buffer of another device and ErrInvalidUsage
	// for a freed one.
	Export(b Buffer) (Handle, error)
	// Import maps a buffer exported by a peer into this device's address
	// space. A malformed handle (wrong size, another backend's) is refused
	// with ErrInvalidArgument; a handle of another job or host, or of a
	// buffer freed since, with ErrInvalidUsage.
	Import(h Handle) (Buffer, error)
	// DeviceHeader is the device-side primitive library (C++ source) that
	// generated kernels include: system-scope release store / acquire load,
	// atomic add, fences, 8- and 16-byte single-instruction stores. Empty
	// for backends that execute plans in software.
	DeviceHeader() string
}

// StreamOps is the stream-ordered capability: copies and 64-bit flag
// operations that the host queues on a stream at a call, run in the
// stream's order by the device's copy engines and command front end, with
// no kernel and no proxy. Host-issued plans are made of it: because every
// operation a wait depends on is queued before the wait, at the call, no
// hardware queue shared with an application's streams can hold a cycle,
// which a kernel waiting for a proxy-driven engine can (docs/portchannel.md,
// "Copy engines beside other streams" and the host-issued CE plan; the
// AllGather of WEFT_ALGO=ce uses it). hal/host implements it, and
// internal/cudadev for hal/nvlink and hal/pcie (cuMemcpyAsync,
// cuStreamWriteValue64, cuStreamWaitValue64, with a host watchdog for the
// wait's deadline: a stream wait has none).
type StreamOps interface {
	// QueueOps queues ops on s, in order, after the work queued on s so
	// far. Addresses are this device's, or a peer's buffer mapped here
	// (MemoryMapped.Map). A copy may overlap nothing it does not name; a
	// wait holds the stream (and only it) until the word equals the value,
	// for at most WEFT_TIMEOUT, then fails the stream with an error
	// wrapping ErrTimeout that names the address, value and what it saw;
	// a write stores the value after every earlier operation of the stream
	// is complete and its data visible to peers.
	//
	// Lanes: an operation with Lane k > 0 runs on lane k, a stream of the
	// backend's that starts after the work queued on s so far and whose end
	// s waits for after the batch (fork and join); Lane 0 is s itself. The
	// order within a lane is kept; between lanes only flags order work, so
	// a copy on one lane overlaps a copy on another (separate copy engines
	// on a GPU). The backend submits the operations in list order and may
	// run every lane in s's order, so the list order itself must be one
	// that completes (hal/host runs lanes concurrently, as a GPU does): a GPU whose streams share one hardware
	// queue (CUDA_DEVICE_MAX_CONNECTIONS=1) runs them in that order. While
	// s captures a graph
	// the operations are recorded, with their values, and a replay runs
	// them again. Errors now: ErrInvalidArgument (an unknown kind, a lane
	// of MaxStreamLanes or more, a
	// negative size, a flag address not 8-byte aligned, an address no
	// mapping covers, a stream of another device), ErrInvalidUsage (freed
	// memory, a closed stream).
	QueueOps(s Stream, ops []StreamOp) error
	// StreamOpsSupport is nil where QueueOps can run, else an error
	// wrapping ErrNotSupported that says why (a GPU without 64-bit stream
	// memory operations). Communicators ask it once, at creation, so that
	// every rank makes the same choice of plans.
	StreamOpsSupport() error
	// AbortWaits makes every wait queued so far (outside graph captures)
	// on a word of b give up now, as at its deadline: the batch's stream
	// fails with an error wrapping ErrInvalidUsage and its remaining
	// operations run without waiting (a GPU backend stores the awaited
	// values until the batch completes), so the stream drains; what it
	// copies is then undefined. Comm.Abort calls it with the flags of its
	// host-issued plans. It does not block.
	AbortWaits(b Buffer)
	// WaitsFailed returns the first failure of a batch that waited on a
	// word of b (a wait past its deadline, or aborted), nil if none has
	// failed: a stream released that way completes with undefined data, so
	// a communicator reports this from its asynchronous error check, as
	// the kernels' timeouts are. It does not block.
	WaitsFailed(b Buffer) error
}

// CopyEnginePreference is an optional capability of a device with
// StreamOps: the backend's measured choice between its copy engines and
// the SM plans for an AllGather that no setting forces. CopyEngineMinBytes
// is the smallest AllGather output (nranks × segment bytes) from which a
// communicator of nranks ranks whose peers are all reachable over this
// backend's links takes the host-issued copy-engine AllGather by default;
// 0: never by default (WEFT_CE_MIN_BYTES and WEFT_ALGO=ce still choose
// it). CopyEngineMaxBytes is the largest output it takes by default, where
// the SM plans overtake it (0: no bound). A backend without the interface
// gets 0: the copy-engine default holds only where a backend has measured
// it on its links.
type CopyEnginePreference interface {
	CopyEngineMinBytes(nranks int) int64
	CopyEngineMaxBytes(nranks int) int64
}

// LL128Carrier is an optional capability of a device whose memory
// channels may carry plan.LL128 lines soundly: a warp's 16-byte stores to
// one 128-byte line reach the peer as one write, so a reader that sees the
// line's flag sees its data (NVLink; NCCL enables its LL128 protocol on
// the same condition). LL128 reports whether that holds on the link to
// peer; a communicator takes LL128 lines only where it holds on every
// link of every rank, and a device without the interface never runs
// LL128 plans.
type LL128Carrier interface {
	LL128(peer Endpoint) bool
}

// CopyEngineP2PPreference is an optional capability of a device with
// StreamOps and RangeExporter, as CopyEnginePreference for point-to-point
// operations (sends and receives, and the Gather, Scatter and all-to-all-v
// made of them): the smallest operation (bytes) from which a communicator
// of nranks ranks whose peers are all reachable over this backend's links
// moves it by copy engines straight into the receiver's buffer, exported
// at the call (the root package's p2pce.go); 0: never by default
// (WEFT_CE_P2P_MIN_BYTES still chooses it).
type CopyEngineP2PPreference interface {
	CopyEngineP2PMinBytes(nranks int) int64
}

// CopyEngineReducePreference is an optional capability of a device with
// StreamOps, as CopyEnginePreference for a Reduce: the smallest message
// (bytes) from which a communicator of nranks ranks whose peers are all
// reachable over this backend's links takes the host-issued copy-engine
// Reduce by default (the non-roots' copy engines push their inputs into
// landing slots on the root, a kernel of a few blocks reduces there); 0:
// never by default (WEFT_CE_REDUCE_MIN_BYTES and WEFT_ALGO=ce still
// choose it).
//
// CopyEngineReduceDirectMinBytes is the smallest Reduce (bytes) from which,
// on two ranks with the root's output apart from its input, the other rank
// pushes straight into the root's output (exported at the call, as a
// point-to-point receive buffer is) instead of into landing slots; 0: every
// size. A backend without the interface gets 0.
type CopyEngineReducePreference interface {
	CopyEngineReduceMinBytes(nranks int) int64
	CopyEngineReduceDirectMinBytes(nranks int) int64
}

// RangeExporter is an optional capability of a Device: exporting memory of
// the device that the caller allocated outside hal (an application's
// cudaMalloc, a buffer of the NCCL ABI's client), by address, so that a
// peer's Import maps it. ExportRange returns the handle of the whole
// allocation holding [addr, addr+n) and the offset of addr in it; the
// handle is only valid while the caller's allocation lives, and a new
// allocation at the same address gets a different handle. Errors wrap
// ErrInvalidArgument (no allocation of this device holds the range, or it
// is imported) or ErrNotSupported (memory this backend cannot export, such
// as a stream-ordered pool's).
type RangeExporter interface {
	ExportRange(addr uint64, n int64) (h Handle, off int64, err error)
}

// CopyEngineAllReducePreference is an optional capability of a device
// with StreamOps, as CopyEnginePreference for the AllReduce: the smallest
// message (bytes) from which a communicator of nranks ranks whose peers
// are all reachable over this backend's links takes the host-issued
// copy-engine AllReduce by default for AllReduces whose buffers are
// registered (weft.Comm.AllReduce: copy engines move the bytes straight
// into the peers' outputs, a StreamReduce kernel on a few SMs reduces);
// 0: never by default.
type CopyEngineAllReducePreference interface {
	CopyEngineAllReduceMinBytes(nranks int) int64
}

// StreamOpKind is what a StreamOp does.
type StreamOpKind uint8

const (
	// StreamCopy copies Bytes bytes from Src to Dst: by the copy engines,
	// or, where Kernel is set on a backend that runs kernels, by that
	// kernel on Blocks blocks of Threads threads with the parameter {Dst,
	// Src, 0, Bytes} (StreamReduceParams; channels.StreamCopyKernel): a
	// copy within a device on SMs leaves the copy engines to the links.
	// hal/host ignores Kernel.
	StreamCopy StreamOpKind = iota + 1
	// StreamWaitEq waits until the 64-bit word at Dst equals Value.
	StreamWaitEq
	// StreamWrite stores Value into the 64-bit word at Dst.
	StreamWrite
	// StreamReduce stores Src[i] ⊕ Src2[i] into Dst[i] for the Bytes/size
	// elements of Type, ⊕ being Op (Sum, Prod, Max or Min; the math of
	// hal/host's reduce.go and channels/device/weft_reduce.h, bit for bit).
	// Dst may equal Src or Src2; other overlaps are undefined. Bytes is a
	// whole number of elements. A backend that runs kernels (KernelCompiler)
	// computes it with Kernel, launched with Blocks blocks of Threads
	// threads and one by-value parameter {Dst, Src, Src2 uint64; Bytes
	// int64} (StreamReduceParams): channels.StreamReduceKernel compiles it
	// for the device, type and operator. hal/host computes it itself and
	// ignores Kernel, Blocks and Threads.
	StreamReduce
)

// StreamReduceParams is the by-value parameter of a StreamReduce kernel,
// laid out as the kernel's struct (four little-endian 64-bit words).
type StreamReduceParams struct {
	Dst, Src, Src2 uint64
	Bytes          int64
}

// MaxStreamLanes is the number of lanes of a StreamOps batch: lane 0 (the
// caller's stream) and up to three forked from it.
const MaxStreamLanes = 4

// StreamOp is one operation of StreamOps.QueueOps.
type StreamOp struct {
	Kind     StreamOpKind
	Dst, Src uint64 // device addresses; Src for copies only
	Bytes    int64  // copies only
	Value    uint64 // waits and writes
	Lane     uint8  // 0: the stream of the call; 1..MaxStreamLanes-1: a lane forked from it

	// StreamReduce only: the second operand, the element type and
	// operator. StreamReduce and StreamCopy: the kernel with its shape on
	// backends that run kernels (a copy without one uses the copy engines).
	Src2            uint64
	Type            plan.DataType
	Op              plan.RedOp
	Kernel          Function
	Blocks, Threads int
}

// WaitsOn reports whether one of ops is a wait on a word of b: the
// batches that StreamOps.AbortWaits and WaitsFailed concern.
func WaitsOn(ops []StreamOp, b Buffer) bool {
	lo, hi := b.Addr(), b.Addr()+uint64(b.Size())
	for _, op := range ops {
		if op.Kind == StreamWaitEq && op.Dst >= lo && op.Dst < hi {
			return true
		}
	}
	return false
}

// CheckStreamOps validates ops for StreamOps.QueueOps as every backend
// must: known kinds, lanes below MaxStreamLanes, copies of at least 0
// bytes, 8-byte aligned flag addresses, reductions of whole elements of a
// known type with a base operator other than Avg (and a kernel shape
// where a kernel is given). Errors wrap ErrInvalidArgument and
// name the operation.
func CheckStreamOps(ops []StreamOp) error {
	for i, op := range ops {
		if op.Lane >= MaxStreamLanes {
			return fmt.Errorf("stream operation %d of %d: lane %d (at most %d): %w", i, len(ops), op.Lane, MaxStreamLanes-1, ErrInvalidArgument)
		}
		switch op.Kind {
		case StreamCopy:
			if op.Bytes < 0 {
				return fmt.Errorf("stream operation %d of %d: copy of %d bytes: %w", i, len(ops), op.Bytes, ErrInvalidArgument)
			}
			if err := checkKernelShape(op); err != nil {
				return fmt.Errorf("stream operation %d of %d: copy: %v: %w", i, len(ops), err, ErrInvalidArgument)
			}
		case StreamWaitEq, StreamWrite:
			if op.Dst%8 != 0 {
				return fmt.Errorf("stream operation %d of %d: flag address %#x is not 8-byte aligned: %w", i, len(ops), op.Dst, ErrInvalidArgument)
			}
		case StreamReduce:
			if err := checkStreamReduce(op); err != nil {
				return fmt.Errorf("stream operation %d of %d: reduce: %v: %w", i, len(ops), err, ErrInvalidArgument)
			}
		default:
			return fmt.Errorf("stream operation %d of %d: unknown kind %d: %w", i, len(ops), op.Kind, ErrInvalidArgument)
		}
	}
	return nil
}

// checkStreamReduce is CheckStreamOps of one StreamReduce.
func checkStreamReduce(op StreamOp) error {
	switch {
	case !op.Type.Valid():
		return fmt.Errorf("unknown data type %d", op.Type)
	case !op.Op.Valid() || op.Op != op.Op.Base():
		return fmt.Errorf("operator %v (Sum, Prod, Max or Min)", op.Op)
	case op.Bytes < 0 || op.Bytes%int64(op.Type.Size()) != 0:
		return fmt.Errorf("%d bytes is not a whole number of %v elements", op.Bytes, op.Type)
	}
	return checkKernelShape(op)
}

// checkKernelShape checks the launch shape of an operation's kernel, where
// it has one: at least one block of a multiple of 32 threads.
func checkKernelShape(op StreamOp) error {
	if op.Kernel != nil && (op.Blocks < 1 || op.Threads < 32 || op.Threads%32 != 0) {
		return fmt.Errorf("kernel shape %d blocks × %d threads (at least 1 block of a multiple of 32 threads)", op.Blocks, op.Threads)
	}
	return nil
}

// PortMapped is the port-mapped capability: an engine (copy engine, RDMA
// NIC, host copy) moves bytes and applies signals on requests that a CPU
// proxy (package channels) drains from a FIFO; no SM thread spends its time
// on the transfer. It is the only capability of links that are not
// memory-mapped (PCIe without peer access, networks).
type PortMapped interface {
	// ExportPort makes b a destination of peers' engines and returns its
	// handle. Errors as MemoryMapped.Export.
	ExportPort(b Buffer) (Handle, error)
	// ImportPort makes a peer's exported buffer addressable by this
	// device's engines. The buffer's Addr is the address engines take as a
	// Put destination or a Signal target; on memory-mapped links it is the
	// mapping's address, elsewhere it may not be dereferenceable on this
	// device (Host returns nil). Errors as MemoryMapped.Import.
	ImportPort(h Handle) (Buffer, error)
	// NewEngine creates an engine bound to the link to peer. peer may be
	// this device's own endpoint: that engine moves bytes within the
	// device (Copy) and signals local semaphores.
	NewEngine(peer Endpoint) (Engine, error)
}

// Engine executes port-channel requests in the order they are issued.
// Requests are asynchronous: a method returns once the request is queued
// on the engine, not when its bytes have moved. Methods are called from one
// goroutine at a time (the proxy's).
//
// Addresses are device addresses: src and local destinations in this
// device's address space, remote destinations as ImportPort gives them.
//
// A semaphore word an engine signals must be signalled by that engine only,
// and hold 0 before its first signal: an engine may implement the add as a
// store of a counter it keeps per semaphore (a copy engine writes the new
// value with a stream-ordered store; a host-staged one sends it).
type Engine interface {
	// Put queues a copy of bytes from local address src to remote address
	// dst (inside a buffer imported with ImportPort from the engine's peer).
	Put(dst, src uint64, bytes int64) error
	// Copy queues a copy of bytes between two local addresses, ordered with
	// this engine's other requests (the receiver's scratch-to-output copy
	// of a port-channel plan, so that its "slot free" signal follows it).
	Copy(dst, src uint64, bytes int64) error
	// Signal queues: once every earlier request of this engine is complete
	// and its data visible at the destination, store count at the 64-bit
	// word countAddr and then add one to the 64-bit semaphore at semAddr
	// (release: a receiver that observes the new value also observes the
	// data and the count). Both addresses are remote addresses (local ones
	// for an engine bound to the own endpoint); countAddr 0 stores nothing.
	Signal(semAddr, countAddr, count uint64) error
	// Mark returns a ticket for the requests issued so far. Completed
	// returns the largest ticket whose requests are all complete at the
	// source (source buffers reusable, local copies done). Tickets start at
	// 1 and increase by one per Mark. Neither blocks nor allocates, so the
	// proxy can flush without stalling other channels.
	Mark() (uint64, error)
	Completed() (uint64, error)
	// Close waits for queued requests (bounded by the default deadline) and
	// releases the engine.
	Close() error
}

// AckSignaler is implemented by engines that can apply a release sooner
// than a Signal. A release (plan.Op.Ack on a port signal) is a reader
// telling a writer that it has read a slot the writer may now reuse; it
// announces none of the releaser's own puts, so AckSignal is Signal
// ordered after the engine's earlier copies (a slot copied out by the
// engine is read before it is released) but not after its earlier puts,
// whose landing the peer does not learn from it. hal/ucx sends it without
// first flushing the endpoint (a round trip to the peer) when this rank's
// own puts to the peer are in flight. The proxy calls Signal on engines
// without it; the contract is the same for both otherwise.
type AckSignaler interface {
	AckSignal(semAddr, countAddr, count uint64) error
}

// EngineBatcher is implemented by engines that send requests issued close
// together more cheaply as one: between BeginBatch and EndBatch an engine
// may hold a request back until the next one (hal/socket sends a small
// put and the signal after it as one frame, one write instead of two);
// EndBatch sends whatever is held. Ordering and completion are as
// without: a held request is complete at the source only once sent. The
// proxy of package channels brackets each pass over a FIFO with them.
type EngineBatcher interface {
	BeginBatch()
	EndBatch() error
	// Holding reports whether a request is held for the next one (the
	// proxy then waits a moment for it before ending the pass).
	Holding() bool
}

// SwitchMapped is the switch-mapped capability (NVLink SHARP, MSCCL++'s
// SwitchChannel, NCCL's NVLS and Multimem): a multicast group spans the
// same range of memory on several devices; a store through the group's
// address reaches every member, and a load-reduce through it returns the
// element-wise reduction of every member's copy, computed in the switch.
//
// Setting a group up takes three steps separated by barriers among its
// members (package channels runs them over the bootstrap):
//
//  1. one member calls NewMulticast and sends Handle to the others, who
//     call ImportMulticast; either call adds the caller's device to the
//     group;
//  2. after every member has joined, each calls Bind with local memory;
//  3. after every member has bound, Addr is valid on each and kernels use
//     it with the device header's multimem primitives.
//
// On shared NVIDIA hosts the hardware path stays disabled unless
// WEFT_NVLS=1 (architecture.md §8): there NewMulticast returns an error
// wrapping ErrNotSupported with that reason.
type SwitchMapped interface {
	// MulticastGranularity is the size in bytes that a group's length, and
	// the length and alignment of memory bound to it, are multiples of.
	MulticastGranularity() (int64, error)
	// NewMulticast creates a group of ranks devices (this one included),
	// bytes long (rounded up to the granularity). Errors wrap
	// ErrInvalidArgument for bytes ≤ 0 or ranks < 1, ErrNotSupported where
	// the device or the host policy does not allow multicast.
	NewMulticast(bytes int64, ranks int) (Multicast, error)
	// ImportMulticast joins the group whose Handle another process of the
	// job exported. A malformed handle is refused with ErrInvalidArgument;
	// a group of another job, or one already full or closed, with
	// ErrInvalidUsage.
	ImportMulticast(h Handle) (Multicast, error)
	// SwitchHeader is the device-side multimem library (C++ source, include
	// name "weft_switch_hal.h") that kernels of switch plans include:
	// load-reduce and store through a multicast address. Empty for backends
	// that execute plans in software.
	SwitchHeader() string
}

// Multicast is one device's membership of a multicast group.
type Multicast interface {
	// Handle is the exportable description of the group, for
	// ImportMulticast on the other members.
	Handle() (Handle, error)
	// Size is the group's length in bytes.
	Size() int64
	// Bind backs this member's copy of the group with local device memory b
	// (from Device.Alloc, at least Size bytes). Every member must have
	// joined first; errors wrap ErrInvalidUsage for a second Bind or a
	// group still missing members, ErrInvalidArgument for a buffer of
	// another device or one too small.
	Bind(b Buffer) error
	// Addr is the group's multicast address on this device, 0 before Bind.
	// Plain loads and stores through it are undefined; the device header's
	// multimem primitives use it (hal/host: the plan interpreter).
	Addr() uint64
	// Close unbinds and leaves the group; the last member to leave frees it.
	Close() error
}

// Stream is an ordered queue of device work.
type Stream interface {
	// Synchronize waits until all work queued so far is done or the deadline
	// passes (ErrTimeout). A zero deadline means the default wait deadline.
	Synchronize(deadline time.Time) error
	// Record places an event in the stream.
	Record() (Event, error)
	// After makes the work queued on this stream from now on wait for the
	// work queued on prev so far; prev is a stream of the same device
	// (ErrInvalidArgument otherwise) and prev == this stream does nothing.
	// While either stream captures a graph it orders nothing (the graph's
	// dependencies order captured work). A communicator calls it when a
	// call comes on another stream than its previous call, so that its
	// calls run in the order they were issued, as NCCL's do.
	After(prev Stream) error
	Close() error
}

// Event marks a point in a stream.
type Event interface {
	// Elapsed returns the time between start and this event; both must have
	// completed.
	Elapsed(start Event) (time.Duration, error)
	Synchronize(deadline time.Time) error
	Close() error
}

// GraphCapturer is implemented by devices whose streams can be captured into
// a replayable graph (CUDA graphs; hal/host records launches).
type GraphCapturer interface {
	BeginCapture(s Stream) error
	EndCapture(s Stream) (Graph, error)
}

// CaptureQuerier is an optional capability of a GraphCapturer: whether s
// is capturing a graph now (cuStreamIsCapturing). The copy-engine paths
// that map a peer's buffer at the call keep a mapping a capture recorded
// until the communicator closes, since every replay writes there again.
// Errors: ErrInvalidArgument for a stream of another device.
type CaptureQuerier interface {
	Capturing(s Stream) (bool, error)
}

// Graph is a captured sequence of stream work.
type Graph interface {
	Launch(s Stream) error
	Close() error
}

// KernelSource is device code to compile at run time.
type KernelSource struct {
	Name    string            // for messages and cache keys
	Source  string            // the translation unit
	Headers map[string]string // include name -> contents
	Options []string          // extra compiler options
}

// KernelCompiler is implemented by GPU backends.
type KernelCompiler interface {
	// Compile compiles src for this device's exact architecture, caching the
	// binary on disk by source hash, architecture and compiler version.
	Compile(src KernelSource) (Module, error)
}

// Module is a loaded device binary.
type Module interface {
	Function(name string) (Function, error)
	Close() error
}

// Function is a kernel entry point. Kernels take a single parameter, a
// struct passed by value, whose bytes are params.
type Function interface {
	Launch(s Stream, grid, block, sharedBytes int, params []byte) error
}

var (
	registryMu sync.Mutex
	registry   = map[string]Backend{}
)

// Register adds a backend to the registry. It panics if the name is taken:
// that is a programming error found at init.
func Register(b Backend) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[b.Name()]; dup {
		panic(fmt.Sprintf("hal: backend %q registered twice", b.Name()))
	}
	registry[b.Name()] = b
}

// Backends returns the registered backends sorted by name.
func Backends() []Backend {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]Backend, 0, len(registry))
	for _, b := range registry {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// Lookup returns the backend called name. The error wraps ErrInvalidArgument
// and lists the registered names.
func Lookup(name string) (Backend, error) {
	registryMu.Lock()
	b, ok := registry[name]
	registryMu.Unlock()
	if !ok {
		var names []string
		for _, b := range Backends() {
			names = append(names, b.Name())
		}
		return nil, fmt.Errorf("unknown HAL backend %q (registered: %s): %w", name, strings.Join(names, ", "), ErrInvalidArgument)
	}
	return b, nil
}

// init lets the environment table check WEFT_HAL against the registry: a
// value is valid when it names a registered backend, or when none is
// registered (the opener then reports it). internal/env sits below hal, so
// the registry hands it the check rather than env importing hal.
func init() {
	env.SetBackendCheck(func(name string) bool {
		if len(Backends()) == 0 {
			return true
		}
		_, err := Lookup(name)
		return err == nil
	})
}

// Probe probes the backend called name.
func Probe(name string) (Availability, error) {
	b, err := Lookup(name)
	if err != nil {
		return Availability{}, err
	}
	return b.Probe(), nil
}

// Open opens a device of the backend called name. An unavailable backend
// gives an error wrapping ErrNotSupported with the probe's reason.
func Open(name string, cfg Config) (Device, error) {
	b, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if a := b.Probe(); !a.Available {
		return nil, fmt.Errorf("open %s backend: %s: %w", name, a.Reason, ErrNotSupported)
	}
	return b.Open(cfg)
}

// Preference is the order in which Auto tries backends: accelerators first,
// the CPU reference last.
var preference = []string{"nvlink", "xgmi", "pcie", "host"}

// Auto returns the name of the first available registered backend in the
// order nvlink, xgmi, pcie, host, with the reasons the others were skipped.
func Auto() (string, []string, error) {
	var skipped []string
	for _, name := range preference {
		b, err := Lookup(name)
		if err != nil {
			continue
		}
		a := b.Probe()
		if a.Available {
			return name, skipped, nil
		}
		skipped = append(skipped, name+": "+a.Reason)
	}
	return "", skipped, fmt.Errorf("no HAL backend available (%s): %w", strings.Join(skipped, "; "), ErrNotSupported)
}

// Executor is implemented by devices that run plans.
type Executor interface {
	// Prepare readies a plan for launches with one data type and operator:
	// GPU backends generate and compile device code (cached), hal/host
	// builds an interpreter. Errors wrap ErrInvalidArgument for a plan that
	// fails plan.Validate or a data type or operator the device cannot run.
	Prepare(spec PlanSpec) (Program, error)
}

// PlanSpec is what Prepare needs.
type PlanSpec struct {
	Plan     *plan.Plan
	Bindings plan.Bindings
	DataType plan.DataType
	RedOp    plan.RedOp
	// Library is the channel device library (include name -> source) that
	// generated kernels call; GPU backends add their DeviceHeader to it.
	Library map[string]string
}

// Program is a prepared plan.
type Program interface {
	// Launch enqueues one execution on s. Failures inside the launch
	// (timeouts, count mismatches) are reported through the control block
	// of the plan's bindings once the stream is synchronised.
	Launch(s Stream, a *plan.Args) error
	Close() error
}
