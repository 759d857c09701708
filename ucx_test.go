package weft_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
	_ "github.com/weftccl/weft/hal/ucx"
	"github.com/weftccl/weft/internal/env"
)

// TestCollectivesAcrossNodesUCX runs every collective and a group of
// sends and receives (netChild, as TestCollectivesAcrossNodes) with every
// byte between emulated nodes carried by hal/ucx, checking each element:
// 4 nodes of 2 ranks over UCX's TCP transport (on loopback, as a job on
// one host restricts it), and 2 nodes of 2 over its shared-memory
// transports (posix/sysv with cma) with every buffer staged through host
// memory (WEFT_UCX_STAGING=always: the path of a GPU that UCX cannot
// reach), and 2 nodes of 1 over TCP with the network plans' windows in
// host memory registered directly (WEFT_UCX_STAGING=device: a GPU's host
// windows, HostWindows). The other pairings add no path of hal/ucx and a
// quarter minute of CI each. It skips where UCX is not installed, unless
// WEFT_REQUIRE names ucx (CI).
func TestCollectivesAcrossNodesUCX(t *testing.T) {
	n, err := hal.LookupNetwork("ucx")
	if err != nil {
		t.Fatal(err)
	}
	if a := n.Probe(); !a.Available {
		if env.Required("ucx") {
			t.Fatalf("WEFT_REQUIRE names ucx, but it is unavailable: %s", a.Reason)
		}
		t.Skipf("UCX unavailable (apt-get install libucx0): %s", a.Reason)
	}
	t.Parallel() // waits on processes and the network more than it computes
	for _, c := range []struct {
		tls            string
		nodes, perNode int
		staging        string
	}{{"tcp", 4, 2, "auto"}, {"shm", 2, 2, "always"}, {"tcp", 2, 1, "device"}} {
		n := c.nodes * c.perNode
		t.Run(fmt.Sprintf("%s/%dx%d/staging-%s", c.tls, c.nodes, c.perNode, c.staging), func(t *testing.T) {
			t.Parallel()
			out, err, took := runNodes(t, n, c.nodes, "net", "WEFT_NET=ucx", "UCX_TLS="+c.tls, "WEFT_UCX_STAGING="+c.staging)
			if err != nil {
				t.Fatalf("%d ranks on %d nodes over UCX %s: %v\n%s", n, c.nodes, c.tls, err, out)
			}
			t.Logf("%d ranks on %d nodes over UCX %s: %v", n, c.nodes, c.tls, took)
		})
	}
}

// TestKilledRankAcrossNodesUCX: a rank killed (SIGKILL) mid-AllReduce on
// 2 emulated nodes over UCX makes the survivors fail within 30 s with
// errors that name it (hal/ucx notices the end of its side channels).
func TestKilledRankAcrossNodesUCX(t *testing.T) {
	n, err := hal.LookupNetwork("ucx")
	if err != nil {
		t.Fatal(err)
	}
	if a := n.Probe(); !a.Available {
		if env.Required("ucx") {
			t.Fatalf("WEFT_REQUIRE names ucx, but it is unavailable: %s", a.Reason)
		}
		t.Skipf("UCX unavailable (apt-get install libucx0): %s", a.Reason)
	}
	t.Parallel() // waits on a killed peer
	if testing.Short() {
		t.Skip("spawns processes and waits for a failure: not in -short")
	}
	out, err, took := runNodes(t, 4, 2, "netkill", "WEFT_TEST_KILL=2", "WEFT_NET=ucx", "UCX_TLS=tcp")
	if err == nil {
		t.Fatalf("the job succeeded although rank 2 was killed\n%s", out)
	}
	if took > 30*time.Second {
		t.Errorf("the survivors took %v to exit (want < 30 s)", took)
	}
	var rerr *bootstrap.RunError
	if !errors.As(err, &rerr) {
		t.Fatalf("Run error %v is not a *bootstrap.RunError", err)
	}
	for _, r := range []string{"0", "1", "3"} {
		found := false
		for _, line := range strings.Split(out, "\n") {
			if (r == "0" && !strings.HasPrefix(line, "[rank")) || strings.HasPrefix(line, "[rank "+r+"]") {
				found = found || (strings.Contains(line, "child:") && strings.Contains(line, "rank 2"))
			}
		}
		if !found {
			t.Errorf("rank %s did not report an error naming rank 2; output:\n%s", r, out)
		}
	}
	t.Logf("survivors exited after %v:\n%s", took, out)
}
