package weft_test

import (
	"fmt"
	"strings"
	"testing"

	_ "github.com/weftccl/weft/hal/netplugin"
	"github.com/weftccl/weft/hal/netplugin/netplugintest"
	"github.com/weftccl/weft/internal/ncclnet"
)

// TestCollectivesOverNetPlugin runs every collective and grouped
// point-to-point across 2 emulated nodes with WEFT_NET=plugin: every byte
// between the nodes goes through an NCCL net plugin (weft's test plugin,
// ncclNet v8 over loopback TCP, built for the test) by way of
// hal/netplugin, and every element is checked (netChild).
func TestCollectivesOverNetPlugin(t *testing.T) {
	t.Parallel() // waits on sockets and deadlines more than it computes
	lib := netplugintest.Build(t)
	if _, err := ncclnet.Load(lib); err != nil {
		if strings.Contains(err.Error(), "without cgo") {
			t.Skipf("no net plugin can load: %v", err)
		}
		t.Fatalf("load the test plugin: %v", err)
	}
	// One rank per node has no intra-node stage for the hierarchical
	// plans netChild expects; 2 per node keeps the wall time small
	// (TestCollectivesAcrossNodes covers the other shapes over sockets).
	for _, perNode := range []int{2} {
		nproc := 2 * perNode
		t.Run(fmt.Sprintf("2x%d", perNode), func(t *testing.T) {
			t.Parallel()
			out, err, _ := runNodes(t, nproc, 2, "net", "WEFT_NET=plugin", "NCCL_NET_PLUGIN="+lib)
			if err != nil {
				t.Fatalf("%d ranks on 2 nodes over the net plugin: %v\n%s", nproc, err, out)
			}
		})
	}
}

// TestKilledRankOverNetPlugin: a rank killed mid-collective makes the
// survivors, whose traffic to its node goes through the net plugin, fail
// with errors that name it.
func TestKilledRankOverNetPlugin(t *testing.T) {
	t.Parallel() // waits on a killed peer and sockets
	if testing.Short() {
		t.Skip("spawns processes and waits for a failure: not in -short")
	}
	lib := netplugintest.Build(t)
	if _, err := ncclnet.Load(lib); err != nil {
		if strings.Contains(err.Error(), "without cgo") {
			t.Skipf("no net plugin can load: %v", err)
		}
		t.Fatalf("load the test plugin: %v", err)
	}
	out, err, took := runNodes(t, 4, 2, "netkill", "WEFT_TEST_KILL=2", "WEFT_NET=plugin", "NCCL_NET_PLUGIN="+lib)
	if err == nil {
		t.Fatalf("the job succeeded although rank 2 was killed\n%s", out)
	}
	t.Logf("after %v:\n%s", took, out)
	for _, r := range []string{"0", "1", "3"} {
		found := false
		for _, line := range strings.Split(out, "\n") {
			if (r == "0" && !strings.HasPrefix(line, "[rank")) || strings.HasPrefix(line, "[rank "+r+"]") {
				if strings.Contains(line, "child:") && strings.Contains(line, "rank 2") {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("rank %s did not report an error naming rank 2; output:\n%s", r, out)
		}
	}
}
