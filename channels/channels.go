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
	// without one); netExported the buffers registered with its
	// NetDevice, withdrawn before they are freed.
	net         *Network
	netExported []hal.Buffer
	// hostWindows: scratch and semaphores are host memory mapped into
	// the device (Network.hostWindows).
	hostWindows bool
	// netScratch and netSems are the network windows of a plan that
	// splits them (plan.Plan.NetSlot; nil otherwise): host memory mapped
	// into the device where the network writes it (Network.HostWindows),
	// else device memory.
	netScratch, netSems hal.Buffer
}

// HostWindows reports whether the plan's scratch and semaphores are in
// host memory mapped into the device, where a network's receivers store
// peers' puts and signals with the CPU (every channel goes to a peer on
// another node over such a network; docs/network.md).
func (r *Resources) HostWindows() bool { return r.hostWindows }

// Bytes is the memory the resources hold on this rank for windows and
// state (local buffers only; mapped peer buffers are the peers'), a split
// plan's network windows included.
func (r *Resources) Bytes() int64 {
	var n int64
	for _, b := range []hal.Buffer{r.scratch, r.sems, r.expected, r.state, r.netScratch, r.netSems} {
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
	s, err := newSetup(ctx, ex, dev, p, scratchBytes)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.r.Close()
		}
	}()
	if s.port {
		s.r.net = networkOf(dev)
	}
	if err := s.allocate(); err != nil {
		return nil, err
	}
	if err := s.startLaunchCounter(initialLaunch); err != nil {
		return nil, err
	}
	me, err := s.publish()
	if err != nil {
		return nil, err
	}
	cards, err := s.exchange(me)
	if err != nil {
		return nil, err
	}
	s.bindLocal()
	for ci, ch := range p.Channels {
		if err := s.connectChannel(ci, ch, me.Endpoint, cards[ch.Peer]); err != nil {
			return nil, err
		}
	}
	if err := s.startProxy(); err != nil {
		return nil, err
	}
	if err := s.connectSwitch(); err != nil {
		return nil, err
	}
	if err := s.awaitPeers(); err != nil {
		return nil, err
	}
	return s.r, nil
}

// setup is one call of Setup in progress: its arguments, the capabilities
// the plan's channels use, and the resources built so far, which Setup
// closes when a step fails.
type setup struct {
	ctx          context.Context
	ex           Exchanger
	dev          hal.Device
	p            *plan.Plan
	scratchBytes int64
	// mm is the device's memory-mapped interface when a channel of the plan
	// is a memory channel, pm its port-mapped one when a channel is a port
	// channel (port); nil otherwise.
	mm   hal.MemoryMapped
	pm   hal.PortMapped
	port bool
	r    *Resources
}

// newSetup validates p against the bootstrap and finds the capabilities
// its channels use; it allocates nothing. Errors: ErrInvalidArgument for a
// plan that fails Validate or is another rank's, ErrNotSupported when the
// device lacks the memory- or port-mapped capability a channel needs.
func newSetup(ctx context.Context, ex Exchanger, dev hal.Device, p *plan.Plan, scratchBytes int64) (*setup, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("channels: setup: %v: %w", err, hal.ErrInvalidArgument)
	}
	if p.Rank != ex.Rank() || p.NRanks != ex.Size() {
		return nil, fmt.Errorf("channels: setup %s: plan is for rank %d of %d, bootstrap is rank %d of %d: %w",
			p.Name, p.Rank, p.NRanks, ex.Rank(), ex.Size(), hal.ErrInvalidArgument)
	}
	s := &setup{ctx: ctx, ex: ex, dev: dev, p: p, scratchBytes: scratchBytes, port: p.HasPorts(), r: &Resources{Plan: p, dev: dev}}
	memory := false
	for _, c := range p.Channels {
		memory = memory || !c.Port
	}
	if memory {
		var ok bool
		if s.mm, ok = dev.(hal.MemoryMapped); !ok {
			return nil, fmt.Errorf("channels: setup %s: backend %s offers no memory-mapped capability: %w", p.Name, dev.Info().Backend, hal.ErrNotSupported)
		}
	}
	if s.port {
		var ok bool
		if s.pm, ok = dev.(hal.PortMapped); !ok {
			return nil, fmt.Errorf("channels: setup %s: backend %s offers no port-mapped capability: %w", p.Name, dev.Info().Backend, hal.ErrNotSupported)
		}
	}
	return s, nil
}

