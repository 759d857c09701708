package ucx

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/ucx"
)

// # Lanes
//
// A lane is a pair of workers of the NetDevice's context — one that
// sends, one that peers' endpoints connect to — each driven by its own
// goroutine. Lane 0 is the NetDevice's own pair (w and rw), which carries
// every message and the puts below stripeMin; lanes 1 … Options.Lanes−1
// carry only the further stripes of large puts (engine.issue). Over UCX's
// TCP transport a worker moves its bytes on one thread (the sender's
// send(2) calls and the receiver's recv(2) into the target memory), and
// one stream between two emulated nodes on 2×H100 moved 3.1–3.3 GB/s
// where NCCL's sockets, on two connections, moved 3.9–4.3 (hal/socket
// measured 3.5 on one connection, 5.1 on two: docs/network.md): a large
// put split over L lanes moves on L threads at each end.
//
// Ordering: a signal must reach its peer after every put before it. The
// signal travels on lane 0 after the flushes of lane 0 and of every lane
// that carried a stripe since the last flush (ucp_ep_flush_nbx: each put
// complete at the peer), so stripes need no message of their own. A peer
// that sends an active message on a lane other than 0 is refused.

// stripeMin is the smallest stripe of a put split over lanes: a put of n
// bytes goes in min(lanes, n / stripeMin) stripes (a put below
// 2 × stripeMin is not split), so that each stripe's flush and a lane's
// wake-up stay small beside its transfer (256 KiB at 3 GB/s: 85 µs).
const stripeMin = 256 << 10

// maxLanes bounds Options.Lanes (WEFT_UCX_LANES) and the lanes a peer
// may announce.
const maxLanes = 8

// lane is one of the NetDevice's lanes beyond the first: a sending worker
// sw (guarded by mu, progressed by its goroutine and by the engines that
// issue on it) and a receiving worker rw that peers' stripes land
// through (only its goroutine calls it until Close).
type lane struct {
	idx   int
	mu    sync.Mutex
	sw    *ucx.Worker
	rw    *ucx.Worker
	raddr []byte
}

// openLanes creates lanes 1 … n−1 on nd's context (their goroutines are
// started by startLanes).
func (nd *NetDevice) openLanes(n int) error {
	for i := 1; i < n; i++ {
		l := &lane{idx: i}
		var err error
		if l.sw, err = nd.ctx.NewWorker(amID, maxSignal); err != nil {
			return err
		}
		if l.rw, err = nd.ctx.NewWorker(amID, maxSignal); err != nil {
			l.sw.Close()
			return err
		}
		if l.raddr, err = l.rw.Address(); err != nil {
			l.sw.Close()
			l.rw.Close()
			return err
		}
		nd.lanes = append(nd.lanes, l)
	}
	return nil
}

// startLanes starts each lane's two goroutines.
func (nd *NetDevice) startLanes() {
	for _, l := range nd.lanes {
		nd.wg.Add(2)
		go nd.drive(l.sw, &l.mu, nil)
		go nd.drive(l.rw, nil, func() int {
			n := 0
			for {
				if _, ok := l.rw.PopAM(); !ok {
					return n
				}
				n++
				nd.refuse(fmt.Errorf("ucx: rank %d: an active message on lane %d, which carries only puts: refused: %w", nd.cfg.Rank, l.idx, hal.ErrRemote))
			}
		})
	}
}

// closeLanes destroys the lanes' workers (their goroutines have stopped
// and their endpoints are closed).
func (nd *NetDevice) closeLanes() {
	for _, l := range nd.lanes {
		l.sw.Close()
		l.rw.Close()
	}
}

// wakeLanes wakes every lane's goroutines (Close).
func (nd *NetDevice) wakeLanes() {
	for _, l := range nd.lanes {
		l.sw.Signal()
		l.rw.Signal()
	}
}

