package weft_test

import (
	"context"
	"fmt"
	"sync"
)

// localBoot is a minimal in-process bootstrap for these tests.
type localBoot struct {
	rank int
	g    *localGroup
}

type localGroup struct {
	n     int
	mu    sync.Mutex
	cond  *sync.Cond
	round int
	slots [][]byte
	got   int
	res   [][]byte
	fail  chan struct{}
}

func newLocal(n int) []*localBoot {
	g := &localGroup{n: n, slots: make([][]byte, n), fail: make(chan struct{})}
	g.cond = sync.NewCond(&g.mu)
	out := make([]*localBoot, n)
	for i := range out {
		out[i] = &localBoot{rank: i, g: g}
	}
	return out
}

func (b *localBoot) Rank() int               { return b.rank }
func (b *localBoot) Size() int               { return b.g.n }
func (b *localBoot) Err() error              { return nil }
func (b *localBoot) Failed() <-chan struct{} { return b.g.fail }
func (b *localBoot) String() string          { return fmt.Sprintf("rank %d", b.rank) }
func (b *localBoot) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	g := b.g
	g.mu.Lock()
	defer g.mu.Unlock()
	round := g.round
	g.slots[b.rank] = append([]byte(nil), data...)
	g.got++
	if g.got == g.n {
		g.got = 0
		g.res = append([][]byte(nil), g.slots...)
		g.round++
		g.cond.Broadcast()
	}
	for g.round == round {
		g.cond.Wait()
	}
	return append([][]byte(nil), g.res...), nil
}
