//go:build cgo

package ib_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/ib"
)

func TestProbe(t *testing.T) {
	opts := fakeOptions(t, "mlx5_0", "mlx5_1", "roce0:roce")
	cases := []struct {
		name, hca, down, lib string
		avail                bool
		reason               string
	}{
		{name: "all", avail: true, reason: "mlx5_0:1 (InfiniBand), mlx5_1:1 (InfiniBand), roce0:1 (RoCE)"},
		{name: "prefix", hca: "mlx5", avail: true, reason: "mlx5_0:1 (InfiniBand), mlx5_1:1 (InfiniBand)"},
		{name: "exact", hca: "=mlx5_1:1", avail: true, reason: "mlx5_1:1 (InfiniBand)"},
		{name: "exclude", hca: "^mlx5", avail: true, reason: "roce0:1 (RoCE)"},
		{name: "no match", hca: "mlx4", reason: `no RDMA device matches WEFT_IB_HCA="mlx4" (devices: mlx5_0, mlx5_1, roce0)`},
		{name: "port down", hca: "mlx5_1", down: "mlx5_1", reason: "port down: mlx5_1:1 DOWN"},
		{name: "no library", lib: "/nonexistent/libibverbs.so.1", reason: "libibverbs not found: /nonexistent/libibverbs.so.1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("FAKEVERBS_PORT_DOWN", c.down)
			o := opts
			o.HCA = c.hca
			if c.lib != "" {
				o.Library = c.lib
			}
			a := ib.Probe(o)
			if a.Available != c.avail || !strings.HasPrefix(a.Reason, c.reason) {
				t.Errorf("Probe = %+v, want available %v, reason %q", a, c.avail, c.reason)
			}
		})
	}
	// The registered network reads the same from the environment.
	t.Setenv("WEFT_IBVERBS_LIB", opts.Library)
	t.Setenv("WEFT_SYSFS_ROOT", opts.SysfsRoot)
	t.Setenv("WEFT_IB_HCA", "^mlx5")
	n, _ := hal.LookupNetwork(ib.Name)
	if a := n.Probe(); !a.Available || a.Reason != "roce0:1 (RoCE)" {
		t.Errorf("network Probe with WEFT_IB_HCA=^mlx5 = %+v", a)
	}
}

func TestParseHCA(t *testing.T) {
	f, err := ib.ParseHCA("^=mlx5_0:1, mlx5_2")
	want := ib.HCAFilter{Exclude: true, Exact: true, Items: []ib.HCAItem{{Name: "mlx5_0", Port: 1}, {Name: "mlx5_2"}}}
	if err != nil || !cmp.Equal(f, want) {
		t.Errorf("ParseHCA = %+v, %v", f, err)
	}
	for _, bad := range []string{"mlx5_0:x", "mlx5_0:0", ":1"} {
		if _, err := ib.ParseHCA(bad); err == nil {
			t.Errorf("ParseHCA(%q) accepted", bad)
		}
	}
	if f.Match("mlx5_0", 1) || !f.Match("mlx5_0", 2) || !f.Match("mlx5_20", 1) {
		t.Errorf("Match of %+v", f)
	}
}

// Puts of many sizes and offsets land exactly, from registered memory and
// from memory staged through the device's own engine, over InfiniBand and
// RoCE, with puts split into chunks.
func TestPutSignal(t *testing.T) {
	for _, link := range []string{"fakeib0,fakeib1", "roce0:roce,roce1:roce"} {
		t.Run(link, func(t *testing.T) {
			opts := fakeOptions(t, strings.Split(link, ",")...)
			opts.HCA = strings.Split(strings.Split(link, ",")[0], ":")[0][:4]
			opts.Chunk = 4096
			t.Setenv("FAKEVERBS_MAX_MSG", "3000") // the port's limit is smaller still
			rs := openRanks(t, 2, opts, "job-put-"+link)
			const size = 1 << 18
			dst := alloc(t, rs[1].dev, size)
			sems := alloc(t, rs[1].dev, 64)
			rdst, rsems := exchange(t, rs[1], rs[0], dst), exchange(t, rs[1], rs[0], sems)
			srcReg := alloc(t, rs[0].dev, size)
			if _, err := rs[0].nd.ExportPort(srcReg); err != nil { // registered: written from directly
				t.Fatal(err)
			}
			srcStaged := alloc(t, rs[0].dev, size) // not registered: staged
			for i := range srcReg.Host() {
				srcReg.Host()[i] = byte(i*7 + 1)
				srcStaged.Host()[i] = byte(i*13 + 5)
			}
			e, _ := connect(t, rs[0], rs[1])
			want := make([]byte, size)
			sizes := []int64{1, 7, 8, 100, 2999, 3000, 3001, 4096, 65536 + 3, 100000}
			var k uint64
			for _, src := range []hal.Buffer{srcReg, srcStaged} {
				off := int64(0)
				for _, n := range sizes {
					soff := (off * 3) % (size - n)
					if err := e.Put(rdst.Addr()+uint64(off), src.Addr()+uint64(soff), n); err != nil {
						t.Fatal(err)
					}
					copy(want[off:off+n], src.Host()[soff:soff+n])
					k++
					if err := e.Signal(rsems.Addr(), rsems.Addr()+8, uint64(n)); err != nil {
						t.Fatal(err)
					}
					off = (off + n + 13) % (size / 2)
				}
			}
			if err := flush(t, e); err != nil {
				t.Fatal(err)
			}
			if got := word(sems, 0); got != k {
				t.Errorf("semaphore = %d, want %d", got, k)
			}
			if got := word(sems, 8); got != uint64(sizes[len(sizes)-1]) {
				t.Errorf("count word = %d, want %d", got, sizes[len(sizes)-1])
			}
			if !bytes.Equal(dst.Host(), want) {
				t.Errorf("destination differs from the expected bytes")
			}
		})
	}
}

