package channels

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// PortGroup is the host side of port channels from this rank to every
// peer, over one registered window per rank: a PortChannel puts bytes of
// the local window into the peer's window, through the peer's engine and
// the proxy, as MSCCL++'s host-side PortChannel does. Its triggers go into
// a FIFO of the group's own, drained by the same proxy as the FIFOs the
// device pushes into, so host- and device-pushed requests mix on one
// device.
//
// Semaphores: each rank has 2 × NRanks 64-bit words of device memory,
// inbound counters (word f is signalled by rank f) then the counts the
// signals carry; a Wait on the channel to peer f waits for word f to pass
// its next expected value.
type PortGroup struct {
	// Channels[r] is the channel to rank r; nil for this rank.
	Channels []*PortChannel

	dev     hal.Device
	proxy   *Proxy
	fifo    *fifo
	fifoBuf hal.Buffer
	window  hal.Buffer
	sems    hal.Buffer
	remote  []hal.Buffer // imported windows and semaphore regions
	engines []hal.Engine
	closed  bool
}

// PortChannel is one port channel of a PortGroup. Methods of one channel
// must not be called concurrently; channels of a group may be used from
// different goroutines.
type PortChannel struct {
	Peer int

	g        *PortGroup
	ch       int    // FIFO channel index (= peer rank)
	dst      uint64 // the peer's window, as the engine addresses it
	dstSize  int64
	sem      uint64 // this rank's inbound counter at the peer
	count    uint64 // the count word beside it
	expected uint64 // signals waited for so far
	mu       sync.Mutex
}

// ConnectPorts connects this rank's port channels: every rank passes its
// window (the buffer peers put into and its own puts read from). It is
// collective over ex. proxy drains the group's FIFO (NewProxy; one per
// device is enough). Errors: ErrNotSupported when a link is not
// port-mapped or the device does not implement hal.PortMapped, errors of
// allocation, export and import otherwise; nothing stays allocated on
// error.
func ConnectPorts(ctx context.Context, ex Exchanger, dev hal.Device, proxy *Proxy, window hal.Buffer) (_ *PortGroup, err error) {
	pm, ok := dev.(hal.PortMapped)
	if !ok {
		return nil, fmt.Errorf("channels: connect ports: backend %s offers no port-mapped capability: %w", dev.Info().Backend, hal.ErrNotSupported)
	}
	if window == nil || window.Size() <= 0 {
		return nil, fmt.Errorf("channels: connect ports: an empty window: %w", hal.ErrInvalidArgument)
	}
	n, rank := ex.Size(), ex.Rank()
	g := &PortGroup{dev: dev, proxy: proxy, window: window, Channels: make([]*PortChannel, n), engines: make([]hal.Engine, n)}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	if g.sems, err = dev.Alloc(int64(2 * n * 8)); err != nil {
		return nil, fmt.Errorf("channels: connect ports: semaphores: %w", err)
	}
	if g.fifoBuf, err = dev.AllocHost(plan.FifoBytes); err != nil {
		return nil, fmt.Errorf("channels: connect ports: FIFO: %w", err)
	}
	me := portCard{Endpoint: dev.Endpoint(), WindowSize: window.Size()}
	if me.Window, err = pm.ExportPort(window); err != nil {
		return nil, fmt.Errorf("channels: connect ports: export window: %w", err)
	}
	if me.Sems, err = pm.ExportPort(g.sems); err != nil {
		return nil, fmt.Errorf("channels: connect ports: export semaphores: %w", err)
	}
	blob, err := encodeJSON(me)
	if err != nil {
		return nil, err
	}
	all, err := ex.AllGather(ctx, blob)
	if err != nil {
		return nil, fmt.Errorf("channels: connect ports: exchange handles: %w", err)
	}
	peers := make([]int, n)
	for r, b := range all {
		peers[r] = r
		if r == rank {
			continue
		}
		var c portCard
		if err := decodeJSON(bytes.NewReader(b), &c); err != nil {
			return nil, fmt.Errorf("channels: connect ports: rank %d sent a malformed card: %v: %w", r, err, hal.ErrRemote)
		}
		if l := dev.Link(c.Endpoint); l.Caps&hal.CapPortMapped == 0 {
			return nil, fmt.Errorf("channels: connect ports: link to rank %d is not port-mapped (%s): %w", r, l.Reason, hal.ErrNotSupported)
		}
		w, err := pm.ImportPort(c.Window)
		if err != nil {
			return nil, fmt.Errorf("channels: connect ports: import window of rank %d: %w", r, err)
		}
		g.remote = append(g.remote, w)
		s, err := pm.ImportPort(c.Sems)
		if err != nil {
			return nil, fmt.Errorf("channels: connect ports: import semaphores of rank %d: %w", r, err)
		}
		g.remote = append(g.remote, s)
		if g.engines[r], err = pm.NewEngine(c.Endpoint); err != nil {
			return nil, fmt.Errorf("channels: connect ports: engine to rank %d: %w", r, err)
		}
		g.Channels[r] = &PortChannel{Peer: r, g: g, ch: r, dst: w.Addr(), dstSize: c.WindowSize,
			sem: s.Addr() + uint64(rank)*8, count: s.Addr() + uint64(n+rank)*8}
	}
	f, err := newFifo(fmt.Sprintf("port group of rank %d", rank), g.fifoBuf.Host(), g.engines, peers, rank, nil, 0, proxy.log)
	if err != nil {
		return nil, err
	}
	if err := proxy.add(f); err != nil {
		return nil, err
	}
	g.fifo = f
	// Nobody frees what it exported before every rank has imported it.
	if _, err := ex.AllGather(ctx, nil); err != nil {
		return nil, fmt.Errorf("channels: connect ports: %w", err)
	}
	return g, nil
}

