//go:build cgo

// Command nccl is weft's NCCL C ABI: built with
//
//	go build -buildmode=c-shared -o libweft_nccl.so ./nccl
//
// it is a shared library that exports NCCL 2.28's public functions
// (include/nccl.h is weft's header for them), so that programs written for
// NCCL — PyTorch's ProcessGroupNCCL, MPI-style C programs, vLLM — run on
// weft unchanged, with LD_PRELOAD=libweft_nccl.so or installed as
// libnccl.so.2.
//
// Communicators are weft communicators (weft.NewComm) over weft's bootstrap
// and a device of the HAL backend WEFT_HAL names (default: the first
// available). Collectives and grouped point-to-point calls become
// weft.Comm.Launch and weft.Comm.LaunchP2P on the caller's stream. What weft
// does not serve goes to the system's NCCL, loaded beside weft with
// RTLD_DEEPBIND, on an NCCL communicator created lazily for the same ranks;
// WEFT_NCCL_FALLBACK=0 turns that off. docs/nccl.md has the details.
//
// No Go panic crosses the C boundary: every export recovers and returns
// ncclInternalError with the panic in ncclGetLastError.
package main

func main() {}