// A signal is ordered after the puts before it: the receiver that sees
// semaphore value k sees the data of put k, while the provider runs
// requests only when polled.
func TestSignalAfterPut(t *testing.T) {
	opts := fakeOptions(t)
	opts.Chunk = 1024
	t.Setenv("FAKEVERBS_DEFER", "1")
	rs := openRanks(t, 2, opts, "job-order")
	const n = 8192
	dst, sems := alloc(t, rs[1].dev, n), alloc(t, rs[1].dev, 8)
	rdst, rsems := exchange(t, rs[1], rs[0], dst), exchange(t, rs[1], rs[0], sems)
	src := alloc(t, rs[0].dev, 64*n)
	rs[0].nd.ExportPort(src)
	for i := range src.Host() {
		src.Host()[i] = byte(i / n)
	}
	e, _ := connect(t, rs[0], rs[1])
	for k := 0; k < 64; k++ {
		if err := e.Put(rdst.Addr(), src.Addr()+uint64(k*n), n); err != nil {
			t.Fatal(err)
		}
		if err := e.Signal(rsems.Addr(), 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	seen := uint64(0)
	for seen < 64 {
		if _, err := e.Completed(); err != nil { // drives the provider
			t.Fatal(err)
		}
		s := word(sems, 0)
		if s > seen {
			// data of put s-1 (or a later one) is in place
			if b := dst.Host()[n-1]; uint64(b) < s-1 {
				t.Fatalf("semaphore %d but the last byte is from put %d", s, b)
			}
			seen = s
		}
	}
}

// Thousands of requests with marks: Completed never passes a mark whose
// requests are not done, and reaches the last one.
func TestMarkCompleted(t *testing.T) {
	opts := fakeOptions(t)
	opts.QueueDepth = 64
	t.Setenv("FAKEVERBS_DEFER", "3")
	rs := openRanks(t, 2, opts, "job-marks")
	dst, sems := alloc(t, rs[1].dev, 1<<16), alloc(t, rs[1].dev, 8)
	rdst, rsems := exchange(t, rs[1], rs[0], dst), exchange(t, rs[1], rs[0], sems)
	src := alloc(t, rs[0].dev, 1<<16)
	rs[0].nd.ExportPort(src)
	e, _ := connect(t, rs[0], rs[1])
	const reqs = 5000
	var last uint64
	lagged := false
	for i := 0; i < reqs; i++ {
		if err := e.Put(rdst.Addr()+uint64(i%4096)*16, src.Addr()+uint64(i%4096)*16, 16); err != nil {
			t.Fatal(err)
		}
		if i%10 == 9 {
			if err := e.Signal(rsems.Addr(), 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		m, err := e.Mark()
		if err != nil || m != last+1 {
			t.Fatalf("Mark() = %d, %v after %d", m, err, last)
		}
		last = m
		c, err := e.Completed()
		if err != nil || c > m {
			t.Fatalf("Completed() = %d, %v with last mark %d", c, err, m)
		}
		if c < m {
			lagged = true
		}
	}
	if err := flush(t, e); err != nil {
		t.Fatal(err)
	}
	if c, _ := e.Completed(); c < last {
		t.Errorf("Completed() = %d after flush, want ≥ %d", c, last)
	}
	if !lagged {
		t.Errorf("completions never lagged the marks: the deferred provider was not exercised")
	}
	if got := word(sems, 0); got != reqs/10 {
		t.Errorf("semaphore = %d, want %d", got, reqs/10)
	}
}

// Copy on an engine runs on the device's own engine, after the puts before
// it and before the signal after it.
func TestCopyOrdering(t *testing.T) {
	opts := fakeOptions(t)
	rs := openRanks(t, 2, opts, "job-copy")
	dst, sems := alloc(t, rs[1].dev, 4096), alloc(t, rs[1].dev, 8)
	rdst, rsems := exchange(t, rs[1], rs[0], dst), exchange(t, rs[1], rs[0], sems)
	a, b := alloc(t, rs[0].dev, 4096), alloc(t, rs[0].dev, 4096)
	copy(a.Host(), bytes.Repeat([]byte("abcdefgh"), 512))
	e, _ := connect(t, rs[0], rs[1])
	// copy a → b locally, then put b (staged: not registered), then signal
	if err := e.Copy(b.Addr(), a.Addr(), 4096); err != nil {
		t.Fatal(err)
	}
	if err := e.Put(rdst.Addr(), b.Addr(), 4096); err != nil {
		t.Fatal(err)
	}
	if err := e.Signal(rsems.Addr(), 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := flush(t, e); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst.Host(), a.Host()) || word(sems, 0) != 1 {
		t.Errorf("after copy+put+signal: data equal %v, semaphore %d", bytes.Equal(dst.Host(), a.Host()), word(sems, 0))
	}
	// An engine to this rank itself is the device's own engine, with
	// this rank's own registrations imported at their device addresses.
	self, err := rs[1].nd.NewEngine(rs[1].ep)
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	h, _ := rs[1].nd.ExportPort(sems)
	own, err := rs[1].nd.ImportPort(h)
	if err != nil || own.Addr() != sems.Addr() {
		t.Fatalf("own import = %v, %v", own, err)
	}
	if err := self.Signal(own.Addr(), 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := flush(t, self); err != nil {
		t.Fatal(err)
	}
}

func TestErrors(t *testing.T) {
	t.Run("bad rkey", func(t *testing.T) {
		rs := openRanks(t, 2, fakeOptions(t), "job-rkey")
		dst := alloc(t, rs[1].dev, 4096)
		h, _ := rs[1].nd.ExportPort(dst)
		h[35] ^= 0x40 // the rkey's low byte
		rdst, err := rs[0].nd.ImportPort(h)
		if err != nil {
			t.Fatal(err)
		}
		src := alloc(t, rs[0].dev, 4096)
		rs[0].nd.ExportPort(src)
		e, _ := connect(t, rs[0], rs[1])
		e.Put(rdst.Addr(), src.Addr(), 64)
		err = flush(t, e)
		if !errors.Is(err, hal.ErrRemote) || !strings.Contains(err.Error(), "to peer rank 1 failed: remote access error (work completion status 10)") {
			t.Errorf("put with a bad rkey: %v", err)
		}
		if err := e.Put(rdst.Addr(), src.Addr(), 8); !errors.Is(err, hal.ErrRemote) {
			t.Errorf("put after the failure: %v, want the recorded error", err)
		}
		if err := rs[0].nd.Err(); !errors.Is(err, hal.ErrRemote) || !strings.Contains(err.Error(), "peer rank 1") {
			t.Errorf("NetDevice.Err after the failure: %v, want the failure naming peer rank 1", err)
		}
		if err := rs[1].nd.Err(); err != nil {
			t.Errorf("the target's NetDevice.Err: %v, want nil (RDMA writes are one-sided)", err)
		}
	})
	t.Run("peer gone", func(t *testing.T) {
		rs := openRanks(t, 3, fakeOptions(t), "job-gone")
		dst := alloc(t, rs[2].dev, 4096)
		rdst := exchange(t, rs[2], rs[0], dst)
		src := alloc(t, rs[0].dev, 4096)
		rs[0].nd.ExportPort(src)
		e, _ := connect(t, rs[0], rs[2])
		if err := e.Put(rdst.Addr(), src.Addr(), 64); err != nil {
			t.Fatal(err)
		}
		if err := flush(t, e); err != nil {
			t.Fatal(err)
		}
		rs[2].nd.Close() // destroys rank 2's queue pairs
		e.Put(rdst.Addr(), src.Addr(), 64)
		err := flush(t, e)
		if !errors.Is(err, hal.ErrRemote) || !strings.Contains(err.Error(), "peer rank 2 failed: transport retry counter exceeded") {
			t.Errorf("put to a closed peer: %v", err)
		}
	})
	t.Run("cq overrun", func(t *testing.T) {
		opts := fakeOptions(t)
		opts.QueueDepth, opts.Chunk = 8, 64
		t.Setenv("FAKEVERBS_CQ_CAP", "2")
		rs := openRanks(t, 2, opts, "job-cq")
		dst := alloc(t, rs[1].dev, 4096)
		rdst := exchange(t, rs[1], rs[0], dst)
		src := alloc(t, rs[0].dev, 4096)
		rs[0].nd.ExportPort(src)
		e, _ := connect(t, rs[0], rs[1])
		// one put of 8 chunks: 8 completions before the next poll
		err := e.Put(rdst.Addr(), src.Addr(), 512)
		if err == nil {
			err = flush(t, e)
		}
		if err == nil || !strings.Contains(err.Error(), "completions of peer rank 1") || !strings.Contains(err.Error(), "overrun") {
			t.Errorf("overrun CQ: %v", err)
		}
	})
	t.Run("outside imports", func(t *testing.T) {
		rs := openRanks(t, 2, fakeOptions(t), "job-range")
		dst := alloc(t, rs[1].dev, 4096)
		rdst := exchange(t, rs[1], rs[0], dst)
		e, _ := connect(t, rs[0], rs[1])
		if err := e.Put(rdst.Addr()+4000, 0, 200); !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "peer rank 1") {
			t.Errorf("put past the end: %v", err)
		}
		if err := e.Signal(rdst.Addr()+4, 0, 0); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Errorf("unaligned signal: %v", err)
		}
		rdst.Free()
		if err := e.Put(rdst.Addr(), 0, 8); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Errorf("put into a freed import: %v", err)
		}
	})
}

func TestHandles(t *testing.T) {
	opts := fakeOptions(t)
	rs := openRanks(t, 2, opts, "job-h")
	other := openRanks(t, 1, opts, "job-other")
	b := alloc(t, rs[1].dev, 4096)
	h, err := rs[1].nd.ExportPort(b)
	if err != nil {
		t.Fatal(err)
	}
	ob := alloc(t, other[0].dev, 64)
	oh, _ := other[0].nd.ExportPort(ob)
	magic := append(hal.Handle(nil), h...)
	magic[0] = 'X'
	reserved := append(hal.Handle(nil), h...)
	reserved[6] = 1
	rank9 := append(hal.Handle(nil), h...)
	rank9[27] = 9
	size0 := append(hal.Handle(nil), h...)
	for i := 48; i < 56; i++ {
		size0[i] = 0
	}
	cases := []struct {
		name string
		h    hal.Handle
		want error
	}{
		{"short", h[:40], hal.ErrInvalidArgument},
		{"magic", magic, hal.ErrInvalidArgument},
		{"reserved", reserved, hal.ErrInvalidArgument},
		{"rank outside", rank9, hal.ErrInvalidArgument},
		{"size 0", size0, hal.ErrInvalidArgument},
		{"other job", oh, hal.ErrInvalidUsage},
	}
	for _, c := range cases {
		if _, err := rs[0].nd.ImportPort(c.h); !errors.Is(err, c.want) {
			t.Errorf("%s: ImportPort = %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := rs[0].nd.ImportPort(h); err != nil {
		t.Errorf("valid handle refused: %v", err)
	}
	// Endpoints: no address, another job's, a malformed one.
	ep := rs[1].ep
	ep.Net = nil
	if _, err := rs[0].nd.NewEngine(ep); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("NewEngine without an address: %v", err)
	}
	ep.Net = map[string][]byte{ib.Name: other[0].nd.Address()}
	if _, err := rs[0].nd.NewEngine(ep); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("NewEngine to another job: %v", err)
	}
	ep.Net = map[string][]byte{ib.Name: []byte("WIBA nonsense")}
	if _, err := rs[0].nd.NewEngine(ep); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("NewEngine with a malformed address: %v", err)
	}
	if _, err := rs[0].nd.ExportPort(nil); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("ExportPort(nil): %v", err)
	}
	st := opts
	st.Staging = ib.StagingAlways
	sd := openRanks(t, 1, st, "job-staged")
	if _, err := sd[0].nd.ExportPort(alloc(t, sd[0].dev, 64)); !errors.Is(err, hal.ErrNotSupported) {
		t.Errorf("ExportPort with StagingAlways: %v", err)
	}
}

