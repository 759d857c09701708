package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/weftccl/weft/hal"
)

// Status is the outcome of one test.
type Status string

const (
	// Pass: the backend behaves as the contract says.
	Pass Status = "pass"
	// Fail: the backend broke the contract; the message says how.
	Fail Status = "fail"
	// NotSupported: the backend does not offer the capability the test
	// needs on the links under test (a valid answer, not a failure).
	NotSupported Status = "not-supported"
	// QualityWarning: the behaviour is correct but a measured figure is
	// below its floor (bandwidth, latency). It never fails a run.
	QualityWarning Status = "quality-warning"
)

// SchemaVersion is the version of the report format (docs/conformance/schema.json).
const SchemaVersion = 1

// Report is the outcome of a conformance run. Its JSON form is documented by
// docs/conformance/schema.json.
type Report struct {
	SchemaVersion int        `json:"schema_version"`
	WeftVersion   string     `json:"weft_version"`
	Started       time.Time  `json:"started"`
	Seconds       float64    `json:"seconds"`
	Machine       Machine    `json:"machine"`
	Options       RunOptions `json:"options"`
	Platforms     []Platform `json:"platforms"`
	Summary       Summary    `json:"summary"`
}

// Machine describes the computer the suite ran on.
type Machine struct {
	Hostname string `json:"hostname"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	CPUs     int    `json:"cpus"`
	Kernel   string `json:"kernel,omitempty"`
	Go       string `json:"go"`
}

// RunOptions records the options that shaped the run.
type RunOptions struct {
	Ranks          int      `json:"ranks"`
	TimeoutSeconds float64  `json:"timeout_seconds"`
	Quick          bool     `json:"quick"`
	Processes      bool     `json:"processes"`
	Run            []string `json:"run,omitempty"`
	Require        []string `json:"require,omitempty"`
	// Net is the network the port-mapped tests ran over (--net).
	Net string `json:"net,omitempty"`
}

// Platform is one backend's part of the report: what was found and how
// every test ended on it.
type Platform struct {
	Backend   string `json:"backend"`
	Available bool   `json:"available"`
	// Reason is the backend's probe reason: what was found, or why it is
	// unavailable.
	Reason string `json:"reason"`
	// Network is the network the port-mapped tests ran over (--net) and
	// NetworkReason its probe reason.
	Network       string `json:"network,omitempty"`
	NetworkReason string `json:"network_reason,omitempty"`
	// Required is true when WEFT_REQUIRE names the backend (or the
	// network).
	Required bool     `json:"required"`
	Ranks    int      `json:"ranks"`
	Devices  []Device `json:"devices"`
	Links    []Link   `json:"links"`
	// Capabilities are those offered on every link under test.
	Capabilities []string `json:"capabilities"`
	Results      []Result `json:"results"`
	Summary      Summary  `json:"summary"`
}

// Device is one opened device (hal.DeviceInfo) and the rank that used it.
type Device struct {
	Rank            int    `json:"rank"`
	Ordinal         int    `json:"ordinal"`
	Name            string `json:"name"`
	Arch            string `json:"arch,omitempty"`
	UUID            string `json:"uuid,omitempty"`
	PCIBusID        string `json:"pci_bus_id,omitempty"`
	MemoryBytes     int64  `json:"memory_bytes"`
	Multiprocessors int    `json:"multiprocessors"`
	Driver          string `json:"driver,omitempty"`
	Runtime         string `json:"runtime,omitempty"`
}

// Link is what the device of rank From offers towards the device of rank To.
type Link struct {
	From         int      `json:"from"`
	To           int      `json:"to"`
	Capabilities []string `json:"capabilities"`
	Reason       string   `json:"reason,omitempty"`
}

// Result is one test's outcome.
type Result struct {
	ID      string   `json:"id"`
	Section string   `json:"section"`
	Title   string   `json:"title"`
	Status  Status   `json:"status"`
	Seconds float64  `json:"seconds"`
	Figures []Figure `json:"figures,omitempty"`
	Message string   `json:"message,omitempty"`
}

// Figure is a measured quantity and, for quality tests, its floor.
type Figure struct {
	Name  string  `json:"name"`  // "put bandwidth 0->1"
	Value float64 `json:"value"` // in Unit
	Unit  string  `json:"unit"`  // "GB/s", "us"
	// Floor is the limit the value must meet; Better says which way:
	// "higher" (value ≥ floor) or "lower" (value ≤ floor). Both empty for
	// figures that are only informative.
	Floor  float64 `json:"floor,omitempty"`
	Better string  `json:"better,omitempty"`
	// Basis says where the floor comes from.
	Basis string `json:"basis,omitempty"`
}

// Below reports whether the figure misses its floor.
func (f Figure) Below() bool {
	switch f.Better {
	case "higher":
		return f.Value < f.Floor
	case "lower":
		return f.Value > f.Floor
	}
	return false
}

// Summary counts results by status.
type Summary struct {
	Pass           int `json:"pass"`
	Fail           int `json:"fail"`
	NotSupported   int `json:"not_supported"`
	QualityWarning int `json:"quality_warning"`
}

func (s *Summary) add(st Status) {
	switch st {
	case Pass:
		s.Pass++
	case Fail:
		s.Fail++
	case NotSupported:
		s.NotSupported++
	case QualityWarning:
		s.QualityWarning++
	}
}

// Failed reports whether any test failed.
func (r *Report) Failed() bool { return r.Summary.Fail > 0 }

// Result returns the result of test id on backend, if it ran.
func (r *Report) Result(backend, id string) (Result, bool) {
	for _, p := range r.Platforms {
		if p.Backend != backend {
			continue
		}
		for _, res := range p.Results {
			if res.ID == id {
				return res, true
			}
		}
	}
	return Result{}, false
}

func (r *Report) finish() {
	r.Summary = Summary{}
	for i := range r.Platforms {
		p := &r.Platforms[i]
		p.Summary = Summary{}
		for _, res := range p.Results {
			p.Summary.add(res.Status)
			r.Summary.add(res.Status)
		}
	}
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteMarkdown writes the report for people: the machine, then per
// backend its devices, links and a table of results with failures first
// explained below it.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# weft conformance report\n\n")
	fmt.Fprintf(&b, "- weft %s, %s, started %s, %.1f s\n", r.WeftVersion, r.Machine.Go, r.Started.UTC().Format(time.RFC3339), r.Seconds)
	fmt.Fprintf(&b, "- machine `%s`: %s/%s, %d CPUs", r.Machine.Hostname, r.Machine.OS, r.Machine.Arch, r.Machine.CPUs)
	if r.Machine.Kernel != "" {
		fmt.Fprintf(&b, ", kernel %s", r.Machine.Kernel)
	}
	b.WriteString("\n")
	o := r.Options
	ranks := fmt.Sprint(o.Ranks)
	if o.Ranks == 0 {
		ranks = "one per device"
	}
	fmt.Fprintf(&b, "- options: ranks %s, wait deadline %gs, quick=%v, processes=%v", ranks, o.TimeoutSeconds, o.Quick, o.Processes)
	if o.Net != "" {
		fmt.Fprintf(&b, ", network=%s", o.Net)
	}
	if len(o.Require) > 0 {
		fmt.Fprintf(&b, ", WEFT_REQUIRE=%s", strings.Join(o.Require, ","))
	}
	b.WriteString("\n")
	s := r.Summary
	fmt.Fprintf(&b, "- **%s**: %d pass, %d fail, %d not supported, %d quality warnings\n", verdict(s), s.Pass, s.Fail, s.NotSupported, s.QualityWarning)
	for _, p := range r.Platforms {
		fmt.Fprintf(&b, "\n## Backend `%s`", p.Backend)
		if p.Network != "" {
			fmt.Fprintf(&b, " over network `%s`", p.Network)
		}
		b.WriteString("\n\n")
		if p.Network != "" {
			fmt.Fprintf(&b, "Network %s: %s. The ranks are treated as devices of different nodes; only the port-mapped tests run, over the network's NetDevice.\n\n", p.Network, p.NetworkReason)
		}
		req := ""
		if p.Required {
			req = " (required by WEFT_REQUIRE)"
		}
		if !p.Available {
			fmt.Fprintf(&b, "Unavailable%s: %s\n", req, p.Reason)
		} else {
			fmt.Fprintf(&b, "Available%s: %s. %d ranks; capabilities on every link: %s.\n", req, p.Reason, p.Ranks, orNone(p.Capabilities))
		}
		if len(p.Devices) > 0 {
			b.WriteString("\n| rank | ordinal | device | arch | memory | SMs/CUs | driver | runtime | PCI |\n|---|---|---|---|---|---|---|---|---|\n")
			for _, d := range p.Devices {
				mem := "-"
				if d.MemoryBytes > 0 {
					mem = fmt.Sprintf("%.1f GiB", float64(d.MemoryBytes)/(1<<30))
				}
				fmt.Fprintf(&b, "| %d | %d | %s | %s | %s | %d | %s | %s | %s |\n", d.Rank, d.Ordinal, md(d.Name), dash(d.Arch), mem, d.Multiprocessors, dash(d.Driver), dash(d.Runtime), dash(d.PCIBusID))
			}
		}
		if len(p.Links) > 0 {
			b.WriteString("\n| link | capabilities | reason |\n|---|---|---|\n")
			for _, l := range p.Links {
				fmt.Fprintf(&b, "| %d→%d | %s | %s |\n", l.From, l.To, orNone(l.Capabilities), md(dash(l.Reason)))
			}
		}
		if len(p.Results) == 0 {
			continue
		}
		ps := p.Summary
		fmt.Fprintf(&b, "\n%d pass, %d fail, %d not supported, %d quality warnings.\n\n", ps.Pass, ps.Fail, ps.NotSupported, ps.QualityWarning)
		b.WriteString("| test | status | time | figures | message |\n|---|---|---|---|---|\n")
		var figured []Result
		for _, res := range p.Results {
			figs := "-"
			if n := len(res.Figures); n > 0 {
				figured = append(figured, res)
				figs = fmt.Sprintf("%d (below)", n)
				if n == 1 {
					figs = res.Figures[0].String()
				}
			}
			msg := res.Message
			if len(msg) > 160 {
				msg = msg[:157] + "…"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %.2f s | %s | %s |\n", res.ID, badge(res.Status), res.Seconds, md(figs), md(dash(msg)))
		}
		if len(figured) > 0 {
			b.WriteString("\n### Figures\n\n| test | figure | value | floor | basis |\n|---|---|---|---|---|\n")
			for _, res := range figured {
				for _, f := range res.Figures {
					floor := "-"
					switch f.Better {
					case "higher":
						floor = "≥ " + trim(f.Floor)
					case "lower":
						floor = "≤ " + trim(f.Floor)
					}
					if f.Below() {
						floor += " **(below)**"
					}
					fmt.Fprintf(&b, "| `%s` | %s | %s %s | %s | %s |\n", res.ID, md(f.Name), trim(f.Value), f.Unit, floor, md(dash(f.Basis)))
				}
			}
		}
		var fails []Result
		for _, res := range p.Results {
			if res.Status == Fail || res.Status == QualityWarning {
				fails = append(fails, res)
			}
		}
		if len(fails) > 0 {
			b.WriteString("\n### Failures and warnings\n")
			for _, res := range fails {
				fmt.Fprintf(&b, "\n- `%s` (%s) — %s:\n\n  ```\n  %s\n  ```\n", res.ID, res.Status, res.Title, strings.ReplaceAll(res.Message, "\n", "\n  "))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (f Figure) String() string {
	s := fmt.Sprintf("%s %s %s", f.Name, trim(f.Value), f.Unit)
	switch f.Better {
	case "higher":
		s += fmt.Sprintf(" (floor ≥ %s)", trim(f.Floor))
	case "lower":
		s += fmt.Sprintf(" (floor ≤ %s)", trim(f.Floor))
	}
	return s
}

func trim(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func verdict(s Summary) string {
	if s.Fail > 0 {
		return "FAIL"
	}
	return "PASS"
}

func badge(s Status) string {
	switch s {
	case Pass:
		return "pass"
	case Fail:
		return "**FAIL**"
	case NotSupported:
		return "not supported"
	case QualityWarning:
		return "*quality warning*"
	}
	return string(s)
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// md escapes the characters that break a Markdown table cell.
func md(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// capNames lists the capabilities of c by their section names.
func capNames(c hal.Capability) []string {
	out := []string{}
	for _, s := range sections {
		if s.cap != 0 && c&s.cap != 0 {
			out = append(out, s.name)
		}
	}
	return out
}

// weftVersion is the module version and VCS revision of this binary.
func weftVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	switch {
	case rev != "" && (v == "" || v == "(devel)"):
		return rev + modified
	case rev != "" && !strings.Contains(v, rev):
		return v + " (" + rev + modified + ")"
	case v != "":
		return v
	}
	return "unknown"
}

func machine() Machine {
	h, _ := os.Hostname()
	m := Machine{Hostname: h, OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

func deviceOf(rank int, info hal.DeviceInfo) Device {
	return Device{Rank: rank, Ordinal: info.Ordinal, Name: info.Name, Arch: info.Arch, UUID: info.UUID, PCIBusID: info.PCIBusID,
		MemoryBytes: info.MemoryBytes, Multiprocessors: info.Multiprocessors, Driver: info.Driver, Runtime: info.Runtime}
}

func sortResults(rs []Result) {
	order := map[string]int{}
	for i, s := range sections {
		order[s.name] = i
	}
	sort.SliceStable(rs, func(i, j int) bool { return order[rs[i].Section] < order[rs[j].Section] })
}

// WriteText writes a short plain-text summary: one line per test, then the
// counts. It is what `weft conformance` prints.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, p := range r.Platforms {
		state := "available"
		if !p.Available {
			state = "unavailable"
		}
		fmt.Fprintf(&b, "backend %s (%s: %s)", p.Backend, state, p.Reason)
		if p.Network != "" {
			fmt.Fprintf(&b, " over network %s (%s)", p.Network, p.NetworkReason)
		}
		if p.Available {
			fmt.Fprintf(&b, ", %d ranks, capabilities: %s", p.Ranks, orNone(p.Capabilities))
		}
		b.WriteString("\n")
		for _, res := range p.Results {
			tag := map[Status]string{Pass: "PASS", Fail: "FAIL", NotSupported: "N/S ", QualityWarning: "WARN"}[res.Status]
			fmt.Fprintf(&b, "  %s  %-44s %6.2fs", tag, res.ID, res.Seconds)
			if res.Message != "" && res.Status != Pass {
				fmt.Fprintf(&b, "  %s", strings.ReplaceAll(res.Message, "\n", "\n        "))
			}
			b.WriteString("\n")
			for _, f := range res.Figures {
				fmt.Fprintf(&b, "        %s\n", f)
			}
		}
		s := p.Summary
		fmt.Fprintf(&b, "%s: %d pass, %d fail, %d not supported, %d quality warnings\n", p.Backend, s.Pass, s.Fail, s.NotSupported, s.QualityWarning)
	}
	fmt.Fprintf(&b, "%s (%.1f s)\n", verdict(r.Summary), r.Seconds)
	_, err := io.WriteString(w, b.String())
	return err
}
