package algorithms

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// TuningVersion is the format version of tuning files this package reads
// and writes.
const TuningVersion = 1

// Tuning is a tuning file: AllReduce tiers measured on machines, written
// by `weft bench all_reduce --tune` and read by communicators (selection
// order: an explicit Options.Config, then WEFT_ALLREDUCE, then the tuning
// file's entry for the communicator's backend, device and rank count,
// then DefaultConfig). JSON:
//
//	{"version": 1, "entries": [{"backend": "nvlink", "device": "NVIDIA H200", "nranks": 2,
//	  "allreduce": ["1pa-LL16-1x1024@4K", "2pa-64x1024-u4@16M", "2pa-128x512-u2"], …}]}
type Tuning struct {
	Version int           `json:"version"`
	Entries []TuningEntry `json:"entries"`
}

// TuningEntry holds the tiers of one machine kind: a backend, a device
// name (hal.DeviceInfo.Name) and a number of ranks on one node.
type TuningEntry struct {
	Backend string `json:"backend"`
	Device  string `json:"device"`
	NRanks  int    `json:"nranks"`
	// AllReduce lists the tiers in their text form (Tier.String),
	// smallest messages first.
	AllReduce []string `json:"allreduce"`
	// What the tuner measured to choose them (for the reader; selection
	// uses AllReduce only).
	Date     string      `json:"date,omitempty"`
	Command  string      `json:"command,omitempty"`
	DataType string      `json:"datatype,omitempty"`
	Sizes    []TunedSize `json:"sizes,omitempty"`
}

// TunedSize is one message size of a tuning sweep: the fastest candidate
// plan, its time, and the default configuration's plan and time (µs per
// call, the slowest rank's).
type TunedSize struct {
	Bytes       int64   `json:"bytes"`
	Plan        string  `json:"plan"`
	TimeUS      float64 `json:"time_us"`
	DefaultPlan string  `json:"default_plan"`
	DefaultUS   float64 `json:"default_us"`
	Candidates  int     `json:"candidates"`
}

// Tiers parses and checks the entry's AllReduce tiers.
func (e *TuningEntry) Tiers() ([]Tier, error) {
	var tiers []Tier
	for _, s := range e.AllReduce {
		t, err := ParseTier(s)
		if err != nil {
			return nil, err
		}
		tiers = append(tiers, t)
	}
	return tiers, ValidateTiers(tiers)
}

func (e *TuningEntry) key() string { return fmt.Sprintf("%s/%s/%d", e.Backend, e.Device, e.NRanks) }

// Lookup returns the entry for a backend, device name and rank count, or
// nil.
func (t *Tuning) Lookup(backend, device string, nranks int) *TuningEntry {
	for i := range t.Entries {
		if e := &t.Entries[i]; e.Backend == backend && e.Device == device && e.NRanks == nranks {
			return e
		}
	}
	return nil
}

// Put adds e, replacing an entry for the same backend, device and rank
// count, and keeps entries ordered by those.
func (t *Tuning) Put(e TuningEntry) {
	t.Entries = slices.DeleteFunc(t.Entries, func(x TuningEntry) bool { return x.key() == e.key() })
	t.Entries = append(t.Entries, e)
	slices.SortFunc(t.Entries, func(a, b TuningEntry) int {
		if a.Backend != b.Backend {
			return cmp.Compare(a.Backend, b.Backend)
		}
		if a.Device != b.Device {
			return cmp.Compare(a.Device, b.Device)
		}
		return a.NRanks - b.NRanks
	})
}

// ParseTuning reads a tuning file's JSON and checks every entry's tiers.
// Errors name the entry and what is wrong.
func ParseTuning(b []byte) (*Tuning, error) {
	var t Tuning
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("tuning file: %v", err)
	}
	if t.Version != TuningVersion {
		return nil, fmt.Errorf("tuning file: version %d: this weft reads version %d", t.Version, TuningVersion)
	}
	seen := map[string]bool{}
	for i := range t.Entries {
		e := &t.Entries[i]
		if e.Backend == "" || e.Device == "" || e.NRanks < 1 {
			return nil, fmt.Errorf("tuning file: entry %d: want a backend, a device and nranks ≥ 1 (have %q, %q, %d)", i, e.Backend, e.Device, e.NRanks)
		}
		if seen[e.key()] {
			return nil, fmt.Errorf("tuning file: entry %d: a second entry for %s", i, e.key())
		}
		seen[e.key()] = true
		if _, err := e.Tiers(); err != nil {
			return nil, fmt.Errorf("tuning file: entry %d (%s): %v", i, e.key(), err)
		}
	}
	return &t, nil
}

// LoadTuning reads the tuning file at path. A missing file gives an error
// wrapping fs.ErrNotExist.
func LoadTuning(path string) (*Tuning, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := ParseTuning(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// SaveTuning writes t to path (creating its directory) through a
// temporary file renamed into place, so a reader never sees half a file.
func SaveTuning(path string, t *Tuning) error {
	t.Version = TuningVersion
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tuning-*.json")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(append(b, '\n'))
	if err := errors.Join(werr, tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
