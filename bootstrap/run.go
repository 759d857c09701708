package bootstrap

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/shm"
)

// GracePeriod is how long Run lets the surviving ranks of a failed job exit
// by themselves (they notice the loss through the bootstrap) before it
// kills them.
const GracePeriod = 30 * time.Second

// RankExit is how one rank of a Run ended.
type RankExit struct {
	Rank   int
	Code   int    // exit status; -1 when killed by a signal
	Signal string // signal that killed the process ("killed", "terminated"), or ""
	Killed bool   // killed by Run: still running after the grace period, or a second SIGINT/SIGTERM
}

func (e RankExit) failed() bool { return e.Code != 0 || e.Signal != "" }

// outcome describes how the rank ended, without naming it.
func (e RankExit) outcome() string {
	switch {
	case e.Killed:
		return "did not exit and was killed by the launcher"
	case e.Signal != "":
		return "killed by signal " + e.Signal
	default:
		return "exited with status " + strconv.Itoa(e.Code)
	}
}

func (e RankExit) String() string { return "rank " + strconv.Itoa(e.Rank) + " " + e.outcome() }

// RunError reports the ranks of a Run that failed: those that exited with
// a non-zero status or were killed. It wraps hal.ErrRemote.
type RunError struct {
	// First is the failed rank whose exit Run saw first. Ranks that fail
	// within milliseconds of each other (a rank dies, its peers notice and
	// exit) may be seen in either order.
	First  int
	Failed []RankExit // in rank order
	Size   int        // number of ranks started
}

// Error lists the failed ranks grouped by outcome, for example
// "run: 3 of 8 ranks failed: rank 1 exited with status 3; ranks 0, 2 exited
// with status 7".
func (e *RunError) Error() string {
	var groups []string
	byOutcome := map[string][]int{}
	for _, f := range e.Failed {
		o := f.outcome()
		if _, ok := byOutcome[o]; !ok {
			groups = append(groups, o)
		}
		byOutcome[o] = append(byOutcome[o], f.Rank)
	}
	parts := make([]string, 0, len(groups))
	for _, o := range groups {
		parts = append(parts, rankRanges(byOutcome[o])+" "+o)
	}
	return fmt.Sprintf("run: %d of %d ranks failed: %s", len(e.Failed), e.Size, strings.Join(parts, "; "))
}

// rankRanges returns "rank 3" or "ranks 0, 2-5, 9" for ascending ranks.
func rankRanges(ranks []int) string {
	if len(ranks) == 1 {
		return "rank " + strconv.Itoa(ranks[0])
	}
	var b strings.Builder
	b.WriteString("ranks ")
	for i := 0; i < len(ranks); {
		j := i
		for j+1 < len(ranks) && ranks[j+1] == ranks[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(ranks[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(ranks[j]))
		}
		i = j + 1
	}
	return b.String()
}

func (e *RunError) Unwrap() error { return hal.ErrRemote }

// Run starts nproc copies of argv on this node, one process per rank, and
// waits for all of them. This process hosts the job's root (see
// NewUniqueID); each child gets WEFT_RANK, WEFT_NRANKS, WEFT_LOCAL_RANK (equal
// to the rank), WEFT_UNIQUE_ID and WEFT_JOB_SECRET (the job's fresh random
// secret, which every connection of the job proves it knows), so that
// FromEnv and Launch.Connect find the job, and NCCL_NVLS_ENABLE=0. The children inherit this process's
// environment plus extraEnv ("KEY=value" entries, which override it; the
// variables above cannot be overridden).
//
// Standard output and error of rank 0 are copied to stdout and stderr
// unchanged; those of other ranks line by line with a "[rank N] " prefix.
// Standard input is not forwarded.
//
// When a rank exits with a non-zero status or is killed, the others are
// given GracePeriod to exit by themselves, then killed. SIGINT and SIGTERM
// received by this process are forwarded to every child; a second one
// kills them. Cancelling ctx sends SIGTERM, then kills after GracePeriod.
//
// Run returns nil when every rank exits with status 0. Otherwise it returns
// a *RunError naming every failed rank with its exit status or signal
// (wrapping hal.ErrRemote), or, when the processes could not be started, an
// error wrapping hal.ErrInvalidArgument (nproc < 1, empty argv, program not
// found) or hal.ErrSystem.
func Run(ctx context.Context, nproc int, argv []string, extraEnv []string, stdout, stderr io.Writer) error {
	return runner{grace: GracePeriod}.run(ctx, nproc, argv, extraEnv, stdout, stderr)
}

// RunNodes is Run with the ranks split into nodes emulated on this host:
// rank r gets WEFT_NODE_ID=r×nodes/nproc (consecutive ranks share a node),
// so that ranks of different nodes share no memory and reach each other
// through the network transport (WEFT_NET). nodes must be in [1, nproc];
// errors as Run.
func RunNodes(ctx context.Context, nproc, nodes int, argv []string, extraEnv []string, stdout, stderr io.Writer) error {
	if nodes < 1 || nodes > nproc {
		return fmt.Errorf("run: %d nodes for %d processes: want 1 to %d: %w", nodes, nproc, max(nproc, 1), hal.ErrInvalidArgument)
	}
	return runner{grace: GracePeriod, nodes: nodes}.run(ctx, nproc, argv, extraEnv, stdout, stderr)
}

type runner struct {
	grace time.Duration
	nodes int // 0: no WEFT_NODE_ID
}

// launchVars are set by Run in every child and cannot be overridden.
var launchVars = [...]string{"WEFT_RANK", "WEFT_NRANKS", "WEFT_LOCAL_RANK", "WEFT_UNIQUE_ID", "WEFT_JOB_SECRET", "WEFT_JOB_SECRET_FILE", "NCCL_NVLS_ENABLE"}

// nodeEnv adds WEFT_NODE_ID to a child's environment (RunNodes), replacing
// any inherited value.
func nodeEnv(env []string, rank, nproc, nodes int) []string {
	if nodes <= 0 {
		return env
	}
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "WEFT_NODE_ID=") {
			out = append(out, kv)
		}
	}
	return append(out, "WEFT_NODE_ID="+strconv.Itoa(rank*nodes/nproc))
}

