package conformance

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/weftccl/weft/hal"
)

// Mode says how the ranks of a test run.
type Mode uint8

const (
	// Goroutines: every rank is a goroutine of this process with its own
	// device; all ranks of the run take part.
	Goroutines Mode = iota
	// Processes: every rank is a separate process started from the
	// current executable (see MaybeWorker); all ranks take part.
	Processes
	// Pairs: the test runs once per ordered pair of ranks (each link in
	// each direction), as ranks 0 and 1 of a two-rank job of goroutines.
	// Quality tests use it to measure every link.
	Pairs
)

func (m Mode) String() string {
	switch m {
	case Goroutines:
		return "goroutines"
	case Processes:
		return "processes"
	case Pairs:
		return "pairs"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// Case is one conformance test. Its body runs on every rank and is written
// only against the HAL contract, so it runs unchanged on every backend.
type Case struct {
	// ID is "section/name", section being the Section of Capability
	// ("device", "memory-mapped", "port-mapped", "switch-mapped").
	ID string
	// Capability is what the links between the ranks must offer for the
	// test to run; 0 for device-level tests. When a link lacks it the test
	// is NotSupported.
	Capability hal.Capability
	// Title says in one line what the test proves.
	Title string
	Mode  Mode
	// MinRanks is the number of ranks the test needs (at least 1).
	MinRanks int
	// Quality marks quality tests: their figures are compared with floors,
	// and a figure below its floor is a QualityWarning, not a Fail.
	Quality bool
	// Run is the body, called once per rank. A returned error is a Fail,
	// except errors made by T.NotSupported.
	Run func(t *T) error
}

// section is a part of the suite: the tests of one capability.
type section struct {
	name string
	cap  hal.Capability
}

// sections in report order. Device-level tests need no link capability.
var sections = []section{
	{"device", 0},
	{"memory-mapped", hal.CapMemoryMapped},
	{"port-mapped", hal.CapPortMapped},
	{"switch-mapped", hal.CapSwitchMapped},
}

// Section returns the section name of a capability ("device" for 0).
func Section(c hal.Capability) string {
	for _, s := range sections {
		if s.cap == c {
			return s.name
		}
	}
	return c.String()
}

var (
	registryMu sync.Mutex
	registry   []Case
	idPattern  = regexp.MustCompile(`^[a-z0-9-]+(/[a-z0-9-]+)+$`)
)

// Register adds a test to the suite; tests of a capability run in the order
// they were registered. It panics on a malformed or duplicate ID, an ID
// outside its capability's section, a capability that is not exactly one of
// hal's, or a nil body: those are programming errors found at init.
func Register(c Case) {
	registryMu.Lock()
	defer registryMu.Unlock()
	sec := ""
	for _, s := range sections {
		if s.cap == c.Capability {
			sec = s.name
		}
	}
	switch {
	case sec == "":
		panic(fmt.Sprintf("conformance: test %q: capability %v is not one section's", c.ID, c.Capability))
	case !idPattern.MatchString(c.ID) || !strings.HasPrefix(c.ID, sec+"/"):
		panic(fmt.Sprintf("conformance: test ID %q must be %q followed by lowercase words", c.ID, sec+"/…"))
	case c.Run == nil:
		panic(fmt.Sprintf("conformance: test %q has no body", c.ID))
	}
	for _, o := range registry {
		if o.ID == c.ID {
			panic(fmt.Sprintf("conformance: test %q registered twice", c.ID))
		}
	}
	if c.MinRanks < 1 {
		c.MinRanks = 1
	}
	if c.Mode == Pairs && c.MinRanks < 2 {
		c.MinRanks = 2
	}
	registry = append(registry, c)
}

// Cases returns the registered tests, section by section in report order.
func Cases() []Case {
	registryMu.Lock()
	defer registryMu.Unlock()
	var out []Case
	for _, s := range sections {
		for _, c := range registry {
			if c.Capability == s.cap {
				out = append(out, c)
			}
		}
	}
	return out
}

func lookupCase(id string) (Case, bool) {
	for _, c := range Cases() {
		if c.ID == id {
			return c, true
		}
	}
	return Case{}, false
}
