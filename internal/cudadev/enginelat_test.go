package cudadev

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
)

// BenchmarkCopyEngineLatency measures the floor that a copy engine puts
// under a port-channel put-with-signal, without the proxy or a kernel:
// the host issues a request on a CopyEngine of GPU 0 and spins on the
// semaphore word, which the signal writes into pinned host memory. Cases:
// a signal alone; a 16-byte put then the signal, to GPU 0's own memory,
// to GPU 1's memory over NVLink (peer access) and to pinned host memory
// (the socket transport's staging copy). Metrics: "us/issue" (the engine
// calls: cuMemcpyAsync, cuStreamWriteValue64) and "us/visible" (issue to
// the host seeing the semaphore), medians over b.N requests.
func BenchmarkCopyEngineLatency(b *testing.B) {
	d0 := openBench(b, 0)
	sem, err := d0.AllocHostPinned(4096)
	if err != nil {
		b.Fatal(err)
	}
	defer sem.Free()
	word := (*uint64)(unsafe.Pointer(&sem.Host()[0]))
	src, err := d0.AllocDevice(4096)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Free()
	local, err := d0.AllocDevice(4096)
	if err != nil {
		b.Fatal(err)
	}
	defer local.Free()
	hostDst, err := d0.AllocHostPinned(4096)
	if err != nil {
		b.Fatal(err)
	}
	defer hostDst.Free()
	cases := []struct {
		name string
		dst  uint64 // 0: no put
	}{{"signal", 0}, {"put16+signal/local", local.Addr()}, {"put16+signal/host", hostDst.Addr()}}
	if n := gpuCountB(b); n >= 2 {
		d1 := openBench(b, 1)
		peer, err := d1.AllocDevice(4096)
		if err != nil {
			b.Fatal(err)
		}
		defer peer.Free()
		cases = append(cases, struct {
			name string
			dst  uint64
		}{"put16+signal/peer", peer.Addr()})
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			e, err := d0.NewCopyEngine("bench")
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			issueVisible(b, word, b.N, func(int) error {
				if c.dst != 0 {
					if err := e.Put(c.dst, src.Addr(), 16); err != nil {
						return err
					}
				}
				return e.Signal(sem.Addr(), 0, 0)
			})
		})
	}
}

