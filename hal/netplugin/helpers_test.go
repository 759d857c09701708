package netplugin

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/weftccl/weft/conformance"
	"github.com/weftccl/weft/hal"
	_ "github.com/weftccl/weft/hal/host"
	"github.com/weftccl/weft/hal/netplugin/netplugintest"
	"github.com/weftccl/weft/internal/ncclnet"
)

// failBound bounds every wait of a test: a failure bound, not a timing
// assertion.
const failBound = 30 * time.Second

var (
	jobSeq    atomic.Int64
	pluginLib struct {
		once sync.Once
		path string
		dir  string
	}
)

func newJob() string { return fmt.Sprintf("nptest-%d-%d", os.Getpid(), jobSeq.Add(1)) }

// plugin builds the test plugin once per test binary (into a directory
// removed by TestMain) and returns its path.
func plugin(t testing.TB) string {
	t.Helper()
	pluginLib.once.Do(func() {
		dir, err := os.MkdirTemp("", "weft-netplugin-")
		if err != nil {
			t.Fatal(err)
		}
		pluginLib.dir = dir
		pluginLib.path = netplugintest.BuildIn(t, dir)
	})
	if pluginLib.path == "" {
		t.Skip("the test plugin could not be built")
	}
	if _, err := ncclnet.Load(pluginLib.path); err != nil {
		var le *ncclnet.LoadError
		if errors.As(err, &le) && strings.Contains(le.Detail, "without cgo") {
			t.Skipf("no plugin can load: %v", err)
		}
		t.Fatalf("load the test plugin: %v", err)
	}
	return pluginLib.path
}

// rank is one in-process rank: a hal/host device, its NetDevice, a
// receive window exported to peers and a source buffer.
type rank struct {
	r      int
	dev    hal.Device
	nd     *NetDevice
	win    hal.Buffer
	src    hal.Buffer
	remote []hal.Buffer // peers' windows, imported, by rank
	eng    []hal.Engine // engines to peers, by rank
}

// openRanks opens n ranks of one job, windows of winBytes and sources of
// srcBytes; with connect, engines all to all.
func openRanks(t testing.TB, n int, winBytes, srcBytes int64, opts Options, secret []byte, connect bool) []*rank {
	t.Helper()
	return openJob(t, newJob(), n, winBytes, srcBytes, opts, secret, connect)
}

func openJob(t testing.TB, job string, n int, winBytes, srcBytes int64, opts Options, secret []byte, connect bool) []*rank {
	t.Helper()
	opts.Plugin = plugin(t)
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
		for p := range rs {
			if p == x.r {
				continue
			}
			b, err := x.nd.ImportPort(handles[p])
			if err != nil {
				t.Fatal(err)
			}
			x.remote[p] = b
		}
	}
	if connect {
		// Engines are made concurrently, as ranks of a job do: a link
		// comes up when both ends run.
		var wg sync.WaitGroup
		errs := make(chan error, n*n)
		for _, x := range rs {
			for p, y := range rs {
				if p == x.r {
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					e, err := x.nd.NewEngine(endpointOf(y))
					if err != nil {
						errs <- fmt.Errorf("rank %d: engine to rank %d: %w", x.r, p, err)
						return
					}
					x.eng[p] = e
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	return rs
}

func endpointOf(x *rank) hal.Endpoint {
	ep := x.dev.Endpoint()
	ep.Net = map[string][]byte{Name: x.nd.Address()}
	return ep
}

// closeRanks closes engines, NetDevices and devices, concurrently per
// rank (a rank's engines wait for their peers' acknowledgements).
func closeRanks(t testing.TB, rs []*rank) {
	t.Helper()
	var wg sync.WaitGroup
	for _, x := range rs {
		if x == nil || x.nd == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, e := range x.eng {
				if e != nil {
					e.Close()
				}
			}
			if err := x.nd.Close(); err != nil && !errors.Is(err, hal.ErrInvalidUsage) {
				t.Errorf("rank %d: NetDevice close: %v", x.r, err)
			}
		}()
	}
	wg.Wait()
	for _, x := range rs {
		if x == nil || x.nd == nil {
			continue
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

// abort stops nd as a crashed process would: no goodbye, every comm
// closed.
func (nd *NetDevice) abort() {
	nd.crash.Store(true)
	nd.mu.Lock()
	nd.closed = true
	nd.mu.Unlock()
	close(nd.stop)
	<-nd.done
}

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

// fill writes a pattern depending on seed into b.
func fill(b []byte, seed uint64) {
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
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

// eventually polls cond until it holds, failing after failBound.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(failBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, failBound)
		}
		time.Sleep(time.Millisecond)
	}
}

// atomic32 is a flag a hook and a test share.
type atomic32 struct{ v atomic.Int32 }

func (a *atomic32) store(v int32)      { a.v.Store(v) }
func (a *atomic32) swap(v int32) int32 { return a.v.Swap(v) }

func deadline() time.Time     { return time.Now().Add(failBound) }
func timeUp(d time.Time) bool { return time.Now().After(d) }

// TestMain lets the test binary serve as the conformance suite's worker
// process too.
func TestMain(m *testing.M) {
	conformance.MaybeWorker(hal.Lookup)
	code := m.Run()
	if pluginLib.dir != "" {
		os.RemoveAll(pluginLib.dir)
	}
	os.Exit(code)
}

func hostAddrOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }
