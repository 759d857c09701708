package netplugin

import (
	"errors"
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
	"github.com/weftccl/weft/hal/netcore/nettest"
	"github.com/weftccl/weft/hal/netplugin/netplugintest"
	"github.com/weftccl/weft/internal/ncclnet"
)

// failBound bounds every wait of a test: a failure bound, not a timing
// assertion.
const failBound = nettest.FailBound

var pluginLib struct {
	once sync.Once
	path string
	dir  string
}

func newJob() string { return nettest.JobID("nptest") }

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
		h := nettest.OpenHost(t, job, i, winBytes, srcBytes)
		nd, err := Open(h.Dev, hal.NetConfig{Rank: i, NRanks: n, JobID: job, Secret: secret}, opts)
		if err != nil {
			h.Close()
			t.Fatal(err)
		}
		rs[i] = &rank{r: i, dev: h.Dev, nd: nd, win: h.Win, src: h.Src, eng: make([]hal.Engine, n)}
	}
	t.Cleanup(func() { closeRanks(t, rs) })
	// Engines are made concurrently, as ranks of a job do: a link comes
	// up when both ends run.
	remote, eng := nettest.Wire(t, n, func(i int) (hal.NetDevice, hal.Buffer, hal.Endpoint) {
		return rs[i].nd, rs[i].win, endpointOf(rs[i])
	}, connect, true)
	for i, x := range rs {
		x.remote = remote[i]
		if connect {
			x.eng = eng[i]
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

// The shared fixtures (hal/netcore/nettest), by this suite's names.
func word(b hal.Buffer, off int64) *uint64 { return nettest.Word(b, off) }

func waitWord(t testing.TB, b hal.Buffer, off int64, want uint64, errf func() error) {
	t.Helper()
	nettest.WaitWord(t, b, off, want, errf)
}

// fill writes seed's xorshift stream over all of b (not the 4 KiB
// repeated of nettest.Fill), so a chunk landing at the wrong offset shows.
func fill(b []byte, seed uint64) { nettest.FillStream(b, seed) }

func errorMentions(t testing.TB, err error, want error, parts ...string) {
	t.Helper()
	nettest.ErrorMentions(t, err, want, parts...)
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	nettest.Eventually(t, what, cond)
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
