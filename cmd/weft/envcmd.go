package main

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/weftccl/weft/internal/env"
)

var envMarkdown bool

var envCmd = &cobra.Command{
	Use:   "env",
	Short: "list every WEFT_* environment variable, its default, meaning and current value",
	RunE: func(cmd *cobra.Command, _ []string) error {
		if envMarkdown {
			fmt.Fprint(cmd.OutOrStdout(), env.Markdown())
			return nil
		}
		w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "VARIABLE\tVALUE\tDEFAULT\tMEANING")
		for _, v := range env.Table {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", v.Name, os.Getenv(v.Name), v.Default, v.Doc)
		}
		return w.Flush()
	},
}

func init() {
	envCmd.Flags().BoolVar(&envMarkdown, "markdown", false, "print the table as docs/environment.md")
	rootCmd.AddCommand(envCmd)
}
