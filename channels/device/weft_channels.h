// weft_channels.h: the channel device library of weft.
//
// Generated plan kernels (hal/plan EmitCUDA) are straight-line calls into
// this library: memory-channel signal and wait on 64-bit semaphores, and
// transfers that read one or more sources (local or peer buffers, LL
// packets), reduce them and write one or more destinations (local or peer
// buffers, LL packets). It is written only against the HAL device header
// (weft_hal.h: memory-model primitives, packet stores, packed half math), so
// it compiles unchanged for any backend that provides that header.
//
// Layouts (scratch slots, semaphore regions, control block, launch state)
// are those of package hal/plan, which documents them; the Go interpreter of
// hal/host implements the same semantics.
//
// Every wait has a deadline (params.timeout_ns, measured on the GPU global
// timer). When it passes, or another block has failed, the block records
// rank, peer, channel, semaphore, expected and observed values in the
// host-visible control block (first failure wins) and leaves the kernel.
#pragma once
#include "weft_hal.h"
#include "weft_reduce.h"

#ifndef WEFT_MAX_PEERS
#define WEFT_MAX_PEERS 16
#endif
#ifndef WEFT_MAX_GROUP_ARGS
#define WEFT_MAX_GROUP_ARGS (2 * WEFT_MAX_PEERS + 1)
#endif
#define WEFT_SKIP_COUNT (~0ull)

// Kernel parameters: plan bindings and launch arguments, passed by value.
// The Go side (hal/plan PackParams) writes exactly this layout.
struct weft_params {
  weft_u64 scratch, scratch_bytes, sems, expected, state, control;
  // Network windows of a plan that splits them (plan.Plan.NetSlot; else
  // scratch and sems again): slots from NetSlot on, and the inbound
  // semaphores of the channels in net_chans (bit i: channel i).
  weft_u64 net_scratch, net_sems, net_chans;
  weft_u64 peer_scratch[WEFT_MAX_PEERS];
  weft_u64 peer_sems[WEFT_MAX_PEERS];
  weft_u64 count, input, output;
  weft_u64 peer_input[WEFT_MAX_PEERS];
  weft_u64 peer_output[WEFT_MAX_PEERS];
  weft_u64 timeout_ns;
  weft_u64 scalar, scalar_ptr;  // PreMulSum multiplier: bits of one element, or its device address
  weft_u64 fifo, fifo_head;     // port-channel FIFO (host memory) and its head counter (device memory)
  // Per-group arguments (plan.Group.Arg k ≥ 1 uses entry k−1); a count of
  // WEFT_SKIP_COUNT leaves the group out of the launch.
  weft_u64 gcount[WEFT_MAX_GROUP_ARGS], ginput[WEFT_MAX_GROUP_ARGS], goutput[WEFT_MAX_GROUP_ARGS];
  // Posted-buffer exchange of point-to-point groups (plan.GroupArgs.Post:
  // 0 none, 1 PostNone, else registration id << 48 | byte offset) and the
  // communicator's post table (plan.Args.PostTable; "posted receive
  // buffers" below).
  weft_u64 gpost[WEFT_MAX_GROUP_ARGS];
  weft_u64 post_table;
  // Switch buffer (plan.Bindings.Switch, Multicast, SwitchBytes; plan
  // SwitchSlots): this rank's copy, the group's multicast address, the
  // capacity and the slots per half. 0 for plans without one (weft_switch.h).
  weft_u64 switch_local, switch_mc, switch_bytes, switch_slots;
  weft_i32 rank, nranks, semaphores, scratch_slots;
  weft_i32 peers[WEFT_MAX_PEERS];  // peer rank of each channel
};

