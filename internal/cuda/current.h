// current.h: the calling thread's current context (current.c).
#pragma once

#include "weft_cuda.h"

int weft_current_load(const char* path);
CUresult weft_current_device(int* hasCtx, int* device, void** ctx);
