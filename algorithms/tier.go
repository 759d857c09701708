package algorithms

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/weftccl/weft/hal/plan"
)

// AllReduce algorithms a Tier names.
const (
	// Algo1PA is the one-phase all-pairs LL AllReduce (AllReduce1PA).
	Algo1PA = "1pa"
	// Algo2PA is the two-phase all-pairs zero-copy AllReduce that reads
	// the peers' inputs (AllReduce2PA).
	Algo2PA = "2pa"
	// Algo2PAPush is the store-only two-phase all-pairs AllReduce with
	// windows (AllReduce2PAPush).
	Algo2PAPush = "2pa-push"
)

// Tier is one AllReduce plan of a communicator and the largest message
// (count × element size, bytes) it serves. A communicator's tiers are
// ordered by MaxBytes; a message takes the first tier whose MaxBytes is at
// least its size, and the last tier (MaxBytes 0) takes every larger one.
//
// The text form, used by WEFT_ALLREDUCE, tuning files and `weft bench`,
// is the plan's name with the bound after an @:
//
//	1pa-LL16-1x1024@4K      1PA, LL16 packets, 1 block of 1024 threads, up to 4 KiB
//	2pa-64x1024-u4@16M      2PA, 64 blocks × 1024 threads, unroll 4, up to 16 MiB
//	2pa-push-128x512-u2-w8M store-only 2PA, windows of 8 MiB per chunk, unbounded
//
// Sizes take the suffixes K, M and G (powers of 1024).
type Tier struct {
	// Algo is Algo1PA, Algo2PA or Algo2PAPush.
	Algo string
	// LL is the packet format of Algo1PA: plan.LL16 or plan.LL8.
	LL plan.Protocol
	// Shape is the launch shape: thread blocks, threads per block and, for
	// the 2PA plans, unroll; Window (bytes per chunk) for Algo2PAPush.
	// Shape.Push is set from Algo.
	Shape
	// MaxBytes is the largest message the tier serves; 0: unbounded. A
	// 1PA tier must be bounded: its scratch holds MaxBytes of packets per
	// peer.
	MaxBytes int64
}

// Name is the tier's text form without its bound ("2pa-64x1024-u4").
func (t Tier) Name() string {
	switch t.Algo {
	case Algo1PA:
		return fmt.Sprintf("%s-%s-%dx%d", t.Algo, t.LL, t.Blocks, t.Threads)
	case Algo2PAPush:
		return fmt.Sprintf("%s-%dx%d-u%d-w%s", t.Algo, t.Blocks, t.Threads, t.Unroll, FormatSize(t.Window))
	}
	return fmt.Sprintf("%s-%dx%d-u%d", t.Algo, t.Blocks, t.Threads, t.Unroll)
}

// String is the tier's text form ("1pa-LL16-1x1024@4K").
func (t Tier) String() string {
	if t.MaxBytes > 0 {
		return t.Name() + "@" + FormatSize(t.MaxBytes)
	}
	return t.Name()
}

// FormatSize writes bytes with the largest of the suffixes G, M and K
// (powers of 1024) that divides it exactly ("8M", "48K", "1000").
func FormatSize(b int64) string {
	for _, u := range []struct {
		s string
		v int64
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if b >= u.v && b%u.v == 0 {
			return strconv.FormatInt(b/u.v, 10) + u.s
		}
	}
	return strconv.FormatInt(b, 10)
}

