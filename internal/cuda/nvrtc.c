//go:build cgo

// nvrtc.c: NVRTC loaded with dlopen. weft_nvrtc_compile does a whole
// compilation (create, compile, log, cubin, destroy) in one call.

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "weft_cuda.h"
#include "nvrtc.h"

static void* weft_nvrtc_lib;
static char weft_nvrtc_err[1024];

static nvrtcResult (*p_nvrtcVersion)(int*, int*);
static const char* (*p_nvrtcGetErrorString)(nvrtcResult);
static nvrtcResult (*p_nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                                           const char* const*);
static nvrtcResult (*p_nvrtcDestroyProgram)(nvrtcProgram*);
static nvrtcResult (*p_nvrtcCompileProgram)(nvrtcProgram, int, const char* const*);
static nvrtcResult (*p_nvrtcGetProgramLogSize)(nvrtcProgram, size_t*);
static nvrtcResult (*p_nvrtcGetProgramLog)(nvrtcProgram, char*);
static nvrtcResult (*p_nvrtcGetCUBINSize)(nvrtcProgram, size_t*);
static nvrtcResult (*p_nvrtcGetCUBIN)(nvrtcProgram, char*);

const char* weft_nvrtc_load_error(void) { return weft_nvrtc_err; }

// weft_nvrtc_load opens path and resolves the NVRTC functions. Returns 0 on
// success; on failure weft_nvrtc_load_error() says why.
int weft_nvrtc_load(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char* e = dlerror();
    snprintf(weft_nvrtc_err, sizeof weft_nvrtc_err, "%s", e ? e : path);
    return 1;
  }
#define SYM(name)                                                                        \
  *(void**)&p_##name = dlsym(lib, #name);                                                \
  if (p_##name == NULL) {                                                                \
    snprintf(weft_nvrtc_err, sizeof weft_nvrtc_err, "%s: symbol %s not found", path, #name); \
    dlclose(lib);                                                                        \
    return 2;                                                                            \
  }
  SYM(nvrtcVersion)
  SYM(nvrtcGetErrorString)
  SYM(nvrtcCreateProgram)
  SYM(nvrtcDestroyProgram)
  SYM(nvrtcCompileProgram)
  SYM(nvrtcGetProgramLogSize)
  SYM(nvrtcGetProgramLog)
  SYM(nvrtcGetCUBINSize)
  SYM(nvrtcGetCUBIN)
#undef SYM
  weft_nvrtc_lib = lib;
  return 0;
}

nvrtcResult weft_nvrtcVersion(int* major, int* minor) { return p_nvrtcVersion(major, minor); }

const char* weft_nvrtcGetErrorString(nvrtcResult r) { return p_nvrtcGetErrorString ? p_nvrtcGetErrorString(r) : NULL; }

// weft_nvrtc_compile compiles src. On return *log (malloc'd, may be NULL)
// holds the program log and, on success, *cubin (malloc'd) the binary.
// *stage names the failing step: 1 create, 2 compile, 3 cubin.
nvrtcResult weft_nvrtc_compile(const char* src, const char* name, int numHeaders, const char* const* headers,
                               const char* const* includeNames, int numOptions, const char* const* options,
                               char** cubin, size_t* cubinSize, char** log, size_t* logSize, int* stage) {
  nvrtcProgram prog = NULL;
  *cubin = NULL;
  *cubinSize = 0;
  *log = NULL;
  *logSize = 0;
  *stage = 1;
  nvrtcResult r = p_nvrtcCreateProgram(&prog, src, name, numHeaders, headers, includeNames);
  if (r != 0) return r;
  *stage = 2;
  nvrtcResult cr = p_nvrtcCompileProgram(prog, numOptions, options);
  size_t n = 0;
  if (p_nvrtcGetProgramLogSize(prog, &n) == 0 && n > 1) {
    char* l = malloc(n);
    if (l != NULL && p_nvrtcGetProgramLog(prog, l) == 0) {
      *log = l;
      *logSize = n - 1;  // without the terminating NUL
    } else {
      free(l);
    }
  }
  if (cr != 0) {
    p_nvrtcDestroyProgram(&prog);
    return cr;
  }
  *stage = 3;
  r = p_nvrtcGetCUBINSize(prog, &n);
  if (r == 0) {
    char* b = malloc(n ? n : 1);
    if (b == NULL) {
      r = 1;  // NVRTC_ERROR_OUT_OF_MEMORY
    } else if ((r = p_nvrtcGetCUBIN(prog, b)) == 0) {
      *cubin = b;
      *cubinSize = n;
    } else {
      free(b);
    }
  }
  p_nvrtcDestroyProgram(&prog);
  return r;
}
