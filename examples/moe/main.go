// Command moe is an expert-parallel MoE layer (dispatch, expert, combine)
// written against weft's device API (channels.ConnectDevice, weft_gin.h).
//
// Each rank holds -tokens bfloat16 rows of -hidden values; every token goes
// to -topk of -experts experts, -experts/n per rank, chosen from -seed so
// that ranks receive different numbers of rows. Dispatch sends each routed
// row to its expert's rank (count and experts first, then the rows, into a
// receive region per source rank), each expert multiplies its rows by a
// per-expert constant, combine returns them and every rank forms the
// gate-weighted sum per token. The output is compared bit for bit with a
// host reference (inputs are small integers and weights powers of two, so
// float32 sums are exact and rounded once).
//
// On a GPU backend the kernels are moe.cu, compiled at run time; the same
// exchange is then timed with NCCL's grouped ncclSend/ncclRecv in the same
// run. On hal/host the kernels are the Go code of host.go. Start one
// process per GPU with -n (this command re-executes itself) or under a
// launcher (mpirun, srun, torchrun, weft run):
//
//	go run ./examples/moe -n 2 -tokens 4096 -hidden 7168 -topk 8 -experts 64 [-port]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	_ "github.com/weftccl/weft/backends" // registers every backend (one list for all binaries)
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/sysnccl"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "moe:", err)
		os.Exit(1)
	}
}

type options struct {
	c             Config
	port          bool
	halName       string
	warmup, iters int
	baseline      bool
	check         bool
	ordinal       int
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("moe", flag.ContinueOnError)
	var o options
	var seed uint64
	nproc := fs.Int("n", 2, "number of ranks (processes) to start when not under a launcher")
	fs.IntVar(&o.c.Tokens, "tokens", 4096, "tokens per rank")
	fs.IntVar(&o.c.Hidden, "hidden", 7168, "hidden size (bfloat16 values per row; a multiple of 8)")
	fs.IntVar(&o.c.TopK, "topk", 8, "experts per token")
	fs.IntVar(&o.c.Experts, "experts", 64, "experts in all (a multiple of the number of ranks)")
	fs.IntVar(&o.c.Capacity, "capacity", 0, "rows a rank may send to one rank (0: tokens × topk)")
	fs.IntVar(&o.c.BlocksPerPeer, "blocks", 0, "thread blocks per peer for dispatch and expert (0: 64 / ranks)")
	fs.Uint64Var(&seed, "seed", 1, "routing and data seed")
	fs.BoolVar(&o.port, "port", false, "reach every peer through the port-mapped path (copy engines) even over memory-mapped links")
	fs.StringVar(&o.halName, "hal", "", "HAL backend (default: the first available)")
	fs.IntVar(&o.warmup, "warmup", 5, "untimed iterations (the first is checked)")
	fs.IntVar(&o.iters, "iters", 20, "timed iterations")
	fs.BoolVar(&o.baseline, "nccl", true, "time the same exchange with NCCL (GPU backends)")
	fs.BoolVar(&o.check, "check", true, "compare the output with the host reference")
	fs.IntVar(&o.ordinal, "ordinal", -1, "device ordinal of every rank (-1: the rank's local rank); ranks may share a GPU")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.c.Seed = seed

	launch, inJob, err := bootstrap.FromEnv()
	if err != nil {
		return err
	}
	if !inJob && *nproc > 1 {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		return bootstrap.Run(ctx, *nproc, append([]string{exe}, os.Args[1:]...), nil, os.Stdout, os.Stderr)
	}
	var boot bootstrap.Bootstrap
	localRank, jobID := 0, fmt.Sprintf("moe-%d", os.Getpid())
	if inJob {
		if boot, err = launch.Connect(ctx); err != nil {
			return err
		}
		localRank, jobID = launch.LocalRank, launch.ID.JobName() // not the magic: it names /dev/shm files
	} else {
		boot = bootstrap.NewLocal(1)[0]
	}
	defer boot.Close()
	if boot.Rank() != 0 {
		stdout = io.Discard
	}
	o.c.NRanks = boot.Size()
	if o.c.BlocksPerPeer == 0 {
		o.c.BlocksPerPeer = max(1, 64/o.c.NRanks)
	}
	return runRank(ctx, boot, localRank, jobID, o, stdout)
}

