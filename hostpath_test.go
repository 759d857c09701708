package weft_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// BenchmarkLaunchChoice times the host side of Launch before the backend
// enqueues: argument checks, plan choice, operator and arguments (the
// "plan choice" stage of WEFT_PROXY_PROFILE, 2.6–2.8 µs per call at p50 on
// the 2×H200 host, docs/bench/2026-11-26e-h100x2), on hal/host with 2
// ranks, per collective and size.
func BenchmarkLaunchChoice(b *testing.B) {
	colls := []algorithms.Collective{algorithms.AllReduce, algorithms.AllGather, algorithms.ReduceScatter, algorithms.Broadcast}
	sizes := []int64{2, 1 << 18, 1 << 25}
	call := func(coll algorithms.Collective, count int64) weft.Call {
		return weft.Call{Coll: coll, Send: 1 << 20, Recv: 1 << 30, Count: count, Type: plan.BFloat16, Op: plan.Sum}
	}
	done := make(chan struct{})
	errs := runRanksWith(b, "host", 2, func(int, hal.Device) weft.Options { return weft.Options{} },
		func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
			// Plans are set up collectively on their first choice.
			for _, coll := range colls {
				for _, count := range sizes {
					if _, err := weft.ChooseForBench(c, call(coll, count)); err != nil {
						return err
					}
				}
			}
			if rank != 0 {
				<-done // Close is collective
				return nil
			}
			defer close(done)
			for _, coll := range colls {
				for _, count := range sizes {
					call := call(coll, count)
					b.Run(fmt.Sprintf("%v/%d", coll, count*2), func(b *testing.B) {
						b.ReportAllocs()
						for i := 0; i < b.N; i++ {
							weft.ChooseForBench(c, call)
						}
					})
				}
			}
			return nil
		})
	for r, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
}

// BenchmarkLaunchP2PHost times LaunchP2P of one send and one receive of 16
// bytes (WEFT_BENCH_P2P_BYTES; a sendrecv) on hal/host with 2 ranks, synchronising every 64
// calls. Most of the time is hal/host executing; its CPU profile
// (-cpuprofile, focused on LaunchP2P) shows the host side of the call.
func BenchmarkLaunchP2PHost(b *testing.B) {
	errs := runRanksWith(b, "host", 2, func(int, hal.Device) weft.Options { return weft.Options{} },
		func(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
			buf, err := dev.Alloc(2 * p2pBenchBytes)
			if err != nil {
				return err
			}
			defer buf.Free()
			peer := 1 - rank
			ops := []weft.P2P{{Peer: peer, Send: true, Buf: buf.Addr(), Bytes: p2pBenchBytes}, {Peer: peer, Buf: buf.Addr() + uint64(p2pBenchBytes), Bytes: p2pBenchBytes}}
			for i := 0; i < b.N; i++ {
				if err := c.LaunchP2P(ops, s); err != nil {
					return err
				}
				if i%64 == 63 {
					if err := c.Synchronize(s); err != nil {
						return err
					}
				}
			}
			return c.Synchronize(s)
		})
	for r, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
}

// p2pBenchBytes is the size of BenchmarkLaunchP2PHost's send and receive
// (WEFT_BENCH_P2P_BYTES overrides).
var p2pBenchBytes = func() int64 {
	if n, err := strconv.ParseInt(os.Getenv("WEFT_BENCH_P2P_BYTES"), 10, 64); err == nil && n > 0 {
		return n
	}
	return 16
}()
