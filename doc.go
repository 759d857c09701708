// Package weft is a GPU communication stack: one-sided channel primitives
// over a hardware-abstraction layer organised by interconnect, collectives
// written as plans over those channels, and a communicator that runs them.
//
// A [Comm] joins the ranks of a job: one process per device (or one
// goroutine per device in tests), a bootstrap for out-of-band exchange, and
// a device opened through a HAL backend. Backends register themselves when
// the one list of them, package backends, is imported:
//
//	import _ "github.com/weftccl/weft/backends" // nvlink, pcie, xgmi, host, …
//
//	boot, _ := bootstrap.Connect(ctx, id, rank, size)
//	dev, _ := weft.OpenDevice("nvlink", localRank)
//	comm, _ := weft.NewComm(ctx, boot, dev, weft.Options{})
//	s, _ := dev.NewStream()
//	err := comm.AllReduce(in, out, count, weft.Float32, weft.Sum, s)
//	err = comm.Synchronize(s)
//
// The common path needs weft and bootstrap only: the element types
// ([DataType]), operators ([RedOp]) and collectives ([Collective]) are
// named here, as aliases of the types the plans use.
//
// Collectives are asynchronous: they enqueue work on the caller's stream
// (and may be captured into a graph). Synchronize waits for the stream and
// reports any failure recorded by the device — a wait that passed its
// deadline, an element count that differs between ranks, a peer that
// disappeared — as an error naming the ranks involved.
//
// # Reading the root package
//
// Each file is one concept:
//
//   - comm.go: the communicator's life — OpenDevice, NewComm, the link
//     kinds it measures, Synchronize, Check, AsyncError, a lost peer,
//     Abort, Close, MemoryBytes.
//   - config.go: configuration — Options, and configure, the one function
//     that applies the precedence explicit option > WEFT_* variable >
//     tuning file > default; the tuning file; the ranks' agreement on
//     their plans.
//   - launch.go: launching collectives — Call, Launch and its checks,
//     selectPlan (the one decision of which plan serves a call, for
//     Launch, PlanName, PlanSMs, AllReducePlan and AllReduce), the
//     zero-copy AllReduce with its buffer registration, compiling and
//     preparing programs.
//   - p2p.go: point-to-point — P2P, LaunchP2P, its rounds, and the staging
//     buffer shared with in-place AllToAll.
//   - stall.go: stall detection — which ranks stopped making progress
//     (StallError).
//   - ce.go, cear.go, cereduce.go: the host-issued copy-engine AllGather,
//     AllReduce and Reduce (stream operations, no kernel moving data).
//   - p2pce.go: point-to-point operations (and Broadcast and AllToAll as
//     groups of them) by copy engines straight into the receiver's
//     buffer, exported at the call; the same exchange exports the
//     outputs of large two-rank Reduces and AllReduces (cereduce.go,
//     cear.go).
//   - window.go: memory windows (RegisterWindow, NCCL's
//     ncclCommWindowRegister) and the zero-copy plans that symmetric
//     windows let Launch run.
//   - types.go: the vocabulary of calls — DataType, RedOp, Collective and
//     their constants.
package weft
