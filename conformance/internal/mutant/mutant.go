// Package mutant holds deliberately broken HAL backends, for testing the
// conformance suite itself: each is hal/host with exactly one guarantee of
// the contract broken, and the suite must report Fail for every one of them.
//
// A mutant wraps the host device and its programs; it never edits hal/host.
// Buffers, streams and programs are wrappers: buffers so that the mutant
// knows which memory is live (it reads and writes it by address), streams
// so that it can run its own work in stream order around a host launch, and
// programs so that it can rewrite a plan before the host interprets it or
// move data around the launch. Where a guarantee is about timing (data
// that lands after the signal), the mutant loses the race on purpose, by a
// delay far longer than any test needs, so that detection is deterministic.
//
// Mutants are never registered in the backend registry; tests pass them to
// conformance.Run through Options.Backends and resolve them by name in
// worker processes (Lookup).
package mutant

import (
	"fmt"
	"strings"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/host"
)

// Kind names the guarantee a mutant breaks.
type Kind string

const (
	// SignalOvertakesData: a put's data lands at the peer only after the
	// signal that follows it (and after the launch), as if the signal were
	// not ordered after earlier writes (no release fence).
	SignalOvertakesData Kind = "signal-overtakes-data"
	// FlushEarly: flush returns before the put has read its source; the copy
	// reads the source later, after the plan has reused it.
	FlushEarly Kind = "flush-early"
	// TornPackets: LL packets become visible flags first, data later, as if
	// a packet were written with two stores instead of one.
	TornPackets Kind = "torn-packets"
	// LostSignal: signals never reach the peer.
	LostSignal Kind = "lost-signal"
	// StaleRead: after a wait, reads return the memory as it was when the
	// launch began (no acquire: stale caches).
	StaleRead Kind = "stale-read"
	// WrongExport: an exported handle maps another buffer of the same size.
	WrongExport Kind = "wrong-export"
)

// Kinds lists the mutants of the memory-mapped capability and plans;
// PortKinds (port.go) those of the port-mapped capability.
var Kinds = []Kind{SignalOvertakesData, FlushEarly, TornPackets, LostSignal, StaleRead, WrongExport}

// Delay is how late the timing mutants let data land: long enough that a
// receiver always reads first, however loaded the machine.
var Delay = 250 * time.Millisecond

var docs = map[Kind]string{
	SignalOvertakesData: "a put's data lands after the signal that follows it",
	FlushEarly:          "flush returns before the put has read its source",
	TornPackets:         "LL packet flags become visible before their data",
	LostSignal:          "signals are lost",
	StaleRead:           "reads after a wait see memory as it was when the launch began",
	WrongExport:         "an exported handle maps a different buffer",
}

const prefix = "mutant-"

// Backend returns the mutant backend of kind k, named "mutant-<k>".
func Backend(k Kind) hal.Backend { return backend{k} }

// All returns every mutant backend, Kinds then PortKinds.
func All() []hal.Backend {
	var out []hal.Backend
	for _, k := range append(append([]Kind{}, Kinds...), PortKinds...) {
		out = append(out, Backend(k))
	}
	return out
}

// Lookup returns the mutant backend called name.
func Lookup(name string) (hal.Backend, bool) {
	for _, k := range append(append([]Kind{}, Kinds...), PortKinds...) {
		if prefix+string(k) == name {
			return Backend(k), true
		}
	}
	return nil, false
}

type backend struct{ kind Kind }

func (b backend) Name() string { return prefix + string(b.kind) }

func (b backend) Probe() hal.Availability {
	return hal.Availability{Available: true, Reason: "hal/host with one guarantee broken: " + docs[b.kind]}
}

func (b backend) Open(cfg hal.Config) (hal.Device, error) {
	hb, err := hal.Lookup(host.Name)
	if err != nil {
		return nil, err
	}
	inner, err := hb.Open(cfg)
	if err != nil {
		return nil, err
	}
	return &Device{Device: inner, mm: inner.(hal.MemoryMapped), pm: inner.(hal.PortMapped), exec: inner.(hal.Executor), kind: b.kind, name: b.Name(),
		live: map[*buffer]struct{}{}, decoys: map[*buffer]hal.Buffer{}}, nil
}

// hostEndpoint translates a mutant's endpoint back into the host backend's.
func hostEndpoint(ep hal.Endpoint) hal.Endpoint {
	if strings.HasPrefix(ep.Backend, prefix) {
		ep.Backend = host.Name
	}
	return ep
}

func (d *Device) String() string { return fmt.Sprintf("%s device %d", d.name, d.Device.Info().Ordinal) }
