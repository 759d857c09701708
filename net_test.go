package weft_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/check"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	_ "github.com/weftccl/weft/hal/socket"
)

// netCases are every collective across emulated nodes: each type and
// operator family at counts whose bytes are not multiples of 16, one
// element, and several hal/host windows (16 KiB), in and out of place,
// with the roots at both ends for Broadcast and Reduce.
func netCases(n int) []collCase {
	var cases []collCase
	counts := []int64{1, 37, 4099, 20011}
	for _, coll := range algorithms.Collectives {
		if coll == algorithms.SendRecv {
			continue
		}
		roots := []int{0}
		if coll.Rooted() {
			roots = []int{0, n - 1}
		}
		for _, root := range roots {
			for i, count := range counts {
				k := collCase{coll: coll, t: plan.Float32, op: plan.Sum, root: root, count: count, inPlace: i%2 == 1}
				switch i {
				case 1:
					k.t, k.op = plan.BFloat16, plan.Max
				case 2:
					k.t, k.op = plan.Int32, plan.Avg
				}
				cases = append(cases, k)
			}
		}
	}
	// The hierarchical AllReduce, AllGather and ReduceScatter (2PH); the
	// reducing ones serve every operator but Avg, PreMulSum with a scalar
	// per rank included: more of them, at sizes of several windows.
	for i, k := range []collCase{
		{t: plan.BFloat16, op: plan.Sum, count: 70001, inPlace: true},
		{t: plan.Int64, op: plan.Min, count: 999},
		{t: plan.Float32, op: plan.Prod, count: 5003, inPlace: true},
		{t: plan.Int8, op: plan.Max, count: 33333},
		{t: plan.Float16, op: plan.PreMulSum, count: 777},
	} {
		k.coll = algorithms.AllReduce
		k.inPlace = i%2 == 0
		cases = append(cases, k)
		// The hierarchical AllGather and ReduceScatter at the same sizes,
		// and Broadcast (the flat plan there) from roots of every local
		// index in turn.
		for _, coll := range []algorithms.Collective{algorithms.AllGather, algorithms.ReduceScatter, algorithms.Broadcast} {
			if coll != algorithms.ReduceScatter && k.op == plan.PreMulSum {
				continue // no operator: the Sum case covers it
			}
			k.coll = coll
			if coll == algorithms.Broadcast {
				k.root = (2*i + 1) % n
			}
			cases = append(cases, k)
		}
	}
	// The hierarchical Broadcast (from HierBroadcastMinBytes), from a
	// root that does not lead the other nodes at local index 0.
	cases = append(cases, collCase{coll: algorithms.Broadcast, t: plan.Float32, root: n - 1, count: algorithms.HierBroadcastMinBytes/4 + 333})
	return cases
}

// netChild is one rank of a job whose ranks sit on emulated nodes
// (WEFT_NODE_ID): "net" runs every collective (netCases) and
// point-to-point and checks each element; "netkill" runs AllReduce in a
// loop until the rank named by WEFT_TEST_KILL kills itself.
// netWindow: across nodes a symmetric memory window registers without an
// exchange (the peers cannot map it): it reports not Mapped, and an
// AllReduce into it takes the network plans and stays exact.
func netWindow(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
	const count = 5000
	buf, err := dev.Alloc(count * 4)
	if err != nil {
		return err
	}
	defer buf.Free()
	w, err := c.RegisterWindow(buf.Addr(), buf.Size(), buf, true)
	if err != nil {
		return fmt.Errorf("rank %d: a window across nodes: %w", rank, err)
	}
	defer c.DeregisterWindow(w)
	if w.Mapped() {
		return fmt.Errorf("rank %d: a window across nodes reports every rank mapped", rank)
	}
	if err := dev.Write(buf, 0, check.Input(plan.Float32, plan.Sum, rank, count)); err != nil {
		return err
	}
	if err := c.Launch(weft.Call{Coll: algorithms.AllReduce, Send: buf.Addr(), Recv: buf.Addr(), Count: count, Type: plan.Float32, Op: plan.Sum}, s); err != nil {
		return err
	}
	if err := c.Synchronize(s); err != nil {
		return err
	}
	got := make([]byte, count*4)
	if err := dev.Read(got, buf, 0); err != nil {
		return err
	}
	if wrong := check.Wrong(plan.Float32, got, check.AllReduce(plan.Float32, plan.Sum, c.Size(), count)); wrong != 0 || c.WindowCalls() != 0 {
		return fmt.Errorf("rank %d: AllReduce in a window across nodes: %d wrong, %d calls through windows", rank, wrong, c.WindowCalls())
	}
	return nil
}

