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
// (Options.Config, Options.Timeout), the WEFT_* variables (WEFT_ALGO,
// WEFT_ALLREDUCE, WEFT_TIMEOUT), the tuning file's entry for this backend,
// device and rank count (TuningFile), the defaults for the device
// (algorithms.DefaultConfig, a 10 s timeout). An explicit Options.Config
// replaces the whole algorithm configuration: neither variables nor the
// tuning file apply to it. source says where the AllReduce tiers came from
// (PlanSource). The link kinds of the configuration (PortOnly, Switch,
// Nodes) are no choice: NewComm measures them.
func configure(opts Options, info hal.DeviceInfo, rank, nranks int) (cfg algorithms.Config, source string, timeout time.Duration, err error) {
	if opts.Config != nil {
		cfg, source = *opts.Config, "Options.Config"
	} else {
		cfg = algorithms.DefaultConfig(rank, nranks, info.Multiprocessors, info.Backend != "host")
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
	}
	if timeout = opts.Timeout; timeout <= 0 {
		if timeout, err = env.Duration("WEFT_TIMEOUT", 10*time.Second); err != nil {
			return cfg, "", 0, fmt.Errorf("weft: rank %d: %w", rank, err)
		}
	}
	return cfg, source, timeout, nil
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

// agreeOnPlans checks that every rank chose the same plans: ranks that
// read different tuning files or variables would run plans that do not
// match. The error names the first rank that differs from rank 0 and
// where each got its choice.
func agreeOnPlans(ctx context.Context, boot Bootstrap, cfg algorithms.Config, source string) error {
	if boot.Size() == 1 {
		return nil
	}
	type choice struct{ Tiers, Algo, Source string }
	mine := choice{Tiers: algorithms.FormatTiers(cfg.AllReduceTiers()), Algo: cfg.Algo, Source: source}
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
		if r == 0 {
			first = c
			continue
		}
		if c.Tiers != first.Tiers || c.Algo != first.Algo {
			return fmt.Errorf("weft: ranks chose different plans: rank 0 AllReduce %s, WEFT_ALGO %q (from %s); rank %d AllReduce %s, WEFT_ALGO %q (from %s): give every rank the same WEFT_ALLREDUCE, WEFT_ALGO and tuning file: %w",
				first.Tiers, first.Algo, first.Source, r, c.Tiers, c.Algo, c.Source, hal.ErrInvalidUsage)
		}
	}
	return nil
}
