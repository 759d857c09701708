package weft

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
)

// Options configure a communicator. Zero values mean defaults. An option
// set here wins over the WEFT_* variables, which win over the tuning file,
// which wins over the defaults (configure).
type Options struct {
	// Config overrides the algorithm configuration (block counts, LL
	// threshold); nil uses WEFT_ALGO, WEFT_ALLREDUCE, the tuning file and
	// algorithms.DefaultConfig for the device.
	Config *algorithms.Config
	// Timeout bounds every device- and host-side wait; 0: WEFT_TIMEOUT.
	Timeout time.Duration
	// MaxCTAs bounds the thread blocks (CTAs: each holds up to one SM)
	// that one launch of this communicator holds, as NCCL's
	// ncclConfig_t.maxCTAs: every plan is fitted with fewer blocks per
	// group until it fits (algorithms.BlockBudget), so that collectives
	// overlapping compute leave the compute kernels their SMs. A plan that
	// cannot run with so few (one block per group: the point-to-point
	// plan holds 2(n−1)+1 groups on n ranks) keeps its minimum, logged
	// once. 0: Config.Budget when Config sets one, else WEFT_MAX_CTAS,
	// else no bound (each plan's default blocks). Negative:
	// ErrInvalidArgument. It applies with an explicit Config too: it is a
	// property of the job's use of the GPU, not of the plans. Every rank
	// must give the same value.
	MaxCTAs int
	// MinCTAs raises plans that hold fewer blocks towards MinCTAs where
	// their shapes can grow, within MaxCTAs and the device's
	// multiprocessors, as ncclConfig_t.minCTAs. 0: Config.Budget, else
	// WEFT_MIN_CTAS, else none. Above MaxCTAs: ErrInvalidArgument.
	MinCTAs int
}

// algoFromEnv reads WEFT_ALGO.
func algoFromEnv() (string, error) {
	v := strings.ToLower(env.String("WEFT_ALGO"))
	if v == "" || slices.Contains(algorithms.Families, v) {
		return v, nil
	}
	return "", fmt.Errorf("weft: WEFT_ALGO=%q: want one of %s: %w", v, strings.Join(algorithms.Families, ", "), hal.ErrInvalidArgument)
}

// DefaultTuningFile is where communicators look for a tuning file when
// WEFT_TUNING_FILE is unset: $XDG_CONFIG_HOME/weft/tuning.json (the user's
// configuration directory, os.UserConfigDir); "" when there is none.
func DefaultTuningFile() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "weft", "tuning.json")
}

// TuningFile is the tuning file communicators read: WEFT_TUNING_FILE, or
// DefaultTuningFile when it is unset; "" when WEFT_TUNING_FILE is "off".
// named reports whether WEFT_TUNING_FILE chose it (then it must exist).
func TuningFile() (path string, named bool) {
	switch v := env.String("WEFT_TUNING_FILE"); {
	case strings.EqualFold(v, "off"):
		return "", false
	case v != "":
		return v, true
	}
	return DefaultTuningFile(), false
}