namespace weft {

using namespace weft::hal;

// Control-block offsets (plan.Ctl*).
enum {
  CTL_ABORT = 0, CTL_STATUS = 4, CTL_RANK = 8, CTL_PEER = 12, CTL_CHANNEL = 16,
  CTL_SEMAPHORE = 20, CTL_BLOCK = 24, CTL_WHAT = 28, CTL_EXPECTED = 32, CTL_OBSERVED = 40,
  CTL_LAUNCH = 48,
};
enum { STATUS_TIMEOUT = 1, STATUS_MISMATCH = 2, STATUS_ABORTED = 3 };
enum { WHAT_SEMAPHORE = 1, WHAT_PACKET = 2 };
enum { PROTO_SIMPLE = 0, PROTO_LL16 = 1, PROTO_LL8 = 2, PROTO_LL128 = 3 };
// LL128 geometry (plan.LL128Line): a line of 120 data bytes and a flag
// word; a slot's header is an LL16 packet padded to a line.
constexpr int LL128_LINE = 128, LL128_DATA = 120;


// ---- per-launch context ------------------------------------------------------

struct Ctx {
  const weft_params* p;
  weft_u64 count, input, output;  // the group's element count and buffers
  weft_u64 scalar;                // PreMulSum multiplier (bits of one element)
  weft_u64 launch;  // launch number (plan state word 0)
  weft_u32 flag;    // LL flag of this launch: launch mod (2^32-1) + 1
  int part, nparts, block;
  // tag is what this block's signals store in the peer's count word and
  // its checked waits compare: the count, or in a rolling group's window
  // (plan.Group.Rolling) count·D + the window's scratch position (D =
  // 2^rollbits, the plan's window depth), set per window. A rolling writer
  // may be up to D − 1 windows ahead of its reader, into later launches,
  // whose counts may differ: a tag of another position is a later
  // window's and is not compared. rollbits 0: not in a rolling window.
  weft_u64 tag;
  int rollbits;
};

__shared__ int weft_block_failed;

WEFT_DEV weft_u32* control_u32(const Ctx& c, int off) { return (weft_u32*)(c.p->control + off); }

WEFT_DEV bool aborted(const Ctx& c) { return ld_relaxed_sys32(control_u32(c, CTL_ABORT)) != 0; }

// fail records the launch's first failure and makes every block stop.
WEFT_DEV void fail(const Ctx& c, weft_u32 status, weft_u32 what, int ch, int sem, weft_u64 expected, weft_u64 observed) {
  char* ctl = (char*)c.p->control;
  if (atomic_cas_sys32(control_u32(c, CTL_STATUS), 0, status) == 0) {
    *(volatile weft_i32*)(ctl + CTL_RANK) = c.p->rank;
    *(volatile weft_i32*)(ctl + CTL_PEER) = ch >= 0 ? c.p->peers[ch] : -1;
    *(volatile weft_i32*)(ctl + CTL_CHANNEL) = ch;
    *(volatile weft_i32*)(ctl + CTL_SEMAPHORE) = sem;
    *(volatile weft_i32*)(ctl + CTL_BLOCK) = c.block;
    *(volatile weft_u32*)(ctl + CTL_WHAT) = what;
    *(volatile weft_u64*)(ctl + CTL_EXPECTED) = expected;
    *(volatile weft_u64*)(ctl + CTL_OBSERVED) = observed;
    *(volatile weft_u64*)(ctl + CTL_LAUNCH) = c.launch;
    fence_sys();
  }
  st_relaxed_sys32(control_u32(c, CTL_ABORT), 1);
}

// Deadline keeps the cost of polling low. The global timer is read once
// every 1024 polls. The abort word lives in host memory, and a read of it
// crosses PCIe: it is read only once a wait has lasted ABORT_CHECK_NS, and
// then at most once per ABORT_CHECK_NS per thread, so thousands of threads
// in short waits never touch it (each one did, in v2, once every 1024 polls,
// which stalled 32 KB LL launches by ~6 µs now and then).
constexpr weft_u64 ABORT_CHECK_NS = 20000;

struct Deadline {
  weft_u64 end, next_abort_check;
  weft_u32 polls;
  WEFT_DEV explicit Deadline(const Ctx& c) : end(0), next_abort_check(0), polls(0) {}
  // expired returns true when the wait must give up (deadline or abort).
  WEFT_DEV bool expired(const Ctx& c) {
    if ((++polls & 1023) != 0) return false;
    weft_u64 now = globaltimer_ns();
    if (end == 0) {
      end = now + c.p->timeout_ns;
      next_abort_check = now + ABORT_CHECK_NS;
      return false;
    }
    if (now >= end) return true;
    if (now < next_abort_check) return false;
    next_abort_check = now + ABORT_CHECK_NS;
    return aborted(c);
  }
};

WEFT_DEV Ctx begin(const weft_params& p, int part, int nparts, int arg) {
  Ctx c;
  c.p = &p;
  if (arg == 0) {
    c.count = p.count, c.input = p.input, c.output = p.output;
  } else {
    c.count = p.gcount[arg - 1], c.input = p.ginput[arg - 1], c.output = p.goutput[arg - 1];
  }
  c.scalar = p.scalar;
  c.tag = c.count;
  c.rollbits = 0;
  c.launch = ((volatile weft_u64*)p.state)[blockIdx.x];
  c.flag = (weft_u32)(c.launch % 0xFFFFFFFFull) + 1;
  c.part = part;
  c.nparts = nparts;
  c.block = blockIdx.x;
  if (threadIdx.x == 0) weft_block_failed = 0;
  __syncthreads();
  return c;
}

// finish: each block advances its own launch counter (plan.StateBytes);
// the next launch on the stream starts after this one ends, so no
// cross-block atomic is needed.
WEFT_DEV void finish(const weft_params& p) {
  if (threadIdx.x == 0) {
    volatile weft_u64* mine = (volatile weft_u64*)p.state + blockIdx.x;
    *mine = *mine + 1;
  }
}

// block_ok synchronises the block and reports whether every thread
// succeeded; a failed block leaves the kernel through finish().
WEFT_DEV bool block_ok(bool ok) {
  if (!ok) weft_block_failed = 1;
  __syncthreads();
  return weft_block_failed == 0;
}

// ---- ranges (plan.ChunkRange and plan.PartRange) ----------------------------

WEFT_DEV void split(weft_u64 count, weft_u64 align, weft_u64 i, weft_u64 n, weft_u64& off, weft_u64& len) {
  weft_u64 per = (count + n - 1) / n;
  per = (per + align - 1) / align * align;
  off = i * per < count ? i * per : count;
  len = count - off < per ? count - off : per;
}

// range_span: this block's part of the whole range in a group with a span
// (plan.Group.Span, plan.SpanRange): the span is split among the blocks,
// then clipped to the count; the last block also takes anything beyond it.
template <int ES>
WEFT_DEV void range_span(const Ctx& c, weft_u64 span_bytes, weft_u64& off, weft_u64& len) {
  weft_u64 per = ((span_bytes + ES - 1) / ES + c.nparts - 1) / c.nparts;
  per = (per + 16 / ES - 1) / (16 / ES) * (16 / ES);
  off = c.part * per < c.count ? c.part * per : c.count;
  weft_u64 end = c.part == c.nparts - 1 ? c.count : off + per;
  if (end > c.count) end = c.count;
  len = end > off ? end - off : 0;
}

// ALIGN is the plan's boundary granularity in bytes
// (plan.Protocol.PartAlignBytes: 16, or 240 for LL128).
template <int ES, int ALIGN = 16>
WEFT_DEV void range(const Ctx& c, int chunk, int nchunks, weft_u64& off, weft_u64& len, weft_u64& cstart) {
  weft_u64 o = 0, l = c.count;
  if (chunk >= 0) split(c.count, ALIGN / ES, chunk, nchunks, o, l);
  weft_u64 po, pl;
  split(l, ALIGN / ES, c.part, c.nparts, po, pl);
  off = o + po;
  len = pl;
  cstart = o;
}

// range without the chunk's start (cstart: where a plan with slot chunks,
// plan.Plan.SlotChunks, counts its scratch operands from).
template <int ES, int ALIGN = 16>
WEFT_DEV void range(const Ctx& c, int chunk, int nchunks, weft_u64& off, weft_u64& len) {
  weft_u64 cstart;
  range<ES, ALIGN>(c, chunk, nchunks, off, len, cstart);
}

// ---- windowed groups (plan.Group.Windows, WindowPart, WindowScratchOffset) ----

// windows: how many windows a call cuts its largest chunk into
// (plan.Group.Windows): enough of window_bytes, at least one, and at least
// `pipeline` for a chunk of at least from_bytes (window_bytes where 0).
template <int ES>
WEFT_DEV weft_u64 windows(const Ctx& c, weft_u64 window_bytes, int nchunks, int pipeline, weft_u64 from_bytes) {
  weft_u64 o, per;
  split(c.count, 16 / ES, 0, nchunks, o, per);
  const weft_u64 we = window_bytes / ES;
  const weft_u64 from = from_bytes > 0 ? from_bytes / ES : we;
  weft_u64 n = (per + we - 1) / we;
  if (n == 0) n = 1;
  if (per >= from && n < (weft_u64)pipeline) n = (weft_u64)pipeline;
  return n;
}

// window_elems: the length of every one of the call's nwin windows
// (plan.Group.WindowElems): the largest chunk cut into nwin equal, aligned
// windows, so that every window spreads over all of the group's blocks.
// A group computes nwin and this once, before its window loop.
template <int ES>
WEFT_DEV weft_u64 window_elems(const Ctx& c, int nchunks, weft_u64 nwin) {
  weft_u64 o, per;
  split(c.count, 16 / ES, 0, nchunks, o, per);
  const weft_u64 align = 16 / ES;
  const weft_u64 we = ((per + nwin - 1) / nwin + align - 1) / align * align;
  return we > align ? we : align;
}

// range_w: this block's share of window w (of we elements, window_elems) of
// chunk `chunk`; the window is split among the blocks, then clipped to the
// chunk, so a block owns the same scratch region in every window of the call.
template <int ES>
WEFT_DEV void range_w(const Ctx& c, int chunk, int nchunks, weft_u64 w, weft_u64 we, weft_u64& start, weft_u64& off,
                      weft_u64& len) {
  weft_u64 co, cl, po, pl;
  split(c.count, 16 / ES, chunk, nchunks, co, cl);
  split(we, 16 / ES, c.part, c.nparts, po, pl);
  const weft_u64 end = co + cl;
  start = co + w * we;
  off = start + po < end ? start + po : end;
  const weft_u64 e = start + po + pl < end ? start + po + pl : end;
  len = e > off ? e - off : 0;
}

// wslot_at: element elem (from the window's start) of slot `slot` in window
// w; windows take the scratch's D parts in turn (plan.Plan.WindowDepth: two
// halves unless the plan says more). part, where above 0, is the slots a
// part of the region holds (a split plan's network windows: slot counts
// from plan.Plan.NetSlot; plan.Plan.regionSlot); the stride is the
// scratch's either way.
template <int ES, int D = 2>
WEFT_DEV char* wslot_at(const Ctx& c, weft_u64 scratch, int slot, weft_u64 w, weft_u64 elem, int part = 0) {
  const weft_u64 stride = c.p->scratch_bytes / D / c.p->scratch_slots / 16 * 16;
  const weft_u64 n = part > 0 ? part : c.p->scratch_slots;
  return (char*)(scratch + ((w % D) * n + slot) * stride + elem * ES);
}

// ---- scratch layout (plan.SlotStride, HeaderOffset, ScratchOffset) ----------

// An LL plan's scratch has D parts (plan.Plan.WindowDepth: two halves
// unless the plan says more); launch k uses part k mod D. part: as in
// wslot_at.
template <int PROTO, int D = 2>
WEFT_DEV weft_u64 slot_base(const Ctx& c, weft_u64 scratch, int slot, int part = 0) {
  const weft_u64 halves = PROTO == PROTO_SIMPLE ? 1 : D;
  const weft_u64 align = PROTO == PROTO_LL128 ? LL128_LINE : 16;  // plan.Protocol.SlotAlign
  weft_u64 stride = c.p->scratch_bytes / halves / c.p->scratch_slots / align * align;
  weft_u64 half = PROTO == PROTO_SIMPLE ? 0 : (c.launch % D);
  const weft_u64 n = part > 0 ? part : c.p->scratch_slots;
  return scratch + (half * n + slot) * stride;
}

// Address of the packet (or plain byte) holding element elem of slot.
template <int PROTO, int ES, int D = 2>
WEFT_DEV char* slot_at(const Ctx& c, weft_u64 scratch, int slot, weft_u64 elem, int part = 0) {
  weft_u64 base = slot_base<PROTO, D>(c, scratch, slot, part);
  if (PROTO == PROTO_SIMPLE) return (char*)(base + elem * ES);
  // elem·ES is a multiple of a line's data at a part's start (PART_ALIGN).
  if (PROTO == PROTO_LL128) return (char*)(base + LL128_LINE + elem * ES / LL128_DATA * LL128_LINE);
  const weft_u64 payload = PROTO == PROTO_LL16 ? 8 : 4, pkt = PROTO == PROTO_LL16 ? 16 : 8;
  return (char*)(base + 16 + elem * ES / payload * pkt);
}

// ---- semaphores ------------------------------------------------------------------

// signal_one stores the call's count beside the peer's semaphore and
// increments it, with release semantics at system scope unless relaxed.
// Called by one thread after the block's barrier, so that every earlier
// write of the block is ordered before it.
// inbound_region is the semaphore region that the peer of channel ch
// signals: the network's (net_sems) for the channels of net_chans, the
// device's otherwise (plan.Plan.NetSlot).
WEFT_DEV weft_u64* inbound_region(const weft_params& p, int ch) {
  return (weft_u64*)((p.net_chans >> ch) & 1 ? p.net_sems : p.sems);
}

WEFT_DEV void signal_one(const Ctx& c, int ch, int sem, bool relaxed) {
  const weft_params& p = *c.p;
  weft_u64 idx = (weft_u64)p.rank * p.semaphores + sem;
  weft_u64* base = (weft_u64*)p.peer_sems[ch];
  st_relaxed_sys(base + (weft_u64)p.nranks * p.semaphores + idx, c.tag);
  // The block barrier before this call orders the block's writes before
  // this thread's; release at system scope is cumulative over them (PTX
  // memory model: bar.sync is morally strong at CTA scope), so no separate
  // fence is needed.
  if (relaxed) {
    red_add_relaxed_sys(base + idx, 1);
  } else {
    red_add_release_sys(base + idx, 1);
  }
}

// wait_one waits until this rank's semaphore for the peer of channel ch
// passes the next expected value, then (check) verifies the count the peer
// stored. It polls with relaxed loads and makes one acquire load once the
// value is reached (unless relaxed): an acquire on every poll costs more
// than the poll. False when the wait failed (recorded).
WEFT_DEV bool wait_one(const Ctx& c, int ch, int sem, bool relaxed, bool check) {
  const weft_params& p = *c.p;
  weft_u64 idx = (weft_u64)p.peers[ch] * p.semaphores + sem;
  weft_u64* const region = inbound_region(p, ch);
  weft_u64* inbound = region + idx;
  weft_u64* expected = (weft_u64*)p.expected + idx;
  weft_u64 want = *expected + 1;
  *expected = want;
  Deadline d(c);
  weft_u64 v;
  while ((v = ld_relaxed_sys(inbound)) < want) {
    if (d.expired(c)) {
      v = ld_acquire_sys(inbound);
      if (v >= want) break;
      if (*(volatile weft_u32*)(p.control + CTL_STATUS) == 0) fail(c, STATUS_TIMEOUT, WHAT_SEMAPHORE, ch, sem, want, v);
      return false;
    }
  }
  if (!relaxed) ld_acquire_sys(inbound);
  if (!check) return true;
  weft_u64 theirs = ld_relaxed_sys(region + (weft_u64)p.nranks * p.semaphores + idx);
  if (theirs != c.tag && !(c.rollbits && ((theirs ^ c.tag) & ((1ull << c.rollbits) - 1)))) {
    fail(c, STATUS_MISMATCH, WHAT_SEMAPHORE, ch, sem, c.count, theirs >> c.rollbits);
    return false;
  }
  return true;
}

// signal: the block's writes so far, then one signal to channel ch.
WEFT_DEV void signal(const Ctx& c, int ch, int sem, bool relaxed) {
  __syncthreads();
  if (threadIdx.x == 0) signal_one(c, ch, sem, relaxed);
}

// signal_all: N signals issued in parallel, thread k signalling chs[k].
template <int N>
WEFT_DEV void signal_all(const Ctx& c, const int (&chs)[N], const int (&sems)[N], bool relaxed) {
  __syncthreads();
  if (threadIdx.x < N) signal_one(c, chs[threadIdx.x], sems[threadIdx.x], relaxed);
}

// wait: one thread waits, the block follows. False when the block must
// leave the kernel (this or another wait failed).
WEFT_DEV bool wait(const Ctx& c, int ch, int sem, bool relaxed, bool check) {
  bool ok = threadIdx.x != 0 || wait_one(c, ch, sem, relaxed, check);
  return block_ok(ok);
}

// wait_all: N waits in parallel, thread k waiting on chs[k].
template <int N>
WEFT_DEV bool wait_all(const Ctx& c, const int (&chs)[N], const int (&sems)[N], const bool (&check)[N], bool relaxed) {
  bool ok = threadIdx.x >= N || wait_one(c, chs[threadIdx.x], sems[threadIdx.x], relaxed, check[threadIdx.x]);
  return block_ok(ok);
}

// wait_credits: the credit waits of plan.Op.Credits on the channels chs,
// semaphore base sem. Each run is one more expected release per channel
// (the block's own expected value, sem + part, advances by one), and the
// wait passes once every block q of the peer's group (as many blocks as
// this one's) has signalled sem + q at least that often, less `credits`:
// a block's share of a message depends on the count, which may change from
// launch to launch, so a writer block must know that all reader blocks
// have released the scratch half, not only its namesake. The first
// `credits` runs pass at once. Thread t polls pair t (channel t / nparts,
// reader block t % nparts) with relaxed loads and makes one acquire load
// once it is reached, so a release that is already there (the steady
// state) costs every thread one load, in parallel. False when the block
// must leave the kernel.
template <int N>
WEFT_DEV bool wait_credits(const Ctx& c, const int (&chs)[N], int sem, int credits) {
  const weft_params& p = *c.p;
  const int np = c.nparts;
  // Every thread reads the expected values before thread k < N advances
  // channel k's (after the barrier below).
  bool ok = true;
  for (int i = threadIdx.x; ok && i < N * np; i += blockDim.x) {
    const int ch = chs[i / np];
    const int s = sem + i % np;
    weft_u64 want = ((weft_u64*)p.expected)[(weft_u64)p.peers[ch] * p.semaphores + sem + c.part] + 1;
    if (want > (weft_u64)credits) {
      want -= (weft_u64)credits;
      weft_u64* inbound = inbound_region(p, ch) + (weft_u64)p.peers[ch] * p.semaphores + s;
      Deadline d(c);
      weft_u64 v;
      while ((v = ld_relaxed_sys(inbound)) < want) {
        if (d.expired(c)) {
          v = ld_acquire_sys(inbound);
          if (v >= want) break;
          if (*(volatile weft_u32*)(p.control + CTL_STATUS) == 0) fail(c, STATUS_TIMEOUT, WHAT_SEMAPHORE, ch, s, want, v);
          ok = false;
          break;
        }
      }
      if (ok) ld_acquire_sys(inbound);
    }
  }
  __syncthreads();
  if (threadIdx.x < N) ((weft_u64*)p.expected)[(weft_u64)p.peers[chs[threadIdx.x]] * p.semaphores + sem + c.part] += 1;
  return block_ok(ok);
}

// ---- posted receive buffers (zero-copy point-to-point; plan/posted.go) --------

// Mailbox words live in the semaphore regions (plan.PostMailbox): the
// counter and count word of index sem + k·B + part, from the peer's rank
// (in) or from this rank in the peer's region (out). They are plain stores
// of sequence numbers, never increments.
WEFT_DEV weft_u64* mailbox_out(const Ctx& c, int ch, int idx) {
  return (weft_u64*)c.p->peer_sems[ch] + (weft_u64)c.p->rank * c.p->semaphores + idx;
}
WEFT_DEV weft_u64* mailbox_in(const Ctx& c, int ch, int idx) {
  return inbound_region(*c.p, ch) + (weft_u64)c.p->peers[ch] * c.p->semaphores + idx;
}
WEFT_DEV weft_u64 count_word(const Ctx& c) { return (weft_u64)c.p->nranks * c.p->semaphores; }

// mailbox_wait polls *w until key(*w) == want (key: the value, or the value
// >> 1 for an answer), deadline-bound; one acquire load once it matches.
// False when the wait failed (recorded).
WEFT_DEV bool mailbox_wait(const Ctx& c, int ch, int idx, weft_u64* w, weft_u64 want, int shift, weft_u64& v) {
  Deadline d(c);
  while (((v = ld_relaxed_sys(w)) >> shift) != want) {
    if (d.expired(c)) {
      v = ld_acquire_sys(w);
      if ((v >> shift) == want) return true;
      if (*(volatile weft_u32*)(c.p->control + CTL_STATUS) == 0) fail(c, STATUS_TIMEOUT, WHAT_SEMAPHORE, ch, idx, want << shift, v);
      return false;
    }
  }
  v = ld_acquire_sys(w);
  return true;
}

// post_recv is the receive side's exchange: post this block's output (arg:
// plan.GroupArgs.Post) with the launch's sequence number, and when it names
// a registration, wait for the sender's answer. 1: the sender stored the
// data directly (the group is done); 0: the windowed ops follow; −1: failed.
WEFT_DEV int post_recv(const Ctx& c, int ch, int sem, weft_u64 arg) {
  __shared__ int res;
  if (threadIdx.x == 0) {
    const int B = c.nparts, p = c.part;
    const weft_u64 seq = c.launch + 1;
    st_relaxed_sys(mailbox_out(c, ch, sem + B + p), arg);
    st_relaxed_sys(mailbox_out(c, ch, sem + p) + count_word(c), c.count);
    st_release_sys(mailbox_out(c, ch, sem + p), seq);
    int r = 0;
    if (arg > 1) {
      const int idx = sem + 2 * B + p;
      weft_u64 v;
      if (!mailbox_wait(c, ch, idx, mailbox_in(c, ch, idx), seq, 1, v)) {
        r = -1;
      } else if (v & 1) {
        weft_u64 theirs = ld_relaxed_sys(mailbox_in(c, ch, idx) + count_word(c));
        if (theirs != c.count) {
          fail(c, STATUS_MISMATCH, WHAT_SEMAPHORE, ch, idx, c.count, theirs);
          r = -1;
        } else {
          r = 1;
        }
      }
    }
    res = r;
  }
  __syncthreads();
  return res;
}

// post_take is the send side's exchange: wait for the receiver's post of
// this launch and look it up in the post table (plan.PostEntryOffset).
// posted gets the buffer's address mapped here when the entry is there for
// that id, the counts agree and count·ES bytes fit at the offset; 0 sends
// the block down the windowed path (answered "refused" when the post named
// a registration). False when the wait failed (recorded).
template <int ES>
WEFT_DEV bool post_take(const Ctx& c, int ch, int sem, weft_u64& posted) {
  __shared__ weft_u64 dst;
  __shared__ int ok;
  if (threadIdx.x == 0) {
    const int B = c.nparts, p = c.part;
    const weft_u64 seq = c.launch + 1;
    weft_u64 v, d = 0;
    ok = mailbox_wait(c, ch, sem + p, mailbox_in(c, ch, sem + p), seq, 0, v);
    if (ok) {
      const weft_u64 arg = ld_relaxed_sys(mailbox_in(c, ch, sem + B + p));
      const weft_u64 theirs = ld_relaxed_sys(mailbox_in(c, ch, sem + p) + count_word(c));
      if (arg > 1) {
        const weft_u64 id = arg >> 48, off = arg & ((1ull << 48) - 1);
        const weft_u64 stride = 1 + 2 * (weft_u64)c.p->nranks;
        const volatile weft_u64* e = (const volatile weft_u64*)c.p->post_table + (id % 256) * stride;
        const int peer = c.p->peers[ch];
        if (c.p->post_table != 0 && e[0] == id && theirs == c.count) {
          const weft_u64 base = e[1 + 2 * peer], size = e[2 + 2 * peer], bytes = c.count * ES;
          if (base != 0 && off <= size && bytes <= size - off) d = base + off;
        }
        if (d == 0) {
          const int idx = sem + 2 * B + p;
          st_relaxed_sys(mailbox_out(c, ch, idx) + count_word(c), c.count);
          st_release_sys(mailbox_out(c, ch, idx), seq << 1);
        }
      }
    }
    dst = d;
  }
  __syncthreads();
  posted = dst;
  return ok;
}

// post_done answers "direct" once every thread of the block has stored its
// part into the posted buffer: the barrier orders the block's stores
// before thread 0's release at system scope (as signal_one).
WEFT_DEV void post_done(const Ctx& c, int ch, int sem) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const int idx = sem + 2 * c.nparts + c.part;
    st_relaxed_sys(mailbox_out(c, ch, idx) + count_word(c), c.count);
    st_release_sys(mailbox_out(c, ch, idx), (c.launch + 1) << 1 | 1);
  }
}

