package conformance

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/weftccl/weft/hal"
)

func init() {
	Register(Case{ID: "memory-mapped/export-range", Capability: hal.CapMemoryMapped, MinRanks: 2,
		Title: "a range of an allocation exported by address (hal.RangeExporter: memory a caller allocated, as the copy-engine point-to-point path exports a receive buffer) names its allocation and offset, so that every peer's Import reads the range's bytes there and writes through it; bad lengths and addresses are refused with ErrInvalidArgument",
		Run:   testExportRange})
	Register(Case{ID: "memory-mapped/export-range-processes", Capability: hal.CapMemoryMapped, MinRanks: 2, Mode: Processes,
		Title: "ranges exported by address are imported, read and written across processes",
		Run:   testExportRange})
}

// testExportRange: each rank fills a buffer with its pattern and exports
// three ranges of it by address (the whole buffer, an odd range at an odd
// offset, its last byte); every peer imports each handle, reads the range
// at the returned offset and compares it with the exporter's pattern,
// then writes a marker into the range's first byte through the mapping,
// which the exporter finds once everybody is done.
func testExportRange(t *T) error {
	mm, err := memoryMapped(t)
	if err != nil {
		return err
	}
	ex, ok := t.Dev.(hal.RangeExporter)
	if !ok {
		return t.NotSupported("the device does not implement hal.RangeExporter")
	}
	const size = mib + 5
	buf, err := t.Alloc(size)
	if err != nil {
		return err
	}
	want := pattern(seed(t.Rank, 7), size)
	if err := t.Write(buf, 0, want); err != nil {
		return err
	}
	// Bad input first: nothing to exchange.
	for _, bad := range []struct {
		what string
		addr uint64
		n    int64
	}{
		{"a zero length", buf.Addr(), 0},
		{"a negative length", buf.Addr(), -1},
		{"a range far past the allocation's end", buf.Addr(), 1 << 40},
		{"an address no allocation holds", 8, 1},
	} {
		if _, _, err := ex.ExportRange(bad.addr, bad.n); !errors.Is(err, hal.ErrInvalidArgument) {
			return t.Errorf("ExportRange of %s: got %v, want an error wrapping hal.ErrInvalidArgument", bad.what, err)
		}
	}
	ranges := [][2]int64{{0, size}, {4*kib + 3, 64*kib + 1}, {size - 1, 1}}
	// Per range: the offset (8 bytes), the handle's length (4) and the handle.
	var msg []byte
	for _, r := range ranges {
		h, off, err := ex.ExportRange(buf.Addr()+uint64(r[0]), r[1])
		if err != nil {
			return t.Errorf("ExportRange(+%d, %d bytes): %v", r[0], r[1], err)
		}
		if off < 0 {
			return t.Errorf("ExportRange(+%d, %d bytes): negative offset %d", r[0], r[1], off)
		}
		msg = binary.LittleEndian.AppendUint64(msg, uint64(off))
		msg = binary.LittleEndian.AppendUint32(msg, uint32(len(h)))
		msg = append(msg, h...)
	}
	all, err := t.AllGather(msg)
	if err != nil {
		return err
	}
	// Read every peer's ranges, then (after a barrier: nobody reads what a
	// marker changed) write the markers, then free the mappings.
	type mapped struct {
		b   hal.Buffer
		off int64
	}
	var marks []mapped
	var imports []hal.Buffer
	defer func() {
		for _, b := range imports {
			b.Free()
		}
	}()
	for q, m := range all {
		if q == t.Rank {
			continue
		}
		qwant := pattern(seed(q, 7), size)
		for i, r := range ranges {
			if len(m) < 12 {
				return t.Errorf("rank %d's description of range %d is truncated", q, i)
			}
			off := int64(binary.LittleEndian.Uint64(m))
			hl := int(binary.LittleEndian.Uint32(m[8:]))
			if len(m) < 12+hl {
				return t.Errorf("rank %d's handle of range %d is truncated", q, i)
			}
			h := hal.Handle(m[12 : 12+hl])
			m = m[12+hl:]
			b, err := mm.Import(h)
			if err != nil {
				return t.Errorf("import of rank %d's range %d (+%d, %d bytes): %v", q, i, r[0], r[1], err)
			}
			imports = append(imports, b)
			if off+r[1] > b.Size() {
				return t.Errorf("rank %d's range %d: offset %d + %d bytes past the %d bytes its handle maps", q, i, off, r[1], b.Size())
			}
			got, err := t.Read(b, off, r[1])
			if err != nil {
				return err
			}
			if d := diff(fmt.Sprintf("rank %d's range %d (+%d, %d bytes) read through its exported allocation", q, i, r[0], r[1]), got, qwant[r[0]:r[0]+r[1]]); d != "" {
				return t.Errorf("%s", d)
			}
			if i == 1 {
				marks = append(marks, mapped{b, off})
			}
		}
	}
	if err := t.Barrier(); err != nil {
		return err
	}
	for _, m := range marks {
		if err := t.Write(m.b, m.off, []byte{byte(0x40 + t.Rank)}); err != nil {
			return err
		}
	}
	for _, b := range imports {
		if err := b.Free(); err != nil {
			return t.Errorf("free of an imported range: %v", err)
		}
	}
	imports = nil
	if err := t.Barrier(); err != nil {
		return err
	}
	// Range 1's first byte holds the marker of whichever peer wrote last.
	got, err := t.Read(buf, ranges[1][0], 1)
	if err != nil {
		return err
	}
	ok = false
	for q := 0; q < t.Size; q++ {
		if q != t.Rank && got[0] == byte(0x40+q) {
			ok = true
		}
	}
	if !ok {
		return t.Errorf("byte %d of this rank's buffer is %#02x after every peer wrote its marker (0x40 + rank) through the exported range", ranges[1][0], got[0])
	}
	return t.Barrier()
}
