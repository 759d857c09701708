//go:build cgo

package amdsmi

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// The few AMD SMI entry points weft uses, declared here with the ABI of
// amdsmi.h so that no ROCm header is needed at build time. Handles are
// opaque pointers; amdsmi_status_t is an int-sized enum (0 = success).
typedef int st_t;
typedef void* h_t;
typedef struct {
	uint8_t coherent, atomics32, atomics64, dma, bidirectional;
} p2pcap_t;

typedef struct {
	void* lib;
	st_t (*init)(uint64_t);
	st_t (*shut_down)(void);
	st_t (*sockets)(uint32_t*, h_t*);
	st_t (*processors)(h_t, uint32_t*, h_t*);
	st_t (*bdf_id)(h_t, uint64_t*);
	st_t (*uuid)(h_t, unsigned int*, char*);
	st_t (*link_type)(h_t, h_t, uint64_t*, int*);
	st_t (*link_weight)(h_t, h_t, uint64_t*);
	st_t (*minmax_bw)(h_t, h_t, uint64_t*, uint64_t*);
	st_t (*p2p_accessible)(h_t, h_t, _Bool*);
	st_t (*p2p_status)(h_t, h_t, int*, p2pcap_t*);   // optional
} weft_amdsmi;

// weft_amdsmi_open loads path and resolves the entry points. On failure it
// returns NULL and copies dlerror() into err.
static weft_amdsmi* weft_amdsmi_open(const char* path, char* err, size_t errlen) {
	void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char* e = dlerror();
		strncpy(err, e ? e : "dlopen failed", errlen - 1);
		err[errlen - 1] = 0;
		return NULL;
	}
	weft_amdsmi* a = calloc(1, sizeof(*a));
	if (!a) { dlclose(lib); strncpy(err, "out of memory", errlen - 1); return NULL; }
	a->lib = lib;
#define SYM(field, name, required) \
	*(void**)(&a->field) = dlsym(lib, name); \
	if (required && !a->field) { snprintf(err, errlen, "%s: symbol %s not found", path, name); dlclose(lib); free(a); return NULL; }
	SYM(init, "amdsmi_init", 1)
	SYM(shut_down, "amdsmi_shut_down", 1)
	SYM(sockets, "amdsmi_get_socket_handles", 1)
	SYM(processors, "amdsmi_get_processor_handles", 1)
	SYM(bdf_id, "amdsmi_get_gpu_bdf_id", 1)
	SYM(uuid, "amdsmi_get_gpu_device_uuid", 0)
	SYM(link_type, "amdsmi_topo_get_link_type", 1)
	SYM(link_weight, "amdsmi_topo_get_link_weight", 0)
	SYM(minmax_bw, "amdsmi_get_minmax_bandwidth_between_processors", 0)
	SYM(p2p_accessible, "amdsmi_is_P2P_accessible", 0)
	SYM(p2p_status, "amdsmi_topo_get_p2p_status", 0)
#undef SYM
	return a;
}

static void weft_amdsmi_close(weft_amdsmi* a) { dlclose(a->lib); free(a); }

// AMDSMI_INIT_AMD_GPUS = 1 << 1.
static st_t w_init(weft_amdsmi* a) { return a->init(2); }
static st_t w_shut_down(weft_amdsmi* a) { return a->shut_down(); }

// w_processors lists every processor handle of every socket into out
// (capacity cap); *n receives the total count.
static st_t w_processors(weft_amdsmi* a, h_t* out, uint32_t cap, uint32_t* n) {
	uint32_t ns = 0;
	st_t r = a->sockets(&ns, NULL);
	if (r) return r;
	if (ns > 256) ns = 256;
	h_t socks[256];
	r = a->sockets(&ns, socks);
	if (r) return r;
	*n = 0;
	for (uint32_t s = 0; s < ns; s++) {
		uint32_t np = 0;
		r = a->processors(socks[s], &np, NULL);
		if (r) return r;
		if (*n + np > cap) np = cap - *n;
		r = a->processors(socks[s], &np, out + *n);
		if (r) return r;
		*n += np;
	}
	return 0;
}

static st_t w_bdf(weft_amdsmi* a, h_t h, uint64_t* id) { return a->bdf_id(h, id); }
static st_t w_uuid(weft_amdsmi* a, h_t h, char* buf, unsigned int len) {
	if (!a->uuid) return -1;
	return a->uuid(h, &len, buf);
}
static st_t w_link(weft_amdsmi* a, h_t s, h_t d, uint64_t* hops, int* type) { return a->link_type(s, d, hops, type); }
static st_t w_weight(weft_amdsmi* a, h_t s, h_t d, uint64_t* w) {
	if (!a->link_weight) return -1;
	return a->link_weight(s, d, w);
}
static st_t w_bw(weft_amdsmi* a, h_t s, h_t d, uint64_t* lo, uint64_t* hi) {
	if (!a->minmax_bw) return -1;
	return a->minmax_bw(s, d, lo, hi);
}
static st_t w_accessible(weft_amdsmi* a, h_t s, h_t d, int* ok) {
	if (!a->p2p_accessible) return -1;
	_Bool b = 0;
	st_t r = a->p2p_accessible(s, d, &b);
	*ok = b;
	return r;
}
static st_t w_p2p(weft_amdsmi* a, h_t s, h_t d, p2pcap_t* cap) {
	if (!a->p2p_status) return -1;
	int type = 0;
	memset(cap, 0xff, sizeof(*cap));
	return a->p2p_status(s, d, &type, cap);
}
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/topology/sysfs"
)

