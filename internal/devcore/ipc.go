package devcore

import "sync"

// IPC is a core's table of IPC mappings: one mapping of an exported
// allocation per (device, handle), shared by every import of a buffer of
// that allocation and counted, because the runtimes open a handle at most
// once per device (CUDA: per context) and process. D is the vendor's
// device or context, H its IPC memory handle, P its device pointer. When
// the runtime refuses to open a handle that another device of this
// process has open already, that mapping is shared: its address is valid
// process-wide.
//
// Open, Range and Close are the binding's calls (method expressions such
// as cuda.Context.IPCOpenMemHandle); set them before the first Open. An
// IPC is safe for concurrent use.
type IPC[D, H comparable, P ~uint64] struct {
	OpenHandle  func(D, H) (P, error)        // map the allocation of a handle
	Range       func(D, P) (P, int64, error) // base and size of the allocation at an address
	CloseHandle func(D, P) error             // unmap a mapping made by OpenHandle

	mu sync.Mutex
	m  map[ipcKey[D, H]]*Mapping[D, H, P]
}

type ipcKey[D, H comparable] struct {
	dev D
	h   H
}

// Mapping is one mapping of an allocation on the importing device.
type Mapping[D, H comparable, P ~uint64] struct {
	table *IPC[D, H, P]
	key   ipcKey[D, H]
	Base  P     // the allocation's base address on the importing device
	Size  int64 // the allocation's size, as mapped
	refs  int
}

// Open maps the allocation of h on d, or takes another reference to the
// mapping d (or, where the runtime refuses a second open, another device
// of this process) already has. Errors are the binding's. Release each
// mapping once per Open.
func (t *IPC[D, H, P]) Open(d D, h H) (*Mapping[D, H, P], error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := ipcKey[D, H]{d, h}
	if m := t.m[k]; m != nil {
		m.refs++
		return m, nil
	}
	base, err := t.OpenHandle(d, h)
	if err != nil {
		for ok, m := range t.m {
			if ok.h == h {
				m.refs++
				return m, nil
			}
		}
		return nil, err
	}
	_, size, err := t.Range(d, base)
	if err != nil {
		t.CloseHandle(d, base)
		return nil, err
	}
	m := &Mapping[D, H, P]{table: t, key: k, Base: base, Size: size, refs: 1}
	if t.m == nil {
		t.m = map[ipcKey[D, H]]*Mapping[D, H, P]{}
	}
	t.m[k] = m
	return m, nil
}

// Release drops a reference; the last one closes the mapping.
func (m *Mapping[D, H, P]) Release() error {
	t := m.table
	t.mu.Lock()
	defer t.mu.Unlock()
	if m.refs--; m.refs > 0 {
		return nil
	}
	delete(t.m, m.key)
	return t.CloseHandle(m.key.dev, m.Base)
}
