package cudadev

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/shm"
)

// openUnmanaged opens GPU 0 like openTest but leaves closing to the test.
func openUnmanaged(t *testing.T) *Device {
	t.Helper()
	if a := Probe(); !a.Available {
		requireOrSkip(t, "CUDA unavailable: "+a.Reason)
	}
	if n, _ := cuda.DeviceCount(); n < 1 {
		requireOrSkip(t, "no CUDA device")
	}
	t.Setenv("WEFT_CACHE_DIR", t.TempDir())
	d, err := openDev(hal.Config{Ordinal: 0, Rank: 0})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestCloseDuringStuckLaunch launches a kernel that waits on a flag in
// device memory that nobody sets (its own deadline is 4 s), then frees the
// flag's buffer, frees the pinned buffer it reports into, and closes the
// device, with WEFT_TIMEOUT=300ms: each returns within about the deadline
// with hal.ErrTimeout naming what it would have released, and leaves it in
// place (the kernel still writes its result into the pinned buffer). Once
// the kernel gives up by itself (it reports 2, timed out), the same calls
// succeed.
func TestCloseDuringStuckLaunch(t *testing.T) {
	t.Setenv("WEFT_TIMEOUT", "300ms")
	d := openUnmanaged(t)
	closed := false
	defer func() {
		if !closed {
			d.Close()
		}
	}()
	m := compileTestKernels(t, d)
	s, err := d.NewCUDAStream()
	if err != nil {
		t.Fatal(err)
	}
	flag, err := d.AllocDevice(4096)
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := d.AllocHostPinned(8)
	if err != nil {
		t.Fatal(err)
	}
	done := (*uint32)(unsafe.Pointer(&ctrl.Host()[0]))
	const kernelDeadline = 4 * time.Second
	launch(t, m, "spin", s, 1, 1, new(params).u64(flag.Addr()).u64(ctrl.Addr()).u64(uint64(kernelDeadline)))
	launchedAt := time.Now()
	// The stream is closed before the frees: its work must still count.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		call func() error
		want string
	}{
		{"free device buffer", flag.Free, "free device buffer"},
		{"free pinned buffer", ctrl.Free, "free host-pinned buffer"},
		{"close device", d.Close, "close nvlink GPU 0"},
	} {
		start := time.Now()
		err := c.call()
		took := time.Since(start)
		if !errors.Is(err, hal.ErrTimeout) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "still running") {
			t.Errorf("%s during a stuck launch = %v, want ErrTimeout naming %q", c.name, err, c.want)
		}
		if took < 250*time.Millisecond || took > 2*time.Second {
			t.Errorf("%s returned after %v, want about WEFT_TIMEOUT (300ms)", c.name, took)
		}
	}
	if time.Since(launchedAt) > kernelDeadline-500*time.Millisecond {
		t.Fatalf("the calls took %v: too close to the kernel's own deadline for the checks below", time.Since(launchedAt))
	}
	if v := atomic.LoadUint32(done); v != 0 {
		t.Errorf("kernel finished (%d) while it should still wait", v)
	}
	if ctrl.Host() == nil {
		t.Error("pinned buffer lost its host view after a Free that timed out")
	}

	// The kernel gives up at its deadline and reports it.
	until := time.Now().Add(kernelDeadline + 10*time.Second)
	for atomic.LoadUint32(done) == 0 && time.Now().Before(until) {
		time.Sleep(10 * time.Millisecond)
	}
	if v := atomic.LoadUint32(done); v != 2 {
		t.Fatalf("kernel reported %d, want 2 (timed out waiting for the flag)", v)
	}
	t.Setenv("WEFT_TIMEOUT", "10s")
	if err := flag.Free(); err != nil {
		t.Errorf("free after the kernel ended: %v", err)
	}
	if err := ctrl.Free(); err != nil {
		t.Errorf("free pinned after the kernel ended: %v", err)
	}
	if err := ctrl.Free(); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("second free = %v, want ErrInvalidUsage", err)
	}
	m.Close()
	if err := d.Close(); err != nil {
		t.Errorf("close after the kernel ended: %v", err)
	}
	closed = true
}

