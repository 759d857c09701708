package stageprof

import (
	"testing"
	"time"
)

// TestBuckets: every duration falls in a bucket whose upper bound is at
// least the duration and at most 12.5% above it (8 buckets per octave),
// and bucket bounds increase.
func TestBuckets(t *testing.T) {
	prev := uint64(0)
	for i := 1; i < nBucket; i++ {
		u := upper(i)
		if u <= prev {
			t.Fatalf("upper(%d) = %d, not above upper(%d) = %d", i, u, i-1, prev)
		}
		prev = u
	}
	for _, d := range []uint64{1, 7, 8, 9, 15, 16, 17, 100, 1000, 12345, 1 << 20, 3<<30 + 7, 1 << 39} {
		b := bucket(d)
		if u := upper(b); u < d || float64(u) > float64(d)*1.125+1 {
			t.Errorf("bucket(%d) = %d with upper bound %d", d, b, u)
		}
		if b > 0 && upper(b-1) >= d {
			t.Errorf("bucket(%d) = %d, but bucket %d already reaches %d", d, b, b-1, upper(b-1))
		}
	}
}

// TestSummary checks count, mean, max and the percentiles (upper bounds
// of their buckets) of known durations; a nil Set records nothing.
func TestSummary(t *testing.T) {
	s := NewAlways("test", "a", "b")
	for i := 1; i <= 100; i++ {
		s.Add(0, time.Duration(i)*time.Microsecond)
	}
	m := s.Summaries()[0]
	if m.N != 100 || m.Mean != 50500*time.Nanosecond || m.Max != 100*time.Microsecond {
		t.Fatalf("summary %v", m)
	}
	near := func(name string, got, want time.Duration) {
		if got < want || float64(got) > float64(want)*1.125 {
			t.Errorf("%s = %v, want %v to 12.5%% above", name, got, want)
		}
	}
	near("p50", m.P50, 50*time.Microsecond)
	near("p90", m.P90, 90*time.Microsecond)
	near("p99", m.P99, 99*time.Microsecond)
	if b := s.Summaries()[1]; b.N != 0 {
		t.Errorf("stage b recorded %d", b.N)
	}
	var off *Set
	off.Add(0, time.Second)
	if off.On() || off.Tick() != 0 || off.Summaries() != nil || !off.Now().IsZero() {
		t.Error("a nil Set records or reads the clock")
	}
	tk := s.Tick()
	if got := s.SinceTick(1, tk); got < tk || s.Summaries()[1].N != 1 {
		t.Errorf("SinceTick: tick %d then %d, stage b n=%d", tk, got, s.Summaries()[1].N)
	}
}
