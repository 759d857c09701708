// Package hipdev is the HIP device core: the HAL objects that a HIP
// backend (hal/xgmi) builds on one AMD GPU, as internal/cudadev is for
// CUDA. It holds streams ([HALStream]), timing events, captured graphs,
// compiled modules and their kernels, the [CopyEngine] of port-mapped
// links, weft's exported form of a buffer ([ExportHandle]) with the IPC
// mappings its imports share ([OpenIPC]), and the device header
// (device/weft_hal.h, [DeviceHeader]). Its types implement hal.Stream,
// hal.Event, hal.Graph, hal.Module, hal.Function and hal.Engine over the
// runtime objects of package internal/hip, which is the binding below the
// contract and imports no hal package.
//
// What the CUDA and HIP cores do alike is written once in
// internal/devcore and used by both: the deadline poll of every wait, the
// host id, the IPC mapping table, and the copy engine with its ring of
// event-marked tickets (a hal.Tickets). What stays here is the HIP side of
// each: the runtime calls they are parameterised with.
//
// Owner strings name the backend's device in messages
// ("xgmi GPU 0 (rank 3)"). Waits poll with a deadline (devcore.Poll), so
// no wait is unbounded: a missed deadline wraps hal.ErrTimeout.
package hipdev
