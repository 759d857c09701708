package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
)

var runNproc, runNodes int

var runCmd = &cobra.Command{
	Use:   "run --nproc N [--nodes M] [--] program [args...]",
	Short: "Start N local processes of a program, one per rank",
	Long: `run starts N copies of program on this node, one process per rank, and
waits for them. Each gets WEFT_RANK, WEFT_NRANKS, WEFT_LOCAL_RANK and
WEFT_UNIQUE_ID, which the bootstrap reads to connect the ranks, and
NCCL_NVLS_ENABLE=0. Output of rank 0 is passed through unchanged; lines of
other ranks are prefixed with "[rank N] ".

If a rank fails (non-zero exit status or a signal), the others get 30 s to
exit by themselves before they are killed, and run reports every failed
rank. A final error line that several weft ranks print ("weft: …") is
printed once, with the ranks: "weft: ranks 0-3,5: …". The exit status is
7 (a lost peer) when some ranks failed, or the ranks' own status when
every rank failed with the same one. SIGINT and SIGTERM are forwarded to the ranks; a second one kills
them. Multi-node jobs run under mpirun, srun or torchrun instead.

--nodes M emulates M nodes on this host: rank r gets WEFT_NODE_ID=r×M/N,
so ranks of different nodes share no memory and their collectives go
through the network transport (WEFT_NET, default ib where usable, else
socket), as on a real cluster.`,
	Example: `  weft run --nproc 8 -- weft bench allreduce
  weft run --nproc 2 ./myprog --size 1M
  weft run --nproc 4 --nodes 2 -- weft bench allreduce`,
	Args: cobra.MinimumNArgs(1),
	RunE: func(cmd *cobra.Command, args []string) error {
		if runNproc < 1 {
			return fmt.Errorf("run: --nproc must be at least 1, got %d: %w", runNproc, hal.ErrInvalidArgument)
		}
		// Final error lines of weft ranks ("weft: …") are printed once per
		// distinct message, with the ranks that printed it.
		stderr := newRankErrors(cmd.ErrOrStderr())
		defer stderr.Flush()
		if runNodes > 0 {
			return bootstrap.RunNodes(cmd.Context(), runNproc, runNodes, args, nil, cmd.OutOrStdout(), stderr)
		}
		return bootstrap.Run(cmd.Context(), runNproc, args, nil, cmd.OutOrStdout(), stderr)
	},
}

func init() {
	runCmd.Flags().IntVarP(&runNproc, "nproc", "n", 1, "number of processes (ranks) to start, at least 1")
	runCmd.Flags().IntVar(&runNodes, "nodes", 0, "emulate this many nodes on this host (WEFT_NODE_ID = rank × nodes / nproc)")
	// Flags after the program name belong to the program.
	runCmd.Flags().SetInterspersed(false)
	rootCmd.AddCommand(runCmd)
}
