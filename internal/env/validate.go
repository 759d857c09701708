package env

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/weftccl/weft/internal/errkind"
)

// A form is what a variable accepts: the text that error messages and
// `weft env` show, and the check of a value (never called with "").
type form struct {
	accepted string
	check    func(v string) bool
}

func oneOf(vals ...string) form {
	return form{"one of " + strings.Join(vals, ", "), func(v string) bool {
		for _, x := range vals {
			if strings.EqualFold(strings.TrimSpace(v), x) {
				return true
			}
		}
		return false
	}}
}

func listOf(vals ...string) form {
	one := oneOf(vals...)
	return form{"a comma-separated list of " + strings.Join(vals, ", "), func(v string) bool {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" && !one.check(f) {
				return false
			}
		}
		return true
	}}
}

// sizeForm accepts a byte size as the size parsers take it (sizeRE);
// accepted says which, and the range the variable's reader enforces.
func sizeForm(accepted string) form {
	return form{accepted, func(v string) bool { return sizeRE.MatchString(strings.TrimSpace(v)) }}
}

func intForm(lo, hi int, accepted string) form {
	return form{accepted, func(v string) bool {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		return err == nil && n >= lo && n <= hi
	}}
}

var (
	duration = form{"a positive Go duration such as 10s or 500ms", func(v string) bool {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		return err == nil && d > 0
	}}
	bit      = oneOf("0", "1")
	onOff    = oneOf("0", "1", "false", "true", "off", "on", "no", "yes")
	hexRE    = regexp.MustCompile(`^[0-9a-fA-F]+$`)
	sizeRE   = regexp.MustCompile(`^[0-9]+([KMG]i?B?|B)?$`)
	anyText  = form{"any text", func(string) bool { return true }}
	anyPath  = form{"a path or library name", func(string) bool { return true }}
	rankForm = intForm(0, 1<<30, "a rank: an integer ≥ 0")
	ctaForm  = intForm(1, 1<<20, "a positive number of thread blocks")
	// shapeForm: a windowed plan's shape, parsed in full by
	// algorithms.ParseHBShape when a communicator is made.
	shapeForm = form{"BLOCKSxTHREADS[wWINDOW], e.g. 64x512", func(v string) bool { return strings.Contains(v, "x") }}
	// rootedShapeForm: the one-hop Broadcast and Reduce shape, which may
	// also name a window depth.
	rootedShapeForm = form{"BLOCKSxTHREADS[wWINDOW][dDEPTH][pPIPELINE], e.g. 128x512w4Md8p2", func(v string) bool { return strings.Contains(v, "x") }}
	// p2pShapeForm: the point-to-point shape, which may also name the
	// direction (",pull", ",push", or that word alone).
	p2pShapeForm = form{"[BLOCKSxTHREADS[wWINDOW][dDEPTH]][,pull|,push], e.g. 44x1024w2Md8, 64x1024w4M,pull or pull", func(v string) bool {
		shape, dir, hasDir := strings.Cut(strings.TrimSpace(v), ",")
		if v = strings.TrimSpace(v); v == "pull" || v == "push" {
			return true
		}
		return (!hasDir || dir == "pull" || dir == "push") && (shape == "" && hasDir || strings.Contains(shape, "x"))
	}}
)

