package host

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// postPlan is a two-rank point-to-point plan of rank r shaped like
// algorithms.P2PPlan: a send group (argument 1) putting windows into the
// peer's scratch, a receive group (argument 2) copying them out, both
// with a posted-buffer exchange (hal/plan/posted.go); B blocks each, one
// window large enough for every count used, so no flow control.
func postPlan(r int) *plan.Plan {
	const B, window = 2, 1 << 14
	data, done, post := 0, B, 2*B
	return &plan.Plan{
		Name: "post-test", Rank: r, NRanks: 2, Threads: 32, Semaphores: 2*B + 3*B,
		Channels: []plan.Channel{{Peer: 1 - r}}, Scratch: plan.Simple, ScratchSlots: 1,
		Groups: []plan.Group{
			{Blocks: B, Arg: 1, Window: window, NChunks: 1,
				Ops:   []plan.Op{plan.Transfer(0, 1, []plan.Ref{plan.RS(0, 0)}, plan.L(plan.Input)), plan.Signal(0, data)},
				After: []plan.Op{plan.Wait(0, done)},
				Post: &plan.Post{Chan: 0, Send: true, Sem: post, Direct: []plan.Op{
					plan.Transfer(plan.All, 0, []plan.Ref{{Buf: plan.Posted, Chan: 0}}, plan.L(plan.Input))}}},
			{Blocks: B, Arg: 2, Window: window, NChunks: 1,
				Ops:   []plan.Op{plan.Wait(0, data), plan.Transfer(0, 1, []plan.Ref{plan.L(plan.Output)}, plan.LS(0))},
				After: []plan.Op{plan.Signal(0, done)},
				Post:  &plan.Post{Chan: 0, Sem: post}},
		},
	}
}

// postRank is one rank's device, resources and prepared plan.
type postRank struct {
	d              *Device
	scratch, sems  hal.Buffer
	table, ctl     hal.Buffer
	prog           hal.Program
	stream         hal.Stream
	peerSc, peerSe hal.Buffer // the peer's scratch and semaphores, mapped here
}

func setupPost(t *testing.T) [2]*postRank {
	t.Helper()
	var rs [2]*postRank
	for r := range rs {
		d := open(t, "post", r)
		p := postPlan(r)
		rs[r] = &postRank{d: d, scratch: alloc(t, d, p.ScratchBytes(0, 1)), sems: alloc(t, d, p.SemaphoreRegionBytes()),
			table: alloc(t, d, plan.PostTableBytes(2)), ctl: alloc(t, d, plan.ControlBytes)}
	}
	for r, me := range rs {
		peer := rs[1-r]
		var err error
		if me.peerSc, err = me.d.Import(mustExport(t, peer.d, peer.scratch)); err != nil {
			t.Fatal(err)
		}
		if me.peerSe, err = me.d.Import(mustExport(t, peer.d, peer.sems)); err != nil {
			t.Fatal(err)
		}
		p := postPlan(r)
		me.prog, err = me.d.Prepare(hal.PlanSpec{Plan: p, DataType: plan.Uint8, RedOp: plan.Sum, Bindings: plan.Bindings{
			Scratch: me.scratch.Addr(), ScratchBytes: me.scratch.Size(), Semaphores: me.sems.Addr(),
			Expected: alloc(t, me.d, p.ExpectedRegionBytes()).Addr(), State: alloc(t, me.d, p.StateBytes()).Addr(), Control: me.ctl.Addr(),
			Peers: []plan.PeerBinding{{Scratch: me.peerSc.Addr(), Semaphores: me.peerSe.Addr()}}}})
		if err != nil {
			t.Fatal(err)
		}
		if me.stream, err = me.d.NewStream(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { me.stream.Close() })
	}
	return rs
}

// entry writes registration id's post-table entry on rank 0: rank 1's
// buffer mapped at addr, size bytes (0, 0: no entry).
func (pr *postRank) entry(t *testing.T, id uint32, addr uint64, size int64) {
	t.Helper()
	e := make([]byte, plan.PostEntryBytes(2))
	if addr != 0 {
		binary.LittleEndian.PutUint64(e, uint64(id))
		binary.LittleEndian.PutUint64(e[8*3:], addr)
		binary.LittleEndian.PutUint64(e[8*4:], uint64(size))
	}
	if err := pr.d.Write(pr.table, plan.PostEntryOffset(2, id), e); err != nil {
		t.Fatal(err)
	}
}

