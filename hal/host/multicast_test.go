package host

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

func alloc(t *testing.T, d *Device, n int64) hal.Buffer {
	t.Helper()
	b, err := d.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// group makes a multicast group of the devices, every member bound to a
// buffer of its own; it returns the memberships and the buffers.
func group(t *testing.T, bytes int64, devs ...*Device) ([]hal.Multicast, []hal.Buffer) {
	t.Helper()
	first, err := devs[0].NewMulticast(bytes, len(devs))
	if err != nil {
		t.Fatal(err)
	}
	h, err := first.Handle()
	if err != nil {
		t.Fatal(err)
	}
	mcs := []hal.Multicast{first}
	for _, d := range devs[1:] {
		m, err := d.ImportMulticast(h)
		if err != nil {
			t.Fatal(err)
		}
		mcs = append(mcs, m)
	}
	var bufs []hal.Buffer
	for i, m := range mcs {
		b := alloc(t, devs[i], m.Size())
		if err := m.Bind(b); err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
	}
	return mcs, bufs
}

func TestMulticastLifecycle(t *testing.T) {
	a, b, c, d := open(t, "mc", 0), open(t, "mc", 1), open(t, "mc", 2), open(t, "mc", 3)
	gran, err := a.MulticastGranularity()
	if err != nil || gran != int64(os.Getpagesize()) {
		t.Fatalf("granularity %d, %v", gran, err)
	}
	ma, err := a.NewMulticast(gran+1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if ma.Size() != 2*gran {
		t.Fatalf("size %d, want %d (rounded up to the granularity)", ma.Size(), 2*gran)
	}
	h, _ := ma.Handle()
	bufA := alloc(t, a, ma.Size())
	if err := ma.Bind(bufA); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Fatalf("bind before every member joined: %v, want ErrInvalidUsage", err)
	}
	if _, err := a.ImportMulticast(h); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Fatalf("a member imports its own group: %v, want ErrInvalidUsage", err)
	}
	mb, err := b.ImportMulticast(h)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := c.ImportMulticast(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.ImportMulticast(h); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Fatalf("a fourth member of a group of 3: %v, want ErrInvalidUsage", err)
	}
	small := alloc(t, b, gran)
	imported, err := b.Import(mustExport(t, a, bufA))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what string
		m    hal.Multicast
		buf  hal.Buffer
	}{{"a buffer smaller than the group", mb, small}, {"a buffer imported from a peer", mb, imported}, {"another device's buffer", mc, bufA}} {
		if err := tc.m.Bind(tc.buf); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Errorf("bind %s: %v, want ErrInvalidArgument", tc.what, err)
		}
	}
	bufB, bufC := alloc(t, b, ma.Size()), alloc(t, c, ma.Size())
	for i, x := range []struct {
		m   hal.Multicast
		buf hal.Buffer
	}{{ma, bufA}, {mb, bufB}, {mc, bufC}} {
		if x.m.Addr() != 0 {
			t.Errorf("member %d: Addr before Bind is %#x", i, x.m.Addr())
		}
		if err := x.m.Bind(x.buf); err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
		if x.m.Addr() == 0 {
			t.Errorf("member %d: Addr is 0 after Bind", i)
		}
	}
	if err := ma.Bind(bufA); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Fatalf("second bind: %v, want ErrInvalidUsage", err)
	}
	// Every member sees every copy, in member order.
	for i, dev := range []*Device{a, b, c} {
		if err := dev.Write([]hal.Buffer{bufA, bufB, bufC}[i], 100, []byte{byte(10 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, x := range []struct {
		d *Device
		m hal.Multicast
	}{{a, ma}, {b, mb}, {c, mc}} {
		copies, err := x.d.resolveMulticast(x.m.Addr()+100, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(copies) != 3 || copies[0][0] != 10 || copies[1][0] != 11 || copies[2][0] != 12 {
			t.Errorf("member %d sees copies %v, want [[10] [11] [12]]", i, copies)
		}
		if _, err := x.d.resolveMulticast(x.m.Addr()+uint64(x.m.Size())-1, 2); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Errorf("member %d: a range past the group's end: %v", i, err)
		}
	}
	// The last member to leave frees the group.
	ctl := ma.(*multicast).path
	for i, m := range []hal.Multicast{ma, mb, mc} {
		if err := m.Close(); err != nil {
			t.Fatalf("close member %d: %v", i, err)
		}
		if m.Addr() != 0 {
			t.Errorf("member %d: Addr after Close is %#x", i, m.Addr())
		}
	}
	if _, err := os.Stat(ctl); !os.IsNotExist(err) {
		t.Errorf("control file after every member left: %v", err)
	}
	if err := ma.Close(); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("second close: %v, want ErrInvalidUsage", err)
	}
	if _, err := d.ImportMulticast(h); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("import of a closed group: %v, want ErrInvalidUsage", err)
	}
}

func mustExport(t *testing.T, d *Device, b hal.Buffer) hal.Handle {
	t.Helper()
	h, err := d.Export(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestMulticastBadHandles(t *testing.T) {
	a, other := open(t, "mcbad", 0), open(t, "mcbad-other", 0)
	m, err := a.NewMulticast(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h, _ := m.Handle()
	buf := alloc(t, a, 64)
	for _, tc := range []struct {
		name string
		h    hal.Handle
		dev  *Device
		want error
	}{
		{"empty", nil, a, hal.ErrInvalidArgument},
		{"truncated", h[:len(h)-1], a, hal.ErrInvalidArgument},
		{"trailing bytes", append(append(hal.Handle{}, h...), 0), a, hal.ErrInvalidArgument},
		{"a memory handle", mustExport(t, a, buf), a, hal.ErrInvalidArgument},
		{"another job", h, other, hal.ErrInvalidUsage},
	} {
		if _, err := tc.dev.ImportMulticast(tc.h); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct {
		bytes int64
		ranks int
	}{{0, 2}, {-1, 2}, {64, 0}, {64, maxMembers + 1}} {
		if _, err := a.NewMulticast(tc.bytes, tc.ranks); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Errorf("NewMulticast(%d, %d): %v, want ErrInvalidArgument", tc.bytes, tc.ranks, err)
		}
	}
}

func FuzzDecodeMulticastHandle(f *testing.F) {
	d, _ := backend{}.Open(hal.Config{JobID: "fuzzmc"})
	defer d.Close()
	m, _ := d.(*Device).NewMulticast(64, 2)
	h, _ := m.Handle()
	m.Close()
	f.Add([]byte(h))
	f.Add([]byte("WEFTHMC1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		job, name, size, ranks, err := decodeMulticastHandle(b)
		if err == nil && (size <= 0 || ranks < 1 || ranks > maxMembers || name == "" || bytes.ContainsAny([]byte(name), "/\x00") || job == "\x00") {
			t.Fatalf("accepted a bad handle: job %q name %q size %d ranks %d", job, name, size, ranks)
		}
	})
}

// runLocal prepares p on d with the switch buffer of membership m (bound
// to buf) and runs one launch of count elements.
func runLocal(t *testing.T, d *Device, p *plan.Plan, m hal.Multicast, buf hal.Buffer, dt plan.DataType, op plan.RedOp, count int64, in, out hal.Buffer) error {
	t.Helper()
	state, ctl := alloc(t, d, p.StateBytes()), alloc(t, d, plan.ControlBytes)
	prog, err := d.Prepare(hal.PlanSpec{Plan: p, DataType: dt, RedOp: op, Bindings: plan.Bindings{
		State: state.Addr(), Control: ctl.Addr(), Switch: buf.Addr(), Multicast: m.Addr(), SwitchBytes: p.SwitchCapacity()}})
	if err != nil {
		return err
	}
	s, _ := d.NewStream()
	defer s.Close()
	a := &plan.Args{Count: count, Input: in.Addr(), Output: out.Addr(), Timeout: 5 * time.Second}
	if err := prog.Launch(s, a); err != nil {
		return err
	}
	if err := s.Synchronize(time.Time{}); err != nil {
		return err
	}
	if f, failed := plan.DecodeControl(ctl.Host()); failed {
		t.Fatalf("launch failed: %s", f)
	}
	return nil
}

// The interpreter's switch transfers: a store through the multicast view
// reaches every member's copy; a load-reduce returns the reduction of every
// copy (integer Avg divided), for a count whose last vector is partial;
// types and operators the switch cannot reduce are refused at Prepare.
func TestSwitchTransfers(t *testing.T) {
	a, b := open(t, "swx", 0), open(t, "swx", 1)
	const count = 37 // int32: the last 16-byte vector holds one element
	p := &plan.Plan{Name: "switch-store", Rank: 0, NRanks: 2, Threads: 32, SwitchSlots: 2, MaxBytes: 4 * count,
		Groups: []plan.Group{{Blocks: 2, Ops: []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{plan.MC(1)}, plan.L(plan.Input))}}}}
	mcs, bufs := group(t, p.SwitchCapacity(), a, b)
	defer mcs[1].Close()
	defer mcs[0].Close()
	in, out := alloc(t, a, 4*count), alloc(t, a, 4*count)
	vals := make([]byte, 4*count)
	for i := 0; i < count; i++ {
		binary.LittleEndian.PutUint32(vals[4*i:], uint32(1000+i))
	}
	a.Write(in, 0, vals)
	if err := runLocal(t, a, p, mcs[0], bufs[0], plan.Int32, plan.Sum, count, in, out); err != nil {
		t.Fatal(err)
	}
	slot1 := p.SwitchOffset(p.SwitchCapacity(), 4, 1, 0)
	for i, buf := range bufs {
		if got := buf.Host()[slot1 : slot1+4*count]; !bytes.Equal(got, vals) {
			t.Errorf("member %d's copy of slot 1 after the store: % x, want % x", i, got[:16], vals[:16])
		}
	}

	red := plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, plan.MC(0))
	red.Combine = true
	p.Name, p.Groups[0].Ops = "switch-reduce", []plan.Op{red}
	for i, buf := range bufs {
		x := make([]byte, 4*count)
		for e := 0; e < count; e++ {
			binary.LittleEndian.PutUint32(x[4*e:], uint32(int32(e*(2*i-1)+7*i))) // rank 0: −e, rank 1: e+7
		}
		copy(buf.Host(), x)
	}
	for _, tc := range []struct {
		op   plan.RedOp
		want func(e int32) int32
	}{
		{plan.Sum, func(e int32) int32 { return 7 }},
		{plan.Max, func(e int32) int32 { return e + 7 }},
		{plan.Min, func(e int32) int32 { return -e }},
		{plan.Avg, func(e int32) int32 { return 3 }},
	} {
		if err := runLocal(t, a, p, mcs[0], bufs[0], plan.Int32, tc.op, count, in, out); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 4*count)
		a.Read(got, out, 0)
		for e := 0; e < count; e++ {
			if v := int32(binary.LittleEndian.Uint32(got[4*e:])); v != tc.want(int32(e)) {
				t.Fatalf("%v: element %d is %d, want %d", tc.op, e, v, tc.want(int32(e)))
			}
		}
	}
	for _, k := range []struct {
		dt plan.DataType
		op plan.RedOp
	}{{plan.Float32, plan.Max}, {plan.Int8, plan.Sum}, {plan.Float32, plan.Avg}, {plan.Int32, plan.Prod}} {
		if err := runLocal(t, a, p, mcs[0], bufs[0], k.dt, k.op, count, in, out); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Errorf("prepare a switch reduction of %v with %v: %v, want ErrInvalidArgument", k.dt, k.op, err)
		}
	}
}