type portCard struct {
	Endpoint   hal.Endpoint
	Window     hal.Handle
	WindowSize int64
	Sems       hal.Handle
}

// Close unregisters the group's FIFO from the proxy, waits for its engines
// and releases what the group holds (the window stays the caller's). A
// peer may still put into this rank's window until it closes too: close
// after a final barrier.
func (g *PortGroup) Close() error {
	if g.closed {
		return nil
	}
	g.closed = true
	if g.fifo != nil {
		g.proxy.remove(g.fifo)
	}
	errs := []error{closeEngines(g.engines)}
	for _, b := range g.remote {
		errs = append(errs, b.Free())
	}
	for _, b := range []hal.Buffer{g.sems, g.fifoBuf} {
		if b != nil {
			errs = append(errs, b.Free())
		}
	}
	return errors.Join(errs...)
}

// Err returns the first failure the proxy met on the group's FIFO.
func (g *PortGroup) Err() error {
	if g.fifo == nil {
		return nil
	}
	return g.fifo.Err()
}

func (c *PortChannel) check(dstOff, srcOff, bytes int64) error {
	if dstOff < 0 || srcOff < 0 || bytes < 0 || dstOff+bytes > c.dstSize || srcOff+bytes > c.g.window.Size() {
		return fmt.Errorf("channels: port channel to rank %d: put of %d bytes from offset %d of a %d-byte window to offset %d of the peer's %d-byte window: %w",
			c.Peer, bytes, srcOff, c.g.window.Size(), dstOff, c.dstSize, hal.ErrInvalidArgument)
	}
	return nil
}

// Put queues a copy of bytes bytes from srcOff of the local window to
// dstOff of the peer's window. It returns once the request is in the FIFO;
// Flush waits for it to complete at the source, a Signal after it tells the
// peer it has arrived. Errors: ErrInvalidArgument for a range outside a
// window; a *hal.TimeoutError if the FIFO stays full past the default
// deadline; the proxy's failure.
func (c *PortChannel) Put(dstOff, srcOff, bytes int64) error {
	if err := c.check(dstOff, srcOff, bytes); err != nil {
		return err
	}
	if bytes == 0 {
		return nil
	}
	_, err := c.g.fifo.push(plan.TriggerPut, c.ch, c.g.window.Addr()+uint64(srcOff), c.dst+uint64(dstOff), uint64(bytes), time.Now().Add(plan.DefaultTimeout))
	return err
}

// Signal adds one to the peer's semaphore for this rank once every earlier
// put of the channel is visible at the peer.
func (c *PortChannel) Signal() error {
	_, err := c.g.fifo.push(plan.TriggerSignal, c.ch, 0, c.sem, c.count, time.Now().Add(plan.DefaultTimeout))
	return err
}

// PutWithSignal is Put then Signal.
func (c *PortChannel) PutWithSignal(dstOff, srcOff, bytes int64) error {
	if err := c.Put(dstOff, srcOff, bytes); err != nil {
		return err
	}
	return c.Signal()
}

// PutWithSignalAndFlush is Put, Signal and Flush.
func (c *PortChannel) PutWithSignalAndFlush(dstOff, srcOff, bytes int64, deadline time.Time) error {
	if err := c.PutWithSignal(dstOff, srcOff, bytes); err != nil {
		return err
	}
	return c.Flush(deadline)
}

// Flush returns when every earlier request of the channel is complete at
// the source (the local window may be overwritten). It says nothing about
// the peer: a Signal does. Errors: a *hal.TimeoutError naming rank, peer
// and channel when the deadline passes; the proxy's failure.
func (c *PortChannel) Flush(deadline time.Time) error {
	me, err := c.g.fifo.push(plan.TriggerFlush, c.ch, 0, 0, 0, deadline)
	if err != nil {
		return err
	}
	return c.g.fifo.waitFlushed(me, c.ch, deadline)
}

// Wait waits until the peer's next signal on this channel has arrived:
// the data it put before that signal is then in this rank's window.
// Errors: a *hal.TimeoutError naming rank, peer and the values when the
// deadline passes.
func (c *PortChannel) Wait(deadline time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	want := c.expected + 1
	var buf [8]byte
	start := time.Now()
	for spins := 0; ; spins++ {
		if err := c.g.dev.Read(buf[:], c.g.sems, int64(c.Peer)*8); err != nil {
			return fmt.Errorf("channels: port channel to rank %d: wait: %w", c.Peer, err)
		}
		v := binary.LittleEndian.Uint64(buf[:])
		if v >= want {
			c.expected = want
			return nil
		}
		if err := c.g.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return &hal.TimeoutError{Rank: c.g.fifo.rank, Peer: c.Peer, Channel: c.ch, Semaphore: c.Peer, Block: -1,
				What: "port-channel semaphore", Expected: want, Observed: v}
		}
		hostBackoff(spins, start)
	}
}
