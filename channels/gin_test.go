package channels_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	_ "github.com/weftccl/weft/hal/host"
)

// ginRank is one goroutine rank of a device-API test.
type ginRank struct {
	dev    hal.Device
	window hal.Buffer
	comm   *channels.DeviceComm
	boot   bootstrap.Bootstrap
}

// connectGin connects n hal/host ranks with windows of windowBytes and
// nsignals signals; every rank runs body(rank) in its own goroutine, then
// the ranks close after a barrier. Ranks alternate between a proxy of
// their own and the shared one.
func connectGin(t *testing.T, n int, windowBytes int64, nsignals int, opts channels.DeviceOptions, body func(t *testing.T, r *ginRank)) {
	t.Helper()
	job := fmt.Sprintf("gin-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
	boots := bootstrap.NewLocal(n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for rk := 0; rk < n; rk++ {
		wg.Add(1)
		go func(rk int) {
			defer wg.Done()
			errs[rk] = func() error {
				dev, err := hal.Open("host", hal.Config{Ordinal: rk, Rank: rk, JobID: job})
				if err != nil {
					return err
				}
				defer dev.Close()
				win, err := dev.Alloc(windowBytes)
				if err != nil {
					return err
				}
				defer win.Free()
				var proxy *channels.Proxy
				if rk%2 == 0 {
					proxy = channels.NewProxy(dev, rk)
					defer proxy.Close()
				}
				comm, err := channels.ConnectDevice(context.Background(), boots[rk], dev, proxy, win, nsignals, opts)
				if err != nil {
					return err
				}
				defer comm.Close()
				body(t, &ginRank{dev: dev, window: win, comm: comm, boot: boots[rk]})
				return boots[rk].Barrier(context.Background())
			}()
		}(rk)
	}
	wg.Wait()
	for rk, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", rk, err)
		}
	}
}

