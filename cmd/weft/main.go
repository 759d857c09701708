// Command weft is weft's command-line tool: bench (collective benchmarks in
// the style of nccl-tests), soak (randomized collectives, every element
// checked), topo (topology inspection), conformance (the HAL conformance
// suite) and run (a local launcher of one process per rank).
//
// Its exit status is 1 plus the ncclResult_t code of the error (exit.go):
// every usage error (a bad flag, argument, backend name, rank count or
// WEFT_* value) is 5 and is reported before any process starts.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
)

var rootCmd = &cobra.Command{
	Use:           "weft",
	Short:         "weft: a GPU communication stack",
	SilenceUsage:  true,
	SilenceErrors: true,
	// Every WEFT_* variable is checked before a command does anything,
	// so that a bad value fails at once (status 5) instead of in each
	// rank. `weft env` lists and marks them itself.
	PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
		commandStarted = true
		if cmd == envCmd || cmd.Name() == "help" {
			return nil
		}
		return env.CheckAll()
	},
}

// commandStarted is set once a command's flags and arguments have parsed:
// an error from before then is a usage error (status 5).
var commandStarted bool

func init() {
	rootCmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%s: %w (see %s --help): %w", cmd.CommandPath(), err, cmd.CommandPath(), hal.ErrInvalidArgument)
	})
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run executes the command line args and returns the exit status; it is
// main without the process exit, for tests.
func run(args []string, stdout, stderr io.Writer) int {
	commandStarted = false
	rootCmd.SetArgs(args)
	rootCmd.SetOut(stdout)
	rootCmd.SetErr(stderr)
	err := rootCmd.Execute()
	if err != nil && !commandStarted {
		err = usageError(err)
	}
	if err != nil {
		fmt.Fprintln(stderr, "weft:", err)
	}
	return exitCode(err)
}