// ---- port channels (plan/port.go) --------------------------------------------

// Triggers are 32 bytes in the host-memory FIFO at p.fifo: words A, B, C,
// then the tag ((position + 1) << 16 | kind << 8 | channel), stored last
// with release semantics so that the proxy, which polls the tag, reads
// complete words. FIFO_* mirror plan.Fifo*, TRIG_* plan.Trigger*.
enum { FIFO_SLOTS = 1024, FIFO_COUNTERS = 64, FIFO_COUNTER_OFF = 64, FIFO_CTL = 64 + 8 * FIFO_COUNTERS, FIFO_SEEN_TAIL = 8 };
enum { FIFO_TAIL = 0, FIFO_FLUSHED = 8, FIFO_ERROR = 16 };
enum { TRIG_PUT = 1, TRIG_COPY = 2, TRIG_SIGNAL = 3, TRIG_FLUSH = 4, TRIG_COUNTER = 5, TRIG_ALONE = 128, TRIG_ACK = 64 };
enum { WHAT_FIFO = 3, WHAT_FLUSH = 4 };

// port_push pushes one trigger (one thread) and returns its position + 1,
// or 0 when the FIFO stayed full past the deadline or the launch failed
// (recorded). A full FIFO is back-pressure: the pusher waits for the proxy.
// The tail in host memory is read (a round trip over PCIe) only when the
// seen tail beside the head (plan.FifoSeenTail) does not already show the
// slot free; what it read raises the seen tail (plan/port.go).
WEFT_DEV weft_u64 port_push(const Ctx& c, int ch, int kind, weft_u64 a, weft_u64 b, weft_u64 cc) {
  const weft_params& p = *c.p;
  weft_u64* ctl = (weft_u64*)p.fifo;
  weft_u64* head = (weft_u64*)p.fifo_head;
  const weft_u64 pos = atomic_add_gpu64(head, 1);
  if (pos >= ld_relaxed_gpu64(head + FIFO_SEEN_TAIL / 8) + FIFO_SLOTS) {
    weft_u64 tail;
    Deadline d(c);
    while (pos >= (tail = ld_relaxed_sys(ctl + FIFO_TAIL / 8)) + FIFO_SLOTS) {
      if (d.expired(c)) {
        if (*(volatile weft_u32*)(p.control + CTL_STATUS) == 0) fail(c, STATUS_TIMEOUT, WHAT_FIFO, ch, -1, pos + 1, tail);
        return 0;
      }
    }
    red_max_gpu64(head + FIFO_SEEN_TAIL / 8, tail);
  }
  weft_u64* slot = (weft_u64*)(p.fifo + FIFO_CTL + (pos % FIFO_SLOTS) * 32);
  st_relaxed_sys(slot + 0, a);
  st_relaxed_sys(slot + 1, b);
  st_relaxed_sys(slot + 2, cc);
  st_release_sys(slot + 3, (pos + 1) << 16 | (weft_u64)kind << 8 | (weft_u64)ch);
  return pos + 1;
}