func childEnv(base, extra []string, rank, nproc int, id UniqueID) []string {
	out := make([]string, 0, len(base)+len(extra)+len(launchVars))
	for _, kv := range append(base[:len(base):len(base)], extra...) {
		k, _, _ := strings.Cut(kv, "=")
		reserved := false
		for _, v := range launchVars {
			reserved = reserved || k == v
		}
		if !reserved {
			out = append(out, kv)
		}
	}
	out = append(out,
		"WEFT_RANK="+strconv.Itoa(rank),
		"WEFT_NRANKS="+strconv.Itoa(nproc),
		"WEFT_LOCAL_RANK="+strconv.Itoa(rank),
		"WEFT_UNIQUE_ID="+id.String(),
		"NCCL_NVLS_ENABLE=0",
	)
	if !id.Secret.IsZero() {
		// The environment of a process is readable by its user only
		// (/proc/PID/environ is mode 0400), the trust boundary weft
		// assumes (docs/security.md).
		out = append(out, "WEFT_JOB_SECRET="+id.Secret.Hex())
	}
	return out
}

type exitEvent struct {
	rank  int
	state *os.ProcessState
	err   error
}

func (r runner) run(ctx context.Context, nproc int, argv []string, extraEnv []string, stdout, stderr io.Writer) error {
	if nproc < 1 {
		return fmt.Errorf("run: nproc %d: want at least 1 process: %w", nproc, hal.ErrInvalidArgument)
	}
	if len(argv) == 0 || argv[0] == "" {
		return fmt.Errorf("run: no program to run: %w", hal.ErrInvalidArgument)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("run: %w: %w", err, hal.ErrInvalidArgument)
	}
	log := env.Logger("BOOT").With("launcher", "weft run")
	id, root, err := newRoot()
	if err != nil {
		return err
	}
	defer root.close()

	// Signals first, so that one arriving while children start is not lost.
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigc)

	out := &syncWriter{w: stdout}
	errw := &syncWriter{w: stderr}
	base := os.Environ()
	cmds := make([]*exec.Cmd, 0, nproc)
	var flushers []*prefixWriter
	exits := make(chan exitEvent, nproc)
	running := make([]bool, nproc)
	killAll := func() {
		for rank, c := range cmds {
			if running[rank] {
				killGroup(c.Process)
			}
		}
	}
	for rank := range nproc {
		cmd := exec.Command(path, argv[1:]...)
		cmd.Args[0] = argv[0]
		cmd.Env = nodeEnv(childEnv(base, extraEnv, rank, nproc, id), rank, nproc, r.nodes)
		cmd.SysProcAttr = procAttr()
		cmd.WaitDelay = 5 * time.Second
		if rank == 0 {
			cmd.Stdout, cmd.Stderr = out, errw
		} else {
			prefix := []byte("[rank " + strconv.Itoa(rank) + "] ")
			po, pe := &prefixWriter{w: out, prefix: prefix}, &prefixWriter{w: errw, prefix: prefix}
			cmd.Stdout, cmd.Stderr = po, pe
			flushers = append(flushers, po, pe)
		}
		if err := cmd.Start(); err != nil {
			killAll()
			for range cmds {
				<-exits
			}
			return fmt.Errorf("run: start rank %d (%s): %w: %w", rank, argv[0], err, hal.ErrSystem)
		}
		cmds = append(cmds, cmd)
		running[rank] = true
		go func() {
			err := cmd.Wait()
			exits <- exitEvent{rank: rank, state: cmd.ProcessState, err: err}
		}()
	}
	log.Info("started ranks", "nproc", nproc, "argv", argv, "id", id.String())

	results := make([]RankExit, nproc)
	signalAll := func(sig os.Signal) {
		for rank, c := range cmds {
			if running[rank] {
				signalGroup(c.Process, sig)
			}
		}
	}
	var (
		grace   <-chan time.Time
		first   = -1
		signals int
		ctxDone = ctx.Done()
		killed  = false
	)
	startGrace := func() {
		if grace == nil && !killed {
			grace = time.After(r.grace)
		}
	}
	for left := nproc; left > 0; {
		select {
		case ev := <-exits:
			left--
			running[ev.rank] = false
			results[ev.rank] = exitOf(ev.rank, ev.state, ev.err)
			results[ev.rank].Killed = killed && results[ev.rank].Signal != ""
			if results[ev.rank].failed() && first < 0 {
				first = ev.rank
				log.Warn("rank failed; waiting for the others", "exit", results[ev.rank].String(), "grace", r.grace)
				root.abort(fmt.Errorf("%v", results[ev.rank]))
				startGrace()
			}
		case sig := <-sigc:
			signals++
			if signals > 1 {
				killAll()
				killed, grace = true, nil
				continue
			}
			signalAll(sig)
			startGrace()
		case <-ctxDone:
			ctxDone = nil
			signalAll(syscall.SIGTERM)
			startGrace()
		case <-grace:
			log.Warn("grace period over; killing the remaining ranks")
			killAll()
			killed, grace = true, nil
		}
	}
	for _, f := range flushers {
		f.flush()
	}
	// Ranks killed by a signal cannot remove their shared-memory files:
	// now that every rank has ended, remove the files of processes that
	// are gone (internal/shm names files after their creator).
	if removed := shm.ReclaimAll(); len(removed) > 0 {
		log.Info("removed shared memory of ended ranks", "files", len(removed))
	}

	var failed []RankExit
	for _, e := range results {
		if e.failed() {
			failed = append(failed, e)
		}
	}
	if len(failed) > 0 {
		if first < 0 {
			first = failed[0].Rank
		}
		return &RunError{First: first, Failed: failed, Size: nproc}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	return nil
}

