//go:build cgo

package cuda

/*
#include "weft_cuda.h"
*/
import "C"

import "unsafe"

// structLayout is the size and field offsets of a struct of weft_cuda.h as
// this build's C compiler lays it out.
type structLayout struct {
	Size    uintptr
	Offsets map[string]uintptr
}

// cLayouts returns the layouts of the structs weft_cuda.h declares for the
// driver, so that a test compares them with cuda.h's (the driver reads
// them by those offsets; a mistake would not fail to compile).
func cLayouts() map[string]structLayout {
	var loc C.CUmemLocation
	var prop C.CUmemAllocationProp
	var access C.CUmemAccessDesc
	var mc C.CUmulticastObjectProp
	return map[string]structLayout{
		"CUmemLocation": {unsafe.Sizeof(loc), map[string]uintptr{
			"type": unsafe.Offsetof(loc._type), "id": unsafe.Offsetof(loc.id)}},
		"CUmemAllocationProp": {unsafe.Sizeof(prop), map[string]uintptr{
			"type": unsafe.Offsetof(prop._type), "requestedHandleTypes": unsafe.Offsetof(prop.requestedHandleTypes),
			"location": unsafe.Offsetof(prop.location), "win32HandleMetaData": unsafe.Offsetof(prop.win32HandleMetaData),
			"allocFlags": unsafe.Offsetof(prop.allocFlags)}},
		"CUmemAccessDesc": {unsafe.Sizeof(access), map[string]uintptr{
			"location": unsafe.Offsetof(access.location), "flags": unsafe.Offsetof(access.flags)}},
		"CUmulticastObjectProp": {unsafe.Sizeof(mc), map[string]uintptr{
			"numDevices": unsafe.Offsetof(mc.numDevices), "size": unsafe.Offsetof(mc.size),
			"handleTypes": unsafe.Offsetof(mc.handleTypes), "flags": unsafe.Offsetof(mc.flags)}},
		"CUipcMemHandle": {unsafe.Sizeof(C.CUipcMemHandle{}), map[string]uintptr{}},
		"CUuuid":         {unsafe.Sizeof(C.CUuuid{}), map[string]uintptr{}},
	}
}
