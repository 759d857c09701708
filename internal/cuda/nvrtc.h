// nvrtc.h: the NVRTC trampolines of nvrtc.c, called from nvrtc_cgo.go.
#pragma once

#include "weft_cuda.h"

int weft_nvrtc_load(const char* path);
const char* weft_nvrtc_load_error(void);
nvrtcResult weft_nvrtcVersion(int* major, int* minor);
const char* weft_nvrtcGetErrorString(nvrtcResult r);
nvrtcResult weft_nvrtc_compile(const char* src, const char* name, int numHeaders, const char* const* headers,
                               const char* const* includeNames, int numOptions, const char* const* options,
                               char** cubin, size_t* cubinSize, char** log, size_t* logSize, int* stage);
