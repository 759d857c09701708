package channels

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// A network's receiver-side failure (NetDevice.Err, watched by the proxy)
// fails the plan's FIFO: waits are aborted through the control block, and
// Err, which Resources.Check returns, names the lost peer.
func TestProxyWatchFailsFifo(t *testing.T) {
	words := make([]uint64, plan.FifoBytes/8)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), plan.FifoBytes)
	ctl := make([]uint64, plan.ControlBytes/8)
	control := unsafe.Slice((*byte)(unsafe.Pointer(&ctl[0])), plan.ControlBytes)
	p := NewProxy(nil, 0)
	defer p.Close()
	f, err := newFifo("test-plan", mem, []hal.Engine{nil}, []int{3}, 0, control, 0, p.log)
	if err != nil {
		t.Fatal(err)
	}
	var lost atomic.Bool
	f.watch = func() error {
		if lost.Load() {
			return fmt.Errorf("network socket: rank 3 lost while sending to rank 0: %w", hal.ErrRemote)
		}
		return nil
	}
	if err := p.add(f); err != nil {
		t.Fatal(err)
	}
	defer p.remove(f)
	time.Sleep(10 * time.Millisecond)
	if err := f.Err(); err != nil {
		t.Fatalf("FIFO failed while the network was healthy: %v", err)
	}
	lost.Store(true)
	deadline := time.Now().Add(10 * time.Second)
	for f.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	err = f.Err()
	if err == nil || !strings.Contains(err.Error(), "rank 3") || !errors.Is(err, hal.ErrRemote) {
		t.Fatalf("FIFO error %v: want one naming rank 3 and wrapping ErrRemote", err)
	}
	if abort := atomic.LoadUint32((*uint32)(unsafe.Pointer(&control[plan.CtlAbort]))); abort != 1 {
		t.Errorf("control block abort flag %d, want 1", abort)
	}
}

// DebugState lists every shared proxy and its FIFOs: what was consumed,
// what the next slot holds, and the FIFO's failure.
func TestDebugState(t *testing.T) {
	words := make([]uint64, plan.FifoBytes/8)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), plan.FifoBytes)
	p := acquireProxy(nil, 5)
	defer releaseProxy(nil)
	f, err := newFifo("debug-plan", mem, []hal.Engine{nil}, []int{1}, 5, nil, 0, p.log)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.add(f); err != nil {
		t.Fatal(err)
	}
	defer p.remove(f)
	got := DebugState()
	for _, want := range []string{"proxy of rank 5", "fifo debug-plan: consumed 0, next slot: empty; triggers 0, flush waits 0; ok"} {
		if !strings.Contains(got, want) {
			t.Errorf("DebugState() = %q, want it to contain %q", got, want)
		}
	}
	f.err.Store(&proxyError{err: errors.New("engine to rank 1 failed")})
	if got := DebugState(); !strings.Contains(got, "engine to rank 1 failed") {
		t.Errorf("DebugState() after a failure = %q, want the failure", got)
	}
}

// recordEngine records the signals it is asked for; ackEngine is one
// that also implements hal.AckSignaler.
type recordEngine struct{ calls []string }

func (e *recordEngine) Put(dst, src uint64, bytes int64) error  { return nil }
func (e *recordEngine) Copy(dst, src uint64, bytes int64) error { return nil }
func (e *recordEngine) Signal(sem, cnt, count uint64) error {
	e.calls = append(e.calls, fmt.Sprintf("signal %d", count))
	return nil
}
func (e *recordEngine) Mark() (uint64, error)      { return 0, nil }
func (e *recordEngine) Completed() (uint64, error) { return 0, nil }
func (e *recordEngine) Close() error               { return nil }

type ackEngine struct{ recordEngine }

func (e *ackEngine) AckSignal(sem, cnt, count uint64) error {
	e.calls = append(e.calls, fmt.Sprintf("release %d", count))
	return nil
}

// The proxy hands a release (plan.TriggerAck) to AckSignal where the
// channel's engine has it, and to Signal elsewhere; plain signals always
// to Signal.
func TestProxyRoutesReleases(t *testing.T) {
	words := make([]uint64, plan.FifoBytes/8)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), plan.FifoBytes)
	acker, plain := &ackEngine{}, &recordEngine{}
	p := NewProxy(nil, 0)
	defer p.Close()
	f, err := newFifo("release-plan", mem, []hal.Engine{acker, plain}, []int{1, 2}, 0, nil, 0, p.log)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for i, tr := range []struct {
		k  plan.TriggerKind
		ch int
	}{{plan.TriggerSignal | plan.TriggerAck, 0}, {plan.TriggerSignal, 0}, {plan.TriggerSignal | plan.TriggerAck, 1}, {plan.TriggerSignal, 1}} {
		if _, err := f.push(tr.k, tr.ch, uint64(i+1), 8, 16, deadline); err != nil {
			t.Fatal(err)
		}
	}
	f.poll()
	if err := f.Err(); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(acker.calls, ", "), "release 1, signal 2"; got != want {
		t.Errorf("engine with AckSignal: %s, want %s", got, want)
	}
	if got, want := strings.Join(plain.calls, ", "), "signal 3, signal 4"; got != want {
		t.Errorf("engine without AckSignal: %s, want %s", got, want)
	}
}
