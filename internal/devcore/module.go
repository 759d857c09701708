package devcore

import "fmt"

// KernelCache is an on-disk cache of compiled kernels (internal/cuda's
// KernelCache, which HIP uses too) keyed by S, the compiler's source.
type KernelCache[S any] interface {
	// Get returns the binary of s, compiled now or read from the cache
	// (hit).
	Get(s S) (bin []byte, hit bool, err error)
	// Invalidate drops the cached binary of s.
	Invalidate(s S)
}

// LoadCached gets the binary of s, kernel name, from cache and loads it on
// the device owner names with load (cuModuleLoadData, hipModuleLoadData).
// A cached binary that load refuses (a driver update, a corrupt file) is
// reported to refused, dropped and compiled again, once. Errors are
// "compile name for owner: …" (source errors and a missing compiler, as
// the cache words them) or "load name on owner: …" (the runtime's).
func LoadCached[S, M any](cache KernelCache[S], s S, load func([]byte) (M, error), refused func(error), name, owner string) (M, error) {
	var mod M
	bin, hit, err := cache.Get(s)
	if err != nil {
		return mod, fmt.Errorf("compile %s for %s: %w", name, owner, err)
	}
	mod, err = load(bin)
	if err != nil && hit {
		refused(err)
		cache.Invalidate(s)
		if bin, _, err = cache.Get(s); err != nil {
			return mod, fmt.Errorf("compile %s for %s: %w", name, owner, err)
		}
		mod, err = load(bin)
	}
	if err != nil {
		return mod, fmt.Errorf("load %s on %s: %w", name, owner, err)
	}
	return mod, nil
}
