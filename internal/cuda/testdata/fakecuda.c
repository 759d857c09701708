// fakecuda.c: a stand-in libcuda.so.1 for TestFakeDriverMulticast, built by
// the test with the host C compiler. cuGetProcAddress_v2 hands out a stub
// that returns CUDA_SUCCESS for every entry point, except the multicast ones:
// those exist only when FAKECUDA_MULTICAST=1 and only when asked for at
// exactly CUDA version 12010 (12.1, where they first appeared), as weft must.
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;

static CUresult stub(void) { return 0; }

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
  *pfn = (void*)stub;
  if (status) *status = 0;
  return 0;
}
