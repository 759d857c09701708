package channels

import (
	_ "embed"
	"fmt"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

//go:embed device/stream_reduce.cu
var streamReduceSource string

// StreamReduceKernelName and StreamCopyKernelName are the entry points of
// the StreamReduce kernel and of the StreamCopy kernel.
const (
	StreamReduceKernelName = "weft_stream_reduce"
	StreamCopyKernelName   = "weft_stream_copy"
)

// StreamReduceKernel compiles the kernel that computes hal.StreamReduce on
// dev for elements of type t and base operator op (Sum, Prod, Max or Min):
// device/stream_reduce.cu over the channel library's element math
// (weft_reduce.h), with the backend's device header. It returns the module,
// which the caller closes once no queued operation names the kernel, and
// the function to put in hal.StreamOp.Kernel. A device that compiles no
// kernels (hal/host, which computes StreamReduce itself) gets nil, nil,
// nil. Errors: hal.ErrInvalidArgument for a type or operator the kernel
// does not compute; the compiler's errors otherwise.
func StreamReduceKernel(dev hal.Device, t plan.DataType, op plan.RedOp) (hal.Module, hal.Function, error) {
	if !t.Valid() || !op.Valid() || op != op.Base() {
		return nil, nil, fmt.Errorf("stream reduce kernel for %v %v: a known type and Sum, Prod, Max or Min: %w", t, op, hal.ErrInvalidArgument)
	}
	kc, ok := dev.(hal.KernelCompiler)
	if !ok {
		return nil, nil, nil
	}
	mm, ok := dev.(hal.MemoryMapped)
	if !ok {
		return nil, nil, fmt.Errorf("stream reduce kernel: backend %s has no device header (hal.MemoryMapped): %w", dev.Info().Backend, hal.ErrNotSupported)
	}
	headers := DeviceLibrary()
	headers["weft_hal.h"] = mm.DeviceHeader()
	mod, err := kc.Compile(hal.KernelSource{
		Name:    fmt.Sprintf("stream-reduce-%v-%v", t, op),
		Source:  streamReduceSource,
		Headers: headers,
		Options: []string{fmt.Sprintf("-DWEFT_DT=%d", int(t)), fmt.Sprintf("-DWEFT_OP=%d", int(op))},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("stream reduce kernel for %v %v: %w", t, op, err)
	}
	fn, err := mod.Function(StreamReduceKernelName)
	if err != nil {
		mod.Close()
		return nil, nil, fmt.Errorf("stream reduce kernel for %v %v: %w", t, op, err)
	}
	return mod, fn, nil
}

// StreamCopyKernel returns the kernel of a hal.StreamCopy done on SMs
// (hal.StreamOp.Kernel of a copy) from a module StreamReduceKernel
// compiled: every such module holds it. A nil module (a device that
// compiles no kernels) gives nil.
func StreamCopyKernel(mod hal.Module) (hal.Function, error) {
	if mod == nil {
		return nil, nil
	}
	fn, err := mod.Function(StreamCopyKernelName)
	if err != nil {
		return nil, fmt.Errorf("stream copy kernel: %w", err)
	}
	return fn, nil
}