func netChild(mode string, rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
	defer releaseCaseBuffers(c, dev)
	n := c.Size()
	nodes, _ := strconv.Atoi(os.Getenv("WEFT_TEST_NODES"))
	if mode == "netkill" {
		victim, _ := strconv.Atoi(os.Getenv("WEFT_TEST_KILL"))
		const count = 1 << 16
		buf, err := dev.Alloc(count * 4)
		if err != nil {
			return err
		}
		for i := 0; ; i++ {
			if rank == victim && i == 5 {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
			if err := c.Launch(weft.Call{Coll: algorithms.AllReduce, Send: buf.Addr(), Recv: buf.Addr(), Count: count, Type: plan.Float32, Op: plan.Sum}, s); err != nil {
				return err
			}
			if err := c.Synchronize(s); err != nil {
				return err
			}
		}
	}
	for _, k := range netCases(n) {
		// Across nodes only port-channel plans can run: with host windows
		// the small ones go as LL packets, one frame per peer
		// (algorithms/portll.go) or, where a node holds several ranks,
		// AllGather, AllReduce and ReduceScatter one frame (L for
		// ReduceScatter) per counterpart and the node's peers over memory
		// channels (algorithms/hier_ll.go); AllReduce,
		// AllGather, ReduceScatter and Broadcast take the hierarchical
		// plans for the operators they serve where a node holds several
		// ranks.
		call := weft.Call{Coll: k.coll, Count: k.count, Type: k.t, Op: k.op, Root: k.root, Send: 1 << 30, Recv: 2 << 30}
		staged := netHostWindows()
		ll := staged && netLL(k.coll) && k.count*int64(k.t.Size()) <= algorithms.PortLLMaxBytes
		hierLL := ll && nodes != n && (k.coll == algorithms.AllGather || ((k.coll == algorithms.AllReduce || k.coll == algorithms.ReduceScatter) && k.op != plan.Avg))
		want := "-" + algorithms.PortFamily + "-"
		switch {
		case hierLL:
			want = "-2ph-"
		case nodes == n || ll:
			// One rank per node: no hierarchical plan, the flat port one.
		case k.coll == algorithms.AllGather:
			want = "-2ph-"
		case k.coll == algorithms.Broadcast:
			// The hierarchical Broadcast from HierBroadcastMinBytes.
			if k.count*int64(k.t.Size()) >= algorithms.HierBroadcastMinBytes {
				want = "-2ph-"
			}
		case k.coll == algorithms.AllReduce || k.coll == algorithms.ReduceScatter:
			// PreMulSum too: each rank scales its input where the
			// first, intra-node stage reads it (plan/premul.go).
			if k.op != plan.Avg {
				want = "-2ph-"
			}
		}
		name := c.PlanName(call)
		flat := strings.Contains(name, want) && want != "-2ph-"
		if !strings.Contains(name, want) {
			return fmt.Errorf("%v: plan %q, want a %s plan", k, name, strings.Trim(want, "-"))
		} else if hs := strings.HasSuffix(name, "-hs"); flat && hs != staged {
			// With host windows the flat port plans stage their puts
			// into their host-memory scratch (Plan.StageSends) and carry
			// every channel over the network, a peer of the node's own
			// included (docs/network.md, "Streams and the network path").
			return fmt.Errorf("%v: plan %q: staged sends %v, want them with host windows only", k, name, hs)
		} else if isLL := strings.Contains(name, "-LL16-"); isLL != ll {
			return fmt.Errorf("%v: plan %q: LL %v, want LL port plans up to %d bytes over host windows", k, name, isLL, algorithms.PortLLMaxBytes)
		} else if deep := strings.Contains(name, "-d4-"); flat && staged && !ll && deep != netOneWay(k.coll) {
			// ... and the windowed plans that move data one way keep four
			// windows in flight (algorithms.Config.oneWay).
			return fmt.Errorf("%v: plan %q: four windows deep %v, want it for the one-way plans", k, name, deep)
		}
		if k.coll == algorithms.AllReduce {
			if name := c.AllReducePlan(k.count, k.t, k.op); name != c.PlanName(call) {
				return fmt.Errorf("%v: AllReducePlan %q, Launch's plan %q: Comm.AllReduce goes through Launch here", k, name, c.PlanName(call))
			}
		}
		wrong, err := runColl(rank, c, dev, s, k)
		if err != nil {
			return fmt.Errorf("rank %d: %v: %w", rank, k, err)
		}
		if wrong != 0 {
			return fmt.Errorf("rank %d: %v: %d wrong elements", rank, k, wrong)
		}
	}
	if err := netP2P(rank, n, c, dev, s); err != nil {
		return err
	}
	if err := netWindow(rank, c, dev, s); err != nil {
		return err
	}
	// With one rank per node every plan's channels go over the network,
	// whose socket receivers write host memory: every plan has its
	// windows there (docs/network.md), unless WEFT_NET_HOST_WINDOWS=0;
	// with several ranks per node only the plans among counterparts can.
	host, all := weft.HostWindowPlans(c)
	switch off := os.Getenv("WEFT_NET_HOST_WINDOWS") == "0"; {
	case all == 0:
		return fmt.Errorf("rank %d: no plan was set up", rank)
	case off && host != 0:
		return fmt.Errorf("rank %d: %d of %d plans have host windows under WEFT_NET_HOST_WINDOWS=0", rank, host, all)
	case nodes == n && netHostWindows() && host != all:
		return fmt.Errorf("rank %d: %d of %d plans have host windows; want every one with one rank per node over %s", rank, host, all, os.Getenv("WEFT_NET"))
	}
	return nil
}

// netLL reports whether coll has an LL port plan (algorithms.PortLLPlan):
// every collective but those built on point-to-point (Gather, Scatter).
func netLL(coll algorithms.Collective) bool { return coll <= algorithms.SendRecv }

// netOneWay reports whether coll's port plan moves data one way
// (Broadcast, Reduce; of netCases' collectives).
func netOneWay(coll algorithms.Collective) bool {
	return coll == algorithms.Broadcast || coll == algorithms.Reduce
}

// netHostWindows reports whether this child's network keeps the windows
// of plans whose every channel crosses it in host memory (hal.HostWindowed):
// sockets, and UCX with device memory staged and host memory registered
// directly (WEFT_UCX_STAGING=device), unless WEFT_NET_HOST_WINDOWS=0.
func netHostWindows() bool {
	if os.Getenv("WEFT_NET_HOST_WINDOWS") == "0" {
		return false
	}
	switch os.Getenv("WEFT_NET") {
	case "socket":
		return true
	case "ucx":
		return os.Getenv("WEFT_UCX_STAGING") == "device"
	}
	return false
}

// netP2P sends each peer a different number of bytes (0 included, most
// not multiples of 16) in one group and checks every byte received, in
// three rounds: sizes up to 39,892 bytes, 8 times those, then the first
// again (with one rank per node, LL and windowed port plans: the second
// small round reuses the LL plan's other scratch half and takes the
// credit of the first).
func netP2P(rank, n int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
	for _, scale := range []int64{1, 8, 1} {
		if err := netP2PRound(rank, n, c, dev, s, scale); err != nil {
			return err
		}
	}
	return nil
}

func netP2PRound(rank, n int, c *weft.Comm, dev hal.Device, s hal.Stream, scale int64) error {
	size := func(src, dst int) int64 { return int64((src*7+dst*13)%5) * 9973 * scale }
	payload := func(src, dst int, k int64) []byte {
		b := make([]byte, k)
		for i := range b {
			b[i] = byte(src*31 + dst*17 + i*7)
		}
		return b
	}
	var ops []weft.P2P
	recvs := map[int]hal.Buffer{}
	for p := 0; p < n; p++ {
		sb, err := dev.Alloc(max(size(rank, p), 1))
		if err != nil {
			return err
		}
		defer sb.Free()
		if err := dev.Write(sb, 0, payload(rank, p, size(rank, p))); err != nil {
			return err
		}
		rb, err := dev.Alloc(max(size(p, rank), 1))
		if err != nil {
			return err
		}
		defer rb.Free()
		recvs[p] = rb
		ops = append(ops, weft.P2P{Peer: p, Send: true, Buf: sb.Addr(), Bytes: size(rank, p)}, weft.P2P{Peer: p, Buf: rb.Addr(), Bytes: size(p, rank)})
	}
	if err := c.LaunchP2P(ops, s); err != nil {
		return fmt.Errorf("rank %d: point-to-point: %w", rank, err)
	}
	if err := c.Synchronize(s); err != nil {
		return fmt.Errorf("rank %d: point-to-point: %w", rank, err)
	}
	for p, rb := range recvs {
		got := make([]byte, size(p, rank))
		if err := dev.Read(got, rb, 0); err != nil {
			return err
		}
		if want := payload(p, rank, int64(len(got))); !bytes.Equal(got, want) {
			wrong := 0
			for i := range got {
				if got[i] != want[i] {
					wrong++
				}
			}
			return fmt.Errorf("rank %d: point-to-point: %d of %d bytes from rank %d wrong", rank, wrong, len(got), p)
		}
	}
	return nil
}

// runNodes runs the test binary as nproc ranks on nodes emulated nodes of
// this host (bootstrap.RunNodes), over the socket transport.
func runNodes(t *testing.T, nproc, nodes int, mode string, extra ...string) (string, error, time.Duration) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	start := time.Now()
	env := append([]string{"WEFT_TEST_CHILD=" + mode, "WEFT_NET=socket", fmt.Sprintf("WEFT_TEST_NODES=%d", nodes)}, extra...)
	err := bootstrap.RunNodes(ctx, nproc, nodes, []string{os.Args[0], "-test.run=^$"}, env, &out, &out)
	return out.String(), err, time.Since(start)
}