// allocate allocates this rank's buffers of the plan: scratch (when
// scratchBytes > 0), semaphores and expected values (when the plan has
// semaphores), the per-block state, the host-visible control block and,
// for port channels, the FIFO (host memory) and its head counter. Scratch
// and semaphores are host memory mapped into the device when the plan's
// channels all go over a network that writes such windows with the CPU
// (Network.hostWindows). A plan that splits its windows (plan.Plan.NetSlot)
// gets a second scratch and semaphore region, its network windows: host
// memory where the network writes host windows, device memory otherwise.
func (s *setup) allocate() error {
	r, p := s.r, s.p
	r.hostWindows = r.net != nil && r.net.hostWindows(p.Channels)
	split := p.NetSlot > 0
	netHost := split && r.net != nil && r.net.HostWindows()
	type want struct {
		b    *hal.Buffer
		n    int64
		host bool
		what string
		need bool
	}
	for _, w := range []want{
		{&r.scratch, s.scratchBytes, r.hostWindows, "scratch", s.scratchBytes > 0},
		{&r.sems, p.SemaphoreRegionBytes(), r.hostWindows, "semaphores", p.Semaphores > 0},
		{&r.netScratch, p.NetScratchBytes(s.scratchBytes), netHost, "network scratch", split && s.scratchBytes > 0},
		{&r.netSems, p.SemaphoreRegionBytes(), netHost, "network semaphores", split && p.Semaphores > 0},
		{&r.expected, p.ExpectedRegionBytes(), false, "expected values", p.Semaphores > 0},
		{&r.state, p.StateBytes(), false, "state", true},
		{&r.control, plan.ControlBytes, true, "control block", true},
		{&r.fifoBuf, plan.FifoBytes, true, "port-channel FIFO", s.port},
		{&r.fifoHead, plan.FifoHeadBytes, false, "port-channel FIFO head", s.port},
	} {
		if !w.need {
			continue
		}
		var err error
		if w.host {
			*w.b, err = s.dev.AllocHost(w.n)
		} else {
			*w.b, err = s.dev.Alloc(w.n)
		}
		if err != nil {
			return fmt.Errorf("channels: setup %s: %s (%d bytes): %w", p.Name, w.what, w.n, err)
		}
	}
	return nil
}

// startLaunchCounter sets every block's launch counter, from which LL
// flags derive, to initialLaunch (left at zero when it is 0).
func (s *setup) startLaunchCounter(initialLaunch uint64) error {
	if initialLaunch == 0 {
		return nil
	}
	b := make([]byte, s.p.StateBytes())
	for i := 0; i < len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], initialLaunch)
	}
	if err := s.dev.Write(s.r.state, 0, b); err != nil {
		return fmt.Errorf("channels: setup %s: state: %w", s.p.Name, err)
	}
	return nil
}

// publish fills this rank's card: its endpoint (the network's when one is
// open), its view of the plan, and handles of its scratch and semaphores
// for each kind of peer access the plan's channels use (mapping, the
// device's engines, the network's engines).
func (s *setup) publish() (card, error) {
	r := s.r
	me := card{Plan: s.p.Name, Semaphores: s.p.Semaphores, ScratchBytes: s.scratchBytes, Endpoint: s.dev.Endpoint()}
	var netExport func(hal.Buffer) (hal.Handle, error)
	if r.net != nil {
		me.Endpoint = r.net.Endpoint()
		netExport = func(b hal.Buffer) (hal.Handle, error) {
			h, err := r.net.nd.ExportPort(b)
			if err == nil {
				r.netExported = append(r.netExported, b)
			}
			return h, err
		}
	}
	mm, pm := s.mm, s.pm
	if r.hostWindows {
		// Every peer is on another node: only the network reaches these
		// buffers (and a device's engines or mappings may not take host
		// memory).
		mm, pm = nil, nil
	}
	netScratch, netSems := r.scratch, r.sems
	if s.p.NetSlot > 0 {
		// Split windows: the node's peers map the device windows, the
		// network reaches the network windows, and every port channel
		// goes over the network (plan.Plan.Validate).
		netScratch, netSems, pm = r.netScratch, r.netSems, nil
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
		{netScratch, netExport, &me.NetScratch, "scratch for network engines"},
		{netSems, netExport, &me.NetSems, "semaphores for network engines"},
	} {
		if x.b == nil || x.export == nil {
			continue
		}
		var err error
		if *x.h, err = x.export(x.b); err != nil {
			return card{}, fmt.Errorf("channels: setup %s: export %s: %w", s.p.Name, x.what, err)
		}
	}
	return me, nil
}