// UnexportPort deregisters a buffer's regions (every export of it): a
// second UnexportPort and an ImportPort of its handle here are refused,
// and a peer's put into it is refused by the NIC (a remote access error
// on the sender's queue pair; RDMA writes are one-sided, so the target
// reports nothing) instead of landing.
func TestUnexportPort(t *testing.T) {
	rs := openRanks(t, 2, fakeOptions(t), "job-unexport")
	dst := alloc(t, rs[1].dev, 4096)
	h, err := rs[1].nd.ExportPort(dst)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := rs[1].nd.ExportPort(dst) // exported twice: both go
	if err != nil {
		t.Fatal(err)
	}
	rdst, err := rs[0].nd.ImportPort(h)
	if err != nil {
		t.Fatal(err)
	}
	src := alloc(t, rs[0].dev, 4096)
	copy(src.Host(), bytes.Repeat([]byte("before.."), 512))
	if _, err := rs[0].nd.ExportPort(src); err != nil {
		t.Fatal(err)
	}
	e, _ := connect(t, rs[0], rs[1])
	if err := e.Put(rdst.Addr(), src.Addr(), 64); err != nil {
		t.Fatal(err)
	}
	if err := flush(t, e); err != nil {
		t.Fatal(err)
	}
	if err := rs[1].nd.UnexportPort(dst); err != nil {
		t.Fatalf("UnexportPort: %v", err)
	}
	err = rs[1].nd.UnexportPort(dst)
	if !errors.Is(err, hal.ErrInvalidArgument) {
		t.Fatalf("second UnexportPort: %v, want ErrInvalidArgument", err)
	}
	for _, part := range []string{"rank 1", "4096 bytes", fmt.Sprintf("%#x", dst.Addr()), "not exported"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("second UnexportPort: %q does not mention %q", err, part)
		}
	}
	for _, hh := range []hal.Handle{h, h2} {
		if _, err := rs[1].nd.ImportPort(hh); !errors.Is(err, hal.ErrInvalidUsage) {
			t.Errorf("own ImportPort of an unexported registration: %v, want ErrInvalidUsage", err)
		}
	}
	copy(src.Host(), bytes.Repeat([]byte("after..."), 512))
	if err := e.Put(rdst.Addr(), src.Addr(), 64); err != nil {
		t.Fatal(err)
	}
	err = flush(t, e)
	if !errors.Is(err, hal.ErrRemote) || !strings.Contains(err.Error(), "to peer rank 1 failed: remote access error") {
		t.Errorf("put into an unexported registration: %v, want a remote access error", err)
	}
	if got := string(dst.Host()[:64]); got != strings.Repeat("before..", 8) {
		t.Errorf("the refused put landed: %q", got)
	}
	if err := rs[1].nd.Err(); err != nil {
		t.Errorf("the target's Err: %v, want nil (RDMA writes are one-sided)", err)
	}
	if err := rs[1].nd.UnexportPort(nil); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("UnexportPort(nil): %v, want ErrInvalidArgument", err)
	}
}

