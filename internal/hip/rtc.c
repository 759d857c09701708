//go:build cgo

// rtc.c: hipRTC loaded with dlopen. weft_rtc_compile does a whole
// compilation (create, compile, log, code object, destroy) in one call.

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft_hip.h"
#include "rtc.h"

struct weft_rtc_table {
#define WEFT_SLOT(name, ret, params) ret(*name) params;
  WEFT_HIPRTC_FUNCS(WEFT_SLOT)
#undef WEFT_SLOT
};

static struct weft_rtc_table R;
static int weft_rtc_loaded;
static char weft_rtc_err[1024];

const char* weft_rtc_load_error(void) { return weft_rtc_err; }

// weft_rtc_load opens path and resolves the hipRTC functions. On failure
// the previous table (if any) stays in use and weft_rtc_load_error says
// why.
int weft_rtc_load(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char* e = dlerror();
    snprintf(weft_rtc_err, sizeof weft_rtc_err, "%s", e ? e : path);
    return WEFT_LOAD_DLOPEN;
  }
  struct weft_rtc_table t;
  memset(&t, 0, sizeof t);
#define WEFT_RESOLVE(name, ret, params)                                                     \
  *(void**)&t.name = dlsym(lib, #name);                                                     \
  if (t.name == NULL) {                                                                     \
    snprintf(weft_rtc_err, sizeof weft_rtc_err, "%s: symbol %s not found", path, #name);    \
    dlclose(lib);                                                                           \
    return WEFT_LOAD_SYMBOL;                                                                \
  }
  WEFT_HIPRTC_FUNCS(WEFT_RESOLVE)
#undef WEFT_RESOLVE
  R = t;
  weft_rtc_loaded = 1;
  return WEFT_LOAD_OK;
}

hiprtcResult weft_hiprtcVersion(int* major, int* minor) { return R.hiprtcVersion(major, minor); }

const char* weft_hiprtcGetErrorString(hiprtcResult r) { return weft_rtc_loaded ? R.hiprtcGetErrorString(r) : NULL; }

// weft_rtc_compile compiles src. On return *log (malloc'd, may be NULL)
// holds the program log and, on success, *code (malloc'd) the code object.
// *stage names the failing step: 1 create, 2 compile, 3 code.
hiprtcResult weft_rtc_compile(const char* src, const char* name, int numHeaders, const char** headers,
                              const char** includeNames, int numOptions, const char** options, char** code,
                              size_t* codeSize, char** log, size_t* logSize, int* stage) {
  hiprtcProgram prog = NULL;
  *code = NULL;
  *codeSize = 0;
  *log = NULL;
  *logSize = 0;
  *stage = 1;
  hiprtcResult r = R.hiprtcCreateProgram(&prog, src, name, numHeaders, headers, includeNames);
  if (r != 0) return r;
  *stage = 2;
  hiprtcResult cr = R.hiprtcCompileProgram(prog, numOptions, options);
  size_t n = 0;
  if (R.hiprtcGetProgramLogSize(prog, &n) == 0 && n > 1) {
    char* l = malloc(n);
    if (l != NULL && R.hiprtcGetProgramLog(prog, l) == 0) {
      *log = l;
      *logSize = strnlen(l, n);
    } else {
      free(l);
    }
  }
  if (cr != 0) {
    R.hiprtcDestroyProgram(&prog);
    return cr;
  }
  *stage = 3;
  r = R.hiprtcGetCodeSize(prog, &n);
  if (r == 0) {
    char* b = malloc(n ? n : 1);
    if (b == NULL) {
      r = 1;  // HIPRTC_ERROR_OUT_OF_MEMORY
    } else if ((r = R.hiprtcGetCode(prog, b)) == 0) {
      *code = b;
      *codeSize = n;
    } else {
      free(b);
    }
  }
  R.hiprtcDestroyProgram(&prog);
  return r;
}
