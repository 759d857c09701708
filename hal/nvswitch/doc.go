// Package nvswitch is weft's HAL backend for NVIDIA GPUs on an NVSwitch
// fabric with NVLink SHARP: the switch-mapped capability
// ([hal.SwitchMapped]), on top of everything hal/nvlink offers. It
// registers itself as "nvswitch"; import it for its side effect:
//
//	import _ "github.com/weftccl/weft/hal/nvswitch"
//
// # Safety on shared hosts
//
// Multicast objects and multimem instructions can take a shared host's GPUs
// out of service (architecture.md §8). The backend is therefore off unless
// WEFT_NVLS=1 is set: without it Probe reports it unavailable ("NVLink
// SHARP multicast disabled: WEFT_NVLS is not 1"), Open refuses, and
// NewMulticast and ImportMulticast return errors wrapping
// hal.ErrNotSupported. The variable is never set on shared machines; there
// the backend's tests only compile device code (gpu_test.go).
//
// # Devices
//
// A [Device] is one GPU of this process. The GPU itself — primary context,
// streams, events, graph capture, NVRTC kernels, plan execution — is the
// device core that weft's CUDA backends share (package internal/cudadev,
// embedded in Device). Links are those of hal/nvlink (a peer GPU this GPU
// can access is memory-mapped and port-mapped, with copy engines) plus
// switch-mapped between distinct GPUs.
//
// # Memory: why Alloc uses virtual memory management
//
// cuMulticastBindMem binds memory made by cuMemCreate; memory of cuMemAlloc
// cannot be bound (cuMulticastBindAddr too requires cuMemCreate or
// stream-ordered memory). The contract binds memory of Device.Alloc
// ([hal.Multicast.Bind]), and the plan reads its own copy of the switch
// buffer by that buffer's address (plan.Bindings.Switch), so the bound
// memory must be the buffer's memory itself: a Bind that bound some other,
// internal allocation would leave the plan's plain loads and stores and the
// multicast view on different memory. Hence Alloc allocates every buffer
// with cuMemCreate (pinned device memory, POSIX file descriptor shareable),
// reserves address space, maps it and grants this GPU access, rounding the
// size up to the allocation granularity (2 MiB on Hopper), as NCCL does
// when it uses cuMem. Any buffer of Alloc can then be bound to a group.
//
// CUDA IPC (cuIpcGetMemHandle) does not export such memory, so the
// memory-mapped and port-mapped Export and Import of this backend share it
// by file descriptor: Export hands out the allocation's POSIX descriptor
// (cuMemExportToShareableHandle), which stays open until Free, with this
// process's pid; Import fetches a duplicate with pidfd_open and pidfd_getfd
// (cuda.DupFD), imports it (cuMemImportFromShareableHandle) and maps the
// whole allocation. The kernel allows the fetch when the importer may
// ptrace the exporter: ranks of one user, with kernel.yama.ptrace_scope=0
// (or CAP_SYS_PTRACE); otherwise the error says so. Descriptor numbers are
// reused as soon as they are closed, so an exporter also keeps a tag open
// beside each exported descriptor (the read end of a pipe, cuda.NewFDTag)
// and the handle carries the tag's number and identity: an importer that
// finds another file behind the tag refuses the handle as one of a buffer
// freed since (hal.ErrInvalidUsage) instead of importing whatever now has
// the number. Handles also carry the host, job and PID namespace, and are
// refused across them.
//
// # Multicast groups
//
// NewMulticast creates a multicast object (cuMulticastCreate) for the
// group's member count and size, rounded up to the recommended multicast
// granularity, adds its own GPU (cuMulticastAddDevice) and exports the
// object's descriptor; its Handle carries descriptor, pid, identities,
// size, granularity and member count. ImportMulticast fetches that
// descriptor, imports the object and adds its GPU. After every member has
// joined, Bind binds Size bytes of a buffer of Alloc and maps the group at
// Addr (cuMemAddressReserve, cuMemMap, cuMemSetAccess); Close unbinds,
// unmaps and releases. These are the steps of NCCL's NVLS setup
// (nvls.cc), with the descriptor carried by pidfd_getfd instead of a proxy
// socket.
//
// # Device code
//
// Kernels use the core's weft_hal.h ([Device.DeviceHeader]) and this
// backend's weft_switch_hal.h ([Device.SwitchHeader]): multimem load-reduce
// and store through a multicast address, in 16- and 4-byte forms, for the
// data types and operators PTX multimem.ld_reduce supports on sm_90;
// others are compile errors. Prepare adds weft_switch_hal.h to the channel
// library, which the kernels of switch plans include through weft_switch.h.
package nvswitch
