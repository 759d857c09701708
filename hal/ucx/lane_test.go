package ucx

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftccl/weft/internal/ucx"
)

// Large puts split over lanes arrive whole before their signal, over TCP
// and shared memory, whatever number of lanes each end has (an engine
// uses as many as both have); puts below 2 × stripeMin stay on lane 0.
func TestStripedPuts(t *testing.T) {
	needUCX(t)
	t.Parallel()
	const big = 3*stripeMin + 4096 + 13 // three stripes on three lanes, the last shorter
	const small = 2*stripeMin - 8
	const sem, cnt = 0, 8
	for _, tls := range transports {
		for _, lanes := range [][2]int{{2, 2}, {3, 3}, {3, 1}, {1, 3}, {3, 2}} {
			t.Run(fmt.Sprintf("%s/%dx%d", tls, lanes[0], lanes[1]), func(t *testing.T) {
				rs := openRanksWith(t, 2, 64+big, big, func(i int) Options {
					o := testOptions(tls, StagingAuto)
					o.Lanes = lanes[i]
					return o
				}, testSecret)
				e := rs[0].eng[1].(*engine)
				use := min(lanes[0], lanes[1])
				if len(e.lanes) != use-1 {
					t.Fatalf("engine uses %d lanes beyond the first, want %d", len(e.lanes), use-1)
				}
				win := rs[0].remote[1]
				wantStripes := 0
				for k := 1; k <= 4; k++ {
					n := int64(big)
					if k%2 == 0 {
						n = small
					}
					k0, _ := stripeOf(uint64(n), use)
					wantStripes += int(k0) - 1
					payload := make([]byte, n)
					for i := range payload {
						payload[i] = byte(i*7 + k)
					}
					if err := rs[0].dev.Write(rs[0].src, 0, payload); err != nil {
						t.Fatal(err)
					}
					if err := e.Put(win.Addr()+64, rs[0].src.Addr(), n); err != nil {
						t.Fatal(err)
					}
					if err := e.Signal(win.Addr()+sem, win.Addr()+cnt, uint64(k)); err != nil {
						t.Fatal(err)
					}
					awaitWord(t, rs[1].win, sem, uint64(k), fmt.Sprintf("round %d", k))
					got := make([]byte, n)
					if err := rs[1].dev.Read(got, rs[1].win, 64); err != nil {
						t.Fatal(err)
					}
					if i := firstDiff(got, payload); i >= 0 {
						t.Fatalf("round %d (%d bytes): byte %d is %d after the signal, want %d", k, n, i, got[i], payload[i])
					}
					awaitTicket(t, e, fmt.Sprintf("round %d", k))
				}
				e.nd.wmu.Lock()
				striped := e.striped
				e.nd.wmu.Unlock()
				if striped != wantStripes {
					t.Fatalf("%d stripes went on lanes beyond the first, want %d", striped, wantStripes)
				}
				for _, x := range rs {
					if err := x.nd.Err(); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

// Lanes beyond the first carry puts only: an active message arriving on
// one is refused and recorded, not applied.
func TestMessageOnDataLaneRefused(t *testing.T) {
	needUCX(t)
	t.Parallel()
	rs := openRanks(t, 2, 4096, 4096, testOptions("tcp", StagingAuto), testSecret)
	if len(rs[1].nd.lanes) == 0 {
		t.Fatal("a NetDevice of the default options has one lane")
	}
	lib, err := ucx.Load()
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := lib.NewContext(ucx.FeatureAM|ucx.FeatureWakeup, map[string]string{"TLS": "tcp", "NET_DEVICES": "lo"})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	w, err := ctx.NewWorker(amID, maxSignal)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ep, err := w.Connect(rs[1].nd.lanes[0].raddr)
	if err != nil {
		t.Fatal(err)
	}
	req, err := ep.SendAM(amID, encodeSignal(signalMsg{kind: kindSignal, rank: 0, engine: 1, token: 1, sem: rs[1].win.Addr()}))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(failBound)
	refused := func() bool {
		for _, err := range rs[1].nd.Refused() {
			if strings.Contains(err.Error(), "lane 1") {
				return true
			}
		}
		return false
	}
	for !refused() {
		w.Progress()
		lib.Done(&req, "ucp_am_send_nbx")
		if time.Now().After(deadline) {
			t.Fatalf("no refusal recorded for a message on lane 1: %v", rs[1].nd.Refused())
		}
		time.Sleep(100 * time.Microsecond)
	}
	if got := word(rs[1].win, 0); got != 0 {
		t.Fatalf("the semaphore moved to %d", got)
	}
	cr, _ := ep.Close(true)
	for i := 0; i < 100 && cr.Pending(); i++ {
		w.Progress()
		if done, _ := lib.Done(&cr, "ucp_ep_close_nbx"); done {
			break
		}
		time.Sleep(time.Millisecond)
	}
}
