// Package socket is weft's TCP network transport: the port-mapped
// capability ([hal.PortMapped]) carried over sockets between ranks that
// share no memory, as NCCL's socket transport (NET/Socket) carries its
// sends and receives. It registers itself with [hal.RegisterNetwork] as
// "socket"; WEFT_NET=socket selects it, and it is the fallback when no
// RDMA device is usable. Import it for its side effect:
//
//	import _ "github.com/weftccl/weft/hal/socket"
//
// # Model
//
// [Open] starts a listener on the chosen interface (WEFT_SOCKET_IFNAME,
// NCCL_SOCKET_IFNAME's syntax) and returns a [NetDevice]. [NetDevice.ExportPort]
// registers a buffer as a receive window; a peer imports the handle with
// [NetDevice.ImportPort] and gets a buffer whose Addr is a remote address:
// bit 63 set, the 23-bit registration id in bits 40–62 and a 40-bit byte
// offset, so Addr()+off names byte off of the window, as for a mapped
// buffer. The sender checks every Put and Signal against the registrations
// it imported from that peer; the receiver checks them again against its
// own (registration id known, range inside it, semaphore 8-byte aligned).
//
// [NetDevice.NewEngine] connects an [Engine] to a peer whose
// Endpoint.Net["socket"] holds its [NetDevice.Address]: WEFT_SOCKET_NSOCKS
// TCP connections (default 1), each opened with a handshake the receiver
// answers. The engine cuts a put into chunks of WEFT_SOCKET_CHUNK bytes
// (default 512 KiB) and numbers its frames 0, 1, 2, … in issue order;
// frame s travels on connection s mod NSOCKS. The own endpoint gives a
// local engine (copies and signals within the device).
//
// The transport never dereferences device memory: it moves bytes through
// host memory from the device's AllocHost and the device's own port-mapped
// engine. To send a chunk, the engine copies it into a staging slot with
// the device engine (Copy, then Mark) and writes the frame once that
// ticket completes; to receive, the frame lands in the connection's
// staging memory and the receiver queues Copy(destination, staging) on its
// device engine, and for a signal that engine's Signal. hal/host
// implements those engines in software, so CI runs the same path a GPU
// takes. A window whose buffer the CPU can write (its Host view: hal/host
// memory, host-mapped device memory) is applied without the engine: a put
// that arrives in order, once the engine has finished the earlier frames'
// copies, is read straight from the socket into the window, and every
// signal into it is an atomic add by the CPU after those copies (one
// writer per word). On 2 in-process hal/host ranks this took the 8-byte
// put-and-signal one way from 49 to 27 µs and one connection's 64 MiB put
// from 2.2 to 3.1–3.3 GB/s (BenchmarkSocketPingPong, BenchmarkSocketPut,
// 2026-11-26, 2-core VM). On GPUs, package channels places the scratch
// and semaphores of plans whose every peer is on another node in
// host-mapped memory ([NetDevice.HostWindows]), so they take this path
// too, and an inline put whose source lies in such a registration is
// written straight from it; during a proxy pass ([Engine.BeginBatch]) it
// waits for the next request and leaves with the signal that follows it
// as one put-with-signal frame. Registrations are withdrawn before their
// memory is freed ([NetDevice.UnexportPort]).
//
// # Wire format
//
// Integers are big-endian. A connection opens with a 56-byte handshake:
//
//	[0:8)   "WEFTSOCK"
//	[8:10)  protocol version (1)
//	[10:12) connection index    [12:14) connections of the engine (1–64)
//	[16:24) job hash (FNV-1a 64 of the job id)
//	[24:32) nonce of the listening NetDevice (its incarnation)
//	[32:36) source rank         [36:40) destination rank
//	[40:48) engine id           [48:52) chunk bytes (1 KiB–64 MiB)
//	(other bytes zero)
//
// The receiver refuses a wrong magic or version, another job's hash, a
// destination rank or nonce that is not its own, a source outside the
// job, a repeated connection index: it answers with a reject reply naming
// the fault, closes the connection and records the refusal
// ([NetDevice.Refused]); the job is not disturbed. Otherwise it answers
// accept. Then the engine sends frames, a 40-byte header and, for a put,
// the payload:
//
//	[0:4)   "WSKF"   [4] kind: 1 put, 2 signal, 3 bye, 4 put with signal   [5:8) zero
//	[8:16)  sequence number
//	[16:24) put: destination address     signal: semaphore address
//	[24:32) put: payload bytes (≤ chunk)  signal: count-word address or 0
//	[32:40) put: zero                     signal: count value
//
// A put with its signal (kind 4, payload ≤ 64 KiB) has the put's fields,
// the signal's count value in [32:40), the payload, then a 16-byte
// trailer: the signal's semaphore and count-word addresses. It takes one
// sequence number; the receiver applies the put, then the signal.
//
// and the receiver answers with 16-byte replies ("WSKR", kind, length of a
// reason that follows): accept, reject (reason), bye-ack, closing (its
// NetDevice closes; nothing more is applied).
//
// A frame with a bad magic, an unknown kind, a payload beyond the chunk
// size, an address outside the registrations, or a sequence number other
// than the connection's next (a gap) makes the receiver reject it with the
// reason, close every connection of that engine, and record the failure
// of the sending rank ([NetDevice.PeerErr], [NetDevice.Err]); engines of
// this NetDevice to that rank then fail too. Handles (40 bytes, "WSKH")
// and addresses ("WSKA") carry the same version, job hash and nonce;
// ImportPort refuses malformed handles with hal.ErrInvalidArgument and
// other jobs' with hal.ErrInvalidUsage.
//
// # Ordering
//
// Each TCP connection delivers its frames in order, and connection c
// carries exactly the frames s ≡ c (mod NSOCKS) in increasing order; the
// receiver checks that every frame has the sequence number its connection
// expects next, so no frame is lost or reordered unnoticed. All
// connections of one engine form a session at the receiver, which applies
// frames strictly in sequence order: a reader holding frame s waits until
// frames 0 … s−1, whichever connections carry them, have been applied.
// Applying is queueing on the session's device engine, which executes in
// order. A signal is therefore queued after the copies of every earlier
// put chunk, and the device engine stores its count and semaphore only
// after those copies are visible (hal.Engine.Signal's release guarantee):
// a signal never overtakes data, however the connections race. Puts to
// overlapping ranges land in issue order too. The session's device engine
// is the only writer of the semaphores that the remote engine signals, as
// hal.Engine requires.
//
// On the sending side the stager handles requests in issue order through
// the device engine: a Copy runs after the staging of earlier puts, and a
// signal's frame is written only after a device-engine ticket covering
// every earlier request completes, so a Copy followed by a Signal has
// finished when the peer sees the signal. A ticket of [Engine.Mark]
// completes when the requests before it are complete at the source: their
// bytes staged (the source may be reused), their copies done.
//
// # Progress and failures
//
// No engine call waits for the network: requests go into a ring of 4096;
// Put, Copy and Signal wait only while the ring is full of requests not
// yet staged. Staging of chunk k+1 overlaps the sending of chunk k.
//
// # Descriptors outside the netpoller
//
// On Linux, once a plain TCP connection's handshake is over, its frames
// go through a duplicate of its descriptor taken out of Go's netpoller
// (rawconn_linux.go): non-blocking read, write and writev system calls;
// a reader that finds nothing polls again for Options.Spin, then sleeps in
// the netpoller on a duplicate registered for that sleep only; deadlines
// are words read when a call must wait, not runtime timers reset per
// frame. Registered all the time, a socket wakes the netpoller's thread
// from the sender's system call on every segment that arrives; on the
// 2×H100 host one 64-byte hop cost 4.5–5.0 µs through raw descriptors
// against 7.3–9.0 through net.Conn with a deadline per call, and a lone
// put's one-way trip through this transport went from 13.8–15.9 to
// 11.0–11.4 µs (docs/network.md, "Descriptors outside the netpoller").
// A reader that waited for a frame takes it with MSG_PEEK and consumes it
// when it comes back for the next one (Options.NoPeek turns this off):
// a connection carries data one way, and Linux sends its ACK from the
// read that drains it, which then leaves after the frame is applied
// instead of before (64 B collectives 2–4 µs faster between two emulated
// nodes on 2×H100; docs/network.md, "Peeking receivers").
// Encrypted connections keep net.Conn.
//
// Every wait has a deadline of WEFT_TIMEOUT without progress: a frame
// half-read, a write, a frame waiting for its predecessors, staging, Close.
// An idle connection between frames has none. A peer lost mid-transfer (a
// reset, an end of stream inside a frame or without the goodbye Close
// sends, no progress) fails the engine to it: its next call and Close
// return an error wrapping hal.ErrRemote or hal.ErrTimeout that names the
// rank and address, and the receiving NetDevice records it.
//
// # Shared pieces
//
// What this transport has in common with the other networks lives in
// hal/netcore, written once: the remote-address layout and the handle
// format (netcore.HandleFormat with this transport's magic), the table of
// exports and imports (netcore.Registry), the engine to this rank itself
// (netcore.LocalEngine), the notifier, the record of peer failures
// (netcore.Failures), an engine's sticky failure and tickets
// (netcore.EngineState, netcore.Marks), Open's argument checks and the
// listener's accept loop (netcore.Acceptor). The staging, the frames and
// the poll policy (notify.go) are this transport's own.
package socket
