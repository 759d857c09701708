// Package netplugin is weft's network through NCCL's net plugins: the
// port-mapped capability ([hal.PortMapped]) carried by any library that
// implements NCCL's network plugin ABI (ncclNet v8, bound by
// internal/ncclnet), so that weft runs wherever a cluster's NCCL runs —
// aws-ofi-nccl over libfabric and EFA, vendors' InfiniBand and RoCE
// plugins, anything that exports ncclNetPlugin_v8. It registers itself
// with [hal.RegisterNetwork] as "plugin" and is chosen only explicitly:
//
//	WEFT_NET=plugin NCCL_NET_PLUGIN=aws-ofi   (loads libnccl-net-aws-ofi.so)
//
// Import it for its side effect (package backends does):
//
//	import _ "github.com/weftccl/weft/hal/netplugin"
//
// # One-sided puts over a two-sided API
//
// weft's engines are one-sided: a put names a remote address and the
// receiver issues nothing; a signal increments a remote semaphore after
// the data of earlier puts. ncclNet is two-sided: a receiver posts tagged
// receives into its own memory and a sender's isend fills the oldest, with
// no remote addresses and no atomics. The transport maps one onto the
// other as NCCL's own proxy does for its protocols:
//
//   - every pair of ranks has a link: a send comm each way, made by the
//     plugin's connect to the peer's listen handle for this rank and
//     accepted on this rank's listen handle for the peer;
//   - every engine to a peer shares the link's send comm; its puts are cut
//     into messages of at most Options.Chunk bytes (default 256 KiB),
//     each a 48-byte header (engine id, sequence number, destination
//     address, length; for a signal the semaphore, count word and count)
//     followed by the payload;
//   - the receiver keeps Options.RecvSlots receives posted into a
//     registered staging buffer, one header-plus-chunk slot each, and
//     applies what arrives in order: it checks the header (a known
//     registration, the range inside it, an aligned semaphore, the next
//     sequence number of that engine) and queues a copy from the slot to
//     the destination, or the signal, on the device's own engine, which
//     executes in order. A signal is therefore applied after the data of
//     every earlier put of the engine, as hal.Engine requires; the slot is
//     posted again once its copy has completed.
//
// What it costs against RDMA's one-sided writes: every byte crosses a
// staging copy on each side (the sender's own engine copies the source
// into a registered slot, the receiver's copies the slot into the
// destination), a receive slot is busy until that copy completes, the
// progress goroutine polls (ncclNet has no blocking wait) and a message
// needs its receive posted first, so a put's latency is that of a
// rendezvous plus two copies and its bandwidth that of the slots in
// flight (Options.SendSlots and RecvSlots, 8 each, at most NCCL's 32);
// each linked peer holds (SendSlots + RecvSlots) × (48 + Chunk) bytes of
// host staging, about 4 MiB by default.
// The plugin never sees device memory: weft stages through host memory
// even where the plugin reports NCCL_PTR_CUDA or dma-buf support
// (registering device buffers for GPUDirect is not written yet).
//
// # Connection
//
// [Open] loads the plugin, picks its device Options.Device (0) and calls
// the plugin's listen once per peer rank, since a plugin need accept only
// one connection per listening comm, as under NCCL. [NetDevice.Address]
// carries the job hash, the rank, the NetDevice's nonce (its
// incarnation), the chunk size and the NRanks listen handles (128 bytes
// each at most, NCCL_NET_HANDLE_MAXSIZE, trailing zeros trimmed); package
// channels exchanges it through the bootstrap. An address therefore grows
// with the job: a few tens of bytes per rank for a socket-like handle, so a
// job of a few hundred ranks exchanges megabytes at set-up.
//
// [NetDevice.NewEngine] asks the progress goroutine for the link and
// waits for it (at most WEFT_TIMEOUT): connect is called until it returns
// a comm (it must not block, per the ABI), and the first message on the
// new comm is a hello (job hash, source and destination ranks, the
// receiver's nonce, the sender's nonce and chunk, and the sender's listen
// handle for the receiver). The receiver accepts, checks the hello
// against the listen handle it came in on and connects back with the
// handle the hello carried, so a link comes up even when only one side
// makes an engine. With a job secret (hal.NetConfig.Secret) the two sides
// then run internal/auth's challenge–response over the link (the lower
// rank is the client; the context names the job and the pair of ranks),
// and no put or signal of the peer is applied before it succeeds. A
// hello or challenge that fails is refused ([NetDevice.Refused]): its
// comms are closed and the listen handle polled again; the job is not
// disturbed. Without a secret only the job hash and nonces are checked,
// and a warning is logged once.
//
// # Progress and failures
//
// One goroutine per NetDevice makes every plugin call (a plugin need not
// be thread-safe per comm): accepts, connects, isends, irecvs, tests, and
// the staging of the engines' requests. Engine calls only queue requests
// in a ring of 4096 and wake it; it yields for 200 µs after the last
// progress, then polls every 50 µs while messages are in flight and, when
// idle, after sleeps that double from 50 µs to 1 ms. Mark and Completed
// report the requests whose sources have been staged (the source may be
// reused), as for the socket transport.
//
// Every wait has a deadline of WEFT_TIMEOUT: a link coming up, a message
// that does not complete, Close. A test or isend that fails, a peer that
// closes its comms without the "closing" message NetDevice.Close sends,
// or a message the receiver refuses (it answers with a reject naming the
// fault) fails the link: [NetDevice.Err] and [NetDevice.PeerErr] name the
// peer's rank, and every engine to it returns an error wrapping
// hal.ErrRemote or hal.ErrTimeout that names it.
//
// # Wire format
//
// Integers are big-endian. A message is a 48-byte header and a payload:
//
//	[0:4)   "WNPM"   [4] kind   [5:8) zero
//	[8:16)  engine id             (hello: job hash)
//	[16:24) sequence number       (hello: the receiver's nonce)
//	[24:32) put: destination; signal: semaphore   (hello: source rank<<32 | destination rank)
//	[32:40) put: length; signal: count word or 0  (hello: the sender's chunk)
//	[40:48) signal: count                         (hello: the sender's nonce)
//
// Kinds: 1 hello (payload: a listen handle), 2 auth (handshake bytes),
// 3 put (payload: the data), 4 signal, 5 bye (an engine closes), 6 bye-ack,
// 7 reject (payload: the reason), 8 closing. Handles (ExportPort, 40
// bytes, "WNPH") and remote addresses (bit 63, a 23-bit registration id,
// a 40-bit offset) are as in hal/socket; ImportPort refuses malformed
// handles with hal.ErrInvalidArgument and other jobs' with
// hal.ErrInvalidUsage.
//
// Tests build a small plugin (testdata/weftest.c, ncclNet v8 over
// loopback TCP) with the system C compiler (package netplugintest) and run
// the unit tests, the port-mapped conformance cases and every collective
// across emulated nodes over it.
//
// The pieces this transport shares with hal/socket and the other networks
// (the address layout and handle format, the export/import table, the
// local engine, the notifier, peer-failure records, an engine's sticky
// failure and tickets, Open's argument checks) are in hal/netcore; the
// links, the plugin's polling and its sleep policy (notify.go) are this
// transport's own.
package netplugin
