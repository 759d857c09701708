// Command goempty is a Go c-shared library that exports one function and
// does nothing else: preloaded into a PyTorch job (LD_PRELOAD) it puts the
// Go runtime in the process without weft, so that a step-time difference
// can be split between the runtime's presence and weft's code
// (scripts/gpu-fsdp.sh, run nccl-golib). Build:
//
//	go build -buildmode=c-shared -o .gpu/libgoempty.so ./examples/torch/goempty
package main

import "C"

//export weftGoEmpty
func weftGoEmpty() C.int { return 1 }

func main() {}
