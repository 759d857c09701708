package stageprof

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/weftccl/weft/internal/env"
)

// The timeline. Where the stage summaries say how long each stage takes,
// a timeline says when: with WEFT_PROXY_TRACE set to a directory, the
// proxy and the network transports record each event (a trigger handled,
// a frame written, a frame read and applied) with its start and end on
// the wall clock, which processes on one host share, so that two ranks'
// timelines join into the path of every hop (scripts/net-trace.py). A
// process keeps its last traceCap events in memory and writes them to
// DIR/weft-trace-PID.txt when a traced component closes (each write
// replaces the file with everything recorded so far). Off (the default)
// Trace returns at once.

// Event kinds of the timeline.
const (
	EvTrigger = iota + 1 // the proxy handled a trigger: A kind, B channel, C FIFO position
	EvWrite              // a transport wrote a frame: A engine id, B sequence number, C frame kind
	EvRead               // a transport read (Start: the frame's first byte seen) and applied (End) a frame: A engine id, B sequence number, C frame kind
)

var evNames = [...]string{EvTrigger: "trigger", EvWrite: "write", EvRead: "read"}

// traceCap bounds the events a process keeps (the newest win).
const traceCap = 1 << 17

type event struct {
	start, end int64 // Unix nanoseconds
	kind       uint8
	rank       int32
	a, b, c    uint64
}

var tr struct {
	once sync.Once
	dir  string
	mu   sync.Mutex
	ev   []event
	n    uint64 // events recorded
}

// Tracing reports whether WEFT_PROXY_TRACE names a directory (read once).
func Tracing() bool {
	tr.once.Do(func() { startTrace(env.String("WEFT_PROXY_TRACE")) })
	return tr.dir != ""
}

// startTrace starts an empty timeline written to dir ("": off).
func startTrace(dir string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.dir, tr.ev, tr.n = dir, nil, 0
	if dir != "" {
		tr.ev = make([]event, traceCap)
	}
}

// Trace records an event of rank that began at start and ends now; a
// no-op unless Tracing.
func Trace(kind uint8, rank int, start time.Time, a, b, c uint64) {
	if !Tracing() {
		return
	}
	end := time.Now().UnixNano()
	tr.mu.Lock()
	tr.ev[tr.n%traceCap] = event{start: start.UnixNano(), end: end, kind: kind, rank: int32(rank), a: a, b: b, c: c}
	tr.n++
	tr.mu.Unlock()
}

// TraceStart is the start time of an event to Trace: the time now while
// Tracing, else the zero time (no clock read).
func TraceStart() time.Time {
	if !Tracing() {
		return time.Time{}
	}
	return time.Now()
}

// WriteTrace writes the events kept so far to DIR/weft-trace-PID.txt, one
// per line (kind, rank, start and end in Unix ns, A, B, C), oldest first;
// a no-op unless Tracing. Errors name the file.
func WriteTrace() error {
	if !Tracing() {
		return nil
	}
	tr.mu.Lock()
	n := tr.n
	evs := make([]event, 0, min(n, traceCap))
	for i := n - min(n, traceCap); i < n; i++ {
		evs = append(evs, tr.ev[i%traceCap])
	}
	tr.mu.Unlock()
	path := filepath.Join(tr.dir, fmt.Sprintf("weft-trace-%d.txt", os.Getpid()))
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("stageprof: timeline: %w", err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "# weft timeline: pid %d, %d events (of %d recorded); kind rank start_ns end_ns a b c\n", os.Getpid(), len(evs), n)
	for _, e := range evs {
		fmt.Fprintf(w, "%s %d %d %d %d %d %d\n", evNames[e.kind], e.rank, e.start, e.end, e.a, e.b, e.c)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("stageprof: timeline %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("stageprof: timeline %s: %w", path, err)
	}
	return nil
}