// exchange gives every rank's card to every rank and checks that all of
// them run the same plan (name, semaphores, scratch); ErrInvalidUsage
// names the two ranks that disagree.
func (s *setup) exchange(me card) ([]card, error) {
	cards, err := gatherCards(s.ctx, s.ex, me)
	if err != nil {
		return nil, fmt.Errorf("channels: setup %s: %w", s.p.Name, err)
	}
	for rk, c := range cards {
		if c.Plan != me.Plan || c.Semaphores != me.Semaphores || c.ScratchBytes != me.ScratchBytes {
			return nil, fmt.Errorf("channels: setup: rank %d runs plan %s (%d semaphores, %d scratch bytes) but rank %d runs %s (%d, %d): %w",
				s.p.Rank, me.Plan, me.Semaphores, me.ScratchBytes, rk, c.Plan, c.Semaphores, c.ScratchBytes, hal.ErrInvalidUsage)
		}
	}
	return cards, nil
}

// bindLocal writes the addresses of this rank's buffers into the plan's
// bindings and makes room for one engine per channel of a plan with port
// channels.
func (s *setup) bindLocal() {
	r := s.r
	r.Bindings = plan.Bindings{ScratchBytes: s.scratchBytes, State: r.state.Addr(), Control: r.control.Addr()}
	if r.scratch != nil {
		r.Bindings.Scratch = r.scratch.Addr()
	}
	if r.sems != nil {
		r.Bindings.Semaphores, r.Bindings.Expected = r.sems.Addr(), r.expected.Addr()
	}
	if r.netScratch != nil {
		r.Bindings.NetScratch = r.netScratch.Addr()
	}
	if r.netSems != nil {
		r.Bindings.NetSemaphores = r.netSems.Addr()
	}
	if s.port {
		r.Bindings.Fifo, r.Bindings.FifoHead = r.fifoBuf.Addr(), r.fifoHead.Addr()
		r.engines = make([]hal.Engine, len(s.p.Channels))
	}
}

// peerAccess is how this rank reaches the buffers of a channel's peer: the
// import of the peer's handles and, for a port channel, the engine towards
// it.
type peerAccess struct {
	importBuf     func(hal.Handle) (hal.Buffer, error)
	newEngine     func(hal.Endpoint) (hal.Engine, error) // nil for a memory channel
	scratch, sems hal.Handle
}

// access decides how channel ci reaches its peer, whose card is c: a memory
// channel maps the peer's buffers; a port channel imports them for the
// device's engines, or, to a peer on another node when a network is open,
// for the network's. ErrNotSupported when the link lacks the channel's
// capability, or a memory channel's peer is on another node.
func (s *setup) access(ci int, ch plan.Channel, self hal.Endpoint, c card) (peerAccess, error) {
	need, kind := hal.CapMemoryMapped, "memory-mapped"
	a := peerAccess{importBuf: importOf(s.mm), scratch: c.Scratch, sems: c.Sems}
	if ch.Port {
		need, kind = hal.CapPortMapped, "port-mapped"
		a = peerAccess{importBuf: importPortOf(s.pm), newEngine: s.pm.NewEngine, scratch: c.PortScratch, sems: c.PortSems}
	}
	why := self.OtherNode(c.Endpoint)
	if ch.Net && why == "" {
		why = "the plan carries the channel over the network"
		if s.r.net == nil {
			return peerAccess{}, fmt.Errorf("channels: setup %s: channel %d to rank %d goes over the network (plan.Channel.Net), but no network is open: %w",
				s.p.Name, ci, ch.Peer, hal.ErrNotSupported)
		}
	}
	if why != "" && s.r.net != nil {
		// A peer on another node, or a channel the plan carries over the
		// network: the network's engines and registrations.
		if !ch.Port {
			return peerAccess{}, fmt.Errorf("channels: setup %s: channel %d to rank %d is a memory channel, but the peer is on another node (%s): %w",
				s.p.Name, ci, ch.Peer, why, hal.ErrNotSupported)
		}
		nd := s.r.net.nd
		return peerAccess{importBuf: nd.ImportPort, newEngine: nd.NewEngine, scratch: c.NetScratch, sems: c.NetSems}, nil
	}
	if l := s.dev.Link(c.Endpoint); l.Caps&need == 0 {
		return peerAccess{}, fmt.Errorf("channels: setup %s: channel %d to rank %d: link is not %s (%s): %w",
			s.p.Name, ci, ch.Peer, kind, l.Reason, hal.ErrNotSupported)
	}
	return a, nil
}

