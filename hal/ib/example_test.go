package ib_test

import (
	"fmt"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/ib"
)

// Choosing the network: ib where an RDMA port is usable, else the next
// registered network, with the reasons.
func ExampleProbe() {
	a := ib.Probe(ib.Options{HCA: "mlx5_0:1"})
	if !a.Available {
		fmt.Println("ib unavailable:", a.Reason != "")
		return
	}
	n, _ := hal.LookupNetwork(ib.Name)
	fmt.Println("using", n.Name(), "on", a.Reason)
}
