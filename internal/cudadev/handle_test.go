package cudadev

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
)

func sampleHandle() handle {
	h := handle{
		kind:      kindCUDAIPC,
		pid:       4242,
		hostHash:  HostHash("boot/ipc:[1]"),
		uuid:      cuda.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		allocBase: 0x7f0000000000,
		allocSize: 1 << 21,
		offset:    4096,
		size:      1 << 20,
	}
	for i := range h.ipc {
		h.ipc[i] = byte(i * 3)
	}
	return h
}

func TestHandleRoundTrip(t *testing.T) {
	h := sampleHandle()
	b := h.encode()
	if len(b) != HandleSize {
		t.Fatalf("encoded %d bytes, want %d", len(b), HandleSize)
	}
	if string(b[:8]) != "WEFTNVL1" {
		t.Errorf("magic = %q", b[:8])
	}
	got, err := decodeHandle(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(h, *got, cmp.AllowUnexported(handle{})); diff != "" {
		t.Errorf("decode(encode(h)) differs (-want +got):\n%s", diff)
	}
}

func TestHandleRejects(t *testing.T) {
	good := sampleHandle().encode()
	mod := func(f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), good...))
	}
	tests := []struct {
		name    string
		b       []byte
		errText string
	}{
		{"empty", nil, "CUDA IPC handle is 0 bytes, want 136"},
		{"short", good[:64], "CUDA IPC handle is 64 bytes, want 136"},
		{"long", append(append([]byte(nil), good...), 0), "CUDA IPC handle is 137 bytes, want 136"},
		{"host backend handle", mod(func(b []byte) []byte { copy(b, "WEFTHOST"); return b }), `not a CUDA IPC handle (magic "WEFTHOST"`},
		{"version 2", mod(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[8:], 2); return b }), "format version 2, this build reads version 1"},
		{"unknown kind", mod(func(b []byte) []byte { binary.LittleEndian.PutUint16(b[10:], 9); return b }), "unknown kind 9"},
		{"zero size", mod(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[64:], 0); return b }), "inconsistent"},
		{"past allocation", mod(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[56:], 1<<21-10); return b }), "inconsistent"},
		{"offset overflow", mod(func(b []byte) []byte { binary.LittleEndian.PutUint64(b[56:], ^uint64(0)); return b }), "inconsistent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeHandle(tt.b)
			if !errors.Is(err, hal.ErrInvalidArgument) {
				t.Fatalf("decode = %v, want ErrInvalidArgument", err)
			}
			if !strings.Contains(err.Error(), tt.errText) {
				t.Errorf("error %q does not contain %q", err, tt.errText)
			}
		})
	}
}

func FuzzDecodeHandle(f *testing.F) {
	f.Add([]byte(sampleHandle().encode()))
	f.Add([]byte("WEFTNVL1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHandle(b)
		if err != nil {
			if !errors.Is(err, hal.ErrInvalidArgument) {
				t.Fatalf("error %v does not wrap ErrInvalidArgument", err)
			}
			return
		}
		if h.size == 0 || h.offset+h.size > h.allocSize {
			t.Fatalf("accepted inconsistent handle %+v", h)
		}
		if got := h.encode(); string(got) != string(b) {
			t.Fatalf("re-encoding differs")
		}
	})
}

func TestPeerWithoutGPU(t *testing.T) {
	d := Fake(hal.Endpoint{Backend: "nvlink", Hostname: "node1", HostID: "boot-a/ipc:[1]", Ordinal: 0, UUID: "GPU-aaaa", PID: 10})
	tests := []struct {
		name string
		peer hal.Endpoint
		want PeerLink
	}{
		{"other backend", hal.Endpoint{Backend: "host", HostID: d.ep.HostID}, PeerLink{Unreachable: `peer uses backend "host", not "nvlink"`}},
		{"other host", hal.Endpoint{Backend: "nvlink", Hostname: "node2", HostID: "boot-b/ipc:[1]", UUID: "GPU-bbbb"}, PeerLink{Unreachable: "different hosts (node1 and node2)"}},
		{"other container", hal.Endpoint{Backend: "nvlink", Hostname: "node1", HostID: "boot-a/ipc:[2]", UUID: "GPU-bbbb"},
			PeerLink{Unreachable: "different hosts (same hostname, different boot id or IPC namespace)"}},
		{"same GPU", hal.Endpoint{Backend: "nvlink", Hostname: "node1", HostID: d.ep.HostID, UUID: "GPU-aaaa", PID: 11},
			PeerLink{SameGPU: true, Visible: true, PeerAccess: true, Reason: "same GPU"}},
		{"invisible GPU", hal.Endpoint{Backend: "nvlink", Hostname: "node1", HostID: d.ep.HostID, UUID: "GPU-cccc"},
			PeerLink{Reason: "peer GPU GPU-cccc is not visible to this process (CUDA_VISIBLE_DEVICES differs between ranks?)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, d.Peer(tt.peer)); diff != "" {
				t.Errorf("Peer (-want +got):\n%s", diff)
			}
		})
	}
	if got := d.String(); got != "nvlink GPU 0 (rank 0)" {
		t.Errorf("String() = %q", got)
	}
}

func TestProbeReasons(t *testing.T) {
	dl := &cuda.LoadError{Library: "libcuda.so.1", Detail: "libcuda.so.1: cannot open shared object file: No such file or directory", Hint: "no NVIDIA driver"}
	if got, want := driverReason(dl), "no NVIDIA driver: libcuda.so.1: cannot open shared object file: No such file or directory"; got != want {
		t.Errorf("driverReason(dlopen) = %q, want %q", got, want)
	}
	nodev := &cuda.LoadError{Library: "libcuda.so.1", Detail: "libcuda.so.1", Hint: "no CUDA devices", Err: cuda.ResultError("cuInit", cuda.ErrorNoDevice)}
	if got := driverReason(nodev); got != "no CUDA devices" {
		t.Errorf("driverReason(no device) = %q", got)
	}
	nv := &cuda.LoadError{Library: "libnvrtc.so.13", Detail: "libnvrtc.so: cannot open shared object file: No such file or directory",
		Hint: "NVRTC not found (tried libnvrtc.so.13, libnvrtc.so; set WEFT_NVRTC_LIB to its path)"}
	want := "NVRTC not found: libnvrtc.so: cannot open shared object file: No such file or directory (tried libnvrtc.so.13, libnvrtc.so; set WEFT_NVRTC_LIB to its path); NVRTC compiles the kernels that run plans"
	if got := nvrtcReason(nv); got != want {
		t.Errorf("nvrtcReason = %q\nwant %q", got, want)
	}
}