// forms gives the accepted form of every WEFT_* variable of Table
// (NCCL_DEBUG is NCCL's, which ignores values it does not know). Variables
// whose grammar belongs to their reader (WEFT_ALLREDUCE's tiers,
// WEFT_IB_HCA's device list) accept any text here and are checked, with
// the same kind of error, where they are parsed.
var forms = map[string]form{
	"WEFT_DEBUG":                         oneOf("WARN", "INFO", "TRACE", "DEBUG"),
	"WEFT_DEBUG_SUBSYS":                  listOf("INIT", "COLL", "BOOT", "HAL", "TOPO", "BENCH", "CONF", "NET", "PROXY", "ALL"),
	"WEFT_REQUIRE":                       {"a comma-separated list of backend or test names", func(string) bool { return true }},
	"WEFT_HAL":                           {"the name of a registered backend (weft conformance --help lists them)", validBackend},
	"WEFT_TIMEOUT":                       duration,
	"WEFT_BOOTSTRAP_TIMEOUT":             duration,
	"WEFT_UNIQUE_ID":                     {"hex digits, as `weft run` sets it", func(v string) bool { return hexRE.MatchString(strings.TrimSpace(v)) }},
	"WEFT_RANK":                          rankForm,
	"WEFT_NRANKS":                        intForm(1, 1<<30, "an integer ≥ 1"),
	"WEFT_LOCAL_RANK":                    rankForm,
	"WEFT_SOCKET_IFNAME":                 anyText,
	"WEFT_NODE_ID":                       anyText,
	"WEFT_NET":                           oneOf("ib", "plugin", "socket", "ucx"),
	"WEFT_SOCKET_NSOCKS":                 intForm(1, 64, "an integer from 1 to 64"),
	"WEFT_NCCL_REGISTER":                 oneOf("local", "collective"),
	"WEFT_CE_MIN_BYTES":                  sizeForm("a size such as 32M (0: off)"),
	"WEFT_CE_REDUCE_MIN_BYTES":           sizeForm("a size such as 64M (0: off)"),
	"WEFT_CE_REDUCE_DIRECT_MIN_BYTES":    sizeForm("a size such as 512M (0: every size)"),
	"WEFT_CE_P2P_MIN_BYTES":              sizeForm("a size such as 64M (0: off)"),
	"WEFT_RING_MIN_BYTES":                sizeForm("a size such as 8M (0: off)"),
	"WEFT_ROOTED_SPLIT_MIN_BYTES":        sizeForm("a size such as 4M (0: off)"),
	"WEFT_ALLREDUCE_LL2_MAX_BYTES":       sizeForm("a size such as 4M (0: off)"),
	"WEFT_ALLREDUCE_LL2_LARGE_MAX_BYTES": sizeForm("a size such as 8M (0: off)"),
	"WEFT_ALLREDUCE_LL2_LARGE_SHAPE":     shapeForm,
	"WEFT_ROOTED_LL_MAX_BYTES":           sizeForm("a size such as 512K"),
	"WEFT_REDUCE_LL_MAX_BYTES":           sizeForm("a size such as 2M (0: WEFT_ROOTED_LL_MAX_BYTES's)"),
	"WEFT_ALLREDUCE_LL_MAX_BYTES":        sizeForm("a size such as 2M (0: none)"),
	"WEFT_COLL_LL_MAX_BYTES":             sizeForm("a size such as 512K (0: no LL plans)"),
	"WEFT_ALLGATHER_LL_MAX_BYTES":        sizeForm("a size such as 1M (0: WEFT_COLL_LL_MAX_BYTES's)"),
	"WEFT_BROADCAST_SPLIT_LL_MAX_BYTES":  sizeForm("a size such as 2M (0: off)"),
	"WEFT_REDUCE_SPLIT_LL_MAX_BYTES":     sizeForm("a size such as 2M (0: off)"),
	"WEFT_CE_ALLREDUCE_MIN_BYTES":        sizeForm("a size such as 256M (0: off)"),
	"WEFT_WINDOW_LL_MAX_BYTES":           sizeForm("a size such as 1M (0: no LL plan through symmetric windows)"),
	"WEFT_CE_ALLREDUCE_MAX_BYTES":        sizeForm("a size such as 1G (0: no bound)"),
	"WEFT_CE_ALLREDUCE_SHAPE":            shapeForm,
	"WEFT_CE_MAX_BYTES":                  sizeForm("a size such as 512M (0: no bound)"),
	"WEFT_P2P_LL_MAX_BYTES":              sizeForm("a size such as 512K (0 to 16M)"),
	"WEFT_PORT_LL_MAX_BYTES":             sizeForm("a size such as 64K (0 to 1M)"),
	"WEFT_UCX_SPIN_US":                   intForm(1, 1_000_000, "an integer from 1 to 1000000"),
	"WEFT_SOCKET_CHUNK":                  sizeForm("a size such as 512KiB (1KiB to 64MiB)"),
	"WEFT_SOCKET_ENCRYPT":                onOff,
	"WEFT_SOCKET_PEEK":                   onOff,
	"WEFT_JOB_SECRET": {"32 to 128 hex digits", func(v string) bool {
		v = strings.TrimSpace(v)
		return hexRE.MatchString(v) && len(v) >= 32 && len(v) <= 128
	}},
	"WEFT_JOB_SECRET_FILE":   anyPath,
	"WEFT_IB_HCA":            anyText,
	"WEFT_IB_GID_INDEX":      intForm(-1, 1<<16, "an integer ≥ -1 (-1 chooses)"),
	"WEFT_UCX_STAGING":       oneOf("auto", "always", "device"),
	"WEFT_IBVERBS_LIB":       anyPath,
	"WEFT_CACHE_DIR":         anyPath,
	"WEFT_NCCL_LIB":          anyPath,
	"WEFT_NCCL_FALLBACK":     oneOf("0", "1", "false", "true", "off", "on", "no", "yes", "all"),
	"WEFT_CUDA_LIB":          anyPath,
	"WEFT_NVRTC_LIB":         anyPath,
	"WEFT_SYSFS_ROOT":        anyPath,
	"WEFT_ALGO":              oneOf("ll", "hb", "port", "nvls", "ring", "tree", "bruck", "ce"),
	"WEFT_ALLREDUCE":         {"comma-separated AllReduce tiers (docs/tuning.md)", func(string) bool { return true }},
	"WEFT_TUNING_FILE":       {"a path, or off", func(string) bool { return true }},
	"WEFT_HB_SHAPE":          shapeForm,
	"WEFT_RING_SHAPE":        shapeForm,
	"WEFT_WIDE_LL_SHAPE":     shapeForm,
	"WEFT_P2P_SHAPE":         p2pShapeForm,
	"WEFT_P2P_MID_SHAPE":     p2pShapeForm,
	"WEFT_P2P_MID_MAX_BYTES": sizeForm("a size such as 16M (0 to 1G)"),
	"WEFT_ROOTED_SHAPE":      rootedShapeForm,
	"WEFT_MAX_CTAS":          ctaForm,
	"WEFT_MIN_CTAS":          ctaForm,
	"WEFT_NVLS":              bit,
	"WEFT_STREAM_BATCH":      bit,
	"WEFT_LL128":             bit,
	"WEFT_NET_HOST_WINDOWS":  bit,
	"WEFT_ENGINE_WAITS":      bit,
	"WEFT_SOCKET_SPIN_US":    intForm(0, 1_000_000, "microseconds from 0 to 1000000"),
	"WEFT_PCIE_P2P":          bit,
	"WEFT_PROXY_PROFILE":     bit,
	"WEFT_PROXY_TRACE":       {"a directory", func(v string) bool { return strings.TrimSpace(v) != "" }},
	"WEFT_DEBUG_STACKS":      bit,
	"WEFT_HEAP_FLOOR":        sizeForm("a size such as 64M (0: none; at most 1G)"),
	"WEFT_CE_LANES":          intForm(1, 8, "an integer from 1 to 8"),
}

