//go:build cgo

package main

/*
#include <stdint.h>

// The calling thread's key for weft's per-thread group state (groups):
// 0 until the thread's first ncclGroupStart.
static __thread uint64_t weft_thread_key_tls;
static uint64_t weft_thread_key(void) { return weft_thread_key_tls; }
static void weft_set_thread_key(uint64_t k) { weft_thread_key_tls = k; }
*/
import "C"

import "sync/atomic"

var lastThreadKey atomic.Uint64

// threadKey identifies the calling OS thread for the group state (NCCL
// keeps groups per thread): a number kept in C thread-local storage,
// assigned on the thread's first call. Exports run on the calling C thread
// (cgo callbacks lock it). A cgo call costs tens of nanoseconds where
// gettid(2), used before, took 0.4 µs on the development VM and was paid
// by every collective call.
func threadKey() uint64 {
	k := uint64(C.weft_thread_key())
	if k == 0 {
		k = lastThreadKey.Add(1)
		C.weft_set_thread_key(C.uint64_t(k))
	}
	return k
}
