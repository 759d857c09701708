package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/weftccl/weft/conformance"
	"github.com/weftccl/weft/hal"
)

// conformanceOptions are the flags of `weft conformance`.
type conformanceOptions struct {
	hal         string
	ranks       int
	jsonFile    string
	mdFile      string
	quick       bool
	timeout     time.Duration
	run, skip   []string
	noProcesses bool
	net         string
}

var confOpts conformanceOptions

var conformanceCmd = &cobra.Command{
	Use:   "conformance [flags]",
	Short: "run the HAL conformance suite on the registered backends",
	Long: `conformance runs weft's HAL conformance suite: contract tests of every
capability a backend offers on the links between its devices (memory-mapped:
export/import across processes, put/signal/wait, get, flush, LL16 and LL8
packets, LL128 lines where the device carries them, relaxed variants, deadlines, bad input; port-mapped: engine puts,
signals, flushes and copies, the PortChannel API through the proxy, a full
FIFO, deadlines), and quality tests that
compare measured put bandwidth and signal round-trip latency with floors.

Each test ends Pass, Fail, NotSupported (the backend does not offer what it
needs) or QualityWarning (correct but slower than its floor). The command
exits with a non-zero status when any test fails. A backend named in
WEFT_REQUIRE that is unavailable fails instead of being skipped.

With --net socket (or ucx, ib, or plugin with NCCL_NET_PLUGIN set) the port-mapped
tests take their engines and registrations from that network's NetDevice,
opened for each rank's device, instead of the device's own: the ranks are
treated as devices of different nodes. The other sections are NotSupported, and every test is when the
network is unavailable (a failure when WEFT_REQUIRE names the network).

With --json and --md the report is also written as JSON (schema:
docs/conformance/schema.json) and as Markdown. See docs/porting.md.`,
	Args: cobra.NoArgs,
	RunE: runConformance,
}

// conformanceWorkerCmd is how the suite starts the ranks of its
// cross-process tests: the same binary, one process per rank.
var conformanceWorkerCmd = &cobra.Command{
	Use:                conformance.WorkerArg,
	Hidden:             true,
	DisableFlagParsing: true,
	Run: func(cmd *cobra.Command, args []string) {
		os.Exit(conformance.Worker(context.Background(), args, nil, os.Stdout, os.Stderr))
	},
}

func init() {
	f := conformanceCmd.Flags()
	o := &confOpts
	f.StringVar(&o.hal, "hal", "", "backend to test (default: every registered backend)")
	f.IntVar(&o.ranks, "ranks", 0, "number of ranks (0: one per device, at least 2 and at most 4)")
	f.StringVar(&o.jsonFile, "json", "", "write the report as JSON to this file (- for standard output)")
	f.StringVar(&o.mdFile, "md", "", "write the report as Markdown to this file (- for standard output)")
	f.BoolVar(&o.quick, "quick", false, "leave out the largest sizes and shorten measurements (CI)")
	f.DurationVar(&o.timeout, "timeout", 0, "device-side wait deadline of the tests (0: WEFT_TIMEOUT, 10s)")
	f.StringSliceVar(&o.run, "run", nil, "run only tests whose ID starts with one of these prefixes")
	f.StringSliceVar(&o.skip, "skip", nil, "leave out tests whose ID starts with one of these prefixes")
	f.BoolVar(&o.noProcesses, "no-processes", false, "report the cross-process tests NotSupported instead of starting processes")
	f.StringVar(&o.net, "net", "", "run the port-mapped tests over this network (socket, ucx, ib, plugin with NCCL_NET_PLUGIN) between ranks treated as different nodes")
	rootCmd.AddCommand(conformanceCmd, conformanceWorkerCmd)
}

func runConformance(cmd *cobra.Command, _ []string) error {
	o := confOpts
	opts := conformance.Options{Backend: o.hal, Ranks: o.ranks, Timeout: o.timeout, Quick: o.quick, Run: o.run, Skip: o.skip, NoProcesses: o.noProcesses, Net: o.net}
	if term.IsTerminal(int(os.Stderr.Fd())) {
		opts.Progress = os.Stderr
	}
	rep, err := conformance.Run(cmd.Context(), opts)
	if err != nil {
		return err
	}
	if err := rep.WriteText(cmd.OutOrStdout()); err != nil {
		return err
	}
	if err := writeReport(o.jsonFile, rep.WriteJSON); err != nil {
		return err
	}
	if err := writeReport(o.mdFile, rep.WriteMarkdown); err != nil {
		return err
	}
	if rep.Failed() {
		return fmt.Errorf("conformance: %d tests failed", rep.Summary.Fail)
	}
	return nil
}

func writeReport(path string, write func(io.Writer) error) error {
	switch path {
	case "":
		return nil
	case "-":
		return write(os.Stdout)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("conformance: %w: %w", err, hal.ErrSystem)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("conformance: write %s: %w: %w", path, err, hal.ErrSystem)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("conformance: write %s: %w: %w", path, err, hal.ErrSystem)
	}
	return nil
}