// port_signal: the block's earlier pushes are ordered before this one by the
// barrier; the engine applies the signal after the channel's earlier
// requests — a release (ack, plan.Op.Ack) after its earlier copies only.
// The count word sits beside the semaphore (plan.CountOffset).
WEFT_DEV bool port_signal_one(const Ctx& c, int ch, int sem, bool ack) {
  const weft_params& p = *c.p;
  weft_u64 idx = (weft_u64)p.rank * p.semaphores + sem;
  weft_u64 base = p.peer_sems[ch];
  return port_push(c, ch, TRIG_SIGNAL | (ack ? TRIG_ACK : 0), c.tag, base + idx * 8, base + ((weft_u64)p.nranks * p.semaphores + idx) * 8) != 0;
}

WEFT_DEV bool port_signal(const Ctx& c, int ch, int sem, bool ack) {
  __syncthreads();
  bool ok = threadIdx.x != 0 || port_signal_one(c, ch, sem, ack);
  return block_ok(ok);
}

template <int N>
WEFT_DEV bool port_signal_all(const Ctx& c, const int (&chs)[N], const int (&sems)[N], bool ack) {
  __syncthreads();
  bool ok = threadIdx.x >= N || port_signal_one(c, chs[threadIdx.x], sems[threadIdx.x], ack);
  return block_ok(ok);
}

