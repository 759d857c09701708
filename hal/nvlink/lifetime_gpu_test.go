package nvlink

import (
	"encoding/binary"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/cudadev"
)

// stuckKernel waits for a semaphore in device memory that nobody signals,
// until its own deadline, and then reports 2 (timed out) in a host-mapped
// word; 1 if the semaphore was signalled.
const stuckKernel = `
#include "weft_hal.h"
using namespace weft::hal;
struct WaitParams { const weft_u64* sem; weft_u32* status; weft_u64 timeout_ns; };
extern "C" __global__ void wait_sem(WaitParams a) {
  weft_u64 start = globaltimer_ns();
  while (ld_acquire_sys(a.sem) == 0 && globaltimer_ns() - start < a.timeout_ns) backoff();
  st_relaxed_sys32(a.status, ld_acquire_sys(a.sem) ? 1u : 2u);
}
`

// TestCloseDuringStuckLaunch is the backend's view of item 5 of issue 18:
// through the hal interfaces, a launch waits on a semaphore nobody
// signals; Free of the semaphore's buffer and Close of the device return
// hal.ErrTimeout within WEFT_TIMEOUT (300ms) naming what they would
// release, without a crash and without releasing it; the launch then
// reports its own timeout, after which Free and Close succeed.
func TestCloseDuringStuckLaunch(t *testing.T) {
	if a := (backend{}).Probe(); !a.Available {
		requireOrSkip(t, "nvlink unavailable: "+a.Reason)
	}
	if n, _ := cuda.DeviceCount(); n < 1 {
		requireOrSkip(t, "no CUDA device")
	}
	t.Setenv("WEFT_CACHE_DIR", t.TempDir())
	t.Setenv("WEFT_TIMEOUT", "300ms")
	d, err := Open(hal.Config{Ordinal: 0, Rank: 0})
	if err != nil {
		t.Fatal(err)
	}
	open := true
	defer func() {
		if open {
			d.Close()
		}
	}()
	mod, err := d.Compile(hal.KernelSource{Name: "stuck.cu", Source: stuckKernel, Headers: map[string]string{cudadev.DeviceHeaderName: d.DeviceHeader()}})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := mod.Function("wait_sem")
	if err != nil {
		t.Fatal(err)
	}
	sem, err := d.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	status, err := d.AllocHost(64)
	if err != nil {
		t.Fatal(err)
	}
	word := (*uint32)(unsafe.Pointer(&status.Host()[0]))
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	const kernelDeadline = 4 * time.Second
	p := make([]byte, 24)
	binary.LittleEndian.PutUint64(p[0:], sem.Addr())
	binary.LittleEndian.PutUint64(p[8:], status.Addr())
	binary.LittleEndian.PutUint64(p[16:], uint64(kernelDeadline))
	if err := fn.Launch(s, 1, 32, 0, p); err != nil {
		t.Fatal(err)
	}
	launched := time.Now()

	start := time.Now()
	err = sem.Free()
	if took := time.Since(start); !errors.Is(err, hal.ErrTimeout) || !strings.Contains(err.Error(), "free device buffer") || took > 2*time.Second {
		t.Errorf("Free of the semaphore's buffer under a stuck launch = %v after %v, want ErrTimeout naming the buffer within ~300ms", err, took)
	}
	start = time.Now()
	err = d.Close()
	if took := time.Since(start); !errors.Is(err, hal.ErrTimeout) || !strings.Contains(err.Error(), "close nvlink GPU 0") || took > 2*time.Second {
		t.Errorf("Close under a stuck launch = %v after %v, want ErrTimeout naming the device within ~300ms", err, took)
	}
	if since := time.Since(launched); since > kernelDeadline-500*time.Millisecond {
		t.Fatalf("Free and Close took %v, too close to the kernel's deadline", since)
	}
	if v := atomic.LoadUint32(word); v != 0 {
		t.Errorf("launch reported %d before its deadline; want it still waiting", v)
	}
	for until := time.Now().Add(kernelDeadline + 10*time.Second); atomic.LoadUint32(word) == 0 && time.Now().Before(until); {
		time.Sleep(10 * time.Millisecond)
	}
	if v := atomic.LoadUint32(word); v != 2 {
		t.Fatalf("launch reported %d, want 2 (its own timeout)", v)
	}
	t.Setenv("WEFT_TIMEOUT", "10s")
	for what, err := range map[string]error{"stream close": s.Close(), "free": sem.Free(), "free host": status.Free(), "module close": mod.Close()} {
		if err != nil {
			t.Errorf("%s after the launch ended: %v", what, err)
		}
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close after the launch ended: %v", err)
	}
	open = false
}
