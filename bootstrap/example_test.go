package bootstrap_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/weftccl/weft/bootstrap"
)

// Four ranks in goroutines gather one byte each.
func ExampleNewLocal() {
	ranks := bootstrap.NewLocal(4)
	results := make([][][]byte, len(ranks))
	var wg sync.WaitGroup
	for r, b := range ranks {
		wg.Go(func() {
			defer b.Close()
			results[r], _ = b.AllGather(context.Background(), []byte{byte(10 * r)})
		})
	}
	wg.Wait()
	fmt.Println(results[2])
	// Output: [[0] [10] [20] [30]]
}

// A program started by `weft run`, mpirun, srun or torchrun finds its rank
// and joins the job.
func ExampleFromEnv() {
	l, ok, err := bootstrap.FromEnv()
	if err != nil || !ok {
		return // not started by a launcher, or misconfigured (err says how)
	}
	b, err := l.Connect(context.Background())
	if err != nil {
		return
	}
	defer b.Close()
	fmt.Println("rank", b.Rank(), "of", b.Size(), "on local device", l.LocalRank)
}