// TestPostedDirect: rank 0 sends to rank 1; rank 1 receives into a
// registered buffer that rank 0 has mapped (direct: the data lands with
// rank 1's scratch untouched), one rank 0 has no entry for, one whose range
// leaves the registration, and an unregistered one (refused or not posted:
// the windowed path, through rank 1's scratch). Every case is checked byte
// by byte, sizes not multiples of 16 included, and no launch fails.
func TestPostedDirect(t *testing.T) {
	rs := setupPost(t)
	const regBytes = 1 << 16
	reg := alloc(t, rs[1].d, regBytes) // rank 1's registered buffer
	mapped, err := rs[0].d.Import(mustExport(t, rs[1].d, reg))
	if err != nil {
		t.Fatal(err)
	}
	rs[0].entry(t, 7, mapped.Addr(), regBytes)
	rs[0].entry(t, 9, 0, 0) // registration 9: none on rank 0
	plainOut := alloc(t, rs[1].d, regBytes)
	in := alloc(t, rs[0].d, regBytes)
	for i, tc := range []struct {
		name   string
		id     uint32 // 0: not registered
		off    int64
		count  int64
		direct bool
	}{
		{"direct", 7, 0, 4096, true},
		{"direct at an odd offset", 7, 1001, 9999, true},
		{"direct, last bytes of the registration", 7, regBytes - 33, 33, true},
		{"no entry on the sender", 9, 64, 5000, false},
		{"past the registration", 7, regBytes - 100, 200, false},
		{"not registered", 0, 0, 3333, false},
		{"direct again", 7, 16, 16384, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			payload := make([]byte, tc.count)
			for j := range payload {
				payload[j] = byte(j*7 + i*31 + 1)
			}
			if err := rs[0].d.Write(in, 0, payload); err != nil {
				t.Fatal(err)
			}
			// Clear rank 1's scratch, so that what the windowed path puts
			// there is seen.
			if err := rs[1].d.Write(rs[1].scratch, 0, make([]byte, rs[1].scratch.Size())); err != nil {
				t.Fatal(err)
			}
			out, outOff, post := plainOut, int64(0), uint64(plan.PostNone)
			if tc.id != 0 {
				out, outOff = reg, tc.off
				if post, err = plan.PostArg(tc.id, uint64(tc.off)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.off+tc.count > regBytes {
				out, outOff = plainOut, 0 // the posted range is refused before any store; the output is a buffer that holds it
			}
			send := &plan.Args{Timeout: 10 * time.Second, PostTable: rs[0].table.Addr(), Groups: []plan.GroupArgs{
				{Count: tc.count, Input: in.Addr(), Post: plan.PostNone}, {Skip: true}}}
			recv := &plan.Args{Timeout: 10 * time.Second, PostTable: rs[1].table.Addr(), Groups: []plan.GroupArgs{
				{Skip: true}, {Count: tc.count, Output: out.Addr() + uint64(outOff), Post: post}}}
			if err := rs[0].prog.Launch(rs[0].stream, send); err != nil {
				t.Fatal(err)
			}
			if err := rs[1].prog.Launch(rs[1].stream, recv); err != nil {
				t.Fatal(err)
			}
			for r, pr := range rs {
				if err := pr.stream.Synchronize(time.Now().Add(20 * time.Second)); err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
				if f, failed := plan.DecodeControl(pr.ctl.Host()); failed {
					t.Fatalf("rank %d: %v", r, f)
				}
			}
			got := make([]byte, tc.count)
			if err := rs[1].d.Read(got, out, outOff); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, payload) {
				t.Fatalf("received bytes differ from the %d sent", tc.count)
			}
			sc := make([]byte, rs[1].scratch.Size())
			if err := rs[1].d.Read(sc, rs[1].scratch, 0); err != nil {
				t.Fatal(err)
			}
			if through := bytes.Contains(sc, payload); through == tc.direct {
				t.Errorf("payload in rank 1's scratch: %v, want %v (direct path %v)", through, !tc.direct, tc.direct)
			}
		})
	}
}

// TestPostedRefusedAnswer: a post that names a registration the sender has
// no entry for is answered "refused", and a post of PostNone is not
// answered at all (the receiver then does not wait): the answer word of
// rank 1's mailbox carries the launch's sequence × 2 after the first and
// is unchanged after the second.
func TestPostedRefusedAnswer(t *testing.T) {
	rs := setupPost(t)
	in, out := alloc(t, rs[0].d, 4096), alloc(t, rs[1].d, 4096)
	p := postPlan(1)
	word := func() uint64 { // rank 1's answer word from rank 0, block 0
		b := make([]byte, 8)
		if err := rs[1].d.Read(b, rs[1].sems, p.InboundOffset(0, plan.PostMailbox(4, 2, 0, 2))); err != nil {
			t.Fatal(err)
		}
		return binary.LittleEndian.Uint64(b)
	}
	for k, post := range []uint64{must(plan.PostArg(3, 0)), plan.PostNone} {
		send := &plan.Args{Timeout: 10 * time.Second, PostTable: rs[0].table.Addr(), Groups: []plan.GroupArgs{{Count: 1000, Input: in.Addr(), Post: plan.PostNone}, {Skip: true}}}
		recv := &plan.Args{Timeout: 10 * time.Second, Groups: []plan.GroupArgs{{Skip: true}, {Count: 1000, Output: out.Addr(), Post: post}}}
		if err := rs[0].prog.Launch(rs[0].stream, send); err != nil {
			t.Fatal(err)
		}
		if err := rs[1].prog.Launch(rs[1].stream, recv); err != nil {
			t.Fatal(err)
		}
		for r, pr := range rs {
			if err := pr.stream.Synchronize(time.Now().Add(20 * time.Second)); err != nil {
				t.Fatalf("launch %d, rank %d: %v", k, r, err)
			}
		}
		if got := word(); got != 1<<1 {
			t.Errorf("launch %d: answer word %d, want %d (refused, sequence 1)", k, got, 1<<1)
		}
	}
}

func must(v uint64, err error) uint64 {
	if err != nil {
		panic(fmt.Sprint(err))
	}
	return v
}
