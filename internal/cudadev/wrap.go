package cudadev

import "github.com/weftccl/weft/internal/cuda"

// WrapStream returns a Stream for a CUstream (cudaStream_t) that the caller
// created on this device's primary context, without taking ownership:
// Close forgets the wrapper and leaves the CUDA stream alive. h == 0 is the
// legacy default stream; the special handles CU_STREAM_LEGACY (1) and
// CU_STREAM_PER_THREAD (2) are passed through as they are. Work that weft
// launches on the wrapper is ordinary stream work: it orders with the
// caller's other work on h and is captured when h is capturing.
func (d *Device) WrapStream(h uintptr) *Stream {
	return &Stream{dev: d, stream: cuda.Stream{Ctx: d.ctx, Handle: h}, foreign: true}
}
