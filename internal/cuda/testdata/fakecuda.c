// fakecuda.c: a stand-in libcuda.so.1 for TestFakeDriverMulticast and
// TestFakeDriverStreamOps, built by the test with the host C compiler.
// cuGetProcAddress_v2 hands out a stub that returns CUDA_SUCCESS for every
// entry point, except the multicast ones: those exist only when
// FAKECUDA_MULTICAST=1 and only when asked for at exactly CUDA version 12010
// (12.1, where they first appeared), as weft must; and the stream
// operations and (under FAKECUDA_STREAMOPS) kernel launches, which print
// what they were asked to queue.
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;

static CUresult stub(void) { return 0; }

static CUresult memcpy_async(uint64_t dst, uint64_t src, size_t n, void* s) {
  printf("op memcpy stream=%p dst=%#llx src=%#llx bytes=%zu\n", s, (unsigned long long)dst, (unsigned long long)src, n);
  fflush(stdout);
  return 0;
}
static CUresult wait_value64(void* s, uint64_t addr, uint64_t v, unsigned int flags) {
  printf("op wait stream=%p addr=%#llx value=%llu flags=%u\n", s, (unsigned long long)addr, (unsigned long long)v, flags);
  fflush(stdout);
  return 0;
}
static CUresult write_value64(void* s, uint64_t addr, uint64_t v, unsigned int flags) {
  printf("op write stream=%p addr=%#llx value=%llu flags=%u\n", s, (unsigned long long)addr, (unsigned long long)v, flags);
  fflush(stdout);
  return 0;
}
// launch_kernel prints a launch whose one parameter is four 64-bit words
// (a StreamReduce kernel of weft_queue_ops).
static CUresult launch_kernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                              unsigned shared, void* s, void** params, void** extra) {
  (void)gy, (void)gz, (void)by, (void)bz, (void)extra;
  const uint64_t* p = params ? (const uint64_t*)params[0] : NULL;
  printf("op kernel stream=%p fn=%p grid=%u block=%u shared=%u params=%#llx,%#llx,%#llx,%llu\n", s, f, gx, bx, shared,
         p ? (unsigned long long)p[0] : 0ULL, p ? (unsigned long long)p[1] : 0ULL, p ? (unsigned long long)p[2] : 0ULL,
         p ? (unsigned long long)p[3] : 0ULL);
  fflush(stdout);
  return 0;
}
// CUstreamBatchMemOpParams: a union of 48 bytes; the wait and write
// members are {int operation; CUdeviceptr address; uint64 value64;
// unsigned flags; CUdeviceptr alias;}.
struct memop {
  int operation;
  uint64_t address;
  uint64_t value64;
  unsigned int flags;
  uint64_t alias;
};
static CUresult batch_mem_op(void* s, unsigned int count, const unsigned char* params, unsigned int flags) {
  printf("op batch stream=%p count=%u flags=%u:", s, count, flags);
  for (unsigned int i = 0; i < count; i++) {
    const struct memop* m = (const struct memop*)(params + 48 * i);
    printf(" [%s addr=%#llx value=%llu flags=%u]", m->operation == 4 ? "wait" : m->operation == 5 ? "write" : "?",
           (unsigned long long)m->address, (unsigned long long)m->value64, m->flags);
  }
  printf("\n");
  fflush(stdout);
  return 0;
}

// cuMulticastGetGranularity: 2 MiB minimum, 512 MiB recommended.
static CUresult granularity(size_t* g, const void* prop, int option) {
  (void)prop;
  *g = option == 1 ? (size_t)512 << 20 : (size_t)2 << 20;
  return 0;
}

CUresult cuGetProcAddress_v2(const char* name, void** pfn, int version, unsigned long long flags, int* status) {
  (void)flags;
  if (strncmp(name, "cuMulticast", 11) == 0) {
    const char* on = getenv("FAKECUDA_MULTICAST");
    if (on == NULL || strcmp(on, "1") != 0 || version != 12010) {
      *pfn = NULL;
      if (status) *status = 1;  // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
      return 500;               // CUDA_ERROR_NOT_FOUND
    }
    *pfn = strcmp(name, "cuMulticastGetGranularity") == 0 ? (void*)granularity : (void*)stub;
    if (status) *status = 0;
    return 0;
  }
  if (strcmp(name, "cuMemcpyAsync") == 0) {
    *pfn = (void*)memcpy_async;
  } else if (strcmp(name, "cuStreamWaitValue64") == 0) {
    *pfn = (void*)wait_value64;
  } else if (strcmp(name, "cuStreamWriteValue64") == 0) {
    *pfn = (void*)write_value64;
  } else if (strcmp(name, "cuLaunchKernel") == 0 && getenv("FAKECUDA_STREAMOPS") != NULL) {
    *pfn = (void*)launch_kernel;
  } else if (strcmp(name, "cuStreamBatchMemOp") == 0) {
    *pfn = (void*)batch_mem_op;
  } else {
    *pfn = (void*)stub;
  }
  if (status) *status = 0;
  return 0;
}
