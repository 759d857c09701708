//go:build cgo

// hip.c: the HIP runtime (libamdhip64) loaded with dlopen. weft_hip_load
// resolves every entry point into a table, which replaces the previous one
// only when all required entry points were found. The HIP runtime keeps a
// current device per OS thread, and Go moves goroutines between threads:
// every trampoline that needs a device takes its ordinal and makes it
// current in the same call.

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft_hip.h"
#include "hip.h"

struct weft_hip_table {
#define WEFT_SLOT(name, ret, params) ret(*name) params;
  WEFT_HIP_FUNCS(WEFT_SLOT)
#undef WEFT_SLOT
#define WEFT_ALT_SLOT(slot, ret, params, ...) ret(*slot) params;
  WEFT_HIP_ALT_FUNCS(WEFT_ALT_SLOT)
#undef WEFT_ALT_SLOT
};

static struct weft_hip_table T;
static int weft_hip_loaded;
static char weft_hip_err[1024];

const char* weft_hip_load_error(void) { return weft_hip_err; }

static void* weft_first_symbol(void* lib, const char* const* names) {
  for (; *names != NULL; names++) {
    void* p = dlsym(lib, *names);
    if (p != NULL) return p;
  }
  return NULL;
}

// weft_hip_load opens path and resolves the runtime's entry points. On
// failure the previous table (if any) stays in use and weft_hip_load_error
// says why.
int weft_hip_load(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char* e = dlerror();
    snprintf(weft_hip_err, sizeof weft_hip_err, "%s", e ? e : path);
    return WEFT_LOAD_DLOPEN;
  }
  struct weft_hip_table t;
  memset(&t, 0, sizeof t);
