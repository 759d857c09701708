package channels_test

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	_ "github.com/weftccl/weft/hal/host"
	"github.com/weftccl/weft/hal/plan"
)

func pingPlan(rank, semaphores int, name string) *plan.Plan {
	return &plan.Plan{Name: name, Rank: rank, NRanks: 2, Threads: 32, Semaphores: semaphores,
		Channels: []plan.Channel{{Peer: 1 - rank}},
		Groups:   []plan.Group{{Blocks: 1, Ops: []plan.Op{plan.Signal(0, 0), plan.Wait(0, 0)}}}}
}

// setup runs Setup on two goroutine ranks with the plans mk builds.
func setup(t *testing.T, job string, mk func(rank int) *plan.Plan) ([]*channels.Resources, []error) {
	t.Helper()
	boots := bootstrap.NewLocal(2)
	res := make([]*channels.Resources, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			dev, err := hal.Open("host", hal.Config{Ordinal: r, JobID: job})
			if err != nil {
				errs[r] = err
				return
			}
			t.Cleanup(func() { dev.Close() })
			res[r], errs[r] = channels.Setup(context.Background(), boots[r], dev, mk(r), 0, 0)
		}(r)
	}
	wg.Wait()
	return res, errs
}

func TestSetupRanksDisagree(t *testing.T) {
	_, errs := setup(t, "disagree", func(rank int) *plan.Plan {
		return pingPlan(rank, 1+rank, "ping") // rank 1 asks for more semaphores
	})
	for r, err := range errs {
		if !errors.Is(err, hal.ErrInvalidUsage) || !strings.Contains(err.Error(), "rank 0") || !strings.Contains(err.Error(), "rank 1") {
			t.Errorf("rank %d: %v, want ErrInvalidUsage naming ranks 0 and 1", r, err)
		}
	}
}

// A plan built for another rank is refused before any exchange, so the
// caller learns it at once rather than at the peers' deadline.
func TestSetupRejectsPlanOfAnotherRank(t *testing.T) {
	dev, err := hal.Open("host", hal.Config{Ordinal: 1, JobID: "wrongrank"})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	_, err = channels.Setup(context.Background(), bootstrap.NewLocal(2)[1], dev, pingPlan(0, 1, "ping"), 0, 0)
	if !errors.Is(err, hal.ErrInvalidArgument) || !strings.Contains(err.Error(), "rank 0 of 2") {
		t.Errorf("rank 1 with a plan for rank 0: %v, want ErrInvalidArgument naming the plan's rank", err)
	}
}

// A control block decodes into the failure a device recorded, and fresh
// resources report none.
func TestControlBlock(t *testing.T) {
	res, errs := setup(t, "check", func(rank int) *plan.Plan { return pingPlan(rank, 1, "ping") })
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	defer res[0].Close()
	defer res[1].Close()
	if err := res[0].Check(); err != nil {
		t.Fatalf("fresh resources report %v", err)
	}
	// Write a failure record the way a device would.
	ctl := make([]byte, plan.ControlBytes)
	le := binary.LittleEndian
	le.PutUint32(ctl[plan.CtlStatus:], plan.StatusTimeout)
	le.PutUint32(ctl[plan.CtlRank:], 0)
	le.PutUint32(ctl[plan.CtlPeer:], 1)
	le.PutUint32(ctl[plan.CtlChannel:], 0)
	le.PutUint32(ctl[plan.CtlSemaphore:], 0)
	le.PutUint32(ctl[plan.CtlBlock:], 0)
	le.PutUint32(ctl[plan.CtlWhat:], plan.WhatSemaphore)
	le.PutUint64(ctl[plan.CtlExpected:], 7)
	le.PutUint64(ctl[plan.CtlObserved:], 6)
	f, ok := plan.DecodeControl(ctl)
	if !ok || f.Peer != 1 || f.Expected != 7 || f.Observed != 6 {
		t.Fatalf("DecodeControl = %+v, %v", f, ok)
	}
	if s := f.String(); !strings.Contains(s, "peer rank 1") || !strings.Contains(s, "expected 7, observed 6") {
		t.Errorf("failure text %q", s)
	}
}
