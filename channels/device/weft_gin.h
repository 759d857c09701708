// weft_gin.h: weft's device API, GIN-style one-sided communication that a
// kernel calls directly (NCCL 2.28 Device API / GIN; MSCCL++'s device-side
// PortChannel and MemoryChannel). Include it after weft_channels.h.
//
// A kernel is written once. For every peer the communicator
// (channels.DeviceComm, which packs weft_gin_params) says how the peer is
// reached:
//   - GIN_MEMORY: its window and signal words are mapped here; a put is
//     the calling block's 16-byte stores, a signal an atomic add with
//     release semantics at system scope;
//   - GIN_PORT: a put, signal, counter or flush is a 32-byte trigger pushed
//     into the FIFO (hal/plan/port.go), which the CPU proxy hands to the
//     link's engine (a copy engine, a NIC); no SM moves the bytes;
//   - GIN_SELF: this rank, by stores to its own window.
//
// Signals: signal id i from source rank r is word i*nranks + r of the
// destination's signal array. Each word has exactly one writer (rank r, by
// atomic adds or through its engine), because copy engines implement "add
// one" as a store of a mirror counter; two writers would lose increments.
// Words only grow: a reset records the current value in a local base
// (bases[], written by this rank only) and reads subtract it.
//
// Cooperation: put, signal, wait_signal, counter_put, wait_counter and
// flush are called by every thread of a block (they synchronise the
// block); read_signal, reset_signal, read_counter and reset_counter by
// one thread (or all, with the same result). A collective call returns
// false when the block must leave the kernel: a wait passed its deadline
// (params.timeout_ns on the global timer) or another block failed; the
// first failure is recorded in the control block with the layout of
// weft_channels.h's fail() (rank, peer, channel = peer, semaphore =
// signal id or counter, block, expected, observed), and the host reports it
// from DeviceComm.Check.
//
// hal/host implements the same API in Go (channels.GinBlock).
#pragma once
#include "weft_channels.h"

#ifndef WEFT_GIN_MAX_RANKS
#define WEFT_GIN_MAX_RANKS 32
#endif

// Kernel parameters of the device API (channels.GinParamsBytes documents
// the offsets; DeviceComm.Params writes exactly this layout). A kernel's
// parameter struct starts with it; the kernel's own arguments follow.
struct weft_gin_params {
  weft_u64 window, window_bytes;  // local window
  weft_u64 signals;               // nsignals × nranks words (device memory)
  weft_u64 bases;                 // nsignals × nranks + ncounters reset bases (device memory)
  weft_u64 counters;              // ncounters words added to for memory and self peers (device memory)
  weft_u64 fifo, fifo_head;       // port-channel FIFO (host memory) and head (device memory); 0 without port peers
  weft_u64 control;               // control block (host memory, plan.Ctl*)
  weft_u64 timeout_ns;            // deadline of every wait
  weft_u64 peer_window[WEFT_GIN_MAX_RANKS];   // mapping (memory), engine address (port), own window (self)
  weft_u64 peer_signals[WEFT_GIN_MAX_RANKS];  // likewise for the signal words
  weft_i32 rank, nranks, nsignals, ncounters;
  weft_u8 mode[WEFT_GIN_MAX_RANKS];  // GIN_SELF, GIN_MEMORY, GIN_PORT
};
static_assert(sizeof(weft_gin_params) == 9 * 8 + 2 * WEFT_GIN_MAX_RANKS * 8 + 16 + WEFT_GIN_MAX_RANKS,
              "weft_gin_params layout differs from channels.GinParamsBytes");

