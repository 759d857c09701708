// fakertc.c: a fake hipRTC (libhiprtc.so) for the tests of internal/hip and
// hal/xgmi, built and loaded like fakehip.c. "Compiling" checks the program
// the way a compiler would fail on it: an --offload-arch option is
// required (HIPRTC_ERROR_INVALID_OPTION otherwise); every #include "name"
// must be one of the headers given to hiprtcCreateProgram, braces must
// balance, and the source must define an extern "C" __global__ kernel
// (HIPRTC_ERROR_COMPILATION with a log otherwise). The code object is text
// that fakehip.c's hipModuleLoadData reads: "FAKEHSACO\n", then the target
// ("arch=…"), every option ("opt=…") and every kernel name ("kernel=…"),
// one per line. Each compilation appends "compile name=… opts=…" to the
// file FAKEHIP_LOG names; FAKEHIP_FAIL injects failures as in fakehip.c.

#define _GNU_SOURCE
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../weft_hip.h"

#define WEFT_DECLARE(name, ret, params) ret name params;
WEFT_HIPRTC_FUNCS(WEFT_DECLARE)

static int fake_fail(const char* call) {
  const char* env = getenv("FAKEHIP_FAIL");
  if (env == NULL) return 0;
  size_t n = strlen(call);
  for (const char* p = env; *p;) {
    const char* end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len >= n && strncmp(p, call, n) == 0 && (len == n || p[n] == '=')) return len == n ? 11 : atoi(p + n + 1);
    if (!end) break;
    p = end + 1;
  }
  return 0;
}

#define FAIL(call)                         \
  {                                        \
    int injected = fake_fail(call);        \
    if (injected) return injected;         \
  }

struct _hiprtcProgram {
  char* src;
  char* name;
  int nheaders;
  char** headers;
  char** includes;
  char* log;
  char* code;
  size_t codeSize;
};

hiprtcResult hiprtcVersion(int* major, int* minor) {
  FAIL("hiprtcVersion");
  *major = 6;
  *minor = 3;
  return 0;
}

const char* hiprtcGetErrorString(hiprtcResult r) {
  static __thread char buf[64];
  snprintf(buf, sizeof buf, "fake hipRTC error %d", r);
  return buf;
}

hiprtcResult hiprtcCreateProgram(hiprtcProgram* prog, const char* src, const char* name, int n, const char** headers,
                                 const char** includes) {
  FAIL("hiprtcCreateProgram");
  if (prog == NULL || src == NULL || n < 0) return 3;
  struct _hiprtcProgram* p = calloc(1, sizeof *p);
  p->src = strdup(src);
  p->name = strdup(name ? name : "default_program");
  p->nheaders = n;
  p->headers = calloc(n + 1, sizeof(char*));
  p->includes = calloc(n + 1, sizeof(char*));
  for (int i = 0; i < n; i++) {
    p->headers[i] = strdup(headers[i]);
    p->includes[i] = strdup(includes[i]);
  }
  *prog = p;
  return 0;
}

static void append(char** buf, size_t* len, size_t* cap, const char* s) {
  size_t n = strlen(s);
  if (*len + n + 1 > *cap) {
    *cap = 2 * (*len + n + 1);
    *buf = realloc(*buf, *cap);
  }
  memcpy(*buf + *len, s, n + 1);
  *len += n;
}

static int has_header(struct _hiprtcProgram* p, const char* name, size_t len) {
  for (int i = 0; i < p->nheaders; i++)
    if (strlen(p->includes[i]) == len && strncmp(p->includes[i], name, len) == 0) return 1;
  return 0;
}

