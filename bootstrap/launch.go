package bootstrap

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/auth"
	"github.com/weftccl/weft/internal/env"
)

// Launch describes this process's place in a job, as a launcher set it up.
type Launch struct {
	Rank      int // global rank, in [0, Size)
	Size      int // number of ranks
	LocalRank int // rank among the processes of this node; selects the device ordinal
	ID        UniqueID
	Source    string // "weft run", "mpirun", "srun" or "torchrun"

	// ServeRoot is true when this process must host the job's root
	// listener at ID.Addr before connecting: rank 0 of a job whose id was
	// derived from MASTER_ADDR/MASTER_PORT. Launch.Connect does it.
	ServeRoot bool
}

// launcher names the rank, size and local-rank variables of one launcher.
type launcher struct {
	source, rank, size, local string
	// jobVars identify the job; every rank of a job sees the same values.
	// They salt the magic derived from MASTER_ADDR/MASTER_PORT, so that
	// two jobs reusing one address cannot join each other.
	jobVars []string
}

// launchers in the order FromEnv tries them. mpirun's variables come before
// Slurm's so that mpirun inside an allocation wins over the batch step's
// SLURM_PROCID, and torchrun's before Slurm's because torchrun is itself
// often started by srun, one agent per node.
var launchers = [...]launcher{
	// Open MPI
	{"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", []string{"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"}},
	// MPICH, Intel MPI (Hydra)
	{"mpirun", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", []string{"PMI_JOBID"}},
	{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", []string{"TORCHELASTIC_RUN_ID"}},
	{"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", []string{"SLURM_JOB_ID", "SLURM_STEP_ID"}},
}

// getenv returns a variable that is set and not empty.
func getenv(name string) (string, bool) {
	v := strings.TrimSpace(os.Getenv(name))
	return v, v != ""
}

// FromEnv reads this process's rank, size, local rank and unique id from
// the environment a launcher prepared. It tries, in order: WEFT_RANK,
// WEFT_NRANKS, WEFT_LOCAL_RANK and WEFT_UNIQUE_ID (set by `weft run`);
// OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK (Open MPI); PMI_RANK/PMI_SIZE with
// MPI_LOCALRANKID (MPICH, Intel MPI); RANK/WORLD_SIZE/LOCAL_RANK
// (torchrun); SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID (srun). When no
// local rank is given, LocalRank is Rank (right for a single node).
//
// The unique id is WEFT_UNIQUE_ID when set. Otherwise MASTER_ADDR and
// MASTER_PORT name the root, which rank 0 hosts (ServeRoot); the magic is
// derived from that address and the launcher's job id (SLURM_JOB_ID and
// SLURM_STEP_ID, OMPI_MCA_ess_base_jobid or PMIX_NAMESPACE, PMI_JOBID,
// TORCHELASTIC_RUN_ID), so every rank computes the same one. Under
// torchrun, whose agent's store already listens on MASTER_PORT when
// TORCHELASTIC_USE_AGENT_STORE is True, the root uses MASTER_PORT+1.
//
// ok is false, with a nil error, when no launcher variable is set. Errors
// wrap hal.ErrInvalidArgument and name the variable at fault: a rank
// without a size, a non-integer, a rank outside [0, size), or a rank
// without any rendezvous address.
func FromEnv() (Launch, bool, error) {
	var (
		l       Launch
		jobVars []string
		found   bool
	)
	if _, ok := getenv("WEFT_RANK"); ok {
		l.Source = "weft run"
		if err := readRank(&l, "WEFT_RANK", "WEFT_NRANKS", "WEFT_LOCAL_RANK", env.String); err != nil {
			return Launch{}, true, err
		}
		found = true
	}
	for _, lv := range launchers {
		if found {
			break
		}
		if _, ok := getenv(lv.rank); !ok {
			continue
		}
		l.Source = lv.source
		if err := readRank(&l, lv.rank, lv.size, lv.local, os.Getenv); err != nil {
			return Launch{}, true, err
		}
		jobVars, found = lv.jobVars, true
	}
	if !found {
		return Launch{}, false, nil
	}
	secret, err := secretFromEnv()
	if err != nil {
		return Launch{}, true, err
	}
	id, derived, err := launchID(l, jobVars, secret)
	if err != nil {
		return Launch{}, true, err
	}
	id.Secret = secret
	l.ID, l.ServeRoot = id, derived && l.Rank == 0
	return l, true, nil
}

// readRank fills rank, size and local rank from three variables, read with
// get (env.String for WEFT_* variables, os.Getenv for a launcher's).
func readRank(l *Launch, rankVar, sizeVar, localVar string, get func(string) string) error {
	num := func(name string) (int, bool, error) {
		s := strings.TrimSpace(get(name))
		if s == "" {
			return 0, false, nil
		}
		v, err := strconv.Atoi(s)
		if err != nil {
			return 0, true, fmt.Errorf("bootstrap: %s=%q (set by %s): want an integer: %w", name, s, l.Source, hal.ErrInvalidArgument)
		}
		return v, true, nil
	}
	rank, _, err := num(rankVar)
	if err != nil {
		return err
	}
	size, ok, err := num(sizeVar)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("bootstrap: %s is set but %s is not: cannot tell the number of ranks: %w", rankVar, sizeVar, hal.ErrInvalidArgument)
	}
	if size < 1 || size > maxRanks {
		return fmt.Errorf("bootstrap: %s=%d: want 1 to %d ranks: %w", sizeVar, size, maxRanks, hal.ErrInvalidArgument)
	}
	if rank < 0 || rank >= size {
		return fmt.Errorf("bootstrap: %s=%d outside [0, %s=%d): %w", rankVar, rank, sizeVar, size, hal.ErrInvalidArgument)
	}
	local, ok, err := num(localVar)
	if err != nil {
		return err
	}
	if !ok {
		local = rank
	}
	if local < 0 {
		return fmt.Errorf("bootstrap: %s=%d is negative: %w", localVar, local, hal.ErrInvalidArgument)
	}
	l.Rank, l.Size, l.LocalRank = rank, size, local
	return nil
}

// secretFromEnv reads the job secret from WEFT_JOB_SECRET (hex) or
// WEFT_JOB_SECRET_FILE (a file of mode 0600 or stricter holding the hex).
// Neither set is the zero Secret (an unauthenticated job); both set, a
// malformed value or a file others may read is an error wrapping
// hal.ErrInvalidArgument that names the variable but never the value.
func secretFromEnv() (Secret, error) {
	text, file := env.String("WEFT_JOB_SECRET"), strings.TrimSpace(env.String("WEFT_JOB_SECRET_FILE"))
	switch {
	case text != "" && file != "":
		return Secret{}, fmt.Errorf("bootstrap: both WEFT_JOB_SECRET and WEFT_JOB_SECRET_FILE are set: set one: %w", hal.ErrInvalidArgument)
	case text != "":
		sec, err := auth.ParseSecret(text)
		if err != nil {
			return Secret{}, fmt.Errorf("bootstrap: WEFT_JOB_SECRET: %w", err)
		}
		return sec, nil
	case file != "":
		sec, err := auth.ReadSecretFile(file)
		if err != nil {
			return Secret{}, fmt.Errorf("bootstrap: WEFT_JOB_SECRET_FILE: %w", err)
		}
		return sec, nil
	}
	return Secret{}, nil
}

// launchID returns the unique id of l's job: WEFT_UNIQUE_ID, or one derived
// from MASTER_ADDR, MASTER_PORT and the values of jobVars (derived is then
// true: rank 0 must host the root). With a secret the derived magic is keyed
// by it too, so that it cannot be computed from public values.
func launchID(l Launch, jobVars []string, secret Secret) (id UniqueID, derived bool, err error) {
	if s := env.String("WEFT_UNIQUE_ID"); s != "" {
		id, err := ParseUniqueID(strings.TrimSpace(s))
		if err != nil {
			return UniqueID{}, false, fmt.Errorf("WEFT_UNIQUE_ID: %w", err)
		}
		return id, false, nil
	}
	addr, okAddr := getenv("MASTER_ADDR")
	portText, okPort := getenv("MASTER_PORT")
	if !okAddr || !okPort {
		return UniqueID{}, false, fmt.Errorf("bootstrap: rank %d of %d (from %s) has no rendezvous address: set MASTER_ADDR to rank 0's host name or address and MASTER_PORT to a free TCP port on it "+
			"(for example mpirun -x MASTER_ADDR=node01 -x MASTER_PORT=29500 …, or export both before srun), or start the job with `weft run --nproc N`: %w",
			l.Rank, l.Size, l.Source, hal.ErrInvalidArgument)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return UniqueID{}, false, fmt.Errorf("bootstrap: MASTER_PORT=%q: want a TCP port, 1 to 65535: %w", portText, hal.ErrInvalidArgument)
	}
	if l.Source == "torchrun" {
		if v, _ := getenv("TORCHELASTIC_USE_AGENT_STORE"); strings.EqualFold(v, "true") {
			if port == 65535 {
				return UniqueID{}, false, fmt.Errorf("bootstrap: MASTER_PORT=65535 is torchrun's store; weft needs the next port: %w", hal.ErrInvalidArgument)
			}
			port++
		}
	}
	root := net.JoinHostPort(addr, strconv.Itoa(port))
	job := ""
	for _, v := range jobVars {
		if s, ok := getenv(v); ok {
			job += v + "=" + s + ";"
		}
	}
	seed := []byte("weft-bootstrap\x00" + root + "\x00" + job)
	if !secret.IsZero() {
		seed = append(seed, secret.Derive("bootstrap magic")...)
	}
	sum := sha256.Sum256(seed)
	magic := binary.BigEndian.Uint64(sum[:8])
	if magic == 0 {
		magic = 1
	}
	return UniqueID{Magic: magic, Addr: root}, true, nil
}

// Connect joins the job l describes: it starts the root listener first when
// l.ServeRoot is set, then calls Connect. The root listens on the port of
// l.ID.Addr at the address of the interface named by WEFT_SOCKET_IFNAME,
// or else at the address MASTER_ADDR names when that is an address of this
// host; on all interfaces only when MASTER_ADDR says so (0.0.0.0 or ::). A root that cannot listen (port in use,
// MASTER_ADDR not of this host) is an error wrapping hal.ErrSystem or
// hal.ErrInvalidArgument that names the port and what to set.
func (l Launch) Connect(ctx context.Context) (Bootstrap, error) {
	var root *rootServer
	if l.ServeRoot {
		host, port, err := net.SplitHostPort(l.ID.Addr)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: root address %q: %w", l.ID.Addr, hal.ErrInvalidArgument)
		}
		ip, err := rootBindIP(host)
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), port))
		if err != nil {
			return nil, fmt.Errorf("bootstrap: rank 0 cannot host the root on port %s of %s (MASTER_PORT; is it in use?): %w: %w", port, ip, err, hal.ErrSystem)
		}
		if root, err = startRoot(l.ID, ln, nil); err != nil {
			ln.Close()
			return nil, err
		}
	}
	b, err := Connect(ctx, l.ID, l.Rank, l.Size)
	if err != nil && root != nil {
		root.close()
	}
	return b, err
}

// rootBindIP is the address rank 0 hosts the root at: the interface of
// WEFT_SOCKET_IFNAME, else the first address MASTER_ADDR (host) resolves to
// that belongs to this host.
func rootBindIP(host string) (net.IP, error) {
	if spec := socketIfname(); spec != "" {
		return interfaceIP(spec)
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: rank 0 hosts the root at MASTER_ADDR=%s, which does not resolve: %v: %w", host, err, hal.ErrInvalidArgument)
	}
	local := map[string]bool{}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				local[ipn.IP.String()] = true
			}
		}
	}
	for _, ip := range ips {
		// An unspecified MASTER_ADDR (0.0.0.0, ::) asks for every
		// interface explicitly.
		if ip.IsLoopback() || ip.IsUnspecified() || local[ip.String()] {
			return ip, nil
		}
	}
	return nil, fmt.Errorf("bootstrap: rank 0 hosts the root at MASTER_ADDR=%s, but none of its addresses belongs to this host: set MASTER_ADDR to rank 0's host, or WEFT_SOCKET_IFNAME to the interface to listen on: %w", host, hal.ErrInvalidArgument)
}
