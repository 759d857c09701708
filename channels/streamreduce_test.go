package channels_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	_ "github.com/weftccl/weft/hal/host"
	"github.com/weftccl/weft/hal/plan"
)

// TestStreamReduceKernelCompiles compiles device/stream_reduce.cu for every
// data type and base operator against the channel library and the NVIDIA
// HAL header, as TestGeneratedKernelsCompile does for plans: what NVRTC
// would refuse is found without a GPU.
func TestStreamReduceKernelCompiles(t *testing.T) {
	hdr, err := os.ReadFile(filepath.Join("..", "internal", "cudadev", "device", "weft_hal.h"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join("device", "stream_reduce.cu"))
	if err != nil {
		t.Fatal(err)
	}
	cc := kernelChecker(t)
	files := map[string]string{"prelude.h": devicePrelude + kernelPrelude, "weft_hal.h": string(hdr), "stream_reduce.cu": string(src)}
	for name, s := range channels.DeviceLibrary() {
		files[name] = s
	}
	var srcs []string
	for _, ty := range plan.DataTypes {
		for _, op := range []plan.RedOp{plan.Sum, plan.Prod, plan.Max, plan.Min} {
			name := fmt.Sprintf("r%d.cu", len(srcs))
			files[name] = fmt.Sprintf("#include \"prelude.h\"\n#define WEFT_DT %d\n#define WEFT_OP %d\n#include \"stream_reduce.cu\"\n", int(ty), int(op))
			srcs = append(srcs, name)
		}
	}
	compileKernels(t, cc, t.TempDir(), files, srcs)
}

// TestStreamReduceKernelRefuses: Avg and PreMulSum are not base operators
// of the kernel; a device without a compiler gets no kernel and no error.
func TestStreamReduceKernelRefuses(t *testing.T) {
	dev, err := hal.Open("host", hal.Config{Ordinal: 0, JobID: "streamreduce-kernel"})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for _, op := range []plan.RedOp{plan.Avg, plan.PreMulSum} {
		if _, _, err := channels.StreamReduceKernel(dev, plan.Float32, op); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Errorf("%v: %v, want ErrInvalidArgument", op, err)
		}
	}
	mod, fn, err := channels.StreamReduceKernel(dev, plan.Float32, plan.Sum)
	if mod != nil || fn != nil || err != nil {
		t.Fatalf("hal/host: StreamReduceKernel = %v, %v, %v; want nil, nil, nil", mod, fn, err)
	}
}
