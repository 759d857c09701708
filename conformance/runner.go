package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
)

// Options configure a conformance run. The zero value tests every
// registered backend with the defaults.
type Options struct {
	// Backend names the one backend to test; "" tests every registered one.
	Backend string
	// Backends, when not empty, are tested instead of the registry's (the
	// suite's own tests pass deliberately broken backends this way); the
	// resolver given to MaybeWorker must then know them by name.
	Backends []hal.Backend
	// Ranks is the number of ranks; 0 means one per device found, at least
	// 2 and at most 4 (a backend that opens any ordinal, like hal/host, gets
	// 4).
	Ranks int
	// Timeout is the device-side wait deadline of the tests' plans; 0 means
	// WEFT_TIMEOUT (10 s). Tests that check the deadline itself use their
	// own, shorter one.
	Timeout time.Duration
	// Quick leaves out the largest sizes (64 MiB) and shortens measurements,
	// for CI on small machines.
	Quick bool
	// Run, when not empty, selects the tests whose ID starts with one of
	// these prefixes ("memory-mapped/", "device/bad-input").
	Run []string
	// Skip leaves out the tests whose ID starts with one of these prefixes.
	Skip []string
	// NoProcesses reports the cross-process tests NotSupported instead of
	// starting processes.
	NoProcesses bool
	// WorkerArgv is the command line prefix that starts a worker process;
	// the runner appends the worker's flags. nil means the current
	// executable followed by WorkerArg, which a binary must handle by
	// calling MaybeWorker early in main or TestMain (the weft CLI does).
	WorkerArgv []string
	// Progress, when not nil, receives a progress bar (pass a terminal).
	Progress io.Writer
	// Require lists backends (and networks) that must be available and
	// must not skip; nil means WEFT_REQUIRE.
	Require []string
	// Net, when not empty, names a network (hal.LookupNetwork: "socket",
	// "ib") that the port-mapped tests run over: each rank opens it for its
	// device, the ranks exchange their addresses in Endpoint.Net, and the
	// tests take engines and registrations from the NetDevice instead of
	// the device's hal.PortMapped, the ranks being treated as devices of
	// different nodes. The tests of the other sections are NotSupported;
	// every test is NotSupported when the network's Probe says it is
	// unavailable (a failure when Require names the network).
	Net string
}

// Run runs the suite and returns its report. The error is for unusable
// options only (an unknown backend name); a backend that fails its tests is
// a report with failures.
func Run(ctx context.Context, opts Options) (*Report, error) {
	backends := opts.Backends
	if len(backends) == 0 {
		if opts.Backend != "" {
			b, err := hal.Lookup(opts.Backend)
			if err != nil {
				return nil, fmt.Errorf("conformance: %w", err)
			}
			backends = []hal.Backend{b}
		} else {
			backends = hal.Backends()
		}
	} else if opts.Backend != "" {
		var sel []hal.Backend
		for _, b := range backends {
			if b.Name() == opts.Backend {
				sel = append(sel, b)
			}
		}
		if len(sel) == 0 {
			return nil, fmt.Errorf("conformance: backend %q is not among those given: %w", opts.Backend, hal.ErrInvalidArgument)
		}
		backends = sel
	}
	var network hal.Network
	if opts.Net != "" {
		n, err := hal.LookupNetwork(opts.Net)
		if err != nil {
			return nil, fmt.Errorf("conformance: %w", err)
		}
		network = n
	}
	if opts.Ranks < 0 || opts.Ranks > 8 {
		return nil, fmt.Errorf("conformance: %d ranks: want 1 to 8 (0: one per device): %w", opts.Ranks, hal.ErrInvalidArgument)
	}
	require := opts.Require
	if require == nil {
		require = env.List("WEFT_REQUIRE")
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = env.Timeout()
	}
	r := &runner{opts: opts, require: require, cfg: &config{timeout: timeout, quick: opts.Quick, net: opts.Net}, network: network, log: env.Logger("CONF")}
	rep := &Report{SchemaVersion: SchemaVersion, WeftVersion: weftVersion(), Started: time.Now(), Machine: machine(),
		Options: RunOptions{Ranks: opts.Ranks, TimeoutSeconds: timeout.Seconds(), Quick: opts.Quick, Processes: !opts.NoProcesses,
			Run: opts.Run, Require: require, Net: opts.Net}}
	cases := r.selected()
	r.bar = newProgress(opts.Progress, len(cases)*len(backends))
	for _, b := range backends {
		rep.Platforms = append(rep.Platforms, r.platform(ctx, b, cases))
	}
	r.bar.finish()
	rep.Seconds = time.Since(rep.Started).Seconds()
	rep.finish()
	return rep, nil
}

