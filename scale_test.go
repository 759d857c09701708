package weft_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// scaleCases are the collectives of a communicator past 8 ranks (issue 21
// item 2): for collective i, every other data type, rotating with i, so
// that every type appears twice over the six collectives and every
// collective runs six types; counts of one element, an LL-sized and an
// HB-sized message in turn (hal/host windows are 16 KiB), in and out of
// place; operators rotating over Sum, Max, Min, Prod, PreMulSum (a scalar
// per rank) and, for floating types, Avg (which the plans with bounded
// peers compute as PreMulSum with 1/n); roots at both ends.
func scaleCases(n int) []collCase {
	var cases []collCase
	counts := []int64{1, 3001, 20011}
	ops := []plan.RedOp{plan.Sum, plan.Max, plan.Min, plan.Prod, plan.PreMulSum, plan.Avg}
	j := 0
	for ci, coll := range algorithms.Collectives {
		if coll == algorithms.SendRecv {
			continue
		}
		for ti, t := range plan.DataTypes {
			if (ti+ci)%2 != 0 {
				continue
			}
			k := collCase{coll: coll, t: t, op: plan.Sum, count: counts[j%len(counts)], inPlace: j%2 == 1}
			if coll.Rooted() && j%2 == 1 {
				k.root = n - 1
			}
			if coll.Reduces() {
				k.op = ops[j%len(ops)]
				if k.op == plan.Avg && !t.Float() {
					k.op = plan.Sum
				}
			}
			cases = append(cases, k)
			j++
		}
	}
	return cases
}

// scaleChild is one rank of a job of 12 or more ranks: every collective
// (scaleCases), each element checked, the plan family named (all-pairs
// plans serve at most 8 ranks), integer Avg exact on one node (the
// bounded plans divide at their final step) and refused with
// ErrNotSupported across nodes (hierarchical plans), then a group of sends
// and receives to every peer (netP2P).
func scaleChild(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
	defer releaseCaseBuffers(c, dev)
	n := c.Size()
	if n > algorithms.PeerPlansMaxRanks {
		return p2pScaleChild(rank, c, dev, s)
	}
	for _, k := range scaleCases(n) {
		call := weft.Call{Coll: k.coll, Count: k.count, Type: k.t, Op: k.op, Root: k.root, Send: 1 << 30, Recv: 2 << 30}
		name := c.PlanName(call)
		if name == "" {
			return fmt.Errorf("rank %d: %v: no plan", rank, k)
		}
		// Past 8 ranks: plans with bounded peers on one node; across
		// nodes the hierarchical or port-channel plans; AllToAll keeps
		// its plans with a channel per peer.
		families := []string{"-tree", "-ring", "-bruck", "-chain"}
		if os.Getenv("WEFT_NODE_ID") != "" {
			families = []string{"-2ph-", "-port-"}
		}
		if k.coll != algorithms.AllToAll && !slices.ContainsFunc(families, func(f string) bool { return strings.Contains(name, f) }) {
			return fmt.Errorf("rank %d: %v: plan %q, want one of %v", rank, k, name, families)
		}
		wrong, err := runColl(rank, c, dev, s, k)
		if err != nil {
			return fmt.Errorf("rank %d: %v (plan %s): %w", rank, k, name, err)
		}
		if wrong != 0 {
			return fmt.Errorf("rank %d: %v (plan %s): %d wrong elements", rank, k, name, wrong)
		}
	}
	// Avg of integer types. On one node the plans with bounded peers sum
	// and divide once, at the step that completes each rank's result
	// (plan.Op.PostDiv): every reducing collective, LL- and HB-sized,
	// exact (signed inputs include negative values: truncation toward
	// zero, as NCCL). Across nodes the hierarchical and port-channel plans
	// have no such step and refuse it.
	if os.Getenv("WEFT_NODE_ID") != "" {
		k := collCase{coll: algorithms.AllReduce, t: plan.Int32, op: plan.Avg, count: 5}
		if _, err := runColl(rank, c, dev, s, k); !errors.Is(err, hal.ErrNotSupported) {
			return fmt.Errorf("rank %d: %v: error %v, want ErrNotSupported", rank, k, err)
		}
		return netP2P(rank, n, c, dev, s)
	}
	for i, k := range []collCase{
		{coll: algorithms.AllReduce, t: plan.Int32, count: 5},
		{coll: algorithms.AllReduce, t: plan.Int64, count: 20011, inPlace: true},
		{coll: algorithms.AllReduce, t: plan.Uint8, count: 3001},
		{coll: algorithms.ReduceScatter, t: plan.Int8, count: 3001},
		{coll: algorithms.ReduceScatter, t: plan.Uint32, count: 20011, inPlace: true},
		{coll: algorithms.Reduce, t: plan.Int32, count: 3001, root: n - 1},
		{coll: algorithms.Reduce, t: plan.Uint64, count: 20011},
	} {
		k.op = plan.Avg
		wrong, err := runColl(rank, c, dev, s, k)
		if err != nil {
			return fmt.Errorf("rank %d: integer Avg case %d %v (plan %s): %w", rank, i, k, c.PlanName(weft.Call{Coll: k.coll, Count: k.count, Type: k.t, Op: k.op, Root: k.root, Send: 1 << 30, Recv: 2 << 30}), err)
		}
		if wrong != 0 {
			return fmt.Errorf("rank %d: integer Avg case %d %v: %d wrong elements", rank, i, k, wrong)
		}
	}
	return netP2P(rank, n, c, dev, s)
}

