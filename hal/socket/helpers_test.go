package socket

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	_ "github.com/weftccl/weft/hal/host"
)

// failBound bounds every wait of a test: a failure bound, not a timing
// assertion.
const failBound = 30 * time.Second

var jobSeq atomic.Int64

// newJob returns a job id unique to this test process.
func newJob() string { return fmt.Sprintf("socktest-%d-%d", os.Getpid(), jobSeq.Add(1)) }

// rank is one in-process rank: a hal/host device, its NetDevice, a receive
// window exported to peers and a source buffer.
type rank struct {
	r      int
	dev    hal.Device
	nd     *NetDevice
	win    hal.Buffer   // exported receive window
	src    hal.Buffer   // local source memory
	remote []hal.Buffer // peers' windows, imported, by rank
	eng    []hal.Engine // engines to peers, by rank
}

// openRanks opens n ranks of one job with windows of winBytes and sources
// of srcBytes, connected all to all.
func openRanks(t testing.TB, n int, winBytes, srcBytes int64, opts Options) []*rank {
	t.Helper()
	return openRanksWith(t, n, winBytes, srcBytes, opts, nil)
}

// openRanksWith is openRanks with hal.NetConfig.Secret set to secret.
func openRanksWith(t testing.TB, n int, winBytes, srcBytes int64, opts Options, secret []byte) []*rank {
	t.Helper()
	job := newJob()
	if opts.IfName == "" {
		opts.IfName = "lo"
	}
	rs := make([]*rank, n)
	for i := range rs {
		dev, err := hal.Open("host", hal.Config{Ordinal: i, Rank: i, JobID: job})
		if err != nil {
			t.Fatal(err)
		}
		nd, err := Open(dev, hal.NetConfig{Rank: i, NRanks: n, JobID: job, Secret: secret}, opts)
		if err != nil {
			dev.Close()
			t.Fatal(err)
		}
		x := &rank{r: i, dev: dev, nd: nd, remote: make([]hal.Buffer, n), eng: make([]hal.Engine, n)}
		if x.win, err = dev.Alloc(winBytes); err != nil {
			t.Fatal(err)
		}
		if x.src, err = dev.Alloc(srcBytes); err != nil {
			t.Fatal(err)
		}
		rs[i] = x
	}
	t.Cleanup(func() { closeRanks(t, rs) })
	handles := make([]hal.Handle, n)
	for i, x := range rs {
		h, err := x.nd.ExportPort(x.win)
		if err != nil {
			t.Fatal(err)
		}
		handles[i] = h
	}
	for _, x := range rs {
		for p, y := range rs {
			if p == x.r {
				continue
			}
			b, err := x.nd.ImportPort(handles[p])
			if err != nil {
				t.Fatal(err)
			}
			x.remote[p] = b
			e, err := x.nd.NewEngine(endpointOf(y))
			if err != nil {
				t.Fatal(err)
			}
			x.eng[p] = e
		}
	}
	return rs
}

func endpointOf(x *rank) hal.Endpoint {
	ep := x.dev.Endpoint()
	ep.Net = map[string][]byte{Name: x.nd.Address()}
	return ep
}

// closeRanks closes engines, NetDevices and devices; errors of engines
// are reported unless a test expects them (closeRanksQuiet).
func closeRanks(t testing.TB, rs []*rank) {
	t.Helper()
	for _, x := range rs {
		if x == nil {
			continue
		}
		for _, e := range x.eng {
			if e != nil {
				e.Close()
			}
		}
		x.eng = nil
	}
	for _, x := range rs {
		if x == nil || x.nd == nil {
			continue
		}
		if err := x.nd.Close(); err != nil && !errors.Is(err, hal.ErrInvalidUsage) {
			t.Errorf("rank %d: NetDevice close: %v", x.r, err)
		}
		for _, b := range x.remote {
			if b != nil {
				b.Free()
			}
		}
		x.win.Free()
		x.src.Free()
		x.dev.Close()
		x.nd = nil
	}
}

// word returns the 64-bit word at byte off of a host-visible buffer.
func word(b hal.Buffer, off int64) *uint64 {
	return (*uint64)(unsafe.Pointer(&b.Host()[off]))
}

// waitWord waits until the word reaches want (failing after failBound, or
// at once if errf reports an error).
func waitWord(t testing.TB, b hal.Buffer, off int64, want uint64, errf func() error) {
	t.Helper()
	deadline := time.Now().Add(failBound)
	for round := 0; ; round++ {
		v := atomic.LoadUint64(word(b, off))
		if v >= want {
			return
		}
		if errf != nil {
			if err := errf(); err != nil {
				t.Fatalf("waiting for word %d to reach %d (at %d): %v", off, want, v, err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("word at %d is %d after %v, want %d", off, v, failBound, want)
		}
		if round > 100 {
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// waitCompleted waits until e's Completed reaches ticket.
func waitCompleted(t testing.TB, e hal.Engine, ticket uint64) {
	t.Helper()
	deadline := time.Now().Add(failBound)
	for {
		c, err := e.Completed()
		if err != nil {
			t.Fatalf("completed: %v", err)
		}
		if c >= ticket {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("completed %d after %v, want %d", c, failBound, ticket)
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// fill writes a pattern depending on seed into b.
func fill(b []byte, seed uint64) {
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := 0; i < len(b) && i < 4096; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	for n := 4096; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}

// abort closes everything of nd without a goodbye, as a crashed process
// would: the listener, inbound connections and its engines' connections.
func (nd *NetDevice) abort() {
	nd.closing.Store(true)
	nd.ln.Close()
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for c := range nd.inbound {
		c.Close()
	}
	for ec := range nd.engines {
		if e, ok := ec.(*Engine); ok {
			for _, c := range e.conns {
				c.conn.Close()
			}
		}
	}
}

// waited sums, over nd's live sessions, the frames and the signal frames
// that arrived before an earlier frame and waited for it.
func (nd *NetDevice) waited() (frames, signals uint64) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for _, s := range nd.sessions {
		frames += s.waited.Load()
		signals += s.signalsWaited.Load()
	}
	return frames, signals
}

// errorMentions fails unless err is non-nil, wraps want and mentions
// every part.
func errorMentions(t testing.TB, err error, want error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want an error wrapping %v mentioning %q", want, parts)
	}
	if want != nil && !errors.Is(err, want) {
		t.Errorf("err = %v, want one wrapping %v", err, want)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("err = %v, want it to mention %q", err, p)
		}
	}
}
