package channels

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
	_ "github.com/weftccl/weft/hal/host"
	"github.com/weftccl/weft/hal/plan"
)

// errInjected is the failure faultyDevice injects.
var errInjected = fmt.Errorf("injected failure: %w", hal.ErrSystem)

// faultyDevice wraps a hal/host device: call number failAt (from 1) of
// those Setup makes that can fail (allocations, writes, exports, imports,
// engines and the multicast steps) fails with errInjected, and it counts
// what is live — buffers allocated or imported and not freed, engines and
// multicast memberships not closed — so that a test can see what a failed
// Setup leaves behind. failAt 0 fails nothing.
type faultyDevice struct {
	hal.Device
	mm     hal.MemoryMapped
	pm     hal.PortMapped
	sm     hal.SwitchMapped
	failAt int

	mu    sync.Mutex
	calls int
	live  map[string]int // by kind: "buffer", "engine", "multicast"
	what  string         // the call that failed
}

func newFaultyDevice(t *testing.T, job string, rank, failAt int) *faultyDevice {
	t.Helper()
	d, err := hal.Open("host", hal.Config{Ordinal: rank, Rank: rank, JobID: job})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &faultyDevice{Device: d, mm: d.(hal.MemoryMapped), pm: d.(hal.PortMapped), sm: d.(hal.SwitchMapped),
		failAt: failAt, live: map[string]int{}}
}

// call counts a call that can fail and says whether it must.
func (d *faultyDevice) call(what string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.calls == d.failAt {
		d.what = what
		return fmt.Errorf("%s: %w", what, errInjected)
	}
	return nil
}

func (d *faultyDevice) add(kind string, n int) {
	d.mu.Lock()
	d.live[kind] += n
	d.mu.Unlock()
}

// released counts the release of one thing of kind, once, when err says it
// succeeded, and returns err.
func (d *faultyDevice) released(once *sync.Once, kind string, err error) error {
	if err == nil {
		once.Do(func() { d.add(kind, -1) })
	}
	return err
}

// leaked describes what is still live, or is "".
func (d *faultyDevice) leaked() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var s []string
	for k, n := range d.live {
		if n != 0 {
			s = append(s, fmt.Sprintf("%d %s", n, k))
		}
	}
	return strings.Join(s, ", ")
}

type faultyBuffer struct {
	hal.Buffer
	dev  *faultyDevice
	once sync.Once
}

func (b *faultyBuffer) Free() error { return b.dev.released(&b.once, "buffer", b.Buffer.Free()) }

func (d *faultyDevice) track(b hal.Buffer, err error) (hal.Buffer, error) {
	if err != nil {
		return nil, err
	}
	d.add("buffer", 1)
	return &faultyBuffer{Buffer: b, dev: d}, nil
}

func unwrapBuffer(b hal.Buffer) hal.Buffer {
	if f, ok := b.(*faultyBuffer); ok {
		return f.Buffer
	}
	return b
}

func (d *faultyDevice) Alloc(n int64) (hal.Buffer, error) {
	if err := d.call("alloc"); err != nil {
		return nil, err
	}
	return d.track(d.Device.Alloc(n))
}

func (d *faultyDevice) AllocHost(n int64) (hal.Buffer, error) {
	if err := d.call("alloc host"); err != nil {
		return nil, err
	}
	return d.track(d.Device.AllocHost(n))
}

func (d *faultyDevice) Write(dst hal.Buffer, off int64, src []byte) error {
	if err := d.call("write"); err != nil {
		return err
	}
	return d.Device.Write(unwrapBuffer(dst), off, src)
}

func (d *faultyDevice) Read(dst []byte, src hal.Buffer, off int64) error {
	return d.Device.Read(dst, unwrapBuffer(src), off)
}

func (d *faultyDevice) Export(b hal.Buffer) (hal.Handle, error) {
	if err := d.call("export"); err != nil {
		return nil, err
	}
	return d.mm.Export(unwrapBuffer(b))
}

func (d *faultyDevice) Import(h hal.Handle) (hal.Buffer, error) {
	if err := d.call("import"); err != nil {
		return nil, err
	}
	return d.track(d.mm.Import(h))
}

func (d *faultyDevice) DeviceHeader() string { return d.mm.DeviceHeader() }

func (d *faultyDevice) ExportPort(b hal.Buffer) (hal.Handle, error) {
	if err := d.call("export port"); err != nil {
		return nil, err
	}
	return d.pm.ExportPort(unwrapBuffer(b))
}

func (d *faultyDevice) ImportPort(h hal.Handle) (hal.Buffer, error) {
	if err := d.call("import port"); err != nil {
		return nil, err
	}
	return d.track(d.pm.ImportPort(h))
}

type faultyEngine struct {
	hal.Engine
	dev  *faultyDevice
	once sync.Once
}

func (e *faultyEngine) Close() error { return e.dev.released(&e.once, "engine", e.Engine.Close()) }

func (d *faultyDevice) NewEngine(peer hal.Endpoint) (hal.Engine, error) {
	if err := d.call("new engine"); err != nil {
		return nil, err
	}
	e, err := d.pm.NewEngine(peer)
	if err != nil {
		return nil, err
	}
	d.add("engine", 1)
	return &faultyEngine{Engine: e, dev: d}, nil
}

type faultyMulticast struct {
	hal.Multicast
	dev  *faultyDevice
	once sync.Once
}

func (m *faultyMulticast) Handle() (hal.Handle, error) {
	if err := m.dev.call("multicast handle"); err != nil {
		return nil, err
	}
	return m.Multicast.Handle()
}

