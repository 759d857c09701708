//go:build cgo

package main

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

func TestUniqueIDRoundTrip(t *testing.T) {
	for _, id := range []bootstrap.UniqueID{
		{Magic: 0x0123456789abcdef, Addr: "127.0.0.1:40123"},
		{Magic: 1, Addr: "[fe80::1%eth0]:1"},
		{Magic: ^uint64(0), Addr: "node-17.cluster.example.org:65535"},
		{Magic: 5, Addr: "node-17.cluster.example.org:65535", Secret: testSecret(t)},
	} {
		b, err := encodeID(id)
		if err != nil {
			t.Fatalf("encodeID(%+v): %v", id, err)
		}
		got, err := decodeID(b)
		if err != nil {
			t.Fatalf("decodeID(encodeID(%+v)): %v", id, err)
		}
		if diff := cmp.Diff(id, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
	if _, err := encodeID(bootstrap.UniqueID{Magic: 1, Addr: strings.Repeat("a", 120) + ":1"}); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("encodeID of a too long address: %v, want ErrInvalidArgument", err)
	}
}

func TestUniqueIDFromNewUniqueID(t *testing.T) {
	raw, err := getUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	id, err := decodeID(raw)
	if err != nil {
		t.Fatal(err)
	}
	if id.Magic == 0 || !strings.Contains(id.Addr, ":") || id.Secret.IsZero() {
		t.Errorf("decoded %+v (want a magic, an address and a secret)", id)
	}
}

func TestDecodeIDRejects(t *testing.T) {
	good, _ := encodeID(bootstrap.UniqueID{Magic: 7, Addr: "127.0.0.1:9"})
	cases := map[string]func(b *[uniqueIDBytes]byte){
		"NVIDIA's id":        func(b *[uniqueIDBytes]byte) { b[0] = 2; b[1] = 0 },
		"zero":               func(b *[uniqueIDBytes]byte) { *b = [uniqueIDBytes]byte{} },
		"length too long":    func(b *[uniqueIDBytes]byte) { b[12] = 200 },
		"trailing garbage":   func(b *[uniqueIDBytes]byte) { b[100] = 1 },
		"address not h:port": func(b *[uniqueIDBytes]byte) { b[13] = 3 },
		"secret too short":   func(b *[uniqueIDBytes]byte) { b[12] = 3 },
	}
	for name, mutate := range cases {
		b := good
		mutate(&b)
		if _, err := decodeID(b); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Errorf("%s: decodeID = %v, want ErrInvalidArgument", name, err)
		}
	}
}

func FuzzDecodeID(f *testing.F) {
	good, _ := encodeID(bootstrap.UniqueID{Magic: 7, Addr: "127.0.0.1:9"})
	f.Add(good[:])
	f.Add(make([]byte, uniqueIDBytes))
	f.Fuzz(func(t *testing.T, data []byte) {
		var b [uniqueIDBytes]byte
		copy(b[:], data)
		id, err := decodeID(b)
		if err != nil {
			return
		}
		again, err := encodeID(id)
		if err != nil {
			t.Fatalf("decoded id %+v does not encode: %v", id, err)
		}
		if again != b {
			t.Fatalf("decode/encode changed the id")
		}
	})
}

func TestErrorStrings(t *testing.T) {
	seen := map[string]bool{}
	for r := result(0); r < numResults; r++ {
		s := errorString(r)
		if s == "" || seen[s] {
			t.Errorf("errorString(%d) = %q (empty or duplicate)", r, s)
		}
		seen[s] = true
	}
	if got := errorString(99); got != "unknown result code" {
		t.Errorf("errorString(99) = %q", got)
	}
}

