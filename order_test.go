package weft_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/weftccl/weft"
	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// TestCallsAcrossStreams: a communicator's calls run in the order they were
// issued even when they come on different streams (NCCL's semantics, which
// FSDP2's AllGather and ReduceScatter streams rely on). Each rank chains
// in-place AllReduces over one buffer, alternating between two streams,
// with rank 1 issuing late, so that rank 0's second call would read the
// buffer before its first call wrote it unless the second stream waits for
// the first; every element must come out as n^k times the sum of the
// inputs. Then AllGather and ReduceScatter alternate between the streams,
// as FSDP2 issues them, on the memory-channel plans and on the
// port-channel plans (whose calls share a proxy and its engines: run at
// once on two streams, they deadlock).
func TestCallsAcrossStreams(t *testing.T) {
	t.Parallel()
	for _, family := range []string{"", algorithms.PortFamily} {
		t.Run("family="+family, func(t *testing.T) {
			const n = 2
			errs := runRanksConfig(t, n, func(c *algorithms.Config) { c.Algo = family }, streamsInOrder)
			reportRanks(t, errs)
		})
	}
}

// TestCallsAcrossStreamsNVLink is TestCallsAcrossStreams on two GPUs. It
// skips without them, unless WEFT_REQUIRE names nvlink.
func TestCallsAcrossStreamsNVLink(t *testing.T) {
	if requireGPUs(t) < 2 {
		t.Skip("needs 2 GPUs")
	}
	errs := runRanks(t, "nvlink", 2, streamsInOrder)
	reportRanks(t, errs)
}

// streamsInOrder is a rank's body of the TestCallsAcrossStreams tests: s
// and a second stream of its own.
func streamsInOrder(rank int, c *weft.Comm, dev hal.Device, s hal.Stream) error {
	defer releaseCaseBuffers(c, dev)
	s2, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer s2.Close()
	ss := [2]hal.Stream{s, s2}
	const count, calls = 70001, 5
	n := c.Size()
	buf, err := dev.Alloc(count * 4)
	if err != nil {
		return err
	}
	defer buf.Free()
	defer c.Deregister(buf)
	in := make([]byte, count*4)
	for i := 0; i < count; i++ {
		binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(float32(rank+1+i%7)))
	}
	if err := dev.Write(buf, 0, in); err != nil {
		return err
	}
	if rank == 1 {
		time.Sleep(50 * time.Millisecond) // rank 0's calls queue up while rank 1 has not started
	}
	for k := 0; k < calls; k++ {
		call := weft.Call{Coll: algorithms.AllReduce, Send: buf.Addr(), Recv: buf.Addr(), Count: count, Type: plan.Float32, Op: plan.Sum}
		if err := c.Launch(call, ss[k%2]); err != nil {
			return fmt.Errorf("AllReduce %d: %w", k, err)
		}
	}
	for _, s := range ss {
		if err := c.Synchronize(s); err != nil {
			return err
		}
	}
	got := make([]byte, count*4)
	if err := dev.Read(got, buf, 0); err != nil {
		return err
	}
	scale := math.Pow(float64(n), calls-1)
	wrong := 0
	first := ""
	for i := 0; i < count; i++ {
		sum := 0.0
		for r := 0; r < n; r++ {
			sum += float64(r + 1 + i%7)
		}
		if g := math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])); float64(g) != sum*scale {
			if wrong == 0 {
				first = fmt.Sprintf("element %d: %v, want %v", i, g, sum*scale)
			}
			wrong++
		}
	}
	if wrong != 0 {
		return fmt.Errorf("%d chained AllReduces on alternating streams: %d of %d elements wrong (%s): a call ran before the previous one finished", calls, wrong, count, first)
	}
	// AllGather on one stream, ReduceScatter on the other, as FSDP2 issues
	// them; each checked (runColl synchronises only the stream it used, so
	// the launches of a round stay queued together on both streams).
	for round := 0; round < 3; round++ {
		for j, coll := range []algorithms.Collective{algorithms.AllGather, algorithms.ReduceScatter} {
			k := collCase{coll: coll, t: plan.BFloat16, op: plan.Sum, count: 40000 + int64(round)}
			wrong, err := runColl(rank, c, dev, ss[j], k)
			if err != nil {
				return fmt.Errorf("round %d %v: %w", round, k, err)
			}
			if wrong != 0 {
				return fmt.Errorf("round %d %v: %d wrong elements", round, k, wrong)
			}
		}
	}
	return nil
}
