package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/check"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/env"
)

// benchOptions are the flags of `weft bench`, named as in nccl-tests.
type benchOptions struct {
	minBytes, maxBytes string
	factor             int
	stepBytes          string
	warmup, iters      int
	check              int
	graphs             int
	dtype, op          string
	nproc              int
	hal                string
	jsonFile           string
	baseline           string
	blocks, threads    int
	unroll             int
	llMax              string
	pushWindow         string
	root               int
	blocking           int
	raw                bool
	tune               bool
	tuneFile           string
	tuneCandidates     string
	timeBudget         time.Duration
	plotFile           string
}

var benchOpts benchOptions

var benchCmd = &cobra.Command{
	Use:   "bench <collective> [flags]",
	Short: "benchmark a collective the way nccl-tests does, optionally beside NCCL",
	Long: `bench runs a collective over a range of message sizes and prints, for each
size, the time and bandwidth of out-of-place and in-place runs and the number
of wrong elements, as nccl-tests does. The collective is one of all_reduce,
all_gather, reduce_scatter, broadcast, reduce, alltoall and sendrecv
(nccl-tests' names; allreduce, allgather, … also work).

Sizes, columns and bus-bandwidth factors are nccl-tests': the size is the
largest buffer of a rank (for all_gather, reduce_scatter and alltoall the
n×count buffer, each rank's share a multiple of 16 bytes), count is NCCL's
count argument, algbw = size / time and busbw = algbw × 2(n−1)/n for
all_reduce, × (n−1)/n for all_gather, reduce_scatter and alltoall, × 1 for
broadcast, reduce and sendrecv. In place is NCCL's definition for each
collective (all_gather sends from its own slot of the receive buffer,
reduce_scatter receives into its own slot of the send buffer, alltoall and
the others use one buffer); a call an implementation does not take shows
N/A. sendrecv is a ring: every rank
sends to rank+1 and receives from rank−1 in one group. -r picks the root
of broadcast and reduce.

Every element is checked exactly: inputs are built from rank and index so
the result is exact in every data type. all_reduce runs through the
zero-copy Comm.AllReduce (its plans and where they came from, defaults,
WEFT_ALLREDUCE or a tuning file, are listed in the header); --raw, and
every other collective, runs through Comm.Launch. A last column names the
plan that served each size.

With --nproc N it starts N processes, one per device (as mpirun would);
without it, one per device of the backend and at least 2 (hal/host: 2), so
that the default run measures a collective between ranks. Under mpirun,
srun or torchrun it joins the job that the launcher started. A bad flag,
backend or rank count (1 to 8) exits with status 5 before any process
starts. With
--baseline nccl every size is also run through the system's libnccl.so.2 on
the same buffers, streams and ranks, and a ratio column compares the two.`,
	Example: `  weft bench allreduce -b 8 -e 1G -f 4 --nproc 2 --baseline nccl
  weft bench all_gather -b 1K -e 64M -f 4 -G 20 --nproc 2
  weft bench reduce -r 1 -d bfloat16 -o max --nproc 4 --hal host`,
	Args:      cobra.ExactArgs(1),
	ValidArgs: []string{"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv", "allreduce"},
	RunE:      runBench,
}