func TestCodeOf(t *testing.T) {
	cases := []struct {
		err  error
		want result
	}{
		{nil, ncclSuccess},
		{hal.ErrInvalidArgument, ncclInvalidArgument},
		{hal.ErrNotSupported, ncclInvalidUsage},
		{hal.ErrRemote, ncclRemoteError},
		{hal.ErrDevice, ncclUnhandledCudaError},
		{hal.ErrInternal, ncclInternalError},
		{&realError{call: "ncclAllReduce", code: ncclRemoteError}, ncclRemoteError},
	}
	for _, c := range cases {
		if got := codeOf(c.err); got != c.want {
			t.Errorf("codeOf(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

// testComm is a registered communicator with no weft communicator behind
// it: enough for argument checks, groups and operator handles.
func testComm(t *testing.T, rank, size int) *comm {
	t.Helper()
	c := newComm(rank, size, "host", 0, true, "test")
	close(c.ready)
	registerComm(c)
	t.Cleanup(func() { forgetComm(c) })
	return c
}

// memAlloc allocates through the process's host device, as ncclMemAlloc.
func memAlloc(t *testing.T, bytes int64) uintptr {
	t.Helper()
	t.Setenv("WEFT_HAL", "host")
	p, err := devices.alloc(bytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { devices.free(p) })
	return p
}

func TestArgumentChecks(t *testing.T) {
	c := testComm(t, 1, 3)
	buf := memAlloc(t, 4096)
	premul, r := createPreMulSum("test", c, int32(plan.Float32), 1, []byte{0, 0, 0, 64}, 0)
	if r != ncclSuccess {
		t.Fatalf("createPreMulSum = %d", r)
	}
	ok := collArgs{kind: kAllReduce, send: buf, recv: buf, count: 8, dtype: int32(plan.Float32), comm: c.handle}
	cases := []struct {
		name   string
		mutate func(a *collArgs)
		want   result
		word   string // the last error must name the argument
	}{
		{"valid", func(a *collArgs) {}, ncclSuccess, ""},
		{"valid premulsum", func(a *collArgs) { a.op = premul }, ncclSuccess, ""},
		{"count 0, NULL buffers", func(a *collArgs) { a.count, a.send, a.recv = 0, 0, 0 }, ncclSuccess, ""},
		{"bad datatype", func(a *collArgs) { a.dtype = 12 }, ncclInvalidArgument, "datatype"},
		{"negative datatype", func(a *collArgs) { a.dtype = -1 }, ncclInvalidArgument, "datatype"},
		{"bad op", func(a *collArgs) { a.op = 42 }, ncclInvalidArgument, "op"},
		{"negative op", func(a *collArgs) { a.op = -3 }, ncclInvalidArgument, "op"},
		{"premulsum of another type", func(a *collArgs) { a.op, a.dtype = premul, int32(plan.Int32) }, ncclInvalidArgument, "op"},
		{"NULL sendbuff", func(a *collArgs) { a.send = 0 }, ncclInvalidArgument, "sendbuff"},
		{"NULL recvbuff", func(a *collArgs) { a.recv = 0 }, ncclInvalidArgument, "recvbuff"},
		{"stream on host", func(a *collArgs) { a.stream = 0x1000 }, ncclInvalidArgument, "stream"},
		{"buffer not from ncclMemAlloc", func(a *collArgs) { a.send = 0x1000 }, ncclInvalidArgument, "ncclMemAlloc"},
		{"buffer too short", func(a *collArgs) { a.count = 2048 }, ncclInvalidArgument, "sendbuff"},
		{"huge count", func(a *collArgs) { a.count = 1 << 62 }, ncclInvalidArgument, "count"},
		{"root out of range", func(a *collArgs) { a.kind, a.root = kBroadcast, 3 }, ncclInvalidArgument, "root"},
		{"negative root", func(a *collArgs) { a.kind, a.root = kReduce, -1 }, ncclInvalidArgument, "root"},
		{"reduce: NULL recvbuff off root", func(a *collArgs) { a.kind, a.root, a.recv = kReduce, 0, 0 }, ncclSuccess, ""},
		{"reduce: NULL recvbuff at root", func(a *collArgs) { a.kind, a.root, a.recv = kReduce, 1, 0 }, ncclInvalidArgument, "recvbuff"},
		{"broadcast: NULL sendbuff off root", func(a *collArgs) { a.kind, a.root, a.send = kBroadcast, 2, 0 }, ncclSuccess, ""},
		{"peer out of range", func(a *collArgs) { a.kind, a.root = kSend, 3 }, ncclInvalidArgument, "peer"},
		{"allgather recvbuff too short", func(a *collArgs) { a.kind, a.count = kAllGather, 400 }, ncclInvalidArgument, "recvbuff"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := ok
			a.fn = "ncclTest"
			tc.mutate(&a)
			setLastError("")
			o, got := c.check(a)
			if got != tc.want {
				t.Fatalf("check = %d (%s), want %d", got, getLastError(), tc.want)
			}
			if tc.word != "" && !strings.Contains(getLastError(), tc.word) {
				t.Errorf("last error %q does not name %q", getLastError(), tc.word)
			}
			if tc.want == ncclSuccess && o == nil {
				t.Errorf("no operation built")
			}
		})
	}
}

func TestLookup(t *testing.T) {
	if _, r := lookup("ncclX", 0); r != ncclInvalidArgument || !strings.Contains(getLastError(), "comm") {
		t.Errorf("lookup(NULL) = %d, %q", r, getLastError())
	}
	if _, r := lookup("ncclX", 0x12345); r != ncclInvalidArgument {
		t.Errorf("lookup(unknown) = %d", r)
	}
	c := testComm(t, 0, 2)
	if got, r := lookup("ncclX", c.handle); r != ncclSuccess || got != c {
		t.Errorf("lookup(live) = %v, %d", got, r)
	}
}

func TestGatherScatterOps(t *testing.T) {
	c := testComm(t, 2, 3)
	buf := memAlloc(t, 3*16)
	a := collArgs{fn: "ncclGather", kind: kGather, send: buf, recv: buf, count: 4, dtype: int32(plan.Int32), root: 2, comm: c.handle}
	o, r := c.check(a)
	if r != ncclSuccess {
		t.Fatalf("check = %d: %s", r, getLastError())
	}
	want := []p2pEntry{{peer: 2, send: true, buf: buf, bytes: 16},
		{peer: 0, buf: buf, bytes: 16}, {peer: 1, buf: buf + 16, bytes: 16}, {peer: 2, buf: buf + 32, bytes: 16}}
	if diff := cmp.Diff(want, o.p2p, cmp.AllowUnexported(p2pEntry{})); diff != "" {
		t.Errorf("gather at root (-want +got):\n%s", diff)
	}
	a.kind, a.fn, a.root = kScatter, "ncclScatter", 0
	if o, r = c.check(a); r != ncclSuccess {
		t.Fatalf("check = %d: %s", r, getLastError())
	}
	want = []p2pEntry{{peer: 0, buf: buf, bytes: 16}}
	if diff := cmp.Diff(want, o.p2p, cmp.AllowUnexported(p2pEntry{})); diff != "" {
		t.Errorf("scatter off root (-want +got):\n%s", diff)
	}
}

func TestPreMulSumHandles(t *testing.T) {
	c := testComm(t, 0, 2)
	a, r := createPreMulSum("f", c, int32(plan.Float64), 1, []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}, 0)
	b, r2 := createPreMulSum("f", c, int32(plan.Int32), 0, nil, 0x1000)
	if r != ncclSuccess || r2 != ncclSuccess {
		t.Fatalf("create = %d, %d", r, r2)
	}
	if a != 5 || b != 6 {
		t.Errorf("handles %d, %d; want 5 and 6 (ncclNumOps onwards)", a, b)
	}
	p, _ := c.preMul(a)
	if p.scalar != 0x3ff0000000000000 || p.scalarPtr != 0 {
		t.Errorf("host scalar bits %#x ptr %#x", p.scalar, p.scalarPtr)
	}
	if _, r := createPreMulSum("f", c, int32(plan.Int32), 0, nil, 0); r != ncclInvalidArgument {
		t.Errorf("device scalar NULL = %d", r)
	}
	if _, r := createPreMulSum("f", c, 12, 1, []byte{1}, 0); r != ncclInvalidArgument {
		t.Errorf("bad datatype = %d", r)
	}
	if _, r := createPreMulSum("f", c, int32(plan.Int32), 2, []byte{1}, 0); r != ncclInvalidArgument {
		t.Errorf("bad residence = %d", r)
	}
	if r := destroyOp("f", c, a); r != ncclSuccess {
		t.Errorf("destroy = %d", r)
	}
	if r := destroyOp("f", c, a); r != ncclInvalidArgument {
		t.Errorf("destroy twice = %d", r)
	}
	if r := destroyOp("f", c, int32(plan.Sum)); r != ncclInvalidArgument {
		t.Errorf("destroy ncclSum = %d", r)
	}
}

func TestGroups(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t.Setenv("WEFT_NCCL_FALLBACK", "0")
	if r := groupEnd("ncclGroupEnd", false); r != ncclInvalidUsage {
		t.Fatalf("ncclGroupEnd without start = %d", r)
	}
	c := testComm(t, 0, 2)
	buf := memAlloc(t, 64)
	send := collArgs{fn: "ncclSend", kind: kSend, send: buf, count: 4, dtype: int32(plan.Int32), root: 1, comm: c.handle}
	groupStart()
	groupStart()
	// Queued, not run: success now, even though nothing can serve it.
	if r := collective(send); r != ncclSuccess {
		t.Fatalf("send in a group = %d: %s", r, getLastError())
	}
	if r := groupEnd("ncclGroupEnd", false); r != ncclSuccess {
		t.Fatalf("inner ncclGroupEnd = %d", r)
	}
	if g := threadGroup(); g == nil || g.depth != 1 || len(g.ops) != 1 {
		t.Fatalf("group after the inner end: %+v", g)
	}
	// Bad arguments fail at the call, inside a group too.
	bad := send
	bad.root = 5
	if r := collective(bad); r != ncclInvalidArgument {
		t.Errorf("bad peer in a group = %d", r)
	}
	// The outermost end runs the group: this communicator has no weft
	// communicator and forwarding is off, so it fails and says why.
	if r := groupEnd("ncclGroupEnd", false); r != ncclInvalidUsage || !strings.Contains(getLastError(), "WEFT_NCCL_FALLBACK=0") {
		t.Errorf("outer ncclGroupEnd = %d (%s), want ncclInvalidUsage naming WEFT_NCCL_FALLBACK=0", r, getLastError())
	}
	if g := threadGroup(); g != nil {
		t.Errorf("group state left after the outermost end: %+v", g)
	}
	// Simulated ends drop the queued calls.
	groupStart()
	collective(send)
	if r := groupEnd("ncclGroupSimulateEnd", true); r != ncclSuccess {
		t.Errorf("ncclGroupSimulateEnd = %d", r)
	}
	// A group's state is reused (groupPool), never its calls.
	for i := 0; i < 3; i++ {
		groupStart()
		if g := threadGroup(); g == nil || g.depth != 1 || len(g.ops) != 0 || len(g.inits) != 0 {
			t.Fatalf("new group %d: %+v, want depth 1 and nothing queued", i, g)
		}
		collective(send)
		collective(send)
		groupEnd("ncclGroupSimulateEnd", true)
	}
}

func TestFallbackSwitch(t *testing.T) {
	for v, want := range map[string][2]bool{"": {true, false}, "1": {true, false}, "0": {false, false}, "off": {false, false},
		"false": {false, false}, "all": {true, true}, " ALL ": {true, true}} {
		t.Setenv("WEFT_NCCL_FALLBACK", v)
		if got := [2]bool{fallbackEnabled(), forwardAll()}; got != want {
			t.Errorf("WEFT_NCCL_FALLBACK=%q: enabled, all = %v, want %v", v, got, want)
		}
	}
}

// TestForeignComm: only even handles go to NVIDIA's NCCL, and only while
// one is mapped into the process (none is on the machines CI runs on, so
// an even handle there is the caller's mistake, answered by weft).
func TestForeignComm(t *testing.T) {
	if h := newHandle(); h&1 == 0 || foreignComm(h) {
		t.Errorf("weft's handle %#x taken for NCCL's", h)
	}
	if foreignComm(0) {
		t.Error("NULL taken for NCCL's communicator")
	}
	if realMapped() {
		t.Skip("an NVIDIA NCCL is mapped into this test process")
	}
	if foreignComm(0x7f0012345670) {
		t.Error("an even handle taken for NCCL's with no NCCL in the process")
	}
}

// TestForwardAll: under WEFT_NCCL_FALLBACK=all a communicator is made
// without weft's (every call goes to the real NCCL), and says so.
func TestForwardAll(t *testing.T) {
	t.Setenv("WEFT_HAL", "host")
	t.Setenv("WEFT_NCCL_FALLBACK", "all")
	id, err := bootstrap.NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	c := newComm(0, 1, "host", 0, true, "test")
	c.init(id)
	t.Cleanup(func() {
		if c.boot != nil {
			c.boot.Close()
		}
	})
	if c.initErr != nil {
		t.Fatalf("init: %v", c.initErr)
	}
	if c.w != nil {
		t.Fatal("weft made its communicator under WEFT_NCCL_FALLBACK=all")
	}
	if c.noWeft == nil || !strings.Contains(c.noWeft.Error(), "WEFT_NCCL_FALLBACK=all") {
		t.Fatalf("noWeft = %v, want the reason naming WEFT_NCCL_FALLBACK=all", c.noWeft)
	}
}

func TestSortMembers(t *testing.T) {
	keys := []int{5, 1, 1, 0}
	members := []int{0, 1, 2, 3}
	sortMembers(members, keys)
	if diff := cmp.Diff([]int{3, 1, 2, 0}, members); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestRealLoaderRefusesItself(t *testing.T) {
	t.Setenv("WEFT_NCCL_LIB", "/nonexistent/libnccl.so.2")
	if got := realCandidates(); len(got) != 1 || got[0] != "/nonexistent/libnccl.so.2" {
		t.Errorf("candidates with WEFT_NCCL_LIB: %v", got)
	}
}

func testSecret(t *testing.T) bootstrap.Secret {
	t.Helper()
	s, err := bootstrap.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
