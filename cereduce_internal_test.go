package weft

import (
	"fmt"
	"testing"
)

// TestCERedSchedule: the windows of a Reduce into the root's output cover
// the message exactly, in at most ceRedWindows windows, every one but the
// last a whole number of ceRedAlign bytes, the last at most a quarter of
// the executor's window plus the unaligned rest, and after the first each
// window at least 2/3 of the one before it, less the rounding to
// ceRedAlign (the root's reduction keeps up).
func TestCERedSchedule(t *testing.T) {
	for _, window := range []int64{ceWindow, ceHostWindow} {
		for _, bytes := range []int64{1, 7, ceRedAlign - 1, ceRedAlign, ceRedAlign + 4, 80044, 9000, 1 << 20, 64 << 20, 100<<20 + 12, 512 << 20, 1 << 30, 3<<30 + 2, 1 << 40} {
			t.Run(fmt.Sprintf("window%d/%d", window, bytes), func(t *testing.T) {
				ws := ceRedSchedule(window, bytes)
				if len(ws) == 0 || len(ws) > ceRedWindows {
					t.Fatalf("%d windows (1 to %d): %v", len(ws), ceRedWindows, ws)
				}
				sum := int64(0)
				for i, w := range ws {
					sum += w
					if w <= 0 {
						t.Fatalf("window %d of %d bytes: %v", i, w, ws)
					}
					if i < len(ws)-1 && w%ceRedAlign != 0 {
						t.Fatalf("window %d of %d bytes is not a whole number of %d: %v", i, w, ceRedAlign, ws)
					}
					if i >= 2 && 3*w < 2*(ws[i-1]-ceRedAlign) {
						t.Fatalf("window %d (%d bytes) under 2/3 of the one before (%d) less %d: %v", i, w, ws[i-1], ceRedAlign, ws)
					}
				}
				if sum != bytes {
					t.Fatalf("windows cover %d bytes, want %d: %v", sum, bytes, ws)
				}
				if l := ws[len(ws)-1]; len(ws) > 1 && l > window/4+ceRedAlign {
					t.Fatalf("last window %d bytes, want at most %d: %v", l, window/4+ceRedAlign, ws)
				}
			})
		}
	}
}
