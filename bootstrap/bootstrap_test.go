package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/weftccl/weft/hal"
)

// impl builds a job of n connected ranks.
type impl struct {
	name string
	make func(t *testing.T, n int) []Bootstrap
}

var impls = []impl{
	{"tcp", connectTCP},
	{"local", func(t *testing.T, n int) []Bootstrap {
		bs := NewLocal(n)
		t.Cleanup(func() { closeAll(bs) })
		return bs
	}},
}

// connectTCP connects n ranks on loopback, one goroutine per rank.
func connectTCP(t *testing.T, n int) []Bootstrap {
	t.Helper()
	id, root, err := newRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(root.close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bs, errs := connectRanks(ctx, id, n)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("Connect rank %d: %v", r, err)
		}
	}
	t.Cleanup(func() { closeAll(bs) })
	return bs
}

func connectRanks(ctx context.Context, id UniqueID, n int) ([]Bootstrap, []error) {
	bs := make([]Bootstrap, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { bs[r], errs[r] = Connect(ctx, id, r, n) })
	}
	wg.Wait()
	return bs, errs
}

func closeAll(bs []Bootstrap) {
	var wg sync.WaitGroup
	for _, b := range bs {
		if b != nil {
			wg.Go(func() { b.Close() })
		}
	}
	wg.Wait()
}

// onAll runs fn on every rank concurrently and returns the results by rank.
func onAll[T any](bs []Bootstrap, fn func(b Bootstrap) (T, error)) ([]T, []error) {
	out := make([]T, len(bs))
	errs := make([]error, len(bs))
	var wg sync.WaitGroup
	for r, b := range bs {
		wg.Go(func() { out[r], errs[r] = fn(b) })
	}
	wg.Wait()
	return out, errs
}

func noErrors(t *testing.T, op string, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("%s on rank %d: %v", op, r, err)
		}
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestCollectives(t *testing.T) {
	for _, im := range impls {
		for n := 1; n <= 8; n++ {
			t.Run(fmt.Sprintf("%s/n=%d", im.name, n), func(t *testing.T) {
				bs := im.make(t, n)
				ctx := testCtx(t)
				for r, b := range bs {
					if b.Rank() != r || b.Size() != n {
						t.Fatalf("rank %d: Rank()=%d Size()=%d", r, b.Rank(), b.Size())
					}
				}

				// AllGather with a different size per rank, rank 0 empty,
				// twice in a row to exercise sequence matching.
				contrib := func(r, round int) []byte { return bytes.Repeat([]byte{byte(16*round + r)}, r*100) }
				for round := range 2 {
					got, errs := onAll(bs, func(b Bootstrap) ([][]byte, error) {
						return b.AllGather(ctx, contrib(b.Rank(), round))
					})
					noErrors(t, "AllGather", errs)
					want := make([][]byte, n)
					for r := range n {
						want[r] = contrib(r, round)
					}
					for r := range n {
						if diff := cmp.Diff(want, got[r]); diff != "" {
							t.Errorf("AllGather round %d on rank %d (-want +got):\n%s", round, r, diff)
						}
					}
				}

				// Broadcast from the last rank; other ranks pass junk.
				root := n - 1
				msg := []byte(fmt.Sprintf("from rank %d", root))
				got, errs := onAll(bs, func(b Bootstrap) ([]byte, error) {
					data := []byte("ignored")
					if b.Rank() == root {
						data = msg
					}
					return b.Broadcast(ctx, root, data)
				})
				noErrors(t, "Broadcast", errs)
				for r := range n {
					if diff := cmp.Diff(msg, got[r]); diff != "" {
						t.Errorf("Broadcast on rank %d (-want +got):\n%s", r, diff)
					}
				}

				// Barrier: after it returns, every rank has arrived.
				var arrived atomic.Int32
				seen, errs := onAll(bs, func(b Bootstrap) (int32, error) {
					time.Sleep(time.Duration(b.Rank()) * 5 * time.Millisecond)
					arrived.Add(1)
					err := b.Barrier(ctx)
					return arrived.Load(), err
				})
				noErrors(t, "Barrier", errs)
				for r := range n {
					if seen[r] != int32(n) {
						t.Errorf("rank %d left the barrier having seen %d of %d arrivals", r, seen[r], n)
					}
				}

				// Send/Recv around a ring, three messages per tag to check
				// order, plus one to oneself.
				recvd, errs := onAll(bs, func(b Bootstrap) ([]string, error) {
					r := b.Rank()
					next, prev := (r+1)%n, (r+n-1)%n
					for i := range 3 {
						if err := b.Send(ctx, next, 7, []byte(fmt.Sprintf("%d->%d #%d", r, next, i))); err != nil {
							return nil, err
						}
					}
					if err := b.Send(ctx, r, 1<<31, []byte("self")); err != nil {
						return nil, err
					}
					var out []string
					for range 3 {
						m, err := b.Recv(ctx, prev, 7)
						if err != nil {
							return nil, err
						}
						out = append(out, string(m))
					}
					m, err := b.Recv(ctx, r, 1<<31)
					return append(out, string(m)), err
				})
				noErrors(t, "Send/Recv", errs)
				for r := range n {
					prev := (r + n - 1) % n
					want := []string{
						fmt.Sprintf("%d->%d #0", prev, r), fmt.Sprintf("%d->%d #1", prev, r), fmt.Sprintf("%d->%d #2", prev, r), "self",
					}
					if diff := cmp.Diff(want, recvd[r]); diff != "" {
						t.Errorf("Recv on rank %d (-want +got):\n%s", r, diff)
					}
				}
				for r, b := range bs {
					if err := b.Err(); err != nil {
						t.Errorf("rank %d: Err() = %v after a healthy run", r, err)
					}
				}
			})
		}
	}
}

