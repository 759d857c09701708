package main

import (
	"context"
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

// TestMoEHost runs dispatch, expert and combine on hal/host ranks in
// goroutines, through memory-mapped and forced port peers, for several
// iterations, and compares every rank's output bit for bit with the host
// reference.
func TestMoEHost(t *testing.T) {
	for _, n := range []int{2, 4} {
		for _, port := range []bool{false, true} {
			name := fmt.Sprintf("%dranks/memory", n)
			if port {
				name = fmt.Sprintf("%dranks/port", n)
			}
			t.Run(name, func(t *testing.T) {
				c := Config{NRanks: n, Tokens: 96, Hidden: 64, TopK: 4, Experts: 2 * n * 2, Seed: 7, BlocksPerPeer: 3}
				runHost(t, c, port, 3)
			})
		}
	}
}

func runHost(t *testing.T, c Config, port bool, iters int) {
	t.Helper()
	job := fmt.Sprintf("moe-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
	boots := bootstrap.NewLocal(c.NRanks)
	var wg sync.WaitGroup
	errs := make([]error, c.NRanks)
	for rk := 0; rk < c.NRanks; rk++ {
		wg.Add(1)
		go func(rk int) {
			defer wg.Done()
			errs[rk] = func() error {
				ctx := context.Background()
				dev, err := hal.Open("host", hal.Config{Ordinal: rk, Rank: rk, JobID: job})
				if err != nil {
					return err
				}
				defer dev.Close()
				l := c.layout()
				win, err := dev.Alloc(l.Bytes)
				if err != nil {
					return err
				}
				defer win.Free()
				comm, err := channels.ConnectDevice(ctx, boots[rk], dev, nil, win, nSignals, channels.DeviceOptions{ForcePort: port})
				if err != nil {
					return err
				}
				defer comm.Close()
				rt, err := Route(c, rk)
				if err != nil {
					return err
				}
				x := Tokens(c, rk)
				h := &hostLayer{c: c, l: l, comm: comm, rt: rt, x: x, out: make([]uint16, c.Tokens*c.Hidden)}
				want := Reference(c, rt, x)
				for it := 1; it <= iters; it++ {
					clear(h.out)
					if err := h.Step(uint64(it)); err != nil {
						return err
					}
					if diff := cmp.Diff(want, h.out); diff != "" {
						return fmt.Errorf("iteration %d: output differs from the reference (-want +got):\n%.2000s", it, diff)
					}
				}
				return boots[rk].Barrier(ctx)
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

// Routing sends different numbers of rows to different ranks, weights are
// powers of two, and every copy of a token has its own row.
func TestRoute(t *testing.T) {
	c := Config{NRanks: 4, Tokens: 512, Hidden: 8, TopK: 8, Experts: 64, Seed: 1, BlocksPerPeer: 1}
	for rk := 0; rk < c.NRanks; rk++ {
		rt, err := Route(c, rk)
		if err != nil {
			t.Fatal(err)
		}
		total, distinct := 0, map[int]bool{}
		for _, n := range rt.Counts {
			total += n
			distinct[n] = true
		}
		if total != c.Tokens*c.TopK || len(distinct) < 2 {
			t.Errorf("rank %d: counts %v: want %d rows in all, not all equal", rk, rt.Counts, c.Tokens*c.TopK)
		}
		for k, w := range rt.Weight {
			if w != 0.5 && w != 0.25 && w != 0.125 && w != 0.0625 {
				t.Fatalf("rank %d: weight %d is %v", rk, k, w)
			}
			d, p := rt.Dest[k], rt.Pos[k]
			if int(rt.SrcTok[d][p]) != k/c.TopK {
				t.Fatalf("rank %d: copy %d is row %d for rank %d, which holds token %d", rk, k, p, d, rt.SrcTok[d][p])
			}
		}
	}
}

func TestRoundBF16(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want uint16
	}{{1, 0x3f80}, {-8, 0xc100}, {1 + 1.0/256, 0x3f80}, {1 + 3.0/256, 0x3f82}, {0, 0}, {257, 0x4380}, {259, 0x4382}} {
		if got := roundBF16(tc.in); got != tc.want {
			t.Errorf("roundBF16(%v) = %#x, want %#x", tc.in, got, tc.want)
		}
	}
}
