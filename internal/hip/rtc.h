// rtc.h: the hipRTC trampolines of rtc.c, called from rtc_cgo.go.
#pragma once

#include "weft_hip.h"

int weft_rtc_load(const char* path);
const char* weft_rtc_load_error(void);
hiprtcResult weft_hiprtcVersion(int* major, int* minor);
const char* weft_hiprtcGetErrorString(hiprtcResult r);
hiprtcResult weft_rtc_compile(const char* src, const char* name, int numHeaders, const char** headers,
                              const char** includeNames, int numOptions, const char** options, char** code,
                              size_t* codeSize, char** log, size_t* logSize, int* stage);
