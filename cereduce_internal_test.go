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

// TestCEEvenWindow: the windows of a Reduce through landing slots cover
// the message in the fewest windows of at most the executor's window,
// rounded up to an even number past one (on a GPU's window), each a whole number of
// ceRedAlign bytes, the last no longer than the others and shorter by
// less than one ceRedAlign per window (equal windows).
func TestCEEvenWindow(t *testing.T) {
	for _, window := range []int64{ceWindow, ceHostWindow} {
		for _, bytes := range []int64{1, ceRedAlign, window - 4, window, window + 4, 3 * window / 2, 2 * window, 5*window/2 + 12, 96 << 20, 8 * window, 17*window - 1} {
			t.Run(fmt.Sprintf("window%d/%d", window, bytes), func(t *testing.T) {
				per := ceEvenWindow(window, bytes)
				if per <= 0 || per > window || (bytes > window && per%ceRedAlign != 0) {
					t.Fatalf("window of %d bytes: want 1 to %d, a whole number of %d past one window", per, window, ceRedAlign)
				}
				nwin := (bytes + per - 1) / per
				// The fewest windows the slots hold, even past one; the
				// rounding to ceRedAlign may take one back where windows
				// are few ceRedAlign long (hal/host's).
				least := (bytes + window - 1) / window
				even := least + least%2
				if least == 1 {
					even = 1
				}
				if nwin < least || nwin > even || (window >= 256*ceRedAlign && nwin != even) {
					t.Fatalf("%d windows of %d bytes, want %d (the fewest slots of %d hold, even past one)", nwin, per, even, window)
				}
				last := bytes - (nwin-1)*per
				if last <= 0 || last > per || (nwin > 1 && per-last >= nwin*ceRedAlign) {
					t.Fatalf("%d windows of %d bytes, the last %d: want it within %d of the others", nwin, per, last, nwin*ceRedAlign)
				}
			})
		}
	}
}