// DefaultLibraries are tried in order by Open: the unversioned name (found
// through ld.so.conf when ROCm is installed), the sonames of recent ROCm
// releases, then ROCm's default prefix.
var DefaultLibraries = []string{
	"libamd_smi.so",
	"libamd_smi.so.26",
	"libamd_smi.so.25",
	"libamd_smi.so.24",
	"/opt/rocm/lib/libamd_smi.so",
}

// Open returns the AMD SMI source that loads the first of
// DefaultLibraries found.
func Open() Source { return live{paths: DefaultLibraries} }

// OpenPath returns a source that loads exactly path.
func OpenPath(path string) Source { return live{paths: []string{path}} }

type live struct{ paths []string }

// maxProcessors bounds the handle array; 8 sockets × 8 partitions × 8
// GPUs is far beyond any machine that exists.
const maxProcessors = 512

func (l live) Snapshot() (Snapshot, error) {
	var a *C.weft_amdsmi
	var errs []string
	var loaded string
	for _, p := range l.paths {
		cp := C.CString(p)
		var buf [512]C.char
		a = C.weft_amdsmi_open(cp, &buf[0], C.size_t(len(buf)))
		C.free(unsafe.Pointer(cp))
		if a != nil {
			loaded = p
			break
		}
		errs = append(errs, C.GoString(&buf[0]))
	}
	if a == nil {
		missing := true
		for _, e := range errs {
			missing = missing && strings.Contains(e, "cannot open shared object file")
		}
		if missing {
			return Snapshot{}, fmt.Errorf("AMD SMI library not found (tried %s; is ROCm installed?): %w", strings.Join(l.paths, ", "), hal.ErrNotSupported)
		}
		return Snapshot{}, fmt.Errorf("AMD SMI library not loaded (%s): %w", strings.Join(errs, "; "), hal.ErrNotSupported)
	}
	defer C.weft_amdsmi_close(a)
	if r := C.w_init(a); r != 0 {
		return Snapshot{}, fmt.Errorf("amdsmi_init(AMD GPUs) in %s: status %d (amdgpu driver not loaded?): %w", loaded, int(r), hal.ErrNotSupported)
	}
	defer C.w_shut_down(a)

	handles := (*[maxProcessors]C.h_t)(C.calloc(maxProcessors, C.size_t(unsafe.Sizeof(C.h_t(nil)))))
	defer C.free(unsafe.Pointer(handles))
	var n C.uint32_t
	if r := C.w_processors(a, &handles[0], maxProcessors, &n); r != 0 {
		return Snapshot{}, fmt.Errorf("amdsmi_get_processor_handles: status %d: %w", int(r), hal.ErrDevice)
	}
	snap := Snapshot{Library: loaded}
	for i := 0; i < int(n); i++ {
		var id C.uint64_t
		if r := C.w_bdf(a, handles[i], &id); r != 0 {
			return Snapshot{}, fmt.Errorf("amdsmi_get_gpu_bdf_id(GPU %d): status %d: %w", i, int(r), hal.ErrDevice)
		}
		bdf, err := sysfs.ParseBDF(decodeBDF(uint64(id)))
		if err != nil {
			return Snapshot{}, fmt.Errorf("amdsmi_get_gpu_bdf_id(GPU %d) = %#x: %v: %w", i, uint64(id), err, hal.ErrDevice)
		}
		d := Device{Index: i, BusID: bdf}
		var ubuf [64]C.char
		if C.w_uuid(a, handles[i], &ubuf[0], C.uint(len(ubuf)-1)) == 0 {
			d.UUID = C.GoString(&ubuf[0])
		}
		snap.Devices = append(snap.Devices, d)
	}
	for i := 0; i < int(n); i++ {
		for j := i + 1; j < int(n); j++ {
			p, err := readPair(a, handles[i], handles[j])
			if err != nil {
				return Snapshot{}, fmt.Errorf("GPU %d and GPU %d: %w", i, j, err)
			}
			p.A, p.B = i, j
			snap.Pairs = append(snap.Pairs, p)
		}
	}
	return snap, nil
}

func readPair(a *C.weft_amdsmi, s, d C.h_t) (Pair, error) {
	var p Pair
	var hops C.uint64_t
	var typ C.int
	if r := C.w_link(a, s, d, &hops, &typ); r != 0 {
		return Pair{}, fmt.Errorf("amdsmi_topo_get_link_type: status %d: %w", int(r), hal.ErrDevice)
	}
	p.Type, p.Hops = LinkType(typ), int(min(uint64(hops), 1<<16))
	var w C.uint64_t
	if C.w_weight(a, s, d, &w) == 0 {
		p.Weight = int(min(uint64(w), 1<<30))
	}
	var lo, hi C.uint64_t
	if C.w_bw(a, s, d, &lo, &hi) == 0 {
		p.MinBandwidthMBps, p.MaxBandwidthMBps = int64(min(uint64(lo), 1<<40)), int64(min(uint64(hi), 1<<40))
	}
	var ok C.int
	if C.w_accessible(a, s, d, &ok) == 0 {
		p.Accessible = ok != 0
	}
	p.Coherent, p.Atomics32, p.Atomics64, p.DMA, p.Bidirectional = Unknown, Unknown, Unknown, Unknown, Unknown
	var c C.p2pcap_t
	if C.w_p2p(a, s, d, &c) == 0 {
		p.Coherent, p.Atomics32, p.Atomics64 = tristate(uint8(c.coherent)), tristate(uint8(c.atomics32)), tristate(uint8(c.atomics64))
		p.DMA, p.Bidirectional = tristate(uint8(c.dma)), tristate(uint8(c.bidirectional))
	}
	return p, nil
}
