// Package ibverbs binds libibverbs, the RDMA verbs library of rdma-core,
// for weft's hal/ib. The library is opened with dlopen at run time
// ([Library]: WEFT_IBVERBS_LIB, else libibverbs.so.1) from weft's own
// minimal header (weft_ibverbs.h), so weft builds and its tests run on
// machines without rdma-core headers or RDMA devices. Several libraries may
// be open at once ([Open] by path): hal/ib's tests load weft's in-memory
// verbs provider (testdata/fakeverbs.c) through the same path.
//
// ibv_post_send, ibv_post_recv and ibv_poll_cq are inline functions in
// verbs.h that call through the provider's function table in struct
// ibv_context; the header reproduces that table's layout, and the
// trampolines call it the same way.
//
// Errors are [*Error] values naming the call and the errno, wrapping
// [hal.ErrSystem] (or [hal.ErrNotSupported] for ENOSYS/EOPNOTSUPP and
// [hal.ErrInvalidArgument] for EINVAL); a missing library is a
// [*LoadError] wrapping [hal.ErrNotSupported]. Built without cgo every
// call fails with a [*LoadError].
//
// Objects are not safe for concurrent use unless noted: hal/ib serialises
// calls on each queue pair and completion queue.
package ibverbs
