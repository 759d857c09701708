// Package channels connects ranks with weft's channel primitives.
//
// A MemoryChannel joins this rank to one peer over the memory-mapped
// capability of the HAL: the peer's scratch buffer and semaphore region are
// mapped into this device's address space, so a kernel puts data with
// ordinary stores, signals by an atomic add on the peer's semaphore (release,
// system scope), and waits on its own semaphore (acquire). LL packets carry
// data and a flag in one 8- or 16-byte store, so a receiver polls the data
// itself instead of a semaphore. Semantics follow MSCCL++ (architecture.md
// §3): put/get/signal/wait/flush, relaxed variants, putPackets and
// unpackPackets.
//
// On a device, the channel primitives are the functions of the device
// library (DeviceLibrary), which generated plan kernels call; hal/host
// implements the same semantics in Go. This package does the host side:
// it allocates each plan's resources (scratch, semaphores, device state and
// a host-visible control block), exchanges handles through the bootstrap,
// maps the peers' buffers ([Setup]), registers user buffers for zero-copy
// access ([Register]), and turns a failure recorded by a launch into an
// error that names the rank, peer, channel, semaphore and values
// ([Resources.Check]).
//
// Port channels to peers on other nodes go through a network transport
// ([Network], opened once per communicator): the same FIFO and proxy, the
// NetDevice's engines.
//
// A plan with a switch buffer also gets a [SwitchChannel]: a multicast group
// of all its ranks, each bound to a local copy, whose multicast address the
// plan's switch transfers use (NVLS; hal.SwitchMapped).
//
// Memory per plan and rank: scratch as the plan's ScratchBytes asks for its largest message, plus
// 2×NRanks×Semaphores×8 bytes of semaphores, NRanks×Semaphores×8 of
// expected values, 8 bytes of state per thread block, a 64-byte control
// block and, for a plan with a switch buffer, its SwitchCapacity rounded up
// to the multicast granularity.
package channels

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// Exchanger is the part of a bootstrap that channel setup needs
// (bootstrap.Bootstrap satisfies it).
type Exchanger interface {
	Rank() int
	Size() int
	AllGather(ctx context.Context, data []byte) ([][]byte, error)
}

// MemoryChannel is the host-side view of one channel of a plan.
type MemoryChannel struct {
	Peer int
	// Port: a port channel (plan.Channel.Port), whose peer buffers are
	// imported for its engine (hal.PortMapped.ImportPort), not mapped.
	Port bool
	// RemoteScratch and RemoteSemaphores are the peer's buffers mapped on
	// this device (nil when the plan has no scratch).
	RemoteScratch, RemoteSemaphores hal.Buffer
}

// Resources are one prepared plan's buffers on one rank.
type Resources struct {
	Plan     *plan.Plan
	Channels []MemoryChannel
	// Switch is the plan's switch buffer (nil without one).
	Switch   *SwitchChannel
	Bindings plan.Bindings

	dev                                     hal.Device
	scratch, sems, expected, state, control hal.Buffer

	// Port channels: the plan's FIFO, its head counter, one engine per
	// port channel (nil for memory channels), and the shared proxy.
	fifoBuf, fifoHead hal.Buffer
	engines           []hal.Engine
	fifo              *fifo
	proxy             *Proxy
	// net is the network of channels to peers on other nodes (nil
	// without one).
	net *Network
}

// Bytes is the device memory the resources hold on this rank (local
// buffers only; mapped peer buffers are the peers').
func (r *Resources) Bytes() int64 {
	var n int64
	for _, b := range []hal.Buffer{r.scratch, r.sems, r.expected, r.state} {
		if b != nil {
			n += b.Size()
		}
	}
	if r.Switch != nil {
		n += r.Switch.Local.Size()
	}
	return n
}