func runRank(ctx context.Context, boot bootstrap.Bootstrap, localRank int, jobID string, o options, stdout io.Writer) (err error) {
	c, rank := o.c, boot.Rank()
	name := o.halName
	if name == "" {
		if name, _, err = hal.Auto(); err != nil {
			return err
		}
	}
	if name != "host" && env.String("WEFT_NVLS") != "1" {
		os.Setenv("NCCL_NVLS_ENABLE", "0") // architecture.md §8
	}
	if o.ordinal >= 0 {
		localRank = o.ordinal
	}
	dev, err := hal.Open(name, hal.Config{Ordinal: localRank, Rank: rank, JobID: jobID})
	if err != nil {
		return err
	}
	defer dev.Close()
	l := c.layout()
	win, err := dev.Alloc(l.Bytes)
	if err != nil {
		return fmt.Errorf("rank %d: window of %d bytes: %w", rank, l.Bytes, err)
	}
	defer win.Free()
	comm, err := channels.ConnectDevice(ctx, boot, dev, nil, win, nSignals, channels.DeviceOptions{ForcePort: o.port})
	if err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, boot.Barrier(ctx), comm.Close())
	}()
	rt, err := Route(c, rank)
	if err != nil {
		return err
	}
	x := Tokens(c, rank)
	var want []uint16
	if o.check {
		want = Reference(c, rt, x)
	}
	// Rows every rank sends here (NCCL's receives need their sizes).
	recvCounts := make([]int, c.NRanks)
	for s := range recvCounts {
		rs, err := Route(c, s)
		if err != nil {
			return err
		}
		recvCounts[s] = rs.Counts[rank]
	}
	modes := map[channels.PeerMode]int{}
	for r, m := range comm.Modes {
		if r != rank {
			modes[m]++
		}
	}
	fmt.Fprintf(stdout, "# moe: %d ranks on %s (%s), %d tokens × %d hidden bf16 per rank, top-%d of %d experts, %d blocks per peer, window %.1f MiB\n",
		c.NRanks, name, dev.Info().Name, c.Tokens, c.Hidden, c.TopK, c.Experts, c.BlocksPerPeer, float64(l.Bytes)/(1<<20))
	fmt.Fprintf(stdout, "# rank 0 peers: %v; rows rank 0 sends to each rank: %v\n", modes, rt.Counts)

	var offRank int64 // rows this rank sends to other ranks in one step (dispatch + combine)
	for r := 0; r < c.NRanks; r++ {
		if r != rank {
			offRank += int64(rt.Counts[r] + recvCounts[r])
		}
	}
	offBytes := offRank * l.R

	type result struct {
		Impl  string
		Time  time.Duration
		Check string
	}
	var results []result
	mode := "memory"
	if o.port {
		mode = "port"
	}
	if _, ok := dev.(hal.KernelCompiler); !ok {
		// hal/host: the Go kernels of host.go, timed by the wall clock.
		h := &hostLayer{c: c, l: l, comm: comm, rt: rt, x: x, out: make([]uint16, c.Tokens*c.Hidden)}
		var epoch uint64
		var start time.Time
		for i := 0; i < o.warmup+o.iters; i++ {
			if i == o.warmup {
				start = time.Now()
			}
			epoch++
			if err := h.Step(epoch); err != nil {
				return err
			}
			if i == 0 && want != nil {
				if n := countWrong(want, h.out); n != 0 {
					return fmt.Errorf("rank %d: %d output values differ from the reference", rank, n)
				}
			}
		}
		results = append(results, result{Impl: "weft device API (Go, " + mode + ")", Time: time.Since(start) / time.Duration(max(o.iters, 1))})
	} else {
		g, err := newGPULayer(c, dev, comm, rt, recvCounts, x)
		if err != nil {
			return err
		}
		defer g.Close()
		var epoch uint64
		d, err := g.run(&epoch, o.warmup, o.iters, nil, want)
		if err != nil {
			return err
		}
		results = append(results, result{Impl: "weft device API (" + mode + ")", Time: d})
		if o.baseline {
			if err := boot.Barrier(ctx); err != nil {
				return err
			}
			nc, version, err := ncclComm(ctx, boot, dev)
			if err != nil {
				fmt.Fprintf(stdout, "# NCCL baseline skipped: %v\n", err)
			} else {
				defer nc.Destroy()
				d, err := g.run(&epoch, o.warmup, o.iters, nc, want)
				if err != nil {
					return fmt.Errorf("NCCL baseline: %w", err)
				}
				results = append(results, result{Impl: version + " grouped send/recv", Time: d})
			}
		}
	}
	// Report the slowest rank's time per implementation.
	times := make([]int64, len(results))
	for i, r := range results {
		times[i] = int64(r.Time)
	}
	blob, _ := json.Marshal(times)
	all, err := boot.AllGather(ctx, blob)
	if err != nil {
		return err
	}
	for _, b := range all {
		var ts []int64
		if err := json.Unmarshal(b, &ts); err != nil || len(ts) != len(times) {
			return fmt.Errorf("rank %d: malformed times from a peer: %s", rank, b)
		}
		for i := range ts {
			times[i] = max(times[i], ts[i])
		}
	}
	check := "not checked"
	if want != nil {
		check = "exact"
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "implementation\tdispatch+combine (us)\toff-rank GB/s (rank 0)\toutput\t")
	for i, r := range results {
		us := float64(times[i]) / 1e3
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%s\t\n", r.Impl, us, float64(offBytes)/us/1e3, check)
	}
	return tw.Flush()
}

// ncclComm initialises an NCCL communicator on dev through the bootstrap
// (rank 0's ncclUniqueId broadcast to the others).
func ncclComm(ctx context.Context, boot bootstrap.Bootstrap, dev hal.Device) (*sysnccl.Comm, string, error) {
	cu, ok := dev.(interface{ Context() uintptr })
	if !ok {
		return nil, "", fmt.Errorf("backend %s is not CUDA: %w", dev.Info().Backend, hal.ErrNotSupported)
	}
	// Every rank learns whether NCCL loads, so that all take the same path.
	loadErr := sysnccl.Load()
	ok1 := []byte{1}
	if loadErr != nil {
		ok1[0] = 0
	}
	all, err := boot.AllGather(ctx, ok1)
	if err != nil {
		return nil, "", err
	}
	for r, b := range all {
		if len(b) != 1 || b[0] != 1 {
			if loadErr == nil {
				loadErr = fmt.Errorf("rank %d cannot load NCCL", r)
			}
			return nil, "", loadErr
		}
	}
	var id sysnccl.UniqueID
	if boot.Rank() == 0 {
		if id, err = sysnccl.GetUniqueID(); err != nil {
			return nil, "", err
		}
	}
	b, err := boot.Broadcast(ctx, 0, id[:])
	if err != nil {
		return nil, "", err
	}
	copy(id[:], b)
	c, err := sysnccl.CommInitRank(cu.Context(), boot.Size(), id, boot.Rank())
	if err != nil {
		return nil, "", err
	}
	v, _ := sysnccl.Version()
	return c, "nccl " + sysnccl.VersionString(v), nil
}
