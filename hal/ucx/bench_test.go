package ucx

import (
	"fmt"
	"testing"
	"time"

	"github.com/weftccl/weft/hal/netcore/nettest"
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
// signal from rank 0 to rank 1 and back (rank 1 answers when its
// semaphore moves), each side progressing its engine as the proxy would,
// over UCX's TCP and shared-memory transports. It reports µs per one-way
// trip: half the round trip. "separate": the put and the signal are
// issued as two requests (a ucp_put_nbx, the endpoint flush that orders
// it, the signal's active message); "batched": they are issued in one
// proxy pass (hal.EngineBatcher) from a host-registered source, so the
// put travels inside the signal's message, the path of a plan's staged
// small sends; "lone": no signal, the round number put from the sender's
// window onto the word the receiver polls, as an LL put
// (nettest.PingSide.Lone).
func BenchmarkUCXPingPong(b *testing.B) {
	needUCX(b)
	for _, tls := range transports {
		for _, mode := range []string{"separate", "batched", "lone"} {
			batch, lone := mode != "separate", mode == "lone"
			b.Run(tls+"/"+mode, func(b *testing.B) {
				rs := openRanks(b, 2, 4096, 4096, testOptions(tls, StagingAuto), testSecret)
				side := func(x int) nettest.PingSide {
					src := rs[x].src
					if batch {
						src = rs[x].win // exported: a host-registered source
					}
					return nettest.PingSide{Eng: rs[x].eng[1-x], Remote: rs[x].remote[1-x], Src: src, Win: rs[x].win, Batch: batch, Lone: lone}
				}
				elapsed := nettest.PingPong(b, side(0), side(1), 8, 64, 0)
				b.ReportMetric(float64(elapsed.Microseconds())/float64(2*b.N), "µs/trip")
			})
		}
	}
}

// BenchmarkUCXExchange measures rounds in which both ranks put the round
// number to each other at once as a lone put (an LL put's shape,
// nettest.PingSide.Lone) and wait for the other's, over UCX's TCP and
// shared-memory transports: a two-rank AllGather's host legs. It reports
// µs per round; BenchmarkSocketExchange is the socket transport's.
func BenchmarkUCXExchange(b *testing.B) {
	needUCX(b)
	for _, tls := range transports {
		b.Run(tls, func(b *testing.B) {
			rs := openRanks(b, 2, 4096, 4096, testOptions(tls, StagingAuto), testSecret)
			side := func(x int) nettest.PingSide {
				return nettest.PingSide{Eng: rs[x].eng[1-x], Remote: rs[x].remote[1-x], Src: rs[x].win, Win: rs[x].win, Lone: true}
			}
			elapsed := nettest.Exchange(b, side(0), side(1), 8, 64, 0)
			b.ReportMetric(float64(elapsed.Nanoseconds())/1e3/float64(b.N), "µs/round")
		})
	}
}
