package bootstrap

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A probe returns every rank's report: answered ones at once, a rank that
// does not answer (its progress function is stuck) as silent at the
// deadline, and a rank that left with the last report it announced.
func TestProbeProgress(t *testing.T) {
	boots := NewLocal(4)
	defer func() {
		for _, b := range boots {
			b.Close()
		}
	}()
	stuck := make(chan struct{})
	defer close(stuck)
	for r, b := range boots {
		p := b.(Prober)
		switch r {
		case 2:
			p.SetProgress(func() []byte { <-stuck; return nil })
		default:
			p.SetProgress(func() []byte { return []byte("calls=" + strconv.Itoa(10+r)) })
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	boots[3].(Prober).Announce(ctx, []byte("leaving"))
	boots[3].Close()

	start := time.Now()
	pctx, pcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	got := boots[0].(Prober).ProbeProgress(pctx)
	pcancel()
	took := time.Since(start)
	want := []PeerProgress{
		{Rank: 0, State: PeerAnswered, Report: []byte("calls=10")},
		{Rank: 1, State: PeerAnswered, Report: []byte("calls=11")},
		{Rank: 2, State: PeerSilent},
		{Rank: 3, State: PeerLeft, Report: []byte("leaving")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("probe (-want +got):\n%s", diff)
	}
	if took < 300*time.Millisecond || took > 3*time.Second {
		t.Errorf("probe took %v, want its 300 ms deadline (a silent rank is waited for until then, not longer)", took)
	}

}

// Without a silent rank a probe returns as soon as every rank answered,
// long before its deadline.
func TestProbeProgressAllAnswer(t *testing.T) {
	boots := NewLocal(3)
	defer func() {
		for _, b := range boots {
			b.Close()
		}
	}()
	for r, b := range boots {
		b.(Prober).SetProgress(func() []byte { return []byte{byte(r)} })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	got := boots[1].(Prober).ProbeProgress(ctx)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("probe took %v although every rank answers", took)
	}
	want := []PeerProgress{{0, PeerAnswered, []byte{0}}, {1, PeerAnswered, []byte{1}}, {2, PeerAnswered, []byte{2}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("probe (-want +got):\n%s", diff)
	}
}
