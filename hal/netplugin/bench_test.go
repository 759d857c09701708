package netplugin

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftccl/weft/hal/netcore/nettest"
)

// BenchmarkPluginPut measures one 16 MiB put and its signal from rank 0
// to rank 1 through the test plugin (loopback TCP, two NetDevices of this
// process on hal/host devices, default options): the time from the first
// request to the semaphore at the receiver. It reports GB/s (10^9 bytes
// per second). A CPU-only figure of the transport's staging, messages and
// polling over the test plugin, not of a network.
func BenchmarkPluginPut(b *testing.B) {
	const n = 16 << 20
	rs := openRanks(b, 2, n+64, n, Options{}, nil, true)
	s, d := rs[0], rs[1]
	fill(s.src.Host(), 1)
	e := s.eng[1].(*Engine)
	b.SetBytes(n)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if err := e.Put(s.remote[1].Addr(), s.src.Addr(), n); err != nil {
			b.Fatal(err)
		}
		if err := e.Signal(s.remote[1].Addr()+n, 0, 0); err != nil {
			b.Fatal(err)
		}
		for atomic.LoadUint64(word(d.win, n)) < uint64(i+1) {
			if err := e.Err(); err != nil {
				b.Fatal(err)
			}
			time.Sleep(10 * time.Microsecond)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(n)*float64(b.N)/time.Since(start).Seconds()/1e9, "GB/s")
}

// BenchmarkPluginPingPong measures the round trip of an 8-byte put and
// its signal from rank 0 to rank 1 and back through the test plugin. It
// reports µs per one-way trip: half the round trip.
func BenchmarkPluginPingPong(b *testing.B) {
	const n, sem = 8, 64
	rs := openRanks(b, 2, 128, n, Options{}, nil, true)
	a, c := rs[0], rs[1]
	elapsed := nettest.PingPong(b,
		nettest.PingSide{Eng: a.eng[1], Remote: a.remote[1], Src: a.src, Win: a.win},
		nettest.PingSide{Eng: c.eng[0], Remote: c.remote[0], Src: c.src, Win: c.win}, n, 0, sem)
	b.ReportMetric(elapsed.Seconds()/float64(b.N)/2*1e6, "µs/trip")
}