// configure assembles a communicator's configuration. It is the one place
// that applies the order of precedence, highest first: an explicit option
// (Options.Config, Options.Timeout, Options.MaxCTAs and MinCTAs), the
// WEFT_* variables (WEFT_ALGO, WEFT_ALLREDUCE, WEFT_P2P_LL_MAX_BYTES, WEFT_P2P_MID_MAX_BYTES,
// WEFT_HB_SHAPE, WEFT_P2P_SHAPE, WEFT_ROOTED_SHAPE, WEFT_RING_SHAPE, WEFT_LL128, boundVars' bounds, WEFT_TIMEOUT, WEFT_MAX_CTAS, WEFT_MIN_CTAS), the tuning file's entry for this backend,
// device and rank count (TuningFile), the defaults for the device
// (algorithms.DefaultConfig, a 10 s timeout, no block budget). An
// explicit Options.Config replaces the whole algorithm configuration:
// neither variables nor the tuning file apply to it, except the block
// budget (blockBudget). source says where the AllReduce tiers came from
// (PlanSource). The link kinds of the configuration (PortOnly, Switch,
// Nodes) are no choice: NewComm measures them; lines, whether every link
// of every rank carries LL128 lines (linkKinds), is WEFT_LL128's default
// and its bound.
func configure(opts Options, dev hal.Device, rank, nranks int, lines bool) (cfg algorithms.Config, source string, timeout time.Duration, err error) {
	info := dev.Info()
	if opts.Config != nil {
		cfg, source = *opts.Config, "Options.Config"
	} else {
		cfg = algorithms.DefaultConfig(rank, nranks, info.Multiprocessors, info.Backend != "host")
		// The copy-engine AllGather by default only where the backend has
		// measured it on its links (hal/nvlink, hal/nvswitch); hal/pcie
		// keeps the SM plans until it is.
		if p, ok := dev.(hal.CopyEnginePreference); ok {
			cfg.CEMinBytes, cfg.CEMaxBytes = p.CopyEngineMinBytes(nranks), p.CopyEngineMaxBytes(nranks)
		}
		if p, ok := dev.(hal.CopyEngineAllReducePreference); ok {
			cfg.CEAllReduceMinBytes = p.CopyEngineAllReduceMinBytes(nranks)
		}
		if p, ok := dev.(hal.CopyEngineP2PPreference); ok {
			cfg.CEP2PMinBytes = p.CopyEngineP2PMinBytes(nranks)
		}
		if p, ok := dev.(hal.CopyEngineReducePreference); ok {
			cfg.CEReduceMinBytes = p.CopyEngineReduceMinBytes(nranks)
			cfg.CEReduceDirectMinBytes = p.CopyEngineReduceDirectMinBytes(nranks)
		}
		// lines: every link of every rank carries LL128 lines (linkKinds).
		if on, err := env.Bool("WEFT_LL128", lines); err != nil {
			return cfg, "", 0, err
		} else if on && !lines {
			return cfg, "", 0, fmt.Errorf("weft: WEFT_LL128=1: not every link between the ranks carries LL128 lines as one write (%s; NVLink between two GPUs does: hal/nvlink, hal/nvswitch): %w", info.Backend, hal.ErrInvalidArgument)
		} else if on {
			cfg = cfg.WithLL128(info.Backend != "host")
		}
		if cfg.Algo, err = algoFromEnv(); err != nil {
			return cfg, "", 0, err
		}
		if s := env.String("WEFT_ALLREDUCE"); s != "" {
			if cfg.AllReduce, err = algorithms.ParseTiers(s); err != nil {
				return cfg, "", 0, fmt.Errorf("weft: WEFT_ALLREDUCE=%q: %v: %w", s, err, hal.ErrInvalidArgument)
			}
			source = "WEFT_ALLREDUCE"
		} else if cfg.AllReduce, source, err = tuningTiers(info, nranks); err != nil {
			return cfg, "", 0, err
		}
		for _, v := range shapeVars {
			if s := env.String(v.name); s != "" {
				f := v.field(&cfg)
				base := *f
				if base.Blocks == 0 { // a family with no shape of its own (RingHB) starts from HB's
					base = cfg.HB
				}
				if *f, err = algorithms.ParseHBShape(s, base); err != nil {
					return cfg, "", 0, fmt.Errorf("weft: %s: %v: %w", v.name, err, hal.ErrInvalidArgument)
				}
				if f.Pull && v.name != "WEFT_P2P_SHAPE" && v.name != "WEFT_P2P_MID_SHAPE" {
					return cfg, "", 0, fmt.Errorf("weft: %s=%q: only the point-to-point shapes (WEFT_P2P_SHAPE, WEFT_P2P_MID_SHAPE) take ,pull: %w", v.name, s, hal.ErrInvalidArgument)
				}
				if (f.Depth != 0 || f.Pipeline != 0) && (v.name == "WEFT_HB_SHAPE" || v.name == "WEFT_RING_SHAPE") {
					return cfg, "", 0, fmt.Errorf("weft: %s=%q: only the one-hop shapes (WEFT_P2P_SHAPE, WEFT_P2P_MID_SHAPE, WEFT_ROOTED_SHAPE) take a window depth or pipeline: %w", v.name, s, hal.ErrInvalidArgument)
				}
				if v.name == "WEFT_HB_SHAPE" {
					cfg.PairHB = algorithms.Shape{} // the one shape of every HB plan
				}
				if v.name == "WEFT_WIDE_LL_SHAPE" || v.name == "WEFT_ALLREDUCE_LL2_LARGE_SHAPE" {
					// LL plans have no windows: blocks and threads only.
					if strings.ContainsAny(s, "wdp,") {
						return cfg, "", 0, fmt.Errorf("weft: %s=%q: the wide LL plans take BLOCKSxTHREADS only (no window, depth, pipeline or direction): %w", v.name, s, hal.ErrInvalidArgument)
					}
					*f = algorithms.Shape{Blocks: f.Blocks, Threads: f.Threads}
				}
				if v.name == "WEFT_WIDE_LL_SHAPE" {
					// Every wide LL plan; WEFT_ALLREDUCE_LL2_LARGE_SHAPE,
					// read after it, sets the large two-phase one apart.
					cfg.RootedWideLL = *f
					if cfg.LL2Large.Blocks > 0 {
						cfg.LL2Large = *f
					}
				}
			}
		}
		var n int64
		var set bool
		if n, set, err = envSize("WEFT_CE_MIN_BYTES", 0, "a size (0: no copy-engine AllGather unless WEFT_ALGO=ce)"); err != nil {
			return cfg, "", 0, err
		} else if set {
			cfg.CEMinBytes = n
		}
		if n, set, err = envSize("WEFT_CE_MAX_BYTES", 0, "a size (0: no upper bound)"); err != nil {
			return cfg, "", 0, err
		} else if set {
			cfg.CEMaxBytes = n
		}
		if n, set, err = envSize("WEFT_CE_ALLREDUCE_MIN_BYTES", 0, "a size (0: no copy-engine AllReduce unless WEFT_ALGO=ce)"); err != nil {
			return cfg, "", 0, err
		} else if set {
			cfg.CEAllReduceMinBytes = n
		}
		if n, set, err = envSize("WEFT_CE_REDUCE_MIN_BYTES", 0, "a size (0: no copy-engine Reduce unless WEFT_ALGO=ce)"); err != nil {
			return cfg, "", 0, err
		} else if set {
			cfg.CEReduceMinBytes = n
		}
		if n, set, err = envSize("WEFT_CE_REDUCE_DIRECT_MIN_BYTES", 0, "a size (0: every size)"); err != nil {
			return cfg, "", 0, err
		} else if set {
			cfg.CEReduceDirectMinBytes = n
		}
		if n, set, err = envSize("WEFT_CE_P2P_MIN_BYTES", 0, "a size (0: no copy-engine point-to-point)"); err != nil {
			return cfg, "", 0, err
		} else if set {
			cfg.CEP2PMinBytes = n
		}
		if n, set, err = envSize("WEFT_CE_ALLREDUCE_MAX_BYTES", 0, "a size (0: no upper bound)"); err != nil {
			return cfg, "", 0, err
		} else if set {
			cfg.CEAllReduceMaxBytes = n
		}
		for _, v := range boundVars {
			if n, set, err = envSize(v.name, 0, "a size (0: "+v.zero+")"); err != nil {
				return cfg, "", 0, err
			} else if set {
				*v.field(&cfg) = n
			}
		}
		if n, set, err = envSize("WEFT_WINDOW_LL_MAX_BYTES", 0, "a size (0: every collective through a symmetric window that Launch gives an LL plan leaves it)"); err != nil {
			return cfg, "", 0, err
		} else if set {
			cfg.WindowLLMaxBytes = n
		}
		if s := env.String("WEFT_CE_ALLREDUCE_SHAPE"); s != "" {
			sh, err := algorithms.ParseHBShape(s, cfg.CEAllReduce)
			if err != nil || sh.Window <= 0 || sh.Window%16 != 0 || sh.Pull || sh.Depth == 1 || sh.Depth > 8 || sh.Pipeline != 0 {
				return cfg, "", 0, fmt.Errorf("weft: WEFT_CE_ALLREDUCE_SHAPE=%q: want BLOCKSxTHREADS[wWINDOW][dSLOTS] with a window a multiple of 16 bytes and 2 to 8 landing slots per peer (%v): %w", s, err, hal.ErrInvalidArgument)
			}
			cfg.CEAllReduce = sh
		}
		if n, set, err = envSize("WEFT_P2P_LL_MAX_BYTES", 16<<20, "a size from 0 (no LL point-to-point) to 16M"); err != nil {
			return cfg, "", 0, err
		} else if set {
			// The largest LL operation: the narrow plan's bound where it
			// is at most that, else the wide plan's.
			if n <= cfg.P2PLLMaxBytes {
				cfg.P2PLLMaxBytes, cfg.P2PLLWideMaxBytes = n, 0
			} else {
				cfg.P2PLLWideMaxBytes = n
			}
			cfg.P2PLLSmallMaxBytes = min(cfg.P2PLLSmallMaxBytes, n)
		}
		if n, set, err = envSize("WEFT_PORT_LL_MAX_BYTES", 1<<20, "a size from 0 (no LL plans over the network) to 1M"); err != nil {
			return cfg, "", 0, err
		} else if set {
			cfg.PortLLMaxBytes = n
		}
		if n, set, err = envSize("WEFT_P2P_MID_MAX_BYTES", 1<<30, "a size from 0 (no mid-size point-to-point plan) to 1G"); err != nil {
			return cfg, "", 0, err
		} else if set {
			if cfg.P2PMidMaxBytes = n; n > 0 && cfg.P2PMid.Blocks == 0 {
				cfg.P2PMid = cfg.P2P // shaped by WEFT_P2P_MID_SHAPE, or like the large plan
			}
		}
	}
	if cfg.Budget, err = blockBudget(opts, info, rank); err != nil {
		return cfg, "", 0, err
	}
	if timeout = opts.Timeout; timeout <= 0 {
		if timeout, err = env.Duration("WEFT_TIMEOUT", 10*time.Second); err != nil {
			return cfg, "", 0, fmt.Errorf("weft: rank %d: %w", rank, err)
		}
	}
	return cfg, source, timeout, nil
}

// blockBudget is the communicator's block budget, each bound from the
// first of Options.MaxCTAs (MinCTAs), Options.Config.Budget and
// WEFT_MAX_CTAS (WEFT_MIN_CTAS) that sets it; SMs is the device's
// multiprocessor count. Errors (ErrInvalidArgument) name the option or
// variable: a negative option, a variable that is not a positive integer
// (env.Check's form), a minimum above the maximum.
func blockBudget(opts Options, info hal.DeviceInfo, rank int) (algorithms.BlockBudget, error) {
	var b algorithms.BlockBudget
	if opts.Config != nil {
		b = opts.Config.Budget
	}
	from := [2]string{"Options.Config.Budget", "Options.Config.Budget"}
	for i, bound := range []struct {
		opt  int
		name string
		v    string
		dst  *int
	}{{opts.MinCTAs, "Options.MinCTAs", "WEFT_MIN_CTAS", &b.Min}, {opts.MaxCTAs, "Options.MaxCTAs", "WEFT_MAX_CTAS", &b.Max}} {
		switch {
		case bound.opt < 0:
			return b, fmt.Errorf("weft: rank %d: %s %d: want a positive number of thread blocks, or 0 for none: %w", rank, bound.name, bound.opt, hal.ErrInvalidArgument)
		case bound.opt > 0:
			*bound.dst, from[i] = bound.opt, bound.name
		case *bound.dst == 0:
			if err := env.Check(bound.v); err != nil {
				return b, fmt.Errorf("weft: rank %d: %w", rank, err)
			}
			v, ok, err := env.Int(bound.v)
			if err != nil {
				return b, fmt.Errorf("weft: rank %d: %w", rank, err)
			}
			if ok {
				*bound.dst, from[i] = v, bound.v
			}
		}
	}
	b.SMs = info.Multiprocessors
	if err := b.Validate(); err != nil {
		return b, fmt.Errorf("weft: rank %d: %s and %s: %v: %w", rank, from[0], from[1], err, hal.ErrInvalidArgument)
	}
	if b.Set() {
		env.Logger("INIT").Info("block budget: every plan is fitted to it", "rank", rank, "budget", b.String(),
			"min_from", from[0], "max_from", from[1], "sms", b.SMs)
	}
	return b, nil
}