// port_xfer: one put (remote dst) or engine copy (local dst) of len elements
// from this block's part. The barrier orders the block's earlier writes of
// the source before the release store of the tag, so the engine reads them.
template <int ES>
WEFT_DEV bool port_xfer(const Ctx& c, int ch, int kind, const char* src, char* dst, weft_u64 len) {
  __syncthreads();
  bool ok = true;
  if (threadIdx.x == 0 && len != 0) ok = port_push(c, ch, kind, (weft_u64)src, (weft_u64)dst, len * ES) != 0;
  return block_ok(ok);
}

// port_put_packets: an LL put (plan/port.go, "LL puts"). The block has
// written its part's packets at pkt (part 0 also the header at hdr) in a
// local staging slot; one put moves them to the same offsets of the
// peer's slot (peer_hdr, peer_pkt): 16 bytes per 8 data bytes
// (plan.PacketSpan), from the header on for part 0, marked TRIG_ALONE (no
// signal follows it). The barrier orders the block's packet stores before
// the tag's release store.
template <int PROTO, int ES>
WEFT_DEV bool port_put_packets(const Ctx& c, int ch, const char* hdr, const char* pkt, char* peer_hdr, char* peer_pkt, weft_u64 len) {
  __syncthreads();
  bool ok = true;
  const weft_u64 bytes = (len * ES + 7) / 8 * 16;
  if (threadIdx.x == 0 && (bytes != 0 || c.part == 0)) {
    const char* src = c.part == 0 ? hdr : pkt;
    char* dst = c.part == 0 ? peer_hdr : peer_pkt;
    ok = port_push(c, ch, TRIG_PUT | TRIG_ALONE, (weft_u64)src, (weft_u64)dst, (weft_u64)(pkt + bytes - src)) != 0;
  }
  return block_ok(ok);
}

// port_flush: push a flush and wait until the proxy reports it done (every
// earlier request of the channel complete at the source).
WEFT_DEV bool port_flush(const Ctx& c, int ch) {
  __syncthreads();
  bool ok = true;
  if (threadIdx.x == 0) {
    const weft_u64 me = port_push(c, ch, TRIG_FLUSH, 0, 0, 0);
    ok = me != 0;
    weft_u64* ctl = (weft_u64*)c.p->fifo;
    Deadline d(c);
    weft_u64 v;
    while (ok && (v = ld_acquire_sys(ctl + FIFO_FLUSHED / 8)) < me) {
      if (d.expired(c)) {
        if (*(volatile weft_u32*)(c.p->control + CTL_STATUS) == 0) fail(c, STATUS_TIMEOUT, WHAT_FLUSH, ch, -1, me, v);
        ok = false;
      }
    }
  }
  return block_ok(ok);
}

// Scalar element access for unaligned buffers and tails: an element of ES
// bytes is held in the low bytes of a u64; reduction uses lane 0 of red64.
template <int ES>
WEFT_DEV weft_u64 ld_elem(const char* p) {
  if (ES == 1) return *(const volatile weft_u8*)p;
  if (ES == 2) return *(const volatile weft_u16*)p;
  if (ES == 4) return *(const volatile weft_u32*)p;
  return *(const volatile weft_u64*)p;
}

template <int ES>
WEFT_DEV void st_elem(char* p, weft_u64 v) {
  if (ES == 1) *(volatile weft_u8*)p = (weft_u8)v;
  else if (ES == 2) *(volatile weft_u16*)p = (weft_u16)v;
  else if (ES == 4) *(volatile weft_u32*)p = (weft_u32)v;
  else *(volatile weft_u64*)p = v;
}

// Byte-wise access for buffers that are not even element-aligned.
WEFT_DEV weft_u64 ld_bytes(const char* p, int n) {
  weft_u8 b[8];
#pragma unroll
  for (int i = 0; i < 8; i++) b[i] = i < n ? (weft_u8)p[i] : 0;  // all loads issued before any is used
  weft_u64 v = 0;
#pragma unroll
  for (int i = 0; i < 8; i++) v |= (weft_u64)b[i] << (8 * i);
  return v;
}
WEFT_DEV void st_bytes(char* p, weft_u64 v, int n) {
  for (int i = 0; i < n; i++) p[i] = (char)(v >> (8 * i));
}

// ---- plain transfers (HB): 16-byte vectors, unrolled ---------------------------

// Combine modes of a transfer (plan.Op.Combine, plan.CombineMode): none,
// scale every source by the scalar before reducing (PreMulSum, floating
// Avg), divide the reduced value by the number of ranks (integer Avg).
enum { CMB_NONE = 0, CMB_SCALE = 1, CMB_DIV = 2 };

template <int DT, int CMB>
WEFT_DEV weft_u32x4 pre128(const Ctx& c, weft_u32x4 v) { return CMB == CMB_SCALE ? scale128<DT>(v, c.scalar) : v; }
template <int DT, int CMB>
WEFT_DEV weft_u64 pre64(const Ctx& c, weft_u64 v) { return CMB == CMB_SCALE ? scale64<DT>(v, c.scalar) : v; }
template <int DT, int CMB>
WEFT_DEV weft_u32x4 post128(const Ctx& c, weft_u32x4 v) { return CMB == CMB_DIV ? div128<DT>(v, c.p->nranks) : v; }
template <int DT, int CMB>
WEFT_DEV weft_u64 post64(const Ctx& c, weft_u64 v) { return CMB == CMB_DIV ? div64<DT>(v, c.p->nranks) : v; }

// Per-source scaling (PreMulSum with a scalar per rank, hal/plan
// premul.go): bit i of the compile-time mask SCL set means source i is this
// rank's own input, multiplied by this rank's scalar where it is read,
// before it is reduced, stored or packed. The mask is a template constant
// and i the index of a fully unrolled loop, so a transfer with SCL = 0
// (every operator but PreMulSum) compiles to no scaling code at all.
template <int DT, int CMB, int SCL>
WEFT_DEV weft_u32x4 src128(const Ctx& c, weft_u32x4 v, int i) {
  return ((SCL >> i) & 1) ? scale128<DT>(v, c.scalar) : pre128<DT, CMB>(c, v);
}
template <int DT, int CMB, int SCL>
WEFT_DEV weft_u64 src64(const Ctx& c, weft_u64 v, int i) {
  return ((SCL >> i) & 1) ? scale64<DT>(v, c.scalar) : pre64<DT, CMB>(c, v);
}

template <int DT, int OP, int NS, int ND, int UNROLL, int CMB, int SCL>
struct skip_self;