// ParseSize reads a size in bytes: a non-negative number with an optional
// K, M or G suffix (powers of 1024) and an optional B ("8M", "4KB", "100").
func ParseSize(s string) (int64, error) {
	t := strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "B")
	mult := int64(1)
	for _, u := range []struct {
		s string
		v int64
	}{{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if strings.HasSuffix(t, u.s) {
			mult, t = u.v, strings.TrimSuffix(t, u.s)
			break
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("size %q: want a non-negative number with an optional K, M or G suffix", s)
	}
	if v > (1<<50)/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return v * mult, nil
}

// ParseTier reads one tier in its text form (see Tier).
func ParseTier(s string) (Tier, error) {
	var t Tier
	bad := func(why string, a ...any) (Tier, error) {
		return Tier{}, fmt.Errorf("algorithms: AllReduce tier %q: %s", s, fmt.Sprintf(why, a...))
	}
	name, bound, bounded := strings.Cut(strings.TrimSpace(s), "@")
	if bounded {
		var err error
		if t.MaxBytes, err = ParseSize(bound); err != nil || t.MaxBytes == 0 {
			return bad("bound %q: want a positive size", bound)
		}
	}
	f := strings.Split(name, "-")
	switch {
	case len(f) >= 2 && f[0] == "2pa" && f[1] == "push":
		t.Algo, t.Push, f = Algo2PAPush, true, f[2:]
	case f[0] == Algo1PA || f[0] == Algo2PA:
		t.Algo, f = f[0], f[1:]
	default:
		return bad("want an algorithm of %s, %s or %s first", Algo1PA, Algo2PA, Algo2PAPush)
	}
	if t.Algo == Algo1PA {
		if len(f) == 0 {
			return bad("want LL16, LL8 or LL128 after 1pa")
		}
		switch strings.ToUpper(f[0]) {
		case "LL16":
			t.LL = plan.LL16
		case "LL8":
			t.LL = plan.LL8
		case "LL128":
			t.LL = plan.LL128
		default:
			return bad("protocol %q: want LL16, LL8 or LL128", f[0])
		}
		f = f[1:]
	}
	if len(f) == 0 {
		return bad("want a launch shape BLOCKSxTHREADS")
	}
	b, th, ok := strings.Cut(f[0], "x")
	var err1, err2 error
	t.Blocks, err1 = strconv.Atoi(b)
	t.Threads, err2 = strconv.Atoi(th)
	if !ok || err1 != nil || err2 != nil {
		return bad("launch shape %q: want BLOCKSxTHREADS", f[0])
	}
	for _, opt := range f[1:] {
		var err error
		switch {
		case strings.HasPrefix(opt, "u") && t.Algo != Algo1PA:
			t.Unroll, err = strconv.Atoi(opt[1:])
		case strings.HasPrefix(opt, "w") && t.Algo == Algo2PAPush:
			t.Window, err = ParseSize(opt[1:])
		default:
			return bad("unknown part %q (1pa takes none after its shape; 2pa takes uN; 2pa-push uN and wSIZE)", opt)
		}
		if err != nil {
			return bad("%q: %v", opt, err)
		}
	}
	if err := t.validate(); err != nil {
		return bad("%v", err)
	}
	return t, nil
}

// ParseTiers reads a comma-separated list of tiers (WEFT_ALLREDUCE's
// form) and checks it as ValidateTiers does.
func ParseTiers(s string) ([]Tier, error) {
	var tiers []Tier
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		t, err := ParseTier(part)
		if err != nil {
			return nil, err
		}
		tiers = append(tiers, t)
	}
	return tiers, ValidateTiers(tiers)
}

// FormatTiers is the comma-separated text form of tiers.
func FormatTiers(tiers []Tier) string {
	s := make([]string, len(tiers))
	for i, t := range tiers {
		s[i] = t.String()
	}
	return strings.Join(s, ",")
}

