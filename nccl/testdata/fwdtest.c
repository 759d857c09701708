// fwdtest.c: a client of TestCProgram's "forward" case. It links the
// stand-in NVIDIA library (testdata/fakenccl.c, libnccl.so.2) and runs with
// weft preloaded and WEFT_NCCL_FALLBACK=all, as PyTorch runs with
// LD_PRELOAD=libweft_nccl.so: every call goes through weft to the stand-in,
// whose collectives call its own ncclCommGetAsyncError, which weft's
// preloaded entry point receives first. One rank on hal/host.
#include <stdio.h>
#include <string.h>

#include "nccl.h"

int fakeSelfCalls(void);  // the stand-in's count of its own ncclCommGetAsyncError calls

int main(void) {
  ncclUniqueId id;
  ncclComm_t comm;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r == ncclSuccess) r = ncclCommInitRank(&comm, 1, id, 0);
  if (r != ncclSuccess) {
    fprintf(stderr, "fwdtest: init = %d: %s\n", r, ncclGetLastError(NULL));
    return 1;
  }
  float *in = NULL, *out = NULL;
  if (ncclMemAlloc((void**)&in, 64 * sizeof(float)) != ncclSuccess ||
      ncclMemAlloc((void**)&out, 64 * sizeof(float)) != ncclSuccess) {
    fprintf(stderr, "fwdtest: ncclMemAlloc: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  for (int i = 0; i < 64; i++) in[i] = (float)i, out[i] = -1;
  int failed = 0;
  r = ncclAllReduce(in, out, 64, ncclFloat32, ncclSum, comm, NULL);
  if (r != ncclSuccess) {
    fprintf(stderr, "fwdtest: forwarded ncclAllReduce = %d: %s\n", r, ncclGetLastError(comm));
    failed++;
  } else if (memcmp(in, out, sizeof(float) * 64) != 0) {
    fprintf(stderr, "fwdtest: forwarded ncclAllReduce left wrong data\n");
    failed++;
  }
  r = ncclAllGather(in, out, 64, ncclFloat32, comm, NULL);
  if (r != ncclSuccess) {
    fprintf(stderr, "fwdtest: forwarded ncclAllGather = %d: %s\n", r, ncclGetLastError(comm));
    failed++;
  }
  ncclResult_t async = ncclInternalError;
  r = ncclCommGetAsyncError(comm, &async);
  if (r != ncclSuccess || async != ncclSuccess) {
    fprintf(stderr, "fwdtest: ncclCommGetAsyncError = %d, async %d\n", r, async);
    failed++;
  }
  ncclMemFree(in);
  ncclMemFree(out);
  if (ncclCommDestroy(comm) != ncclSuccess) failed++;
  if (fakeSelfCalls() < 2) {
    fprintf(stderr, "fwdtest: %d of the stand-in's own ncclCommGetAsyncError calls reached it, want one per collective\n", fakeSelfCalls());
    failed++;
  }
  printf("fwdtest: %d failed, %d calls handed back to NCCL\n", failed, fakeSelfCalls());
  return failed != 0;
}