func init() {
	f := benchCmd.Flags()
	o := &benchOpts
	f.StringVarP(&o.minBytes, "minbytes", "b", "8", "smallest message size in bytes (suffixes K, M, G)")
	f.StringVarP(&o.maxBytes, "maxbytes", "e", "32M", "largest message size in bytes (suffixes K, M, G)")
	f.IntVarP(&o.factor, "stepfactor", "f", 2, "multiply the size by this factor from one step to the next")
	f.StringVarP(&o.stepBytes, "stepbytes", "i", "", "add this many bytes from one step to the next (instead of -f)")
	f.IntVarP(&o.warmup, "warmup_iters", "w", 5, "warm-up iterations per size")
	f.IntVarP(&o.iters, "iters", "n", 20, "timed iterations per size")
	f.IntVarP(&o.check, "check", "c", 1, "check results: 1 checks every element, 0 skips")
	f.IntVarP(&o.graphs, "cudagraph", "G", 0, "capture the timed iterations in a graph and replay it this many times (0: plain launches)")
	f.StringVarP(&o.dtype, "datatype", "d", "float", "data type: int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2")
	f.StringVarP(&o.op, "op", "o", "sum", "reduction: sum, prod, max, min, avg, premulsum")
	f.IntVarP(&o.root, "root", "r", 0, "root rank of broadcast and reduce")
	f.IntVarP(&o.blocking, "blocking", "z", 0, "1: wait for every call to complete before the next (nccl-tests' -z)")
	f.BoolVar(&o.raw, "raw", false, "all_reduce through Comm.Launch instead of the zero-copy Comm.AllReduce")
	f.IntVar(&o.nproc, "nproc", 0, "processes (ranks) to start, one per device (0: one per device of the backend, at least 2; ignored under mpirun, srun or torchrun)")
	f.StringVar(&o.hal, "hal", "", "HAL backend (default: WEFT_HAL, else the first available of nvlink, xgmi, pcie, host)")
	f.StringVarP(&o.jsonFile, "output_file", "J", "", "also write results as JSON (nccl-tests keys) to this file")
	f.StringVar(&o.baseline, "baseline", "", "measure a baseline in the same run: nccl")
	f.IntVar(&o.blocks, "blocks", 0, "thread blocks of bandwidth-bound plans (0: default for the device)")
	f.IntVar(&o.threads, "threads", 0, "threads per block (0: default for the device)")
	f.IntVar(&o.unroll, "unroll", 0, "16-byte vectors per thread per step in bandwidth-bound plans (0: default)")
	f.StringVar(&o.llMax, "ll-max", "", "largest message of the LL (1PA) AllReduce (0: default)")
	f.BoolVar(&o.tune, "tune", false, "all_reduce: measure every candidate plan and launch shape at every size, choose AllReduce tiers, check them beside the defaults (and --baseline), and write them to the tuning file")
	f.StringVar(&o.tuneFile, "tune-file", "", "tuning file --tune writes (default: WEFT_TUNING_FILE, else $XDG_CONFIG_HOME/weft/tuning.json)")
	f.StringVar(&o.tuneCandidates, "tune-candidates", "", "--tune: measure only these plans, comma-separated tier names without bounds (e.g. 1pa-LL16-1x1024,2pa-64x1024-u4)")
	f.StringVar(&o.pushWindow, "push-window", "", "use the store-only 2PA above 16 MB with windows of this many bytes per chunk (e.g. 8M; default: the read-based 2PA)")
	f.DurationVar(&o.timeBudget, "time-budget", time.Second, "cut the timed iterations (then graph replays) of a measurement so that they take about this long at most, from the warm-up calls' time (0: always -n × -G; needs -w ≥ 2); cut rows are named in '# cut' lines")
	f.StringVar(&o.plotFile, "plot", "", "also draw busbw and time against size, weft and the baseline, to this SVG file (see weft plot)")
	rootCmd.AddCommand(benchCmd)
}

// parseSize reads sizes as nccl-tests does (algorithms.ParseSize: a
// number with an optional K, M or G suffix, powers of 1024); errors wrap
// ErrInvalidArgument.
func parseSize(s string) (int64, error) {
	v, err := algorithms.ParseSize(s)
	if err != nil {
		return 0, fmt.Errorf("%v: %w", err, hal.ErrInvalidArgument)
	}
	return v, nil
}

// benchConfig is the validated form of the flags.
type benchConfig struct {
	collective    string // the name as given, lower case without underscores ("allreduce")
	coll          algorithms.Collective
	root          int
	blocking      bool
	raw           bool
	scalar        uint64 // PreMulSum multiplier
	sizes         []int64
	minB, maxB    int64
	warmup, iters int
	check         bool
	graphs        int
	dtype         plan.DataType
	op            plan.RedOp
	halName       string
	jsonFile      string
	baseline      string
	blocks        int
	threads       int
	unroll        int
	llMax         int64
	pushWindow    int64
	stepFactor    int
	stepBytes     int64
	// --tune: sweep AllReduce plans and write the tuning file (tune.go).
	tune           bool
	tuneFile       string
	tuneCandidates string
	// timeBudget bounds the timed calls of one measurement (benchrun.go's
	// measure; 0: -n × -G always); plotFile is --plot's SVG (plot.go).
	timeBudget time.Duration
	plotFile   string
}

