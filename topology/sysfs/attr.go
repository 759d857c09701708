package sysfs

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/weftccl/weft/internal/errkind"
)

// ErrMalformed is wrapped by every error about an attribute whose content
// does not parse. It wraps [errkind.ErrSystem]: the kernel (or a fake tree) gave
// data weft cannot read, which is not the caller's mistake.
var ErrMalformed = fmt.Errorf("malformed sysfs attribute: %w", errkind.ErrSystem)

// AttrError names the file an attribute came from. Err wraps ErrMalformed
// for content that does not parse, or an fs error (fs.ErrNotExist,
// fs.ErrPermission) for a file that cannot be read.
type AttrError struct {
	File string // full path, including the sysfs root
	Err  error
}

func (e *AttrError) Error() string { return e.File + ": " + e.Err.Error() }
func (e *AttrError) Unwrap() error { return e.Err }

func malformed(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrMalformed)
}

// ParseHex parses a hexadecimal attribute such as a PCI vendor ("0x10de"),
// class ("0x030200") or a KFD mask. The "0x" prefix is optional. bits is
// the width of the result (16 for ids, 24 for classes, 64 for masks).
func ParseHex(s string, bits int) (uint64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimPrefix(strings.TrimPrefix(t, "0x"), "0X")
	if t == "" {
		return 0, malformed("want a hexadecimal number, got %q", s)
	}
	v, err := strconv.ParseUint(t, 16, bits)
	if err != nil {
		return 0, malformed("want a %d-bit hexadecimal number, got %q", bits, s)
	}
	return v, nil
}

// ParseInt parses a decimal attribute such as numa_node ("-1") or
// max_link_width ("16").
func ParseInt(s string) (int64, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, malformed("want a decimal integer, got %q", s)
	}
	return v, nil
}

// maxCPUs bounds CPU lists so that a malformed "0-4294967295" cannot make
// weft allocate gigabytes. Linux supports at most 8192 CPUs (NR_CPUS).
const maxCPUs = 1 << 16

// ParseCPUList parses a kernel CPU list such as "0-3,8,10-11" (the format
// of cpulist and cpu/online) into sorted CPU numbers. An empty list is valid
// (a memory-only NUMA node).
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []int
	prev := -1
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, malformed("CPU list %q: bad entry %q", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, malformed("CPU list %q: bad range %q", s, part)
			}
		}
		if b >= maxCPUs {
			return nil, malformed("CPU list %q: CPU %d beyond %d", s, b, maxCPUs-1)
		}
		if a <= prev {
			return nil, malformed("CPU list %q: entries not ascending", s)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
		prev = b
	}
	return out, nil
}

// FormatCPUList is the inverse of ParseCPUList: sorted CPU numbers to the
// kernel's compact form ("0-3,8").
func FormatCPUList(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j == i {
			fmt.Fprintf(&b, "%d", cpus[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", cpus[i], cpus[j])
		}
		i = j + 1
	}
	return b.String()
}

// ParseCPUMask parses a kernel CPU mask such as "00000000,0000ffff" (the
// format of cpumap and local_cpus: 32-bit hexadecimal words, most
// significant first) into sorted CPU numbers.
func ParseCPUMask(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, malformed("empty CPU mask")
	}
	words := strings.Split(s, ",")
	if len(words)*32 > maxCPUs {
		return nil, malformed("CPU mask of %d words is too long", len(words))
	}
	var out []int
	for i := len(words) - 1; i >= 0; i-- {
		w := words[i]
		if len(w) == 0 || len(w) > 8 {
			return nil, malformed("CPU mask %q: bad word %q", s, w)
		}
		v, err := strconv.ParseUint(w, 16, 32)
		if err != nil {
			return nil, malformed("CPU mask %q: bad word %q", s, w)
		}
		base := (len(words) - 1 - i) * 32
		for bit := 0; bit < 32; bit++ {
			if v&(1<<bit) != 0 {
				out = append(out, base+bit)
			}
		}
	}
	return out, nil
}

// FormatCPUMask renders CPU numbers as a kernel CPU mask with at least one
// 32-bit word ("0000ffff", "00000001,00000000"): the form NCCL's topology
// XML expects in the cpu affinity attribute.
func FormatCPUMask(cpus []int) string {
	n := 1
	for _, c := range cpus {
		if c/32+1 > n {
			n = c/32 + 1
		}
	}
	words := make([]uint32, n)
	for _, c := range cpus {
		if c >= 0 {
			words[c/32] |= 1 << (c % 32)
		}
	}
	parts := make([]string, n)
	for i := range words {
		parts[n-1-i] = fmt.Sprintf("%08x", words[i])
	}
	return strings.Join(parts, ",")
}

