package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// T is one rank's view of a running test: its rank, bootstrap and device,
// and helpers that allocate and connect resources and release them, in
// reverse order, when the body returns.
type T struct {
	// Rank and Size are this rank and the number of ranks of the test.
	Rank, Size int
	// Boot connects the ranks of the test.
	Boot bootstrap.Bootstrap
	// Dev is this rank's device.
	Dev hal.Device
	// Backend is the name of the backend under test.
	Backend string
	// Link is, in Pairs mode, the ranks of the run that play ranks 0 and 1
	// of this test (for figure names); otherwise {Rank, Rank}.
	Link [2]int
	// Processes is true when the ranks are separate processes.
	Processes bool

	ctx      context.Context
	cfg      *config
	figures  []Figure
	cleanups []func() error
	streams  []hal.Stream
	copier   *copier
	stage    hal.Buffer    // Peek and Poke's staging buffer (staging)
	netJob   string        // job id of the network's NetDevices (cfg.net)
	nd       hal.NetDevice // opened by openNet
	ep       hal.Endpoint  // the device's endpoint with nd's address
}

// config is what the runner passes to every rank of every test.
type config struct {
	timeout time.Duration // device-side wait deadline
	quick   bool
	net     string // the network the port-mapped tests run over; "" for none
}

// notSupported is the error of T.NotSupported.
type notSupported struct{ reason string }

func (e *notSupported) Error() string { return "not supported: " + e.reason }

// NotSupported returns an error that makes the test NotSupported, not
// Fail: the backend legitimately lacks what the test needs (for example an
// optional interface such as hal.GraphCapturer).
func (t *T) NotSupported(format string, a ...any) error {
	return &notSupported{fmt.Sprintf(format, a...)}
}

// Errorf returns an error naming this rank.
func (t *T) Errorf(format string, a ...any) error {
	return fmt.Errorf("rank %d: %w", t.Rank, fmt.Errorf(format, a...))
}

// Context is the test's context; bootstrap calls use it.
func (t *T) Context() context.Context { return t.ctx }

// Timeout is the device-side wait deadline to pass in plan.Args.
func (t *T) Timeout() time.Duration { return t.cfg.timeout }

// Quick reports whether the run is a quick one (CI): the largest sizes and
// longest measurements are left out.
func (t *T) Quick() bool { return t.cfg.quick }

// Figure records a measured figure for the report; tests record each figure
// on one rank only.
func (t *T) Figure(f Figure) { t.figures = append(t.figures, f) }

// Cleanup registers f to run when the test body has returned, after every
// stream of the test is synchronised; cleanups run in reverse order.
func (t *T) Cleanup(f func() error) { t.cleanups = append(t.cleanups, f) }

// Barrier waits for every rank of the test.
func (t *T) Barrier() error {
	if err := t.Boot.Barrier(t.ctx); err != nil {
		return t.Errorf("barrier: %w", err)
	}
	return nil
}

// AllGather exchanges data with every rank.
func (t *T) AllGather(data []byte) ([][]byte, error) {
	all, err := t.Boot.AllGather(t.ctx, data)
	if err != nil {
		return nil, t.Errorf("all-gather: %w", err)
	}
	return all, nil
}

// Stream creates a stream, closed after the test.
func (t *T) Stream() (hal.Stream, error) {
	s, err := t.Dev.NewStream()
	if err != nil {
		return nil, t.Errorf("new stream: %w", err)
	}
	t.streams = append(t.streams, s)
	return s, nil
}

// PrepareStream prepares p for raw bytes (plan.Uint8) and opens a stream
// to launch it on: the two steps every data test takes after its setup.
func (t *T) PrepareStream(p *plan.Plan, res *channels.Resources) (hal.Program, hal.Stream, error) {
	prog, err := t.Prepare(p, res, plan.Uint8)
	if err != nil {
		return nil, nil, err
	}
	s, err := t.Stream()
	if err != nil {
		return nil, nil, err
	}
	return prog, s, nil
}

// Sync synchronises s with a deadline of the wait deadline plus a margin.
func (t *T) Sync(s hal.Stream) error {
	if err := s.Synchronize(time.Now().Add(t.cfg.timeout + 30*time.Second)); err != nil {
		return t.Errorf("synchronize: %w", err)
	}
	return nil
}

// Alloc allocates device memory, freed after the test.
func (t *T) Alloc(n int64) (hal.Buffer, error) {
	b, err := t.Dev.Alloc(n)
	if err != nil {
		return nil, t.Errorf("alloc %d bytes: %w", n, err)
	}
	t.Cleanup(b.Free)
	return b, nil
}

// Write writes data into b at off.
func (t *T) Write(b hal.Buffer, off int64, data []byte) error {
	if err := t.Dev.Write(b, off, data); err != nil {
		return t.Errorf("write %d bytes at %d: %w", len(data), off, err)
	}
	return nil
}

// Read reads n bytes of b at off.
func (t *T) Read(b hal.Buffer, off, n int64) ([]byte, error) {
	out := make([]byte, n)
	if err := t.Dev.Read(out, b, off); err != nil {
		return nil, t.Errorf("read %d bytes at %d: %w", n, off, err)
	}
	return out, nil
}