// connectChannel connects channel ci to its peer, whose card is c: for a
// port channel an engine towards the peer, then the peer's scratch and
// semaphores mapped or imported. It appends the channel and its peer
// bindings to the resources; on error nothing of the channel stays but
// its engine, which Close releases with the others.
func (s *setup) connectChannel(ci int, ch plan.Channel, self hal.Endpoint, c card) error {
	a, err := s.access(ci, ch, self, c)
	if err != nil {
		return err
	}
	r, name := s.r, s.p.Name
	if a.newEngine != nil {
		if r.engines[ci], err = a.newEngine(c.Endpoint); err != nil {
			return fmt.Errorf("channels: setup %s: engine of channel %d to rank %d: %w", name, ci, ch.Peer, err)
		}
	}
	mc := MemoryChannel{Peer: ch.Peer, Port: ch.Port}
	var pb plan.PeerBinding
	if a.scratch != nil {
		b, err := a.importBuf(a.scratch)
		if err != nil {
			return fmt.Errorf("channels: setup %s: map scratch of rank %d: %w", name, ch.Peer, err)
		}
		mc.RemoteScratch, pb.Scratch = b, b.Addr()
	}
	if a.sems != nil {
		b, err := a.importBuf(a.sems)
		if err != nil {
			if mc.RemoteScratch != nil {
				mc.RemoteScratch.Free()
			}
			return fmt.Errorf("channels: setup %s: map semaphores of rank %d: %w", name, ch.Peer, err)
		}
		mc.RemoteSemaphores, pb.Semaphores = b, b.Addr()
	}
	r.Channels = append(r.Channels, mc)
	r.Bindings.Peers = append(r.Bindings.Peers, pb)
	return nil
}

// startProxy, for a plan with port channels, creates the plan's FIFO over
// its engines and adds it to the device's shared proxy, which also watches
// the network's receiver-side failures when a network is open.
func (s *setup) startProxy() error {
	if !s.port {
		return nil
	}
	r, p := s.r, s.p
	peers := make([]int, len(p.Channels))
	for i, c := range p.Channels {
		peers[i] = c.Peer
	}
	r.proxy = acquireProxy(s.dev, p.Rank)
	f, err := newFifo(p.Name, r.fifoBuf.Host(), r.engines, peers, p.Rank, r.control.Host(), 0, r.proxy.log)
	if err != nil {
		return fmt.Errorf("channels: setup %s: %w", p.Name, err)
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
		return fmt.Errorf("channels: setup %s: %w", p.Name, err)
	}
	r.fifo = f
	return nil
}

// connectSwitch, for a plan with a switch buffer, joins the multicast
// group of every rank (ConnectSwitch) and binds its copy, multicast
// address and capacity.
func (s *setup) connectSwitch() error {
	p, r := s.p, s.r
	if !p.HasSwitch() {
		return nil
	}
	var err error
	if r.Switch, err = ConnectSwitch(s.ctx, s.ex, s.dev, p.SwitchCapacity()); err != nil {
		return fmt.Errorf("channels: setup %s: %w", p.Name, err)
	}
	r.Bindings.Switch, r.Bindings.Multicast, r.Bindings.SwitchBytes = r.Switch.Local.Addr(), r.Switch.Addr(), p.SwitchCapacity()
	return nil
}