func block(t *testing.T, r *ginRank, i int) *channels.GinBlock {
	b, err := r.comm.Block(i)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pattern is the byte that rank src puts at byte i of case k.
func pattern(src, dst, k, i int) byte { return byte(src*61 + dst*17 + k*29 + i*7 + 1) }

var ginModes = []struct {
	name string
	opts channels.DeviceOptions
	want channels.PeerMode
}{
	{"memory", channels.DeviceOptions{}, channels.GinMemory},
	{"port", channels.DeviceOptions{ForcePort: true}, channels.GinPort},
}

// TestGinPutSignalWait: every rank puts to every rank (itself included),
// for sizes and offsets that cover empty, byte-wise, unaligned and
// vectorised copies, with a signal per put; receivers wait and check each
// byte, then acknowledge on a second signal before the next case reuses
// the slots. Peers are served by two blocks, concurrently.
func TestGinPutSignalWait(t *testing.T) {
	cases := []struct{ off, size int }{
		{0, 0}, {0, 1}, {3, 15}, {16, 16}, {1, 17}, {0, 4096}, {7, 4096 + 3}, {16, 1 << 20}, {5, 100003},
	}
	const slot = 1<<20 + 64
	for _, m := range ginModes {
		for _, n := range []int{2, 3, 4} {
			t.Run(fmt.Sprintf("%s/%dranks", m.name, n), func(t *testing.T) {
				// Window: n receive slots (slot r for rank r), then the send area.
				connectGin(t, n, int64(n+1)*slot, 2, m.opts, func(t *testing.T, r *ginRank) {
					me, comm := comm0(r)
					for p := 0; p < n; p++ {
						want := m.want
						if p == me {
							want = channels.GinSelf
						}
						if comm.Modes[p] != want {
							t.Errorf("rank %d: peer %d is %v, want %v", me, p, comm.Modes[p], want)
						}
					}
					blocks := []*channels.GinBlock{block(t, r, 0), block(t, r, 1)}
					win := blocks[0].Window()
					send := win[n*slot:]
					for k, c := range cases {
						for p := 0; p < n; p++ {
							// Wait for p's acknowledgement of case k-1.
							if k > 0 && !blocks[0].WaitSignal(p, 1, uint64(k)) {
								t.Fatalf("rank %d: ack of case %d from %d: %v", me, k-1, p, comm.Check())
							}
						}
						var wg sync.WaitGroup
						for bi, b := range blocks {
							wg.Add(1)
							go func() {
								defer wg.Done()
								for p := bi; p < n; p += len(blocks) {
									// Each peer's source is its own part of the send area,
									// or, for the largest case, all of it, one put at a time.
									src := send[:c.size]
									if n*c.size <= slot {
										src = send[p*c.size : (p+1)*c.size]
									}
									for i := range src {
										src[i] = pattern(me, p, k, i)
									}
									if !b.Put(p, int64(me*slot+c.off), src, 0) || !b.Flush(p) {
										t.Errorf("rank %d: put to %d: %v", me, p, comm.Check())
									}
								}
							}()
							if n*c.size > slot {
								wg.Wait() // one source buffer: puts one after the other, flushed
							}
						}
						wg.Wait()
						for p := 0; p < n; p++ {
							if !blocks[1].WaitSignal(p, 0, uint64(k+1)) {
								t.Fatalf("rank %d: case %d from %d: %v", me, k, p, comm.Check())
							}
							got := win[p*slot+c.off : p*slot+c.off+c.size]
							for i := range got {
								if got[i] != pattern(p, me, k, i) {
									t.Fatalf("rank %d case %+v from %d: byte %d is %d, want %d", me, c, p, i, got[i], pattern(p, me, k, i))
								}
							}
							if !blocks[1].Signal(p, 1) {
								t.Fatalf("rank %d: ack to %d: %v", me, p, comm.Check())
							}
						}
					}
					if err := comm.Check(); err != nil {
						t.Error(err)
					}
				})
			})
		}
	}
}

func comm0(r *ginRank) (int, *channels.DeviceComm) { return r.comm.Rank, r.comm }

// TestGinCounters: a counter counts the puts that are complete at the
// source, for port peers (through the proxy) and memory peers (at once);
// ResetCounter starts it again from 0.
func TestGinCounters(t *testing.T) {
	for _, m := range ginModes {
		t.Run(m.name, func(t *testing.T) {
			const n, rounds, size = 3, 5, 4096
			connectGin(t, n, (n+1)*size, 1, m.opts, func(t *testing.T, r *ginRank) {
				me, comm := comm0(r)
				b := block(t, r, 0)
				src := b.Window()[n*size:]
				for round := 1; round <= rounds; round++ {
					for p := 0; p < n; p++ {
						if p == me {
							continue
						}
						if !b.Put(p, int64(me*size), src[:size], -1) || !b.CounterPut(p, 7) {
							t.Fatalf("rank %d: %v", me, comm.Check())
						}
					}
					if !b.WaitCounter(7, uint64(round*(n-1))) {
						t.Fatalf("rank %d round %d: %v", me, round, comm.Check())
					}
				}
				if got, want := b.ReadCounter(7), uint64(rounds*(n-1)); got != want {
					t.Errorf("rank %d: counter 7 = %d, want %d", me, got, want)
				}
				b.ResetCounter(7)
				if got := b.ReadCounter(7); got != 0 {
					t.Errorf("rank %d: counter 7 after reset = %d", me, got)
				}
				if !b.CounterPut((me+1)%n, 7) || !b.WaitCounter(7, 1) {
					t.Fatalf("rank %d: after reset: %v", me, comm.Check())
				}
				if got := b.ReadCounter(8); got != 0 {
					t.Errorf("rank %d: counter 8 = %d, untouched", me, got)
				}
			})
		})
	}
}

// TestGinResetSignal: a reset makes the value read 0 without writing the
// word the peer owns, and later signals count from there.
func TestGinResetSignal(t *testing.T) {
	for _, m := range ginModes {
		t.Run(m.name, func(t *testing.T) {
			connectGin(t, 2, 64, 3, m.opts, func(t *testing.T, r *ginRank) {
				me, comm := comm0(r)
				b, peer := block(t, r, 0), 1-me
				phase := func(k int) {
					for i := 0; i < k; i++ {
						if !b.Signal(peer, 2) {
							t.Fatal(comm.Check())
						}
					}
					if !b.WaitSignal(peer, 2, uint64(k)) {
						t.Fatal(comm.Check())
					}
				}
				phase(3)
				if got := b.ReadSignal(peer, 2); got != 3 {
					t.Errorf("rank %d: signal 2 = %d, want 3", me, got)
				}
				// The peer signals nothing until both have reset.
				if err := r.boot.Barrier(context.Background()); err != nil {
					t.Fatal(err)
				}
				b.ResetSignal(peer, 2)
				if got := b.ReadSignal(peer, 2); got != 0 {
					t.Errorf("rank %d: signal 2 after reset = %d", me, got)
				}
				if err := r.boot.Barrier(context.Background()); err != nil {
					t.Fatal(err)
				}
				phase(2)
				if got := b.ReadSignal(peer, 2); got != 2 {
					t.Errorf("rank %d: signal 2 after reset and 2 signals = %d", me, got)
				}
				if got := b.ReadSignal(peer, 0); got != 0 {
					t.Errorf("rank %d: signal 0 = %d, never signalled", me, got)
				}
			})
		})
	}
}

// TestGinWaitTimeout: a wait for a signal that never comes records rank,
// peer, signal, expected and observed values, Check reports them as a
// *hal.TimeoutError, and other blocks' waits give up at once.
func TestGinWaitTimeout(t *testing.T) {
	for _, m := range ginModes {
		t.Run(m.name, func(t *testing.T) {
			opts := m.opts
			opts.Timeout = 100 * time.Millisecond
			connectGin(t, 3, 64, 4, opts, func(t *testing.T, r *ginRank) {
				me, comm := comm0(r)
				b := block(t, r, 2)
				if me == 1 {
					if !b.Signal(0, 3) {
						t.Fatal(comm.Check())
					}
				}
				if err := r.boot.Barrier(context.Background()); err != nil {
					t.Fatal(err)
				}
				if me != 0 {
					return
				}
				if b.WaitSignal(1, 3, 2) {
					t.Fatal("wait for a second signal that never comes returned true")
				}
				err := comm.Check()
				var te *hal.TimeoutError
				if !errors.As(err, &te) || !errors.Is(err, hal.ErrTimeout) {
					t.Fatalf("Check = %v, want a *hal.TimeoutError", err)
				}
				want := hal.TimeoutError{Rank: 0, Peer: 1, Channel: 1, Semaphore: 3, Block: 2, What: "GIN signal", Expected: 2, Observed: 1}
				if diff := cmp.Diff(want, *te); diff != "" {
					t.Errorf("timeout (-want +got):\n%s", diff)
				}
				start := time.Now()
				if block(t, r, 0).WaitSignal(2, 0, 1) {
					t.Error("a wait after a failure returned true")
				}
				if d := time.Since(start); d > opts.Timeout/2 {
					t.Errorf("a wait after a failure took %v, want it to give up at once", d)
				}
			})
		})
	}
}

// TestGinParams checks the packed weft_gin_params against the layout
// documented at GinParamsBytes.
func TestGinParams(t *testing.T) {
	connectGin(t, 3, 256, 5, channels.DeviceOptions{ForcePort: true}, func(t *testing.T, r *ginRank) {
		me, comm := comm0(r)
		p := comm.Params()
		if len(p) != channels.GinParamsBytes || channels.GinParamsBytes != 632 {
			t.Fatalf("params %d bytes, GinParamsBytes %d, want 632", len(p), channels.GinParamsBytes)
		}
		le := binary.LittleEndian
		u64 := func(off int) uint64 { return le.Uint64(p[off:]) }
		i32 := func(off int) int { return int(int32(le.Uint32(p[off:]))) }
		got := []any{u64(0), u64(8), u64(72 + 8*me), i32(584), i32(588), i32(592), i32(596), p[600:603], u64(64)}
		want := []any{r.window.Addr(), uint64(256), r.window.Addr(), me, 3, 5, channels.GinCounters,
			[]byte{2, 2, 2}, uint64(time.Duration(10 * time.Second).Nanoseconds())}
		want[7].([]byte)[me] = 0
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("rank %d params (-want +got):\n%s", me, diff)
		}
		for _, off := range []int{16, 24, 32, 40, 48, 56} {
			if u64(off) == 0 {
				t.Errorf("rank %d: params word at %d is 0", me, off)
			}
		}
		if !bytes.Equal(p[603:632], make([]byte, 29)) {
			t.Errorf("rank %d: modes of absent ranks are not 0", me)
		}
	})
}

// Ranks that disagree on the number of signals are told which.
func TestGinConnectDisagree(t *testing.T) {
	boots := bootstrap.NewLocal(2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for rk := 0; rk < 2; rk++ {
		wg.Add(1)
		go func(rk int) {
			defer wg.Done()
			dev, err := hal.Open("host", hal.Config{Ordinal: rk, JobID: "gin-disagree"})
			if err != nil {
				errs[rk] = err
				return
			}
			defer dev.Close()
			win, err := dev.Alloc(64)
			if err != nil {
				errs[rk] = err
				return
			}
			defer win.Free()
			c, err := channels.ConnectDevice(context.Background(), boots[rk], dev, nil, win, 1+rk, channels.DeviceOptions{})
			if err == nil {
				c.Close()
			}
			errs[rk] = err
		}(rk)
	}
	wg.Wait()
	for rk, err := range errs {
		if !errors.Is(err, hal.ErrInvalidUsage) {
			t.Errorf("rank %d: %v, want ErrInvalidUsage", rk, err)
		}
	}
}
