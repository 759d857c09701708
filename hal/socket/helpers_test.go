package socket

import (
	"errors"
	"testing"

	"github.com/weftccl/weft/hal"
	_ "github.com/weftccl/weft/hal/host"
	"github.com/weftccl/weft/hal/netcore/nettest"
)

// failBound bounds every wait of a test (nettest.FailBound).
const failBound = nettest.FailBound

// newJob returns a job id unique to this test process.
func newJob() string { return nettest.JobID("socktest") }

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
		h := nettest.OpenHost(t, job, i, winBytes, srcBytes)
		nd, err := Open(h.Dev, hal.NetConfig{Rank: i, NRanks: n, JobID: job, Secret: secret}, opts)
		if err != nil {
			h.Close()
			t.Fatal(err)
		}
		rs[i] = &rank{r: i, dev: h.Dev, nd: nd, win: h.Win, src: h.Src}
	}
	t.Cleanup(func() { closeRanks(t, rs) })
	connect(t, rs, false)
	return rs
}

// connect exchanges the ranks' windows and opens engines all to all
// (concurrently or one after another).
func connect(t testing.TB, rs []*rank, concurrent bool) {
	t.Helper()
	remote, eng := nettest.Wire(t, len(rs), func(i int) (hal.NetDevice, hal.Buffer, hal.Endpoint) {
		return rs[i].nd, rs[i].win, endpointOf(rs[i])
	}, true, concurrent)
	for i, x := range rs {
		x.remote, x.eng = remote[i], eng[i]
	}
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

// The shared fixtures (hal/netcore/nettest), by this suite's names.
func word(b hal.Buffer, off int64) *uint64 { return nettest.Word(b, off) }

func waitWord(t testing.TB, b hal.Buffer, off int64, want uint64, errf func() error) {
	t.Helper()
	nettest.WaitWord(t, b, off, want, errf)
}

func waitCompleted(t testing.TB, e hal.Engine, ticket uint64) {
	t.Helper()
	nettest.WaitCompleted(t, e, ticket)
}

func fill(b []byte, seed uint64) { nettest.Fill(b, seed) }

func errorMentions(t testing.TB, err error, want error, parts ...string) {
	t.Helper()
	nettest.ErrorMentions(t, err, want, parts...)
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

// directPuts counts the puts the NetDevice's sessions read straight into a
// host-visible window (session.putDirect).
func (nd *NetDevice) directPuts() uint64 {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	var n uint64
	for _, s := range nd.sessions {
		n += s.direct.Load()
	}
	return n
}

// applyModes are the receiver's two ways into a host-visible window (all
// of hal/host's memory is): payloads read straight into it and signals
// stored by the CPU, or everything through the device's engine.
var applyModes = []struct {
	name   string
	staged bool
}{{"direct", false}, {"staged", true}}

// checkApplyMode fails t when the receiver d did not apply puts the way
// the mode says (staged: none directly; direct: some).
func checkApplyMode(t *testing.T, d *NetDevice, staged bool) {
	t.Helper()
	if n := d.directPuts(); staged && n != 0 {
		t.Errorf("staged mode: %d puts were read straight into the window", n)
	} else if !staged && n == 0 {
		t.Error("direct mode: no put was read straight into the window")
	}
}

// anyReceiver returns one receiving connection of the NetDevice, or nil.
func (nd *NetDevice) anyReceiver() *recvConn {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for _, s := range nd.sessions {
		s.mu.Lock()
		for _, rc := range s.members {
			if rc != nil {
				s.mu.Unlock()
				return rc
			}
		}
		s.mu.Unlock()
	}
	return nil
}