// laneAddresses is the reply body that tells an engine's dialer where
// its endpoints connect: the receiving worker of every lane, lane 0
// first.
func (nd *NetDevice) laneAddresses() []byte {
	addrs := [][]byte{nd.waddr}
	for _, l := range nd.lanes {
		addrs = append(addrs, l.raddr)
	}
	return encodeLanes(addrs)
}

// drive runs a worker of a lane, as recvLoop does the NetDevice's
// receiving worker: it progresses w (under mu, where other goroutines
// also call w), then calls after (nil: nothing), which returns how many
// things it handled; while anything happened within Options.Spin it
// polls, then it arms w and sleeps on its event descriptor until UCX has
// an event or Signal wakes it.
func (nd *NetDevice) drive(w *ucx.Worker, mu *sync.Mutex, after func() int) {
	defer nd.wg.Done()
	armWarned := false
	var lastActive time.Time
	lock, unlock := func() {}, func() {}
	if mu != nil {
		lock, unlock = mu.Lock, mu.Unlock
	}
	for {
		select {
		case <-nd.stop:
			return
		default:
		}
		lock()
		progressed := false
		for w.Progress() > 0 {
			progressed = true
		}
		unlock()
		if after != nil && after() > 0 {
			progressed = true
		}
		now := time.Now()
		if progressed {
			lastActive = now
		}
		if now.Sub(lastActive) < nd.opts.Spin {
			runtime.Gosched() // polls, yielding to goroutines that wait for a thread
			continue
		}
		lock()
		armed, err := w.Arm()
		unlock()
		if err != nil {
			if !armWarned {
				armWarned = true
				nd.log.Warn("ucx transport: a worker cannot be armed for wake-ups; it polls every millisecond", "err", err)
			}
			nd.sleep(w, true)
			continue
		}
		if armed {
			nd.sleep(w, false)
		}
	}
}

// encodeLanes is the accept reply's body: [0] the number of lanes (1 to
// maxLanes), then per lane [2 bytes] the length of its receiving
// worker's address (1 to maxAddress) and the address.
func encodeLanes(addrs [][]byte) []byte {
	b := []byte{byte(len(addrs))}
	for _, a := range addrs {
		b = binary.BigEndian.AppendUint16(b, uint16(len(a)))
		b = append(b, a...)
	}
	return b
}

// maxAddress bounds one worker address in a reply.
const maxAddress = 16 << 10

// decodeLanes checks a reply's body (bytes from a peer) and returns its
// lanes' worker addresses.
func decodeLanes(b []byte) ([][]byte, error) {
	if len(b) < 1 || b[0] < 1 || b[0] > maxLanes {
		return nil, fmt.Errorf("a reply announcing %d lanes (want 1 to %d)", first(b), maxLanes)
	}
	n, rest := int(b[0]), b[1:]
	addrs := make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		if len(rest) < 2 {
			return nil, fmt.Errorf("a reply cut short in lane %d's address length", i)
		}
		k := int(binary.BigEndian.Uint16(rest))
		rest = rest[2:]
		if k < 1 || k > maxAddress || k > len(rest) {
			return nil, fmt.Errorf("lane %d's address of %d bytes (want 1 to %d, %d left)", i, k, maxAddress, len(rest))
		}
		addrs = append(addrs, rest[:k:k])
		rest = rest[k:]
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%d bytes after the last lane's address", len(rest))
	}
	return addrs, nil
}

func first(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	return int(b[0])
}

// stripeOf splits a put of n bytes over at most lanes lanes: k stripes
// of per bytes (a multiple of 64), the last one shorter where n is not k
// × per, the first on lane 0; k is 1 for a put below 2 × stripeMin.
func stripeOf(n uint64, lanes int) (k, per uint64) {
	k = min(uint64(lanes), n/stripeMin)
	if k <= 1 {
		return 1, n
	}
	per = (n/k + 63) &^ 63
	return (n + per - 1) / per, per
}