// Words of xfer_plain's loops: 16-byte vectors, 8-byte words of packed
// elements, single elements (ES bytes in the low bytes of a u64, lane 0 of
// the 64-bit operations).
struct Word16 {
  typedef weft_u32x4 T;
  static constexpr int BYTES = 16;
  WEFT_DEV static T ld(const char* p) { return ld16(p); }
  WEFT_DEV static void st(char* p, T v) { st16(p, v); }
  template <int DT, int OP> WEFT_DEV static T red(T a, T b) { return red128<DT, OP>(a, b); }
  template <int DT, int CMB, int SCL> WEFT_DEV static T src(const Ctx& c, T v, int i) { return src128<DT, CMB, SCL>(c, v, i); }
  template <int DT, int CMB> WEFT_DEV static T post(const Ctx& c, T v) { return post128<DT, CMB>(c, v); }
};
template <int ES>
struct Word64 {
  typedef weft_u64 T;
  static constexpr int BYTES = ES;
  WEFT_DEV static T ld(const char* p) { return ES == 8 ? *(const weft_u64*)p : ld_elem<ES>(p); }
  WEFT_DEV static void st(char* p, T v) {
    if (ES == 8) *(weft_u64*)p = v;
    else st_elem<ES>(p, v);
  }
  template <int DT, int OP> WEFT_DEV static T red(T a, T b) { return red64<DT, OP>(a, b); }
  template <int DT, int CMB, int SCL> WEFT_DEV static T src(const Ctx& c, T v, int i) { return src64<DT, CMB, SCL>(c, v, i); }
  template <int DT, int CMB> WEFT_DEV static T post(const Ctx& c, T v) { return post64<DT, CMB>(c, v); }
};

// xfer_words moves the n words of W that start at byte from of every
// pointer: UNROLL words per thread while whole rounds of blockDim·UNROLL
// remain (all their loads issued before any is reduced), then one per
// thread.
template <class W, int DT, int OP, int NS, int ND, int UNROLL, int CMB, int SCL>
WEFT_DEV void xfer_words(const Ctx& c, const char* const (&srcs)[NS], char* const (&dsts)[ND], weft_u64 from, weft_u64 n) {
  typedef typename W::T T;
  const weft_u64 stride = (weft_u64)blockDim.x * UNROLL;
  weft_u64 w = threadIdx.x;
  for (; w + (UNROLL - 1) * blockDim.x < n; w += stride) {
    T acc[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) acc[u] = W::template src<DT, CMB, SCL>(c, W::ld(srcs[0] + from + (w + u * blockDim.x) * W::BYTES), 0);
#pragma unroll
    for (int i = 1; i < NS; i++) {
      T x[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; u++) x[u] = W::ld(srcs[i] + from + (w + u * blockDim.x) * W::BYTES);
#pragma unroll
      for (int u = 0; u < UNROLL; u++) acc[u] = W::template red<DT, OP>(acc[u], W::template src<DT, CMB, SCL>(c, x[u], i));
    }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) acc[u] = W::template post<DT, CMB>(c, acc[u]);
#pragma unroll
    for (int j = 0; j < ND; j++)
#pragma unroll
      for (int u = 0; u < UNROLL; u++) W::st(dsts[j] + from + (w + u * blockDim.x) * W::BYTES, acc[u]);
  }
  for (; w < n; w += blockDim.x) {
    T acc = W::template src<DT, CMB, SCL>(c, W::ld(srcs[0] + from + w * W::BYTES), 0);
#pragma unroll
    for (int i = 1; i < NS; i++) acc = W::template red<DT, OP>(acc, W::template src<DT, CMB, SCL>(c, W::ld(srcs[i] + from + w * W::BYTES), i));
    acc = W::template post<DT, CMB>(c, acc);
#pragma unroll
    for (int j = 0; j < ND; j++) W::st(dsts[j] + from + w * W::BYTES, acc);
  }
}

// aligned_to reports whether every source and destination is a multiple
// of a bytes.
template <int NS, int ND>
WEFT_DEV bool aligned_to(const char* const (&srcs)[NS], char* const (&dsts)[ND], weft_u64 a) {
  bool ok = true;
#pragma unroll
  for (int i = 0; i < NS; i++) ok &= ((weft_u64)srcs[i] % a) == 0;
#pragma unroll
  for (int j = 0; j < ND; j++) ok &= ((weft_u64)dsts[j] % a) == 0;
  return ok;
}

// xfer_plain: for every byte range of len elements, dsts[j] = ⊕ srcs[i]
// (with the combine mode CMB applied, and source i scaled when bit i of SCL
// is set). Pointers point at the first element of this block's part. All
// threads of the block take part. A plain copy leaves out a destination
// that is its source (skip_self). The widest word every pointer is aligned
// to moves the bulk: 16-byte vectors; else 8-byte words of packed elements
// (a ReduceScatter segment of an odd number of 8-byte words lands 8 bytes
// off a 16-byte boundary in the input while scratch slots are 16-aligned,
// so no common head peel aligns both: 3 ranks, 11,184,808-byte segments,
// 0.68–0.86× NCCL with one element per thread, 1.12–1.21× with words;
// docs/bench/2026-11-27g-h100x4 call 8); else elements. Elements finish
// the tail, and bytes serve buffers that are not even element-aligned.
template <int DT, int OP, int NS, int ND, int UNROLL, int CMB, int SCL = 0>
WEFT_DEV void xfer_plain(const Ctx& c, const char* const (&srcs)[NS], char* const (&dsts)[ND], weft_u64 len) {
  if (skip_self<DT, OP, NS, ND, UNROLL, CMB, SCL>::run(c, srcs, dsts, len)) return;
  constexpr int ES = dtype_size<DT>::value;
  const weft_u64 bytes = len * ES;
  weft_u64 head = 0;
  if (aligned_to(srcs, dsts, 16)) {
    xfer_words<Word16, DT, OP, NS, ND, UNROLL, CMB, SCL>(c, srcs, dsts, 0, bytes / 16);
    head = bytes / 16 * 16;
  } else if (ES < 8 && aligned_to(srcs, dsts, 8)) {
    xfer_words<Word64<8>, DT, OP, NS, ND, UNROLL, CMB, SCL>(c, srcs, dsts, 0, bytes / 8);
    head = bytes / 8 * 8;
  }
  if (aligned_to(srcs, dsts, ES)) {
    xfer_words<Word64<ES>, DT, OP, NS, ND, UNROLL, CMB, SCL>(c, srcs, dsts, head, (bytes - head) / ES);
    return;
  }
  for (weft_u64 b = head + (weft_u64)threadIdx.x * ES; b < bytes; b += (weft_u64)blockDim.x * ES) {
    weft_u64 acc = src64<DT, CMB, SCL>(c, ld_bytes(srcs[0] + b, ES), 0);
#pragma unroll
    for (int i = 1; i < NS; i++) acc = red64<DT, OP>(acc, src64<DT, CMB, SCL>(c, ld_bytes(srcs[i] + b, ES), i));
    acc = post64<DT, CMB>(c, acc);
#pragma unroll
    for (int j = 0; j < ND; j++) st_bytes(dsts[j] + b, acc, ES);
  }
}

// ---- LL transfers ------------------------------------------------------------------

// A unit is 8 data bytes: one LL16 packet, or two LL8 packets.
template <int PROTO>
WEFT_DEV void st_unit(char* pkt, weft_u64 data, int valid, weft_u32 flag) {
  if (PROTO == PROTO_LL16) {
    st_ll16(pkt, (weft_u32)data, (weft_u32)(data >> 32), flag);
  } else {
    st_ll8(pkt, (weft_u32)data, flag);
    if (valid > 4) st_ll8(pkt + 8, (weft_u32)(data >> 32), flag);
  }
}