func (t Tier) validate() error {
	switch t.Algo {
	case Algo1PA:
		if t.LL != plan.LL16 && t.LL != plan.LL8 && t.LL != plan.LL128 {
			return fmt.Errorf("1pa needs LL16, LL8 or LL128 packets, not %v", t.LL)
		}
		if t.Unroll != 0 || t.Window != 0 || t.Push {
			return fmt.Errorf("1pa takes no unroll or window")
		}
	case Algo2PA:
		if t.Window != 0 || t.Push {
			return fmt.Errorf("2pa takes no window (2pa-push does)")
		}
	case Algo2PAPush:
		if !t.Push || t.Window <= 0 || t.Window%plan.AlignBytes != 0 {
			return fmt.Errorf("2pa-push window %d bytes: want a positive multiple of %d", t.Window, plan.AlignBytes)
		}
	default:
		return fmt.Errorf("algorithm %q: want %s, %s or %s", t.Algo, Algo1PA, Algo2PA, Algo2PAPush)
	}
	if t.Blocks < 1 || t.Threads < 32 || t.Threads%32 != 0 || t.Threads > 1024 {
		return fmt.Errorf("%d blocks × %d threads: want at least 1 block and 32 to 1024 threads, a multiple of 32", t.Blocks, t.Threads)
	}
	if t.Unroll < 0 || t.Unroll > 16 {
		return fmt.Errorf("unroll %d: want 0 (the backend's default) to 16", t.Unroll)
	}
	if t.MaxBytes < 0 {
		return fmt.Errorf("negative bound %d", t.MaxBytes)
	}
	return nil
}

// ValidateTiers checks a communicator's AllReduce tiers: at least one,
// each well formed, bounds strictly increasing, and only the last
// unbounded (it serves every larger message). A 1PA tier needs a bound
// (its scratch holds that many bytes of packets per peer), so it cannot be
// last.
func ValidateTiers(tiers []Tier) error {
	if len(tiers) == 0 {
		return fmt.Errorf("algorithms: no AllReduce tiers")
	}
	for i, t := range tiers {
		if err := t.validate(); err != nil {
			return fmt.Errorf("algorithms: AllReduce tier %d (%s): %v", i, t, err)
		}
		last := i == len(tiers)-1
		switch {
		case t.MaxBytes == 0 && !last:
			return fmt.Errorf("algorithms: AllReduce tier %d (%s) is unbounded but is not the last", i, t)
		case last && t.Algo == Algo1PA:
			return fmt.Errorf("algorithms: AllReduce tier %d (%s): a 1pa tier cannot be last: it needs a bound (its scratch holds that many bytes of packets per peer) and the last tier serves every larger message; end with a 2pa or 2pa-push tier", i, t)
		case last && t.MaxBytes != 0:
			return fmt.Errorf("algorithms: AllReduce tier %d (%s): the last tier serves every larger message, so it takes no bound", i, t)
		case i > 0 && !last && t.MaxBytes <= tiers[i-1].MaxBytes:
			return fmt.Errorf("algorithms: AllReduce tier %d (%s): bounds must increase (the tier before serves up to %d bytes)", i, t, tiers[i-1].MaxBytes)
		}
	}
	return nil
}

// AllReduceTiers returns the communicator's AllReduce tiers: c.AllReduce
// where set, else those the legacy fields describe (1PA with LL, LLBlocks
// and Threads up to LLMaxBytes; the Mid-shaped 2PA up to MidMaxBytes when
// it differs from Large; the Large-shaped 2PA beyond).
func (c Config) AllReduceTiers() []Tier {
	if len(c.AllReduce) > 0 {
		return c.AllReduce
	}
	twoPA := func(s Shape, maxBytes int64) Tier {
		t := Tier{Algo: Algo2PA, Shape: s, MaxBytes: maxBytes}
		if t.Threads == 0 {
			t.Threads = c.Threads
		}
		if s.Push {
			t.Algo = Algo2PAPush
		} else {
			t.Window = 0
		}
		return t
	}
	tiers := []Tier{{Algo: Algo1PA, LL: c.LL, Shape: Shape{Blocks: c.LLBlocks, Threads: c.Threads}, MaxBytes: c.LLMaxBytes}}
	if c.Mid != c.Large && c.MidMaxBytes > c.LLMaxBytes {
		tiers = append(tiers, twoPA(c.Mid, c.MidMaxBytes))
	}
	return append(tiers, twoPA(c.Large, 0))
}