func (m *faultyMulticast) Bind(b hal.Buffer) error {
	if err := m.dev.call("bind"); err != nil {
		return err
	}
	return m.Multicast.Bind(unwrapBuffer(b))
}

func (m *faultyMulticast) Close() error {
	return m.dev.released(&m.once, "multicast", m.Multicast.Close())
}

func (d *faultyDevice) trackMulticast(m hal.Multicast, err error) (hal.Multicast, error) {
	if err != nil {
		return nil, err
	}
	d.add("multicast", 1)
	return &faultyMulticast{Multicast: m, dev: d}, nil
}

func (d *faultyDevice) MulticastGranularity() (int64, error) {
	if err := d.call("multicast granularity"); err != nil {
		return 0, err
	}
	return d.sm.MulticastGranularity()
}

func (d *faultyDevice) NewMulticast(bytes int64, ranks int) (hal.Multicast, error) {
	if err := d.call("new multicast"); err != nil {
		return nil, err
	}
	return d.trackMulticast(d.sm.NewMulticast(bytes, ranks))
}

func (d *faultyDevice) ImportMulticast(h hal.Handle) (hal.Multicast, error) {
	if err := d.call("import multicast"); err != nil {
		return nil, err
	}
	return d.trackMulticast(d.sm.ImportMulticast(h))
}

func (d *faultyDevice) SwitchHeader() string { return d.sm.SwitchHeader() }

var (
	_ hal.MemoryMapped = (*faultyDevice)(nil)
	_ hal.PortMapped   = (*faultyDevice)(nil)
	_ hal.SwitchMapped = (*faultyDevice)(nil)
)

// everyStepPlan uses every step of Setup: a memory channel and a port
// channel to the other rank, semaphores, and a switch buffer.
func everyStepPlan(rank int) *plan.Plan {
	peer := 1 - rank
	return &plan.Plan{Name: "every-step", Rank: rank, NRanks: 2, Threads: 32, Semaphores: 1,
		Channels:    []plan.Channel{{Peer: peer}, {Peer: peer, Port: true}},
		SwitchSlots: 2, MaxBytes: 1000,
		Groups: []plan.Group{{Blocks: 1, Ops: []plan.Op{
			plan.Signal(0, 0), plan.Wait(0, 0),
			plan.Transfer(plan.All, 0, []plan.Ref{plan.MC(1)}, plan.L(plan.Input)),
		}}}}
}

// setupPair runs Setup on two goroutine ranks over devs; a rank whose
// Setup fails closes its bootstrap, so that its peer stops waiting.
func setupPair(devs [2]*faultyDevice) ([2]*Resources, [2]error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	boots := bootstrap.NewLocal(2)
	var res [2]*Resources
	var errs [2]error
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			res[r], errs[r] = Setup(ctx, boots[r], devs[r], everyStepPlan(r), 4096, 1<<32-3)
			if errs[r] != nil {
				boots[r].Close()
			}
		}(r)
	}
	wg.Wait()
	for _, b := range boots {
		b.Close()
	}
	return res, errs
}

// proxyOf reports whether a shared proxy is still held for dev.
func proxyOf(dev hal.Device) bool {
	shared.Lock()
	defer shared.Unlock()
	return shared.m[dev] != nil
}

// A failure at any step of Setup, on either rank, returns an error that
// wraps the device's and names the setup, makes the peer's Setup fail too,
// and leaves nothing allocated, mapped, open or joined on either rank.
func TestSetupFailureLeavesNothing(t *testing.T) {
	// A clean run counts the calls each rank makes, and checks that Close
	// releases everything (so that the counts below mean something).
	var devs [2]*faultyDevice
	for r := range devs {
		devs[r] = newFaultyDevice(t, "faulty-clean", r, 0)
	}
	res, errs := setupPair(devs)
	var calls [2]int
	for r := range 2 {
		if errs[r] != nil {
			t.Fatalf("rank %d: clean setup: %v", r, errs[r])
		}
		if res[r].Switch == nil || len(res[r].Channels) != 2 || res[r].fifo == nil {
			t.Fatalf("rank %d: the plan does not use every step: switch %v, %d channels, FIFO %v", r, res[r].Switch, len(res[r].Channels), res[r].fifo)
		}
		calls[r] = devs[r].calls
	}
	for r := range 2 {
		if err := res[r].Close(); err != nil {
			t.Errorf("rank %d: close: %v", r, err)
		}
		if l := devs[r].leaked(); l != "" || proxyOf(devs[r]) {
			t.Fatalf("rank %d: after a clean setup and Close: %s live, proxy held %v", r, l, proxyOf(devs[r]))
		}
	}
	for failing := range 2 {
		for k := 1; k <= calls[failing]; k++ {
			job := fmt.Sprintf("faulty-%d-%d", failing, k)
			var devs [2]*faultyDevice
			for r := range devs {
				at := 0
				if r == failing {
					at = k
				}
				devs[r] = newFaultyDevice(t, job, r, at)
			}
			res, errs := setupPair(devs)
			step := fmt.Sprintf("rank %d failing at call %d (%s)", failing, k, devs[failing].what)
			for r := range 2 {
				if res[r] != nil {
					res[r].Close()
					t.Errorf("%s: rank %d: Setup succeeded", step, r)
				}
				if l := devs[r].leaked(); l != "" || proxyOf(devs[r]) {
					t.Errorf("%s: rank %d: %s still live, proxy held %v, after %v", step, r, l, proxyOf(devs[r]), errs[r])
				}
			}
			err := errs[failing]
			if !errors.Is(err, errInjected) || !strings.HasPrefix(err.Error(), "channels: setup") {
				t.Errorf("%s: %v, want an error of channels: setup wrapping the injected one", step, err)
			}
		}
	}
}