func TestArgumentErrors(t *testing.T) {
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			bs := im.make(t, 2)
			ctx := testCtx(t)
			b := bs[0]
			big := make([]byte, MaxMessageSize+1)
			tests := []struct {
				name string
				err  error
				msg  string
			}{
				{"send peer -1", b.Send(ctx, -1, 0, nil), "peer -1 outside [0, 2)"},
				{"send peer 2", b.Send(ctx, 2, 0, nil), "peer 2 outside [0, 2)"},
				{"recv peer 5", func() error { _, err := b.Recv(ctx, 5, 0); return err }(), "peer 5 outside"},
				{"broadcast root 3", func() error { _, err := b.Broadcast(ctx, 3, nil); return err }(), "peer 3 outside"},
				{"send too large", b.Send(ctx, 1, 0, big), "exceed MaxMessageSize"},
				{"allgather too large", func() error { _, err := b.AllGather(ctx, big); return err }(), "exceed MaxMessageSize"},
			}
			for _, tc := range tests {
				if !errors.Is(tc.err, hal.ErrInvalidArgument) || !strings.Contains(tc.err.Error(), tc.msg) {
					t.Errorf("%s: error = %v, want ErrInvalidArgument with %q", tc.name, tc.err, tc.msg)
				}
			}
		})
	}
}

func TestConnectValidation(t *testing.T) {
	id := UniqueID{Magic: 1, Addr: "127.0.0.1:9"}
	tests := []struct {
		name       string
		id         UniqueID
		rank, size int
		msg        string
	}{
		{"size 0", id, 0, 0, "size 0 outside"},
		{"negative rank", id, -1, 4, "rank -1 outside [0, 4)"},
		{"rank = size", id, 4, 4, "rank 4 outside [0, 4)"},
		{"zero id", UniqueID{}, 0, 1, "invalid unique id"},
		{"no port", UniqueID{Magic: 1, Addr: "localhost"}, 0, 1, "invalid unique id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Connect(context.Background(), tc.id, tc.rank, tc.size)
			if b != nil || !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Connect = %v, %v; want ErrInvalidArgument with %q", b, err, tc.msg)
			}
		})
	}
	if got := NewLocal(0); got != nil {
		t.Errorf("NewLocal(0) = %v, want nil", got)
	}
}

