package conformance

import (
	"errors"
	"fmt"

	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/check"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// Tests of the switch-mapped capability (hal.SwitchMapped, hal.Multicast;
// architecture.md §2): the group's life cycle driven directly through the
// contract (create, import, bind, in three steps separated by barriers;
// misuse refused with the right sentinel; close), and what kernels do with
// it, through small plans with a switch buffer (hal/plan switch.go) set up
// by package channels: a store through the multicast view reaches every
// member's copy, a load-reduce returns the exact reduction of every copy
// for each type and operator the switch reduces (plan.SwitchSupports).
//
// The data tests order their phases with separate launches and bootstrap
// barriers, not memory channels, so that they need nothing but the
// switch-mapped capability. A backend whose device refuses multicast (an
// error wrapping ErrNotSupported, as hal/nvswitch without WEFT_NVLS=1) makes
// them NotSupported with its reason. The port-mapped section is in port.go.

func init() {
	sm := hal.CapSwitchMapped
	Register(Case{ID: "switch-mapped/multicast-bind", Capability: sm, MinRanks: 2,
		Title: "a multicast group is created by one rank, imported by the others and bound on every rank to device memory",
		Run:   testMulticastBind})
	Register(Case{ID: "switch-mapped/bind-order", Capability: sm, MinRanks: 2,
		Title: "Bind before every member joined, a second Bind and a buffer too small are refused with the right errors",
		Run:   testBindOrder})
	Register(Case{ID: "switch-mapped/bad-handles", Capability: sm, MinRanks: 2,
		Title: "malformed, foreign and full-group multicast handles are refused with the right errors",
		Run:   testMulticastBadHandles})
	Register(Case{ID: "switch-mapped/close-frees", Capability: sm, MinRanks: 2,
		Title: "once every member has closed, the group is gone: its handle no longer imports",
		Run:   testMulticastCloseFrees})
	Register(Case{ID: "switch-mapped/store", Capability: sm, MinRanks: 2,
		Title: "a store through the multicast address reaches every member's copy, for sizes 1 B to 1 MiB and unaligned buffers",
		Run:   testSwitchStore})
	Register(Case{ID: "switch-mapped/load-reduce", Capability: sm, MinRanks: 2,
		Title: "a load-reduce through the multicast address is the exact sum, max or min of every copy, for every type the switch reduces",
		Run: func(t *T) error {
			kinds := switchKinds()
			if t.Quick() {
				kinds = quickSwitchKinds
			}
			return runLoadReduce(t, kinds, []int64{1, 1001, 64*kib + 3})
		}})
	Register(Case{ID: "switch-mapped/load-reduce-processes", Capability: sm, MinRanks: 2, Mode: Processes,
		Title: "a load-reduce and a store through the multicast address between processes",
		Run: func(t *T) error {
			return runLoadReduce(t, quickSwitchKinds[:2], []int64{5, 64*kib + 3})
		}})
}

// switchMapped returns the device's switch-mapped interface: a backend whose
// links offer the capability must implement it.
func switchMapped(t *T) (hal.SwitchMapped, error) {
	sm, ok := t.Dev.(hal.SwitchMapped)
	if !ok {
		return nil, t.Errorf("links offer %s but the device does not implement hal.SwitchMapped", hal.CapSwitchMapped)
	}
	return sm, nil
}

// switchGranularity returns the device's switch-mapped interface and its
// multicast granularity in bytes: the preamble of the group tests.
func switchGranularity(t *T) (hal.SwitchMapped, int64, error) {
	sm, err := switchMapped(t)
	if err != nil {
		return nil, 0, err
	}
	gran, err := sm.MulticastGranularity()
	if err != nil {
		return nil, 0, t.Errorf("multicast granularity: %w", err)
	}
	return sm, gran, nil
}

// createGroup has rank 0 create a group of bytes for ranks members and
// gives every rank its handle; rank 0 gets its membership too. When rank 0
// fails, every rank returns: NotSupported with rank 0's reason when the
// device refuses multicast (ErrNotSupported), an error otherwise.
func createGroup(t *T, sm hal.SwitchMapped, bytes int64, ranks int) (hal.Multicast, hal.Handle, error) {
	var mc hal.Multicast
	msg := []byte{'H'}
	if t.Rank == 0 {
		var err error
		mc, err = sm.NewMulticast(bytes, ranks)
		var h hal.Handle
		if err == nil {
			if h, err = mc.Handle(); err != nil {
				mc.Close()
				mc = nil
			}
		}
		switch {
		case errors.Is(err, hal.ErrNotSupported):
			msg = append([]byte{'N'}, err.Error()...)
		case err != nil:
			msg = append([]byte{'E'}, err.Error()...)
		case len(h) == 0:
			mc.Close()
			mc, msg = nil, []byte("Ethe multicast handle is empty")
		default:
			msg = append(msg, h...)
			t.Cleanup(func() error { closeQuietly(mc); return nil })
		}
	}
	all, err := t.AllGather(msg)
	if err != nil {
		return nil, nil, err
	}
	m := all[0]
	switch m[0] {
	case 'N':
		return nil, nil, t.NotSupported("multicast: %s", m[1:])
	case 'E':
		return nil, nil, t.Errorf("rank 0: new multicast group of %d bytes for %d members: %s", bytes, ranks, m[1:])
	}
	return mc, hal.Handle(m[1:]), nil
}

// closeQuietly closes a membership a test may have closed already.
func closeQuietly(mc hal.Multicast) {
	if mc != nil {
		mc.Close()
	}
}

// joinAll has every rank join the group of h (rank 0 is a member already)
// and waits for all of them.
func joinAll(t *T, sm hal.SwitchMapped, mc hal.Multicast, h hal.Handle) (hal.Multicast, error) {
	if t.Rank != 0 {
		var err error
		if mc, err = sm.ImportMulticast(h); err != nil {
			return nil, t.Errorf("import the multicast group of rank 0: %w", err)
		}
		t.Cleanup(func() error { closeQuietly(mc); return nil })
	}
	return mc, t.Barrier()
}

func testMulticastBind(t *T) error {
	sm, gran, err := switchGranularity(t)
	if err != nil {
		return err
	}
	if gran <= 0 {
		return t.Errorf("multicast granularity %d, want a positive number of bytes", gran)
	}
	want := 2*gran + 1
	mc, h, err := createGroup(t, sm, want, t.Size)
	if err != nil {
		return err
	}
	if mc, err = joinAll(t, sm, mc, h); err != nil {
		return err
	}
	if mc.Size() < want || mc.Size()%gran != 0 {
		return t.Errorf("group of %d bytes for %d asked for: want a multiple of the %d-byte granularity", mc.Size(), want, gran)
	}
	if a := mc.Addr(); a != 0 {
		return t.Errorf("multicast address %#x before Bind, want 0", a)
	}
	b, err := t.Alloc(mc.Size())
	if err != nil {
		return err
	}
	if err := mc.Bind(b); err != nil {
		return t.Errorf("bind %d bytes: %w", b.Size(), err)
	}
	if err := t.Barrier(); err != nil {
		return err
	}
	if mc.Addr() == 0 {
		return t.Errorf("multicast address is 0 after every rank bound")
	}
	return nil
}

func testBindOrder(t *T) error {
	sm, gran, err := switchGranularity(t)
	if err != nil {
		return err
	}
	mc, h, err := createGroup(t, sm, 2*gran, t.Size)
	if err != nil {
		return err
	}
	var b hal.Buffer
	if t.Rank == 0 {
		if b, err = t.Alloc(mc.Size()); err != nil {
			return err
		}
		if err := mc.Bind(b); !errors.Is(err, hal.ErrInvalidUsage) {
			return t.Errorf("bind while %d of %d members have not joined: %v, want an error wrapping hal.ErrInvalidUsage", t.Size-1, t.Size, err)
		}
	}
	if err := t.Barrier(); err != nil { // rank 0 tried before anyone joined
		return err
	}
	if mc, err = joinAll(t, sm, mc, h); err != nil {
		return err
	}
	small, err := t.Alloc(mc.Size() - gran)
	if err != nil {
		return err
	}
	if err := mc.Bind(small); !errors.Is(err, hal.ErrInvalidArgument) {
		return t.Errorf("bind a %d-byte buffer to a %d-byte group: %v, want an error wrapping hal.ErrInvalidArgument", small.Size(), mc.Size(), err)
	}
	if b == nil {
		if b, err = t.Alloc(mc.Size()); err != nil {
			return err
		}
	}
	if err := mc.Bind(b); err != nil {
		return t.Errorf("bind after every member joined: %w", err)
	}
	other, err := t.Alloc(mc.Size())
	if err != nil {
		return err
	}
	if err := mc.Bind(other); !errors.Is(err, hal.ErrInvalidUsage) {
		return t.Errorf("second bind: %v, want an error wrapping hal.ErrInvalidUsage", err)
	}
	return t.Barrier()
}

func testMulticastBadHandles(t *T) error {
	sm, gran, err := switchGranularity(t)
	if err != nil {
		return err
	}
	// A group of one member: full as soon as it exists.
	mc, h, err := createGroup(t, sm, gran, 1)
	if err != nil {
		return err
	}
	if t.Rank != 0 {
		if m, err := sm.ImportMulticast(h); err == nil {
			m.Close()
			return t.Errorf("import of rank 0's group of one member succeeded; want an error wrapping hal.ErrInvalidUsage")
		} else if !errors.Is(err, hal.ErrInvalidUsage) {
			return t.Errorf("import of rank 0's full group: %v, want an error wrapping hal.ErrInvalidUsage", err)
		}
	}
	not := make(hal.Handle, len(h))
	for i := range h {
		not[i] = ^h[i]
	}
	for _, c := range []struct {
		what string
		h    hal.Handle
	}{
		{"an empty handle", hal.Handle{}},
		{"a handle one byte short", h[:len(h)-1]},
		{"a handle one byte long", append(append(hal.Handle{}, h...), 0)},
		{"a handle of zeros", make(hal.Handle, len(h))},
		{"a handle with every bit flipped", not},
	} {
		if m, err := sm.ImportMulticast(c.h); err == nil {
			m.Close()
			return t.Errorf("import of %s succeeded; want an error wrapping hal.ErrInvalidArgument", c.what)
		} else if !errors.Is(err, hal.ErrInvalidArgument) {
			return t.Errorf("import of %s: %v, want an error wrapping hal.ErrInvalidArgument", c.what, err)
		}
	}
	// A group of another job (hal/host's, when it is registered): refused
	// as a bad argument or as another job's.
	if fh, done, err := foreignMulticastHandle(); err == nil {
		defer done()
		if m, err := sm.ImportMulticast(fh); err == nil {
			m.Close()
			return t.Errorf("import of a multicast group of another job succeeded")
		} else if !errors.Is(err, hal.ErrInvalidArgument) && !errors.Is(err, hal.ErrInvalidUsage) {
			return t.Errorf("import of a multicast group of another job: %v wraps neither hal.ErrInvalidArgument nor hal.ErrInvalidUsage", err)
		}
	}
	if err := t.Barrier(); err != nil {
		return err
	}
	closeQuietly(mc)
	return nil
}

// foreignMulticastHandle creates a group on a host device of another job;
// done closes it.
func foreignMulticastHandle() (hal.Handle, func(), error) {
	d, err := hal.Open("host", hal.Config{JobID: jobID("foreign-mc")})
	if err != nil {
		return nil, nil, err
	}
	sm, ok := d.(hal.SwitchMapped)
	if !ok {
		d.Close()
		return nil, nil, fmt.Errorf("host is not switch-mapped")
	}
	m, err := sm.NewMulticast(4096, 2)
	if err != nil {
		d.Close()
		return nil, nil, err
	}
	h, err := m.Handle()
	done := func() { m.Close(); d.Close() }
	if err != nil {
		done()
		return nil, nil, err
	}
	return h, done, nil
}

func testMulticastCloseFrees(t *T) error {
	sm, gran, err := switchGranularity(t)
	if err != nil {
		return err
	}
	mc, h, err := createGroup(t, sm, gran, t.Size)
	if err != nil {
		return err
	}
	if mc, err = joinAll(t, sm, mc, h); err != nil {
		return err
	}
	b, err := t.Dev.Alloc(mc.Size())
	if err != nil {
		return t.Errorf("alloc: %w", err)
	}
	if err := mc.Bind(b); err != nil {
		b.Free()
		return t.Errorf("bind: %w", err)
	}
	if err := t.Barrier(); err != nil {
		return err
	}
	if err := mc.Close(); err != nil {
		return t.Errorf("close: %w", err)
	}
	if err := b.Free(); err != nil {
		return t.Errorf("free the copy after close: %w", err)
	}
	if err := mc.Close(); !errors.Is(err, hal.ErrInvalidUsage) {
		return t.Errorf("second close: %v, want an error wrapping hal.ErrInvalidUsage", err)
	}
	if err := t.Barrier(); err != nil { // every member has left
		return err
	}
	if m, err := sm.ImportMulticast(h); err == nil {
		m.Close()
		return t.Errorf("import of a group every member had closed succeeded; want an error wrapping hal.ErrInvalidUsage")
	} else if !errors.Is(err, hal.ErrInvalidUsage) {
		return t.Errorf("import of a closed group: %v, want an error wrapping hal.ErrInvalidUsage", err)
	}
	return nil
}

// switchPlan is a plan of this rank with a switch buffer of one slot per
// rank and no channels: group k (argument slot k+1) runs ops[k]; a launch
// runs one group, and bootstrap barriers between launches order the
// phases.
func switchPlan(t *T, name string, maxBytes int64, groups ...[]plan.Op) *plan.Plan {
	p := &plan.Plan{Name: name, Rank: t.Rank, NRanks: t.Size, Threads: 256, SwitchSlots: t.Size, MaxBytes: maxBytes}
	for k, ops := range groups {
		p.Groups = append(p.Groups, plan.Group{Blocks: 2, Arg: k + 1, Ops: ops})
	}
	return p
}

// runGroup launches group k of p alone with count elements of input at in
// and output at out, and waits for it.
func runGroup(t *T, p *plan.Plan, prog hal.Program, s hal.Stream, res *channels.Resources, k int, count int64, in, out uint64) error {
	a := &plan.Args{Count: count, Groups: make([]plan.GroupArgs, len(p.Groups))}
	for i := range a.Groups {
		a.Groups[i].Skip = true
	}
	a.Groups[k] = plan.GroupArgs{Count: count, Input: in, Output: out}
	if err := t.Launch(prog, s, a); err != nil {
		return err
	}
	return t.Finish(s, res)
}

// prepareOp readies p for type dt and operator op.
func prepareOp(t *T, p *plan.Plan, res *channels.Resources, dt plan.DataType, op plan.RedOp) (hal.Program, error) {
	ex, ok := t.Dev.(hal.Executor)
	if !ok {
		return nil, t.Errorf("backend %s does not implement hal.Executor: switch plans cannot run on it", t.Backend)
	}
	prog, err := ex.Prepare(hal.PlanSpec{Plan: p, Bindings: res.Bindings, DataType: dt, RedOp: op, Library: channels.DeviceLibrary()})
	if err != nil {
		return nil, err
	}
	t.Cleanup(prog.Close)
	return prog, nil
}

// testSwitchStore: every rank stores its data through the multicast view
// into its slot of every copy (group 0); after a barrier, every rank
// copies its whole copy out (group 1) and finds every rank's data in its
// slot, with the bytes around the output untouched.
func testSwitchStore(t *T) error {
	if _, err := switchMapped(t); err != nil {
		return err
	}
	sizes := []int64{1, 15, 17, 4*kib + 3, mib + 5}
	const guard = 64
	maxSize := sizes[len(sizes)-1]
	var copies []plan.Op
	for q := 0; q < t.Size; q++ {
		copies = append(copies, plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output).At(q)}, plan.SW(q)))
	}
	p := switchPlan(t, "conf-switch-store", maxSize,
		[]plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{plan.MC(t.Rank)}, plan.L(plan.Input))}, copies)
	f, err := newFixture(t, p, fixtureSpec{in: maxSize + guard, out: int64(t.Size)*maxSize + 2*guard, switchMapped: true})
	if err != nil {
		return err
	}
	res, prog, s, in, out := f.res, f.prog, f.s, f.in, f.out
	for k, n := range sizes {
		inOff, outOff := int64(0), int64(0)
		if k%2 == 1 {
			inOff, outOff = 5, 3 // unaligned plain buffers
		}
		if err := t.Write(in, inOff, pattern(seed(t.Rank, k), n)); err != nil {
			return err
		}
		poisoned := fill(out.Size(), poison)
		if err := t.Write(out, 0, poisoned); err != nil {
			return err
		}
		if err := runGroup(t, p, prog, s, res, 0, n, in.Addr()+uint64(inOff), 0); err != nil {
			return err
		}
		if err := t.Barrier(); err != nil { // every rank has stored
			return err
		}
		if err := runGroup(t, p, prog, s, res, 1, n, 0, out.Addr()+uint64(outOff)); err != nil {
			return err
		}
		got, err := t.Read(out, 0, out.Size())
		if err != nil {
			return err
		}
		var want []byte
		for q := 0; q < t.Size; q++ {
			want = append(want, pattern(seed(q, k), n)...)
		}
		if d := guarded(fmt.Sprintf("copy of %d-byte slots after every rank's store", n), got, outOff, want, poisoned); d != "" {
			return t.Errorf("%s", d)
		}
		if err := t.Barrier(); err != nil { // nobody stores again before every rank has read
			return err
		}
	}
	return nil
}

