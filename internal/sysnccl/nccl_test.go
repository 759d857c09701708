package sysnccl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/env"
	"github.com/weftccl/weft/internal/errkind"
)

func TestErrorWrapping(t *testing.T) {
	tests := []struct {
		code     Result
		sentinel error
		want     string
	}{
		{UnhandledCudaError, errkind.ErrDevice, "ncclAllReduce: ncclUnhandledCudaError (unhandled cuda error)"},
		{SystemError, errkind.ErrSystem, "ncclAllReduce: ncclSystemError (unhandled system error)"},
		{InternalError, errkind.ErrInternal, "ncclAllReduce: ncclInternalError (internal error)"},
		{InvalidArgument, errkind.ErrInvalidArgument, "ncclAllReduce: ncclInvalidArgument (invalid argument)"},
		{InvalidUsage, errkind.ErrInvalidUsage, "ncclAllReduce: ncclInvalidUsage (invalid usage)"},
		{RemoteError, errkind.ErrRemote, "ncclAllReduce: ncclRemoteError (remote process exited or there was a network error)"},
	}
	for _, tt := range tests {
		text := strings.TrimSuffix(strings.SplitN(tt.want, "(", 2)[1], ")")
		err := fmt.Errorf("bench: %w", &Error{Call: "ncclAllReduce", Code: tt.code, Text: text})
		if !errors.Is(err, tt.sentinel) {
			t.Errorf("%v does not wrap %v", err, tt.sentinel)
		}
		if got := errors.Unwrap(err).Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
		if got := ResultOf(err); got != tt.code {
			t.Errorf("ResultOf(%v) = %v, want the NCCL code %v", err, got, tt.code)
		}
	}
	if s := Result(42).String(); s != "ncclResult_t(42)" {
		t.Errorf("Result(42) = %q", s)
	}
}

