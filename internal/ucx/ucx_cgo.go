//go:build cgo

package ucx

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "ucx.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

var (
	loadOnce sync.Once
	loaded   *Lib
	loadErr  error
)

// Lib is the opened UCX libraries. It is safe for concurrent use.
type Lib struct {
	c                     *C.weft_ucx_lib
	major, minor, release int
}

// Load opens libucp.so.0 and libucs.so.0 once per process and resolves
// every symbol weft uses. A missing library, a missing symbol or a UCX
// older than MinMajor.MinMinor is a *LoadError.
func Load() (*Lib, error) {
	loadOnce.Do(func() { loaded, loadErr = Open(DefaultUCP, DefaultUCS) })
	return loaded, loadErr
}

// Open opens the UCP library ucp and the UCS library ucs (names the
// dynamic loader finds, or paths) and resolves every symbol weft uses.
// The libraries stay loaded for the life of the process; Load opens the
// default ones once. Errors are *LoadError.
func Open(ucp, ucs string) (*Lib, error) {
	cucp, cucs := C.CString(ucp), C.CString(ucs)
	defer C.free(unsafe.Pointer(cucp))
	defer C.free(unsafe.Pointer(cucs))
	var msg [512]C.char
	var cl *C.weft_ucx_lib
	if rc := C.weft_ucx_open(cucp, cucs, &cl, &msg[0], C.int(len(msg))); rc != 0 {
		return nil, &LoadError{Library: ucp, Detail: C.GoString(&msg[0])}
	}
	var ma, mi, re C.unsigned
	C.weft_ucx_version(cl, &ma, &mi, &re)
	l := &Lib{c: cl, major: int(ma), minor: int(mi), release: int(re)}
	if l.major != MinMajor || l.minor < MinMinor {
		return nil, &LoadError{Library: ucp, Detail: fmt.Sprintf("UCX %s is older than %d.%d", l.Version(), MinMajor, MinMinor)}
	}
	return l, nil
}

// Version is the library's version, "1.13.1".
func (l *Lib) Version() string { return fmt.Sprintf("%d.%d.%d", l.major, l.minor, l.release) }

// StatusString is ucs_status_string.
func (l *Lib) StatusString(status int) string {
	return C.GoString(C.weft_ucx_status_string(l.c, C.int(status)))
}

func (l *Lib) err(call string, status C.int) error {
	if status == StatusOK {
		return nil
	}
	return &Error{Call: call, Status: int(status), Text: l.StatusString(int(status))}
}

// Context is a UCP context (ucp_context_h).
type Context struct {
	lib *Lib
	c   C.ucp_context_h
}

// NewContext creates a context with features (Feature* bits). UCX reads
// its UCX_* variables from the environment; settings then overrides
// individual ones (keys without the UCX_ prefix: "TLS", "NET_DEVICES").
func (l *Lib) NewContext(features uint64, settings map[string]string) (*Context, error) {
	n := len(settings)
	keys := C.malloc(C.size_t(max(n, 1)) * C.size_t(unsafe.Sizeof(uintptr(0))))
	vals := C.malloc(C.size_t(max(n, 1)) * C.size_t(unsafe.Sizeof(uintptr(0))))
	defer C.free(keys)
	defer C.free(vals)
	ks := unsafe.Slice((**C.char)(keys), max(n, 1))
	vs := unsafe.Slice((**C.char)(vals), max(n, 1))
	i := 0
	for k, v := range settings {
		ks[i], vs[i] = C.CString(k), C.CString(v)
		defer C.free(unsafe.Pointer(ks[i]))
		defer C.free(unsafe.Pointer(vs[i]))
		i++
	}
	var msg [256]C.char
	var c C.ucp_context_h
	if st := C.weft_ucx_init(l.c, C.uint64_t(features), (**C.char)(keys), (**C.char)(vals), C.int(n), &c, &msg[0], C.int(len(msg))); st != 0 {
		return nil, l.err(C.GoString(&msg[0]), st)
	}
	return &Context{lib: l, c: c}, nil
}

// MemoryTypes is the set of memory types the context's transports reach
// (bit MemHost, MemCUDA, … set).
func (c *Context) MemoryTypes() (uint64, error) {
	var t C.uint64_t
	if err := c.lib.err("ucp_context_query", C.weft_ucx_memory_types(c.lib.c, c.c, &t)); err != nil {
		return 0, err
	}
	return uint64(t), nil
}

// Close is ucp_cleanup. Workers and registrations must be released first.
func (c *Context) Close() { C.weft_ucx_cleanup(c.lib.c, c.c) }

// Mem is a memory registration (ucp_mem_h).
type Mem struct {
	ctx *Context
	m   C.ucp_mem_h
}

