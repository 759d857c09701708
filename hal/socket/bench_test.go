package socket

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/netcore/nettest"
)

// BenchmarkSocketPut measures one 64 MiB put and its signal from rank 0 to
// rank 1 over loopback (two NetDevices of this process on hal/host
// devices): the time from the first request to the semaphore at the
// receiver, with 1, 2 and 4 connections and the default 512 KiB chunks.
// It reports GB/s (10^9 bytes per second). A CPU-only loopback figure:
// it measures the transport's staging, framing and ordering on this
// machine's memory and TCP stack, not a network.
func BenchmarkSocketPut(b *testing.B) {
	const n = 64 << 20
	for _, conns := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			rs := openRanks(b, 2, semArea+n, n, Options{Conns: conns})
			s, d := rs[0], rs[1]
			fill(s.src.Host(), 1)
			e := s.eng[1]
			dst, sem := s.remote[1].Addr()+semArea, s.remote[1].Addr()+semOff
			b.SetBytes(n)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if err := e.Put(dst, s.src.Addr(), n); err != nil {
					b.Fatal(err)
				}
				if err := e.Signal(sem, 0, 0); err != nil {
					b.Fatal(err)
				}
				for atomic.LoadUint64(word(d.win, semOff)) < uint64(i+1) {
					if err := e.(*Engine).Err(); err != nil {
						b.Fatal(err)
					}
					time.Sleep(10 * time.Microsecond)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(n)*float64(b.N)/time.Since(start).Seconds()/1e9, "GB/s")
		})
	}
}

// BenchmarkSocketPingPong measures the round trip of an 8-byte put and its
// signal from rank 0 to rank 1 and back (rank 1 answers when its
// semaphore moves), over loopback between two NetDevices of this process.
// It reports µs per one-way trip: half the round trip. A CPU-only figure
// of the transport's per-message cost on this machine. "separate": a
// frame for the put and one for the signal; "batched": both issued in one
// proxy pass (hal.EngineBatcher), one put-with-signal frame where the
// source is host memory; "lone": no signal, the round number put from the
// sender's own window onto the word the receiver polls, as an LL put
// (nettest.PingSide.Lone).
func BenchmarkSocketPingPong(b *testing.B) {
	const n = 8
	for _, mode := range []string{"separate", "batched", "lone"} {
		batch, lone := mode != "separate", mode == "lone"
		b.Run(mode, func(b *testing.B) {
			rs := openRanks(b, 2, semArea+n, n, Options{})
			a, c := rs[0], rs[1]
			side := func(r *rank, eng hal.Engine, remote hal.Buffer) nettest.PingSide {
				src := r.src
				if lone {
					src = r.win // the window's data area, which the peer does not write then
				}
				return nettest.PingSide{Eng: eng, Remote: remote, Src: src, Win: r.win, Batch: batch, Lone: lone}
			}
			elapsed := nettest.PingPong(b, side(a, a.eng[1], a.remote[1]), side(c, c.eng[0], c.remote[0]), n, semArea, semOff)
			b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N)/2, "us/one-way")
		})
	}
}

// BenchmarkSocketExchange measures rounds in which both ranks put an LL
// put's shape (a lone 8-byte put carrying the round, nettest.PingSide.Lone)
// to each other at once and wait for the other's: a two-rank AllGather's
// host legs over loopback, each direction on its own engine and
// connection. It reports µs per round, the floor a 64 B AllGather's
// cycle pays on this machine before any GPU work (docs/network.md), with
// receivers that consume each frame as they read it (Options.NoPeek) and
// with peeking receivers (the default).
func BenchmarkSocketExchange(b *testing.B) {
	const n = 8
	for _, mode := range []string{"read", "peek"} {
		b.Run(mode, func(b *testing.B) {
			rs := openRanks(b, 2, semArea+n, n, Options{NoPeek: mode == "read"})
			a, c := rs[0], rs[1]
			side := func(r *rank, eng hal.Engine, remote hal.Buffer) nettest.PingSide {
				return nettest.PingSide{Eng: eng, Remote: remote, Src: r.win, Win: r.win, Lone: true}
			}
			elapsed := nettest.Exchange(b, side(a, a.eng[1], a.remote[1]), side(c, c.eng[0], c.remote[0]), n, semArea, semOff)
			b.ReportMetric(float64(elapsed.Nanoseconds())/1e3/float64(b.N), "us/round")
		})
	}
}

// BenchmarkSocketSecure measures the cost of authentication and
// WEFT_SOCKET_ENCRYPT: puts of 1 MiB (and their signal) from rank 0 to
// rank 1, timed to the semaphore at the receiver, over 2 connections with
// 512 KiB chunks, for a job without a secret ("plain"), with a secret
// ("auth": the handshake only, frames in clear) and with AES-256-GCM
// ("encrypted").
func BenchmarkSocketSecure(b *testing.B) {
	const n = 1 << 20
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	for _, mode := range []string{"plain", "auth", "encrypted"} {
		b.Run("mode="+mode+"/size=1MiB", func(b *testing.B) {
			var secret []byte
			if mode != "plain" {
				secret = key
			}
			rs := openRanksWith(b, 2, semArea+n, n, Options{Encrypt: mode == "encrypted"}, secret)
			s, d := rs[0], rs[1]
			fill(s.src.Host(), 1)
			e := s.eng[1]
			dst, sem := s.remote[1].Addr()+semArea, s.remote[1].Addr()+semOff
			b.SetBytes(n)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if err := e.Put(dst, s.src.Addr(), n); err != nil {
					b.Fatal(err)
				}
				if err := e.Signal(sem, 0, 0); err != nil {
					b.Fatal(err)
				}
				for atomic.LoadUint64(word(d.win, semOff)) < uint64(i+1) {
					if err := e.(*Engine).Err(); err != nil {
						b.Fatal(err)
					}
					time.Sleep(10 * time.Microsecond)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(n)*float64(b.N)/time.Since(start).Seconds()/1e9, "GB/s")
		})
	}
}
