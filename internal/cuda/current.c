//go:build cgo

// current.c: the calling thread's current CUDA context and its device, for
// libraries that follow the CUDA runtime's "current device" convention (the
// NCCL C ABI in nccl/: a program calls cudaSetDevice, then ncclCommInitRank).
// The entry points are resolved here, from the driver library that
// weft_cuda_load opened, so that driver.c keeps its one table.

#include <dlfcn.h>
#include <stddef.h>

#include "weft_cuda.h"
#include "current.h"

typedef CUresult (*weft_gpa_fn_current)(const char*, void**, int, cuuint64_t, int*);

static CUresult (*p_cuCtxGetCurrent)(CUcontext*);
static CUresult (*p_cuCtxGetDevice)(CUdevice*);

int weft_current_load(const char* path) {
  if (p_cuCtxGetCurrent != NULL && p_cuCtxGetDevice != NULL) return 0;
  // The library is open already (cuda.Load); RTLD_NOLOAD only takes a reference.
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (lib == NULL) return 1;
  weft_gpa_fn_current gpa = (weft_gpa_fn_current)dlsym(lib, "cuGetProcAddress_v2");
  if (gpa == NULL) return 2;
  int status = 0;
  if (gpa("cuCtxGetCurrent", (void**)&p_cuCtxGetCurrent, 12000, 0, &status) != 0) return 3;
  if (gpa("cuCtxGetDevice", (void**)&p_cuCtxGetDevice, 12000, 0, &status) != 0) return 3;
  return 0;
}

CUresult weft_current_device(int* hasCtx, int* device, void** ctx) {
  CUcontext c = NULL;
  *hasCtx = 0;
  *device = -1;
  *ctx = NULL;
  CUresult r = p_cuCtxGetCurrent(&c);
  if (r != 0 || c == NULL) return r;
  CUdevice d = 0;
  r = p_cuCtxGetDevice(&d);
  if (r != 0) return r;
  *hasCtx = 1;
  *device = (int)d;
  *ctx = (void*)c;
  return 0;
}
