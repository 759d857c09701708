package hipdev

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/hal"
)

func testHandle() ExportHandle {
	h := ExportHandle{PID: 4242, Host: HashID("boot/ipc:[4026531839]"), Job: HashID("job"), Device: HashID("0000:0c:00.0"),
		AllocBase: 0x7f0000000000, AllocSize: 1 << 21, Offset: 4096, Size: 1 << 20}
	for i := range h.IPC {
		h.IPC[i] = byte(i)
	}
	return h
}

func TestExportHandleRoundTrip(t *testing.T) {
	h := testHandle()
	b := h.Encode()
	if len(b) != ExportHandleSize || string(b[:8]) != "WEFTHIP1" {
		t.Fatalf("encoded handle %x", b)
	}
	got, err := DecodeExportHandle(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(h, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for _, c := range []struct {
		name string
		edit func(*ExportHandle)
	}{
		{"empty buffer", func(h *ExportHandle) { h.Size = 0 }},
		{"offset past the allocation", func(h *ExportHandle) { h.Offset = h.AllocSize + 1 }},
		{"buffer past the allocation", func(h *ExportHandle) { h.Size = h.AllocSize - h.Offset + 1 }},
		{"absurd allocation", func(h *ExportHandle) { h.AllocSize = 1 << 63 }},
	} {
		bad := testHandle()
		c.edit(&bad)
		if _, err := DecodeExportHandle(bad.Encode()); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", c.name, err)
		}
	}
}

// FuzzDecodeExportHandle: any bytes either decode into a handle that
// encodes back to them, or are refused with ErrInvalidArgument.
func FuzzDecodeExportHandle(f *testing.F) {
	f.Add(testHandle().Encode())
	f.Add([]byte("WEFTHIP1"))
	f.Add(make([]byte, ExportHandleSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeExportHandle(b)
		if err != nil {
			if !errors.Is(err, hal.ErrInvalidArgument) {
				t.Fatalf("error %v does not wrap ErrInvalidArgument", err)
			}
			return
		}
		if h.Size == 0 || h.Offset+h.Size > h.AllocSize {
			t.Fatalf("accepted an inconsistent handle %+v", h)
		}
		if got := h.Encode(); string(got) != string(b) {
			t.Fatalf("re-encoded %x, decoded from %x", got, b)
		}
	})
}
