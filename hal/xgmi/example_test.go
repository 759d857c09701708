package xgmi_test

import (
	"encoding/binary"
	"fmt"
	"log"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/xgmi"
)

// A kernel that includes the backend's device header, compiled with hipRTC
// for the GPU's offload target at run time and launched with its one
// struct parameter.
func Example() {
	if a, _ := hal.Probe(xgmi.Name); !a.Available {
		fmt.Println("xgmi unavailable:", a.Reason)
		return
	}
	dev, err := xgmi.Open(hal.Config{Ordinal: 0})
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()

	mod, err := dev.Compile(hal.KernelSource{
		Name: "ready.hip",
		Source: `#include "weft_hal.h"
struct Params { weft_u64* flag; };
extern "C" __global__ void ready(Params p) { weft::hal::st_release_sys(p.flag, 1); }`,
		Headers: map[string]string{xgmi.DeviceHeaderName: dev.DeviceHeader()},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer mod.Close()
	ready, err := mod.Function("ready")
	if err != nil {
		log.Fatal(err)
	}

	flag, err := dev.AllocHost(8) // pinned, mapped into the GPU, coherent
	if err != nil {
		log.Fatal(err)
	}
	defer flag.Free()
	s, err := dev.NewStream()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	params := binary.LittleEndian.AppendUint64(nil, flag.Addr())
	if err := ready.Launch(s, 1, 64, 0, params); err != nil { // one wavefront
		log.Fatal(err)
	}
	if err := s.Synchronize(time.Now().Add(5 * time.Second)); err != nil {
		log.Fatal(err)
	}
	fmt.Println("flag:", binary.LittleEndian.Uint64(flag.Host()))
}