// TestCollectivesAcrossNodes runs every collective and point-to-point
// across emulated nodes (WEFT_NODE_ID per rank): 2 nodes of 2, 3 and 4
// ranks, and 3 nodes of 2, in separate processes: memory channels between nodes are refused
// (the devices report no link across nodes), so every byte between nodes
// goes through the socket transport's engines.
func TestCollectivesAcrossNodes(t *testing.T) {
	t.Parallel() // waits on sockets and deadlines more than it computes
	// Larger shapes (4 × 4, 4 × 6) run in scale_test.go.
	// 2 × 1 and 4 × 1 run the flat port plans with their windows in host
	// memory (the socket receivers store into them with the CPU; small
	// messages as LL packets), and 2 × 1 and 2 × 2 once with
	// them in device memory (WEFT_NET_HOST_WINDOWS=0: the receivers'
	// device-engine path).
	for _, shape := range []struct {
		nodes, perNode int
		extra          []string
	}{{2, 1, nil}, {4, 1, nil}, {2, 1, []string{"WEFT_NET_HOST_WINDOWS=0"}}, {2, 2, nil}, {2, 3, nil}, {3, 2, nil},
		// Device windows with nodes of several ranks: the hierarchical
		// plans' network windows in device memory, the flat plans'
		// channels to the node's peers on the device's engines.
		{2, 2, []string{"WEFT_NET_HOST_WINDOWS=0"}},
		// WEFT_ALGO=ce: the host-issued executors need peer-mapped links
		// on one node, so the network plans serve as without it.
		{2, 2, []string{"WEFT_ALGO=ce"}}} {
		nproc := shape.nodes * shape.perNode
		t.Run(fmt.Sprintf("%dx%d%s", shape.nodes, shape.perNode, strings.Join(shape.extra, "")), func(t *testing.T) {
			out, err, _ := runNodes(t, nproc, shape.nodes, "net", shape.extra...)
			if err != nil {
				t.Fatalf("%d ranks on %d nodes: %v\n%s", nproc, shape.nodes, err, out)
			}
		})
	}
}

// TestKilledRankAcrossNodes: a rank killed mid-collective makes the
// survivors fail within 30 s with errors that name it.
func TestKilledRankAcrossNodes(t *testing.T) {
	t.Parallel() // waits on a killed peer and sockets
	if testing.Short() {
		t.Skip("spawns processes and waits for a failure: not in -short")
	}
	out, err, took := runNodes(t, 4, 2, "netkill", "WEFT_TEST_KILL=2")
	if err == nil {
		t.Fatalf("the job succeeded although rank 2 was killed\n%s", out)
	}
	if took > 30*time.Second {
		t.Errorf("the survivors took %v to exit (want < 30 s)", took)
	}
	t.Logf("after %v:\n%s", took, out)
	var rerr *bootstrap.RunError
	if !errors.As(err, &rerr) {
		t.Fatalf("Run error %v is not a *bootstrap.RunError", err)
	}
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