// tuningTiers reads the AllReduce tiers of the tuning file's entry for
// this backend, device and rank count; nil (the defaults) where there is
// no tuning file or no entry. source says which, for logs and for the
// ranks' agreement check.
func tuningTiers(info hal.DeviceInfo, nranks int) (tiers []algorithms.Tier, source string, err error) {
	path, named := TuningFile()
	if path == "" {
		return nil, "default", nil
	}
	t, err := algorithms.LoadTuning(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !named:
		return nil, "default", nil
	case err != nil:
		return nil, "", fmt.Errorf("weft: tuning file (WEFT_TUNING_FILE): %v: %w", err, hal.ErrInvalidArgument)
	}
	e := t.Lookup(info.Backend, info.Name, nranks)
	if e == nil {
		env.Logger("INIT").Info("tuning file has no entry for this machine; default AllReduce plans",
			"file", path, "backend", info.Backend, "device", info.Name, "nranks", nranks)
		return nil, "default", nil
	}
	tiers, err = e.Tiers() // checked by LoadTuning
	return tiers, "tuning file " + path, err
}

// boundVars are the size variables that move where one plan family takes
// over from another (algorithms.Config's bounds), for measuring them on a
// new machine without rebuilding; every rank must set the same
// (agreeOnPlans). zero says what 0 means.
var boundVars = []struct {
	name, what, zero string
	field            func(*algorithms.Config) *int64
}{
	{"WEFT_RING_MIN_BYTES", "ring bounds", "off", func(c *algorithms.Config) *int64 { return &c.RingMinBytes }},
	{"WEFT_ALLREDUCE_LL2_MAX_BYTES", "two-phase LL AllReduce bounds", "off", func(c *algorithms.Config) *int64 { return &c.ScratchLL2PAMaxBytes }},
	{"WEFT_ALLREDUCE_LL2_LARGE_MAX_BYTES", "large two-phase LL AllReduce bounds", "off", func(c *algorithms.Config) *int64 { return &c.ScratchLL2PALargeMaxBytes }},
	{"WEFT_ROOTED_LL_MAX_BYTES", "LL bounds of Broadcast and Reduce", "the collectives' LL bound", func(c *algorithms.Config) *int64 { return &c.RootedLLMaxBytes }},
	{"WEFT_REDUCE_LL_MAX_BYTES", "LL bounds of Reduce", "WEFT_ROOTED_LL_MAX_BYTES's", func(c *algorithms.Config) *int64 { return &c.ReduceLLMaxBytes }},
	{"WEFT_ALLREDUCE_LL_MAX_BYTES", "wide one-phase LL AllReduce bounds", "none", func(c *algorithms.Config) *int64 { return &c.ScratchLLMaxBytes }},
	{"WEFT_COLL_LL_MAX_BYTES", "LL bounds of AllGather, ReduceScatter and AllToAll", "no LL plans", func(c *algorithms.Config) *int64 { return &c.CollLLMaxBytes }},
	{"WEFT_ALLGATHER_LL_MAX_BYTES", "LL bounds of AllGather", "WEFT_COLL_LL_MAX_BYTES's", func(c *algorithms.Config) *int64 { return &c.AllGatherLLMaxBytes }},
	{"WEFT_BROADCAST_SPLIT_LL_MAX_BYTES", "split LL Broadcast bounds", "off", func(c *algorithms.Config) *int64 { return &c.BroadcastSplitLLMaxBytes }},
	{"WEFT_REDUCE_SPLIT_LL_MAX_BYTES", "split LL Reduce bounds", "off", func(c *algorithms.Config) *int64 { return &c.ReduceSplitLLMaxBytes }},
	{"WEFT_ROOTED_SPLIT_MIN_BYTES", "split Broadcast/Reduce bounds", "off", func(c *algorithms.Config) *int64 { return &c.RootedSplitMinBytes }},
}