// TestResultOf checks the mapping of weft's error kinds onto ncclResult_t
// codes that weft's drop-in returns and `weft` exits with, through wrapping
// and through hal's re-exported sentinels (the same values).
func TestResultOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Result
	}{
		{"nil", nil, Success},
		{"device", fmt.Errorf("launch: %w", errkind.ErrDevice), UnhandledCudaError},
		{"system", errkind.ErrSystem, SystemError},
		{"internal", errkind.ErrInternal, InternalError},
		{"invalid argument via hal", fmt.Errorf("count: %w", hal.ErrInvalidArgument), InvalidArgument},
		{"invalid usage", errkind.ErrInvalidUsage, InvalidUsage},
		{"not supported", fmt.Errorf("multicast: %w", errkind.ErrNotSupported), InvalidUsage},
		{"remote", errkind.ErrRemote, RemoteError},
		{"timeout naming a peer", fmt.Errorf("wait: %w", &hal.TimeoutError{Peer: 3, Channel: -1}), RemoteError},
		{"timeout without peer", &errkind.TimeoutError{Peer: -1, Channel: -1}, SystemError},
		{"bare timeout", errkind.ErrTimeout, SystemError},
		{"no kind", errors.New("something"), SystemError},
		{"first kind of a join", errors.Join(errkind.ErrInvalidArgument, errkind.ErrRemote), InvalidArgument},
	}
	for _, tt := range tests {
		if got := ResultOf(tt.err); got != tt.want {
			t.Errorf("%s: ResultOf(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestVersionAndTypes(t *testing.T) {
	if got := VersionString(22803); got != "2.28.3" {
		t.Errorf("VersionString(22803) = %q", got)
	}
	if got := VersionString(2708); got != "2.7.8" {
		t.Errorf("VersionString(2708) = %q", got)
	}
	sizes := map[DataType]int{Int8: 1, Int32: 4, Int64: 8, Float16: 2, Float32: 4, Bfloat16: 2, Float64: 8}
	for dt, n := range sizes {
		if dt.Size() != n {
			t.Errorf("%d.Size() = %d, want %d", dt, dt.Size(), n)
		}
	}
	if !errors.Is(&LoadError{}, errkind.ErrNotSupported) {
		t.Error("LoadError does not wrap ErrNotSupported")
	}
}

func TestMissingAndInProgress(t *testing.T) {
	err := fmt.Errorf("forward: %w", &MissingError{Call: "ncclAlltoAll", Library: "libnccl.so.2"})
	if !errors.Is(err, errkind.ErrNotSupported) {
		t.Errorf("%v does not wrap ErrNotSupported", err)
	}
	if want := "forward: ncclAlltoAll: not exported by libnccl.so.2 (an older NCCL)"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if !IsInProgress(fmt.Errorf("x: %w", &Error{Call: "ncclCommGetAsyncError (async)", Code: InProgress})) {
		t.Error("IsInProgress(ncclInProgress) = false")
	}
	if IsInProgress(&Error{Code: RemoteError}) || IsInProgress(err) {
		t.Error("IsInProgress true for another error")
	}
	if Has("ncclNoSuchCall") {
		t.Error(`Has("ncclNoSuchCall") = true`)
	}
	if Float8e4m3.Size() != 1 || Float8e5m2.Size() != 1 || DataType(12).Size() != 0 {
		t.Error("fp8 sizes")
	}
}

func requireOrSkip(t *testing.T, reason string) {
	t.Helper()
	if env.Required("nccl") || env.Required("nvlink") {
		t.Fatalf("WEFT_REQUIRE=%s but: %s", env.String("WEFT_REQUIRE"), reason)
	}
	t.Skip(reason)
}

type rankState struct {
	ctx    cuda.Context
	stream cuda.Stream
	comm   *Comm
}

// TestCollectivesSingleProcess runs NCCL over every visible GPU from one
// process (one rank per GPU, initialised in a group) and checks AllReduce,
// AllGather, Broadcast, ReduceScatter and a Send/Recv ring element by
// element.
func TestCollectivesSingleProcess(t *testing.T) {
	if err := cuda.Load(); err != nil {
		requireOrSkip(t, "no CUDA driver: "+err.Error())
	}
	if err := Load(); err != nil {
		requireOrSkip(t, err.Error())
	}
	v, err := Version()
	if err != nil {
		t.Fatal(err)
	}
	n, _ := cuda.DeviceCount()
	if n == 0 {
		requireOrSkip(t, "no CUDA devices")
	}
	n = min(n, 8)
	t.Logf("NCCL %s over %d GPUs", VersionString(v), n)
	id, err := GetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	ranks := make([]*rankState, n)
	for r := range ranks {
		d, _ := cuda.DeviceGet(r)
		ctx, err := d.PrimaryCtxRetain()
		if err != nil {
			t.Fatal(err)
		}
		defer d.PrimaryCtxRelease()
		s, err := ctx.StreamCreate(cuda.StreamNonBlocking)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Destroy()
		ranks[r] = &rankState{ctx: ctx, stream: s}
	}
	if err := GroupStart(); err != nil {
		t.Fatal(err)
	}
	for r, st := range ranks {
		if st.comm, err = CommInitRank(uintptr(st.ctx), n, id, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := GroupEnd(); err != nil {
		t.Fatal(err)
	}
	for _, st := range ranks {
		defer st.comm.Destroy()
		if err := st.comm.AsyncError(); err != nil {
			t.Fatal(err)
		}
	}

	const count = 1 << 16
	alloc := func(st *rankState, bytes int) cuda.DevicePtr {
		p, err := st.ctx.MemAlloc(int64(bytes))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.ctx.MemFree(p) })
		return p
	}
	f32 := func(vals func(i int) float32, k int) []byte {
		b := make([]byte, 4*k)
		for i := 0; i < k; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(vals(i)))
		}
		return b
	}
	run := func(name string, issue func(r int, st *rankState) error) {
		t.Helper()
		if err := GroupStart(); err != nil {
			t.Fatal(err)
		}
		for r, st := range ranks {
			if err := issue(r, st); err != nil {
				t.Fatalf("%s rank %d: %v", name, r, err)
			}
		}
		if err := GroupEnd(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, st := range ranks {
			if err := st.stream.Synchronize(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	check := func(name string, st *rankState, p cuda.DevicePtr, k int, want func(i int) float32) {
		t.Helper()
		b := make([]byte, 4*k)
		if err := st.ctx.MemcpyDtoH(b, p); err != nil {
			t.Fatal(err)
		}
		wrong := 0
		for i := 0; i < k; i++ {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])); got != want(i) {
				if wrong == 0 {
					t.Errorf("%s: element %d = %v, want %v", name, i, got, want(i))
				}
				wrong++
			}
		}
		if wrong > 0 {
			t.Errorf("%s: %d wrong elements", name, wrong)
		}
	}
	input := func(r, i int) float32 { return float32((r + 1) * (i%7 + 1)) }

	send := make([]cuda.DevicePtr, n)
	recv := make([]cuda.DevicePtr, n)
	for r, st := range ranks {
		send[r] = alloc(st, 4*count*n)
		recv[r] = alloc(st, 4*count*n)
		if err := st.ctx.MemcpyHtoD(send[r], f32(func(i int) float32 { return input(r, i) }, count*n)); err != nil {
			t.Fatal(err)
		}
	}
	tri := float32(n * (n + 1) / 2)

	run("AllReduce", func(r int, st *rankState) error {
		return st.comm.AllReduce(uint64(send[r]), uint64(recv[r]), count, Float32, Sum, st.stream.Handle)
	})
	for r, st := range ranks {
		check(fmt.Sprintf("AllReduce rank %d", r), st, recv[r], count, func(i int) float32 { return tri * float32(i%7+1) })
	}
	run("AllGather", func(r int, st *rankState) error {
		return st.comm.AllGather(uint64(send[r]), uint64(recv[r]), count, Float32, st.stream.Handle)
	})
	for r, st := range ranks {
		check(fmt.Sprintf("AllGather rank %d", r), st, recv[r], count*n, func(i int) float32 { return input(i/count, i%count) })
	}
	run("ReduceScatter", func(r int, st *rankState) error {
		return st.comm.ReduceScatter(uint64(send[r]), uint64(recv[r]), count, Float32, Sum, st.stream.Handle)
	})
	for r, st := range ranks {
		check(fmt.Sprintf("ReduceScatter rank %d", r), st, recv[r], count, func(i int) float32 { return tri * float32((r*count+i)%7+1) })
	}
	root := n - 1
	run("Broadcast", func(r int, st *rankState) error {
		return st.comm.Broadcast(uint64(send[r]), uint64(recv[r]), count, Float32, root, st.stream.Handle)
	})
	for r, st := range ranks {
		check(fmt.Sprintf("Broadcast rank %d", r), st, recv[r], count, func(i int) float32 { return input(root, i) })
	}
	if n >= 2 {
		run("SendRecv ring", func(r int, st *rankState) error {
			if err := st.comm.Send(uint64(send[r]), count, Float32, (r+1)%n, st.stream.Handle); err != nil {
				return err
			}
			return st.comm.Recv(uint64(recv[r]), count, Float32, (r+n-1)%n, st.stream.Handle)
		})
		for r, st := range ranks {
			prev := (r + n - 1) % n
			check(fmt.Sprintf("Recv rank %d", r), st, recv[r], count, func(i int) float32 { return input(prev, i) })
		}
	}
	run("Reduce", func(r int, st *rankState) error {
		return st.comm.Reduce(uint64(send[r]), uint64(recv[r]), count, Float32, Sum, root, st.stream.Handle)
	})
	check("Reduce root", ranks[root], recv[root], count, func(i int) float32 { return tri * float32(i%7+1) })
	t.Logf("ncclAlltoAll exported: %v", Has("ncclAlltoAll"))
	run("AlltoAll", func(r int, st *rankState) error {
		return st.comm.AlltoAll(uint64(send[r]), uint64(recv[r]), count, Float32, st.stream.Handle)
	})
	for r, st := range ranks {
		// Block i of rank r's output is block r of rank i's input.
		check(fmt.Sprintf("AlltoAll rank %d", r), st, recv[r], count*n, func(i int) float32 { return input(i/count, r*count+i%count) })
	}
	if Has("ncclRedOpCreatePreMulSum") {
		ops := make([]RedOp, n)
		for r, st := range ranks {
			if ops[r], err = st.comm.RedOpCreatePreMulSum(uint64(math.Float32bits(2)), Float32, ScalarHostImmediate); err != nil {
				t.Fatal(err)
			}
		}
		run("AllReduce PreMulSum ×2", func(r int, st *rankState) error {
			return st.comm.AllReduce(uint64(send[r]), uint64(recv[r]), count, Float32, ops[r], st.stream.Handle)
		})
		for r, st := range ranks {
			check(fmt.Sprintf("PreMulSum rank %d", r), st, recv[r], count, func(i int) float32 { return 2 * tri * float32(i%7+1) })
			if err := st.comm.RedOpDestroy(ops[r]); err != nil {
				t.Error(err)
			}
		}
	}
	// A bad call is an error naming the call, wrapping the HAL sentinel.
	err = ranks[0].comm.AllReduce(uint64(send[0]), uint64(recv[0]), count, DataType(99), Sum, ranks[0].stream.Handle)
	if !errors.Is(err, errkind.ErrInvalidArgument) || !strings.Contains(err.Error(), "ncclAllReduce") {
		t.Errorf("AllReduce with data type 99 = %v, want ncclInvalidArgument", err)
	}
}
