package ucx

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftccl/weft/hal"
	_ "github.com/weftccl/weft/hal/host"
	"github.com/weftccl/weft/hal/netcore/nettest"
	"github.com/weftccl/weft/internal/env"
)

// failBound bounds every wait of a test (nettest.FailBound).
const failBound = nettest.FailBound

func newJob() string { return nettest.JobID("ucxtest") }

// needUCX skips a test where UCX is not installed, unless WEFT_REQUIRE
// names ucx: then it fails.
func needUCX(t testing.TB) {
	t.Helper()
	if a := Probe(); !a.Available {
		if env.Required("ucx") {
			t.Fatalf("WEFT_REQUIRE names ucx, but it is unavailable: %s", a.Reason)
		}
		t.Skipf("UCX unavailable (apt-get install libucx0): %s", a.Reason)
	}
}

// transports are the UCX transport sets the tests run over: TCP (on
// loopback) and shared memory.
var transports = []string{"tcp", "shm"}

type rank struct {
	r      int
	dev    hal.Device
	nd     *NetDevice
	win    hal.Buffer
	src    hal.Buffer
	remote []hal.Buffer
	eng    []hal.Engine
}

func testOptions(tls string, staging Staging) Options {
	return Options{Staging: staging, Chunk: 4 << 10, Settings: map[string]string{"TLS": tls}, Timeout: 10 * time.Second}
}

// openRanks opens n ranks of one job (hal/host devices, one host) with
// windows of winBytes and sources of srcBytes, connected all to all.
func openRanks(t testing.TB, n int, winBytes, srcBytes int64, opts Options, secret []byte) []*rank {
	t.Helper()
	job := newJob()
	rs := make([]*rank, n)
	for i := range rs {
		h := nettest.OpenHost(t, job, i, winBytes, srcBytes)
		nd, err := Open(h.Dev, hal.NetConfig{Rank: i, NRanks: n, JobID: job, Secret: secret, OneHost: true}, opts)
		if err != nil {
			h.Close()
			t.Fatal(err)
		}
		rs[i] = &rank{r: i, dev: h.Dev, nd: nd, win: h.Win, src: h.Src}
	}
	t.Cleanup(func() { closeRanks(rs) })
	remote, eng := nettest.Wire(t, n, func(i int) (hal.NetDevice, hal.Buffer, hal.Endpoint) {
		return rs[i].nd, rs[i].win, endpointOf(rs[i])
	}, true, false)
	for i, x := range rs {
		x.remote, x.eng = remote[i], eng[i]
	}
	return rs
}

func endpointOf(x *rank) hal.Endpoint {
	ep := x.dev.Endpoint()
	ep.Net = map[string][]byte{Name: x.nd.Address()}
	return ep
}

func closeRanks(rs []*rank) {
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
		x.nd.Close()
		x.win.Free()
		x.src.Free()
		x.dev.Close()
	}
}

// word is the 64-bit word at byte off of a host buffer, read atomically.
func word(b hal.Buffer, off int) uint64 {
	return atomic.LoadUint64(nettest.Word(b, int64(off)))
}

// awaitWord waits until the word at off of b reaches want.
func awaitWord(t testing.TB, b hal.Buffer, off int, want uint64, what string) {
	t.Helper()
	deadline := time.Now().Add(failBound)
	for word(b, off) < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: word at %d is %d after %v, want %d", what, off, word(b, off), failBound, want)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// awaitTicket waits until e completes a ticket marked now.
func awaitTicket(t testing.TB, e hal.Engine, what string) {
	t.Helper()
	nettest.AwaitTicket(t, e, what)
}