// ParseLinkSpeed parses a PCIe link speed attribute (max_link_speed,
// current_link_speed) into GT/s. The kernel writes "8.0 GT/s PCIe" (5.7 and
// later), "8 GT/s" (older kernels), "2.5 GT/s" or "Unknown"; "Unknown" and
// an empty value give 0 without error, as does a device without a link.
func ParseLinkSpeed(s string) (float64, error) {
	t := strings.TrimSpace(s)
	if t == "" || strings.EqualFold(t, "unknown") {
		return 0, nil
	}
	num, rest, ok := strings.Cut(t, " ")
	if !ok || !strings.HasPrefix(strings.TrimSpace(rest), "GT/s") {
		return 0, malformed("want a PCIe speed such as \"16.0 GT/s PCIe\", got %q", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || v > 1024 || math.IsNaN(v) {
		return 0, malformed("want a PCIe speed such as \"16.0 GT/s PCIe\", got %q", s)
	}
	return v, nil
}

// ParseLinkWidth parses max_link_width or current_link_width ("16"). The
// kernel writes 0 or "255" for some virtual devices; both mean unknown and
// give 0.
func ParseLinkWidth(s string) (int, error) {
	v, err := ParseInt(s)
	if err != nil {
		return 0, err
	}
	if v < 0 || v > 255 {
		return 0, malformed("link width %q outside 0..255", s)
	}
	if v == 255 {
		return 0, nil
	}
	return int(v), nil
}

// ParseDistances parses a NUMA node's distance attribute ("10 21").
func ParseDistances(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Fields(s) {
		v, err := strconv.Atoi(f)
		if err != nil || v < 0 || v > 255 {
			return nil, malformed("NUMA distances %q: bad entry %q", s, f)
		}
		out = append(out, v)
	}
	if len(out) > 1024 {
		return nil, malformed("NUMA distances: %d entries", len(out))
	}
	return out, nil
}

// ParseMemTotal returns MemTotal in bytes from a NUMA node's meminfo
// ("Node 0 MemTotal:  131072 kB" among other lines).
func ParseMemTotal(s string) (int64, error) {
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		// "Node", "0", "MemTotal:", "131072", "kB"
		if len(f) == 5 && f[0] == "Node" && f[2] == "MemTotal:" && f[4] == "kB" {
			kb, err := strconv.ParseInt(f[3], 10, 64)
			if err != nil || kb < 0 || kb > math.MaxInt64/1024 {
				return 0, malformed("meminfo MemTotal %q", f[3])
			}
			return kb * 1024, nil
		}
	}
	return 0, malformed("meminfo has no \"Node N MemTotal: X kB\" line")
}

// ParseIBRate parses an InfiniBand port rate ("400 Gb/sec (4X NDR)",
// "25 Gb/sec (1X EDR)", "2.5 Gb/sec (1X SDR)") into Gb/s.
func ParseIBRate(s string) (float64, error) {
	num, rest, ok := strings.Cut(strings.TrimSpace(s), " ")
	if !ok || !strings.HasPrefix(rest, "Gb/sec") {
		return 0, malformed("want a rate such as \"400 Gb/sec (4X NDR)\", got %q", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || v > 1e6 || math.IsNaN(v) {
		return 0, malformed("want a rate such as \"400 Gb/sec (4X NDR)\", got %q", s)
	}
	return v, nil
}

// ParseIBState parses an InfiniBand port state or phys_state ("4: ACTIVE",
// "5: LinkUp") into its number and name.
func ParseIBState(s string) (int, string, error) {
	num, name, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return 0, "", malformed("want a state such as \"4: ACTIVE\", got %q", s)
	}
	v, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || v < 0 || v > 255 {
		return 0, "", malformed("want a state such as \"4: ACTIVE\", got %q", s)
	}
	return v, strings.TrimSpace(name), nil
}

// ParseGUID parses an InfiniBand GUID ("0c42:a103:0016:054e", four groups
// of four hexadecimal digits) into its 64-bit value.
func ParseGUID(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	parts := strings.Split(t, ":")
	if len(parts) != 4 {
		return 0, malformed("want a GUID such as \"0c42:a103:0016:054e\", got %q", s)
	}
	var v uint64
	for _, p := range parts {
		if len(p) != 4 {
			return 0, malformed("want a GUID such as \"0c42:a103:0016:054e\", got %q", s)
		}
		w, err := strconv.ParseUint(p, 16, 16)
		if err != nil {
			return 0, malformed("want a GUID such as \"0c42:a103:0016:054e\", got %q", s)
		}
		v = v<<16 | w
	}
	return v, nil
}

// CPUID describes the processor as the kernel's cpu modalias reports it.
type CPUID struct {
	// Arch is "x86_64", "arm64" or "ppc64" (NCCL's spelling), or the
	// modalias type as written when it is none of those.
	Arch string
	// Vendor is the CPUID vendor string ("GenuineIntel", "AuthenticAMD")
	// on x86, "" elsewhere.
	Vendor string
	// Family and Model are the CPUID display family and model on x86.
	Family, Model int
}

// x86Vendors maps the kernel's X86_VENDOR_* numbers
// (arch/x86/include/asm/processor.h) to CPUID vendor strings.
var x86Vendors = map[uint64]string{
	0:  "GenuineIntel",
	1:  "CyrixInstead",
	2:  "AuthenticAMD",
	3:  "UMC UMC UMC ",
	5:  "CentaurHauls",
	7:  "GenuineTMx86",
	8:  "Geode by NSC",
	9:  "HygonGenuine",
	10: "  Shanghai  ",
	11: "Vortex86 SoC",
}

// ParseCPUModalias parses /sys/devices/system/cpu/modalias:
// "cpu:type:x86,ven0000fam0006mod008F:feature:,0000,..." on x86,
// "cpu:type:aarch64:feature:,..." on Arm.
func ParseCPUModalias(s string) (CPUID, error) {
	t := strings.TrimSpace(s)
	rest, ok := strings.CutPrefix(t, "cpu:type:")
	if !ok {
		return CPUID{}, malformed("cpu modalias %q does not start with cpu:type:", truncate(s))
	}
	typ, _, _ := strings.Cut(rest, ":")
	arch, ids, _ := strings.Cut(typ, ",")
	var id CPUID
	switch arch {
	case "x86":
		id.Arch = "x86_64"
	case "aarch64", "arm64":
		id.Arch = "arm64"
	case "ppc64", "ppc64le", "powerpc":
		id.Arch = "ppc64"
	case "":
		return CPUID{}, malformed("cpu modalias %q has no type", truncate(s))
	default:
		id.Arch = arch
	}
	if ids == "" {
		return id, nil
	}
	// ven%04Xfam%04Xmod%04X
	if len(ids) != 21 || ids[0:3] != "ven" || ids[7:10] != "fam" || ids[14:17] != "mod" {
		return CPUID{}, malformed("cpu modalias ids %q: want venXXXXfamXXXXmodXXXX", ids)
	}
	ven, err1 := strconv.ParseUint(ids[3:7], 16, 16)
	fam, err2 := strconv.ParseUint(ids[10:14], 16, 16)
	mod, err3 := strconv.ParseUint(ids[17:21], 16, 16)
	if err := errors.Join(err1, err2, err3); err != nil {
		return CPUID{}, malformed("cpu modalias ids %q: want venXXXXfamXXXXmodXXXX", ids)
	}
	id.Vendor = x86Vendors[ven]
	id.Family, id.Model = int(fam), int(mod)
	return id, nil
}

// ParseBDF checks and canonicalises a PCI address "dddd:bb:dd.f" (lower
// case). Bus ids of other lengths (NVML's 8-digit domains, "00000000:17:00.0")
// are accepted and shortened to a 4-digit domain when the domain fits.
func ParseBDF(s string) (string, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	dom, rest, ok := strings.Cut(t, ":")
	if !ok {
		return "", malformed("want a PCI address such as 0000:17:00.0, got %q", s)
	}
	bus, rest, ok := strings.Cut(rest, ":")
	if !ok {
		return "", malformed("want a PCI address such as 0000:17:00.0, got %q", s)
	}
	dev, fn, ok := strings.Cut(rest, ".")
	if !ok {
		return "", malformed("want a PCI address such as 0000:17:00.0, got %q", s)
	}
	d, e1 := strconv.ParseUint(dom, 16, 32)
	b, e2 := strconv.ParseUint(bus, 16, 8)
	v, e3 := strconv.ParseUint(dev, 16, 8)
	f, e4 := strconv.ParseUint(fn, 16, 8)
	if errors.Join(e1, e2, e3, e4) != nil || len(dom) == 0 || len(dom) > 8 || len(bus) != 2 ||
		len(dev) != 2 || len(fn) != 1 || v > 0x1f || f > 7 {
		return "", malformed("want a PCI address such as 0000:17:00.0, got %q", s)
	}
	if d > 0xffff {
		return fmt.Sprintf("%08x:%02x:%02x.%x", d, b, v, f), nil
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", d, b, v, f), nil
}

// IsBDF reports whether s has the exact sysfs form of a PCI address.
func IsBDF(s string) bool {
	c, err := ParseBDF(s)
	return err == nil && c == s
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
