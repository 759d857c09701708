// Package pcie is weft's HAL backend for NVIDIA GPUs over PCIe: GPUs that
// reach each other's memory through peer access across the PCIe fabric,
// and GPUs that cannot (peer access unsupported, or turned off with
// WEFT_PCIE_P2P=0), which it links through host memory the way NCCL's SHM
// transport does. It registers itself as "pcie"; import it for its side
// effect:
//
//	import _ "github.com/weftccl/weft/hal/pcie"
//
// A [Device] is one GPU of this process; the GPU itself — primary context,
// memory, streams, events, graph capture, NVRTC kernels, plan execution,
// CUDA IPC — is the device core of weft's CUDA backends (internal/cudadev),
// shared with hal/nvlink. This package adds the link policy, the port
// handles and engines, and the host-staged transport.
//
// # Links
//
// Towards a GPU of the same host (same boot id and IPC namespace):
//
//   - when cuDeviceCanAccessPeer allows it and WEFT_PCIE_P2P is not "0":
//     memory-mapped and port-mapped, exactly as hal/nvlink (CUDA IPC
//     mappings; a copy-engine engine: cuMemcpyAsync on a stream, signals as
//     stream-ordered cuStreamWriteValue64);
//   - otherwise port-mapped only, host-staged; the link's Reason says why
//     peer access is missing. A GPU that another process can see but this
//     one cannot (CUDA_VISIBLE_DEVICES) is host-staged too. A communicator
//     whose every link is of this kind runs its kernels against the
//     engines' stream operations, which an application's queued work can
//     hold back, so weft.NewComm refuses it unless WEFT_ENGINE_WAITS=1
//     (docs/network.md, "Streams and the network path").
//
// Towards itself a device is memory-mapped and port-mapped (copy engine).
//
// # Port handles
//
// ExportPort returns a handle naming the exporter (job, host, pid, GPU) and
// the buffer's address and size in the exporter's address space, plus the
// buffer's CUDA IPC handle when it is device memory. ImportPort over a link
// with peer access maps it (Addr is the mapping); over a host-staged link
// it returns a buffer whose Addr is the exporter's own address, which
// Host returns nil for: this device's host-staged engines name it in their
// requests and the exporter's receiver writes there. Handles of another
// job or host are refused with hal.ErrInvalidUsage, malformed ones with
// hal.ErrInvalidArgument.
//
// # The host-staged transport
//
// Every host-staged engine has an inbox: a file in /dev/shm, mapped by the
// sender's and the receiver's processes and page-locked in both
// (cuMemHostRegister, PORTABLE|DEVICEMAP), holding a ring of staging slots
// (8 of 4 MiB) and a ring of 64-byte descriptors, with head (published),
// tail (consumed) and freed (slots released) counters, each written by
// one side only (inbox.go gives the layout). The engine announces its
// inbox in the receiving device's index, a small shared file named by the
// job, the receiver's GPU and its process, where the receiver finds it.
//
// Sender (the engine, driven by the proxy): Put splits the transfer into
// slot-sized pieces; each waits, in a queue that never blocks the proxy,
// for a free slot, then is copied device-to-host into the slot on the
// engine's stream (cuMemcpyDtoHAsync) with an event after it. Once the
// event has completed its descriptor {destination address, slot, bytes}
// is published with a release store of head. Copy is a device-to-device
// copy on the same stream; Signal publishes a descriptor {semaphore, count
// word, count, new value} after every earlier descriptor and copy. The
// engine keeps the value it last sent to each semaphore, so a semaphore it
// signals must be signalled by it only, starting from 0. A ticket of Mark
// completes when the device-to-host copies of the requests before it have
// (the sources may be reused); signals complete when published. Queued
// requests move on in every engine call and in the device's receive
// loop, so a signal is published even while the proxy is idle.
//
// Receiver: each device that exports for ports runs one receive loop, a
// goroutine on a locked OS thread that spins while there is work and backs
// off to short sleeps when there is none, until the device is closed. It
// takes newly announced inboxes and polls them in order. For a data
// descriptor it checks that the destination lies in a buffer this device
// exported for ports, copies the slot host-to-device on the inbox's stream
// (cuMemcpyHtoDAsync) with an event, releases the descriptor (tail), and
// frees the slot (freed) once the event has completed. For a signal it
// queues, on the same stream and so after the earlier copies, the store of
// the count and then of the semaphore's new value (cuStreamWriteValue64,
// or 8-byte copies where the GPU lacks 64-bit stream memory operations). A
// receiver that finds a descriptor out of protocol, or fails, leaves a
// failure code in the inbox; its sender then fails with hal.ErrRemote.
//
// The inbox protocol is plain Go over host memory (inbox.go), with the
// copies behind two small interfaces, so it is tested without a GPU.
package pcie