// shapeVars are the variables that override a windowed plan family's
// shape (algorithms.ParseHBShape's text), for measuring shapes on a new
// GPU without rebuilding; every rank must set the same (agreeOnPlans).
var shapeVars = []struct {
	name  string
	field func(*algorithms.Config) *algorithms.Shape
}{
	{"WEFT_HB_SHAPE", func(c *algorithms.Config) *algorithms.Shape { return &c.HB }},
	{"WEFT_P2P_SHAPE", func(c *algorithms.Config) *algorithms.Shape { return &c.P2P }},
	{"WEFT_P2P_MID_SHAPE", func(c *algorithms.Config) *algorithms.Shape { return &c.P2PMid }},
	{"WEFT_ROOTED_SHAPE", func(c *algorithms.Config) *algorithms.Shape { return &c.RootedHB }},
	{"WEFT_RING_SHAPE", func(c *algorithms.Config) *algorithms.Shape { return &c.RingHB }},
	{"WEFT_WIDE_LL_SHAPE", func(c *algorithms.Config) *algorithms.Shape { return &c.WideLL }},
	{"WEFT_ALLREDUCE_LL2_LARGE_SHAPE", func(c *algorithms.Config) *algorithms.Shape { return &c.LL2Large }},
}

// agreeOnPlans checks that every rank chose the same plans: ranks that
// read different tuning files or variables would run plans that do not
// match. The error names the first rank that differs from rank 0 and
// where each got its choice.
func agreeOnPlans(ctx context.Context, boot Bootstrap, cfg algorithms.Config, source string) error {
	if boot.Size() == 1 {
		return nil
	}
	type choice struct {
		Tiers, Algo, Source, Budget  string
		P2PLL, P2PLLSmall, CE, CEMax int64
		CEAR, CEARMax                int64
		HB, PairHB, P2P, Rooted      algorithms.Shape
		RingShape, WideLL, LL2Large  algorithms.Shape
		CEARShape                    algorithms.Shape
		P2PMid                       algorithms.Shape
		P2PMidMax, PortLL            int64
		WideProto                    string
		WindowLL, CEP2P, CERed       int64
		CERedDirect                  int64
		Bounds                       []int64 // boundVars' values, in order
	}
	mine := choice{Tiers: algorithms.FormatTiers(cfg.AllReduceTiers()), Algo: cfg.Algo, Source: source, Budget: budgetKey(cfg.Budget),
		P2PLL: max(cfg.P2PLLMaxBytes, cfg.P2PLLWideMaxBytes), P2PLLSmall: cfg.P2PLLSmallMaxBytes, CE: cfg.CEMinBytes, CEMax: cfg.CEMaxBytes,
		CEAR: cfg.CEAllReduceMinBytes, CEARMax: cfg.CEAllReduceMaxBytes, CEARShape: cfg.CEAllReduce, HB: cfg.HB, PairHB: cfg.PairHB, RingShape: cfg.RingHB, WideLL: cfg.WideLL, LL2Large: cfg.LL2Large, P2P: cfg.P2P, Rooted: cfg.RootedHB,
		P2PMid: cfg.P2PMid, P2PMidMax: cfg.P2PMidMaxBytes, PortLL: cfg.PortLLMaxBytes, WindowLL: cfg.WindowLLMaxBytes, CEP2P: cfg.CEP2PMinBytes, CERed: cfg.CEReduceMinBytes,
		CERedDirect: cfg.CEReduceDirectMinBytes, WideProto: cfg.WideProto.String()}
	for _, v := range boundVars {
		mine.Bounds = append(mine.Bounds, *v.field(&cfg))
	}
	b, _ := json.Marshal(mine)
	all, err := boot.AllGather(ctx, b)
	if err != nil {
		return fmt.Errorf("weft: exchange plan choices: %w", err)
	}
	var first choice
	for r, x := range all {
		var c choice
		if err := json.Unmarshal(x, &c); err != nil {
			return fmt.Errorf("weft: rank %d sent a malformed plan choice: %v: %w", r, err, hal.ErrRemote)
		}
		if len(c.Bounds) != len(boundVars) {
			return fmt.Errorf("weft: rank %d sent %d plan bounds, want %d: %w", r, len(c.Bounds), len(boundVars), hal.ErrRemote)
		}
		if r == 0 {
			first = c
			continue
		}
		if c.Tiers != first.Tiers || c.Algo != first.Algo {
			return fmt.Errorf("weft: ranks chose different plans: rank 0 AllReduce %s, WEFT_ALGO %q (from %s); rank %d AllReduce %s, WEFT_ALGO %q (from %s): give every rank the same WEFT_ALLREDUCE, WEFT_ALGO and tuning file: %w",
				first.Tiers, first.Algo, first.Source, r, c.Tiers, c.Algo, c.Source, hal.ErrInvalidUsage)
		}
		if c.P2PLL != first.P2PLL || c.P2PLLSmall != first.P2PLLSmall {
			// A sender and its receiver pick the LL or the windowed
			// point-to-point plan from the operation's size alike.
			return fmt.Errorf("weft: ranks chose different LL point-to-point bounds: rank 0 %d bytes (one block per group to %d), rank %d %d bytes (to %d): give every rank the same WEFT_P2P_LL_MAX_BYTES: %w",
				first.P2PLL, first.P2PLLSmall, r, c.P2PLL, c.P2PLLSmall, hal.ErrInvalidUsage)
		}
		if c.CE != first.CE || (c.CE > 0 && c.CEMax != first.CEMax) {
			// An AllGather runs on copy engines on every rank or on none.
			return fmt.Errorf("weft: ranks chose different copy-engine AllGather bounds: rank 0 %s, rank %d %s (WEFT_CE_MIN_BYTES, WEFT_CE_MAX_BYTES, or a device without usable stream operations): %w",
				ceBounds(first.CE, first.CEMax), r, ceBounds(c.CE, c.CEMax), hal.ErrInvalidUsage)
		}
		if c.CEAR != first.CEAR || (c.CEAR > 0 && c.CEARMax != first.CEARMax) || c.CEARShape.Window != first.CEARShape.Window || c.CEARShape.Depth != first.CEARShape.Depth {
			// An AllReduce runs on copy engines on every rank or on none,
			// with the same windows.
			return fmt.Errorf("weft: ranks chose different copy-engine AllReduce bounds or windows: rank 0 %s, windows of %d bytes in %d slots; rank %d %s, windows of %d bytes in %d slots (WEFT_CE_ALLREDUCE_MIN_BYTES, WEFT_CE_ALLREDUCE_MAX_BYTES, WEFT_CE_ALLREDUCE_SHAPE, or a device without usable stream operations): %w",
				ceBounds(first.CEAR, first.CEARMax), first.CEARShape.Window, first.CEARShape.Depth, r, ceBounds(c.CEAR, c.CEARMax), c.CEARShape.Window, c.CEARShape.Depth, hal.ErrInvalidUsage)
		}
		if c.WideProto != first.WideProto {
			// The wide LL plans' packets pair up across ranks.
			return fmt.Errorf("weft: ranks chose different packet formats for the wide LL plans: rank 0 %s, rank %d %s: give every rank the same WEFT_LL128, and devices alike: %w",
				first.WideProto, r, c.WideProto, hal.ErrInvalidUsage)
		}
		if c.WindowLL != first.WindowLL {
			// A collective through symmetric windows takes the same plan
			// on every rank.
			return fmt.Errorf("weft: ranks chose different LL bounds for symmetric windows: rank 0 %d bytes, rank %d %d bytes: give every rank the same WEFT_WINDOW_LL_MAX_BYTES: %w",
				first.WindowLL, r, c.WindowLL, hal.ErrInvalidUsage)
		}
		if c.CERedDirect != first.CERedDirect {
			// Both ranks of a copy-engine Reduce pick one of its forms.
			return fmt.Errorf("weft: ranks chose different bounds for the copy-engine Reduce into the root's output: rank 0 %d bytes, rank %d %d bytes: give every rank the same WEFT_CE_REDUCE_DIRECT_MIN_BYTES: %w",
				first.CERedDirect, r, c.CERedDirect, hal.ErrInvalidUsage)
		}
		if c.CERed != first.CERed {
			// A Reduce runs on copy engines on every rank or on none.
			return fmt.Errorf("weft: ranks chose different copy-engine Reduce bounds: rank 0 %d bytes, rank %d %d bytes (0: off): give every rank the same WEFT_CE_REDUCE_MIN_BYTES, and devices whose stream operations are usable: %w",
				first.CERed, r, c.CERed, hal.ErrInvalidUsage)
		}
		if c.CEP2P != first.CEP2P {
			// A sender and its receiver pick copy engines or kernels from
			// the operation's size alike.
			return fmt.Errorf("weft: ranks chose different copy-engine point-to-point bounds: rank 0 %d bytes, rank %d %d bytes (0: off): give every rank the same WEFT_CE_P2P_MIN_BYTES, and devices whose stream operations are usable: %w",
				first.CEP2P, r, c.CEP2P, hal.ErrInvalidUsage)
		}
		if c.P2PMid != first.P2PMid || c.P2PMidMax != first.P2PMidMax {
			// A sender and its receiver pick the mid-size windowed plan
			// from the operation's size alike, and its groups pair up.
			return fmt.Errorf("weft: ranks chose different mid-size point-to-point plans: rank 0 %+v up to %d bytes, rank %d %+v up to %d bytes: give every rank the same WEFT_P2P_MID_SHAPE: %w",
				first.P2PMid, first.P2PMidMax, r, c.P2PMid, c.P2PMidMax, hal.ErrInvalidUsage)
		}
		if c.PortLL != first.PortLL {
			// Every rank of a network collective picks the LL port plan
			// or the windowed one from the size alike.
			return fmt.Errorf("weft: ranks chose different LL bounds over the network: rank 0 %d bytes, rank %d %d bytes: give every rank the same WEFT_PORT_LL_MAX_BYTES: %w",
				first.PortLL, r, c.PortLL, hal.ErrInvalidUsage)
		}
		if c.HB != first.HB || c.PairHB != first.PairHB || c.RingShape != first.RingShape || c.P2P != first.P2P || c.Rooted != first.Rooted {
			// The windowed plans' blocks and windows pair up across ranks.
			return fmt.Errorf("weft: ranks chose different windowed-plan shapes: rank 0 HB %+v (two-group %+v, ring %+v), point-to-point %+v, rooted %+v; rank %d HB %+v (two-group %+v, ring %+v), point-to-point %+v, rooted %+v: give every rank the same WEFT_HB_SHAPE, WEFT_RING_SHAPE, WEFT_P2P_SHAPE and WEFT_ROOTED_SHAPE: %w",
				first.HB, first.PairHB, first.RingShape, first.P2P, first.Rooted, r, c.HB, c.PairHB, c.RingShape, c.P2P, c.Rooted, hal.ErrInvalidUsage)
		}
		if c.WideLL != first.WideLL || c.LL2Large != first.LL2Large {
			// A wide LL plan's blocks split every segment alike on every rank.
			return fmt.Errorf("weft: ranks chose different wide LL shapes: rank 0 %+v (large two-phase %+v), rank %d %+v (large two-phase %+v): give every rank the same WEFT_WIDE_LL_SHAPE and WEFT_ALLREDUCE_LL2_LARGE_SHAPE (and GPUs with as many multiprocessors): %w",
				first.WideLL, first.LL2Large, r, c.WideLL, c.LL2Large, hal.ErrInvalidUsage)
		}
		for i, v := range boundVars {
			if c.Bounds[i] != first.Bounds[i] {
				// Every rank picks the plan of a size alike.
				return fmt.Errorf("weft: ranks chose different %s: rank 0 %d bytes, rank %d %d bytes (0: %s): give every rank the same %s: %w",
					v.what, first.Bounds[i], r, c.Bounds[i], v.zero, v.name, hal.ErrInvalidUsage)
			}
		}
		if c.Budget != first.Budget {
			// Blocks that signal each other pair up across ranks: every
			// rank must fit its plans to the same budget.
			return fmt.Errorf("weft: ranks chose different block budgets: rank 0 %s, rank %d %s: give every rank the same MaxCTAs and MinCTAs (ncclConfig_t, NCCL_MAX_CTAS, WEFT_MAX_CTAS, …): %w",
				first.Budget, r, c.Budget, hal.ErrInvalidUsage)
		}
	}
	return nil
}

