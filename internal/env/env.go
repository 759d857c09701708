// Package env is the one place weft reads WEFT_* environment variables.
// Every variable is declared in Table with its default and meaning;
// docs/environment.md is generated from the same table (weft env --markdown).
// Precedence everywhere: explicit option > WEFT_* variable > tuning file >
// default.
package env

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weftccl/weft/internal/errkind"
)

// Var is one documented environment variable.
type Var struct {
	Name    string
	Default string
	Doc     string
}

// Table lists every variable weft reads.
var Table = []Var{
	{"WEFT_DEBUG", "", "log level: WARN, INFO or TRACE (silent when unset), as NCCL_DEBUG"},
	{"WEFT_DEBUG_SUBSYS", "ALL", "comma-separated subsystems to log: INIT, COLL, BOOT, HAL, TOPO, BENCH, CONF, ALL"},
	{"WEFT_REQUIRE", "", "comma-separated backends (host, nvlink, …) whose tests must not skip; a skip becomes a failure"},
	{"WEFT_HAL", "", "backend to use when none is named (default: first available of nvlink, xgmi, pcie, host)"},
	{"WEFT_TIMEOUT", "10s", "deadline of every device- and host-side wait (Go duration)"},
	{"WEFT_BOOTSTRAP_TIMEOUT", "60s", "deadline of bootstrap rendezvous and exchanges (Go duration)"},
	{"WEFT_UNIQUE_ID", "", "bootstrap unique id (hex) set by `weft run` for the ranks it starts"},
	{"WEFT_RANK", "", "rank set by `weft run` (otherwise read from mpirun, srun or torchrun variables)"},
	{"WEFT_NRANKS", "", "number of ranks set by `weft run`"},
	{"WEFT_LOCAL_RANK", "", "node-local rank set by `weft run`; selects the device ordinal"},
	{"WEFT_SOCKET_IFNAME", "", "network interface for bootstrap sockets (default: loopback for single-node jobs, else the first non-loopback)"},
	{"WEFT_NODE_ID", "", "node this rank belongs to (default: the host); ranks of one host with different values form emulated nodes whose traffic goes through the network transport"},
	{"WEFT_NET", "", "network transport between nodes: ib, plugin (an NCCL net plugin named by NCCL_NET_PLUGIN; only when named), socket or ucx (default: where an RDMA port is active ucx if UCX loads, else ib; elsewhere socket, ucx over TCP only when named)"},
	{"NCCL_NET_PLUGIN", "", "WEFT_NET=plugin: the NCCL net plugin to load, by NCCL's rules: a name (aws-ofi loads libnccl-net-aws-ofi.so) or a library path; unset or none: no plugin (docs/network.md, NCCL net plugins)"},
	{"WEFT_NET_HOST_WINDOWS", "1", "0 keeps the scratch and semaphores of plans whose every channel goes over a network in device memory; by default they are in host memory mapped into the device where the network's receivers write host memory with the CPU (socket), so no device call lies between the wire and the waiting kernel (docs/network.md)"},
	{"WEFT_ENGINE_WAITS", "0", "1 lets a GPU communicator run plans whose kernels wait for the device's own engine (CUDA stream operations the proxy queues while they run): across nodes where the network keeps device windows (WEFT_NET_HOST_WINDOWS=0, hal/ib, UCX with CUDA), and on one node where every link is port-mapped only (hal/pcie without peer access). By default such a communicator is refused (the drop-in forwards it to NCCL): the application's work queued behind the kernel can hold those operations back for ever where streams share a hardware queue (FSDP2 on 2 emulated nodes of 2 H100s timed out in its first AllGather, with CUDA_DEVICE_MAX_CONNECTIONS=1 and with the default; docs/network.md, \"Streams and the network path\"). Set it for programs that queue nothing behind weft's calls (weft bench)"},
	{"WEFT_SOCKET_NSOCKS", "1", "socket transport: TCP connections per peer and direction, each carrying every n-th chunk (as NCCL_NSOCKS_PERTHREAD × NCCL_SOCKET_NTHREADS)"},
	{"WEFT_SOCKET_SPIN_US", "50", "socket transport: microseconds a receiver polls its socket without blocking when it finds nothing to read, before it sleeps (a frame arriving meanwhile costs no wake-up; a core stays busy while frames keep coming); 0 sleeps at once. With one connection (WEFT_SOCKET_NSOCKS=1) it took 64 B collectives over loopback on 2×H100 from 30–37 to 22–29 µs (docs/network.md)"},
	{"WEFT_SOCKET_PEEK", "1", "socket transport: a receiver that waited for a frame reads it with MSG_PEEK and consumes it when it comes back for the next frame, so that the ACK Linux sends from the read that drains a one-way connection leaves after the frame is applied (64 B collectives over loopback on 2×H100: 2–4 µs less); 0 consumes as it reads (docs/network.md)"},
	{"WEFT_SOCKET_CHUNK", "512KiB", "socket transport: bytes per pipelined chunk of a put"},
	{"WEFT_SOCKET_ENCRYPT", "0", "set to 1 to encrypt the bootstrap and the socket transport with AES-256-GCM (keys derived from the job secret and both handshake nonces); needs a job secret; every rank must agree (docs/security.md)"},
	{"WEFT_JOB_SECRET", "", "the job's secret as 32 to 128 hex digits (at least 128 bits), for launches by mpirun, srun or torchrun; every bootstrap and socket connection proves it knows it; unset (and no WEFT_JOB_SECRET_FILE): an unauthenticated job, with a warning. `weft run` sets it. Never printed (docs/security.md)"},
	{"WEFT_JOB_SECRET_FILE", "", "a file holding WEFT_JOB_SECRET's hex; must not be readable by group or others (chmod 600)"},
	{"WEFT_IB_HCA", "", "hal/ib: RDMA devices to use, as NCCL_IB_HCA (prefix list; ^ excludes, = exact, :port)"},
	{"WEFT_IB_GID_INDEX", "-1", "hal/ib: GID index for RoCE (default: the first RoCEv2 IPv4-mapped GID; -1 chooses)"},
	{"WEFT_IBVERBS_LIB", "libibverbs.so.1", "hal/ib: the verbs library loaded with dlopen"},
	{"WEFT_UCX_SPIN_US", "50", "hal/ucx: microseconds the progress loop keeps polling the worker after it last had work before it sleeps on the worker's event descriptor (a wake-up costs 10–20 µs on a virtual machine; a core stays busy while work keeps coming)"},
	{"WEFT_UCX_STAGING", "auto", "hal/ucx: auto registers host memory, and GPU memory where UCX reports the GPU's memory type, with UCX and stages other device memory through host memory (memory with a host view, a network plan's host windows, is then registered directly); always stages every buffer (tests of the GPU path on hal/host); device stages device memory whatever UCX reports and registers memory with a host view directly (the host windows; on hal/host, tests of that path)"},
	{"WEFT_CACHE_DIR", "$XDG_CACHE_HOME/weft", "directory of the kernel binary cache"},
	{"WEFT_NCCL_LIB", "libnccl.so.2", "NCCL library loaded by `weft bench --baseline nccl`, and the real NCCL that libweft_nccl.so forwards to (default: the first of libnccl.so.2 and the usual install paths that is not weft itself)"},
	{"WEFT_NCCL_FALLBACK", "1", "libweft_nccl.so: set to 0 to turn forwarding to the real NCCL off; calls weft does not serve then fail with ncclInvalidUsage; all forwards every call (weft's communicator is not made: the library loaded, none of its plans running, for A/B timing)"},
	{"NCCL_DEBUG", "", "libweft_nccl.so only: WARN, INFO or TRACE logs weft's NCCL layer (init, first call served or forwarded per collective, summary at destroy) when WEFT_DEBUG is unset"},
	{"WEFT_CUDA_LIB", "libcuda.so.1", "CUDA driver library"},
	{"WEFT_NVRTC_LIB", "libnvrtc.so (newest found)", "NVRTC library"},
	{"WEFT_SYSFS_ROOT", "/sys", "root of the sysfs tree read by topology discovery"},
	{"WEFT_ALGO", "", "plan family for the collectives of the NCCL API and Launch: ll, hb, port (port-channel plans through copy engines or the host engine) or nvls (AllReduce and AllGather through a multicast group of switch-mapped links: NVLink SHARP, or hal/host's software switch; AllReduce of types and operators the switch cannot reduce keeps the other plans; an error where the links are not switch-mapped), or a family with bounded peers at any rank count: ring (rings for AllReduce, AllGather, ReduceScatter; chains for Broadcast and Reduce), tree (double binary tree AllReduce) or bruck (Bruck AllGather and ReduceScatter; rings past 256 ranks); collectives without a plan of the family keep theirs; ce: every AllGather as host-issued copy-engine operations (hal.StreamOps: no kernel, no SMs; docs/portchannel.md) and every AllReduce of Sum, Prod, Max or Min through copy engines with a reduction kernel per window, the rest as unset; unset selects by size, rank count and links (all-pairs up to 8 ranks, ring/tree/Bruck beyond; docs/collectives.md, Selection) and never picks nvls"},
	{"WEFT_NCCL_REGISTER", "local", "libweft_nccl.so: local makes ncclCommRegister local, as NCCL's (a handle; receives take the scratch path); collective exchanges the ncclMemAlloc buffer's mapping with every peer so receives into it are stored by the sender directly, for clients that register the same buffers in the same order on every rank (nccl-tests -R 1)"},
	{"WEFT_CE_MAX_BYTES", "", "largest AllGather (output bytes) that the copy-engine executor serves by default (WEFT_CE_MIN_BYTES's); larger ones take the SM plans; 0: no bound (default: 512M on 2 NVLink-connected GPUs, where the SM plan overtakes it: docs/portchannel.md); every rank must set the same"},
	{"WEFT_CE_MIN_BYTES", "", "smallest AllGather (output bytes) that the host-issued copy-engine executor serves when WEFT_ALGO is unset: no SMs taken from a job's kernels it overlaps (FSDP2); smaller ones take the SM plans; 0 turns it off (default: 32M on 2 NVLink-connected GPUs (hal/nvlink, hal/nvswitch) with 64-bit stream memory operations, else off); every rank must set the same"},
	{"WEFT_CE_REDUCE_DIRECT_MIN_BYTES", "", "smallest copy-engine Reduce (message bytes) that, on 2 ranks with the root's output apart from its input, the other rank pushes straight into the root's output (exported at the call over CUDA IPC, as copy-engine point-to-point receive buffers are) rather than into landing slots; 0: every size (default: 512M on 2 NVLink-connected GPUs (hal/nvlink), docs/collectives.md; 0 elsewhere); every rank must set the same"},
	{"WEFT_CE_REDUCE_MIN_BYTES", "", "smallest Reduce (message bytes) that the host-issued copy-engine Reduce serves on 2 ranks when WEFT_ALGO is unset (Sum, Prod, Max, Min; past 2 ranks only under WEFT_ALGO=ce: the root's link would carry every rank's message): the non-roots' copy engines push their inputs over NVLink into landing slots on the root, a reduction kernel on a few SMs there adds each landed window into the output; 0 turns it off (default: 64M on 2 NVLink-connected GPUs (hal/nvlink), docs/collectives.md; off where stream memory operations are not usable); every rank must set the same"},
	{"WEFT_CE_P2P_MIN_BYTES", "", "smallest point-to-point operation (bytes; sends and receives, and the Gather, Scatter and grouped all-to-all-v made of them) that copy engines move straight into the receiver's buffer, exported at the call, with no SM and no scratch: the receiver sends its buffer's handle to the sender over the bootstrap, and a buffer CUDA IPC cannot export (virtual-memory or pool allocations) keeps the kernels; on 2 ranks Launch also runs out-of-place AllToAlls whose segments reach half of it and Broadcasts of 2× it that way; 0 turns it off (default: 32M between NVLink-connected GPUs (hal/nvlink), docs/collectives.md; off where stream memory operations are not usable or peers are not all memory-mapped); sender and receiver must set the same"},
	{"WEFT_CE_ALLREDUCE_MIN_BYTES", "", "smallest AllReduce (message bytes) through weft's own API (weft.Comm.AllReduce: registered buffers) or the NCCL ABI that the host-issued copy-engine AllReduce serves when WEFT_ALGO is unset (Sum, Prod, Max, Min): copy engines move every byte over NVLink straight into the peers' outputs, a reduction kernel on a few SMs adds each landed window; through the NCCL ABI on 2 ranks the outputs are exported at the call over CUDA IPC instead (elsewhere the ABI takes it only under WEFT_ALGO=ce); 0 turns it off (default: 512M on 2 NVLink-connected GPUs (hal/nvlink), docs/portchannel.md; off where stream memory operations are not usable); every rank must set the same"},
	{"WEFT_WINDOW_LL_MAX_BYTES", "1M", "largest collective (AllReduce message, AllGather output, ReduceScatter input) through a symmetric memory window (ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC) that keeps the NCCL ABI's LL plan; larger ones take the zero-copy kernel plans that read and write the peers' windows directly; also the largest AllReduce that Comm.AllReduce, with its default tiers, takes through Launch's LL plan where its own tiers would run the zero-copy 2PA; every rank must set the same"},
	{"WEFT_CE_ALLREDUCE_MAX_BYTES", "", "largest AllReduce (message bytes) that the copy-engine AllReduce serves by default; 0: no bound (the default); every rank must set the same"},
	{"WEFT_CE_ALLREDUCE_SHAPE", "", "shape of the copy-engine AllReduce: BLOCKSxTHREADS[wWINDOW][dSLOTS], the reduction kernel's blocks and threads, the bytes of a window per peer and the landing slots per peer and phase, 2 to 8 (default 32x512w64Md2: 2 windows per peer of landing memory, 128 MiB on 2 GPUs, and as much again on the first call through the NCCL ABI, which stages the reduced windows too); every rank must set the same window and slots"},
	{"WEFT_P2P_LL_MAX_BYTES", "", "largest point-to-point operation (send, recv, a gather or scatter segment) sent with the LL protocol; larger ones go windowed (HB); 0 turns LL off (default: 128K on GPUs, 16K on hal/host); every rank must set the same"},
	{"WEFT_PORT_LL_MAX_BYTES", "", "largest segment (count × element size) of a collective that goes over the network as LL packets, across nodes where the network writes host windows (sockets, UCX): one frame per peer, or, where nodes hold several ranks, AllGather, AllReduce and ReduceScatter in frames to the ranks of the same local index only and LL packets over the node's links; larger ones take the windowed port or hierarchical plans; 0 turns it off (default: 16K); every rank must set the same"},
	{"WEFT_HB_SHAPE", "", "shape of the windowed (HB) plans of AllGather, ReduceScatter, AllToAll and the scratch AllReduce: BLOCKSxTHREADS[wWINDOW] per group, e.g. 64x512 or 32x1024w4M (default on GPUs: 32x1024, windows of 8M up to 5 ranks and 4M beyond, fewer blocks on GPUs of fewer than 96 SMs; past 2 ranks AllGather, ReduceScatter and AllToAll take 64x512, from 4 ranks with windows of 4M; the hierarchical plans across nodes take at most 4 of its blocks); every rank must set the same"},
	{"WEFT_P2P_SHAPE", "", "shape of the windowed point-to-point plan (send/recv, Gather, Scatter, grouped all-to-all-v above the LL bound and the mid-size plan's) as WEFT_HB_SHAPE writes it, BLOCKSxTHREADS[wWINDOW][dDEPTH][pPIPELINE] per send or receive group (default on GPUs: min(64, SMs/(2·ranks−1)) blocks x 1024 threads, windows of 16M on 2–3 ranks, 8M on 4–5, 4M on 6–9, 2M beyond, 2 windows in flight, chunks of at least one window cut into at least 4), then optionally ,pull (receivers read each window from the sender's scratch, as NCCL's P2P read) or ,push (senders write into the receivers' scratch: the default); pull or push alone changes only that; every rank must set the same"},
	{"WEFT_P2P_MID_SHAPE", "", "shape of the mid-size windowed point-to-point plan, as WEFT_P2P_SHAPE writes it (default on 2 GPUs: 32x512w2Md8p1, i.e. 32 blocks of 512 threads, 2M windows, 8 in flight, no forced split; none on more ranks unless WEFT_P2P_MID_MAX_BYTES sets a bound); every rank must set the same"},
	{"WEFT_P2P_MID_MAX_BYTES", "", "largest point-to-point operation the mid-size windowed plan serves (above the LL bounds); larger ones take the WEFT_P2P_SHAPE plan; 0: no mid-size plan (default: 16M on 2 GPUs, none on more ranks, 128K on hal/host); every rank must set the same"},
	{"WEFT_RING_MIN_BYTES", "", "smallest AllReduce message or ReduceScatter input (bytes) that takes the windowed ring plans instead of the all-pairs ones on 3 to 8 ranks when WEFT_ALGO is unset (smaller ones keep the all-pairs plans; past 8 ranks rings serve anyway); 0 turns it off (default on GPUs: 8M from 3 ranks, measured on 3 and 4 GPUs of a 4×H100, docs/collectives.md; none on 2 ranks); every rank must set the same"},
	{"WEFT_ALLREDUCE_LL2_MAX_BYTES", "", "largest AllReduce message (bytes) through the NCCL API that the two-phase LL plan serves (reduce-scatter and all-gather as LL packets, Config.WideLL's blocks) above the one-phase LL bound, from 3 ranks; the windowed plans beyond; 0 turns it off (default on GPUs: 1M from 4 ranks; with LL128 lines, WEFT_LL128: 8M on 3 ranks, 4M on 4, 2M from 5); every rank must set the same"},
	{"WEFT_ALLREDUCE_LL2_LARGE_MAX_BYTES", "", "largest AllReduce message (bytes) through the NCCL API that the second two-phase LL plan (WEFT_ALLREDUCE_LL2_LARGE_SHAPE) serves above WEFT_ALLREDUCE_LL2_MAX_BYTES; the windowed plans beyond; 0 turns it off (default on GPUs with LL128 lines: 8M on 4 ranks, off elsewhere); every rank must set the same"},
	{"WEFT_ALLREDUCE_LL2_LARGE_SHAPE", "", "shape of the second two-phase LL AllReduce plan (above WEFT_ALLREDUCE_LL2_MAX_BYTES up to WEFT_ALLREDUCE_LL2_LARGE_MAX_BYTES) as BLOCKSxTHREADS, e.g. 160x512 (default on 4 GPUs with LL128 lines: five times the wide Broadcast and Reduce plans' blocks at the wide LL plans' threads, 160x512 on an H100; WEFT_WIDE_LL_SHAPE sets it too, and this variable after it); every rank must set the same"},
	{"WEFT_RING_SHAPE", "", "shape of the windowed rings that WEFT_RING_MIN_BYTES selects (AllReduce, ReduceScatter) as WEFT_HB_SHAPE writes it, BLOCKSxTHREADS[wWINDOW] per group (default on GPUs from 3 ranks: min(64, SMs/2) blocks x 512 threads, windows of 8M on 3 ranks and 16M from 4, measured on 4×H100; elsewhere WEFT_HB_SHAPE's); every rank must set the same"},
	{"WEFT_WIDE_LL_SHAPE", "", "shape of the wide LL plans (the LL plans above 64K on GPUs: AllReduce's wide one-phase and two-phase LL plans, the wide LL AllGather, ReduceScatter, AllToAll, Broadcast and Reduce, the split LL Broadcast and Reduce) as BLOCKSxTHREADS, e.g. 64x1024 (no window, depth or pipeline: LL plans have none) (default on GPUs: min(32, SMs/4) blocks x 1024 threads; on 3 and 4 ranks with LL128 lines four times those blocks at 512 threads, the wide LL Broadcast and Reduce keeping the first), for measuring them without rebuilding; every rank must set the same"},
	{"WEFT_ROOTED_LL_MAX_BYTES", "", "largest Broadcast or Reduce message (bytes) sent as LL packets (the wide LL plans above 64K on GPUs); the windowed plans beyond (default on GPUs: 1M / (ranks − 1) as a power of two on 2–3 ranks, 2M / (ranks − 1) from 4: 1M on 2 ranks, 512K on 3 and 4; with LL128 lines (WEFT_LL128) 4M on 2 ranks); every rank must set the same"},
	{"WEFT_REDUCE_LL_MAX_BYTES", "", "largest Reduce message (bytes) sent as LL packets, in place of WEFT_ROOTED_LL_MAX_BYTES's bound (default on GPUs with LL128 lines (WEFT_LL128): 2M from 3 ranks; else WEFT_ROOTED_LL_MAX_BYTES's); every rank must set the same"},
	{"WEFT_ALLREDUCE_LL_MAX_BYTES", "", "largest AllReduce message (bytes) through the NCCL API (the scratch path) that the wide one-phase LL plan serves, above the tiers' own LL bound; the two-phase LL or windowed plans beyond; 0: none (default on GPUs: 2M / (ranks − 1) as a power of two; 4M on 2 ranks with LL128 lines, WEFT_LL128); every rank must set the same"},
	{"WEFT_COLL_LL_MAX_BYTES", "", "largest segment (bytes per rank: AllGather input, ReduceScatter output, an AllToAll peer's part) that AllGather, ReduceScatter and AllToAll send as LL packets (the wide LL plans above 64K on GPUs); the windowed plans beyond; 0: no LL plans (default on GPUs: 512K / (ranks − 1) as a power of two, at least 256K; with LL128 lines, WEFT_LL128, 1M on 2 ranks and 2M from 3); AllGather takes WEFT_ALLGATHER_LL_MAX_BYTES's bound where that is set; every rank must set the same"},
	{"WEFT_ALLGATHER_LL_MAX_BYTES", "", "largest AllGather input segment (bytes) sent as LL packets, in place of WEFT_COLL_LL_MAX_BYTES's bound (default on GPUs with LL128 lines (WEFT_LL128): 1M from 3 ranks, where ReduceScatter and AllToAll take 2M; else WEFT_COLL_LL_MAX_BYTES's); every rank must set the same"},
	{"WEFT_BROADCAST_SPLIT_LL_MAX_BYTES", "", "largest Broadcast (bytes) that the split LL plan serves from 3 ranks (n−1 chunks in two hops as LL packets, above WEFT_ROOTED_LL_MAX_BYTES); 0 turns it off (default on GPUs: 2M; 8M with LL128 lines (WEFT_LL128), measured on 4×H100); every rank must set the same"},
	{"WEFT_REDUCE_SPLIT_LL_MAX_BYTES", "", "largest Reduce (bytes) that the split LL plan serves from 3 ranks, as WEFT_BROADCAST_SPLIT_LL_MAX_BYTES (default on GPUs: 8M from 3 ranks with LL128 lines (WEFT_LL128), above WEFT_REDUCE_LL_MAX_BYTES; off otherwise, where LL16 packets lost to the windowed plans on 4×H100); every rank must set the same"},
	{"WEFT_ROOTED_SPLIT_MIN_BYTES", "", "smallest Broadcast or Reduce message (bytes) that takes the split plans (two hops, every link carrying the message once) instead of the all-pairs windowed ones from 3 ranks; 0 turns them off (default on GPUs: 4M; docs/collectives.md, \"Split Broadcast and Reduce past two ranks\"); every rank must set the same"},
	{"WEFT_ROOTED_SHAPE", "", "shape of the windowed Broadcast and Reduce plans as WEFT_HB_SHAPE writes it, with optional dDEPTH (windows in flight, 2–16) and pPIPELINE[@FROM] (the fewest windows a chunk of at least one window, or of FROM bytes, is cut into) (default on GPUs: min(128, SMs) blocks x 512 threads, windows of 16M on 2 ranks, 4M beyond, depth 4 on 3–5 ranks and 2 elsewhere, pipeline 4; from 3 ranks and 4M the split plans give each of their two groups half the blocks); every rank must set the same"},
	{"WEFT_ALLREDUCE", "", "AllReduce tiers, overriding the tuning file: comma-separated plans with the largest message each serves, e.g. 1pa-LL16-1x1024@4K,1pa-LL16-8x1024@128K,2pa-64x1024-u4@16M,2pa-128x512-u2 (see docs/tuning.md; `weft bench` prints the names)"},
	{"WEFT_TUNING_FILE", "$XDG_CONFIG_HOME/weft/tuning.json", "tuning file read by communicators and written by `weft bench all_reduce --tune`; off: read none. A file named here must exist; the default may be absent"},
	{"WEFT_MAX_CTAS", "", "most thread blocks (CTAs, one SM each at most) one launch of a communicator holds, as NCCL's maxCTAs: plans are fitted with fewer blocks per group; a plan that cannot run with so few keeps its minimum (logged). Unset: each plan's default (docs/tuning.md, SM budget)"},
	{"WEFT_MIN_CTAS", "", "fewest thread blocks a launch holds where a plan's shape can grow (within WEFT_MAX_CTAS and the device's SMs), as NCCL's minCTAs; unset: none"},
	{"NCCL_MAX_CTAS", "", "libweft_nccl.so only: as in NCCL, overrides ncclConfig_t.maxCTAs (values ≤ 0 ignored) and bounds weft's plans as WEFT_MAX_CTAS does"},
	{"NCCL_MIN_CTAS", "", "libweft_nccl.so only: as in NCCL, overrides ncclConfig_t.minCTAs (values ≤ 0 ignored; above the maximum: set to it)"},
	{"WEFT_LL128", "", "1: the wide LL plans (more blocks, messages of 64 KiB to a few MiB: the wide LL plans of every collective, the scratch AllReduce's wide one-phase and two-phase LL plans, the split LL Broadcast and Reduce) write LL128 lines (120 data bytes and a flag in 128, stored by 8 threads of a warp in one instruction, as NCCL's LL128) instead of LL16 packets (8 in 16); an error where some link between the ranks does not carry LL128 lines as one write (only NVLink between two GPUs does, judged by its native peer-to-peer atomics: hal/nvlink, hal/nvswitch; and hal/host's reference); 0: LL16 (default: 1 where every link of every rank carries them, LL16 elsewhere); every rank must set the same"},
	{"WEFT_STREAM_BATCH", "1", "queue consecutive flag waits and writes of the host-issued copy-engine plans (AllGather, AllReduce) as one cuStreamBatchMemOp (fewer driver calls and front-end operations: 2×H100, CE AllGather 256 MB 496 → 484 µs); 0 queues each with its own call"},
	{"WEFT_NVLS", "", "set to 1 to allow NVLink SHARP multicast (hal/nvswitch); never on shared hosts"},
	{"WEFT_PCIE_P2P", "1", "hal/pcie: set to 0 to turn CUDA peer access off, so that every link between GPUs is host-staged through shared memory"},
	{"WEFT_PROXY_PROFILE", "", "set to 1 to time the stages of the port-channel proxy and of the socket transport (trigger seen, engine calls, completions, hand-offs) and the host side of every call (libweft_nccl's argument checks and stream lookup, Launch's plan choice, program lookup, stream order and enqueue) and log a summary per stage when they close (docs/portchannel.md, Proxy); costs a clock read per stage"},
	{"WEFT_PROXY_TRACE", "", "a directory: the proxy and the socket transport record when each trigger is handled and each frame written, read and applied (wall clock, shared by the processes of a host) and write the process's last 131072 events to DIR/weft-trace-PID.txt when they close; scripts/net-trace.py joins two ranks' files into the path of every hop (docs/network.md)"},
	{"WEFT_HEAP_FLOOR", "64M", "libweft_nccl.so: bytes of a never-written, pointer-free allocation that keeps the library's Go heap goal above twice that, so the allocations of each call start a collection every tens of MB instead of every 2 MB (each stops the world and takes mark work from the calling thread: 0.2–1.0 µs a call on average in an eager loop on 2×H100); costs up to about that much resident memory in garbage held between collections; 0: none (GOGC and GOMEMLIMIT apply either way)"},
	{"WEFT_DEBUG_STACKS", "", "libweft_nccl.so: set to 1 to make SIGUSR1 write every goroutine's stack to stderr (where a hung job's proxy or transport waits)"},
	{"WEFT_CE_LANES", "2", "hal/nvlink: CUDA streams of a copy engine to a peer GPU (1 to 8): puts of 2 MiB or more are cut over all but the last, local copies take the last; 1 puts everything on one stream (docs/portchannel.md, Copy engines)"},
}

