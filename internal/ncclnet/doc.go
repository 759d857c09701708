// Package ncclnet binds NCCL's network plugin ABI (ncclNet v8), so that
// weft's hal/netplugin can move bytes through any NCCL net plugin a
// cluster already runs: aws-ofi-nccl (libfabric, EFA), the InfiniBand and
// socket plugins NCCL's ext-net examples describe, vendors' own. The
// plugin is opened with dlopen at run time ([Load]) from weft's own
// minimal header (weft_ncclnet.h, the v8 table's layout as NCCL's
// ext-net/example/nccl/net_v8.h gives it), so nothing of NCCL is needed to
// build and a machine without a plugin still builds and tests weft.
//
// # Finding the plugin
//
// [Candidates] applies NCCL's rules (src/plugin/plugin_open.cc) to the
// value of NCCL_NET_PLUGIN: the name is first tried as given (a path, or
// a library name the dynamic loader finds on LD_LIBRARY_PATH); when that
// fails and the name has no '/' and is not already "lib….so", it is tried
// as libnccl-net-NAME.so. "aws-ofi" therefore loads libnccl-net-aws-ofi.so
// and "/opt/x/libnccl-net.so" exactly that file. Unset, or "none", means
// no plugin: weft does not fall back on libnccl-net.so as NCCL does, since
// WEFT_NET=plugin is an explicit choice.
//
// The library must export the symbol ncclNetPlugin_v8 (plugins export
// several versions side by side; v8 is in NCCL 2.19 and later and every
// current plugin keeps it). A library exporting only other versions is
// refused with a [*LoadError] naming them.
//
// # Model
//
// NCCL's network API is two-sided: a receiver listens (a handle of at most
// [HandleSize] bytes travels to the sender out of band), the sender
// connects, the receiver accepts; connect and accept never block and are
// called again until they return a comm. Data moves with tagged isend and
// irecv into memory registered with regMr, and test polls a request until
// it is done. A connection is one-way: a [SendComm] to a [RecvComm].
//
// Every object's methods go through the plugin's table; a plugin is not
// required to be thread-safe for one comm, so the caller serialises the
// calls on each comm (hal/netplugin calls the plugin from one progress
// goroutine). The plugin's log lines go to slog's NET logger
// (WEFT_DEBUG=INFO shows them).
//
// Errors are [*Error] values naming the call and the ncclResult_t, which
// wrap the matching errkind sentinel (ncclSystemError: ErrSystem,
// ncclRemoteError: ErrRemote, …); a plugin that cannot be loaded is a
// [*LoadError] wrapping errkind.ErrNotSupported. Built without cgo, Load
// fails with a *LoadError and nothing else can be made.
package ncclnet
