package nvlink

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/cudadev/porttest"
)

// TestPortTwoGPUsLanes runs the port-mapped checks between GPU 0 and GPU 1
// with engines of 1, 2 and 5 lanes (WEFT_CE_LANES): the checks' puts of
// 5–9 MiB are cut over the put lanes, and CopyBeforeSignal's copy then put
// of the same buffer crosses lanes.
func TestPortTwoGPUsLanes(t *testing.T) {
	d0 := openTest(t, 0)
	d1 := openTest(t, 1)
	if l := d0.Link(d1.Endpoint()); l.Caps&hal.CapPortMapped == 0 {
		t.Skipf("GPUs 0 and 1 are not linked: %s", l.Reason)
	}
	for _, lanes := range []string{"1", "2", "5"} {
		t.Run("lanes"+lanes, func(t *testing.T) {
			t.Setenv("WEFT_CE_LANES", lanes)
			porttest.Run(t, d0, d1)
		})
	}
}

// BenchmarkEnginePut measures the copy engines of GPU 0 to GPU 1 (and,
// bidir, of GPU 1 to GPU 0 at the same time) with 1 to 5 lanes: puts of
// window bytes, each followed by a signal, as a port plan's windows are,
// over 512 MiB per iteration. It reports GB/s per direction (host-timed
// from the first put to the last completion).
func BenchmarkEnginePut(b *testing.B) {
	d0 := openTestB(b, 0)
	d1 := openTestB(b, 1)
	const total = 512 << 20
	for _, bidir := range []bool{false, true} {
		for _, window := range []int64{8 << 20, 32 << 20} {
			for _, lanes := range []int{1, 2, 3, 4, 5} {
				name := fmt.Sprintf("bidir=%v/window=%dM/lanes=%d", bidir, window>>20, lanes)
				b.Run(name, func(b *testing.B) {
					links := []*benchLink{newBenchLink(b, d0, d1, total, lanes)}
					if bidir {
						links = append(links, newBenchLink(b, d1, d0, total, lanes))
					}
					b.ResetTimer()
					start := time.Now()
					for i := 0; i < b.N; i++ {
						for off := int64(0); off < total; off += window {
							for _, l := range links {
								if err := l.e.Put(l.dst.Addr()+uint64(off), l.src.Addr()+uint64(off), window); err != nil {
									b.Fatal(err)
								}
								if err := l.e.Signal(l.sems.Addr(), 0, 0); err != nil {
									b.Fatal(err)
								}
							}
						}
					}
					for _, l := range links {
						tk, err := l.e.Mark()
						if err != nil {
							b.Fatal(err)
						}
						if err := hal.AwaitTicket(l.e, tk, time.Now().Add(porttest.Deadline)); err != nil {
							b.Fatal(err)
						}
					}
					el := time.Since(start)
					b.ReportMetric(float64(total)*float64(b.N)/el.Seconds()/1e9, "GB/s")
				})
			}
		}
	}
}

type benchLink struct {
	e              hal.Engine
	src, dst, sems hal.Buffer
}

func newBenchLink(b *testing.B, src, dst *Device, bytes int64, lanes int) *benchLink {
	b.Helper()
	l := &benchLink{}
	alloc := func(d *Device, n int64) hal.Buffer {
		buf, err := d.Alloc(n)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { buf.Free() })
		return buf
	}
	imp := func(buf hal.Buffer) hal.Buffer {
		h, err := dst.ExportPort(buf)
		if err != nil {
			b.Fatal(err)
		}
		r, err := src.ImportPort(h)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { r.Free() })
		return r
	}
	l.src = alloc(src, bytes)
	l.dst = imp(alloc(dst, bytes))
	l.sems = imp(alloc(dst, 64))
	e, err := src.NewLaneEngine(fmt.Sprintf("GPU %d", dst.Info().Ordinal), lanes)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := e.Close(); err != nil {
			b.Error(err)
		}
	})
	l.e = e
	return l
}

// openTestB is openTest for benchmarks.
func openTestB(b *testing.B, ordinal int) *Device {
	b.Helper()
	if a := (backend{}).Probe(); !a.Available {
		requireOrSkip(b, "nvlink unavailable: "+a.Reason)
	}
	if n, _ := cuda.DeviceCount(); ordinal >= n {
		b.Skipf("needs %d GPUs, host has %d", ordinal+1, n)
	}
	if os.Getenv("WEFT_CACHE_DIR") == "" {
		b.Setenv("WEFT_CACHE_DIR", b.TempDir())
	}
	d, err := Open(hal.Config{Ordinal: ordinal, Rank: ordinal})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := d.Close(); err != nil {
			b.Error(err)
		}
	})
	return d
}