// ld_unit polls the unit's packets until their flags match; false when the
// wait expires (the failure is recorded).
template <int PROTO>
WEFT_DEV bool ld_unit(const Ctx& c, const char* pkt, int valid, int ch, weft_u64& data) {
  Deadline d(c);
  weft_u32 lo = 0, hi = 0;
  if (PROTO == PROTO_LL16) {
    while (!ld_ll16(pkt, c.flag, lo, hi)) {
      if (d.expired(c)) {
        if (ld_ll16(pkt, c.flag, lo, hi)) break;
        if (*(volatile weft_u32*)(c.p->control + CTL_STATUS) == 0)
          fail(c, STATUS_TIMEOUT, WHAT_PACKET, ch, -1, c.flag, *(const volatile weft_u32*)(pkt + 4));
        return false;
      }
    }
  } else {
    while (!ld_ll8(pkt, c.flag, lo)) {
      if (d.expired(c)) {
        if (ld_ll8(pkt, c.flag, lo)) break;
        if (*(volatile weft_u32*)(c.p->control + CTL_STATUS) == 0)
          fail(c, STATUS_TIMEOUT, WHAT_PACKET, ch, -1, c.flag, *(const volatile weft_u32*)(pkt + 4));
        return false;
      }
    }
    if (valid > 4) {
      while (!ld_ll8(pkt + 8, c.flag, hi)) {
        if (d.expired(c)) {
          if (ld_ll8(pkt + 8, c.flag, hi)) break;
          if (*(volatile weft_u32*)(c.p->control + CTL_STATUS) == 0)
            fail(c, STATUS_TIMEOUT, WHAT_PACKET, ch, -1, c.flag, *(const volatile weft_u32*)(pkt + 12));
          return false;
        }
      }
    }
  }
  data = ((weft_u64)hi << 32) | lo;
  return true;
}

// try_unit loads the unit's packets once: true, and the data, when their
// flags match. A transfer with several packet sources loads each once
// before it polls any (xfer_ll), so that the loads are in flight together:
// polled one after the other, each source cost a load's round trip after
// the previous one had landed.
template <int PROTO>
WEFT_DEV bool try_unit(const Ctx& c, const char* pkt, int valid, weft_u64& data) {
  weft_u32 lo = 0, hi = 0;
  bool ok;
  if (PROTO == PROTO_LL16) {
    ok = ld_ll16(pkt, c.flag, lo, hi);
  } else {
    ok = ld_ll8(pkt, c.flag, lo);
    if (valid > 4) ok = ld_ll8(pkt + 8, c.flag, hi) && ok;
  }
  data = ((weft_u64)hi << 32) | lo;
  return ok;
}

// Plain 8-byte unit load/store of `valid` bytes (the last unit may be short).
// A short unit's elements are loaded back to back (unrolled, each load
// predicated on the unit's length) and combined afterwards: in a loop of
// load-then-use each load waited for the one before, and a 4-byte unit
// (bfloat16 AllGather of 8 B on 2 ranks) took 0.4 µs more than a full one
// (docs/bench/2026-11-29-h100x2, call 7).
template <int ES>
WEFT_DEV weft_u64 ld_plain_unit(const char* p, int valid) {
  if (valid == 8 && ((weft_u64)p & 7) == 0) return *(const weft_u64*)p;
  if (((weft_u64)p % ES) != 0) return ld_bytes(p, valid);
  weft_u64 e[8 / ES];
#pragma unroll
  for (int k = 0; k < 8 / ES; k++) e[k] = k * ES < valid ? ld_elem<ES>(p + k * ES) : 0;
  weft_u64 v = 0;
#pragma unroll
  for (int k = 0; k < 8 / ES; k++) v |= e[k] << (8 * k * ES);
  return v;
}

template <int ES>
WEFT_DEV void st_plain_unit(char* p, weft_u64 v, int valid) {
  if (valid == 8 && ((weft_u64)p & 7) == 0) {
    *(weft_u64*)p = v;
    return;
  }
  if (((weft_u64)p % ES) != 0) {
    st_bytes(p, v, valid);
    return;
  }
  for (int b = 0; b < valid; b += ES) st_elem<ES>(p + b, v >> (8 * b));
}

// skip_self: a plain copy (one source, no scaling, no combine mode) whose
// destination is the source itself would store every byte over itself: an
// in-place call's own segment (AllGather: input = output + rank × count;
// Broadcast at the root: input = output). run leaves that destination out
// — one pass through memory fewer, which matters beside compute that is
// bound by memory bandwidth (FSDP2's in-place AllGather of 134 MB per rank
// wrote 134 MB more than it had to) — and reports whether it did the
// transfer. The comparison is of this block's part, the same offset into
// both. Only a copy whose stored value is the loaded one qualifies.
template <int DT, int OP, int NS, int ND, int UNROLL, int CMB, int SCL>
struct skip_self {
  static WEFT_DEV bool run(const Ctx&, const char* const (&)[NS], char* const (&)[ND], weft_u64) { return false; }
};

template <int DT, int OP, int ND, int UNROLL>
struct skip_self<DT, OP, 1, ND, UNROLL, CMB_NONE, 0> {
  static WEFT_DEV bool run(const Ctx& c, const char* const (&srcs)[1], char* const (&dsts)[ND], weft_u64 len) {
    for (int k = 0; k < ND; k++) {
      if (dsts[k] != srcs[0]) continue;
      char* rest[ND - 1];
      for (int j = 0, i = 0; j < ND; j++)
        if (j != k) rest[i++] = dsts[j];
      xfer_plain<DT, OP, 1, ND - 1, UNROLL, CMB_NONE, 0>(c, srcs, rest, len);
      return true;
    }
    return false;
  }
};

template <int DT, int OP, int UNROLL>
struct skip_self<DT, OP, 1, 1, UNROLL, CMB_NONE, 0> {
  static WEFT_DEV bool run(const Ctx&, const char* const (&srcs)[1], char* const (&dsts)[1], weft_u64) {
    return dsts[0] == srcs[0];  // a copy onto itself: nothing to do
  }
};

// ---- LL128 transfers ------------------------------------------------------------

// ld_line polls one LL128 line: each lane of the warp loads its 16 bytes
// at p (one warp-wide load, so a line is one read) until every active
// line's flag lane (k = 7) holds flag; a warp-wide vote decides, so every
// lane of the warp must call it (converged, inactive lanes too). False on
// every lane when the wait expired (the failure is recorded).
WEFT_DEV bool ld_line(const Ctx& c, const char* p, bool active, int k, int ch, weft_u64& d0, weft_u64& d1) {
  const weft_u64 flag = c.flag;
  Deadline d(c);
  for (;;) {
    if (active) ld_ll128(p, d0, d1);
    const bool need = active && k == 7 && d1 != flag;
    if (!warp_any(need)) return true;
    if (warp_any(d.expired(c))) {
      if (need && *(volatile weft_u32*)(c.p->control + CTL_STATUS) == 0) fail(c, STATUS_TIMEOUT, WHAT_PACKET, ch, -1, flag, d1);
      return false;
    }
  }
}

