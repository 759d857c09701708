package ucx_test

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/weftccl/weft/internal/ucx"
)

// BenchmarkPingPong measures UCX's own one-way latency over TCP on
// loopback between two contexts of this process, each side a goroutine
// locked to a thread that progresses its worker without pause: "am", an
// 8-byte eager active message each way (the path of weft's signals);
// "put", an 8-byte ucp_put_nbx each way onto a word the other side polls
// (the path of an LL put). It reports µs per one-way trip. The floor
// under hal/ucx's loops (BenchmarkUCXPingPong), without them.
func BenchmarkPingPong(b *testing.B) {
	l, err := ucx.Load()
	if err != nil {
		b.Skipf("UCX not installed: %v", err)
	}
	for _, mode := range []string{"am", "put"} {
		b.Run(mode, func(b *testing.B) {
			type side struct {
				ctx *ucx.Context
				w   *ucx.Worker
				ep  *ucx.Endpoint
				k   *ucx.Rkey
				mem *ucx.Mem
				buf []uint64 // [0]: the word the peer puts onto; [1]: the source
			}
			s := make([]*side, 2)
			for i := range s {
				ctx, err := l.NewContext(ucx.FeatureRMA|ucx.FeatureAM|ucx.FeatureWakeup, map[string]string{"TLS": "tcp", "NET_DEVICES": "lo"})
				if err != nil {
					b.Fatal(err)
				}
				w, err := ctx.NewWorker(7, 64)
				if err != nil {
					b.Fatal(err)
				}
				buf := make([]uint64, 2)
				mem, err := ctx.MemMap(uintptr(unsafe.Pointer(&buf[0])), 16, ucx.MemHost)
				if err != nil {
					b.Fatal(err)
				}
				s[i] = &side{ctx: ctx, w: w, mem: mem, buf: buf}
			}
			for i, x := range s {
				peer := s[1-i]
				addr, err := peer.w.Address()
				if err != nil {
					b.Fatal(err)
				}
				if x.ep, err = x.w.Connect(addr); err != nil {
					b.Fatal(err)
				}
				rk, err := peer.mem.PackRkey()
				if err != nil {
					b.Fatal(err)
				}
				if x.k, err = x.ep.UnpackRkey(rk); err != nil {
					b.Fatal(err)
				}
			}
			defer func() {
				for _, x := range s {
					x.k.Destroy()
					r, _ := x.ep.Close(true)
					for i := 0; i < 1000 && r.Pending(); i++ {
						x.w.Progress()
						l.Done(&r, "close")
					}
					x.mem.Unmap()
					x.w.Close()
					x.ctx.Close()
				}
			}()
			send := func(x *side, peer *side, i uint64) {
				var r ucx.Request
				var err error
				if mode == "am" {
					r, err = x.ep.SendAM(7, []byte("eightby!"))
				} else {
					atomic.StoreUint64(&x.buf[1], i)
					r, err = x.ep.Put(uintptr(unsafe.Pointer(&x.buf[1])), 8, uint64(uintptr(unsafe.Pointer(&peer.buf[0]))), x.k)
				}
				if err != nil {
					panic(err)
				}
				for r.Pending() {
					x.w.Progress()
					if done, err := l.Done(&r, "send"); err != nil {
						panic(err)
					} else if done {
						break
					}
				}
			}
			recv := func(x *side, i uint64) {
				deadline := time.Now().Add(10 * time.Second)
				for {
					x.w.Progress()
					if mode == "am" {
						if _, ok := x.w.PopAM(); ok {
							return
						}
					} else if atomic.LoadUint64(&x.buf[0]) >= i {
						return
					}
					if time.Now().After(deadline) {
						panic("no message within 10 s")
					}
				}
			}
			done := make(chan struct{})
			go func() {
				runtime.LockOSThread()
				defer close(done)
				for i := 1; i <= b.N; i++ {
					recv(s[1], uint64(i))
					send(s[1], s[0], uint64(i))
				}
			}()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ResetTimer()
			start := time.Now()
			for i := 1; i <= b.N; i++ {
				send(s[0], s[1], uint64(i))
				recv(s[0], uint64(i))
			}
			el := time.Since(start)
			<-done
			b.ReportMetric(float64(el.Nanoseconds())/1e3/float64(2*b.N), "µs/trip")
		})
	}
}
