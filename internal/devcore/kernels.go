package devcore

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/weftccl/weft/hal"
)

// Kernels is the part of a loaded module's life that both cores share:
// its kernels, each looked up once and kept (F: the core's function
// type), and its Close. A core's module embeds it beside the runtime's
// module. It is safe for concurrent use.
type Kernels[F any] struct {
	name   string       // the module's (kernel source's) name
	owner  string       // the device, in messages
	unload func() error // cuModuleUnload, hipModuleUnload
	mu     sync.Mutex
	funcs  map[string]F
	closed atomic.Bool
}

// NewKernels returns the kernels of module name, loaded on owner, which
// unload unloads.
func NewKernels[F any](name, owner string, unload func() error) *Kernels[F] {
	return &Kernels[F]{name: name, owner: owner, unload: unload, funcs: map[string]F{}}
}

// Kernel returns the kernel called name, made with lookup (the runtime's
// function lookup wrapped in the core's type) the first time it is asked
// for. Errors wrap hal.ErrInvalidUsage (closed module), or are lookup's
// naming the module and device (unknown names wrap hal.ErrDevice).
func (k *Kernels[F]) Kernel(name string, lookup func(string) (F, error)) (F, error) {
	var none F
	if k.closed.Load() {
		return none, fmt.Errorf("function %q of %s: module used after Close: %w", name, k.name, hal.ErrInvalidUsage)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if f, ok := k.funcs[name]; ok {
		return f, nil
	}
	f, err := lookup(name)
	if err != nil {
		return none, fmt.Errorf("module %s on %s: %w", k.name, k.owner, err)
	}
	k.funcs[name] = f
	return f, nil
}

// Closed reports whether Close was called.
func (k *Kernels[F]) Closed() bool { return k.closed.Load() }

// Close unloads the module; its functions become invalid. A second Close
// wraps hal.ErrInvalidUsage.
func (k *Kernels[F]) Close() error {
	if k.closed.Swap(true) {
		return fmt.Errorf("close module %s: already closed: %w", k.name, hal.ErrInvalidUsage)
	}
	if err := k.unload(); err != nil {
		return fmt.Errorf("close module %s on %s: %w", k.name, k.owner, err)
	}
	return nil
}

// CheckResident returns an error wrapping hal.ErrNotResident (and so
// hal.ErrInvalidArgument) when
// blocks blocks of threads threads cannot all be resident on units
// multiprocessors (compute units) at once, perUnit being what the
// runtime's occupancy calculator reports for the kernel
// (cuOccupancyMaxActiveBlocksPerMultiprocessor,
// hipModuleOccupancyMaxActiveBlocksPerMultiprocessor). A plan's blocks
// wait for each other (a group for another group's data, a rank's blocks
// for its peers'), so a block that waits for one never scheduled spins
// until its deadline. A figure of 0 (perUnit or units) is not checked: the
// launch reports its own error. kernel and owner name the kernel and the
// device in the message.
func CheckResident(kernel, owner string, blocks, threads, perUnit, units int) error {
	if perUnit <= 0 || units <= 0 || blocks <= perUnit*units {
		return nil
	}
	return fmt.Errorf("%s on %s: %d blocks of %d threads cannot all be resident (%d per multiprocessor × %d multiprocessors = %d), and the plan's blocks wait for each other; give it fewer blocks or threads (the WEFT_*_SHAPE variables, WEFT_MAX_CTAS): %w",
		kernel, owner, blocks, threads, perUnit, units, perUnit*units, hal.ErrNotResident)
}