// xfer_ll128 is xfer_ll over LL128 lines (plan.LL128): lane k of each
// group of 8 holds data bytes [16k, 16k+16) of a line (lane 7 bytes
// [112, 120) and the flag), a warp 4 lines per step, the block blockDim/8.
// Lines are stored and loaded with one 16-byte access per lane in one
// instruction per warp, every lane of the warp in step (the loop bound is
// the warp's, the votes in ld_line take all 32 lanes): a line is one
// NVLink write, so a reader that sees its flag sees its data. A part
// starts on a line (PART_ALIGN), and a line's unused words carry
// whatever the lane computed.
template <int DT, int OP, int NPS, int NKS, int NPD, int NKD, int CMB, int SCL>
WEFT_DEV bool xfer_ll128(const Ctx& c, const char* const (&srcs)[NPS > 0 ? NPS : 1], const char* const (&pkt_srcs)[NKS > 0 ? NKS : 1],
                         const int (&pkt_ch)[NKS > 0 ? NKS : 1], char* const (&dsts)[NPD > 0 ? NPD : 1],
                         char* const (&pkt_dsts)[NKD > 0 ? NKD : 1], weft_u64 len) {
  constexpr int ES = dtype_size<DT>::value;
  const weft_u64 bytes = len * ES;
  const weft_u64 lines = (bytes + LL128_DATA - 1) / LL128_DATA;
  const int lane = threadIdx.x & 31, k = lane & 7;
  const weft_u64 step = blockDim.x / 8;
  for (weft_u64 l0 = (weft_u64)(threadIdx.x >> 5) * 4; l0 < lines; l0 += step) {
    const weft_u64 line = l0 + (lane >> 3);
    const bool active = line < lines;
    const weft_u64 at = line * LL128_DATA + k * 16;  // data byte of the lane's first word
    const int v0 = active && at < bytes ? (bytes - at < 8 ? (int)(bytes - at) : 8) : 0;
    const int v1 = k < 7 && active && at + 8 < bytes ? (bytes - at - 8 < 8 ? (int)(bytes - at - 8) : 8) : 0;
    weft_u64 a0 = 0, a1 = 0;
    bool first = true;
#pragma unroll
    for (int i = 0; i < NPS; i++) {
      const weft_u64 x0 = src64<DT, CMB, SCL>(c, ld_plain_unit<ES>(srcs[i] + at, v0), i);
      const weft_u64 x1 = src64<DT, CMB, SCL>(c, ld_plain_unit<ES>(srcs[i] + at + 8, v1), i);
      a0 = first ? x0 : red64<DT, OP>(a0, x0);
      a1 = first ? x1 : red64<DT, OP>(a1, x1);
      first = false;
    }
    // Every source's line loaded once before any is polled (try_unit).
    weft_u64 d0s[NKS > 0 ? NKS : 1], d1s[NKS > 0 ? NKS : 1];
#pragma unroll
    for (int i = 0; i < NKS; i++) {
      d0s[i] = d1s[i] = 0;
      if (NKS > 1 && active) ld_ll128(pkt_srcs[i] + line * LL128_LINE + k * 16, d0s[i], d1s[i]);
    }
#pragma unroll
    for (int i = 0; i < NKS; i++) {
      if ((NKS == 1 || warp_any(active && k == 7 && d1s[i] != (weft_u64)c.flag)) &&
          !ld_line(c, pkt_srcs[i] + line * LL128_LINE + k * 16, active, k, pkt_ch[i], d0s[i], d1s[i]))
        return false;
      const weft_u64 x0 = pre64<DT, CMB>(c, d0s[i]), x1 = pre64<DT, CMB>(c, d1s[i]);
      a0 = first ? x0 : red64<DT, OP>(a0, x0);
      a1 = first ? x1 : red64<DT, OP>(a1, x1);
      first = false;
    }
    a0 = post64<DT, CMB>(c, a0);
    a1 = post64<DT, CMB>(c, a1);
#pragma unroll
    for (int j = 0; j < NPD; j++) {
      if (v0 > 0) st_plain_unit<ES>(dsts[j] + at, a0, v0);
      if (v1 > 0) st_plain_unit<ES>(dsts[j] + at + 8, a1, v1);
    }
    // A line must be one store instruction of its 8 lanes: reconverge the
    // warp after the plain stores' per-lane branches (the last line's).
    if (NKD > 0) warp_sync();
#pragma unroll
    for (int j = 0; j < NKD; j++) {
      if (active) st_ll128(pkt_dsts[j] + line * LL128_LINE + k * 16, a0, k == 7 ? (weft_u64)c.flag : a1);
    }
  }
  return true;
}

// xfer_ll: like xfer_plain, with some sources read from LL packets in local
// scratch (pkt_srcs, written by the peers of channels pkt_ch) and some
// destinations written as LL packets (pkt_dsts). Packet pointers point at
// the packet holding the part's first element. One 8-byte unit per thread
// per step. Bit i of SCL scales plain source i (packet sources come from
// peers, already scaled). Returns false (for this thread) when a packet
// wait expired.
template <int DT, int OP, int PROTO, int NPS, int NKS, int NPD, int NKD, int CMB, int SCL = 0>
WEFT_DEV bool xfer_ll(const Ctx& c, const char* const (&srcs)[NPS > 0 ? NPS : 1], const char* const (&pkt_srcs)[NKS > 0 ? NKS : 1],
                      const int (&pkt_ch)[NKS > 0 ? NKS : 1], char* const (&dsts)[NPD > 0 ? NPD : 1],
                      char* const (&pkt_dsts)[NKD > 0 ? NKD : 1], weft_u64 len) {
  if constexpr (PROTO == PROTO_LL128) {
    return xfer_ll128<DT, OP, NPS, NKS, NPD, NKD, CMB, SCL>(c, srcs, pkt_srcs, pkt_ch, dsts, pkt_dsts, len);
  }
  constexpr int ES = dtype_size<DT>::value;
  constexpr int PKT_PER_UNIT = 16;  // packet bytes per 8-byte unit: one LL16 or two LL8 packets
  const weft_u64 bytes = len * ES;
  const weft_u64 units = (bytes + 7) / 8;
  for (weft_u64 u = threadIdx.x; u < units; u += blockDim.x) {
    const int valid = bytes - u * 8 < 8 ? (int)(bytes - u * 8) : 8;
    weft_u64 acc = 0;
    bool first = true;
#pragma unroll
    for (int i = 0; i < NPS; i++) {
      weft_u64 x = src64<DT, CMB, SCL>(c, ld_plain_unit<ES>(srcs[i] + u * 8, valid), i);
      acc = first ? x : red64<DT, OP>(acc, x);
      first = false;
    }
    weft_u64 xs[NKS > 0 ? NKS : 1];
    bool got[NKS > 0 ? NKS : 1];
    if constexpr (NKS > 1) {
#pragma unroll
      for (int i = 0; i < NKS; i++) got[i] = try_unit<PROTO>(c, pkt_srcs[i] + u * PKT_PER_UNIT, valid, xs[i]);
    } else {
      got[0] = false;
    }
#pragma unroll
    for (int i = 0; i < NKS; i++) {
      if (!got[i] && !ld_unit<PROTO>(c, pkt_srcs[i] + u * PKT_PER_UNIT, valid, pkt_ch[i], xs[i])) return false;
      const weft_u64 x = pre64<DT, CMB>(c, xs[i]);
      acc = first ? x : red64<DT, OP>(acc, x);
      first = false;
    }
    acc = post64<DT, CMB>(c, acc);
#pragma unroll
    for (int j = 0; j < NPD; j++) st_plain_unit<ES>(dsts[j] + u * 8, acc, valid);
#pragma unroll
    for (int j = 0; j < NKD; j++) st_unit<PROTO>(pkt_dsts[j] + u * PKT_PER_UNIT, acc, valid, c.flag);
  }
  return true;
}

// Headers: the count, written ahead of a slot's packets by part 0 and
// checked by the receiver's part 0.
// Headers are handled by the block's last threads (thread blockDim−1−i for
// the i-th slot), which hold no data for small messages, so the check runs
// beside the data instead of before it.
WEFT_DEV bool header_thread(int i) { return threadIdx.x == blockDim.x - 1 - i; }

template <int PROTO>
WEFT_DEV void put_header(const Ctx& c, char* hdr, int i) {
  if (!header_thread(i)) return;
  weft_u64 n = c.count;
  if (PROTO == PROTO_LL16 || PROTO == PROTO_LL128) st_ll16(hdr, (weft_u32)n, (weft_u32)(n >> 32), c.flag);
  else st_ll8(hdr, (weft_u32)n, c.flag);
}

template <int PROTO>
WEFT_DEV bool check_header(const Ctx& c, const char* hdr, int ch, int i) {
  if (!header_thread(i)) return true;
  constexpr int HP = PROTO == PROTO_LL8 ? PROTO_LL8 : PROTO_LL16;  // an LL128 slot's header is an LL16 packet
  weft_u64 n;
  if (!ld_unit<HP>(c, hdr, HP == PROTO_LL16 ? 8 : 4, ch, n)) return false;
  weft_u64 want = HP == PROTO_LL16 ? c.count : (c.count & 0xffffffffull);
  if (n != want) {
    fail(c, STATUS_MISMATCH, WHAT_PACKET, ch, -1, want, n);
    return false;
  }
  return true;
}

}  // namespace weft
