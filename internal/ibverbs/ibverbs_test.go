//go:build cgo

package ibverbs_test

import (
	"encoding/binary"
	"errors"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/weftccl/weft/internal/errkind"
	"github.com/weftccl/weft/internal/ibverbs"
	"github.com/weftccl/weft/internal/ibverbs/ibvtest"
)

func TestOpenMissing(t *testing.T) {
	_, err := ibverbs.Open("/nonexistent/libibverbs.so.1")
	var le *ibverbs.LoadError
	if !errors.As(err, &le) || !errors.Is(err, errkind.ErrNotSupported) || !strings.Contains(err.Error(), "libibverbs not found") {
		t.Fatalf("Open(missing) = %v; want a *LoadError wrapping ErrNotSupported", err)
	}
}

// The system library, where installed, sees no device on these machines.
func TestSystemLibrary(t *testing.T) {
	l, err := ibverbs.Open(ibverbs.DefaultLibrary)
	if err != nil {
		t.Skipf("no system libibverbs: %v", err)
	}
	devs, err := l.Devices()
	t.Logf("system libibverbs %s: devices %v, err %v, dma-buf %v", l.Path(), devs, err, l.HasDmaBuf())
}

func mmap(t *testing.T, n int) []byte {
	t.Helper()
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(b) })
	return b
}

func addr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }

type side struct {
	ctx  *ibverbs.Context
	pd   *ibverbs.PD
	scq  *ibverbs.CQ
	rcq  *ibverbs.CQ
	qp   *ibverbs.QP
	mem  []byte
	mr   *ibverbs.MR
	port ibverbs.PortAttr
	gid  ibverbs.GID
}

func open(t *testing.T, l *ibverbs.Lib, dev string, sq int) *side {
	t.Helper()
	s := &side{}
	var err error
	must := func(e error) {
		t.Helper()
		if e != nil {
			t.Fatal(e)
		}
	}
	s.ctx, err = l.OpenDevice(dev)
	must(err)
	s.port, err = s.ctx.QueryPort(1)
	must(err)
	if s.port.GIDTblLen > 1 {
		s.gid, err = s.ctx.QueryGID(1, 1)
		must(err)
	}
	s.pd, err = s.ctx.AllocPD()
	must(err)
	s.scq, err = s.ctx.CreateCQ(64)
	must(err)
	s.rcq, err = s.ctx.CreateCQ(64)
	must(err)
	s.qp, err = s.pd.CreateRCQP(s.scq, s.rcq, sq, 16)
	must(err)
	s.mem = mmap(t, 1<<16)
	s.mr, err = s.pd.RegMR(addr(s.mem), uint64(len(s.mem)), ibverbs.AccessLocalWrite|ibverbs.AccessRemoteWrite|ibverbs.AccessRemoteAtomic)
	must(err)
	must(s.qp.Init(1, ibverbs.AccessRemoteWrite|ibverbs.AccessRemoteAtomic))
	return s
}

func connect(t *testing.T, a, b *side) {
	t.Helper()
	for _, p := range [][2]*side{{a, b}, {b, a}} {
		me, peer := p[0], p[1]
		r := ibverbs.RTR{Port: 1, DestQPN: peer.qp.Num(), MTU: me.port.ActiveMTU, DLID: peer.port.LID, MaxDestRd: 1}
		if me.port.LinkLayer == ibverbs.LinkEthernet {
			r.Global, r.DGID, r.SGIDIndex = true, peer.gid, 1
		}
		if err := me.qp.ToRTR(r); err != nil {
			t.Fatal(err)
		}
		if err := me.qp.ToRTS(ibverbs.RTS{Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAt: 1}); err != nil {
			t.Fatal(err)
		}
	}
}

func poll(t *testing.T, cq *ibverbs.CQ, want int) []ibverbs.WC {
	t.Helper()
	var out []ibverbs.WC
	buf := make([]ibverbs.WC, 16)
	for i := 0; i < 1000 && len(out) < want; i++ {
		n, err := cq.Poll(buf)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, buf[:n]...)
	}
	if len(out) != want {
		t.Fatalf("polled %d completions, want %d", len(out), want)
	}
	return out
}

