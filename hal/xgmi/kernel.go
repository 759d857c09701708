package xgmi

import (
	"fmt"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
	"github.com/weftccl/weft/internal/hip"
	"github.com/weftccl/weft/internal/hipdev"
)

// Compile compiles src with hipRTC for this GPU's offload target (Target:
// "gfx942:sramecc+:xnack-"), with -O3 and -std=c++17 before src.Options,
// and loads it. Code objects are cached on disk (WEFT_CACHE_DIR, else
// $XDG_CACHE_HOME/weft or ~/.cache/weft) by source, headers, options,
// target and hipRTC and HIP versions; a cached code object the runtime
// refuses is compiled again. Source errors wrap hal.ErrInvalidArgument and
// carry the compiler log; a missing hipRTC wraps hal.ErrNotSupported.
func (d *Device) Compile(src hal.KernelSource) (hal.Module, error) {
	m, err := d.compileModule(src)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return m, nil
}

// compileModule is Compile returning the concrete type.
func (d *Device) compileModule(src hal.KernelSource) (*hipdev.HALModule, error) {
	if err := d.checkOpen("compile"); err != nil {
		return nil, err
	}
	d.kernelsOnce.Do(func() { d.kernels, d.kernelsErr = hip.NewKernelCache() })
	if d.kernelsErr != nil {
		return nil, fmt.Errorf("compile %s for %s: %w", src.Name, d, d.kernelsErr)
	}
	s := hip.Source{Name: src.Name, Source: src.Source, Headers: src.Headers, Options: src.Options, Arch: d.target}
	return hipdev.CompileModule(d.dev, d.kernels, s, hipdev.Limits{MaxBlock: d.maxBlock, MaxShared: d.maxShared}, d.String())
}

// Program is a plan compiled for this GPU: one kernel, generated from the
// plan by plan.EmitCUDA (vendor-neutral C++ over weft_hal.h and the
// channel library) and compiled with hipRTC.
type Program struct {
	dev *Device
	p   *plan.Plan
	b   plan.Bindings
	mod hal.Module
	fn  hal.Function
}

// wavefront is the width of an AMD Instinct wavefront: plan blocks are
// whole wavefronts.
const wavefront = 64

// Prepare generates, compiles and loads the kernel of a plan for one data
// type and operator. The source includes this backend's device header and
// the channel library of spec.Library; where the device clock that
// deadlines read does not run at the header's default 100 MHz, its rate is
// passed as WEFT_HIP_WALLCLOCK_MHZ. Errors wrap hal.ErrInvalidArgument for
// a plan that fails plan.Validate, whose blocks are not a multiple of 64
// threads or larger than the GPU allows, whose blocks cannot all be
// resident at once (hipdev.HALFunction.CheckResident: they wait for each
// other), or whose bindings do not match its channels.
func (d *Device) Prepare(spec hal.PlanSpec) (hal.Program, error) {
	p := spec.Plan
	switch {
	case p == nil:
		return nil, fmt.Errorf("xgmi: prepare: nil plan: %w", hal.ErrInvalidArgument)
	case p.Threads <= 0 || p.Threads%wavefront != 0 || p.Threads > d.maxBlock:
		return nil, fmt.Errorf("xgmi: prepare %s: %d threads per block; %s runs whole %d-lane wavefronts, at most %d threads: %w",
			p.Name, p.Threads, d, wavefront, d.maxBlock, hal.ErrInvalidArgument)
	case len(spec.Bindings.Peers) != len(p.Channels):
		return nil, fmt.Errorf("xgmi: prepare %s: %d peer bindings for %d channels: %w", p.Name, len(spec.Bindings.Peers), len(p.Channels), hal.ErrInvalidArgument)
	case p.Scratch == plan.LL128:
		return nil, fmt.Errorf("xgmi: prepare %s: LL128 lines rely on NVLink's single-write lines, which xGMI does not promise: %w", p.Name, hal.ErrInvalidArgument)
	}
	src, err := plan.EmitCUDA(p, spec.DataType, spec.RedOp)
	if err != nil {
		return nil, fmt.Errorf("xgmi: prepare: %v: %w", err, hal.ErrInvalidArgument)
	}
	headers := map[string]string{DeviceHeaderName: d.DeviceHeader()}
	for k, v := range spec.Library {
		headers[k] = v
	}
	var opts []string
	if d.wallKHz > 0 && d.wallKHz != 100000 {
		opts = append(opts, fmt.Sprintf("-DWEFT_HIP_WALLCLOCK_MHZ=%d", d.wallKHz/1000))
	}
	ks := hal.KernelSource{Name: fmt.Sprintf("%s-%v-%v", p.Name, spec.DataType, spec.RedOp), Source: src, Headers: headers, Options: opts}
	mod, err := d.compileModule(ks)
	if err != nil {
		return nil, fmt.Errorf("xgmi: prepare %s: %w", p.Name, err)
	}
	fn, err := mod.HALKernel(plan.KernelName)
	if err == nil {
		err = fn.CheckResident(p.Blocks(), p.Threads, 0, d.Info().Multiprocessors)
	}
	if err != nil {
		mod.Close()
		return nil, fmt.Errorf("xgmi: prepare %s: %w", p.Name, err)
	}
	return &Program{dev: d, p: p, b: spec.Bindings, mod: mod, fn: fn}, nil
}

// Launch enqueues the kernel: one thread block per plan block, the plan's
// threads per block. The arguments are checked on the host; a null buffer
// or a missing peer buffer is refused before anything reaches the GPU.
// Failures inside the launch (timeouts, count mismatches) are reported
// through the control block once the stream is synchronised.
func (pr *Program) Launch(s hal.Stream, a *plan.Args) error {
	p := pr.p
	if a.Count < 0 || a.Count > 0 && (a.Input == 0 || a.Output == 0) {
		return fmt.Errorf("xgmi: launch %s: count %d, input %#x, output %#x: %w", p.Name, a.Count, a.Input, a.Output, hal.ErrInvalidArgument)
	}
	needIn, needOut := p.Needs()
	for ci := range p.Channels {
		if a.Count > 0 && ((needIn && (ci >= len(a.PeerInput) || a.PeerInput[ci] == 0)) || (needOut && (ci >= len(a.PeerOutput) || a.PeerOutput[ci] == 0))) {
			return fmt.Errorf("xgmi: launch %s: channel %d (peer rank %d) has no registered buffer: %w", p.Name, ci, p.Channels[ci].Peer, hal.ErrInvalidArgument)
		}
	}
	params, err := plan.PackParams(p, &pr.b, a)
	if err != nil {
		return fmt.Errorf("xgmi: launch: %v: %w", err, hal.ErrInvalidArgument)
	}
	return pr.fn.Launch(s, p.Blocks(), p.Threads, 0, params)
}

// Close unloads the kernel.
func (pr *Program) Close() error { return pr.mod.Close() }
