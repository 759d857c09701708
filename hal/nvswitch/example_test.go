package nvswitch_test

import (
	"fmt"
	"log"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/nvswitch"
)

// The three steps of a multicast group, here with every member in one
// process: create on one GPU, join on the others, then bind memory of each
// member's Alloc and use Addr in kernels (with SwitchHeader's multimem
// primitives). Across processes the Handle travels through the bootstrap
// and each step is followed by a barrier. The example is compiled, not
// run: it needs WEFT_NVLS=1 and GPUs on an NVSwitch fabric.
func Example_multicast() {
	if a, _ := hal.Probe(nvswitch.Name); !a.Available {
		fmt.Println("nvswitch unavailable:", a.Reason)
		return
	}
	var devs []*nvswitch.Device
	for i := 0; i < 2; i++ {
		d, err := nvswitch.Open(hal.Config{Ordinal: i, Rank: i, JobID: "example"})
		if err != nil {
			log.Fatal(err)
		}
		defer d.Close()
		devs = append(devs, d)
	}
	// 1. Create on GPU 0, join on GPU 1.
	g0, err := devs[0].NewMulticast(64<<20, len(devs))
	if err != nil {
		log.Fatal(err)
	}
	h, err := g0.Handle()
	if err != nil {
		log.Fatal(err)
	}
	g1, err := devs[1].ImportMulticast(h)
	if err != nil {
		log.Fatal(err)
	}
	groups := []hal.Multicast{g0, g1}
	// 2. Every member binds Size bytes of its own memory.
	for i, g := range groups {
		b, err := devs[i].Alloc(g.Size())
		if err != nil {
			log.Fatal(err)
		}
		defer b.Free()
		if err := g.Bind(b); err != nil {
			log.Fatal(err)
		}
		defer g.Close()
	}
	// 3. Kernels load-reduce and store through each member's Addr.
	for i, g := range groups {
		fmt.Printf("GPU %d: multicast address %#x, %d bytes\n", i, g.Addr(), g.Size())
	}
}