// issueVisible runs n requests: issue(i) queues request i (1 … n), which
// ends by storing i into *word (pinned host memory); the host spins until
// it sees it. It reports the medians of the issue time ("us/issue") and of
// issue to the store seen ("us/visible").
func issueVisible(b *testing.B, word *uint64, n int, issue func(i int) error) {
	atomic.StoreUint64(word, 0)
	issued := make([]time.Duration, 0, n)
	visible := make([]time.Duration, 0, n)
	for i := 1; i <= n; i++ {
		t0 := time.Now()
		if err := issue(i); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		deadline := t0.Add(5 * time.Second)
		for atomic.LoadUint64(word) < uint64(i) {
			if time.Now().After(deadline) {
				b.Fatalf("request %d: semaphore %d after 5 s: %v", i, atomic.LoadUint64(word), hal.ErrTimeout)
			}
		}
		issued = append(issued, t1.Sub(t0))
		visible = append(visible, time.Since(t0))
	}
	b.ReportMetric(median(issued).Seconds()*1e6, "us/issue")
	b.ReportMetric(median(visible).Seconds()*1e6, "us/visible")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// openBench opens GPU ordinal for a benchmark, skipping (failing under
// WEFT_REQUIRE) where CUDA is unavailable.
func openBench(b *testing.B, ordinal int) *Device {
	b.Helper()
	if a := Probe(); !a.Available {
		requireOrSkip(b, "CUDA unavailable: "+a.Reason)
	}
	d, err := openDev(hal.Config{Ordinal: ordinal, Rank: ordinal, JobID: fmt.Sprintf("enginelat-%d", ordinal)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

func gpuCountB(b *testing.B) int {
	n, err := cuda.DeviceCount()
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkDriverCallCost measures the host time of each CUDA driver call
// a port-channel engine may make per request (the proxy's share of a
// put-with-signal's one-way latency), as "us/call", the median over b.N
// calls queued back to back on one stream (synchronised every 32 calls so
// the queue never fills). Cases: 16-byte cuMemcpyAsync to GPU 0's own
// memory, to GPU 1 over NVLink and to pinned host memory; an 8-byte
// cuMemcpyHtoDAsync from pinned memory to GPU 1; cuStreamWriteValue64 to
// GPU 0, GPU 1 and pinned host memory; cuEventRecord; cuStreamQuery.
// "signal-by-copy" measures, as BenchmarkCopyEngineLatency, a 16-byte put
// to GPU 1 followed by the semaphore stored by an 8-byte device-to-host
// copy from a table of values: "us/issue" and "us/visible".
func BenchmarkDriverCallCost(b *testing.B) {
	d0 := openBench(b, 0)
	if gpuCountB(b) < 2 {
		requireOrSkip(b, "one GPU")
	}
	d1 := openBench(b, 1)
	alloc := func(d *Device) hal.Buffer {
		buf, err := d.AllocDevice(1 << 20)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { buf.Free() })
		return buf
	}
	pinned, err := d0.AllocHostPinned(1 << 20)
	if err != nil {
		b.Fatal(err)
	}
	defer pinned.Free()
	src, local, peer := alloc(d0), alloc(d0), alloc(d1)
	s, err := d0.CreateStream("bench")
	if err != nil {
		b.Fatal(err)
	}
	defer d0.DestroyStream(s)
	ev, err := d0.ctx.EventCreate(cuda.EventDisableTiming)
	if err != nil {
		b.Fatal(err)
	}
	defer ev.Destroy()
	hp := unsafe.Pointer(&pinned.Host()[0])
	// Kernel launches with an 8-byte parameter block and with one the
	// size of the plans' weft_params (plan.ParamsBytes, 1,800 bytes).
	m := compileTestKernels(b, d0)
	defer m.Close()
	incr, err := m.Kernel("incr")
	if err != nil {
		b.Fatal(err)
	}
	incrBig, err := m.Kernel("incr_big")
	if err != nil {
		b.Fatal(err)
	}
	small := (&params{}).u64(local.Addr()).bytes()
	big := make([]byte, 1800)
	binary.LittleEndian.PutUint64(big, local.Addr())
	one, warp := cuda.Dim3{X: 1, Y: 1, Z: 1}, cuda.Dim3{X: 32, Y: 1, Z: 1}
	cases := []struct {
		name string
		call func(i int) error
	}{
		{"memcpy16/local", func(int) error { return s.MemcpyAsync(cuda.DevicePtr(local.Addr()), cuda.DevicePtr(src.Addr()), 16) }},
		{"memcpy16/peer", func(int) error { return s.MemcpyAsync(cuda.DevicePtr(peer.Addr()), cuda.DevicePtr(src.Addr()), 16) }},
		{"memcpy16/host", func(int) error { return s.MemcpyAsync(cuda.DevicePtr(pinned.Addr()), cuda.DevicePtr(src.Addr()), 16) }},
		{"htod8/peer", func(int) error { return s.MemcpyHtoDAsync(cuda.DevicePtr(peer.Addr()), hp, 8) }},
		{"write64/local", func(i int) error { return s.WriteValue64(cuda.DevicePtr(local.Addr()), uint64(i), 0) }},
		{"write64/peer", func(i int) error { return s.WriteValue64(cuda.DevicePtr(peer.Addr()), uint64(i), 0) }},
		{"write64/host", func(i int) error { return s.WriteValue64(cuda.DevicePtr(pinned.Addr()), uint64(i), 0) }},
		{"event-record", func(int) error { return ev.Record(s) }},
		{"stream-query", func(int) error { _, err := s.Query(); return err }},
		{"launch/params8", func(int) error { return incr.fn.Launch(one, warp, 0, s, small) }},
		{"launch/params1800", func(int) error { return incrBig.fn.Launch(one, warp, 0, s, big) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			took := make([]time.Duration, 0, b.N)
			for i := 1; i <= b.N; i++ {
				t0 := time.Now()
				if err := c.call(i); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(t0))
				if i%32 == 0 {
					if err := s.Synchronize(); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := s.Synchronize(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(median(took).Seconds()*1e6, "us/call")
		})
	}
	b.Run("signal-by-copy", func(b *testing.B) {
		// A table of the values 1…n in GPU 0's memory; request i copies
		// entry i into the pinned semaphore word.
		n := min(b.N, (1<<20)/8)
		table := make([]byte, 8*n)
		for i := range n {
			*(*uint64)(unsafe.Pointer(&table[8*i])) = uint64(i + 1)
		}
		if err := d0.ctx.MemcpyHtoD(cuda.DevicePtr(local.Addr()), table); err != nil {
			b.Fatal(err)
		}
		issueVisible(b, (*uint64)(hp), n, func(i int) error {
			if err := s.MemcpyAsync(cuda.DevicePtr(peer.Addr()), cuda.DevicePtr(src.Addr()), 16); err != nil {
				return err
			}
			return s.MemcpyAsync(cuda.DevicePtr(pinned.Addr()), cuda.DevicePtr(local.Addr()+uint64(8*(i-1))), 8)
		})
	})
}

// BenchmarkDoorbellPut measures a port put-with-signal whose copy-engine
// work is queued before the kernel asks for it, so that no host call lies
// on the path: each GPU's stream holds, per round i, a wait until the
// GPU's bell word reads ≥ i (cuStreamWaitValue64), a 16-byte copy into the
// peer (cuMemcpyAsync) and a store of i into the peer's semaphore word
// (cuStreamWriteValue64). A kernel on each GPU (bellpong) rings its bell
// with a store and polls its own semaphore: a ping-pong of rounds round
// trips per launch. Cases: "put16+signal" (the chain above) and "signal"
// (no copy). Metric "us/oneway": the best launch's span / (2·rounds), from
// GPU 0's globaltimer. Compare with BenchmarkPortLatency (the FIFO and the
// proxy issuing each request when it arrives) and its memory-channel case.
func BenchmarkDoorbellPut(b *testing.B) {
	const rounds = 200
	d0 := openBench(b, 0)
	if gpuCountB(b) < 2 {
		requireOrSkip(b, "one GPU")
	}
	devs := [2]*Device{d0, openBench(b, 1)}
	type side struct {
		bell, sem, src, dst, elapsed *Buffer
		kern, ops                    cuda.Stream
		fn                           *Function
	}
	var sides [2]side
	for r, d := range devs {
		s := &sides[r]
		for _, p := range []**Buffer{&s.bell, &s.sem, &s.src, &s.elapsed} {
			buf, err := d.AllocDevice(4096)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { buf.Free() })
			*p = buf
		}
		var err error
		if s.kern, err = d.CreateStream("bellpong kernel"); err != nil {
			b.Fatal(err)
		}
		if s.ops, err = d.CreateStream("bellpong engine"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.DestroyStream(s.kern); d.DestroyStream(s.ops) })
		m := compileTestKernels(b, d)
		b.Cleanup(func() { m.Close() })
		if s.fn, err = m.Kernel("bellpong"); err != nil {
			b.Fatal(err)
		}
	}
	for r := range sides {
		buf, err := devs[1-r].AllocDevice(4096)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { buf.Free() })
		sides[r].dst = buf
	}
	const waitGEQ = 0 // CU_STREAM_WAIT_VALUE_GEQ
	for _, c := range []struct {
		name string
		copy bool
	}{{"put16+signal", true}, {"signal", false}} {
		b.Run(c.name, func(b *testing.B) {
			var best time.Duration
			for n := 0; n < b.N; n++ {
				for r, d := range devs {
					for _, buf := range []*Buffer{sides[r].bell, sides[r].sem, sides[r].elapsed} {
						if err := d.ctx.MemsetD8(cuda.DevicePtr(buf.Addr()), 0, 8); err != nil {
							b.Fatal(err)
						}
					}
				}
				for r := range sides {
					s, peer := &sides[r], &sides[1-r]
					for i := uint64(1); i <= rounds; i++ {
						if err := s.ops.WaitValue64(cuda.DevicePtr(s.bell.Addr()), i, waitGEQ); err != nil {
							b.Fatal(err)
						}
						if c.copy {
							if err := s.ops.MemcpyAsync(cuda.DevicePtr(s.dst.Addr()), cuda.DevicePtr(s.src.Addr()), 16); err != nil {
								b.Fatal(err)
							}
						}
						if err := s.ops.WriteValue64(cuda.DevicePtr(peer.sem.Addr()), i, 0); err != nil {
							b.Fatal(err)
						}
					}
				}
				one, warp := cuda.Dim3{X: 1, Y: 1, Z: 1}, cuda.Dim3{X: 1, Y: 1, Z: 1}
				for r := range sides {
					s := &sides[r]
					starts := uint32(0)
					if r == 0 {
						starts = 1
					}
					p := (&params{}).u64(s.bell.Addr()).u64(s.sem.Addr()).u64(s.elapsed.Addr()).u32(rounds).u32(starts).u64(uint64(5 * time.Second)).bytes()
					if err := s.fn.fn.Launch(one, warp, 0, s.kern, p); err != nil {
						b.Fatal(err)
					}
				}
				spans := [2]uint64{}
				for r, d := range devs {
					s := &sides[r]
					if err := s.kern.Synchronize(); err != nil {
						b.Fatal(err)
					}
					out := make([]byte, 8)
					if err := d.ctx.MemcpyDtoH(out, cuda.DevicePtr(s.elapsed.Addr())); err != nil {
						b.Fatal(err)
					}
					spans[r] = binary.LittleEndian.Uint64(out)
					if spans[r] == ^uint64(0) {
						// Release the chain so that the stream drains: a
						// wait for ≥ i passes once the bell reads rounds.
						last := binary.LittleEndian.AppendUint64(nil, rounds)
						_ = d.ctx.MemcpyHtoD(cuda.DevicePtr(s.bell.Addr()), last)
					}
				}
				for r := range sides {
					if err := sides[r].ops.Synchronize(); err != nil {
						b.Fatal(err)
					}
				}
				if spans[0] == ^uint64(0) || spans[1] == ^uint64(0) {
					b.Fatalf("rank 0 span %d, rank 1 span %d: a bell was not carried within 5 s: %v", spans[0], spans[1], hal.ErrTimeout)
				}
				if t := time.Duration(spans[0]); best == 0 || t < best {
					best = t
				}
			}
			b.ReportMetric(best.Seconds()*1e6/(2*rounds), "us/oneway")
		})
	}
}
