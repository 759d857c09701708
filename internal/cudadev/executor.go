package cudadev

import (
	"fmt"
	"sync"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

var _ hal.Executor = (*Device)(nil)

// Program is a plan compiled for this device: one kernel, generated from
// the plan by plan.EmitCUDA and compiled with NVRTC (cached on disk).
type Program struct {
	dev *Device
	p   *plan.Plan
	b   plan.Bindings
	mod hal.Module
	fn  hal.Function
}

// Prepare generates, compiles and loads the kernel of a plan for one data
// type and operator. The kernel source includes this backend's device
// header (weft_hal.h) and the channel library passed in spec.Library.
func (d *Device) Prepare(spec hal.PlanSpec) (hal.Program, error) {
	p := spec.Plan
	if p == nil {
		return nil, fmt.Errorf("%s: prepare: nil plan: %w", d.backend, hal.ErrInvalidArgument)
	}
	if p.Threads > d.MaxThreadsPerBlock() {
		return nil, fmt.Errorf("%s: prepare %s: %d threads per block, device allows %d: %w", d.backend, p.Name, p.Threads, d.MaxThreadsPerBlock(), hal.ErrInvalidArgument)
	}
	if len(spec.Bindings.Peers) != len(p.Channels) {
		return nil, fmt.Errorf("%s: prepare %s: %d peer bindings for %d channels: %w", d.backend, p.Name, len(spec.Bindings.Peers), len(p.Channels), hal.ErrInvalidArgument)
	}
	if msg := spec.Bindings.CheckNetRegions(p); msg != "" {
		return nil, fmt.Errorf("%s: prepare: %s: %w", d.backend, msg, hal.ErrInvalidArgument)
	}
	if p.Scratch == plan.LL128 && !d.ll128 {
		return nil, fmt.Errorf("%s: prepare %s: LL128 lines need NVLink between the peers (a warp's 128-byte line as one write); %s links do not promise it: %w", d.backend, p.Name, d.backend, hal.ErrInvalidArgument)
	}
	src, err := plan.EmitCUDA(p, spec.DataType, spec.RedOp)
	if err != nil {
		return nil, fmt.Errorf("%s: prepare: %v: %w", d.backend, err, hal.ErrInvalidArgument)
	}
	headers := map[string]string{"weft_hal.h": d.DeviceHeader()}
	for k, v := range spec.Library {
		headers[k] = v
	}
	mod, err := d.CompileModule(hal.KernelSource{Name: fmt.Sprintf("%s-%v-%v", p.Name, spec.DataType, spec.RedOp), Source: src, Headers: headers})
	if err != nil {
		return nil, fmt.Errorf("%s: prepare %s: %w", d.backend, p.Name, err)
	}
	fn, err := mod.Kernel(plan.KernelName)
	if err == nil {
		err = fn.CheckResident(p.Blocks(), p.Threads, 0)
	}
	if err != nil {
		mod.Close()
		return nil, fmt.Errorf("%s: prepare %s: %w", d.backend, p.Name, err)
	}
	return &Program{dev: d, p: p, b: spec.Bindings, mod: mod, fn: fn}, nil
}

// Launch enqueues the kernel: one thread block per plan block. The
// arguments are checked on the host; a null buffer or a count above the
// plan's limit is refused before anything reaches the device.
func (pr *Program) Launch(s hal.Stream, a *plan.Args) error {
	p := pr.p
	if a.Count < 0 {
		return fmt.Errorf("%s: launch %s: negative count %d: %w", pr.dev.backend, p.Name, a.Count, hal.ErrInvalidArgument)
	}
	if a.Count > 0 && (a.Input == 0 || a.Output == 0) {
		return fmt.Errorf("%s: launch %s: null input or output buffer: %w", pr.dev.backend, p.Name, hal.ErrInvalidArgument)
	}
	needIn, needOut := p.Needs()
	for ci := range p.Channels {
		if a.Count > 0 && ((needIn && (ci >= len(a.PeerInput) || a.PeerInput[ci] == 0)) || (needOut && (ci >= len(a.PeerOutput) || a.PeerOutput[ci] == 0))) {
			return fmt.Errorf("%s: launch %s: channel %d (peer rank %d) has no registered buffer: %w", pr.dev.backend, p.Name, ci, p.Channels[ci].Peer, hal.ErrInvalidArgument)
		}
	}
	buf := paramBufs.Get().(*[plan.ParamsBytes]byte)
	defer paramBufs.Put(buf)
	params, err := plan.PackParamsInto(buf[:], p, &pr.b, a)
	if err != nil {
		return fmt.Errorf("%s: launch: %v: %w", pr.dev.backend, err, hal.ErrInvalidArgument)
	}
	// cuLaunchKernel copies the parameters before it returns: the buffer
	// goes back to the pool after the launch.
	return pr.fn.Launch(s, p.Blocks(), p.Threads, 0, params)
}

// paramBufs are reusable kernel parameter blocks (an allocation of 1.8 KB
// per launch cost ~0.5 µs on the development VM).
var paramBufs = sync.Pool{New: func() any { return new([plan.ParamsBytes]byte) }}

// Close unloads the kernel.
func (pr *Program) Close() error { return pr.mod.Close() }
