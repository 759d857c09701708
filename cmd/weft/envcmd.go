package main

import (
	"errors"
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
	Long: `env lists every WEFT_* variable weft reads with its current value, default
and meaning. A value that is not of the variable's accepted form is marked
INVALID with that form, and the command then exits with status 5 (what every
other command does at once when such a value is set).`,
	RunE: func(cmd *cobra.Command, _ []string) error {
		if envMarkdown {
			fmt.Fprint(cmd.OutOrStdout(), env.Markdown())
			return nil
		}
		w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "VARIABLE\tVALUE\tDEFAULT\tMEANING")
		var invalid []error
		for _, v := range env.Table {
			val := os.Getenv(v.Name)
			if val != "" && env.Sensitive(v.Name) {
				val = "(set, hidden)"
			}
			if err := env.Check(v.Name); err != nil {
				val += " (INVALID: want " + env.Accepted(v.Name) + ")"
				invalid = append(invalid, err)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", v.Name, val, v.Default, v.Doc)
		}
		if err := w.Flush(); err != nil {
			return err
		}
		// The table is printed either way; the status says whether every
		// value is usable (5: an invalid one).
		return errors.Join(invalid...)
	},
}

func init() {
	envCmd.Flags().BoolVar(&envMarkdown, "markdown", false, "print the table as docs/environment.md")
	rootCmd.AddCommand(envCmd)
}