// budgetKey is what the ranks must agree on of a block budget: its bounds,
// and the multiprocessors where a minimum raises plans towards them.
func budgetKey(b algorithms.BlockBudget) string {
	if b.Min > 0 {
		return fmt.Sprintf("%s within %d SMs", b, b.SMs)
	}
	return b.String()
}

// ceBounds is the copy-engine AllGather's range for a message: "N bytes"
// (from N, no upper bound) or "N to M bytes".
func ceBounds(lo, hi int64) string {
	if hi <= 0 {
		return fmt.Sprintf("%d bytes", lo)
	}
	return fmt.Sprintf("%d to %d bytes", lo, hi)
}

// envSize reads the variable name as a byte size from 0 to hi (hi 0: no
// upper limit); set is false where it is unset. want says what a value
// means, for the error, which wraps hal.ErrInvalidArgument.
func envSize(name string, hi int64, want string) (n int64, set bool, err error) {
	s := env.String(name)
	if s == "" {
		return 0, false, nil
	}
	n, perr := algorithms.ParseSize(s)
	if perr != nil || n < 0 || (hi > 0 && n > hi) {
		return 0, false, fmt.Errorf("weft: %s=%q: want %s: %w", name, s, want, hal.ErrInvalidArgument)
	}
	return n, true, nil
}
