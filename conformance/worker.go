package conformance

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
)

// WorkerArg is the first argument of a worker process: the runner starts
// the cross-process tests as "<executable> WorkerArg --backend … --case …"
// under bootstrap.Run, which gives each process its rank through the
// environment.
const WorkerArg = "__weft-conformance-worker"

// MaybeWorker turns this process into a conformance worker when it was
// started as one (os.Args[1] == WorkerArg): it runs its rank of the test and
// exits. Call it first thing in main or TestMain of any binary that runs
// the suite with processes. resolve finds a backend by name; nil means the
// registry (hal.Lookup).
func MaybeWorker(resolve func(name string) (hal.Backend, error)) {
	if len(os.Args) < 2 || os.Args[1] != WorkerArg {
		return
	}
	os.Exit(Worker(context.Background(), os.Args[2:], resolve, os.Stdout, os.Stderr))
}

// Worker runs one rank of a cross-process test: args are the flags the
// runner appended after WorkerArg; the rank, size and rendezvous come from
// the environment (bootstrap.FromEnv). It prints the rank's result on
// stdout as one line and returns the exit status: 0 when a result was
// printed (whatever the test's outcome), 2 otherwise.
func Worker(ctx context.Context, args []string, resolve func(name string) (hal.Backend, error), stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("conformance worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	backend := fs.String("backend", "", "backend under test")
	id := fs.String("case", "", "test ID")
	job := fs.String("job", "", "job id of the devices (hal.Config.JobID)")
	devices := fs.Int("devices", 1, "number of devices; rank r opens ordinal r mod devices")
	timeout := fs.Duration("timeout", 10*time.Second, "device-side wait deadline")
	quick := fs.Bool("quick", false, "quick run")
	netName := fs.String("net", "", "network the port-mapped tests run over")
	netJob := fs.String("net-job", "", "job id of the network's NetDevices (hal.NetConfig.JobID)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if resolve == nil {
		resolve = hal.Lookup
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "conformance worker: "+format+"\n", a...)
		return 2
	}
	l, ok, err := bootstrap.FromEnv()
	if err != nil {
		return fail("%v", err)
	}
	if !ok {
		return fail("not started by a launcher (no WEFT_RANK or launcher variables)")
	}
	c, ok := lookupCase(*id)
	if !ok {
		return fail("unknown test %q", *id)
	}
	boot, err := l.Connect(ctx)
	if err != nil {
		return fail("rank %d: %v", l.Rank, err)
	}
	defer boot.Close()
	emit := func(r rankResult) int {
		r.Rank = l.Rank
		b, _ := json.Marshal(r)
		fmt.Fprintf(stdout, "%s%s\n", resultMarker, b)
		return 0
	}
	b, err := resolve(*backend)
	if err != nil {
		return emit(rankResult{Err: fmt.Sprintf("rank %d: %v", l.Rank, err)})
	}
	dev, err := b.Open(hal.Config{Ordinal: l.LocalRank % max(*devices, 1), Rank: l.Rank, JobID: *job})
	if err != nil {
		return emit(rankResult{Err: fmt.Sprintf("rank %d: open %s device: %v", l.Rank, *backend, err)})
	}
	defer dev.Close()
	limit := 10 * time.Minute
	if *quick {
		limit = 3 * time.Minute
	}
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	t := &T{Rank: l.Rank, Size: l.Size, Boot: boot, Dev: dev, Backend: *backend, Link: [2]int{l.Rank, l.Rank}, Processes: true,
		ctx: cctx, cfg: &config{timeout: *timeout, quick: *quick, net: *netName}, netJob: *netJob}
	return emit(runBody(c, t))
}