func (o *benchOptions) validate(coll string) (*benchConfig, error) {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("bench: %s: %w", fmt.Sprintf(f, a...), hal.ErrInvalidArgument)
	}
	c := &benchConfig{collective: strings.ReplaceAll(strings.ToLower(coll), "_", ""), warmup: o.warmup, iters: o.iters,
		check: o.check != 0, graphs: o.graphs, halName: o.hal, jsonFile: o.jsonFile, baseline: o.baseline, blocks: o.blocks, threads: o.threads, unroll: o.unroll,
		stepFactor: o.factor, root: o.root, blocking: o.blocking != 0, raw: o.raw, timeBudget: o.timeBudget, plotFile: o.plotFile}
	var err error
	if c.coll, err = algorithms.ParseCollective(coll); err != nil {
		return nil, bad("%v", err)
	}
	if o.root < 0 {
		return nil, bad("-r %d: want a rank", o.root)
	}
	if c.minB, err = parseSize(o.minBytes); err != nil {
		return nil, err
	}
	if c.maxB, err = parseSize(o.maxBytes); err != nil {
		return nil, err
	}
	if c.maxB < c.minB {
		return nil, bad("-e %d is smaller than -b %d", c.maxB, c.minB)
	}
	if o.stepBytes != "" {
		if c.stepBytes, err = parseSize(o.stepBytes); err != nil || c.stepBytes == 0 {
			return nil, bad("-i %q: want a positive size", o.stepBytes)
		}
	} else if o.factor < 2 {
		return nil, bad("-f %d: the step factor must be at least 2", o.factor)
	}
	if o.warmup < 0 || o.iters < 1 || o.graphs < 0 {
		return nil, bad("-w %d -n %d -G %d: want -w ≥ 0, -n ≥ 1, -G ≥ 0", o.warmup, o.iters, o.graphs)
	}
	if c.dtype, err = plan.ParseDataType(o.dtype); err != nil {
		return nil, bad("-d %q: %v", o.dtype, err)
	}
	if c.op, err = plan.ParseRedOp(o.op); err != nil {
		return nil, bad("-o %q: %v", o.op, err)
	}
	if c.op == plan.PreMulSum {
		c.scalar = premulScalar(c.op, c.dtype, 0) // rank 0's; each rank passes its own (premulScalar)
	}
	if o.nproc < 0 {
		return nil, bad("--nproc %d: want at least 1 (0: one per device, at least 2)", o.nproc)
	}
	switch c.baseline {
	case "", "nccl":
	default:
		return nil, bad("--baseline %q: the only baseline is nccl", c.baseline)
	}
	if o.llMax != "" {
		if c.llMax, err = parseSize(o.llMax); err != nil {
			return nil, err
		}
	}
	if o.pushWindow != "" {
		if c.pushWindow, err = parseSize(o.pushWindow); err != nil || c.pushWindow%16 != 0 || c.pushWindow == 0 {
			return nil, bad("--push-window %q: want a positive multiple of 16 bytes", o.pushWindow)
		}
	}
	if o.tune || o.tuneFile != "" || o.tuneCandidates != "" {
		if err := o.validateTune(c); err != nil {
			return nil, err
		}
	}
	es := int64(c.dtype.Size())
	for s := c.minB; s <= c.maxB; {
		c.sizes = append(c.sizes, s/es*es)
		if c.stepBytes > 0 {
			s += c.stepBytes
		} else {
			if s == 0 {
				s = 1
			}
			s *= int64(c.stepFactor)
		}
	}
	return c, nil
}

// validateTune checks the --tune flags and fills c's tuning fields.
func (o *benchOptions) validateTune(c *benchConfig) error {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("bench: %s: %w", fmt.Sprintf(f, a...), hal.ErrInvalidArgument)
	}
	switch {
	case !o.tune:
		return bad("--tune-file and --tune-candidates go with --tune")
	case c.coll != algorithms.AllReduce || c.raw:
		return bad("--tune tunes the zero-copy all_reduce (without --raw); %s has no tiers", c.coll)
	case o.blocks > 0 || o.threads > 0 || o.unroll > 0 || o.llMax != "" || o.pushWindow != "":
		return bad("--tune chooses the launch shapes itself; leave --blocks, --threads, --unroll, --ll-max and --push-window out (--tune-candidates restricts the search)")
	case !c.check:
		return bad("--tune checks every candidate's results; -c 0 is not allowed with it")
	}
	c.tune, c.tuneFile, c.tuneCandidates = true, o.tuneFile, o.tuneCandidates
	if c.tuneFile == "" {
		c.tuneFile, _ = weft.TuningFile()
		if c.tuneFile == "" {
			return bad("WEFT_TUNING_FILE=off and no --tune-file: name the file to write")
		}
	}
	return nil
}

func runBench(cmd *cobra.Command, args []string) error {
	cfg, err := benchOpts.validate(args[0])
	if err != nil {
		return err
	}
	nproc, err := jobRanks("bench", benchOpts.nproc, cfg.halName, []algorithms.Collective{cfg.coll})
	if err != nil {
		return err
	}
	if err := benchCheckRoom(args[0], cfg, nproc); err != nil {
		return err
	}
	job, err := joinJob(cmd, "bench", nproc)
	if job == nil || err != nil {
		return err
	}
	defer job.boot.Close()
	return benchRank(job.ctx, cfg, job.boot, job.localRank, job.jobID, job.out)
}

func bootTimeout() time.Duration {
	d, err := env.Duration("WEFT_BOOTSTRAP_TIMEOUT", 60*time.Second)
	if err != nil {
		return 60 * time.Second
	}
	return d
}

// premulScalar is the PreMulSum scalar rank passes for type t
// (check.PreMulScalar): a different one on each rank, as
// ncclRedOpCreatePreMulSum allows, so that the exact check catches a rank's
// input scaled by another rank's scalar. 0 for other operators.
func premulScalar(op plan.RedOp, t plan.DataType, rank int) uint64 {
	if op != plan.PreMulSum {
		return 0
	}
	return check.PreMulScalar(t, rank)
}