hiprtcResult hiprtcCompileProgram(hiprtcProgram p, int n, const char** opts) {
  FAIL("hiprtcCompileProgram");
  const char* arch = NULL;
  for (int i = 0; i < n; i++)
    if (strncmp(opts[i], "--offload-arch=", 15) == 0) arch = opts[i] + 15;
  if (arch == NULL || *arch == 0) return 5;
  char* out = NULL;
  size_t len = 0, cap = 0;
  char line[512];
  append(&out, &len, &cap, "FAKEHSACO\n");
  snprintf(line, sizeof line, "arch=%s\n", arch);
  append(&out, &len, &cap, line);
  for (int i = 0; i < n; i++) {
    snprintf(line, sizeof line, "opt=%s\n", opts[i]);
    append(&out, &len, &cap, line);
  }
  int depth = 0, kernels = 0;
  char err[512] = "";
  for (const char* s = p->src; *s; s++) {
    if (*s == '{') depth++;
    if (*s == '}' && --depth < 0) snprintf(err, sizeof err, "%s: error: extraneous closing brace", p->name);
    if (strncmp(s, "#include \"", 10) == 0) {
      const char* name = s + 10;
      size_t l = strcspn(name, "\"\n");
      if (!has_header(p, name, l)) snprintf(err, sizeof err, "%s: fatal error: '%.*s' file not found", p->name, (int)l, name);
    }
    if (strncmp(s, "#error", 6) == 0) snprintf(err, sizeof err, "%s: error: %.*s", p->name, (int)strcspn(s, "\n"), s);
    static const char kw[] = "extern \"C\" __global__ void ";
    if (strncmp(s, kw, sizeof kw - 1) == 0) {
      const char* k = s + sizeof kw - 1;
      if (strncmp(k, "__launch_bounds__(", 18) == 0) k = strchr(k, ')') + 1;
      while (*k == ' ') k++;
      size_t l = 0;
      while (isalnum((unsigned char)k[l]) || k[l] == '_') l++;
      snprintf(line, sizeof line, "kernel=%.*s\n", (int)l, k);
      append(&out, &len, &cap, line);
      kernels++;
    }
  }
  if (depth != 0 && !err[0]) snprintf(err, sizeof err, "%s: error: expected '}'", p->name);
  if (kernels == 0 && !err[0]) snprintf(err, sizeof err, "%s: error: no extern \"C\" __global__ kernel", p->name);
  const char* logPath = getenv("FAKEHIP_LOG");
  if (logPath && *logPath) {
    FILE* f = fopen(logPath, "a");
    if (f) {
      fprintf(f, "compile name=%s opts=", p->name);
      for (int i = 0; i < n; i++) fprintf(f, "%s%s", i ? "|" : "", opts[i]);
      fputc('\n', f);
      fclose(f);
    }
  }
  if (err[0]) {
    free(out);
    p->log = strdup(err);
    return 6;
  }
  snprintf(line, sizeof line, "fake hipRTC: %d kernel(s) for %s", kernels, arch);
  p->log = strdup(line);
  p->code = out;
  p->codeSize = len + 1;  // with the NUL
  return 0;
}

hiprtcResult hiprtcGetProgramLogSize(hiprtcProgram p, size_t* n) {
  FAIL("hiprtcGetProgramLogSize");
  *n = p->log ? strlen(p->log) + 1 : 1;
  return 0;
}

hiprtcResult hiprtcGetProgramLog(hiprtcProgram p, char* log) {
  FAIL("hiprtcGetProgramLog");
  strcpy(log, p->log ? p->log : "");
  return 0;
}

hiprtcResult hiprtcGetCodeSize(hiprtcProgram p, size_t* n) {
  FAIL("hiprtcGetCodeSize");
  if (p->code == NULL) return 4;
  *n = p->codeSize;
  return 0;
}

hiprtcResult hiprtcGetCode(hiprtcProgram p, char* code) {
  FAIL("hiprtcGetCode");
  if (p->code == NULL) return 4;
  memcpy(code, p->code, p->codeSize);
  return 0;
}

hiprtcResult hiprtcDestroyProgram(hiprtcProgram* prog) {
  FAIL("hiprtcDestroyProgram");
  struct _hiprtcProgram* p = *prog;
  for (int i = 0; i < p->nheaders; i++) {
    free(p->headers[i]);
    free(p->includes[i]);
  }
  free(p->headers);
  free(p->includes);
  free(p->src);
  free(p->name);
  free(p->log);
  free(p->code);
  free(p);
  *prog = NULL;
  return 0;
}
