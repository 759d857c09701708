//go:build cgo

package amdsmi

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/weftccl/weft/hal"
)

// fakeLib is a stand-in libamd_smi.so with two GPUs on one socket joined
// by one xGMI hop; it lacks amdsmi_topo_get_p2p_status, as AMD SMI before
// 6.2 does.
const fakeLib = `
#include <stdint.h>
#include <string.h>
typedef int st;
static int inited;
st amdsmi_init(uint64_t f) { if (f != 2) return 1; inited = 1; return 0; }
st amdsmi_shut_down(void) { inited = 0; return 0; }
st amdsmi_get_socket_handles(uint32_t* n, void** h) { if (!inited) return 32; if (h) h[0] = (void*)0x10; *n = 1; return 0; }
st amdsmi_get_processor_handles(void* s, uint32_t* n, void** h) {
	if (s != (void*)0x10) return 2;
	if (h) { h[0] = (void*)0x100; h[1] = (void*)0x101; }
	*n = 2; return 0;
}
st amdsmi_get_gpu_bdf_id(void* h, uint64_t* id) { *id = h == (void*)0x100 ? 0x0500 : 0x1500; return 0; }
st amdsmi_get_gpu_device_uuid(void* h, unsigned int* len, char* u) {
	strcpy(u, h == (void*)0x100 ? "uuid-a" : "uuid-b"); *len = 6; return 0;
}
st amdsmi_topo_get_link_type(void* a, void* b, uint64_t* hops, int* t) { *hops = 1; *t = 2; return 0; }
st amdsmi_topo_get_link_weight(void* a, void* b, uint64_t* w) { *w = 15; return 0; }
st amdsmi_get_minmax_bandwidth_between_processors(void* a, void* b, uint64_t* lo, uint64_t* hi) { *lo = 50000; *hi = 64000; return 0; }
st amdsmi_is_P2P_accessible(void* a, void* b, _Bool* ok) { *ok = 1; return 0; }
`

func TestFakeLibrary(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to build the fake libamd_smi.so")
	}
	dir := t.TempDir()
	src, lib := filepath.Join(dir, "fake.c"), filepath.Join(dir, "libamd_smi.so")
	os.WriteFile(src, []byte(fakeLib), 0o644)
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("build fake library: %v\n%s", err, out)
	}
	snap, err := OpenPath(lib).Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	want := Snapshot{Library: lib,
		Devices: []Device{{Index: 0, BusID: "0000:05:00.0", UUID: "uuid-a"}, {Index: 1, BusID: "0000:15:00.0", UUID: "uuid-b"}},
		Pairs: []Pair{{A: 0, B: 1, Type: LinkXGMI, Hops: 1, Weight: 15, MinBandwidthMBps: 50000, MaxBandwidthMBps: 64000,
			Accessible: true, Coherent: Unknown, Atomics32: Unknown, Atomics64: Unknown, DMA: Unknown, Bidirectional: Unknown}}}
	if diff := cmp.Diff(want, snap); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestMissingLibrary(t *testing.T) {
	_, err := OpenPath(filepath.Join(t.TempDir(), "libamd_smi.so")).Snapshot()
	if !errors.Is(err, hal.ErrNotSupported) {
		t.Fatalf("Snapshot = %v, want ErrNotSupported", err)
	}
}

func TestDecodeBDF(t *testing.T) {
	for id, want := range map[uint64]string{0x0500: "0000:05:00.0", 0x2_0000_c31f: "0002:c3:03.7", 0x1_0000_0000_0000: "00010000:00:00.0"} {
		if got := decodeBDF(id); got != want {
			t.Errorf("decodeBDF(%#x) = %q, want %q", id, got, want)
		}
	}
}