func TestRootRefusesDuplicateRankAndSizeMismatch(t *testing.T) {
	id, root, err := newRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(root.close)
	ctx := testCtx(t)

	first := make(chan Bootstrap, 1)
	go func() {
		b, err := Connect(ctx, id, 0, 2)
		if err != nil {
			t.Errorf("first rank 0: %v", err)
		}
		first <- b
	}()
	// Wait until the first rank 0 is registered, so the second is the
	// duplicate.
	waitFor(t, func() bool { return root.registered.Load() == 1 })

	_, err = Connect(ctx, id, 0, 2)
	if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "rank 0 is already registered") {
		t.Errorf("duplicate rank 0: error = %v, want ErrInvalidArgument naming rank 0", err)
	}
	_, err = Connect(ctx, id, 1, 3)
	if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "rank 1 says the job has 3 ranks, but rank 0 said 2") {
		t.Errorf("size mismatch: error = %v, want ErrInvalidArgument naming both sizes", err)
	}
	// The job still forms with the right rank 1.
	b1, err := Connect(ctx, id, 1, 2)
	if err != nil {
		t.Fatalf("rank 1 after refusals: %v", err)
	}
	b0 := <-first
	t.Cleanup(func() { closeAll([]Bootstrap{b0, b1}) })
	got, errs := onAll([]Bootstrap{b0, b1}, func(b Bootstrap) ([][]byte, error) { return b.AllGather(ctx, []byte{byte(b.Rank())}) })
	noErrors(t, "AllGather", errs)
	if diff := cmp.Diff([][][]byte{{{0}, {1}}, {{0}, {1}}}, got); diff != "" {
		t.Errorf("AllGather (-want +got):\n%s", diff)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTimeouts(t *testing.T) {
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			t.Setenv("WEFT_BOOTSTRAP_TIMEOUT", "300ms")
			bs := im.make(t, 3)

			start := time.Now()
			_, err := bs[0].Recv(context.Background(), 1, 5)
			elapsed := time.Since(start)
			if !errors.Is(err, hal.ErrTimeout) || !strings.Contains(err.Error(), "waiting for rank 1") || !strings.Contains(err.Error(), "Recv tag 5") {
				t.Errorf("Recv error = %v, want ErrTimeout naming rank 1 and the tag", err)
			}
			if elapsed < 250*time.Millisecond || elapsed > 3*time.Second {
				t.Errorf("Recv returned after %v, want about 300ms (WEFT_BOOTSTRAP_TIMEOUT)", elapsed)
			}

			// Ranks 0 and 1 gather; rank 2 never comes. ctx's deadline
			// wins over the variable.
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			defer cancel()
			_, errs := onAll(bs[:2], func(b Bootstrap) ([][]byte, error) { return b.AllGather(ctx, []byte("x")) })
			for r, err := range errs {
				if !errors.Is(err, hal.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for rank 2") {
					t.Errorf("rank %d AllGather error = %v, want ErrTimeout naming rank 2", r, err)
				}
			}
			if err := bs[0].Err(); err != nil {
				t.Errorf("a timeout must not fail the bootstrap; Err() = %v", err)
			}
		})
	}
}

func TestTimeoutNamesAllMissingRanks(t *testing.T) {
	bs := NewLocal(5)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, errs := onAll(bs[:2], func(b Bootstrap) (struct{}, error) { return struct{}{}, b.Barrier(ctx) })
	for r, err := range errs {
		if !errors.Is(err, hal.ErrTimeout) || !strings.Contains(err.Error(), "waiting for ranks 2, 3, 4") {
			t.Errorf("rank %d Barrier error = %v, want ErrTimeout naming ranks 2, 3, 4", r, err)
		}
	}
}

type crasher interface{ crash() }

func TestPeerDisappears(t *testing.T) {
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			bs := im.make(t, 4)
			ctx := testCtx(t)
			const lost = 2
			// Ranks 0 and 3 wait for a message from the rank that will
			// die; rank 1 waits in a barrier.
			type result struct {
				err     error
				elapsed time.Duration
			}
			results := make(chan struct {
				rank int
				result
			}, 3)
			start := time.Now()
			for _, r := range []int{0, 1, 3} {
				go func() {
					var err error
					if r == 1 {
						err = bs[r].Barrier(ctx)
					} else {
						_, err = bs[r].Recv(ctx, lost, 1)
					}
					results <- struct {
						rank int
						result
					}{r, result{err, time.Since(start)}}
				}()
			}
			time.Sleep(100 * time.Millisecond)
			bs[lost].(crasher).crash()

			for range 3 {
				got := <-results
				if !errors.Is(got.err, hal.ErrRemote) || !strings.Contains(got.err.Error(), "rank 2 disconnected") {
					t.Errorf("rank %d: pending call error = %v, want ErrRemote naming rank 2", got.rank, got.err)
				}
				if got.elapsed > 2*time.Second {
					t.Errorf("rank %d: pending call returned after %v, want promptly", got.rank, got.elapsed)
				}
			}
			for _, r := range []int{0, 1, 3} {
				b := bs[r]
				select {
				case <-b.Failed():
				case <-time.After(2 * time.Second):
					t.Fatalf("rank %d: Failed() not closed", r)
				}
				if err := b.Err(); !errors.Is(err, hal.ErrRemote) || !strings.Contains(err.Error(), "rank 2 disconnected") {
					t.Errorf("rank %d: Err() = %v, want ErrRemote naming rank 2", r, err)
				}
				// Later calls fail at once, even towards healthy peers.
				start := time.Now()
				_, err := b.Recv(ctx, (r+1)%2, 3)
				if !errors.Is(err, hal.ErrRemote) || time.Since(start) > 100*time.Millisecond {
					t.Errorf("rank %d: later Recv = %v after %v, want ErrRemote at once", r, err, time.Since(start))
				}
				if _, err := b.AllGather(ctx, nil); !errors.Is(err, hal.ErrRemote) {
					t.Errorf("rank %d: later AllGather = %v, want ErrRemote", r, err)
				}
			}
		})
	}
}

