// Package devcore is the logic that the two GPU device cores,
// internal/cudadev (CUDA) and internal/hipdev (HIP), share, written once:
// the deadline poll of every wait on a stream or event ([Poll]), the
// identity of this host and IPC namespace ([HostID]) and the hash that
// exported handles carry of it ([HashID]), the table of IPC mappings
// shared by the imports of one allocation ([IPC]), the ring of events
// behind an engine's tickets ([Marks]) and the copy engine of port-mapped
// links itself ([CopyEngine]).
//
// It calls no vendor runtime and has no cgo: each piece is parameterised
// by the calls it needs (a query function, a stream's copy and signal, an
// event's record and query), which the cores pass from their bindings
// (internal/cuda, internal/hip). Like the cores it sits above the HAL
// contract: its errors wrap the hal sentinels, and its tickets are
// hal.Tickets.
package devcore