// Setup allocates and connects the resources of plan p, which every rank
// builds for itself; it is collective over ex. scratchBytes is the scratch
// capacity, the same on every rank (0 for plans without scratch).
// initialLaunch sets the launch counter, from which LL flags derive (tests
// start it near 2^32 to exercise flag wrap-around).
//
// A plan with a switch buffer gets its multicast group (ConnectSwitch, of
// Plan.SwitchCapacity bytes) and the bindings of its copy and multicast
// address.
//
// When the device has an open [Network] (OpenNetwork), a plan with port
// channels publishes the network's address in its Endpoint.Net and its
// scratch and semaphores as the network's registrations too; its port
// channels to peers on other nodes (Endpoint.Node) take the NetDevice's
// engines and imports, the others the device's. The proxy watches the
// network's receiver-side failures (NetDevice.Err) and fails the plan's
// FIFO with them, so that Check reports them.
//
// Errors: ErrInvalidArgument for a plan that fails Validate or whose rank
// differs from the bootstrap's; ErrInvalidUsage when ranks disagree on the
// plan (name, semaphores, scratch), naming the ranks; ErrNotSupported when
// a channel's link is not memory-mapped, or a link is not switch-mapped
// for a plan with a switch buffer; errors of the device otherwise. On error
// nothing stays allocated.
func Setup(ctx context.Context, ex Exchanger, dev hal.Device, p *plan.Plan, scratchBytes int64, initialLaunch uint64) (_ *Resources, err error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("channels: setup: %v: %w", err, hal.ErrInvalidArgument)
	}
	if p.Rank != ex.Rank() || p.NRanks != ex.Size() {
		return nil, fmt.Errorf("channels: setup %s: plan is for rank %d of %d, bootstrap is rank %d of %d: %w",
			p.Name, p.Rank, p.NRanks, ex.Rank(), ex.Size(), hal.ErrInvalidArgument)
	}
	var mm hal.MemoryMapped
	var pm hal.PortMapped
	memory, port := false, p.HasPorts()
	for _, c := range p.Channels {
		memory = memory || !c.Port
	}
	if memory {
		var ok bool
		if mm, ok = dev.(hal.MemoryMapped); !ok {
			return nil, fmt.Errorf("channels: setup %s: backend %s offers no memory-mapped capability: %w", p.Name, dev.Info().Backend, hal.ErrNotSupported)
		}
	}
	if port {
		var ok bool
		if pm, ok = dev.(hal.PortMapped); !ok {
			return nil, fmt.Errorf("channels: setup %s: backend %s offers no port-mapped capability: %w", p.Name, dev.Info().Backend, hal.ErrNotSupported)
		}
	}
	r := &Resources{Plan: p, dev: dev}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if port {
		r.net = networkOf(dev)
	}
	alloc := func(n int64, host bool, what string) (hal.Buffer, error) {
		var b hal.Buffer
		var err error
		if host {
			b, err = dev.AllocHost(n)
		} else {
			b, err = dev.Alloc(n)
		}
		if err != nil {
			return nil, fmt.Errorf("channels: setup %s: %s (%d bytes): %w", p.Name, what, n, err)
		}
		return b, nil
	}
	if scratchBytes > 0 {
		if r.scratch, err = alloc(scratchBytes, false, "scratch"); err != nil {
			return nil, err
		}
	}
	if p.Semaphores > 0 {
		if r.sems, err = alloc(p.SemaphoreRegionBytes(), false, "semaphores"); err != nil {
			return nil, err
		}
		if r.expected, err = alloc(p.ExpectedRegionBytes(), false, "expected values"); err != nil {
			return nil, err
		}
	}
	if r.state, err = alloc(p.StateBytes(), false, "state"); err != nil {
		return nil, err
	}
	if r.control, err = alloc(plan.ControlBytes, true, "control block"); err != nil {
		return nil, err
	}
	if port {
		if r.fifoBuf, err = alloc(plan.FifoBytes, true, "port-channel FIFO"); err != nil {
			return nil, err
		}
		if r.fifoHead, err = alloc(8, false, "port-channel FIFO head"); err != nil {
			return nil, err
		}
	}
	if initialLaunch != 0 {
		b := make([]byte, p.StateBytes())
		for i := 0; i < len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], initialLaunch)
		}
		if err = dev.Write(r.state, 0, b); err != nil {
			return nil, fmt.Errorf("channels: setup %s: state: %w", p.Name, err)
		}
	}

	// Exchange: every rank publishes its endpoint, its view of the plan and
	// handles of its scratch and semaphores.
	me := card{Plan: p.Name, Semaphores: p.Semaphores, ScratchBytes: scratchBytes, Endpoint: dev.Endpoint()}
	var netExport func(hal.Buffer) (hal.Handle, error)
	if r.net != nil {
		me.Endpoint, netExport = r.net.Endpoint(), r.net.nd.ExportPort
	}
	for _, x := range []struct {
		b      hal.Buffer
		export func(hal.Buffer) (hal.Handle, error)
		h      *hal.Handle
		what   string
	}{
		{r.scratch, exportOf(mm), &me.Scratch, "scratch"},
		{r.sems, exportOf(mm), &me.Sems, "semaphores"},
		{r.scratch, exportPortOf(pm), &me.PortScratch, "scratch for engines"},
		{r.sems, exportPortOf(pm), &me.PortSems, "semaphores for engines"},
		{r.scratch, netExport, &me.NetScratch, "scratch for network engines"},
		{r.sems, netExport, &me.NetSems, "semaphores for network engines"},
	} {
		if x.b == nil || x.export == nil {
			continue
		}
		if *x.h, err = x.export(x.b); err != nil {
			return nil, fmt.Errorf("channels: setup %s: export %s: %w", p.Name, x.what, err)
		}
	}
	cards, err := gatherCards(ctx, ex, me)
	if err != nil {
		return nil, fmt.Errorf("channels: setup %s: %w", p.Name, err)
	}
	for rk, c := range cards {
		if c.Plan != me.Plan || c.Semaphores != me.Semaphores || c.ScratchBytes != me.ScratchBytes {
			return nil, fmt.Errorf("channels: setup: rank %d runs plan %s (%d semaphores, %d scratch bytes) but rank %d runs %s (%d, %d): %w",
				p.Rank, me.Plan, me.Semaphores, me.ScratchBytes, rk, c.Plan, c.Semaphores, c.ScratchBytes, hal.ErrInvalidUsage)
		}
	}
	r.Bindings = plan.Bindings{ScratchBytes: scratchBytes, State: r.state.Addr(), Control: r.control.Addr()}
	if r.scratch != nil {
		r.Bindings.Scratch = r.scratch.Addr()
	}
	if r.sems != nil {
		r.Bindings.Semaphores, r.Bindings.Expected = r.sems.Addr(), r.expected.Addr()
	}
	if port {
		r.Bindings.Fifo, r.Bindings.FifoHead = r.fifoBuf.Addr(), r.fifoHead.Addr()
		r.engines = make([]hal.Engine, len(p.Channels))
	}
	for ci, ch := range p.Channels {
		c := cards[ch.Peer]
		need, kind, imp := hal.CapMemoryMapped, "memory-mapped", importOf(mm)
		scratchH, semsH := c.Scratch, c.Sems
		if ch.Port {
			need, kind, imp = hal.CapPortMapped, "port-mapped", importPortOf(pm)
			scratchH, semsH = c.PortScratch, c.PortSems
		}
		var newEngine func(hal.Endpoint) (hal.Engine, error)
		if ch.Port {
			newEngine = pm.NewEngine
		}
		if why := me.Endpoint.OtherNode(c.Endpoint); why != "" && r.net != nil {
			// A peer on another node: the network's engines and
			// registrations.
			if !ch.Port {
				return nil, fmt.Errorf("channels: setup %s: channel %d to rank %d is a memory channel, but the peer is on another node (%s): %w",
					p.Name, ci, ch.Peer, why, hal.ErrNotSupported)
			}
			newEngine, imp = r.net.nd.NewEngine, r.net.nd.ImportPort
			scratchH, semsH = c.NetScratch, c.NetSems
		} else if l := dev.Link(c.Endpoint); l.Caps&need == 0 {
			return nil, fmt.Errorf("channels: setup %s: channel %d to rank %d: link is not %s (%s): %w",
				p.Name, ci, ch.Peer, kind, l.Reason, hal.ErrNotSupported)
		}
		mc := MemoryChannel{Peer: ch.Peer, Port: ch.Port}
		var pb plan.PeerBinding
		if ch.Port {
			if r.engines[ci], err = newEngine(c.Endpoint); err != nil {
				return nil, fmt.Errorf("channels: setup %s: engine of channel %d to rank %d: %w", p.Name, ci, ch.Peer, err)
			}
		}
		if scratchH != nil {
			b, err := imp(scratchH)
			if err != nil {
				return nil, fmt.Errorf("channels: setup %s: map scratch of rank %d: %w", p.Name, ch.Peer, err)
			}
			mc.RemoteScratch, pb.Scratch = b, b.Addr()
		}
		if semsH != nil {
			b, err := imp(semsH)
			if err != nil {
				if mc.RemoteScratch != nil {
					mc.RemoteScratch.Free()
				}
				return nil, fmt.Errorf("channels: setup %s: map semaphores of rank %d: %w", p.Name, ch.Peer, err)
			}
			mc.RemoteSemaphores, pb.Semaphores = b, b.Addr()
		}
		r.Channels = append(r.Channels, mc)
		r.Bindings.Peers = append(r.Bindings.Peers, pb)
	}
	if port {
		peers := make([]int, len(p.Channels))
		for i, c := range p.Channels {
			peers[i] = c.Peer
		}
		r.proxy = acquireProxy(dev, p.Rank)
		f, err := newFifo(p.Name, r.fifoBuf.Host(), r.engines, peers, p.Rank, r.control.Host(), 0, r.proxy.log)
		if err != nil {
			return nil, fmt.Errorf("channels: setup %s: %w", p.Name, err)
		}
		if r.net != nil {
			nw := r.net
			f.watch = func() error {
				if err := nw.Err(); err != nil {
					return fmt.Errorf("network %s: %w", nw.Name, err)
				}
				return nil
			}
		}
		if err := r.proxy.add(f); err != nil {
			return nil, fmt.Errorf("channels: setup %s: %w", p.Name, err)
		}
		r.fifo = f
	}
	if p.HasSwitch() {
		if r.Switch, err = ConnectSwitch(ctx, ex, dev, p.SwitchCapacity()); err != nil {
			return nil, fmt.Errorf("channels: setup %s: %w", p.Name, err)
		}
		r.Bindings.Switch, r.Bindings.Multicast, r.Bindings.SwitchBytes = r.Switch.Local.Addr(), r.Switch.Addr(), p.SwitchCapacity()
	}
	// Nobody leaves (and may free what it exported) before every rank has
	// mapped its peers' buffers.
	if _, err := ex.AllGather(ctx, nil); err != nil {
		return nil, fmt.Errorf("channels: setup %s: %w", p.Name, err)
	}
	return r, nil
}