type switchKind struct {
	t  plan.DataType
	op plan.RedOp
}

// switchKinds are every type and operator the switch reduces.
func switchKinds() []switchKind {
	var out []switchKind
	for _, dt := range plan.DataTypes {
		for _, op := range plan.RedOps {
			if plan.SwitchSupports(dt, op) {
				out = append(out, switchKind{dt, op})
			}
		}
	}
	return out
}

var quickSwitchKinds = []switchKind{{plan.Float32, plan.Sum}, {plan.Int32, plan.Max}, {plan.BFloat16, plan.Min},
	{plan.Float16, plan.Sum}, {plan.Uint64, plan.Avg}, {plan.Int64, plan.Min}, {plan.Float64, plan.Sum}}

// runLoadReduce: every rank writes its contribution into its copy of slot
// 0 (group 0); after a barrier, every rank load-reduces slot 0 into its
// output, and stores the reduction of its chunk of slot 0 through the
// multicast view into slot 1 (group 1); after another barrier, every rank
// copies slot 1 out (group 2). Both outputs must be the exact AllReduce
// result, with the bytes after them untouched. A type the switch cannot
// reduce is refused by Prepare.
func runLoadReduce(t *T, kinds []switchKind, counts []int64) error {
	if _, err := switchMapped(t); err != nil {
		return err
	}
	const guard = 64
	maxCount := counts[len(counts)-1]
	red := plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, plan.MC(0))
	red.Combine = true
	redStore := plan.Transfer(t.Rank, t.Size, []plan.Ref{plan.MC(1)}, plan.MC(0))
	redStore.Combine = true
	p := switchPlan(t, "conf-switch-reduce", 8*maxCount,
		[]plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{plan.SW(0)}, plan.L(plan.Input))},
		[]plan.Op{red, redStore},
		[]plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, plan.SW(1))})
	// Prepared below for every type and operator.
	f, err := newFixture(t, p, fixtureSpec{in: 8 * maxCount, out: 8*maxCount + guard, switchMapped: true, noProgram: true})
	if err != nil {
		return err
	}
	res, in, out := f.res, f.in, f.out
	s, err := t.Stream()
	if err != nil {
		return err
	}
	if _, err := prepareOp(t, p, res, plan.Float32, plan.Max); !errors.Is(err, hal.ErrInvalidArgument) {
		return t.Errorf("prepare a switch reduction of float with max (the switch has none): %v, want an error wrapping hal.ErrInvalidArgument", err)
	}
	for _, k := range kinds {
		prog, err := prepareOp(t, p, res, k.t, k.op)
		if err != nil {
			return t.Errorf("prepare for %v %v: %w", k.t, k.op, err)
		}
		for _, count := range counts {
			what := fmt.Sprintf("%v %v of %d elements", k.t, k.op, count)
			if err := t.Write(in, 0, check.Input(k.t, k.op, t.Rank, count)); err != nil {
				return err
			}
			if err := runGroup(t, p, prog, s, res, 0, count, in.Addr(), 0); err != nil {
				return err
			}
			if err := t.Barrier(); err != nil { // every copy holds its rank's contribution
				return err
			}
			want := check.AllReduce(k.t, k.op, t.Size, count)
			for phase := 1; phase <= 2; phase++ {
				poisoned := fill(out.Size(), poison)
				if err := t.Write(out, 0, poisoned); err != nil {
					return err
				}
				if err := runGroup(t, p, prog, s, res, phase, count, 0, out.Addr()); err != nil {
					return err
				}
				got, err := t.Read(out, 0, out.Size())
				if err != nil {
					return err
				}
				n := int64(len(want))
				if wrong := check.Wrong(k.t, got[:n], want); wrong != 0 {
					src := "load-reduce through the multicast address"
					if phase == 2 {
						src = "copy of the reductions every rank stored through the multicast address"
					}
					return t.Errorf("%s: %s: %d of %d elements wrong (%s)", what, src, wrong, count, diff("result", got[:n], want))
				}
				if d := diff(what+": bytes after the output", got[n:], poisoned[n:]); d != "" {
					return t.Errorf("%s", d)
				}
				if err := t.Barrier(); err != nil { // every rank has finished the phase
					return err
				}
			}
		}
	}
	return nil
}
