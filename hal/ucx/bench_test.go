package ucx

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkUCXPut measures one put of n bytes and its signal from rank 0
// to rank 1 (two NetDevices of this process on hal/host devices): the time
// from the first request to the semaphore at the receiver, over UCX's TCP
// (loopback) and shared-memory transports, with memory registered directly
// and staged through host memory. It reports GB/s (10^9 bytes per
// second). A CPU-only figure of the transport on this machine's memory
// and TCP stack, not a network.
func BenchmarkUCXPut(b *testing.B) {
	needUCX(b)
	const n = 16 << 20
	for _, tls := range transports {
		for _, staging := range []Staging{StagingAuto, StagingAlways} {
			b.Run(fmt.Sprintf("%s/staging%d", tls, staging), func(b *testing.B) {
				opts := testOptions(tls, staging)
				opts.Chunk = 1 << 20
				rs := openRanks(b, 2, 64+n, n, opts, testSecret)
				e := rs[0].eng[1]
				b.SetBytes(n)
				b.ResetTimer()
				start := time.Now()
				for i := 0; i < b.N; i++ {
					if err := e.Put(rs[0].remote[1].Addr()+64, rs[0].src.Addr(), n); err != nil {
						b.Fatal(err)
					}
					if err := e.Signal(rs[0].remote[1].Addr(), 0, 0); err != nil {
						b.Fatal(err)
					}
					awaitWord(b, rs[1].win, 0, uint64(i+1), "put")
				}
				b.StopTimer()
				b.ReportMetric(float64(n)*float64(b.N)/time.Since(start).Seconds()/1e9, "GB/s")
			})
		}
	}
}

// BenchmarkUCXPingPong measures the round trip of an 8-byte put and its
// signal from rank 0 to rank 1 and back, driven by this goroutine (as a
// proxy would), over UCX's TCP and shared-memory transports. It reports
// µs per one-way trip: half the round trip, which holds a flush (a round
// trip of its own) and an active message each way.
func BenchmarkUCXPingPong(b *testing.B) {
	needUCX(b)
	for _, tls := range transports {
		b.Run(tls, func(b *testing.B) {
			rs := openRanks(b, 2, 4096, 4096, testOptions(tls, StagingAuto), testSecret)
			b.ResetTimer()
			start := time.Now()
			for i := 1; i <= b.N; i++ {
				for _, x := range []int{0, 1} {
					e := rs[x].eng[1-x]
					if err := e.Put(rs[x].remote[1-x].Addr()+64, rs[x].src.Addr(), 8); err != nil {
						b.Fatal(err)
					}
					if err := e.Signal(rs[x].remote[1-x].Addr(), 0, 0); err != nil {
						b.Fatal(err)
					}
					for deadline := time.Now().Add(failBound); word(rs[1-x].win, 0) < uint64(i); {
						if _, err := e.Completed(); err != nil {
							b.Fatal(err)
						}
						if time.Now().After(deadline) {
							b.Fatalf("round %d: no signal within %v", i, failBound)
						}
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(time.Since(start).Microseconds())/float64(2*b.N), "µs/trip")
		})
	}
}
