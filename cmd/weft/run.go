package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
)

var runNproc int

var runCmd = &cobra.Command{
	Use:   "run --nproc N [--] program [args...]",
	Short: "Start N local processes of a program, one per rank",
	Long: `run starts N copies of program on this node, one process per rank, and
waits for them. Each gets WEFT_RANK, WEFT_NRANKS, WEFT_LOCAL_RANK and
WEFT_UNIQUE_ID, which the bootstrap reads to connect the ranks, and
NCCL_NVLS_ENABLE=0. Output of rank 0 is passed through unchanged; lines of
other ranks are prefixed with "[rank N] ".

If a rank fails (non-zero exit status or a signal), the others get 30 s to
exit by themselves before they are killed, and run reports every failed
rank. SIGINT and SIGTERM are forwarded to the ranks; a second one kills
them. Multi-node jobs run under mpirun, srun or torchrun instead.`,
	Example: `  weft run --nproc 8 -- weft bench allreduce
  weft run --nproc 2 ./myprog --size 1M`,
	Args: cobra.MinimumNArgs(1),
	RunE: func(cmd *cobra.Command, args []string) error {
		if runNproc < 1 {
			return fmt.Errorf("run: --nproc must be at least 1, got %d: %w", runNproc, hal.ErrInvalidArgument)
		}
		return bootstrap.Run(cmd.Context(), runNproc, args, nil, cmd.OutOrStdout(), cmd.ErrOrStderr())
	},
}

func init() {
	runCmd.Flags().IntVarP(&runNproc, "nproc", "n", 1, "number of processes (ranks) to start, at least 1")
	// Flags after the program name belong to the program.
	runCmd.Flags().SetInterspersed(false)
	rootCmd.AddCommand(runCmd)
}