func TestCleanCloseIsNotFailure(t *testing.T) {
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			bs := im.make(t, 3)
			ctx := testCtx(t)
			if err := bs[0].Close(); err != nil {
				t.Fatal(err)
			}
			if err := bs[0].Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
			// Rank 1 waits for the closed rank: told at once, not failed.
			start := time.Now()
			_, err := bs[1].Recv(ctx, 0, 1)
			if !errors.Is(err, hal.ErrRemote) || !strings.Contains(err.Error(), "rank 0 closed its bootstrap") || time.Since(start) > time.Second {
				t.Errorf("Recv from a closed rank = %v after %v, want ErrRemote at once", err, time.Since(start))
			}
			if err := bs[1].Send(ctx, 0, 1, nil); !errors.Is(err, hal.ErrRemote) {
				t.Errorf("Send to a closed rank = %v, want ErrRemote", err)
			}
			// Ranks 1 and 2 go on talking.
			if err := bs[1].Send(ctx, 2, 4, []byte("still here")); err != nil {
				t.Fatal(err)
			}
			if m, err := bs[2].Recv(ctx, 1, 4); err != nil || string(m) != "still here" {
				t.Errorf("Recv between open ranks = %q, %v", m, err)
			}
			closeAll(bs[1:])
			for r, b := range bs {
				if err := b.Err(); err != nil {
					t.Errorf("rank %d: Err() = %v after clean closes", r, err)
				}
				select {
				case <-b.Failed():
					t.Errorf("rank %d: Failed() closed after clean closes", r)
				default:
				}
				if _, err := b.Recv(ctx, 0, 0); !errors.Is(err, hal.ErrInvalidUsage) {
					t.Errorf("rank %d: Recv after Close = %v, want ErrInvalidUsage", r, err)
				}
			}
		})
	}
}

func TestPendingCallsReturnOnClose(t *testing.T) {
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			bs := im.make(t, 2)
			done := make(chan error, 1)
			go func() { _, err := bs[0].Recv(testCtx(t), 1, 0); done <- err }()
			time.Sleep(50 * time.Millisecond)
			bs[0].Close()
			select {
			case err := <-done:
				if !errors.Is(err, hal.ErrInvalidUsage) {
					t.Errorf("pending Recv after own Close = %v, want ErrInvalidUsage", err)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("pending Recv did not return on Close")
			}
		})
	}
}

func TestCollectiveMismatch(t *testing.T) {
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			bs := im.make(t, 2)
			ctx := testCtx(t)
			_, errs := onAll(bs, func(b Bootstrap) (struct{}, error) {
				if b.Rank() == 0 {
					return struct{}{}, b.Barrier(ctx)
				}
				_, err := b.AllGather(ctx, []byte("x"))
				return struct{}{}, err
			})
			want := []string{"rank 1 called AllGather", "rank 0 called Barrier"}
			for r, err := range errs {
				if !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), want[r]) {
					t.Errorf("rank %d: error = %v, want ErrInvalidUsage with %q", r, err, want[r])
				}
			}
		})
	}
}

func TestCanceledContext(t *testing.T) {
	bs := NewLocal(2)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	_, err := bs[0].Recv(ctx, 1, 0)
	if !errors.Is(err, context.Canceled) || errors.Is(err, hal.ErrTimeout) {
		t.Errorf("Recv with canceled ctx = %v, want context.Canceled", err)
	}
}
