//go:build cgo

package cuda

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

const cgoBuild = true

// TestStructLayouts compares the structs of weft_cuda.h with the layout
// cuda.h (CUDA 12.x and 13.0, LP64) gives them: the driver reads them by
// offset, so a wrong field would not fail to compile. testdata/check_cuda_h.c
// checks the same against the toolkit's own header on a host that has it.
func TestStructLayouts(t *testing.T) {
	want := map[string]structLayout{
		// typedef struct CUmemLocation_st { CUmemLocationType type; int id; }
		"CUmemLocation": {8, map[string]uintptr{"type": 0, "id": 4}},
		// CUmemAllocationProp_v1: type, requestedHandleTypes, location,
		// win32HandleMetaData (void*), allocFlags (8 bytes).
		"CUmemAllocationProp": {32, map[string]uintptr{"type": 0, "requestedHandleTypes": 4, "location": 8,
			"win32HandleMetaData": 16, "allocFlags": 24}},
		// CUmemAccessDesc_v1: location, flags.
		"CUmemAccessDesc": {12, map[string]uintptr{"location": 0, "flags": 8}},
		// CUmulticastObjectProp_v1 (CUDA 12.1+): unsigned int numDevices;
		// size_t size; unsigned long long handleTypes, flags.
		"CUmulticastObjectProp": {32, map[string]uintptr{"numDevices": 0, "size": 8, "handleTypes": 16, "flags": 24}},
		"CUipcMemHandle":        {64, map[string]uintptr{}},
		"CUuuid":                {16, map[string]uintptr{}},
	}
	if d := cmp.Diff(want, cLayouts()); d != "" {
		t.Errorf("struct layouts differ from cuda.h (-cuda.h +weft_cuda.h):\n%s", d)
	}
}
