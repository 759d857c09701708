package weft_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/weftccl/weft"
	_ "github.com/weftccl/weft/backends" // registers every backend weft has: "host" runs anywhere
	"github.com/weftccl/weft/bootstrap"
)

// Two ranks in one process, each with its own hal/host device: every rank
// contributes rank+1 to each element, and every rank receives the sum. A
// program imports weft, bootstrap, and the list of backends; a job
// of several processes joins its ranks with bootstrap.Connect instead of
// bootstrap.NewLocal.
func ExampleComm_AllReduce() {
	const n, count = 2, 4
	boots := bootstrap.NewLocal(n)
	results := make([][]float32, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			dev, err := weft.OpenDevice("host", r)
			if err != nil {
				fmt.Println(err)
				return
			}
			defer dev.Close()
			comm, err := weft.NewComm(context.Background(), boots[r], dev, weft.Options{})
			if err != nil {
				fmt.Println(err)
				return
			}
			defer comm.Close()
			s, _ := dev.NewStream()
			defer s.Close()
			buf, _ := dev.Alloc(count * 4)
			defer buf.Free()
			in := make([]byte, count*4)
			for i := 0; i < count; i++ {
				binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(float32(r+1)))
			}
			dev.Write(buf, 0, in)
			if err := comm.AllReduce(buf, buf, count, weft.Float32, weft.Sum, s); err != nil {
				fmt.Println(err)
				return
			}
			if err := comm.Synchronize(s); err != nil {
				fmt.Println(err)
				return
			}
			out := make([]byte, count*4)
			dev.Read(out, buf, 0)
			for i := 0; i < count; i++ {
				results[r] = append(results[r], math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:])))
			}
		}(r)
	}
	wg.Wait()
	fmt.Println(results)
	// Output: [[3 3 3 3] [3 3 3 3]]
}
