package channels_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// onRanks runs f on n goroutine ranks, each with its own host device of
// job, and returns their errors.
func onRanks(t *testing.T, n int, job string, f func(rank int, boot bootstrap.Bootstrap, dev hal.Device) error) []error {
	t.Helper()
	boots := bootstrap.NewLocal(n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			defer boots[r].Close()
			dev, err := hal.Open("host", hal.Config{Ordinal: r, Rank: r, JobID: job})
			if err != nil {
				errs[r] = err
				return
			}
			defer dev.Close()
			errs[r] = f(r, boots[r], dev)
		}(r)
	}
	wg.Wait()
	return errs
}

// noSwitch hides the switch-mapped capability of a device.
type noSwitch struct{ hal.Device }

// Three ranks connect a switch channel: every copy is at least the size
// asked for, in whole multicast granules, and a load-reduce through each
// rank's multicast address sums the three copies (one plan per rank, no
// channels: the bootstrap orders the writes and the launches).
func TestConnectSwitch(t *testing.T) {
	const n, count = 3, 1001 // int32; the last vector is partial
	errs := onRanks(t, n, "switchch", func(rank int, boot bootstrap.Bootstrap, dev hal.Device) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		sc, err := channels.ConnectSwitch(ctx, boot, dev, 4*count)
		if err != nil {
			return err
		}
		defer sc.Close()
		gran, _ := dev.(hal.SwitchMapped).MulticastGranularity()
		if sc.Local.Size() < 4*count || sc.Local.Size()%gran != 0 || sc.Addr() == 0 {
			return fmt.Errorf("copy of %d bytes (granularity %d), multicast address %#x", sc.Local.Size(), gran, sc.Addr())
		}
		x := make([]byte, 4*count)
		for i := 0; i < count; i++ {
			binary.LittleEndian.PutUint32(x[4*i:], uint32(i*(rank+1)))
		}
		if err := dev.Write(sc.Local, 0, x); err != nil {
			return err
		}
		red := plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, plan.MC(0))
		red.Combine = true
		p := &plan.Plan{Name: "sum-through-switch", Rank: rank, NRanks: n, Threads: 32, SwitchSlots: 1, MaxBytes: 4 * count,
			Groups: []plan.Group{{Blocks: 2, Ops: []plan.Op{red}}}}
		state, _ := dev.Alloc(p.StateBytes())
		ctl, _ := dev.AllocHost(plan.ControlBytes)
		out, _ := dev.Alloc(4 * count)
		defer state.Free()
		defer ctl.Free()
		defer out.Free()
		prog, err := dev.(hal.Executor).Prepare(hal.PlanSpec{Plan: p, DataType: plan.Int32, RedOp: plan.Sum, Bindings: plan.Bindings{
			State: state.Addr(), Control: ctl.Addr(), Switch: sc.Local.Addr(), Multicast: sc.Addr(), SwitchBytes: p.SwitchCapacity()}})
		if err != nil {
			return err
		}
		defer prog.Close()
		if err := boot.Barrier(ctx); err != nil { // every copy written
			return err
		}
		s, _ := dev.NewStream()
		defer s.Close()
		if err := prog.Launch(s, &plan.Args{Count: count, Output: out.Addr()}); err != nil {
			return err
		}
		if err := s.Synchronize(time.Time{}); err != nil {
			return err
		}
		got := make([]byte, 4*count)
		dev.Read(got, out, 0)
		for i := 0; i < count; i++ {
			if v := binary.LittleEndian.Uint32(got[4*i:]); v != uint32(6*i) {
				return fmt.Errorf("element %d is %d, want %d", i, v, 6*i)
			}
		}
		return boot.Barrier(ctx) // nobody leaves while a peer reads its copy
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// A rank without the capability fails the setup on every rank: itself
// with ErrNotSupported, the others with ErrRemote naming it, before any
// group is made; nothing stays behind.
func TestConnectSwitchFailureNamesRank(t *testing.T) {
	before := shmFiles(t, "switchfail")
	errs := onRanks(t, 3, "switchfail", func(rank int, boot bootstrap.Bootstrap, dev hal.Device) error {
		if rank == 1 {
			dev = noSwitch{dev}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		sc, err := channels.ConnectSwitch(ctx, boot, dev, 4096)
		if err == nil {
			sc.Close()
		}
		return err
	})
	for r, err := range errs {
		want := hal.ErrRemote
		if r == 1 {
			want = hal.ErrNotSupported
		}
		if !errors.Is(err, want) || !strings.Contains(err.Error(), "rank 1") {
			t.Errorf("rank %d: %v, want an error wrapping %v naming rank 1", r, err, want)
		}
	}
	if after := shmFiles(t, "switchfail"); after != before {
		t.Errorf("shared-memory files of the job: %d before, %d after", before, after)
	}
	errs = onRanks(t, 2, "switchzero", func(rank int, boot bootstrap.Bootstrap, dev hal.Device) error {
		_, err := channels.ConnectSwitch(context.Background(), boot, dev, 0)
		return err
	})
	if !errors.Is(errs[0], hal.ErrInvalidArgument) || !errors.Is(errs[1], hal.ErrInvalidArgument) {
		t.Errorf("a group of 0 bytes: %v", errs)
	}
}

// shmFiles counts this process's hal/host files: their names start with
// the creator's pid (internal/shm), not the job, which job only documents.
func shmFiles(t *testing.T, job string) int {
	t.Helper()
	ents, _ := os.ReadDir("/dev/shm")
	n := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), fmt.Sprintf("weft-%d-", os.Getpid())) {
			n++
		}
	}
	return n
}

// Setup gives a plan with a switch buffer its group, and binds the copy,
// the multicast address and the capacity; Close leaves the group.
func TestSetupSwitchBuffer(t *testing.T) {
	mk := func(rank int) *plan.Plan {
		p := pingPlan(rank, 1, "switch-ping")
		p.SwitchSlots, p.MaxBytes = 2, 1000
		p.Groups[0].Ops = append(p.Groups[0].Ops, plan.Transfer(plan.All, 0, []plan.Ref{plan.MC(1)}, plan.L(plan.Input)))
		return p
	}
	res, errs := setup(t, "switchsetup", mk)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for r, rs := range res {
		b := rs.Bindings
		if rs.Switch == nil || b.Switch != rs.Switch.Local.Addr() || b.Multicast != rs.Switch.Addr() || b.Multicast == 0 || b.SwitchBytes != 2*1008 {
			t.Errorf("rank %d: switch bindings %#x %#x %d", r, b.Switch, b.Multicast, b.SwitchBytes)
		}
		if rs.Bytes() < rs.Switch.Local.Size() {
			t.Errorf("rank %d: Bytes %d leaves out the %d-byte switch copy", r, rs.Bytes(), rs.Switch.Local.Size())
		}
	}
	for r, rs := range res {
		if err := rs.Close(); err != nil {
			t.Errorf("rank %d: close: %v", r, err)
		}
	}
}
