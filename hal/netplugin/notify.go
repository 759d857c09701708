package netplugin

import (
	"runtime"
	"time"

	"github.com/weftccl/weft/hal/netcore"
)

// notifier is netcore's: it wakes every goroutine waiting for some state
// to change. The poll policy below is this transport's own, unlike
// hal/socket's: ncclNet has no blocking wait, so the progress goroutine
// polls the plugin and sleeps sooner (after 200 µs, not 2 ms), and an
// engine call can wake it from a sleep.
type notifier = netcore.Notifier

// The progress goroutine polls the plugin (ncclNet has no blocking wait:
// NCCL's proxy thread polls too). After its last progress it yields for
// spinFor, then sleeps between polls: busySleep while messages are in
// flight, and while nothing is a sleep that doubles from busySleep to
// idleSleep, or until an engine call wakes it.
const (
	spinFor   = 200 * time.Microsecond
	busySleep = 50 * time.Microsecond
	idleSleep = time.Millisecond
)

// pause waits before the next poll: idle is how long nothing progressed,
// pending whether requests are in flight, naps the sleeps since the last
// progress (the idle sleep doubles with them).
func pause(idle time.Duration, pending bool, naps int, wake, stop <-chan struct{}, timer *time.Timer) {
	if idle < spinFor {
		runtime.Gosched()
		return
	}
	d := busySleep
	if !pending {
		d = min(idleSleep, busySleep<<min(naps, 5))
	}
	timer.Reset(d)
	select {
	case <-wake:
	case <-stop:
	case <-timer.C:
		return
	}
	if !timer.Stop() {
		select {
		case <-timer.C:
		default:
		}
	}
}
