package netplugin_test

import (
	"fmt"

	"github.com/weftccl/weft/hal"
	_ "github.com/weftccl/weft/hal/netplugin"
)

// The network is registered as "plugin"; its probe says which plugin
// NCCL_NET_PLUGIN names and what it found, or why it cannot run.
func Example() {
	n, err := hal.LookupNetwork("plugin")
	if err != nil {
		panic(err)
	}
	a := n.Probe()
	fmt.Println(n.Name(), a.Available || a.Reason != "")
	// Output: plugin true
}