// Check reads the control block after the launches on a stream were
// synchronised, and returns the failure they recorded: a *hal.TimeoutError
// for a wait that passed its deadline, an error wrapping ErrInvalidUsage
// for an element count that differs between ranks (naming both), or nil.
func (r *Resources) Check() error {
	if r.fifo != nil {
		if err := r.fifo.Err(); err != nil {
			return fmt.Errorf("%s: %w", r.Plan.Name, err)
		}
	}
	f, failed := plan.DecodeControl(r.control.Host())
	if !failed {
		return nil
	}
	switch f.Status {
	case plan.StatusMismatch:
		return fmt.Errorf("%s: %s: %w", r.Plan.Name, f, hal.ErrInvalidUsage)
	case plan.StatusAborted:
		return fmt.Errorf("%s: %s: %w", r.Plan.Name, f, hal.ErrRemote)
	}
	what := "semaphore"
	switch f.What {
	case plan.WhatPacket:
		what = "LL packet"
	case plan.WhatFifo:
		what = "port-channel FIFO space"
	case plan.WhatFlush:
		what = "port-channel flush"
	}
	return fmt.Errorf("%s: %w", r.Plan.Name, &hal.TimeoutError{
		Rank: f.Rank, Peer: f.Peer, Channel: f.Channel, Semaphore: f.Semaphore, Block: f.Block,
		What: what, Expected: f.Expected, Observed: f.Observed,
	})
}