// ParseHBShape parses the shape of the windowed (HB) plans as
// WEFT_HB_SHAPE writes it: "BLOCKSxTHREADS", optionally followed by
// "wWINDOW" (a size as ParseSize reads it), "dDEPTH" (Shape.Depth) and
// "pPIPELINE[@FROM]" (Shape.Pipeline and, after the @, Shape.PipelineFrom
// as a size), in that order, e.g. "64x512", "32x1024w4M",
// "32x1024w2Md8p2" or "128x512p4@512K", then optionally ",pull"
// or ",push" (Shape.Pull set or cleared; only the point-to-point shape
// has a direction, and only the one-hop shapes a depth, which the caller
// checks); "pull" or "push" alone changes only the direction. The window,
// depth and direction stay base's when the text gives none. Blocks 1–256,
// threads a multiple of 32 from 32 to 1024, the window a multiple of
// plan.AlignBytes from 4 KiB to 64 MiB, the depth 2 to
// plan.MaxWindowDepth, the pipeline 1 to plan.MaxPipeline. Errors name
// what is wrong.
func ParseHBShape(s string, base Shape) (Shape, error) {
	out := base
	s = strings.TrimSpace(s)
	if s == "pull" || s == "push" {
		s = "," + s
	}
	if rest, dir, ok := strings.Cut(s, ","); ok {
		switch dir {
		case "pull":
			out.Pull = true
		case "push":
			out.Pull = false
		default:
			return base, fmt.Errorf("shape %q: direction %q: want pull or push", s, dir)
		}
		if s = rest; s == "" {
			return out, nil
		}
	}
	rest, pipe, hasPipe := strings.Cut(s, "p")
	rest, depth, hasDepth := strings.Cut(rest, "d")
	shape, window, hasWindow := strings.Cut(rest, "w")
	bs, ts, ok := strings.Cut(shape, "x")
	if !ok {
		return out, fmt.Errorf("shape %q: want BLOCKSxTHREADS[wWINDOW][dDEPTH][pPIPELINE], e.g. 64x512", s)
	}
	var err error
	if out.Blocks, err = strconv.Atoi(bs); err != nil || out.Blocks < 1 || out.Blocks > 256 {
		return base, fmt.Errorf("shape %q: blocks %q: want 1 to 256", s, bs)
	}
	if out.Threads, err = strconv.Atoi(ts); err != nil || out.Threads < 32 || out.Threads > 1024 || out.Threads%32 != 0 {
		return base, fmt.Errorf("shape %q: threads %q: want a multiple of 32 from 32 to 1024", s, ts)
	}
	if hasWindow {
		w, err := ParseSize(window)
		if err != nil || w < 4<<10 || w > 64<<20 || w%plan.AlignBytes != 0 {
			return base, fmt.Errorf("shape %q: window %q: want a multiple of %d bytes from 4K to 64M", s, window, plan.AlignBytes)
		}
		out.Window = w
	}
	if hasDepth {
		d, err := strconv.Atoi(depth)
		if err != nil || d < 2 || d > plan.MaxWindowDepth {
			return base, fmt.Errorf("shape %q: depth %q: want 2 to %d windows", s, depth, plan.MaxWindowDepth)
		}
		out.Depth = d
	}
	if hasPipe {
		pipe, from, hasFrom := strings.Cut(pipe, "@")
		n, err := strconv.Atoi(pipe)
		if err != nil || n < 1 || n > plan.MaxPipeline {
			return base, fmt.Errorf("shape %q: pipeline %q: want 1 to %d windows", s, pipe, plan.MaxPipeline)
		}
		out.Pipeline, out.PipelineFrom = n, 0
		if hasFrom {
			f, err := ParseSize(from)
			if err != nil || n < 2 || f < plan.AlignBytes || f > out.Window || f%plan.AlignBytes != 0 {
				return base, fmt.Errorf("shape %q: pipeline from %q: want a multiple of %d bytes up to the window (%d bytes), with a pipeline of 2 or more", s, from, plan.AlignBytes, out.Window)
			}
			out.PipelineFrom = f
		}
	}
	return out, nil
}
