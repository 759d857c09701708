// Package ucx is weft's network through UCX (the UCP layer of Open UCX,
// the engine of Open MPI): InfiniBand and RoCE (rc, dc, ud verbs), TCP and
// shared memory, chosen and tuned by UCX's own UCX_* variables. It
// registers itself with [hal.RegisterNetwork] as "ucx": WEFT_NET=ucx
// selects it, and hal.AutoNetwork takes it where its libraries load
// (libucp.so.0, libucs.so.0, bound with dlopen by internal/ucx, so weft
// builds and runs without UCX) in the order hal.AutoNetwork gives. Import
// it for its side effect:
//
//	import _ "github.com/weftccl/weft/hal/ucx"
//
// # Model
//
// [Open] creates a UCP context with RMA, active messages (AM) and
// wake-up, and two single-threaded workers: a sending one for this
// rank's engines (every call on it and its endpoints serialised by one
// lock) and a receiving one that peers connect to, each driven by its own
// goroutine (Progress, below). A job on one host
// (hal.NetConfig.OneHost) sets UCX's NET_DEVICES to lo, unless the user
// set UCX_NET_DEVICES or Options.Settings does; it sets the TCP
// transport's segments to 256 KiB (TCP_TX_SEG_SIZE, TCP_RX_SEG_SIZE; UCX's
// 8 KiB default held a put to a quarter of that speed) unless the user
// sets them.
//
// [NetDevice.ExportPort] registers memory with ucp_mem_map and returns a
// handle holding the packed remote key, the remote address and the size:
// host memory (hal/host devices) as is; GPU memory as is when UCX reports
// the GPU's memory type (a UCX built with CUDA or ROCm:
// ucp_context_query's memory_types); other device memory through a host
// bounce region of the same size (Device.AllocHost) that peers write
// into, while memory with a host view (Device.AllocHost: the windows of
// plans whose every channel crosses the network, which package channels
// places in host memory when [NetDevice.HostWindows] says so) is then
// registered as host memory: peers' puts land in it, signals into it are
// applied with the CPU, and puts from it leave without staging.
// WEFT_UCX_STAGING=always (Options.Staging) stages every buffer, so that
// tests run the GPU path on hal/host; WEFT_UCX_STAGING=device stages
// device memory whatever UCX reports and registers memory with a host view
// directly (on hal/host: the host-window path). [NetDevice.ImportPort] checks every byte of a peer's handle
// (lengths, magic, version, reserved bytes, range, hal.CheckImport for
// job, rank and incarnation) and keeps the packed key; each engine
// unpacks it on its endpoint (ucp_ep_rkey_unpack) when it first puts
// there. Imported buffers are addressed by the peer's remote addresses;
// engines check every Put and Signal against the imports of their peer.
// [NetDevice.UnexportPort] withdraws a registration: peers' signals
// naming it are refused from then on, what the receiving sessions were
// applying into it is waited for, and it is unmapped (and its bounce
// region freed). A put's bytes are placed by UCX, which checks remote
// keys only on some transports (not TCP): peers must have stopped putting
// into a buffer before its owner withdraws it.
//
// # Engines and ordering
//
// [NetDevice.NewEngine] dials the peer's side channel (below), receives
// its worker address and a session token, and creates a UCP endpoint to
// the peer's worker (with peer-failure handling where the transports
// offer it; UCX's shared-memory transports do not). Requests are issued
// in order as they become ready:
//
//   - Put: one ucp_put_nbx from memory UCX reads (host memory, GPU
//     memory of a UCX with its memory type); other memory is staged chunk
//     by chunk (Options.Chunk) into host slots by the device's own engine
//     first, as hal/socket and hal/ib do. Over TCP UCX has no RMA lane
//     (its memory domain registers nothing) and emulates the put with
//     active messages of one segment each, copied at both ends and each
//     acknowledged (UCX 1.13, rma_sw.c): one stream moved 2.9 GB/s on
//     2×H100's host, and splitting puts over more workers did not raise
//     it (docs/network.md, "UCX over TCP: what its puts are").
//   - Copy: on the device's own engine once every earlier UCX operation
//     is complete at the source.
//   - Signal: after earlier own-engine copies, ucp_ep_flush_nbx (every
//     earlier put complete at the peer), then an active message (56 bytes,
//     plus 16 per staged range received since the previous signal) that
//     the peer checks and applies: it copies the staged ranges from the
//     bounce region to device memory and stores the count and adds one to
//     the semaphore with its device engine, the only writer of the
//     semaphores that engine signals (host memory registered directly is
//     signalled in place with the same atomics once that engine is idle).
//     Puts queued right behind a signal whose flush is under way are
//     issued meanwhile (a flush waits only for what was issued before
//     it), so a one-way plan's next window streams during the round
//     trip (broadcast 4 MB over TCP on 2×H100: 1,444–1,514 → 1,227–1,344
//     µs; docs/network.md).
//     A flush rather than ucp_worker_fence: UCX 1.13's fence does not
//     order operations that travel on different lanes (a put over cma and
//     a message over posix shared memory, for one), a flush does. The
//     receiver checks each message's session, token and sequence number
//     and each address against its registrations, as hostile input.
//   - AckSignal (hal.AckSignaler), a release of a slot this rank has
//     read (plan.Op.Ack): after earlier own-engine copies, the message
//     without the flush (it announces none of this rank's puts) and
//     without staged ranges (the next Signal carries them). A reader
//     that also sends — every rank of a symmetric collective, both sides
//     of a send/receive pair — otherwise waits a round trip to its peer
//     before each release, and its next puts queue behind that wait.
//   - Put and signal in one message: where UCX cannot reach the GPU's
//     memory (so every registration of a peer is host memory the CPU
//     writes, directly or as a bounce region), a put of at most
//     maxInline (4 KiB) bytes from this NetDevice's own host-registered
//     memory (a host window's staged send) that is followed by a signal
//     travels inside the signal's active message (kind 3): no
//     ucp_put_nbx, and no flush unless earlier puts went out as RMA. The
//     receiver places the bytes (host view, or bounce region then the
//     staged copy) before the count and the semaphore. Within a proxy pass
//     (BeginBatch … EndBatch, hal.EngineBatcher) such a put waits in the
//     queue for the request after it; a pass that ends first sends it as
//     a ucp_put_nbx. On 2×H100 as 2 emulated nodes, 64 B: AllGather 114 →
//     66 µs, AllReduce 134 → 81 (docs/bench/2026-11-26i-h100x2, call 9).
//
// Mark and Completed follow the completion of each request's UCX
// operations and own-engine copies (hal.Tickets).
//
// # Progress
//
// UCX moves bytes only while a worker is progressed, and over TCP a put
// lands at its target only while the target's worker is. A NetDevice has
// two workers of one context (whose registrations they share,
// mt_workers_shared): a sending one, which holds this rank's engines'
// endpoints, and a receiving one, whose address peers connect to. Each
// has its goroutine, so that what a rank sends and what it receives move
// on two threads, as hal/socket's writers and readers do; with one
// worker for both, UCX's TCP transport moved a 64 MB AllGather between
// two emulated nodes on 2×H100 at 1.2 GB/s each way where one stream
// alone reached 3.1 (docs/network.md, "Releases and two workers").
//
//   - Sending: the proxy's calls (Put, Signal, Completed) progress the
//     sending worker and issue what they can; the progress loop
//     progresses it while requests wait and otherwise arms it
//     (ucp_worker_arm) and sleeps in poll(2) on its event descriptor
//     until UCX has a completion or an engine call wakes it
//     (ucp_worker_signal). While requests are in flight it does not
//     sleep on the descriptor (a device copy's completion wakes none):
//     it polls, and after 2 ms without progress naps 50 µs between
//     polls; for Options.Spin after the worker last had work it polls
//     too (a flush's acknowledgement usually follows within
//     microseconds).
//   - Receiving: the receive loop progresses the receiving worker (UCX
//     lands peers' puts, and their messages arrive) and applies the
//     received signals in arrival order; for Options.Spin after the last
//     arrival it polls, then sleeps on the worker's descriptor until
//     something arrives.
//
// # Authentication and the side channel
//
// UCX's transports carry no authentication, so a peer proves it belongs
// to the job before it gets anything it could use: every NetDevice
// listens on a TCP side channel (loopback for a job on one host, else
// the interface WEFT_SOCKET_IFNAME selects, as hal/socket), and an engine
// first runs internal/auth's mutual challenge–response there with a key
// derived from hal.NetConfig.Secret, then sends a hello (job, ranks,
// nonces, engine id). Only then does the listener answer with its UCX
// worker address and a random session token; [NetDevice.Address], which
// travels through the bootstrap, holds the side channel's host:port, not
// the worker address. Refusals (failed authentication, another job, a
// wrong rank or incarnation, a signal of no known session) are recorded
// ([NetDevice.Refused]) and logged without the secret; the job is not
// disturbed. Without a secret the side channel checks only the job and
// logs the unauthenticated warning once. What it cannot cover is UCX's
// own wire: UCX's listeners accept whoever reaches them and its traffic
// is in clear, and the remote keys in handles are UCX's to interpret
// (ImportPort checks their framing only); docs/network.md says what that
// means for a job.
//
// The side channel stays open for the engine's life: it carries the
// engine's goodbye (with the number of signals sent, which the receiver
// applies before it ends the session) and the listener's notice that its
// NetDevice closes (requests still queued to that peer are then moot and
// complete without being sent). Its end without either means the peer is
// lost: the NetDevice records the failure by rank ([NetDevice.Err],
// [NetDevice.PeerErr]) and engines to it fail with an error wrapping
// hal.ErrRemote that names it. A UCX error on an endpoint waits up to a
// second for that word before it fails the engine; an engine without
// progress for the timeout (WEFT_TIMEOUT) fails with a hal.TimeoutError.
//
// Wire formats are in wire.go; docs/network.md gives the set-up for
// mpirun, srun and torchrun.
//
// The pieces this network shares with the others (peer-failure records,
// Open's argument checks, the side channel's accept loop, an own
// registration imported here) are in hal/netcore; its registrations (UCP
// memory handles with remote keys, not netcore's registration ids) are
// its own.
package ucx