namespace weft {
namespace gin {

using namespace weft::hal;

enum { GIN_SELF = 0, GIN_MEMORY = 1, GIN_PORT = 2 };
enum { WHAT_COUNTER = 16 };  // channels.GinWhatCounter

typedef weft_gin_params Comm;

// ---- failures and deadlines (as weft_channels.h's fail and Deadline) ------

WEFT_DEV weft_u32* ctl32(const Comm& g, int off) { return (weft_u32*)(g.control + off); }

WEFT_DEV bool aborted(const Comm& g) { return ld_relaxed_sys32(ctl32(g, CTL_ABORT)) != 0; }

WEFT_DEV bool failed(const Comm& g) { return *(volatile weft_u32*)(g.control + CTL_STATUS) != 0; }

// fail records the first failure and makes every block's waits give up.
WEFT_DEV void fail(const Comm& g, weft_u32 what, int peer, int sem, weft_u64 expected, weft_u64 observed) {
  char* ctl = (char*)g.control;
  if (atomic_cas_sys32(ctl32(g, CTL_STATUS), 0, STATUS_TIMEOUT) == 0) {
    *(volatile weft_i32*)(ctl + CTL_RANK) = g.rank;
    *(volatile weft_i32*)(ctl + CTL_PEER) = peer;
    *(volatile weft_i32*)(ctl + CTL_CHANNEL) = peer;
    *(volatile weft_i32*)(ctl + CTL_SEMAPHORE) = sem;
    *(volatile weft_i32*)(ctl + CTL_BLOCK) = blockIdx.x;
    *(volatile weft_u32*)(ctl + CTL_WHAT) = what;
    *(volatile weft_u64*)(ctl + CTL_EXPECTED) = expected;
    *(volatile weft_u64*)(ctl + CTL_OBSERVED) = observed;
    *(volatile weft_u64*)(ctl + CTL_LAUNCH) = 0;
    fence_sys();
  }
  st_relaxed_sys32(ctl32(g, CTL_ABORT), 1);
}

// Deadline: the global timer is read once every 1024 polls, the abort word
// (host memory, across PCIe) at most once per ABORT_CHECK_NS.
struct Deadline {
  weft_u64 end, next_abort_check;
  weft_u32 polls;
  WEFT_DEV Deadline() : end(0), next_abort_check(0), polls(0) {}
  WEFT_DEV bool expired(const Comm& g) {
    if ((++polls & 1023) != 0) return false;
    weft_u64 now = globaltimer_ns();
    if (end == 0) {
      end = now + g.timeout_ns;
      next_abort_check = now + ABORT_CHECK_NS;
      return false;
    }
    if (now >= end) return true;
    if (now < next_abort_check) return false;
    next_abort_check = now + ABORT_CHECK_NS;
    return aborted(g);
  }
};

// all_ok synchronises the block and reports whether every thread
// succeeded. It keeps no state in shared memory, so a kernel need not
// initialise anything before its first call (weft_channels.h's block_ok
// relies on begin()).
WEFT_DEV bool all_ok(bool ok) { return __syncthreads_or(!ok) == 0; }

// ---- addresses -------------------------------------------------------------

WEFT_DEV weft_u64 sig_index(const Comm& g, int id, int src) { return (weft_u64)id * g.nranks + src; }

// The word of signal id from this rank at peer, as this device addresses it.
WEFT_DEV weft_u64* peer_sig(const Comm& g, int peer, int id) {
  return (weft_u64*)g.peer_signals[peer] + sig_index(g, id, g.rank);
}

WEFT_DEV weft_u64* local_sig(const Comm& g, int peer, int id) { return (weft_u64*)g.signals + sig_index(g, id, peer); }
WEFT_DEV weft_u64* sig_base(const Comm& g, int peer, int id) { return (weft_u64*)g.bases + sig_index(g, id, peer); }
WEFT_DEV weft_u64* ctr_base(const Comm& g, int i) { return (weft_u64*)g.bases + (weft_u64)g.nsignals * g.nranks + i; }

// ---- port triggers (one thread) ---------------------------------------------

// push: as weft_channels.h's port_push (the tail read only past the seen
// tail), on the communicator's FIFO; the
// FIFO channel of a peer is its rank. Returns the position + 1, or 0 when
// the FIFO stayed full past the deadline (recorded).
WEFT_DEV weft_u64 push(const Comm& g, int peer, int kind, weft_u64 a, weft_u64 b, weft_u64 c) {
  weft_u64* ctl = (weft_u64*)g.fifo;
  weft_u64* head = (weft_u64*)g.fifo_head;
  const weft_u64 pos = atomic_add_gpu64(head, 1);
  if (pos >= ld_relaxed_gpu64(head + FIFO_SEEN_TAIL / 8) + FIFO_SLOTS) {
    weft_u64 tail;
    Deadline d;
    while (pos >= (tail = ld_relaxed_sys(ctl + FIFO_TAIL / 8)) + FIFO_SLOTS) {
      if (d.expired(g)) {
        if (!failed(g)) fail(g, WHAT_FIFO, peer, -1, pos + 1, tail);
        return 0;
      }
    }
    red_max_gpu64(head + FIFO_SEEN_TAIL / 8, tail);
  }
  weft_u64* slot = (weft_u64*)(g.fifo + FIFO_CTL + (pos % FIFO_SLOTS) * 32);
  st_relaxed_sys(slot + 0, a);
  st_relaxed_sys(slot + 1, b);
  st_relaxed_sys(slot + 2, c);
  st_release_sys(slot + 3, (pos + 1) << 16 | (weft_u64)kind << 8 | (weft_u64)peer);
  return pos + 1;
}

// signal_one: one thread, after the block barrier that orders the block's
// earlier stores (memory) or pushes (port) before it.
WEFT_DEV bool signal_one(const Comm& g, int peer, int id) {
  if (g.mode[peer] == GIN_PORT) return push(g, peer, TRIG_SIGNAL, 0, (weft_u64)peer_sig(g, peer, id), 0) != 0;
  // bar.sync orders the block's stores before this thread's; the release
  // at system scope is cumulative over them (as weft_channels.h's
  // signal_one).
  red_add_release_sys(peer_sig(g, peer, id), 1);
  return true;
}

// copy_block: the calling block copies bytes from src to dst, with 16-byte
// vectors where both are 16-byte aligned, bytes elsewhere.
WEFT_DEV void copy_block(char* dst, const char* src, weft_u64 bytes) {
  weft_u64 head = 0;
  if ((((weft_u64)dst | (weft_u64)src) & 15) == 0) {
    const weft_u64 nvec = bytes / 16;
    constexpr int U = 4;
    weft_u64 v = threadIdx.x;
    for (; v + (U - 1) * blockDim.x < nvec; v += (weft_u64)U * blockDim.x) {
      weft_u32x4 x[U];
#pragma unroll
      for (int u = 0; u < U; u++) x[u] = ld16(src + (v + u * blockDim.x) * 16);
#pragma unroll
      for (int u = 0; u < U; u++) st16(dst + (v + u * blockDim.x) * 16, x[u]);
    }
    for (; v < nvec; v += blockDim.x) st16(dst + v * 16, ld16(src + v * 16));
    head = nvec * 16;
  }
  for (weft_u64 b = head + threadIdx.x; b < bytes; b += blockDim.x) dst[b] = src[b];
}

// ---- the API -------------------------------------------------------------------

// put writes bytes from src (this device's memory) to peer's window at
// dst_off and, when signal_id >= 0, then adds one to peer's word of that
// signal from this rank; a peer that observes the increment observes the
// data. Memory and self peers: the block copies, then one thread signals.
// Port peers: one thread pushes a PUT trigger and a SIGNAL trigger; the
// engine reads src later (flush or a counter says when it may be reused).
// Block-collective.
WEFT_DEV bool put(const Comm& g, int peer, weft_u64 dst_off, const void* src, weft_u64 bytes, int signal_id) {
  bool ok = true;
  // The block's writes of src precede the copy (memory) or the trigger's
  // release (port).
  __syncthreads();
  if (g.mode[peer] == GIN_PORT) {
    if (threadIdx.x == 0) {
      if (bytes != 0) ok = push(g, peer, TRIG_PUT, (weft_u64)src, g.peer_window[peer] + dst_off, bytes) != 0;
      if (ok && signal_id >= 0) ok = signal_one(g, peer, signal_id);
    }
  } else {
    copy_block((char*)g.peer_window[peer] + dst_off, (const char*)src, bytes);
    __syncthreads();
    if (threadIdx.x == 0 && signal_id >= 0) ok = signal_one(g, peer, signal_id);
  }
  return all_ok(ok);
}

// signal adds one to peer's word of signal id from this rank, after the
// block's earlier puts to peer. Block-collective.
WEFT_DEV bool signal(const Comm& g, int peer, int id) {
  __syncthreads();
  bool ok = threadIdx.x != 0 || signal_one(g, peer, id);
  return all_ok(ok);
}

// read_signal: signal id from peer since its last reset, with acquire
// semantics (data put before those signals is visible to this thread).
WEFT_DEV weft_u64 read_signal(const Comm& g, int peer, int id) {
  return ld_acquire_sys(local_sig(g, peer, id)) - *(volatile weft_u64*)sig_base(g, peer, id);
}

// wait_signal waits until read_signal(g, peer, id) >= value: one thread
// polls, the block follows. On the deadline it records rank, peer, signal,
// expected and observed values. Block-collective.
WEFT_DEV bool wait_signal(const Comm& g, int peer, int id, weft_u64 value) {
  bool ok = true;
  if (threadIdx.x == 0) {
    weft_u64* w = local_sig(g, peer, id);
    const weft_u64 base = *(volatile weft_u64*)sig_base(g, peer, id);
    Deadline d;
    weft_u64 v;
    while ((v = ld_relaxed_sys(w) - base) < value) {
      if (d.expired(g)) {
        v = ld_acquire_sys(w) - base;
        if (v >= value) break;
        if (!failed(g)) fail(g, WHAT_SEMAPHORE, peer, id, value, v);
        ok = false;
        break;
      }
    }
    if (ok) ld_acquire_sys(w);
  }
  return all_ok(ok);
}

// reset_signal makes read_signal(g, peer, id) 0 by recording the current
// value as the base: the word belongs to peer and is never written here.
// Valid only while peer does not signal id concurrently (an increment that
// races with the reset may or may not count). One thread.
WEFT_DEV void reset_signal(const Comm& g, int peer, int id) {
  *(volatile weft_u64*)sig_base(g, peer, id) = ld_acquire_sys(local_sig(g, peer, id));
}

// counter_raw: the proxy's counter (port peers) plus the device's (memory
// and self peers).
WEFT_DEV weft_u64 counter_raw(const Comm& g, int i) {
  weft_u64 v = ld_acquire_sys((weft_u64*)g.counters + i);
  if (g.fifo != 0) v += ld_acquire_sys((weft_u64*)(g.fifo + FIFO_COUNTER_OFF) + i);
  return v;
}

// counter_put adds one to local counter `counter` once the block's earlier
// puts to peer are complete at the source (their sources may be reused):
// a COUNTER trigger for a port peer, which the proxy applies when the
// engine has completed them; at once for memory and self peers, whose puts
// are complete when issued. Block-collective.
WEFT_DEV bool counter_put(const Comm& g, int peer, int counter) {
  __syncthreads();
  bool ok = true;
  if (threadIdx.x == 0) {
    if (g.mode[peer] == GIN_PORT) ok = push(g, peer, TRIG_COUNTER, 0, 0, (weft_u64)counter) != 0;
    else red_add_release_sys((weft_u64*)g.counters + counter, 1);
  }
  return all_ok(ok);
}

// read_counter: counter i since its last reset. One thread.
WEFT_DEV weft_u64 read_counter(const Comm& g, int i) { return counter_raw(g, i) - *(volatile weft_u64*)ctr_base(g, i); }

// wait_counter waits until read_counter(g, i) >= value (failure: What
// WHAT_COUNTER, peer -1, semaphore i). Block-collective.
WEFT_DEV bool wait_counter(const Comm& g, int i, weft_u64 value) {
  bool ok = true;
  if (threadIdx.x == 0) {
    const weft_u64 base = *(volatile weft_u64*)ctr_base(g, i);
    Deadline d;
    weft_u64 v;
    while ((v = counter_raw(g, i) - base) < value) {
      if (d.expired(g)) {
        if (!failed(g)) fail(g, WHAT_COUNTER, -1, i, value, v);
        ok = false;
        break;
      }
    }
  }
  return all_ok(ok);
}

// reset_counter makes read_counter(g, i) 0. Valid only while no
// counter_put on i is outstanding. One thread.
WEFT_DEV void reset_counter(const Comm& g, int i) { *(volatile weft_u64*)ctr_base(g, i) = counter_raw(g, i); }

// flush returns once every earlier request to peer is complete at the
// source (a no-op for memory and self peers, whose stores are issued). It
// says nothing about remote visibility: a signal does. Block-collective.
WEFT_DEV bool flush(const Comm& g, int peer) {
  __syncthreads();
  bool ok = true;
  if (threadIdx.x == 0 && g.mode[peer] == GIN_PORT) {
    const weft_u64 me = push(g, peer, TRIG_FLUSH, 0, 0, 0);
    ok = me != 0;
    weft_u64* ctl = (weft_u64*)g.fifo;
    Deadline d;
    weft_u64 v;
    while (ok && (v = ld_acquire_sys(ctl + FIFO_FLUSHED / 8)) < me) {
      if (d.expired(g)) {
        if (!failed(g)) fail(g, WHAT_FLUSH, peer, -1, me, v);
        ok = false;
      }
    }
  }
  return all_ok(ok);
}

}  // namespace gin
}  // namespace weft
