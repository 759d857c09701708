package channels_test

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal/plan"
)

// TestFifoConstantsMirror: the FIFO layout and trigger kinds that
// weft_channels.h spells out for kernels (FIFO_*, TRIG_*) are hal/plan's
// (plan/port.go), which the proxy and hal/host read.
func TestFifoConstantsMirror(t *testing.T) {
	src := channels.DeviceLibrary()["weft_channels.h"]
	if src == "" {
		t.Fatal("weft_channels.h is not in the device library")
	}
	got := map[string]int64{}
	for _, m := range regexp.MustCompile(`\b((?:FIFO|TRIG)_[A-Z_]+) = ([0-9]+)\b`).FindAllStringSubmatch(src, -1) {
		n, _ := strconv.ParseInt(m[2], 10, 64)
		got[m[1]] = n
	}
	for name, want := range map[string]int64{
		"FIFO_SLOTS": plan.FifoSlots, "FIFO_COUNTERS": plan.FifoCounters, "FIFO_COUNTER_OFF": plan.FifoCounterOff,
		"FIFO_SEEN_TAIL": plan.FifoSeenTail, "FIFO_TAIL": plan.FifoTail, "FIFO_FLUSHED": plan.FifoFlushed, "FIFO_ERROR": plan.FifoError,
		"TRIG_PUT": int64(plan.TriggerPut), "TRIG_COPY": int64(plan.TriggerCopy), "TRIG_SIGNAL": int64(plan.TriggerSignal),
		"TRIG_FLUSH": int64(plan.TriggerFlush), "TRIG_COUNTER": int64(plan.TriggerCounter), "TRIG_ALONE": int64(plan.TriggerAlone), "TRIG_ACK": int64(plan.TriggerAck),
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("weft_channels.h %s = %d (found: %v), plan says %d", name, v, ok, want)
		}
	}
	// FIFO_CTL is an expression there: check its value through the
	// expression's parts.
	if !regexp.MustCompile(`FIFO_CTL = 64 \+ 8 \* FIFO_COUNTERS\b`).MatchString(src) || plan.FifoCtlBytes != 64+8*plan.FifoCounters {
		t.Errorf("FIFO_CTL is not 64 + 8 × FIFO_COUNTERS on both sides (plan.FifoCtlBytes = %d)", plan.FifoCtlBytes)
	}
}
