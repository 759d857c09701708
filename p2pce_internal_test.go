package weft

import (
	"fmt"
	"testing"

	"github.com/weftccl/weft/hal"
)

// fakeImports is a hal.MemoryMapped whose Import hands out buffers that
// record their Free.
type fakeImports struct {
	imported int
	freed    map[string]bool
}

type fakeImport struct {
	key  string
	into *fakeImports
}

func (b fakeImport) Addr() uint64 { return 1 << 20 }
func (b fakeImport) Size() int64  { return 4096 }
func (b fakeImport) Host() []byte { return nil }
func (b fakeImport) Free() error {
	if b.into.freed[b.key] {
		return fmt.Errorf("%s freed twice: %w", b.key, hal.ErrInvalidUsage)
	}
	b.into.freed[b.key] = true
	return nil
}

func (f *fakeImports) Export(hal.Buffer) (hal.Handle, error) { return nil, hal.ErrNotSupported }
func (f *fakeImports) DeviceHeader() string                  { return "" }
func (f *fakeImports) Import(h hal.Handle) (hal.Buffer, error) {
	f.imported++
	return fakeImport{key: string(h), into: f}, nil
}

// TestImportCache: a handle is imported once and reused; a new handle for
// the place (peer, base) of a mapped allocation unmaps the old one (its
// allocation was freed and replaced); past ceP2PMaxImports the least
// recently used mapping is unmapped; close unmaps the rest, each once.
func TestImportCache(t *testing.T) {
	f := &fakeImports{freed: map[string]bool{}}
	var ic importCache
	get := func(peer int, base uint64, h string) {
		t.Helper()
		if _, err := ic.get(f, importPlace{peer, base}, hal.Handle(h), false); err != nil {
			t.Fatalf("get(%d, %#x, %s): %v", peer, base, h, err)
		}
	}
	get(1, 0x1000, "a")
	get(1, 0x1000, "a")
	get(2, 0x1000, "b") // another peer's allocation at the same address
	if f.imported != 2 || ic.len() != 2 {
		t.Fatalf("after a, a, b: %d imports and %d mappings, want 2 and 2", f.imported, ic.len())
	}
	get(1, 0x1000, "a2") // rank 1 freed a and allocated a2 at its address
	if !f.freed["a"] || f.freed["b"] || ic.len() != 2 {
		t.Fatalf("after a2 at a's place: freed %v, %d mappings; want a unmapped, b kept, 2 mappings", f.freed, ic.len())
	}
	for i := 0; i < ceP2PMaxImports; i++ {
		get(3, uint64(0x10000+i), fmt.Sprintf("c%d", i))
		if i == 0 {
			get(2, 0x1000, "b") // b used again after c0
		}
	}
	if ic.len() != ceP2PMaxImports || !f.freed["a2"] || !f.freed["c0"] || f.freed["b"] || f.freed["c1"] {
		t.Fatalf("after %d more: %d mappings, freed %v; want %d, the least recently used (a2, then c0, not b) unmapped", ceP2PMaxImports, ic.len(), f.freed, ceP2PMaxImports)
	}
	if err := ic.close(); err != nil {
		t.Fatal(err)
	}
	if ic.len() != 0 || len(f.freed) != f.imported {
		t.Fatalf("after close: %d mappings, %d of %d imports unmapped", ic.len(), len(f.freed), f.imported)
	}
}

// TestImportCachePinned: mappings a graph capture used (pinned) are never
// the least recently used one unmapped and do not count against
// ceP2PMaxImports; one replaced at its place stays mapped (retired) until
// close, which unmaps every mapping once; a mapping first got unpinned is
// pinned by a later capture's get.
func TestImportCachePinned(t *testing.T) {
	f := &fakeImports{freed: map[string]bool{}}
	var ic importCache
	get := func(peer int, base uint64, h string, pin bool) {
		t.Helper()
		if _, err := ic.get(f, importPlace{peer, base}, hal.Handle(h), pin); err != nil {
			t.Fatalf("get(%d, %#x, %s, %v): %v", peer, base, h, pin, err)
		}
	}
	get(1, 0x1000, "g", true)  // captured
	get(1, 0x2000, "e", false) // eager, then captured
	get(1, 0x2000, "e", true)
	get(1, 0x3000, "u", false) // eager only
	for i := 0; i < ceP2PMaxImports; i++ {
		get(2, uint64(0x10000+i), fmt.Sprintf("c%d", i), false)
	}
	if f.freed["g"] || f.freed["e"] || !f.freed["u"] || ic.len() != ceP2PMaxImports+2 {
		t.Fatalf("after %d eager mappings: freed %v, %d mappings; want g and e kept (pinned), u unmapped, %d", ceP2PMaxImports, f.freed, ic.len(), ceP2PMaxImports+2)
	}
	get(1, 0x1000, "g2", false) // rank 1 freed g and allocated g2 at its place
	if f.freed["g"] || len(ic.retired) != 1 {
		t.Fatalf("g replaced at its place: freed %v, %d retired; want g retired, still mapped", f.freed, len(ic.retired))
	}
	if err := ic.close(); err != nil {
		t.Fatal(err)
	}
	if len(f.freed) != f.imported || !f.freed["g"] || !f.freed["e"] {
		t.Fatalf("after close: %d of %d imports unmapped (%v)", len(f.freed), f.imported, f.freed)
	}
}

// len is the number of mappings.
func (ic *importCache) len() int {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.order == nil {
		return 0
	}
	return ic.order.Len()
}