// exitOf describes how a process ended.
func exitOf(rank int, ps *os.ProcessState, err error) RankExit {
	e := RankExit{Rank: rank}
	if ps == nil {
		e.Code = -1
		e.Signal = "unknown (" + err.Error() + ")"
		return e
	}
	// A status of 0 with err set means the output copy failed or timed
	// out (WaitDelay): not a failure of the rank.
	e.Code = ps.ExitCode()
	if sig := exitSignal(ps); sig != "" {
		e.Code, e.Signal = -1, sig
	}
	return e
}

// syncWriter serialises writes of several ranks into one writer.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// prefixWriter writes whole lines, each preceded by prefix, so that lines
// of different ranks do not interleave. A line longer than 64 KiB is cut.
type prefixWriter struct {
	w      io.Writer
	prefix []byte
	buf    []byte
}

const maxLine = 64 << 10

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			if len(p.buf) < maxLine {
				return len(b), nil
			}
			i = maxLine - 1
		}
		line := make([]byte, 0, len(p.prefix)+i+2)
		line = append(append(line, p.prefix...), p.buf[:i+1]...)
		if line[len(line)-1] != '\n' {
			line = append(line, '\n')
		}
		p.buf = p.buf[i+1:]
		if _, err := p.w.Write(line); err != nil {
			return len(b), err
		}
	}
}

// flush writes a last line that lacked its newline.
func (p *prefixWriter) flush() {
	if len(p.buf) > 0 {
		p.w.Write(append(append(append([]byte(nil), p.prefix...), p.buf...), '\n'))
		p.buf = nil
	}
}
