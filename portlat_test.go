package weft_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/host"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/cuda"
)

// pingPongPlan is a two-rank plan whose windowed group runs one round trip
// per 16-byte window: rank 0 puts a window into rank 1's scratch and
// signals, rank 1 waits, puts it back and signals, rank 0 waits. Over a
// port channel the put and the signal are triggers (kernel push → proxy →
// engine → remote semaphore); over a memory channel they are stores.
func pingPongPlan(rank int, port bool) *plan.Plan {
	name := "pingpong-memory"
	put := plan.Transfer(0, 1, []plan.Ref{plan.RS(0, 0)}, plan.L(plan.Input))
	var after []plan.Op
	if port {
		name = "pingpong-port"
		put = plan.PortPut(0, 0, 1, plan.RS(0, 0), plan.L(plan.Input))
		after = []plan.Op{plan.Flush(0)}
	}
	ops := []plan.Op{put, plan.Signal(0, 0), plan.Wait(0, 0)}
	if rank == 1 {
		ops = []plan.Op{plan.Wait(0, 0), put, plan.Signal(0, 0)}
	}
	return &plan.Plan{Name: name, Rank: rank, NRanks: 2, Channels: []plan.Channel{{Peer: 1 - rank, Port: port}}, Threads: 32,
		Scratch: plan.Simple, ScratchSlots: 1, Semaphores: 1,
		Groups: []plan.Group{{Blocks: 1, Window: plan.AlignBytes, NChunks: 1, Ops: ops, After: after}}}
}

// pingPong runs rounds round trips in one launch on two goroutine ranks of
// backend and returns the one-way time (launch time / 2·rounds, measured
// with device events on rank 0, best of reps launches).
func pingPong(backend string, port bool, rounds, reps int) (time.Duration, error) {
	boots := bootstrap.NewLocal(2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	var best time.Duration
	job := fmt.Sprintf("pingpong-%d-%v", os.Getpid(), port)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			errs[r] = func() error {
				ordinal := r
				if backend != host.Name {
					n, _ := cuda.DeviceCount()
					ordinal = r % max(n, 1)
				}
				dev, err := hal.Open(backend, hal.Config{Ordinal: ordinal, Rank: r, JobID: job})
				if err != nil {
					return err
				}
				defer dev.Close()
				p := pingPongPlan(r, port)
				count := int64(rounds) * plan.AlignBytes / 4
				res, err := channels.Setup(context.Background(), boots[r], dev, p, p.ScratchBytes(count, 4), 0)
				if err != nil {
					return err
				}
				defer res.Close()
				prog, err := dev.(hal.Executor).Prepare(hal.PlanSpec{Plan: p, Bindings: res.Bindings, DataType: plan.Float32, RedOp: plan.Sum, Library: channels.DeviceLibrary()})
				if err != nil {
					return err
				}
				defer prog.Close()
				in, err := dev.Alloc(count * 4)
				if err != nil {
					return err
				}
				defer in.Free()
				s, err := dev.NewStream()
				if err != nil {
					return err
				}
				defer s.Close()
				for i := 0; i < reps; i++ {
					start, err := s.Record()
					if err != nil {
						return err
					}
					res.Launching()
					if err := prog.Launch(s, &plan.Args{Count: count, Input: in.Addr(), Output: in.Addr(), Timeout: 10 * time.Second}); err != nil {
						return err
					}
					end, err := s.Record()
					if err != nil {
						return err
					}
					if err := s.Synchronize(time.Time{}); err != nil {
						return err
					}
					if err := res.Check(); err != nil {
						return err
					}
					d, err := end.Elapsed(start)
					start.Close()
					end.Close()
					if err != nil {
						return err
					}
					if r == 0 && (best == 0 || d < best) {
						best = d
					}
					if err := boots[r].Barrier(context.Background()); err != nil {
						return err
					}
				}
				return nil
			}()
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			return 0, fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return best / time.Duration(2*rounds), nil
}

// TestPortPingPong checks the ping-pong plans on hal/host (correct
// ordering of put, signal and wait through the proxy; no timing claim).
func TestPortPingPong(t *testing.T) {
	for _, port := range []bool{false, true} {
		if _, err := pingPong(host.Name, port, 200, 2); err != nil {
			t.Errorf("port=%v: %v", port, err)
		}
	}
}

// BenchmarkPortLatency reports the one-way latency of a put with signal
// (kernel push → the remote wait returns) over a port channel and, for
// comparison, over a memory channel, as the metric "us/one-way". Backends:
// WEFT_BENCH_HAL (comma-separated; default host).
func BenchmarkPortLatency(b *testing.B) {
	backends := []string{host.Name}
	if v := os.Getenv("WEFT_BENCH_HAL"); v != "" {
		backends = strings.Split(v, ",")
	}
	for _, be := range backends {
		for _, port := range []bool{true, false} {
			kind := "memory"
			if port {
				kind = "port"
			}
			b.Run(be+"/"+kind, func(b *testing.B) {
				var best time.Duration
				for i := 0; i < b.N; i++ {
					d, err := pingPong(be, port, 2000, 5)
					if err != nil {
						b.Fatal(err)
					}
					if best == 0 || d < best {
						best = d
					}
				}
				b.ReportMetric(float64(best)/1e3, "us/one-way")
			})
		}
	}
}
