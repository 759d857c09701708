package devcore

import (
	"errors"
	"strings"
	"testing"

	"github.com/weftccl/weft/hal"
)

func TestKernels(t *testing.T) {
	unloaded := 0
	k := NewKernels[*string]("allreduce", "GPU 0", func() error { unloaded++; return nil })
	lookups := 0
	lookup := func(name string) (*string, error) {
		lookups++
		if name == "missing" {
			return nil, errors.New("named symbol not found")
		}
		return &name, nil
	}
	a, err := k.Kernel("run", lookup)
	if err != nil || *a != "run" {
		t.Fatalf("Kernel(run) = %v, %v", a, err)
	}
	if b, err := k.Kernel("run", lookup); err != nil || b != a || lookups != 1 {
		t.Errorf("second Kernel(run) = %p, %v after %d lookups; want the first (%p), looked up once", b, err, lookups, a)
	}
	if _, err := k.Kernel("missing", lookup); err == nil || err.Error() != "module allreduce on GPU 0: named symbol not found" {
		t.Errorf("Kernel(missing) = %v", err)
	}
	if k.Closed() {
		t.Error("Closed before Close")
	}
	if err := k.Close(); err != nil || unloaded != 1 || !k.Closed() {
		t.Errorf("Close = %v, unloaded %d times", err, unloaded)
	}
	if err := k.Close(); !errors.Is(err, hal.ErrInvalidUsage) || unloaded != 1 {
		t.Errorf("second Close = %v (unloaded %d times), want ErrInvalidUsage", err, unloaded)
	}
	if _, err := k.Kernel("run", lookup); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("Kernel after Close = %v, want ErrInvalidUsage", err)
	}
	failing := NewKernels[*string]("m", "GPU 1", func() error { return errors.New("context destroyed") })
	if err := failing.Close(); err == nil || err.Error() != "close module m on GPU 1: context destroyed" {
		t.Errorf("Close with a failing unload = %v", err)
	}
}

// TestCheckResident: a grid that the units hold at once passes (up to the
// last block), one block more is refused naming the figures, and a
// runtime that reports no figure is not checked.
func TestCheckResident(t *testing.T) {
	if err := CheckResident("k", "gpu 0", 264, 1024, 2, 132); err != nil {
		t.Errorf("264 blocks on 2 × 132: %v", err)
	}
	err := CheckResident("k", "gpu 0", 265, 1024, 2, 132)
	if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "k on gpu 0: 265 blocks of 1024 threads cannot all be resident (2 per multiprocessor × 132 multiprocessors = 264)") {
		t.Errorf("265 blocks on 2 × 132: %v; want ErrInvalidArgument naming the figures", err)
	}
	for _, c := range [][2]int{{0, 132}, {2, 0}} {
		if err := CheckResident("k", "gpu 0", 1<<20, 1024, c[0], c[1]); err != nil {
			t.Errorf("%d per unit × %d units (no figure): %v; want no check", c[0], c[1], err)
		}
	}
}