// MemMap registers [addr, addr+n) (ucp_mem_map without allocation).
// memType is MemHost, MemCUDA, …, or -1 to let UCX detect it.
func (c *Context) MemMap(addr uintptr, n uint64, memType int) (*Mem, error) {
	var m C.ucp_mem_h
	if err := c.lib.err("ucp_mem_map", C.weft_ucx_mem_map(c.lib.c, c.c, C.uint64_t(addr), C.uint64_t(n), C.int(memType), &m)); err != nil {
		return nil, err
	}
	return &Mem{ctx: c, m: m}, nil
}

// maxRkey bounds a packed remote key.
const maxRkey = 4096

// PackRkey returns the registration's packed remote key (ucp_rkey_pack),
// the bytes a peer unpacks with Endpoint.UnpackRkey.
func (m *Mem) PackRkey() ([]byte, error) {
	buf := C.malloc(maxRkey)
	defer C.free(buf)
	var n C.size_t
	if err := m.ctx.lib.err("ucp_rkey_pack", C.weft_ucx_rkey_pack(m.ctx.lib.c, m.ctx.c, m.m, buf, maxRkey, &n)); err != nil {
		return nil, err
	}
	return C.GoBytes(buf, C.int(n)), nil
}

// Unmap is ucp_mem_unmap.
func (m *Mem) Unmap() error {
	return m.ctx.lib.err("ucp_mem_unmap", C.weft_ucx_mem_unmap(m.ctx.lib.c, m.ctx.c, m.m))
}

// Worker is a UCP worker with an active-message inbox.
type Worker struct {
	lib *Lib
	w   *C.weft_ucx_worker
}

// NewWorker creates a worker (single-threaded: the caller serialises)
// whose active messages of id amID up to maxLen bytes are kept for
// PopAM; longer ones and rendezvous ones are dropped and counted. The
// context needs FeatureAM and FeatureWakeup.
func (c *Context) NewWorker(amID uint16, maxLen int) (*Worker, error) {
	var w *C.weft_ucx_worker
	if err := c.lib.err("ucp_worker_create", C.weft_ucx_worker_create(c.lib.c, c.c, C.unsigned(amID), C.size_t(maxLen), &w)); err != nil {
		return nil, err
	}
	return &Worker{lib: c.lib, w: w}, nil
}

// Address is the worker's address (ucp_worker_get_address), the bytes a
// peer passes to Connect.
func (w *Worker) Address() ([]byte, error) {
	const maxAddr = 64 << 10
	buf := C.malloc(maxAddr)
	defer C.free(buf)
	var n C.size_t
	if err := w.lib.err("ucp_worker_get_address", C.weft_ucx_worker_address(w.w, buf, maxAddr, &n)); err != nil {
		return nil, err
	}
	return C.GoBytes(buf, C.int(n)), nil
}

// Progress is ucp_worker_progress: the number of events it handled.
func (w *Worker) Progress() int { return int(C.weft_ucx_progress(w.w)) }

// Arm is ucp_worker_arm: true when the worker is armed (wait on
// EventFD), false when events are pending (progress again first).
func (w *Worker) Arm() (bool, error) {
	st := C.weft_ucx_arm(w.w)
	if st == statusBusy {
		return false, nil
	}
	if err := w.lib.err("ucp_worker_arm", st); err != nil {
		return false, err
	}
	return true, nil
}

// Wait blocks until the worker's event descriptor is readable or
// timeoutMs passes (-1: no limit); true when it is readable. Call it
// without holding the caller's worker lock; it makes no UCX call.
func (w *Worker) Wait(timeoutMs int) (bool, error) {
	rc := C.weft_ucx_wait_fd(w.w.efd, C.int(timeoutMs))
	if rc < 0 {
		return false, fmt.Errorf("poll of the UCX worker's event descriptor: errno %d", -int(rc))
	}
	return rc > 0, nil
}

// Signal wakes a Wait (ucp_worker_signal); safe from any goroutine.
func (w *Worker) Signal() error { return w.lib.err("ucp_worker_signal", C.weft_ucx_signal(w.w)) }

// PopAM returns the oldest active message received, or false.
func (w *Worker) PopAM() ([]byte, bool) {
	m := C.weft_ucx_am_pop(w.w)
	if m == nil {
		return nil, false
	}
	defer C.free(unsafe.Pointer(m))
	return C.GoBytes(unsafe.Pointer(C.weft_ucx_am_bytes(m)), C.int(m.len)), true
}

// Dropped is the number of active messages refused so far (too long,
// rendezvous, or no memory).
func (w *Worker) Dropped() uint64 { return uint64(w.w.dropped) }

// Close destroys the worker (endpoints must be closed first).
func (w *Worker) Close() { C.weft_ucx_worker_destroy(w.w) }

// Endpoint is a connection to a peer's worker (ucp_ep_h), created with
// peer-failure error handling.
type Endpoint struct {
	lib      *Lib
	e        *C.weft_ucx_ep
	peerMode bool
}

