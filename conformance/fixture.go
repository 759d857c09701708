package conformance

import (
	"errors"
	"fmt"

	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// The set-up that the data tests share, written once: a plan's channel
// resources with the buffers its launches use (fixture), and buffers of
// peers imported through a capability's handles (peerBuffers).

// registered says which launch buffer of a fixture every peer maps.
type registered int

const (
	registerNone registered = iota
	// registerInput: the input, which kernels read from peers
	// (plan.Args.PeerInput, gets).
	registerInput
	// registerOutput: the output, which kernels write into peers
	// (plan.Args.PeerOutput, puts).
	registerOutput
)

// fixtureSpec says what newFixture sets up beside the plan's resources.
type fixtureSpec struct {
	// scratch is the scratch capacity in bytes, the same on every rank (0
	// for a plan without scratch); initialLaunch starts the launch counter
	// (channels.Setup).
	scratch       int64
	initialLaunch uint64
	// in and out are the sizes in bytes of the input and output buffers;
	// 0 allocates none. Without an output, launches run in place on the
	// input.
	in, out  int64
	register registered
	// switchMapped: the plan has a switch buffer, and a device that
	// refuses multicast (ErrNotSupported) makes the test NotSupported.
	switchMapped bool
	// noProgram leaves the plan unprepared and opens no stream, for tests
	// that prepare it themselves (for several types) or only lend memory.
	noProgram bool
}

// fixture is one rank's set-up of a data test of a channel plan, built by
// newFixture in this order: the plan's resources (channels.Setup: scratch
// and semaphores allocated, exported, exchanged with every rank and the
// peers' mapped), the input and output buffers, one of them registered
// with every peer (channels.Register: exported, exchanged and mapped on
// every peer), and the plan prepared for raw bytes on a stream of its own.
//
// Each part is released by the test's cleanups (T.Cleanup), in reverse
// order, once the test's streams are synchronised; a fixture therefore has
// no Close, and a failed newFixture leaves what it built to them too.
type fixture struct {
	t   *T
	p   *plan.Plan
	res *channels.Resources
	// in and out are the launch buffers, nil where the spec asked for none.
	in, out hal.Buffer
	// reg is the registered buffer mapped on every peer (nil for
	// registerNone); regOut says it is the output.
	reg    *channels.Registration
	regOut bool
	// prog and s are the prepared plan and its stream (nil with noProgram).
	prog hal.Program
	s    hal.Stream
}

// newFixture sets up p as spec says; collective over the test's ranks.
// Errors are those of the T helpers, which name the rank.
func newFixture(t *T, p *plan.Plan, spec fixtureSpec) (*fixture, error) {
	f := &fixture{t: t, p: p}
	var err error
	f.res, err = t.Setup(p, spec.scratch, spec.initialLaunch)
	if spec.switchMapped && errors.Is(err, hal.ErrNotSupported) {
		return nil, t.NotSupported("%v", err)
	}
	if err != nil {
		return nil, err
	}
	if spec.in > 0 {
		if f.in, err = t.Alloc(spec.in); err != nil {
			return nil, err
		}
	}
	if spec.out > 0 {
		if f.out, err = t.Alloc(spec.out); err != nil {
			return nil, err
		}
	}
	switch spec.register {
	case registerInput:
		f.reg, err = t.Register(f.in)
	case registerOutput:
		f.reg, err = t.Register(f.out)
		f.regOut = true
	}
	if err != nil {
		return nil, err
	}
	if !spec.noProgram {
		if f.prog, f.s, err = t.PrepareStream(p, f.res); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// args returns the arguments of a launch of count elements: input at byte
// inOff of the input buffer, output at outOff of the output buffer (of the
// input when there is none), and, with a registered buffer, each channel's
// peer copy of it at the same offset as the local side (PeerOutput or
// PeerInput, indexed by channel). A buffer the spec left out gives
// address 0.
func (f *fixture) args(count, inOff, outOff int64) *plan.Args {
	out := f.out
	if out == nil {
		out = f.in
	}
	a := &plan.Args{Count: count, Input: addrAt(f.in, inOff), Output: addrAt(out, outOff)}
	if f.reg == nil {
		return a
	}
	off := inOff
	if f.regOut {
		off = outOff
	}
	peers := make([]uint64, len(f.p.Channels))
	for ci, ch := range f.p.Channels {
		peers[ci] = addrAt(f.reg.Peers[ch.Peer], off)
	}
	if f.regOut {
		a.PeerOutput = peers
	} else {
		a.PeerInput = peers
	}
	return a
}

// addrAt is the device address of byte off of b, or 0 for no buffer.
func addrAt(b hal.Buffer, off int64) uint64 {
	if b == nil {
		return 0
	}
	return b.Addr() + uint64(off)
}

// launch enqueues one execution of the fixture's program on its stream.
func (f *fixture) launch(a *plan.Args) error { return f.t.Launch(f.prog, f.s, a) }

// finish synchronises the fixture's stream and returns the failure its
// launches recorded, if any (T.Finish).
func (f *fixture) finish() error { return f.t.Finish(f.s, f.res) }

// peerBuffers are buffers of other ranks imported on this device through a
// capability's handles (hal.MemoryMapped.Import, hal.PortMapped.ImportPort),
// in the order of import. Close releases them.
type peerBuffers struct {
	bufs []peerBuffer
}

// peerBuffer is one imported buffer: whose it is and what the test calls it.
type peerBuffer struct {
	rank int
	what string
	hal.Buffer
}

// importFrom imports rank's handle h with imp and keeps the buffer for
// Close. what names the buffer in errors ("window", "4099-byte buffer").
func (pb *peerBuffers) importFrom(t *T, imp func(hal.Handle) (hal.Buffer, error), rank int, h hal.Handle, what string) (hal.Buffer, error) {
	b, err := imp(h)
	if err != nil {
		return nil, t.Errorf("import the %s of rank %d: %w", what, rank, err)
	}
	pb.bufs = append(pb.bufs, peerBuffer{rank: rank, what: what, Buffer: b})
	return b, nil
}

// Close frees the imported buffers in reverse order of import, every one
// of them even when one fails, and returns the first error, naming its
// rank; a second Close does nothing.
func (pb *peerBuffers) Close() error {
	var first error
	for i := len(pb.bufs) - 1; i >= 0; i-- {
		b := pb.bufs[i]
		if err := b.Free(); err != nil && first == nil {
			first = fmt.Errorf("unmap the %s of rank %d: %w", b.what, b.rank, err)
		}
	}
	pb.bufs = nil
	return first
}

// mapPeers exports buf through mm, gives every rank's handle to every
// rank and imports (maps) every peer's, in rank order; collective. what
// names the buffers in errors. The mappings are released by the returned
// peerBuffers' Close, or by the test's cleanups when the test does not
// close them itself (also when mapPeers fails part way).
func mapPeers(t *T, mm hal.MemoryMapped, buf hal.Buffer, what string) (*peerBuffers, error) {
	h, err := mm.Export(buf)
	if err != nil {
		return nil, t.Errorf("export the %s: %w", what, err)
	}
	all, err := t.AllGather(h)
	if err != nil {
		return nil, err
	}
	pb := &peerBuffers{}
	t.Cleanup(pb.Close)
	for q := range all {
		if q == t.Rank {
			continue
		}
		if _, err := pb.importFrom(t, mm.Import, q, all[q], what); err != nil {
			return nil, err
		}
	}
	return pb, nil
}
