// Package bootstrap is the out-of-band channel between the ranks of a weft
// job: rendezvous, then small exchanges (memory handles, addresses,
// topology) over TCP, before and beside the data path. It plays the part of
// NCCL's bootstrap network and MSCCL++'s TcpBootstrap.
//
// # Jobs and unique ids
//
// A job is named by a [UniqueID]: a random 64-bit magic that every message
// carries, and the host:port of a root listener. [NewUniqueID] creates one
// and serves the root from a background goroutine of the calling process,
// like ncclGetUniqueId; the id travels to the other ranks in its text form
// ([UniqueID.String], [ParseUniqueID]), for example in WEFT_UNIQUE_ID.
//
// The id also holds the job's [Secret]: every connection proves that it
// knows it by a mutual challenge–response before any message, so a process
// outside the job can neither join the rendezvous nor read its exchanges,
// and WEFT_SOCKET_ENCRYPT=1 encrypts what follows (docs/security.md). The
// secret is never in the text form nor in any log; it travels in
// WEFT_JOB_SECRET or WEFT_JOB_SECRET_FILE, or in [UniqueID.MarshalBinary].
//
// [Connect] joins a job: the rank says hello to the root (its rank, the job
// size and the address of its own listener), the root answers with the
// address of every rank once all have arrived, and the ranks then connect
// to each other, so that every pair of ranks shares one TCP connection.
// [NewLocal] offers the same [Bootstrap] semantics for ranks that are
// goroutines of one process.
//
// # Launchers
//
// [FromEnv] finds this process's rank, size, local rank and unique id in the
// environment of `weft run`, mpirun (Open MPI, MPICH, Intel MPI), srun or
// torchrun; [Launch.Connect] joins that job, hosting the root in rank 0
// when the id comes from MASTER_ADDR/MASTER_PORT. [Run] is the local
// launcher behind `weft run --nproc N`: it starts one process per rank,
// forwards their output and signals, and reports every rank that failed.
//
// # Failures and deadlines
//
// Every message is a 24-byte header (magic, type, protocol version, source
// rank, tag, payload length) and a payload of at most [MaxMessageSize]
// bytes. A connection that sends a wrong magic, a truncated message or an
// oversized length is rejected with an error naming the fault and the
// peer; a stranger's connection to a listener is dropped without
// disturbing the job.
//
// One goroutine reads each connection. A peer whose connection ends
// without the goodbye that [Bootstrap.Close] sends has disappeared: [Bootstrap.Err]
// then names it ("rank 3 disconnected"), [Bootstrap.Failed] is closed,
// and every pending and later call returns that error at once. Every
// blocking call ends by its context's deadline, or after
// WEFT_BOOTSTRAP_TIMEOUT (60 s) when the context has none, with an error
// wrapping hal.ErrTimeout that names the ranks still awaited.
//
// Errors wrap the sentinels of package hal: ErrInvalidArgument for a
// caller's mistake, ErrRemote for a peer's failure or bad message,
// ErrTimeout, ErrInvalidUsage for use after Close or mismatched
// collectives, and ErrSystem for the operating system's refusals.
// Logging goes through the BOOT subsystem (WEFT_DEBUG, WEFT_DEBUG_SUBSYS).
package bootstrap