// backendCheck reports whether a value of WEFT_HAL names a backend
// registered in this binary. Package hal sets it from its init
// (SetBackendCheck): env sits below hal — the vendor bindings read their
// variables here and import no hal package — so it cannot ask the registry
// itself. Unset (hal not linked, so no backend registered), every value
// passes and the opener reports a bad name.
var backendCheck func(name string) bool

// SetBackendCheck installs the check of WEFT_HAL's values: known reports
// whether name (trimmed) is a registered backend, or true when none is
// registered. Package hal calls it from init, once; it is not for other
// callers.
func SetBackendCheck(known func(name string) bool) { backendCheck = known }

func validBackend(v string) bool {
	if backendCheck == nil {
		return true
	}
	return backendCheck(strings.TrimSpace(v))
}

// Accepted describes the values variable name accepts ("one of 0, 1").
// It panics on a name missing from Table.
func Accepted(name string) string {
	lookup(name)
	if f, ok := forms[name]; ok {
		return f.accepted
	}
	return "any text"
}

// Check returns nil when the variable is unset or holds a value of its
// accepted form, and otherwise an error wrapping errkind.ErrInvalidArgument
// that names the variable, its value and the accepted form:
// `WEFT_TIMEOUT="abc": want a positive Go duration such as 10s or 500ms`.
// The value of a sensitive variable (Sensitive) is not repeated. It panics
// on a name missing from Table.
func Check(name string) error {
	v := String(name)
	f, ok := forms[name]
	if v == "" || !ok || f.check(v) {
		return nil
	}
	shown := strconv.Quote(v)
	if Sensitive(name) {
		shown = "(hidden)"
	}
	return fmt.Errorf("%s=%s: want %s: %w", name, shown, f.accepted, errkind.ErrInvalidArgument)
}

// CheckAll checks every variable of Table (Check) and joins the errors of
// those that are invalid; nil when all are unset or valid.
func CheckAll() error {
	var errs []error
	for _, v := range Table {
		if err := Check(v.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Bool returns a 0/1 variable (also false/true, off/on, no/yes) as a
// bool, or def when unset; another value is Check's error.
func Bool(name string, def bool) (bool, error) {
	v := strings.ToLower(strings.TrimSpace(String(name)))
	switch v {
	case "":
		return def, nil
	case "1", "true", "on", "yes":
		return true, nil
	case "0", "false", "off", "no":
		return false, nil
	}
	return def, fmt.Errorf("%s=%q: want 1 or 0: %w", name, os.Getenv(name), errkind.ErrInvalidArgument)
}
