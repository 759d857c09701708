//go:build cgo

package main

import (
	"log/slog"
	"testing"
)

// TestCTABudget: NCCL_MIN_CTAS and NCCL_MAX_CTAS override the config's
// minCTAs and maxCTAs as in NCCL (init.cc, envConfigOverride): values that
// are not positive integers are ignored, a minimum above the maximum
// becomes the maximum; 0 leaves a bound unset.
func TestCTABudget(t *testing.T) {
	cases := []struct {
		cfg              config
		minEnv, maxEnv   string
		wantMin, wantMax int
	}{
		{config{}, "", "", 0, 0},
		{config{minCTAs: 2, maxCTAs: 8}, "", "", 2, 8},
		{config{minCTAs: 2, maxCTAs: 8}, "", "4", 2, 4},
		{config{maxCTAs: 8}, "", "0", 0, 8},
		{config{maxCTAs: 8}, "", "-3", 0, 8},
		{config{maxCTAs: 8}, "", "lots", 0, 8},
		{config{}, "", "16", 0, 16},
		{config{maxCTAs: 8}, "16", "", 8, 8},
		{config{}, "3", "", 3, 0},
		{config{minCTAs: 4}, "1", " 12 ", 1, 12},
	}
	log := slog.New(slog.DiscardHandler)
	for _, k := range cases {
		t.Setenv("NCCL_MIN_CTAS", k.minEnv)
		t.Setenv("NCCL_MAX_CTAS", k.maxEnv)
		lo, hi := ctaBudget(k.cfg, log)
		if lo != k.wantMin || hi != k.wantMax {
			t.Errorf("config min %d max %d, NCCL_MIN_CTAS=%q NCCL_MAX_CTAS=%q: budget %d..%d, want %d..%d",
				k.cfg.minCTAs, k.cfg.maxCTAs, k.minEnv, k.maxEnv, lo, hi, k.wantMin, k.wantMax)
		}
	}
}