func lookup(name string) Var {
	for _, v := range Table {
		if v.Name == name {
			return v
		}
	}
	panic("env: undeclared variable " + name)
}

// String returns the variable's value, or "" when unset. It panics on a
// name missing from Table, so that the table stays complete.
func String(name string) string {
	lookup(name)
	return os.Getenv(name)
}

// Duration returns the variable as a Go duration, or def when unset. A
// malformed value is an error naming the variable and wrapping
// errkind.ErrInvalidArgument.
func Duration(name string, def time.Duration) (time.Duration, error) {
	s := String(name)
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive Go duration such as 10s: %w", name, s, errkind.ErrInvalidArgument)
	}
	return d, nil
}

// Int returns the variable as an integer; ok is false when unset. A
// malformed value is an error wrapping errkind.ErrInvalidArgument.
func Int(name string) (v int, ok bool, err error) {
	s := String(name)
	if s == "" {
		return 0, false, nil
	}
	v, err = strconv.Atoi(s)
	if err != nil {
		return 0, false, fmt.Errorf("%s=%q: want an integer: %w", name, s, errkind.ErrInvalidArgument)
	}
	return v, true, nil
}

// List returns a comma-separated variable as a list, trimmed, empty
// entries dropped.
func List(name string) []string {
	var out []string
	for _, f := range strings.Split(String(name), ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Required reports whether backend is named in WEFT_REQUIRE.
func Required(backend string) bool {
	for _, b := range List("WEFT_REQUIRE") {
		if strings.EqualFold(b, backend) {
			return true
		}
	}
	return false
}

// Timeout is WEFT_TIMEOUT or 10 s, also for a malformed value: callers
// that can fail read it with Duration (NewComm does, and the CLI checks
// every variable with CheckAll first), so that a bad value is an error.
func Timeout() time.Duration {
	d, err := Duration("WEFT_TIMEOUT", 10*time.Second)
	if err != nil {
		return 10 * time.Second
	}
	return d
}

var (
	logOnce sync.Once
	level   slog.Level
	enabled bool
	subsys  map[string]bool
)

// Logger returns the logger of a subsystem (INIT, COLL, BOOT, HAL, TOPO,
// BENCH, CONF). Logging is silent unless WEFT_DEBUG is set, and limited to
// the subsystems in WEFT_DEBUG_SUBSYS. Output goes to standard error.
func Logger(sub string) *slog.Logger {
	logOnce.Do(func() {
		switch strings.ToUpper(String("WEFT_DEBUG")) {
		case "WARN":
			level, enabled = slog.LevelWarn, true
		case "INFO":
			level, enabled = slog.LevelInfo, true
		case "TRACE", "DEBUG":
			level, enabled = slog.LevelDebug, true
		}
		subsys = map[string]bool{}
		for _, s := range List("WEFT_DEBUG_SUBSYS") {
			subsys[strings.ToUpper(s)] = true
		}
		if len(subsys) == 0 {
			subsys["ALL"] = true
		}
	})
	if !enabled || !(subsys["ALL"] || subsys[strings.ToUpper(sub)]) {
		return slog.New(slog.DiscardHandler)
	}
	h := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	return slog.New(h).With("subsys", sub, "pid", os.Getpid())
}

// Markdown renders Table as the page docs/environment.md.
func Markdown() string {
	var b strings.Builder
	b.WriteString("# Environment variables\n\nGenerated by `weft env --markdown` from `internal/env`, the one place weft reads them.\n")
	b.WriteString("Precedence: explicit option > `WEFT_*` variable > tuning file > default.\n\n")
	b.WriteString("| variable | default | meaning |\n|---|---|---|\n")
	for _, v := range Table {
		def := v.Default
		if def == "" {
			def = "(unset)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.Name, def, strings.ReplaceAll(v.Doc, "|", "\\|"))
	}
	return b.String()
}