// Abort makes every wait of running and later launches of the plan give up
// at once (a peer was lost; the host knows before the device deadline).
func (r *Resources) Abort() {
	c := r.control.Host()
	c[plan.CtlAbort] = 1
}

// Close frees local buffers and unmaps peer buffers. It returns the first
// error.
func (r *Resources) Close() error {
	var errs []error
	if r.fifo != nil {
		r.proxy.remove(r.fifo)
		r.fifo = nil
	}
	if r.engines != nil {
		errs = append(errs, closeEngines(r.engines))
		r.engines = nil
	}
	if r.proxy != nil {
		errs = append(errs, releaseProxy(r.dev))
		r.proxy = nil
	}
	if r.Switch != nil {
		errs = append(errs, r.Switch.Close())
		r.Switch = nil
	}
	for _, c := range r.Channels {
		for _, b := range []hal.Buffer{c.RemoteScratch, c.RemoteSemaphores} {
			if b != nil {
				errs = append(errs, b.Free())
			}
		}
	}
	r.Channels = nil
	for _, b := range []*hal.Buffer{&r.scratch, &r.sems, &r.expected, &r.state, &r.control, &r.fifoBuf, &r.fifoHead} {
		if *b != nil {
			errs = append(errs, (*b).Free())
			*b = nil
		}
	}
	if r.net != nil {
		// After the engines: the NetDevice closes with its last plan.
		errs = append(errs, r.net.release())
		r.net = nil
	}
	return errors.Join(errs...)
}

