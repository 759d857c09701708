// Command weft is weft's command-line tool: bench (collective benchmarks in
// the style of nccl-tests), soak (randomized collectives, every element
// checked), topo (topology inspection), conformance (the HAL conformance
// suite) and run (a local launcher of one process per rank).
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

var rootCmd = &cobra.Command{
	Use:           "weft",
	Short:         "weft: a GPU communication stack",
	SilenceUsage:  true,
	SilenceErrors: true,
}

func main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "weft:", err)
		os.Exit(exitCode(err))
	}
}
