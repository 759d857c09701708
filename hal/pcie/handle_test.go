package pcie

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/cudadev"
)

func samplePortHandle(ipc bool) *portHandle {
	h := &portHandle{pid: 4242, job: cudadev.HostHash("job:j1"), host: cudadev.HostHash("boot/ipc:[1]"),
		uuid: cuda.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, ordinal: 3, addr: 0x7f0000001000, size: 1 << 20}
	if ipc {
		h.flags = flagIPC
		h.ipc = make([]byte, cudadev.HandleSize)
		for i := range h.ipc {
			h.ipc[i] = byte(i * 5)
		}
	}
	return h
}

func TestPortHandleRoundTrip(t *testing.T) {
	for _, ipc := range []bool{false, true} {
		h := samplePortHandle(ipc)
		b := h.encode()
		if len(b) != PortHandleSize || PortHandleSize != 208 || string(b[:8]) != "WEFTPCP1" {
			t.Fatalf("encoded %d bytes, magic %q", len(b), b[:8])
		}
		got, err := decodePortHandle(b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(h, got, cmp.AllowUnexported(portHandle{})); diff != "" {
			t.Errorf("ipc=%v: decode(encode(h)) differs (-want +got):\n%s", ipc, diff)
		}
	}
}

func TestPortHandleRejects(t *testing.T) {
	good := samplePortHandle(true).encode()
	plain := samplePortHandle(false).encode()
	mod := func(base []byte, f func(b []byte)) []byte {
		b := append([]byte(nil), base...)
		f(b)
		return b
	}
	le := binary.LittleEndian
	tests := []struct {
		name string
		b    []byte
		text string
	}{
		{"empty", nil, "pcie port handle is 0 bytes, want 208"},
		{"short", good[:100], "is 100 bytes"},
		{"nvlink handle", make([]byte, cudadev.HandleSize), "is 136 bytes"},
		{"other magic", mod(good, func(b []byte) { copy(b, "WEFTNVL1") }), `not a pcie port handle (magic "WEFTNVL1"`},
		{"version", mod(good, func(b []byte) { le.PutUint16(b[8:], 7) }), "format version 7"},
		{"flags", mod(good, func(b []byte) { le.PutUint16(b[10:], 6) }), "unknown flags"},
		{"reserved", mod(good, func(b []byte) { b[52] = 1 }), "unknown flags"},
		{"zero size", mod(good, func(b []byte) { le.PutUint64(b[64:], 0) }), "names 0 bytes"},
		{"null address", mod(good, func(b []byte) { le.PutUint64(b[56:], 0) }), "at 0x0"},
		{"wraps", mod(good, func(b []byte) { le.PutUint64(b[56:], ^uint64(0)-10) }), "names 1048576 bytes"},
		{"stray IPC part", mod(plain, func(b []byte) { b[100] = 1 }), "carries one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodePortHandle(tt.b)
			if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.text) {
				t.Errorf("decode = %v, want ErrInvalidArgument containing %q", err, tt.text)
			}
		})
	}
}

func FuzzDecodePortHandle(f *testing.F) {
	f.Add([]byte(samplePortHandle(true).encode()))
	f.Add([]byte(samplePortHandle(false).encode()))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodePortHandle(b)
		if err != nil {
			if !errors.Is(err, hal.ErrInvalidArgument) {
				t.Fatalf("error %v does not wrap ErrInvalidArgument", err)
			}
			return
		}
		if h.size == 0 || h.addr+h.size < h.addr {
			t.Fatalf("accepted %+v", h)
		}
		if string(h.encode()) != string(b) {
			t.Fatal("re-encoding differs")
		}
	})
}

// fakeDevice is a Device with an identity and no GPU: Link, ImportPort of
// host-staged buffers and validPort work on it.
func fakeDevice(p2p bool) *Device {
	ep := hal.Endpoint{Backend: Name, Hostname: "node1", HostID: "boot-a/ipc:[1]", Ordinal: 0, UUID: "GPU-01020304-0506-0708-090a-0b0c0d0e0f10", PID: 10}
	d := &Device{Device: cudadev.Fake(ep), p2p: p2p, job: cudadev.HostHash("job:j1")}
	empty := []portRange{}
	d.ports.Store(&empty)
	return d
}