// Setup allocates and connects the resources of p (channels.Setup); they
// are released after the test.
func (t *T) Setup(p *plan.Plan, scratchBytes int64, initialLaunch uint64) (*channels.Resources, error) {
	res, err := channels.Setup(t.ctx, t.Boot, t.Dev, p, scratchBytes, initialLaunch)
	if err != nil {
		return nil, t.Errorf("%w", err)
	}
	t.Cleanup(res.Close)
	return res, nil
}

// SetupLocal sets up a one-rank plan (no channels) on this device alone,
// with a bootstrap of its own.
func (t *T) SetupLocal(p *plan.Plan) (*channels.Resources, error) {
	boot := bootstrap.NewLocal(1)[0]
	t.Cleanup(boot.Close)
	res, err := channels.Setup(t.ctx, boot, t.Dev, p, 0, 0)
	if err != nil {
		return nil, t.Errorf("%w", err)
	}
	t.Cleanup(res.Close)
	return res, nil
}

// Register maps buf on every rank (channels.Register); collective.
func (t *T) Register(buf hal.Buffer) (*channels.Registration, error) {
	reg, err := channels.Register(t.ctx, t.Boot, t.Dev, buf)
	if err != nil {
		return nil, t.Errorf("%w", err)
	}
	t.Cleanup(reg.Close)
	return reg, nil
}

// Prepare readies p, bound to res, for one data type (operator Sum).
func (t *T) Prepare(p *plan.Plan, res *channels.Resources, dt plan.DataType) (hal.Program, error) {
	ex, ok := t.Dev.(hal.Executor)
	if !ok {
		return nil, t.Errorf("backend %s does not implement hal.Executor: channel plans cannot run on it", t.Backend)
	}
	prog, err := ex.Prepare(hal.PlanSpec{Plan: p, Bindings: res.Bindings, DataType: dt, RedOp: plan.Sum, Library: channels.DeviceLibrary()})
	if err != nil {
		return nil, t.Errorf("prepare %s: %w", p.Name, err)
	}
	t.Cleanup(prog.Close)
	return prog, nil
}

// Launch enqueues one execution of prog on s.
func (t *T) Launch(prog hal.Program, s hal.Stream, a *plan.Args) error {
	if a.Timeout == 0 {
		a.Timeout = t.cfg.timeout
	}
	if err := prog.Launch(s, a); err != nil {
		return t.Errorf("launch: %w", err)
	}
	return nil
}

// Finish synchronises s and returns the failure the launches recorded in
// res's control block, if any.
func (t *T) Finish(s hal.Stream, res *channels.Resources) error {
	if err := t.Sync(s); err != nil {
		return err
	}
	if err := res.Check(); err != nil {
		return t.Errorf("%w", err)
	}
	return nil
}

// copyPlan is a one-rank plan of blocks × threads that copies Count bytes
// (plan.Uint8) from Input to Output.
func copyPlan(name string, blocks, threads int) *plan.Plan {
	return &plan.Plan{Name: name, NRanks: 1, Threads: threads,
		Groups: []plan.Group{{Blocks: blocks, Ops: []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, plan.L(plan.Input))}}}}
}

// copier copies bytes between any two addresses of the device with a
// one-rank plan, so that tests can read and write memory they only know by
// address (a plan's semaphores, expected values and scratch).
type copier struct {
	res  *channels.Resources
	prog hal.Program
	s    hal.Stream
}

func (t *T) copy(dst, src uint64, n int64) error {
	if n == 0 {
		return nil
	}
	if t.copier == nil {
		p := copyPlan("conformance-copy", 1, 256)
		res, err := t.SetupLocal(p)
		if err != nil {
			return err
		}
		prog, s, err := t.PrepareStream(p, res)
		if err != nil {
			return err
		}
		t.copier = &copier{res: res, prog: prog, s: s}
	}
	c := t.copier
	if err := t.Launch(c.prog, c.s, &plan.Args{Count: n, Input: src, Output: dst}); err != nil {
		return err
	}
	return t.Finish(c.s, c.res)
}

// Peek reads n bytes at a device address by copying them, on the device,
// into a buffer that is then read back.
func (t *T) Peek(addr uint64, n int64) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	b, err := t.staging(n)
	if err != nil {
		return nil, err
	}
	if err := t.copy(b.Addr(), addr, n); err != nil {
		return nil, err
	}
	return t.Read(b, 0, n)
}

// Poke writes data at a device address by writing it into a buffer that is
// then copied on the device.
func (t *T) Poke(addr uint64, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	b, err := t.staging(int64(len(data)))
	if err != nil {
		return err
	}
	if err := t.Write(b, 0, data); err != nil {
		return err
	}
	return t.copy(addr, b.Addr(), int64(len(data)))
}

