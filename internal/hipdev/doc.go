// Package hipdev holds the HAL objects that a HIP backend (hal/xgmi)
// builds on one AMD GPU: streams ([HALStream]), timing events, captured
// graphs, compiled modules and their kernels, and the [CopyEngine] of
// port-mapped links. It sits above the contract, beside internal/cudadev
// for CUDA: its types implement hal.Stream, hal.Event, hal.Graph,
// hal.Module, hal.Function and hal.Engine over the runtime objects of
// package internal/hip, which is the binding below the contract and
// imports no hal package.
//
// Owner strings name the backend's device in messages
// ("xgmi GPU 0 (rank 3)"). Waits poll with a deadline (hip.Poll), so no
// wait is unbounded: a missed deadline wraps hal.ErrTimeout.
package hipdev