// UnexportPort of a buffer that a put is reading as a registered source
// waits for the RDMA writes posted from it before deregistering (the
// provider runs them only when polled, so they are posted and not done
// when it is called): the put completes intact. Close does not
// deregister it again, and UnexportPort after Close is refused.
func TestUnexportPortWaitsForReads(t *testing.T) {
	opts := fakeOptions(t)
	opts.Chunk = 1024
	t.Setenv("FAKEVERBS_DEFER", "1")
	rs := openRanks(t, 2, opts, "job-unexport-reads")
	const n = 16384
	dst := alloc(t, rs[1].dev, n)
	rdst := exchange(t, rs[1], rs[0], dst)
	src := alloc(t, rs[0].dev, n)
	for i := range src.Host() {
		src.Host()[i] = byte(i*11 + 3)
	}
	if _, err := rs[0].nd.ExportPort(src); err != nil {
		t.Fatal(err)
	}
	e, err := rs[0].nd.NewEngine(rs[1].ep)
	if err != nil {
		t.Fatal(err)
	}
	back, err := rs[1].nd.NewEngine(rs[0].ep)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if err := e.Put(rdst.Addr(), src.Addr(), n); err != nil { // 16 writes with src's lkey
		t.Fatal(err)
	}
	if err := rs[0].nd.UnexportPort(src); err != nil {
		t.Fatalf("UnexportPort of a source being read: %v", err)
	}
	if err := flush(t, e); err != nil {
		t.Fatalf("the put from the unexported source: %v", err)
	}
	if !bytes.Equal(dst.Host(), src.Host()) {
		t.Errorf("the put from the unexported source did not land intact")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rs[0].nd.Close(); err != nil {
		t.Errorf("Close after UnexportPort: %v", err)
	}
	if err := rs[0].nd.UnexportPort(src); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("UnexportPort after Close: %v, want ErrInvalidUsage", err)
	}
}