// Connect creates an endpoint to the worker whose Address is addr, with
// peer-failure handling where the transports offer it. UCX
// parses addr; the caller must only pass an address from a peer it has
// authenticated.
func (w *Worker) Connect(addr []byte) (*Endpoint, error) {
	if len(addr) == 0 {
		return nil, &Error{Call: "ucp_ep_create", Status: statusInvalAddr, Text: "empty worker address"}
	}
	ca := C.CBytes(addr)
	defer C.free(ca)
	var e *C.weft_ucx_ep
	var peer C.int
	if err := w.lib.err("ucp_ep_create", C.weft_ucx_ep_create(w.w, ca, &e, &peer)); err != nil {
		return nil, err
	}
	return &Endpoint{lib: w.lib, e: e, peerMode: peer != 0}, nil
}

// PeerFailureHandling reports whether UCX reports the peer's failure on
// this endpoint (UCP_ERR_HANDLING_MODE_PEER); false where the transports
// to the peer offer no such handling (shared memory) and the endpoint was
// made without it.
func (e *Endpoint) PeerFailureHandling() bool { return e.peerMode }

// Err is the failure UCX reported for the endpoint's peer, or nil.
func (e *Endpoint) Err() error {
	return e.lib.err("endpoint error handler", C.int(e.e.status))
}

// Rkey is a peer's remote key unpacked on an endpoint.
type Rkey struct {
	lib *Lib
	k   C.ucp_rkey_h
}

// UnpackRkey is ucp_ep_rkey_unpack of a packed key.
func (e *Endpoint) UnpackRkey(b []byte) (*Rkey, error) {
	if len(b) == 0 || len(b) > maxRkey {
		return nil, &Error{Call: "ucp_ep_rkey_unpack", Status: statusInvalid, Text: fmt.Sprintf("packed key of %d bytes", len(b))}
	}
	cb := C.CBytes(b)
	defer C.free(cb)
	var k C.ucp_rkey_h
	if err := e.lib.err("ucp_ep_rkey_unpack", C.weft_ucx_rkey_unpack(e.e, cb, &k)); err != nil {
		return nil, err
	}
	return &Rkey{lib: e.lib, k: k}, nil
}

// Destroy is ucp_rkey_destroy.
func (k *Rkey) Destroy() { C.weft_ucx_rkey_destroy(k.lib.c, k.k) }

// Request is an operation in flight; the zero Request is complete.
type Request struct {
	p   unsafe.Pointer
	buf unsafe.Pointer // C memory the operation reads, freed with the request
}

func (l *Lib) request(call string, p unsafe.Pointer, st C.int, buf unsafe.Pointer) (Request, error) {
	if st != StatusOK && st != StatusInProgress {
		if buf != nil {
			C.free(buf)
		}
		return Request{}, l.err(call, st)
	}
	if p == nil && buf != nil {
		C.free(buf)
		buf = nil
	}
	return Request{p: p, buf: buf}, nil
}

// Put starts ucp_put_nbx of n bytes at local address src to raddr under
// k. src must stay unchanged until the request completes.
func (e *Endpoint) Put(src uintptr, n uint64, raddr uint64, k *Rkey) (Request, error) {
	var st C.int
	p := C.weft_ucx_put(e.e, C.uint64_t(src), C.uint64_t(n), C.uint64_t(raddr), k.k, &st)
	return e.lib.request("ucp_put_nbx", p, st, nil)
}

// Flush starts ucp_ep_flush_nbx: complete when every operation issued on
// the endpoint before it is complete at the peer.
func (e *Endpoint) Flush() (Request, error) {
	var st C.int
	p := C.weft_ucx_flush(e.e, &st)
	return e.lib.request("ucp_ep_flush_nbx", p, st, nil)
}

// SendAM starts an eager active message of id carrying a copy of data.
func (e *Endpoint) SendAM(id uint16, data []byte) (Request, error) {
	buf := C.CBytes(data)
	var st C.int
	p := C.weft_ucx_am_send(e.e, C.unsigned(id), buf, C.size_t(len(data)), &st)
	return e.lib.request("ucp_am_send_nbx", p, st, buf)
}

// Close starts closing the endpoint (ucp_ep_close_nbx; force: without
// flushing, for a failed peer). The Endpoint is unusable afterwards.
func (e *Endpoint) Close(force bool) (Request, error) {
	var st C.int
	f := C.int(0)
	if force {
		f = 1
	}
	p := C.weft_ucx_ep_close(e.e, f, &st)
	e.e = nil
	return e.lib.request("ucp_ep_close_nbx", p, st, nil)
}

// Done polls the request: true once complete, with its error. A complete
// request is released; do not poll it again.
func (l *Lib) Done(r *Request, call string) (bool, error) {
	if r.p == nil {
		r.release()
		return true, nil
	}
	st := C.weft_ucx_request_status(l.c, r.p)
	if st == StatusInProgress {
		return false, nil
	}
	C.weft_ucx_request_free(l.c, r.p)
	r.p = nil
	r.release()
	return true, l.err(call, st)
}

// Pending reports whether the request is still to be polled.
func (r *Request) Pending() bool { return r.p != nil }

func (r *Request) release() {
	if r.buf != nil {
		C.free(r.buf)
		r.buf = nil
	}
}
