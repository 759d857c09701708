package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
)

// rankJob is one rank of a multi-rank command (bench, soak): its
// bootstrap, local device ordinal, job id for hal/host's shared memory, and
// where it prints (rank 0 prints, the others are quiet).
type rankJob struct {
	ctx       context.Context
	boot      bootstrap.Bootstrap
	localRank int
	jobID     string
	out       io.Writer
}

// joinJob makes this process one rank of the command's job. Outside a job
// with nproc > 1 it starts the job instead — this same command once per
// rank, joined through the bootstrap variables bootstrap.Run sets — and
// returns its result with job == nil. The caller closes job.boot.
func joinJob(cmd *cobra.Command, what string, nproc int) (job *rankJob, err error) {
	launch, inJob, err := bootstrap.FromEnv()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if !inJob && nproc > 1 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("%s: find own executable: %v: %w", what, err, hal.ErrSystem)
		}
		// The ranks' final errors are printed once per distinct message.
		stderr := newRankErrors(os.Stderr)
		err = bootstrap.Run(cmd.Context(), nproc, append([]string{exe}, os.Args[1:]...), nil, os.Stdout, stderr)
		stderr.Flush()
		return nil, err
	}
	j := &rankJob{ctx: cmd.Context(), out: io.Discard}
	if j.ctx == nil {
		j.ctx = context.Background()
	}
	if inJob {
		bctx, cancel := context.WithTimeout(j.ctx, bootTimeout())
		defer cancel()
		if j.boot, err = launch.Connect(bctx); err != nil {
			return nil, fmt.Errorf("%s: rank %d: %w", what, launch.Rank, err)
		}
		j.localRank, j.jobID = launch.LocalRank, launch.ID.JobName() // not the magic: it names /dev/shm files
	} else {
		j.boot = bootstrap.NewLocal(1)[0]
		var b [8]byte
		rand.Read(b[:])
		j.jobID = hex.EncodeToString(b[:])
	}
	if j.boot.Rank() == 0 {
		j.out = cmd.OutOrStdout()
	}
	return j, nil
}
