// Package stageprof times the stages of weft's host-side request paths —
// the port-channel proxy (channels), the socket transport (hal/socket) and
// a collective call's launch path (weft.Comm.Launch, libweft_nccl) — when
// WEFT_PROXY_PROFILE=1, and logs a summary per stage when the
// component closes: count, mean, percentiles and maximum of the time a
// request spent in the stage.
//
// It exists to find where a put-with-signal's latency goes (issue 20 §4,
// issue 22): the device's push, the proxy noticing it, the engine calls,
// the engine completing, the transport's hand-offs between goroutines.
// Off (the default) a [Set] is nil and every method returns at once; on,
// a stage costs a clock read and a few atomic adds.
//
// Durations go into logarithmic buckets, 8 per octave (a 9% resolution),
// from 1 ns to about 18 minutes; percentiles are the upper bounds of
// their buckets.
package stageprof

import (
	"context"
	"fmt"
	"log/slog"
	"math/bits"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftccl/weft/internal/env"
)

var (
	onceEnabled sync.Once
	enabled     bool
)

// Enabled reports whether WEFT_PROXY_PROFILE is 1 (read once).
func Enabled() bool {
	onceEnabled.Do(func() { enabled = env.String("WEFT_PROXY_PROFILE") == "1" })
	return enabled
}

const (
	subBits = 3 // 8 buckets per octave
	octaves = 40
	nBucket = octaves << subBits
)

// Stage accumulates the durations of one stage. Its methods are safe for
// concurrent use.
type Stage struct {
	Name    string
	n, sum  atomic.Uint64
	max     atomic.Uint64
	buckets [nBucket]atomic.Uint64
}

// bucket returns the bucket of d nanoseconds (d ≥ 1).
func bucket(d uint64) int {
	if d < 1<<subBits {
		return int(d)
	}
	o := bits.Len64(d) - 1 // octave: 2^o ≤ d < 2^(o+1)
	sub := (d >> (o - subBits)) & (1<<subBits - 1)
	i := (o-subBits+1)<<subBits + int(sub)
	return min(i, nBucket-1)
}

// upper returns the largest duration (ns) of bucket i.
func upper(i int) uint64 {
	if i < 1<<subBits {
		return uint64(i)
	}
	o := i>>subBits + subBits - 1
	sub := uint64(i & (1<<subBits - 1))
	return (1<<o | sub<<(o-subBits)) + 1<<(o-subBits) - 1
}

// Add records one duration.
func (s *Stage) Add(d time.Duration) {
	v := uint64(max(d, 1))
	s.n.Add(1)
	s.sum.Add(v)
	s.buckets[bucket(v)].Add(1)
	for m := s.max.Load(); v > m && !s.max.CompareAndSwap(m, v); m = s.max.Load() {
	}
}

// Summary is a stage's statistics.
type Summary struct {
	Name                     string
	N                        uint64
	Mean, P50, P90, P99, Max time.Duration
}

func (m Summary) String() string {
	if m.N == 0 {
		return m.Name + ": none"
	}
	return fmt.Sprintf("%s: n=%d mean=%v p50≤%v p90≤%v p99≤%v max=%v", m.Name, m.N, m.Mean, m.P50, m.P90, m.P99, m.Max)
}

// Summary returns the stage's statistics so far.
func (s *Stage) Summary() Summary {
	m := Summary{Name: s.Name, N: s.n.Load()}
	if m.N == 0 {
		return m
	}
	m.Mean = time.Duration(s.sum.Load() / m.N)
	m.Max = time.Duration(s.max.Load())
	var seen uint64
	targets := []struct {
		q   float64
		out *time.Duration
	}{{0.5, &m.P50}, {0.9, &m.P90}, {0.99, &m.P99}}
	t := 0
	for i := range s.buckets {
		seen += s.buckets[i].Load()
		for t < len(targets) && float64(seen) >= targets[t].q*float64(m.N) {
			*targets[t].out = time.Duration(min(upper(i), uint64(m.Max)))
			t++
		}
	}
	for ; t < len(targets); t++ {
		*targets[t].out = m.Max
	}
	return m
}

// Set is the stages of one component (a proxy, a socket engine). A nil
// Set records nothing.
type Set struct {
	name   string
	stages []*Stage
}

// New returns a Set of the named stages, or nil when profiling is off.
func New(name string, stages ...string) *Set {
	if !Enabled() {
		return nil
	}
	return NewAlways(name, stages...)
}

// NewAlways returns a Set whatever WEFT_PROXY_PROFILE says (tests).
func NewAlways(name string, stages ...string) *Set {
	s := &Set{name: name}
	for _, n := range stages {
		s.stages = append(s.stages, &Stage{Name: n})
	}
	return s
}

// On reports whether s records (s is not nil).
func (s *Set) On() bool { return s != nil }

// Now returns the time for a later Since, or the zero time when s is nil
// (no clock read).
func (s *Set) Now() time.Time {
	if s == nil {
		return time.Time{}
	}
	return time.Now()
}

// Add records d in stage i.
func (s *Set) Add(i int, d time.Duration) {
	if s != nil {
		s.stages[i].Add(d)
	}
}

// Since records the time since t in stage i; it returns now, so that
// consecutive stages chain. A zero t records nothing.
func (s *Set) Since(i int, t time.Time) time.Time {
	if s == nil {
		return time.Time{}
	}
	now := time.Now()
	if !t.IsZero() {
		s.stages[i].Add(now.Sub(t))
	}
	return now
}

// Summaries returns every stage's statistics (nil for a nil Set).
func (s *Set) Summaries() []Summary {
	if s == nil {
		return nil
	}
	out := make([]Summary, len(s.stages))
	for i, st := range s.stages {
		out[i] = st.Summary()
	}
	return out
}

// String is the summary, one stage per line after the set's name.
func (s *Set) String() string {
	if s == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("profile of " + s.name)
	for _, m := range s.Summaries() {
		b.WriteString("\n  " + m.String())
	}
	return b.String()
}

// Log writes the summary to l at level WARN, one record per stage (so
// that WEFT_DEBUG=WARN shows it), or to standard error when l discards
// WARN: someone who set WEFT_PROXY_PROFILE wants to see it.
func (s *Set) Log(l *slog.Logger) {
	if s == nil {
		return
	}
	if l == nil || !l.Enabled(context.Background(), slog.LevelWarn) {
		l = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	for _, m := range s.Summaries() {
		if m.N == 0 {
			continue
		}
		l.Warn("profile", "of", s.name, "stage", m.Name, "n", m.N, "mean", m.Mean, "p50", m.P50, "p90", m.P90, "p99", m.P99, "max", m.Max)
	}
}

// epoch is the origin of Tick.
var epoch = time.Now()

// Tick returns a monotonic timestamp in nanoseconds for a later SinceTick,
// compact enough to ride along with a queued request; 0 when s is nil.
func (s *Set) Tick() int64 {
	if s == nil {
		return 0
	}
	return int64(time.Since(epoch))
}

// SinceTick records the time since tick t (from Tick) in stage i and
// returns now as a tick. A zero t records nothing.
func (s *Set) SinceTick(i int, t int64) int64 {
	if s == nil {
		return 0
	}
	now := int64(time.Since(epoch))
	if t != 0 {
		s.stages[i].Add(time.Duration(now - t))
	}
	return now
}