func TestVerbs(t *testing.T) {
	for _, devs := range []string{"ib0,ib1", "roce0:roce,roce1:roce"} {
		t.Run(devs, func(t *testing.T) {
			t.Setenv("FAKEVERBS_DEVICES", devs)
			l, err := ibverbs.Open(ibvtest.Build(t))
			if err != nil {
				t.Fatal(err)
			}
			names, err := l.Devices()
			if err != nil || len(names) != 2 {
				t.Fatalf("Devices() = %v, %v", names, err)
			}
			if !l.HasDmaBuf() || l.StatusString(ibverbs.WCRemAccessErr) != "remote access error" {
				t.Errorf("HasDmaBuf %v, status string %q", l.HasDmaBuf(), l.StatusString(ibverbs.WCRemAccessErr))
			}
			a, b := open(t, l, names[0], 8), open(t, l, names[1], 8)
			attr, err := a.ctx.QueryDevice()
			if err != nil || attr.PhysPorts != 1 || attr.AtomicCap == 0 || attr.NodeGUID != 0x0002c90300a00000 {
				t.Errorf("QueryDevice() = %+v, %v", attr, err)
			}
			// Posting before RTS fails.
			wr := ibverbs.WR{ID: 1, Opcode: ibverbs.OpWrite, Flags: ibverbs.SendSignaled, LAddr: addr(a.mem), Len: 8, LKey: a.mr.LKey(), RAddr: addr(b.mem), RKey: b.mr.RKey()}
			if n, err := a.qp.Post([]ibverbs.WR{wr}); n != 0 || !ibverbs.IsErrno(err, syscall.EINVAL) {
				t.Fatalf("post in INIT = %d, %v; want EINVAL", n, err)
			}
			connect(t, a, b)

			// write, write with immediate, fetch-and-add
			copy(a.mem, "hello, rdma!")
			binary.LittleEndian.PutUint64(b.mem[4096:], 41)
			if n, err := b.qp.PostRecv([]uint64{77}, []uint64{0}, 0, 0); n != 1 || err != nil {
				t.Fatal(n, err)
			}
			wrs := []ibverbs.WR{
				{ID: 1, Opcode: ibverbs.OpWrite, Flags: ibverbs.SendSignaled, LAddr: addr(a.mem), Len: 5, LKey: a.mr.LKey(), RAddr: addr(b.mem) + 100, RKey: b.mr.RKey()},
				{ID: 2, Opcode: ibverbs.OpWriteWithImm, Flags: ibverbs.SendSignaled, LAddr: addr(a.mem) + 7, Len: 5, LKey: a.mr.LKey(), RAddr: addr(b.mem) + 200, RKey: b.mr.RKey(), Imm: 0xdeadbeef},
				{ID: 3, Opcode: ibverbs.OpFetchAdd, Flags: ibverbs.SendSignaled | ibverbs.SendFence, LAddr: addr(a.mem) + 64, Len: 8, LKey: a.mr.LKey(), RAddr: addr(b.mem) + 4096, RKey: b.mr.RKey(), Add: 1},
			}
			if n, err := a.qp.Post(wrs); n != 3 || err != nil {
				t.Fatal(n, err)
			}
			wcs := poll(t, a.scq, 3)
			for i, wc := range wcs {
				if wc.Status != 0 || wc.ID != uint64(i+1) || wc.QPNum != a.qp.Num() {
					t.Errorf("completion %d = %+v", i, wc)
				}
			}
			rwc := poll(t, b.rcq, 1)[0]
			if rwc.ID != 77 || !rwc.WithImm || rwc.Imm != 0xdeadbeef || rwc.Opcode != ibverbs.WCOpRecvWithImm || rwc.ByteLen != 5 {
				t.Errorf("receive completion = %+v", rwc)
			}
			if got := string(b.mem[100:105]) + string(b.mem[200:205]); got != "hellordma!" {
				t.Errorf("written %q", got)
			}
			if old, now := binary.LittleEndian.Uint64(a.mem[64:]), binary.LittleEndian.Uint64(b.mem[4096:]); old != 41 || now != 42 {
				t.Errorf("fetch-add: old %d, now %d", old, now)
			}

			// A bad rkey: remote access error, then the queue pair is in
			// error and later requests are flushed.
			bad := wrs[0]
			bad.RKey ^= 0xff00
			next := wrs[0]
			next.ID = 9
			if n, err := a.qp.Post([]ibverbs.WR{bad}); n != 1 || err != nil {
				t.Fatal(n, err)
			}
			if wc := poll(t, a.scq, 1)[0]; wc.Status != ibverbs.WCRemAccessErr {
				t.Errorf("bad rkey: status %d (%s)", wc.Status, l.StatusString(wc.Status))
			}
			if _, err := a.qp.Post([]ibverbs.WR{next}); !ibverbs.IsErrno(err, syscall.EINVAL) {
				t.Errorf("post on a QP in error: %v, want EINVAL", err)
			}
			if err := b.qp.Destroy(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestVerbsErrors(t *testing.T) {
	t.Setenv("FAKEVERBS_DEVICES", "ib0,ib1")
	l, err := ibverbs.Open(ibvtest.Build(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.OpenDevice("mlx5_9"); !ibverbs.IsErrno(err, syscall.ENODEV) || !strings.Contains(err.Error(), "ibv_open_device on mlx5_9") {
		t.Errorf("OpenDevice(unknown) = %v", err)
	}
	a, b := open(t, l, "ib0", 4), open(t, l, "ib1", 4)
	if err := a.qp.ToRTR(ibverbs.RTR{Port: 1, DestQPN: b.qp.Num(), MTU: 5}); !errors.Is(err, errkind.ErrInvalidArgument) {
		t.Errorf("RTR without a LID on IB = %v, want EINVAL", err)
	}
	connect(t, a, b)
	w := ibverbs.WR{Opcode: ibverbs.OpWrite, Flags: ibverbs.SendSignaled, LAddr: addr(a.mem), Len: 8, LKey: a.mr.LKey(), RAddr: addr(b.mem), RKey: b.mr.RKey()}
	// The send queue holds 4 requests until their completions are polled.
	ws := []ibverbs.WR{w, w, w, w, w}
	if n, err := a.qp.Post(ws); n != 4 || !ibverbs.IsErrno(err, syscall.ENOMEM) {
		t.Errorf("5 posts on a queue of 4 = %d, %v; want 4, ENOMEM", n, err)
	}
	poll(t, a.scq, 4)
	// A bad lkey is a local protection error.
	lw := w
	lw.LKey++
	a.qp.Post([]ibverbs.WR{lw})
	if wc := poll(t, a.scq, 1)[0]; wc.Status != ibverbs.WCLocProtErr {
		t.Errorf("bad lkey: status %d", wc.Status)
	}
	// Target destroyed: retry exceeded.
	c, d := open(t, l, "ib0", 4), open(t, l, "ib1", 4)
	connect(t, c, d)
	d.qp.Destroy()
	w.LAddr, w.LKey, w.RAddr, w.RKey = addr(c.mem), c.mr.LKey(), addr(d.mem), d.mr.RKey()
	c.qp.Post([]ibverbs.WR{w})
	if wc := poll(t, c.scq, 1)[0]; wc.Status != ibverbs.WCRetryExcErr {
		t.Errorf("destroyed target: status %d", wc.Status)
	}
}

func TestCQOverrun(t *testing.T) {
	t.Setenv("FAKEVERBS_CQ_CAP", "2")
	l, err := ibverbs.Open(ibvtest.Build(t))
	if err != nil {
		t.Fatal(err)
	}
	a, b := open(t, l, "fakeib0", 8), open(t, l, "fakeib0", 8)
	connect(t, a, b)
	w := ibverbs.WR{Opcode: ibverbs.OpWrite, Flags: ibverbs.SendSignaled, LAddr: addr(a.mem), Len: 8, LKey: a.mr.LKey(), RAddr: addr(b.mem), RKey: b.mr.RKey()}
	if n, err := a.qp.Post([]ibverbs.WR{w, w, w}); n != 3 || err != nil {
		t.Fatal(n, err)
	}
	if _, err := a.scq.Poll(make([]ibverbs.WC, 4)); err == nil || !strings.Contains(err.Error(), "ibv_poll_cq") {
		t.Errorf("poll of an overrun CQ = %v", err)
	}
}
