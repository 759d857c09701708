// Package ib is weft's RDMA network: InfiniBand and RoCE through the verbs
// library (libibverbs, bound by internal/ibverbs with dlopen), registered
// with [hal.RegisterNetwork] as "ib". A [NetDevice] is the port-mapped
// capability carried over RDMA: ExportPort registers memory as an RDMA
// memory region, ImportPort turns a peer's handle into the remote address
// and rkey engines write to, and NewEngine connects an RC queue pair.
//
// Connection: Open creates, on the first active port that WEFT_IB_HCA
// selects, a protection domain and one RC queue pair with its completion
// queue per peer rank, all in INIT, so that [NetDevice.Address] can carry
// the port's LID, its GID (RoCE: WEFT_IB_GID_INDEX, or the first
// IPv4-mapped one) and the queue-pair number kept for every rank. The
// first engine to a peer moves that queue pair to RTR (addressed by LID on
// InfiniBand, by GID on RoCE) and RTS with the peer's number for this rank.
//
// Requests: Put is RDMA writes of at most the chunk size (Options.Chunk,
// capped by the port's max_msg_sz); a source outside registered memory is
// first copied chunk by chunk into a registered host staging buffer
// (Device.AllocHost) by the device's own engine. Signal is an RDMA write of
// the count followed by a fenced 64-bit fetch-and-add of one on the
// semaphore, on the same queue pair, so RC's in-order execution at the
// responder places every earlier write before the semaphore changes.
// Mark/Completed follow send completions; every request is signalled.
// Copy runs on the device's own engine, after earlier writes complete.
//
// Registration: host memory (Buffer.Host non-nil: hal/host buffers,
// AllocHost buffers) is registered directly; device memory through
// dma-buf (GPUDirect RDMA) when the device implements [DmaBufExporter].
// Other device memory cannot be a destination yet: receiving through a
// host bounce region needs a receiver-side poller, which is not written.
// [NetDevice.UnexportPort] deregisters a region once the RDMA writes this
// rank posted from it have completed; a peer's later write or atomic on
// it fails at the peer with a remote access error.
//
// Errors of completions name the peer rank, the verbs status string and
// number ("RDMA write to peer rank 1 failed: remote access error (work
// completion status 10)") and wrap [hal.ErrRemote]; every later call of
// every engine on that queue pair returns the same error.
//
// No machine weft is developed on has an RDMA device; the tests run every
// path over weft's in-memory verbs provider (internal/ibverbs/testdata,
// see docs/network-ib.md).
package ib
