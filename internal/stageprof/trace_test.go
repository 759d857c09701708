package stageprof

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTrace: events land in DIR/weft-trace-PID.txt in order with their
// rank, kind, start, end and words; past traceCap only the newest are kept;
// off, nothing is recorded or written.
func TestTrace(t *testing.T) {
	Tracing() // consume the environment's setting first
	dir := t.TempDir()
	startTrace(dir)
	defer startTrace("")
	start := time.Now()
	Trace(EvTrigger, 3, start, 1, 2, 7)
	Trace(EvWrite, 3, start, 99, 5, 4|1<<8)
	if err := WriteTrace(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("weft-trace-%d.txt", os.Getpid()))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "# weft timeline") {
		t.Fatalf("timeline:\n%s\nwant a header and two events", b)
	}
	var kind string
	var rank int
	var s0, e0, a, bw, c uint64
	for i, want := range []struct {
		kind    string
		a, b, c uint64
		rank    int
	}{{"trigger", 1, 2, 7, 3}, {"write", 99, 5, 4 | 1<<8, 3}} {
		if _, err := fmt.Sscan(lines[i+1], &kind, &rank, &s0, &e0, &a, &bw, &c); err != nil {
			t.Fatalf("line %q: %v", lines[i+1], err)
		}
		if kind != want.kind || rank != want.rank || a != want.a || bw != want.b || c != want.c {
			t.Errorf("event %d: %q, want kind %s rank %d words %d %d %d", i, lines[i+1], want.kind, want.rank, want.a, want.b, want.c)
		}
		if s0 != uint64(start.UnixNano()) || e0 < s0 {
			t.Errorf("event %d: start %d end %d, want start %d and an end after it", i, s0, e0, start.UnixNano())
		}
	}

	// Past the capacity the oldest go.
	startTrace(dir)
	for i := range traceCap + 10 {
		Trace(EvRead, 0, start, uint64(i), 0, 0)
	}
	if err := WriteTrace(); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	lines = strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != traceCap+1 || !strings.Contains(lines[0], fmt.Sprintf("%d events (of %d recorded)", traceCap, traceCap+10)) {
		t.Fatalf("%d lines, header %q: want %d events of %d", len(lines), lines[0], traceCap, traceCap+10)
	}
	if f := strings.Fields(lines[1]); f[4] != "10" {
		t.Errorf("oldest kept event %q, want the 11th (a = 10)", lines[1])
	}

	// Off: nothing recorded, nothing written.
	startTrace("")
	os.Remove(path)
	Trace(EvWrite, 0, start, 0, 0, 0)
	if err := WriteTrace(); err != nil || TraceStart() != (time.Time{}) {
		t.Fatalf("off: WriteTrace %v, TraceStart %v", err, TraceStart())
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("off: %s written (%v)", path, err)
	}
}
