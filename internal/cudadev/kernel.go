package cudadev

import (
	"fmt"
	"sync/atomic"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/cuda"
	"github.com/weftccl/weft/internal/devcore"
	"github.com/weftccl/weft/internal/stageprof"
)

// Compile compiles src with NVRTC for this GPU's exact architecture
// (Arch: "sm_90a" on Hopper) and loads it. Binaries are cached on disk
// (WEFT_CACHE_DIR, else $XDG_CACHE_HOME/weft or ~/.cache/weft) by source,
// headers, options, architecture and NVRTC version; a cached binary the
// driver refuses is compiled again. Source errors wrap
// hal.ErrInvalidArgument and carry the compiler log; a missing NVRTC wraps
// hal.ErrNotSupported.
func (d *Device) Compile(src hal.KernelSource) (hal.Module, error) {
	m, err := d.CompileModule(src)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return m, nil
}

// CompileModule is Compile returning the concrete type.
func (d *Device) CompileModule(src hal.KernelSource) (*Module, error) {
	if err := d.checkOpen("compile"); err != nil {
		return nil, err
	}
	cache, err := d.kernelCache()
	if err != nil {
		return nil, fmt.Errorf("compile %s for %s: %w", src.Name, d, err)
	}
	s := cuda.Source{Name: src.Name, Source: src.Source, Headers: src.Headers, Options: src.Options, Arch: d.arch}
	refused := func(err error) {
		d.log.Warn("cached kernel binary refused; recompiling", "kernel", src.Name, "err", err)
	}
	mod, err := devcore.LoadCached(cache, s, d.ctx.ModuleLoadData, refused, src.Name, d.String())
	if err != nil {
		return nil, err
	}
	return &Module{Kernels: devcore.NewKernels[*Function](src.Name, d.String(), mod.Unload), dev: d, name: src.Name, mod: mod}, nil
}

func (d *Device) kernelCache() (*cuda.KernelCache, error) {
	d.kernelsOnce.Do(func() {
		cv, err := cuda.CompilerVersion()
		if err != nil {
			d.kernelsErr = err
			return
		}
		d.kernels = &cuda.KernelCache{Dir: cuda.DefaultCacheDir(), CompilerVersion: cv, Compile: cuda.Compile}
	})
	return d.kernels, d.kernelsErr
}

// Module is a loaded device binary.
type Module struct {
	*devcore.Kernels[*Function] // Close, and the kernels looked up so far
	dev                         *Device
	name                        string
	mod                         cuda.Module
}

var _ hal.Module = (*Module)(nil)

// Function returns the kernel called name (an extern "C" __global__
// function). Unknown names wrap hal.ErrDevice (CUDA_ERROR_NOT_FOUND).
func (m *Module) Function(name string) (hal.Function, error) { return m.Kernel(name) }

// Kernel is Function returning the concrete type.
func (m *Module) Kernel(name string) (*Function, error) {
	return m.Kernels.Kernel(name, func(name string) (*Function, error) {
		cf, err := m.mod.Function(name)
		if err != nil {
			return nil, err
		}
		return &Function{dev: m.dev, mod: m, name: name, fn: cf}, nil
	})
}

// Function is a kernel entry point. Kernels take one parameter, a struct
// passed by value.
type Function struct {
	dev  *Device
	mod  *Module
	name string
	fn   cuda.Function
	// dynShared is the dynamic shared memory limit set on the function
	// (cuFuncSetAttribute), raised when a launch needs more than 48 KiB.
	dynShared atomic.Int32
}

var _ hal.Function = (*Function)(nil)

// CUDA returns the CUfunction with its context.
func (f *Function) CUDA() cuda.Function { return f.fn }

// CheckResident is devcore.CheckResident for blocks blocks of threads
// threads (sharedBytes of dynamic shared memory each) of this kernel on
// its device (cuOccupancyMaxActiveBlocksPerMultiprocessor).
func (f *Function) CheckResident(blocks, threads, sharedBytes int) error {
	per, err := f.fn.MaxActiveBlocksPerMultiprocessor(threads, sharedBytes)
	if err != nil {
		return fmt.Errorf("%s on %s: occupancy: %w", f.name, f.dev, err)
	}
	return devcore.CheckResident(f.name, f.dev.String(), blocks, threads, per, f.dev.Multiprocessors())
}

