// Package ucx binds UCX's UCP layer (libucp, libucs) for weft's hal/ucx.
// The libraries are opened with dlopen at run time (libucp.so.0 and
// libucs.so.0, [DefaultUCP], [DefaultUCS]) through weft's own minimal
// header (weft_ucp.h, written from the UCX 1.13 API), so weft builds and
// its tests run on machines without UCX; there [Load] fails with a
// [*LoadError] and hal/ucx reports the network unavailable.
//
// What is bound: a context ([Context], ucp_init with the features asked
// for and UCX_* settings applied on top of the environment's), a worker
// ([Worker]: address, progress, arm and the event descriptor, signal, and
// an inbox of active messages that a C callback fills during progress), an
// endpoint ([Endpoint]: remote keys, ucp_put_nbx, ucp_ep_flush_nbx,
// ucp_am_send_nbx, close), memory registrations ([Mem]: ucp_mem_map and
// packed remote keys) and requests ([Request], polled with
// ucp_request_check_status, never completed through Go callbacks).
//
// Threading: workers are created in UCS_THREAD_MODE_SINGLE; the caller
// serialises every call on a worker and on its endpoints, registrations
// excepted (ucp_mem_map is context-wide and thread-safe in UCX).
// [Worker.Signal] alone may be called concurrently.
//
// Errors are [*Error] values naming the call and the UCX status, wrapping
// an error kind of internal/errkind (ErrRemote for a peer's failure,
// ErrTimeout, ErrNotSupported, ErrInvalidArgument, else ErrSystem). Built
// without cgo every call fails with a [*LoadError].
package ucx