func TestLinkWithoutGPU(t *testing.T) {
	d := fakeDevice(true)
	ep := d.Endpoint()
	tests := []struct {
		name   string
		p2p    bool
		force  bool
		peer   hal.Endpoint
		caps   hal.Capability
		reason string
	}{
		{"other backend", true, false, hal.Endpoint{Backend: "nvlink", HostID: ep.HostID}, 0, `peer uses backend "nvlink", not "pcie"`},
		{"other host", true, false, hal.Endpoint{Backend: Name, Hostname: "node2", HostID: "boot-b/ipc:[1]", UUID: "GPU-bb"}, 0, "different hosts (node1 and node2)"},
		{"same GPU", true, false, hal.Endpoint{Backend: Name, Hostname: "node1", HostID: ep.HostID, UUID: ep.UUID, PID: 11}, hal.CapMemoryMapped | hal.CapPortMapped, "same GPU"},
		{"same GPU, P2P off", false, false, hal.Endpoint{Backend: Name, Hostname: "node1", HostID: ep.HostID, UUID: ep.UUID, PID: 11}, hal.CapMemoryMapped | hal.CapPortMapped, "same GPU"},
		{"same GPU, forced staging", true, true, hal.Endpoint{Backend: Name, Hostname: "node1", HostID: ep.HostID, UUID: ep.UUID}, hal.CapPortMapped, "host-staged through shared memory: forced by a test"},
		{"GPU invisible here", true, false, hal.Endpoint{Backend: Name, Hostname: "node1", HostID: ep.HostID, UUID: "GPU-cc"}, hal.CapPortMapped, "host-staged through shared memory: peer GPU GPU-cc is not visible"},
		{"P2P off", false, false, hal.Endpoint{Backend: Name, Hostname: "node1", HostID: ep.HostID, UUID: "GPU-cc"}, hal.CapPortMapped, "peer access turned off (WEFT_PCIE_P2P=0)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d.p2p = tt.p2p
			forceStaged = tt.force
			defer func() { forceStaged = false }()
			l := d.Link(tt.peer)
			if l.Caps != tt.caps || !strings.Contains(l.Reason, tt.reason) {
				t.Errorf("Link = %+v, want caps %v and a reason containing %q", l, tt.caps, tt.reason)
			}
		})
	}
	if _, err := d.NewEngine(hal.Endpoint{Backend: "host"}); !errors.Is(err, hal.ErrNotSupported) {
		t.Errorf("NewEngine(host peer) = %v, want ErrNotSupported", err)
	}
}

func TestImportPortWithoutGPU(t *testing.T) {
	d := fakeDevice(false)
	ep := d.Endpoint()
	peer := samplePortHandle(true)
	peer.host = cudadev.HostHash(ep.HostID)
	peer.uuid = cuda.UUID{0xaa} // another GPU, host-staged with P2P off
	b, err := d.ImportPort(peer.encode())
	if err != nil {
		t.Fatal(err)
	}
	if b.Addr() != peer.addr || b.Size() != int64(peer.size) || b.Host() != nil {
		t.Errorf("host-staged import %#x+%d host %v, want the exporter's %#x+%d and no host view", b.Addr(), b.Size(), b.Host(), peer.addr, peer.size)
	}
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	if err := b.Free(); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("second Free = %v", err)
	}
	other := *peer
	other.job = cudadev.HostHash("job:j2")
	if _, err := d.ImportPort(other.encode()); !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "another job") {
		t.Errorf("ImportPort(other job) = %v", err)
	}
	other = *peer
	other.host = 7
	if _, err := d.ImportPort(other.encode()); !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "another host") {
		t.Errorf("ImportPort(other host) = %v", err)
	}
	if _, err := d.ImportPort(peer.encode()[:50]); !errors.Is(err, hal.ErrInvalidArgument) {
		t.Errorf("ImportPort(short) = %v", err)
	}
}

func TestValidPort(t *testing.T) {
	d := fakeDevice(true)
	d.addPort(portRange{0x1000, 0x100})
	d.addPort(portRange{0x8000, 8})
	for _, c := range []struct {
		addr uint64
		n    int64
		ok   bool
	}{
		{0x1000, 0x100, true}, {0x10f8, 8, true}, {0x10f9, 8, false}, {0xff8, 16, false}, {0x8000, 8, true},
		{0x8000, 9, false}, {0x2000, 1, false}, {0x1000, -1, false}, {0x1100, 0, true}, {^uint64(0), 8, false},
	} {
		if got := d.validPort(c.addr, c.n); got != c.ok {
			t.Errorf("validPort(%#x, %d) = %v, want %v", c.addr, c.n, got, c.ok)
		}
	}
}
