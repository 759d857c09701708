//go:build cgo

package hipdev_test

import (
	"errors"
	"testing"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/hip"
	"github.com/weftccl/weft/internal/hip/hiptest"
	"github.com/weftccl/weft/internal/hipdev"
)

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCopyEngineMarks runs the engine's tickets on the fake runtime: HIP
// events that complete, stay outstanding, or fail as FAKEHIP_FAIL says.
func TestCopyEngineMarks(t *testing.T) {
	hiptest.Load(t, hiptest.ROCm6)
	d := hip.Device(0)
	e, err := hipdev.NewCopyEngine(d, "engine of xgmi GPU 0 (rank 0) to itself")
	check(t, err)
	buf, err := d.Malloc(1<<12, hip.MallocFinegrained)
	check(t, err)
	defer d.Free(buf)
	ticket := func() uint64 {
		t.Helper()
		v, err := e.Mark()
		check(t, err)
		return v
	}
	completed := func() uint64 {
		t.Helper()
		v, err := e.Completed()
		check(t, err)
		return v
	}
	if v := ticket(); v != 1 || completed() != 1 {
		t.Fatalf("a mark with nothing queued: ticket %d, completed %d; want 1, 1", v, completed())
	}
	t.Setenv("FAKEHIP_FAIL", "hipEventQuery=600") // nothing completes
	var last uint64
	for i := 0; i < 70; i++ { // more than the ring of 64 events holds: it grows
		check(t, e.Copy(uint64(buf)+8, uint64(buf), 8))
		last = ticket()
	}
	if last != 71 || completed() != 1 {
		t.Fatalf("70 outstanding marks: last ticket %d, completed %d; want 71, 1", last, completed())
	}
	if v := ticket(); v != 72 { // nothing new: covered by the newest event
		t.Fatalf("ticket = %d, want 72", v)
	}
	t.Setenv("FAKEHIP_FAIL", "")
	if c := completed(); c != 72 {
		t.Fatalf("completed = %d after the events completed, want 72", c)
	}
	check(t, e.Signal(uint64(buf), uint64(buf)+8, 5))
	t.Setenv("FAKEHIP_FAIL", "hipEventQuery=700")
	ticket()
	if _, err := e.Completed(); !hip.IsResult(err, 700) {
		t.Errorf("Completed with a failing event = %v, want hipError 700", err)
	}
	if err := e.Copy(uint64(buf), uint64(buf)+8, 8); !hip.IsResult(err, 700) {
		t.Errorf("Copy after a failed event = %v, want the sticky hipError 700", err)
	}
	t.Setenv("FAKEHIP_FAIL", "")
	check(t, e.Close())
	if _, err := e.Mark(); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("Mark after Close = %v, want ErrInvalidUsage", err)
	}
}
