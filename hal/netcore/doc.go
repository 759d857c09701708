// Package netcore holds what weft's network backends (hal/socket,
// hal/netplugin, hal/ucx, hal/ib) share, written once:
//
//   - the remote-address layout of a peer's registration (bit 63 set, a
//     23-bit registration id, a 40-bit byte offset): [EncodeAddr],
//     [DecodeAddr]; and the 40-byte registration handle, one format with
//     each backend's magic and version: [HandleFormat];
//   - the export/import table of a NetDevice, with the import-handle
//     checks of [hal.CheckImportAs], the bounds and alignment checks of
//     a peer's addresses (an engine's Put/Signal arguments, a received
//     frame's destination): [Registry]; a NetDevice's own registration
//     imported by itself: [OwnBuffer];
//   - the engine of a NetDevice to its own rank, which turns addresses of
//     its own registrations into device addresses: [LocalEngine];
//   - an engine's sticky failure, the one shutdown and whether a call
//     reported the failure: [EngineState]; its tickets: [Marks]; a copy on
//     the device's own engine with its ticket, the step of staging device
//     memory through host memory and of applying what arrived there:
//     [CopyMark];
//   - the wake-every-waiter notifier: [Notifier];
//   - the bookkeeping of peer failures, first failure by rank, and of
//     refused connections: [Failures];
//   - Open's argument checks ([CheckOpen]) and the accept loop of a TCP
//     listener with its cap on unauthenticated connections ([Acceptor]).
//
// What differs on purpose stays in the backends: the wire formats of
// frames and addresses, how each stages (hal/socket's stager and
// completer goroutines, hal/netplugin's progress goroutine, UCX's and
// verbs' own registrations with remote keys), and the poll policies
// (hal/socket yields for 2 ms before it sleeps, hal/netplugin sleeps after
// 200 µs because a plugin has no blocking wait).
//
// Layering: netcore imports hal and internal packages only, never a
// backend, and only network backends (and tests) import it;
// internal/archcheck enforces both. Error messages keep the prefix of the
// backend that uses a piece ("socket: rank 3: ..."): the constructors take
// the backend's name.
//
// The fixtures the backends' test suites share (job ids, bounded waits, a
// data pattern, the window exchange and all-to-all engines of a test job,
// a ping-pong benchmark) are in [github.com/weftccl/weft/hal/netcore/nettest].
package netcore