// awaitPeers waits for every rank: nobody leaves (and may free what it
// exported) before every rank has mapped its peers' buffers.
func (s *setup) awaitPeers() error {
	if _, err := s.ex.AllGather(s.ctx, nil); err != nil {
		return fmt.Errorf("channels: setup %s: %w", s.p.Name, err)
	}
	return nil
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

// Owed is an inbound semaphore counter of a plan that its peer has not yet
// brought to the value this rank's waits count on (Resources.Owed).
type Owed struct {
	Peer      int    // the rank that owes the signals
	Semaphore int    // semaphore index, 0 to Plan.Semaphores−1
	Expected  uint64 // the expected value (plan.Plan.ExpectedRegionBytes's table)
	Observed  uint64 // the counter's value when read
}

// Owed reads, after this rank's launches of the plan have completed, the
// inbound semaphore counters (plan.Plan.InboundOffset) and the expected
// values its waits advanced, and returns the counters still below their
// expected value, by peer and semaphore: the signals that peers' launches
// of the plan will still store into this rank's semaphores. In a healthy
// plan an ordinary wait passed only once its counter reached the expected
// value, so what remains are the releases that credit waits
// (plan.Op.Credits) take in a later launch: those of the peers' last
// launches (less the one a peer's last run never sends where releases
// are deferred: plan.Plan.ReleaseLag). Mailbox words (plan.Post) keep
// expected value 0 and never count. A wait that gave up (Stopped) leaves
// its expected value ahead for good. The reads go through the device (hal.Device.Read; a few
// hundred bytes per plan). Errors: those of the device's reads.
func (r *Resources) Owed() ([]Owed, error) {
	p := r.Plan
	if r.sems == nil || r.expected == nil || p.Semaphores == 0 {
		return nil, nil
	}
	n := p.ExpectedRegionBytes()
	in, exp := make([]byte, n), make([]byte, n)
	if err := r.dev.Read(exp, r.expected, 0); err != nil {
		return nil, fmt.Errorf("channels: %s: read expected values: %w", p.Name, err)
	}
	if bytes.Count(exp, []byte{0}) == len(exp) {
		return nil, nil // no wait ran
	}
	if err := r.dev.Read(in, r.sems, 0); err != nil {
		return nil, fmt.Errorf("channels: %s: read semaphores: %w", p.Name, err)
	}
	// A split plan's network peers signal its network semaphores
	// (plan.Plan.NetSlot): their words come from there.
	var netIn []byte
	netPeer := map[int]bool{}
	if r.netSems != nil {
		netIn = make([]byte, n)
		if err := r.dev.Read(netIn, r.netSems, 0); err != nil {
			return nil, fmt.Errorf("channels: %s: read network semaphores: %w", p.Name, err)
		}
		for i, c := range p.Channels {
			if p.NetChannels()>>i&1 != 0 {
				netPeer[c.Peer] = true
			}
		}
	}
	var out []Owed
	le := binary.LittleEndian
	lag := p.ReleaseLag()
	for peer := 0; peer < p.NRanks; peer++ {
		words := in
		if netPeer[peer] {
			words = netIn
		}
		for s := 0; s < p.Semaphores; s++ {
			o := p.InboundOffset(peer, s)
			e, v := le.Uint64(exp[o:]), le.Uint64(words[o:])
			if lag != nil && e > 0 {
				e -= lag[peer*p.Semaphores+s] // the peer's last run releases nothing (plan.Op.Deferred)
			}
			if v < e {
				out = append(out, Owed{Peer: peer, Semaphore: s, Expected: e, Observed: v})
			}
		}
	}
	return out, nil
}

// Stopped reports whether launches of the plan were aborted (Abort) or
// recorded a failure (Check): their expected values no longer match what
// peers will signal.
func (r *Resources) Stopped() bool {
	if r.control == nil {
		return false
	}
	c := r.control.Host()
	_, failed := plan.DecodeControl(c)
	return failed || c[plan.CtlAbort] != 0
}

// Quiesce stops the plan's port channels: its FIFO leaves the proxy and
// its engines close, each after the requests issued to it (a network
// engine's goodbye is answered once the peer has taken its frames), so
// that nothing of this rank is in flight towards a peer when it returns.
// Close calls it first; a communicator across nodes quiesces every plan,
// then waits for every rank before it frees anything (weft.Comm.Close), so
// that no rank withdraws its windows or closes its network while a peer's
// last releases travel. Calling it again does nothing.
func (r *Resources) Quiesce() error {
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
	return errors.Join(errs...)
}

// Close frees local buffers and unmaps peer buffers (after Quiesce). It
// returns the errors met.
func (r *Resources) Close() error {
	errs := []error{r.Quiesce()}
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
	// No peer's frame may land in them once they are freed.
	for _, b := range r.netExported {
		errs = append(errs, r.net.unexport(b))
	}
	r.netExported = nil
	for _, b := range []*hal.Buffer{&r.scratch, &r.sems, &r.netScratch, &r.netSems, &r.expected, &r.state, &r.control, &r.fifoBuf, &r.fifoHead} {
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