// staging returns the test's staging buffer of Peek and Poke, at least n
// bytes. It is freed after the test, never during it: freeing device
// memory synchronises the whole device, so a rank that freed while its
// peer's kernel on the same GPU waited for this rank's next launch would
// stall both until the deadline.
func (t *T) staging(n int64) (hal.Buffer, error) {
	if t.stage == nil || t.stage.Size() < n {
		b, err := t.Alloc(max(n, 64<<10))
		if err != nil {
			return nil, err
		}
		t.stage = b
	}
	return t.stage, nil
}

// rankResult is how one rank's body ended. It crosses process boundaries
// as JSON.
type rankResult struct {
	Rank         int      `json:"rank"`
	Err          string   `json:"err,omitempty"`
	Remote       bool     `json:"remote,omitempty"` // the error is a consequence of another rank's
	NotSupported string   `json:"not_supported,omitempty"`
	Figures      []Figure `json:"figures,omitempty"`
}

// runBody runs c's body on t, then releases t's resources: streams are
// synchronised first, then, when every rank succeeded, the ranks meet at a
// barrier so that nobody frees memory a peer may still access. A rank that
// fails closes its bootstrap so that its peers stop waiting for it.
func runBody(c Case, t *T) (r rankResult) {
	r.Rank = t.Rank
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("rank %d: panic: %v\n%s", t.Rank, p, debug.Stack())
			}
		}()
		if t.cfg.net != "" {
			if err := t.openNet(); err != nil {
				return err
			}
		}
		return c.Run(t)
	}()
	var ns *notSupported
	switch {
	case errors.As(err, &ns):
		r.NotSupported = ns.reason
	case err != nil:
		r.Err = err.Error()
		r.Remote = errors.Is(err, hal.ErrRemote) && !errors.Is(err, hal.ErrTimeout)
	}
	synced := true
	for _, s := range t.streams {
		// Any other error is a launch's sticky error: the stream is idle.
		if e := s.Synchronize(time.Now().Add(t.cfg.timeout + 30*time.Second)); errors.Is(e, hal.ErrTimeout) {
			synced = false
		}
	}
	if err == nil && r.NotSupported == "" {
		if e := t.Boot.Barrier(t.ctx); e != nil {
			r.Err, r.Remote = fmt.Sprintf("rank %d: final barrier: %v", t.Rank, e), true
		}
	}
	if r.Err != "" || r.NotSupported != "" {
		t.Boot.Close()
	}
	if !synced {
		// A device may still use the memory: leak it rather than free it.
		r.Err += fmt.Sprintf(" (rank %d: streams did not drain; resources leaked)", t.Rank)
		return r
	}
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	for _, s := range t.streams {
		s.Close()
	}
	r.Figures = t.figures
	return r
}

// combine turns the ranks' results into one status and message. A failure
// that is a consequence of another rank's (a bootstrap peer that left) is
// reported only when no rank has a first-hand one.
func combine(rs []rankResult) (Status, string, []Figure) {
	var first, remote []string
	var ns string
	var figs []Figure
	for _, r := range rs {
		switch {
		case r.Err != "" && !r.Remote:
			first = append(first, r.Err)
		case r.Err != "":
			remote = append(remote, r.Err)
		case r.NotSupported != "" && ns == "":
			ns = r.NotSupported
		}
		figs = append(figs, r.Figures...)
	}
	msgs := first
	if len(msgs) == 0 && ns == "" {
		// Only consequences of a rank that left: report them. (When a rank
		// found the test not supported and left, they are expected.)
		msgs = remote
	}
	if len(msgs) > 0 {
		m := msgs[0]
		if len(msgs) > 1 {
			m += fmt.Sprintf(" (and %d more ranks failed; next: %s)", len(msgs)-1, firstLine(msgs[1]))
		}
		return Fail, m, figs
	}
	if ns != "" {
		return NotSupported, ns, figs
	}
	return Pass, "", figs
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}

// runGoroutines runs c's body on devs, one goroutine per rank, and waits
// for all of them or the deadline of ctx plus a grace period.
func runGoroutines(ctx context.Context, c Case, backend string, devs []hal.Device, link [2]int, cfg *config) []rankResult {
	n := len(devs)
	boots := bootstrap.NewLocal(n)
	out := make([]rankResult, n)
	netJob := ""
	if cfg.net != "" {
		netJob = jobID("net-" + cfg.net)
	}
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			defer boots[r].Close()
			t := &T{Rank: r, Size: n, Boot: boots[r], Dev: devs[r], Backend: backend, Link: link, ctx: ctx, cfg: cfg, netJob: netJob}
			if link[0] == link[1] {
				t.Link = [2]int{r, r}
			}
			out[r] = runBody(c, t)
		}(r)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	dl, ok := ctx.Deadline()
	if !ok {
		<-done
		return out
	}
	timer := time.NewTimer(time.Until(dl) + cfg.timeout + 30*time.Second)
	defer timer.Stop()
	select {
	case <-done:
		return out
	case <-timer.C:
		for r := range boots {
			boots[r].Close()
		}
		return []rankResult{{Err: "the test did not finish by its deadline; its ranks were abandoned"}}
	}
}