// TestCollectivesAt12Ranks runs every collective (every data type across
// them) and a group of sends and receives to every peer with 12 ranks on
// one node, as 12 processes on hal/host: past 8 ranks, AllReduce takes the
// tree and ring plans, AllGather and ReduceScatter Bruck and ring,
// Broadcast and Reduce the chains; AllToAll and point-to-point the
// all-pairs plans (one channel per peer).
func TestCollectivesAt12Ranks(t *testing.T) {
	t.Parallel() // waits on sockets and deadlines more than it computes
	if testing.Short() {
		t.Skip("spawns 12 processes")
	}
	out, err, took := runChildren(t, 12, "scale")
	if err != nil {
		t.Fatalf("12 ranks: %v\n%s", err, out)
	}
	t.Logf("12 ranks: %v", took.Round(time.Millisecond))
}

// TestCollectivesAt16RanksOn4Nodes runs the same with 16 ranks on 4
// emulated nodes of 4 (WEFT_NODE_ID, the socket transport between nodes):
// AllReduce, AllGather and ReduceScatter take the hierarchical plans, the
// others (and Avg) the flat port-channel plans, which reduce in a chain
// of transfers past 8 ranks.
func TestCollectivesAt16RanksOn4Nodes(t *testing.T) {
	t.Parallel() // waits on sockets and deadlines more than it computes
	if testing.Short() {
		t.Skip("spawns 16 processes")
	}
	out, err, took := runNodes(t, 16, 4, "scale")
	if err != nil {
		t.Fatalf("16 ranks on 4 nodes: %v\n%s", err, out)
	}
	t.Logf("16 ranks on 4 nodes: %v", took.Round(time.Millisecond))
}

// TestAllToAllAndP2PAt24Ranks runs AllToAll and a group of sends and
// receives to every peer with 24 ranks, goroutines of one process on
// hal/host (p2pScaleChild): past algorithms.PeerPlansMaxRanks ranks no
// plan has a channel per peer, so each rank's peers are split into
// windows of at most plan.MaxPeers (algorithms.P2PWindows: blocks of 12
// ranks here, two windows) with point-to-point plans of their own, and
// AllToAll runs as one such group.
func TestAllToAllAndP2PAt24Ranks(t *testing.T) {
	t.Parallel() // waits on deadlines more than it computes
	if testing.Short() {
		t.Skip("runs 24 ranks")
	}
	start := time.Now()
	errs := runRanks(t, "host", 24, p2pScaleChild)
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	t.Logf("24 ranks: %v", time.Since(start).Round(time.Millisecond))
}

// p2pScaleChild is one rank of a job past algorithms.PeerPlansMaxRanks
// ranks: AllToAll (served by the point-to-point plans of the peer windows,
// algorithms.P2PWindows) for types of 1, 2, 4 and 8 bytes, one element,
// an LL-sized and an HB-sized segment, in and out of place, every element
// compared with check's values, then a group of sends and receives of
// different sizes (zero included) to every peer (netP2P).
func p2pScaleChild(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
	defer releaseCaseBuffers(c, dev)
	n := c.Size()
	wins, err := algorithms.P2PWindows(rank, n)
	if err != nil {
		return err
	}
	if want := (n + plan.MaxPeers - 1) / plan.MaxPeers; len(wins) != want {
		return fmt.Errorf("rank %d: %d peer windows, want %d", rank, len(wins), want)
	}
	cases := []collCase{
		{coll: algorithms.AllToAll, t: plan.Uint8, count: 1},
		{coll: algorithms.AllToAll, t: plan.BFloat16, count: 3001, inPlace: true},
		{coll: algorithms.AllToAll, t: plan.Float32, count: 20011},
		{coll: algorithms.AllToAll, t: plan.Int64, count: 1001, inPlace: true},
	}
	for _, k := range cases {
		call := weft.Call{Coll: k.coll, Count: k.count, Type: k.t, Send: 1 << 30, Recv: 2 << 30}
		name := c.PlanName(call)
		if !strings.HasPrefix(name, "sendrecv") || !strings.HasSuffix(name, "-win0") {
			return fmt.Errorf("rank %d: %v: plan %q, want window 0's point-to-point plan", rank, k, name)
		}
		wrong, err := runColl(rank, c, dev, s, k)
		if err != nil {
			return fmt.Errorf("rank %d: %v (plan %s): %w", rank, k, name, err)
		}
		if wrong != 0 {
			return fmt.Errorf("rank %d: %v (plan %s): %d wrong elements", rank, k, name, wrong)
		}
	}
	return netP2P(rank, n, c, dev, s)
}

// TestAllToAllAndP2PAt24RanksOn4Nodes is TestAllToAllAndP2PAt24Ranks with
// 24 processes on 4 emulated nodes of 6 (WEFT_NODE_ID, the socket
// transport between nodes): the windows' plans run over port channels.
func TestAllToAllAndP2PAt24RanksOn4Nodes(t *testing.T) {
	t.Parallel() // waits on sockets and deadlines more than it computes
	if testing.Short() {
		t.Skip("spawns 24 processes")
	}
	out, err, took := runNodes(t, 24, 4, "scale")
	if err != nil {
		t.Fatalf("24 ranks on 4 nodes: %v\n%s", err, out)
	}
	t.Logf("24 ranks on 4 nodes: %v", took.Round(time.Millisecond))
}