// card is what a rank publishes during Setup.
type card struct {
	Plan         string
	Semaphores   int
	ScratchBytes int64
	Endpoint     hal.Endpoint
	Scratch      hal.Handle
	Sems         hal.Handle
	// Handles for peers' engines (plans with port channels).
	PortScratch, PortSems hal.Handle
	// Handles for peers' network engines (a network is open).
	NetScratch, NetSems hal.Handle
}

// exportOf and friends give nil for a capability the device lacks, so that
// Setup exports and imports only what the plan's channels use.
func exportOf(mm hal.MemoryMapped) func(hal.Buffer) (hal.Handle, error) {
	if mm == nil {
		return nil
	}
	return mm.Export
}

func exportPortOf(pm hal.PortMapped) func(hal.Buffer) (hal.Handle, error) {
	if pm == nil {
		return nil
	}
	return pm.ExportPort
}

func importOf(mm hal.MemoryMapped) func(hal.Handle) (hal.Buffer, error) {
	if mm == nil {
		return nil
	}
	return mm.Import
}

func importPortOf(pm hal.PortMapped) func(hal.Handle) (hal.Buffer, error) {
	if pm == nil {
		return nil
	}
	return pm.ImportPort
}

func gatherCards(ctx context.Context, ex Exchanger, me card) ([]card, error) {
	blob, err := encodeJSON(me)
	if err != nil {
		return nil, err
	}
	all, err := ex.AllGather(ctx, blob)
	if err != nil {
		return nil, fmt.Errorf("exchange channel handles: %w", err)
	}
	cards := make([]card, len(all))
	for i, b := range all {
		if err := decodeJSON(bytes.NewReader(b), &cards[i]); err != nil {
			return nil, fmt.Errorf("rank %d sent a malformed channel card: %v: %w", i, err, hal.ErrRemote)
		}
	}
	return cards, nil
}