// Launch enqueues the kernel on s with a 1-D grid of grid blocks of block
// threads, sharedBytes of dynamic shared memory, and params as the bytes
// of its one by-value struct parameter (laid out as the kernel's struct,
// little-endian, natural alignment). It is one cgo call, except the first
// time a launch needs more than 48 KiB of shared memory. Errors wrap
// hal.ErrInvalidArgument (bad shape, stream of another device) or
// hal.ErrDevice.
func (f *Function) Launch(hs hal.Stream, grid, block, sharedBytes int, params []byte) error {
	s, ok := hs.(*Stream)
	if !ok || s == nil || s.dev.ctx != f.dev.ctx {
		_, err := f.dev.stream("launch "+f.name, hs)
		if err == nil {
			err = fmt.Errorf("launch %s: stream of another device: %w", f.name, hal.ErrInvalidArgument)
		}
		return err
	}
	if grid <= 0 || block <= 0 || grid > 1<<31-1 || block > 1<<31-1 {
		return fmt.Errorf("launch %s on %s: grid %d, block %d: %w", f.name, f.dev, grid, block, hal.ErrInvalidArgument)
	}
	return f.LaunchDim(s, cuda.Dim3{X: uint32(grid)}, cuda.Dim3{X: uint32(block)}, sharedBytes, params)
}

// LaunchDim is Launch with 3-D grid and block shapes (zero components
// count as 1).
func (f *Function) LaunchDim(s *Stream, grid, block cuda.Dim3, sharedBytes int, params []byte) error {
	one := func(v uint32) uint64 { return uint64(max(v, 1)) }
	if threads := one(block.X) * one(block.Y) * one(block.Z); threads > uint64(f.dev.maxThreadsPerBlock) || sharedBytes < 0 {
		return fmt.Errorf("launch %s on %s: block of %d threads (at most %d), shared %d bytes: %w",
			f.name, f.dev, threads, f.dev.maxThreadsPerBlock, sharedBytes, hal.ErrInvalidArgument)
	}
	if s.closed.Load() {
		return fmt.Errorf("launch %s: stream of %s used after Close: %w", f.name, f.dev, hal.ErrInvalidUsage)
	}
	if sharedBytes > 48<<10 && int32(sharedBytes) > f.dynShared.Load() {
		if sharedBytes > f.dev.maxSharedOptin {
			return fmt.Errorf("launch %s on %s: %d bytes of shared memory, at most %d: %w", f.name, f.dev, sharedBytes, f.dev.maxSharedOptin, hal.ErrInvalidArgument)
		}
		if err := f.fn.SetAttribute(cuda.FuncAttrMaxDynamicSharedSizeBytes, sharedBytes); err != nil {
			return fmt.Errorf("launch %s on %s: %w", f.name, f.dev, err)
		}
		f.dynShared.Store(int32(sharedBytes))
	}
	t := launchProf.Now()
	if err := f.fn.Launch(grid, block, sharedBytes, s.stream, params); err != nil {
		return fmt.Errorf("launch %s on %s: %w", f.name, f.dev, err)
	}
	t = launchProf.Since(profDriverLaunch, t)
	err := f.dev.launched(s)
	launchProf.Since(profLaunchEvent, t)
	return err
}

// launchProf times the two driver parts of every launch in this process
// under WEFT_PROXY_PROFILE=1 (nil otherwise): cuLaunchKernel, and the
// event recorded after a launch on a caller's stream (cuStreamIsCapturing,
// cuEventRecord). weft.Comm logs it with its launch path at Close
// (LaunchProfile).
var launchProf = stageprof.New("kernel launches (cudadev)", "driver launch (cuLaunchKernel)", "launch event (capture check, cuEventRecord)")

const (
	profDriverLaunch = iota
	profLaunchEvent
)

// LaunchProfile is the process's launch timing (nil unless
// WEFT_PROXY_PROFILE=1).
func (d *Device) LaunchProfile() *stageprof.Set { return launchProf }