type runner struct {
	opts    Options
	network hal.Network // Options.Net's; nil for none
	require []string
	cfg     *config
	log     *slog.Logger
	bar     *progress
}

var jobSeq atomic.Int64

// jobID names the shared memory of one group of devices.
func jobID(backend string) string {
	return fmt.Sprintf("conf%d-%s-%d", os.Getpid(), sanitize(backend), jobSeq.Add(1))
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

func (r *runner) selected() []Case {
	var out []Case
	for _, c := range Cases() {
		if len(r.opts.Run) > 0 && !hasPrefix(c.ID, r.opts.Run) {
			continue
		}
		if hasPrefix(c.ID, r.opts.Skip) {
			continue
		}
		out = append(out, c)
	}
	return out
}

func hasPrefix(id string, prefixes []string) bool {
	for _, p := range prefixes {
		if p != "" && strings.HasPrefix(id, p) {
			return true
		}
	}
	return false
}

func (r *runner) required(name string) bool {
	for _, b := range r.require {
		if strings.EqualFold(b, name) {
			return true
		}
	}
	return false
}

// platform tests one backend.
func (r *runner) platform(ctx context.Context, b hal.Backend, cases []Case) Platform {
	name := b.Name()
	p := Platform{Backend: name, Required: r.required(name), Devices: []Device{}, Links: []Link{}, Capabilities: []string{}, Results: []Result{}}
	a := b.Probe()
	p.Available, p.Reason = a.Available, a.Reason
	r.log.Info("backend", "name", name, "available", a.Available, "reason", a.Reason)
	skipAll := func(st Status, msg string) Platform {
		for _, c := range cases {
			p.Results = append(p.Results, Result{ID: c.ID, Section: Section(c.Capability), Title: c.Title, Status: st, Message: msg})
			r.bar.step(name, c.ID)
		}
		return p
	}
	if !a.Available {
		if p.Required {
			return skipAll(Fail, fmt.Sprintf("backend %s is required by WEFT_REQUIRE but unavailable: %s", name, a.Reason))
		}
		return skipAll(NotSupported, "backend unavailable: "+a.Reason)
	}
	if r.network != nil {
		net := r.network.Name()
		na := r.network.Probe()
		p.Network, p.NetworkReason = net, na.Reason
		r.log.Info("network", "name", net, "available", na.Available, "reason", na.Reason)
		if r.required(net) {
			p.Required = true
		}
		if !na.Available {
			if r.required(net) {
				return skipAll(Fail, fmt.Sprintf("network %s is required by WEFT_REQUIRE but unavailable: %s", net, na.Reason))
			}
			return skipAll(NotSupported, fmt.Sprintf("network %s unavailable: %s", net, na.Reason))
		}
	}
	job := jobID(name)
	devs, count, err := openDevices(b, r.opts.Ranks, job)
	if err != nil {
		return skipAll(Fail, fmt.Sprintf("open devices: %v", err))
	}
	defer func() {
		for _, d := range devs {
			d.Close()
		}
	}()
	n := len(devs)
	p.Ranks = n
	for rk, d := range devs {
		p.Devices = append(p.Devices, deviceOf(rk, d.Info()))
	}
	caps := hal.CapMemoryMapped | hal.CapPortMapped | hal.CapSwitchMapped
	missing := map[hal.Capability]string{}
	for i := range devs {
		for j := range devs {
			if i == j {
				continue
			}
			l := devs[i].Link(devs[j].Endpoint())
			if r.network != nil {
				// Ranks of different nodes: the devices' own link is not used.
				l = hal.Link{Caps: hal.CapPortMapped, Reason: "network " + r.network.Name() + " (ranks treated as different nodes)"}
			}
			p.Links = append(p.Links, Link{From: i, To: j, Capabilities: capNames(l.Caps), Reason: l.Reason})
			for _, s := range sections {
				if s.cap != 0 && l.Caps&s.cap == 0 && missing[s.cap] == "" {
					why := l.Reason
					if why == "" {
						why = "the backend does not offer it"
					}
					missing[s.cap] = fmt.Sprintf("link %d→%d: %s", i, j, why)
				}
			}
			caps &= l.Caps
		}
	}
	if n < 2 {
		caps = 0
		for _, s := range sections {
			missing[s.cap] = "a single rank has no links"
		}
	}
	p.Capabilities = capNames(caps)
	for _, c := range cases {
		r.bar.step(name, c.ID)
		res := r.runCase(ctx, c, name, devs, count, caps, missing, p.Required)
		r.log.Info("test", "backend", name, "id", c.ID, "status", res.Status, "seconds", res.Seconds, "message", res.Message)
		p.Results = append(p.Results, res)
	}
	sortResults(p.Results)
	return p
}

// openDevices opens one device per rank. The device count is found by
// opening ordinals 0, 1, … until one fails (at most 8); rank r uses
// ordinal r mod count. With ranks == 0, the run has one rank per device,
// at least 2 and at most 4.
func openDevices(b hal.Backend, ranks int, job string) ([]hal.Device, int, error) {
	want := ranks
	if want == 0 {
		want = 4
	}
	var devs []hal.Device
	count := 0
	for ord := 0; ord < max(want, 1); ord++ {
		d, err := b.Open(hal.Config{Ordinal: ord, Rank: ord, JobID: job})
		if err != nil {
			if ord == 0 {
				return nil, 0, fmt.Errorf("%s device 0: %w", b.Name(), err)
			}
			break
		}
		devs = append(devs, d)
		count++
	}
	if ranks == 0 {
		want = max(count, 2)
	}
	for rk := len(devs); rk < want; rk++ {
		d, err := b.Open(hal.Config{Ordinal: rk % count, Rank: rk, JobID: job})
		if err != nil {
			for _, d := range devs {
				d.Close()
			}
			return nil, 0, fmt.Errorf("%s device %d for rank %d: %w", b.Name(), rk%count, rk, err)
		}
		devs = append(devs, d)
	}
	return devs, count, nil
}

func (r *runner) runCase(ctx context.Context, c Case, backend string, devs []hal.Device, count int, caps hal.Capability, missing map[hal.Capability]string, required bool) Result {
	res := Result{ID: c.ID, Section: Section(c.Capability), Title: c.Title}
	n := len(devs)
	skip := func(msg string, hard bool) Result {
		res.Status, res.Message = NotSupported, msg
		if hard && required {
			res.Status, res.Message = Fail, msg+" (the backend is required by WEFT_REQUIRE: a skip is a failure)"
		}
		return res
	}
	switch {
	case r.network != nil && c.Capability != hal.CapPortMapped:
		return skip(fmt.Sprintf("%s: not over a network (--net %s runs the port-mapped tests only)", Section(c.Capability), r.network.Name()), false)
	case c.Capability != 0 && caps&c.Capability == 0:
		return skip(fmt.Sprintf("%s is not offered (%s)", Section(c.Capability), missing[c.Capability]), false)
	case n < c.MinRanks:
		return skip(fmt.Sprintf("needs %d ranks, the run has %d", c.MinRanks, n), true)
	case c.Mode == Processes && r.opts.NoProcesses:
		return skip("cross-process tests are disabled", true)
	}
	limit := 10 * time.Minute
	if r.cfg.quick {
		limit = 3 * time.Minute
	}
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	start := time.Now()
	var rs []rankResult
	switch c.Mode {
	case Goroutines:
		rs = runGoroutines(cctx, c, backend, devs, [2]int{}, r.cfg)
	case Processes:
		rs = r.runProcesses(cctx, c, backend, n, count)
	case Pairs:
		for _, pr := range pairs(n) {
			sub := runGoroutines(cctx, c, backend, []hal.Device{devs[pr[0]], devs[pr[1]]}, pr, r.cfg)
			for i := range sub {
				if sub[i].Err != "" {
					sub[i].Err = fmt.Sprintf("link %d→%d: %s", pr[0], pr[1], sub[i].Err)
				}
			}
			rs = append(rs, sub...)
			if st, _, _ := combine(sub); st == Fail {
				break
			}
		}
	}
	res.Seconds = time.Since(start).Seconds()
	res.Status, res.Message, res.Figures = combine(rs)
	if c.Quality && res.Status == Pass {
		var below []string
		for _, f := range res.Figures {
			if f.Below() {
				below = append(below, f.String())
			}
		}
		if len(below) > 0 {
			res.Status = QualityWarning
			res.Message = "below the floor: " + strings.Join(below, "; ")
		}
	}
	return res
}

// pairs returns the ordered pairs of ranks whose links quality tests
// measure: every pair for up to 4 ranks, else each ring link both ways.
func pairs(n int) [][2]int {
	var out [][2]int
	if n <= 4 {
		for a := range n {
			for b := range n {
				if a != b {
					out = append(out, [2]int{a, b})
				}
			}
		}
		return out
	}
	for a := range n {
		out = append(out, [2]int{a, (a + 1) % n}, [2]int{(a + 1) % n, a})
	}
	return out
}

// resultMarker starts the line on which a worker reports its rank's result.
const resultMarker = "weft-conformance-result "

// runProcesses runs c in n worker processes started through bootstrap.Run
// and collects the result line each prints.
func (r *runner) runProcesses(ctx context.Context, c Case, backend string, n, count int) []rankResult {
	argv := r.opts.WorkerArgv
	if len(argv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return []rankResult{{Err: fmt.Sprintf("cannot start worker processes: %v", err)}}
		}
		argv = []string{exe, WorkerArg}
	}
	argv = append(append([]string(nil), argv...),
		"--backend", backend, "--case", c.ID, "--job", jobID(backend), "--devices", strconv.Itoa(count),
		"--timeout", r.cfg.timeout.String(), "--quick="+strconv.FormatBool(r.cfg.quick))
	if r.cfg.net != "" {
		argv = append(argv, "--net", r.cfg.net, "--net-job", jobID("net-"+r.cfg.net))
	}
	var stdout, stderr bytes.Buffer
	runErr := bootstrap.Run(ctx, n, argv, nil, &stdout, &stderr)
	got := map[int]rankResult{}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "[rank ") {
			if i := strings.Index(line, "] "); i > 0 {
				line = line[i+2:]
			}
		}
		if !strings.HasPrefix(line, resultMarker) {
			continue
		}
		var rr rankResult
		if err := json.Unmarshal([]byte(line[len(resultMarker):]), &rr); err == nil {
			got[rr.Rank] = rr
		}
	}
	out := make([]rankResult, 0, n)
	for rk := range n {
		rr, ok := got[rk]
		if !ok {
			msg := fmt.Sprintf("worker process of rank %d reported no result", rk)
			if runErr != nil {
				msg += ": " + runErr.Error()
			}
			if tail := lastLines(stderr.String(), 12); tail != "" {
				msg += "\nstderr:\n" + tail
			}
			rr = rankResult{Rank: rk, Err: msg}
		}
		out = append(out, rr)
	}
	if runErr != nil && len(got) == n {
		var re *bootstrap.RunError
		if !errors.As(runErr, &re) {
			out = append(out, rankResult{Err: "worker processes: " + runErr.Error()})
		}
	}
	return out
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