#define WEFT_RESOLVE(name, ret, params)                                                     \
  *(void**)&t.name = dlsym(lib, #name);                                                     \
  if (t.name == NULL) {                                                                     \
    snprintf(weft_hip_err, sizeof weft_hip_err, "%s: symbol %s not found", path, #name);    \
    dlclose(lib);                                                                           \
    return WEFT_LOAD_SYMBOL;                                                                \
  }
  WEFT_HIP_FUNCS(WEFT_RESOLVE)
#undef WEFT_RESOLVE
#define WEFT_RESOLVE_ALT(slot, ret, params, ...)                                            \
  {                                                                                         \
    static const char* const names[] = {__VA_ARGS__, NULL};                                 \
    *(void**)&t.slot = weft_first_symbol(lib, names);                                       \
  }
  WEFT_HIP_ALT_FUNCS(WEFT_RESOLVE_ALT)
#undef WEFT_RESOLVE_ALT
  if (t.hostAlloc == NULL) {
    snprintf(weft_hip_err, sizeof weft_hip_err, "%s: symbol hipHostMalloc (or hipHostAlloc) not found", path);
    dlclose(lib);
    return WEFT_LOAD_SYMBOL;
  }
  T = t;  // the old library stays open: objects made with it may still exist
  weft_hip_loaded = 1;
  return WEFT_LOAD_OK;
}

const char* weft_hip_error_name(hipError_t r) { return weft_hip_loaded ? T.hipGetErrorName(r) : NULL; }
const char* weft_hip_error_string(hipError_t r) { return weft_hip_loaded ? T.hipGetErrorString(r) : NULL; }

#define SETDEV(dev)                                                    \
  if ((dev) >= 0) {                                                    \
    hipError_t setdev_r = T.hipSetDevice(dev);                         \
    if (setdev_r != 0) return setdev_r | WEFT_HIP_SETDEVICE_FAILED;    \
  }

#define PTR(a) ((void*)(uintptr_t)(a))

hipError_t weft_hipInit(void) { return T.hipInit(0); }
hipError_t weft_hipDriverGetVersion(int* v) { return T.hipDriverGetVersion(v); }
hipError_t weft_hipRuntimeGetVersion(int* v) { return T.hipRuntimeGetVersion(v); }
hipError_t weft_hipGetDeviceCount(int* n) { return T.hipGetDeviceCount(n); }
hipError_t weft_hipDeviceGetName(char* name, int len, int dev) { return T.hipDeviceGetName(name, len, dev); }
hipError_t weft_hipDeviceGetAttribute(int* v, int attr, int dev) { return T.hipDeviceGetAttribute(v, attr, dev); }
hipError_t weft_hipDeviceGetPCIBusId(char* id, int len, int dev) { return T.hipDeviceGetPCIBusId(id, len, dev); }
hipError_t weft_hipDeviceTotalMem(size_t* bytes, int dev) { return T.hipDeviceTotalMem(bytes, dev); }

// weft_hipDeviceGetUuid sets *have to 0 (and succeeds) when the runtime
// lacks hipDeviceGetUuid.
hipError_t weft_hipDeviceGetUuid(void* uuid, int dev, int* have) {
  *have = T.uuid != NULL;
  return T.uuid ? T.uuid((hipUUID*)uuid, dev) : 0;
}

// weft_find_gfx returns the first NUL-terminated string of buf, after the
// 256-byte device name, that starts with "gfx" and follows a NUL byte.
static const char* weft_find_gfx(const char* buf, size_t n) {
  for (size_t i = 256; i + 4 < n; i++) {
    if (buf[i - 1] == 0 && memcmp(buf + i, "gfx", 3) == 0 && memchr(buf + i, 0, n - i) != NULL) return buf + i;
  }
  return NULL;
}

// weft_hip_arch_name copies the device's gcnArchName into name. *call is the
// properties call made: 0 hipGetDevicePropertiesR0600, 1
// hipGetDeviceProperties, 2 none (neither is exported: returns
// hipErrorNotSupported). A name that cannot be found leaves name empty.
hipError_t weft_hip_arch_name(int dev, char* name, int len, int* call) {
  name[0] = 0;
  *call = T.props0600 ? 0 : T.props ? 1 : 2;
  if (*call == 2) return 801;  // hipErrorNotSupported
  char* buf = calloc(1, WEFT_HIP_PROPS_BYTES);
  if (buf == NULL) return 2;  // hipErrorOutOfMemory
  hipError_t r = *call == 0 ? T.props0600(buf, dev) : T.props(buf, dev);
  if (r == 0) {
    const char* s = buf + WEFT_HIP_R0600_ARCH_OFFSET;
    if (*call != 0 || memcmp(s, "gfx", 3) != 0) s = weft_find_gfx(buf, WEFT_HIP_PROPS_BYTES);
    if (s != NULL) snprintf(name, len, "%.*s", WEFT_HIP_ARCH_NAME_BYTES - 1, s);
  }
  free(buf);
  return r;
}

hipError_t weft_hipDeviceCanAccessPeer(int* can, int dev, int peer) { return T.hipDeviceCanAccessPeer(can, dev, peer); }

hipError_t weft_hipDeviceEnablePeerAccess(int dev, int peer) {
  SETDEV(dev);
  return T.hipDeviceEnablePeerAccess(peer, 0);
}

hipError_t weft_hipExtMallocWithFlags(int dev, uint64_t* p, size_t n, unsigned int flags) {
  SETDEV(dev);
  void* q = NULL;
  hipError_t r = T.hipExtMallocWithFlags(&q, n, flags);
  *p = (uint64_t)(uintptr_t)q;
  return r;
}

hipError_t weft_hipFree(int dev, uint64_t p) {
  SETDEV(dev);
  return T.hipFree(PTR(p));
}

hipError_t weft_hipHostMalloc(int dev, void** p, size_t n, unsigned int flags) {
  SETDEV(dev);
  return T.hostAlloc(p, n, flags);
}

hipError_t weft_hipHostGetDevicePointer(int dev, uint64_t* d, void* p) {
  SETDEV(dev);
  void* q = NULL;
  hipError_t r = T.hipHostGetDevicePointer(&q, p, 0);
  *d = (uint64_t)(uintptr_t)q;
  return r;
}

hipError_t weft_hipHostFree(int dev, void* p) {
  SETDEV(dev);
  return T.hipHostFree(p);
}

// weft_hip_memcpy_sync copies n bytes (direction inferred from the addresses)
// and waits for the null stream, on which hipMemcpy runs: after it, the
// data is visible to work launched on any stream. *call: 0 hipMemcpy, 1
// hipStreamSynchronize.
static hipError_t weft_hip_memcpy_sync(int dev, void* dst, const void* src, size_t n, int* call) {
  SETDEV(dev);
  *call = 0;
  hipError_t r = T.hipMemcpy(dst, src, n, 4 /* hipMemcpyDefault */);
  if (r != 0) return r;
  *call = 1;
  return T.hipStreamSynchronize(NULL);
}

hipError_t weft_hip_memcpy_htod(int dev, uint64_t dst, const void* src, size_t n, int* call) {
  return weft_hip_memcpy_sync(dev, PTR(dst), src, n, call);
}

hipError_t weft_hip_memcpy_dtoh(int dev, void* dst, uint64_t src, size_t n, int* call) {
  return weft_hip_memcpy_sync(dev, dst, PTR(src), n, call);
}

// weft_hip_memset_sync sets n bytes at dst to v and waits for the null stream.
// *call: 0 hipMemset, 1 hipStreamSynchronize.
hipError_t weft_hip_memset_sync(int dev, uint64_t dst, int v, size_t n, int* call) {
  SETDEV(dev);
  *call = 0;
  hipError_t r = T.hipMemset(PTR(dst), v, n);
  if (r != 0) return r;
  *call = 1;
  return T.hipStreamSynchronize(NULL);
}

hipError_t weft_hipMemGetAddressRange(int dev, uint64_t* base, size_t* size, uint64_t p) {
  SETDEV(dev);
  void* b = NULL;
  hipError_t r = T.hipMemGetAddressRange(&b, size, PTR(p));
  *base = (uint64_t)(uintptr_t)b;
  return r;
}

hipError_t weft_hipIpcGetMemHandle(int dev, void* handle, uint64_t p) {
  SETDEV(dev);
  return T.hipIpcGetMemHandle((hipIpcMemHandle_t*)handle, PTR(p));
}

hipError_t weft_hipIpcOpenMemHandle(int dev, uint64_t* p, const void* handle, unsigned int flags) {
  SETDEV(dev);
  hipIpcMemHandle_t h;
  memcpy(&h, handle, sizeof h);
  void* q = NULL;
  hipError_t r = T.hipIpcOpenMemHandle(&q, h, flags);
  *p = (uint64_t)(uintptr_t)q;
  return r;
}

hipError_t weft_hipIpcCloseMemHandle(int dev, uint64_t p) {
  SETDEV(dev);
  return T.hipIpcCloseMemHandle(PTR(p));
}

hipError_t weft_hipStreamCreateWithFlags(int dev, uintptr_t* s, unsigned int flags) {
  SETDEV(dev);
  hipStream_t q = NULL;
  hipError_t r = T.hipStreamCreateWithFlags(&q, flags);
  *s = (uintptr_t)q;
  return r;
}

hipError_t weft_hipStreamQuery(int dev, uintptr_t s) {
  SETDEV(dev);
  return T.hipStreamQuery((hipStream_t)s);
}

hipError_t weft_hipStreamDestroy(int dev, uintptr_t s) {
  SETDEV(dev);
  return T.hipStreamDestroy((hipStream_t)s);
}

hipError_t weft_hipMemcpyAsync(int dev, uint64_t dst, uint64_t src, size_t n, uintptr_t s) {
  SETDEV(dev);
  return T.hipMemcpyAsync(PTR(dst), PTR(src), n, 4 /* hipMemcpyDefault */, (hipStream_t)s);
}

// weft_hip_signal64 queues the two stream writes of a port-channel signal in
// one call: value0 at addr0 (skipped when addr0 is 0), then value1 at addr1.
hipError_t weft_hip_signal64(int dev, uintptr_t s, uint64_t addr0, uint64_t value0, uint64_t addr1, uint64_t value1) {
  SETDEV(dev);
  if (addr0 != 0) {
    hipError_t r = T.hipStreamWriteValue64((hipStream_t)s, PTR(addr0), value0, 0);
    if (r != 0) return r;
  }
  return T.hipStreamWriteValue64((hipStream_t)s, PTR(addr1), value1, 0);
}

hipError_t weft_hipEventCreateWithFlags(int dev, uintptr_t* e, unsigned int flags) {
  SETDEV(dev);
  hipEvent_t q = NULL;
  hipError_t r = T.hipEventCreateWithFlags(&q, flags);
  *e = (uintptr_t)q;
  return r;
}

hipError_t weft_hipEventRecord(int dev, uintptr_t e, uintptr_t s) {
  SETDEV(dev);
  return T.hipEventRecord((hipEvent_t)e, (hipStream_t)s);
}

hipError_t weft_hipEventQuery(int dev, uintptr_t e) {
  SETDEV(dev);
  return T.hipEventQuery((hipEvent_t)e);
}

hipError_t weft_hipEventElapsedTime(int dev, float* ms, uintptr_t start, uintptr_t end) {
  SETDEV(dev);
  return T.hipEventElapsedTime(ms, (hipEvent_t)start, (hipEvent_t)end);
}

hipError_t weft_hipEventDestroy(int dev, uintptr_t e) {
  SETDEV(dev);
  return T.hipEventDestroy((hipEvent_t)e);
}

// weft_hip_stream_after makes the work queued on s from now on wait for the
// work queued on prev so far (an event recorded on prev and waited for on
// s, then destroyed), unless either stream is capturing a graph. *ordered
// says whether it did.
hipError_t weft_hip_stream_after(int dev, uintptr_t s, uintptr_t prev, int* ordered) {
  SETDEV(dev);
  *ordered = 0;
  int status = 0;  // hipStreamCaptureStatusNone
  hipError_t r = T.hipStreamIsCapturing((hipStream_t)s, &status);
  if (r != 0 || status != 0) return r;
  r = T.hipStreamIsCapturing((hipStream_t)prev, &status);
  if (r != 0 || status != 0) return r;
  hipEvent_t e = NULL;
  r = T.hipEventCreateWithFlags(&e, 0x2 /* hipEventDisableTiming */);
  if (r != 0) return r;
  r = T.hipEventRecord(e, (hipStream_t)prev);
  if (r == 0) r = T.hipStreamWaitEvent((hipStream_t)s, e, 0);
  hipError_t d = T.hipEventDestroy(e);
  if (r == 0) r = d;
  if (r == 0) *ordered = 1;
  return r;
}

hipError_t weft_hipStreamBeginCapture(int dev, uintptr_t s, int mode) {
  SETDEV(dev);
  return T.hipStreamBeginCapture((hipStream_t)s, mode);
}

hipError_t weft_hipStreamEndCapture(int dev, uintptr_t s, uintptr_t* g) {
  SETDEV(dev);
  hipGraph_t q = NULL;
  hipError_t r = T.hipStreamEndCapture((hipStream_t)s, &q);
  *g = (uintptr_t)q;
  return r;
}

hipError_t weft_hipGraphInstantiate(int dev, uintptr_t* e, uintptr_t g) {
  SETDEV(dev);
  hipGraphExec_t q = NULL;
  hipError_t r = T.hipGraphInstantiate(&q, (hipGraph_t)g, NULL, NULL, 0);
  *e = (uintptr_t)q;
  return r;
}

hipError_t weft_hipGraphLaunch(int dev, uintptr_t e, uintptr_t s) {
  SETDEV(dev);
  return T.hipGraphLaunch((hipGraphExec_t)e, (hipStream_t)s);
}

hipError_t weft_hipGraphExecDestroy(int dev, uintptr_t e) {
  SETDEV(dev);
  return T.hipGraphExecDestroy((hipGraphExec_t)e);
}

hipError_t weft_hipGraphDestroy(int dev, uintptr_t g) {
  SETDEV(dev);
  return T.hipGraphDestroy((hipGraph_t)g);
}

hipError_t weft_hipModuleLoadData(int dev, uintptr_t* m, const void* image) {
  SETDEV(dev);
  hipModule_t q = NULL;
  hipError_t r = T.hipModuleLoadData(&q, image);
  *m = (uintptr_t)q;
  return r;
}

hipError_t weft_hipModuleGetFunction(int dev, uintptr_t* f, uintptr_t m, const char* name) {
  SETDEV(dev);
  hipFunction_t q = NULL;
  hipError_t r = T.hipModuleGetFunction(&q, (hipModule_t)m, name);
  *f = (uintptr_t)q;
  return r;
}

hipError_t weft_hipModuleUnload(int dev, uintptr_t m) {
  SETDEV(dev);
  return T.hipModuleUnload((hipModule_t)m);
}

hipError_t weft_hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(int dev, int* n, uintptr_t f, int threads, size_t shared) {
  SETDEV(dev);
  return T.hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(n, (hipFunction_t)f, threads, shared);
}

// weft_hipModuleLaunchKernel launches f with its arguments as one buffer
// of paramBytes bytes (the kernel's by-value struct), through the "extra"
// argument; the runtime copies the buffer before returning.
hipError_t weft_hipModuleLaunchKernel(int dev, uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz,
                                      unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                                      uintptr_t s, void* params, size_t paramBytes) {
  SETDEV(dev);
  size_t size = paramBytes;
  void* extra[] = {WEFT_HIP_LAUNCH_PARAM_BUFFER_POINTER, params, WEFT_HIP_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   WEFT_HIP_LAUNCH_PARAM_END};
  return T.hipModuleLaunchKernel((hipFunction_t)f, gx, gy, gz, bx, by, bz, shared, (hipStream_t)s, NULL,
                                 params != NULL ? extra : NULL);
}