// TestCloseDuringStuckLaunchOnCallerStream is TestCloseDuringStuckLaunch
// on a stream the caller created (WrapStream, as the NCCL layer does),
// which weft does not query: the launch's event keeps Free waiting, even
// after the wrapper is closed.
func TestCloseDuringStuckLaunchOnCallerStream(t *testing.T) {
	t.Setenv("WEFT_TIMEOUT", "300ms")
	d := openTest(t, 0)
	m := compileTestKernels(t, d)
	_, ctx := d.CUDA()
	cs, err := ctx.StreamCreate(cuda.StreamNonBlocking)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Destroy()
	s := d.WrapStream(cs.Handle)
	ctrl, err := d.AllocHostPinned(8)
	if err != nil {
		t.Fatal(err)
	}
	flagp := (*uint32)(unsafe.Pointer(&ctrl.Host()[0]))
	donep := (*uint32)(unsafe.Pointer(&ctrl.Host()[4]))
	launch(t, m, "spin", s, 1, 1, new(params).u64(ctrl.Addr()).u64(ctrl.Addr()+4).u64(uint64(30*time.Second)))
	s.Close()
	if err := ctrl.Free(); !errors.Is(err, hal.ErrTimeout) || !strings.Contains(err.Error(), "free host-pinned buffer") {
		t.Errorf("free of the buffer a launch on the caller's stream uses = %v, want ErrTimeout naming it", err)
	}
	atomic.StoreUint32(flagp, 1) // release the kernel
	for until := time.Now().Add(10 * time.Second); atomic.LoadUint32(donep) == 0 && time.Now().Before(until); {
		time.Sleep(time.Millisecond)
	}
	if v := atomic.LoadUint32(donep); v != 1 {
		t.Errorf("kernel reported %d after the flag was set, want 1", v)
	}
	t.Setenv("WEFT_TIMEOUT", "10s")
	if err := ctrl.Free(); err != nil {
		t.Fatalf("free after the kernel was released: %v", err)
	}
}

// TestAllocTooLarge asks for more device memory than the GPU has free and
// more pinned host memory than the host has available: both fail at once
// with hal.ErrSystem naming the size asked and what is free, and nothing
// is allocated.
func TestAllocTooLarge(t *testing.T) {
	d := openTest(t, 0)
	free, total, err := d.MemoryFree()
	if err != nil {
		t.Fatal(err)
	}
	if free <= 0 || free > total || total != d.Info().MemoryBytes {
		t.Errorf("MemoryFree = %d of %d; device has %d bytes", free, total, d.Info().MemoryBytes)
	}
	ask := total + 8<<30
	start := time.Now()
	_, err = d.AllocDevice(ask)
	if !errors.Is(err, hal.ErrSystem) {
		t.Fatalf("AllocDevice(%d) = %v, want ErrSystem", ask, err)
	}
	for _, want := range []string{"allocate " + shm.Bytes(uint64(ask)) + " on GPU 0 (" + d.Info().Name + ")", " free of " + shm.Bytes(uint64(total))} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the check took %v", took)
	}
	if after, _, _ := d.MemoryFree(); after < free-64<<20 {
		t.Errorf("free memory fell from %d to %d after a refused allocation", free, after)
	}
	avail, err := shm.MemAvailable()
	if err != nil {
		t.Skip(err)
	}
	hostAsk := int64(avail) + 8<<30
	if _, err := d.AllocHostPinned(hostAsk); !errors.Is(err, hal.ErrSystem) || !strings.Contains(err.Error(), "MemAvailable") || !strings.Contains(err.Error(), shm.Bytes(uint64(hostAsk))) {
		t.Errorf("AllocHostPinned(%d) = %v, want ErrSystem naming the size and MemAvailable", hostAsk, err)
	}
}

// TestQuiesceWhileStreamsAreDestroyed frees buffers (each Free quiesces:
// it queries every stream weft created) on one goroutine while another
// creates, loads with copies and destroys streams: quiesce must query only
// streams and events that still exist (a destroyed CUstream queried by the
// driver crashed a 2-node socket run at Close on 2×H100, 2026-11-26: a
// socket receiver freed its staging buffer while the engine's shutdown
// destroyed its stream). Every Free must succeed, and nothing crash.
func TestQuiesceWhileStreamsAreDestroyed(t *testing.T) {
	d := openUnmanaged(t)
	defer d.Close()
	src, err := d.AllocDevice(8 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Free()
	dst, err := d.AllocDevice(8 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Free()
	stop := make(chan struct{})
	churn := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				churn <- nil
				return
			default:
			}
			s, err := d.CreateStream("churn")
			if err != nil {
				churn <- err
				return
			}
			for k := 0; k < 4; k++ {
				if err := s.MemcpyAsync(cuda.DevicePtr(dst.Addr()), cuda.DevicePtr(src.Addr()), 8<<20); err != nil {
					churn <- err
					return
				}
			}
			if err := d.DestroyStream(s); err != nil {
				churn <- err
				return
			}
		}
	}()
	deadline := time.Now().Add(2 * time.Second)
	for n := 0; time.Now().Before(deadline); n++ {
		b, err := d.AllocDevice(4096)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Free(); err != nil {
			t.Fatalf("free %d while streams come and go: %v", n, err)
		}
	}
	close(stop)
	if err := <-churn; err != nil {
		t.Fatal(err)
	}
}
