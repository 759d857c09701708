package channels

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// The device API: GIN-style one-sided communication that kernels call
// directly (NCCL 2.28's Device API / GIN, MSCCL++'s device-side
// PortChannel and MemoryChannel), over one registered window per rank.
// A kernel is written once: per peer, the communicator says whether the
// peer is reached by loads and stores through a mapping (memory-mapped) or
// by triggers that the proxy hands to an engine (port-mapped), and the
// device library (device/weft_gin.h; GinBlock for hal/host) does the
// right thing for each. docs/device-api.md describes the API and its
// mapping onto NCCL's and MSCCL++'s terms.
//
// Memory of a DeviceComm on each rank, besides the caller's window:
//
//   - signals: NSignals × NRanks 64-bit words of device memory. Signal id i
//     from source rank r is word i×NRanks + r. Each word has exactly one
//     writer, rank r (its blocks' atomic adds, or its engine to this rank),
//     because copy engines implement "add one" as a store of a mirror
//     counter (hal.Engine.Signal): two writers of one word would lose
//     increments. Words only grow.
//   - bases: NSignals × NRanks + GinCounters words of device memory that
//     only this rank writes: reset_signal and reset_counter record the
//     current value there, and reads return the value minus the base, so
//     a reset never writes a word a peer (or its engine) owns.
//   - counters: GinCounters words of device memory that this rank's blocks
//     add to for memory-mapped and local peers (a put by stores is
//     complete at the source when it is issued); port peers' counters are
//     the FIFO's (plan.CounterOffset), which the proxy adds to. A counter's
//     value is the sum of the two, minus its base.
//   - control: plan.ControlBytes of host memory, the failure record of
//     weft_channels.h (plan.Ctl*).
//   - when a peer is port-mapped: a FIFO (plan.FifoBytes of host memory),
//     its head counter (8 bytes of device memory) and one engine per port
//     peer, registered with the proxy as Setup does for plans.

// GinMaxRanks is the number of ranks a DeviceComm may have
// (WEFT_GIN_MAX_RANKS in weft_gin.h).
const GinMaxRanks = 32

// GinCounters is the number of local counters (plan.FifoCounters).
const GinCounters = plan.FifoCounters

// GinParamsBytes is the size of weft_gin_params, the struct Params packs.
// Layout (little-endian; offsets in bytes):
//
//	  0 u64 window          local window (device address)
//	  8 u64 window_bytes
//	 16 u64 signals         NSignals × NRanks words
//	 24 u64 bases           NSignals × NRanks + GinCounters words
//	 32 u64 counters        GinCounters words (memory-mapped and local peers)
//	 40 u64 fifo            port-channel FIFO (host memory); 0 without port peers
//	 48 u64 fifo_head       its head counter and seen tail (device memory, plan.FifoHeadBytes)
//	 56 u64 control         control block (host memory, plan.Ctl*)
//	 64 u64 timeout_ns      deadline of every device-side wait
//	 72 u64 peer_window[GinMaxRanks]   memory: the mapping; port: the engine's address; self: window
//	328 u64 peer_signals[GinMaxRanks]  likewise for the peers' signal words
//	584 i32 rank, nranks, nsignals, ncounters
//	600 u8  mode[GinMaxRanks]          GinSelf, GinMemory or GinPort
//	632 end
const GinParamsBytes = 9*8 + 2*GinMaxRanks*8 + 4*4 + GinMaxRanks

// PeerMode says how a DeviceComm reaches a peer.
type PeerMode uint8

const (
	// GinSelf is this rank: its own window and signals, by stores.
	GinSelf PeerMode = 0
	// GinMemory: the peer's window and signals are mapped; puts are stores,
	// signals atomic adds (release, system scope).
	GinMemory PeerMode = 1
	// GinPort: puts, signals, counters and flushes are triggers that the
	// proxy hands to the engine of the link.
	GinPort PeerMode = 2
)

func (m PeerMode) String() string {
	switch m {
	case GinSelf:
		return "self"
	case GinMemory:
		return "memory"
	case GinPort:
		return "port"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// GinWhatCounter is the control block's What for a counter wait that
// timed out (plan.What* are the others: WhatSemaphore for a signal wait,
// WhatFifo, WhatFlush, WhatProxy).
const GinWhatCounter = 16

// DeviceOptions are ConnectDevice's options; the zero value is the
// default.
type DeviceOptions struct {
	// ForcePort reaches every other rank through the port-mapped
	// capability even where the link is memory-mapped (tests of the port
	// path on hal/host; comparing copy engines with SM copies). This rank
	// itself is always reached by stores.
	ForcePort bool
	// Timeout bounds every device-side wait; 0 means plan.DefaultTimeout.
	Timeout time.Duration
}

// DeviceComm is one rank's device-API communicator: the window every rank
// registered, the signal words, counters and, for port peers, FIFO and
// engines. Kernels use it through Params (CUDA, weft_gin.h) or Block
// (hal/host, Go).
type DeviceComm struct {
	Rank, NRanks, NSignals int
	// Modes[r] is how rank r is reached.
	Modes []PeerMode

	dev     hal.Device
	timeout time.Duration
	window  hal.Buffer
	// sizes[r] is rank r's window size.
	sizes []int64

	signals, bases, counters, control, fifoBuf, fifoHead hal.Buffer
	// peerWindow and peerSignals are the imported buffers of other ranks
	// (mapped or for engines); nil for this rank.
	peerWindow, peerSignals []hal.Buffer
	engines                 []hal.Engine
	fifo                    *fifo
	proxy                   *Proxy
	sharedProxy             bool
	closed                  bool
}

type ginCard struct {
	Endpoint                hal.Endpoint
	WindowSize              int64
	NSignals                int
	Window, Signals         hal.Handle // memory-mapped (hal.MemoryMapped.Export)
	PortWindow, PortSignals hal.Handle // port-mapped (hal.PortMapped.ExportPort)
}

// ConnectDevice connects the device API over window: every rank passes its
// window (the buffer peers put into; puts to port peers read from this
// device's memory, so their sources are best kept in it too) and the same
// nsignals. It is collective over ex. proxy drains the FIFO when a peer is
// port-mapped; nil uses the proxy shared by the device's plans.
//
// Errors: ErrInvalidArgument for an empty window, nsignals < 1 or more
// than GinMaxRanks ranks; ErrInvalidUsage when ranks disagree on nsignals
// (naming them); ErrNotSupported when a link is neither memory- nor
// port-mapped (nor port-mapped with ForcePort); errors of allocation,
// export and import otherwise. Nothing stays allocated on error.
func ConnectDevice(ctx context.Context, ex Exchanger, dev hal.Device, proxy *Proxy, window hal.Buffer, nsignals int, opts DeviceOptions) (_ *DeviceComm, err error) {
	n, rank := ex.Size(), ex.Rank()
	switch {
	case window == nil || window.Size() <= 0:
		return nil, fmt.Errorf("channels: connect device: an empty window: %w", hal.ErrInvalidArgument)
	case nsignals < 1:
		return nil, fmt.Errorf("channels: connect device: %d signals, want at least 1: %w", nsignals, hal.ErrInvalidArgument)
	case n > GinMaxRanks:
		return nil, fmt.Errorf("channels: connect device: %d ranks, the device API supports %d: %w", n, GinMaxRanks, hal.ErrInvalidArgument)
	}
	mm, _ := dev.(hal.MemoryMapped)
	pm, _ := dev.(hal.PortMapped)
	c := &DeviceComm{Rank: rank, NRanks: n, NSignals: nsignals, Modes: make([]PeerMode, n), dev: dev, window: window,
		timeout: opts.Timeout, sizes: make([]int64, n), peerWindow: make([]hal.Buffer, n), peerSignals: make([]hal.Buffer, n)}
	if c.timeout <= 0 {
		c.timeout = plan.DefaultTimeout
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	alloc := func(bytes int64, host bool, what string) (hal.Buffer, error) {
		var b hal.Buffer
		var err error
		if host {
			b, err = dev.AllocHost(bytes)
		} else {
			b, err = dev.Alloc(bytes)
		}
		if err != nil {
			return nil, fmt.Errorf("channels: connect device: %s (%d bytes): %w", what, bytes, err)
		}
		return b, nil
	}
	words := int64(nsignals * n)
	if c.signals, err = alloc(8*words, false, "signals"); err != nil {
		return nil, err
	}
	if c.bases, err = alloc(8*(words+GinCounters), false, "signal bases"); err != nil {
		return nil, err
	}
	if c.counters, err = alloc(8*GinCounters, false, "counters"); err != nil {
		return nil, err
	}
	if c.control, err = alloc(plan.ControlBytes, true, "control block"); err != nil {
		return nil, err
	}

	me := ginCard{Endpoint: dev.Endpoint(), WindowSize: window.Size(), NSignals: nsignals}
	for _, x := range []struct {
		b      hal.Buffer
		export func(hal.Buffer) (hal.Handle, error)
		h      *hal.Handle
		what   string
	}{
		{window, exportOf(mm), &me.Window, "window"},
		{c.signals, exportOf(mm), &me.Signals, "signals"},
		{window, exportPortOf(pm), &me.PortWindow, "window for engines"},
		{c.signals, exportPortOf(pm), &me.PortSignals, "signals for engines"},
	} {
		if x.export == nil {
			continue
		}
		if *x.h, err = x.export(x.b); err != nil {
			return nil, fmt.Errorf("channels: connect device: export %s: %w", x.what, err)
		}
	}
	blob, err := encodeJSON(me)
	if err != nil {
		return nil, err
	}
	all, err := ex.AllGather(ctx, blob)
	if err != nil {
		return nil, fmt.Errorf("channels: connect device: exchange handles: %w", err)
	}
	cards := make([]ginCard, n)
	for r, b := range all {
		if err := decodeJSON(bytes.NewReader(b), &cards[r]); err != nil {
			return nil, fmt.Errorf("channels: connect device: rank %d sent a malformed card: %v: %w", r, err, hal.ErrRemote)
		}
		if cards[r].NSignals != nsignals {
			return nil, fmt.Errorf("channels: connect device: rank %d has %d signals but rank %d has %d: %w", rank, nsignals, r, cards[r].NSignals, hal.ErrInvalidUsage)
		}
		c.sizes[r] = cards[r].WindowSize
	}
	ports := false
	for r, cd := range cards {
		if r == rank {
			c.Modes[r] = GinSelf
			continue
		}
		l := dev.Link(cd.Endpoint)
		switch {
		case !opts.ForcePort && mm != nil && l.Caps&hal.CapMemoryMapped != 0 && cd.Window != nil:
			c.Modes[r] = GinMemory
		case pm != nil && l.Caps&hal.CapPortMapped != 0 && cd.PortWindow != nil:
			c.Modes[r] = GinPort
			ports = true
		default:
			want := "memory- or port-mapped"
			if opts.ForcePort {
				want = "port-mapped (ForcePort)"
			}
			return nil, fmt.Errorf("channels: connect device: link to rank %d is not %s (%s): %w", r, want, l.Reason, hal.ErrNotSupported)
		}
		imp, wh, sh := importOf(mm), cd.Window, cd.Signals
		if c.Modes[r] == GinPort {
			imp, wh, sh = importPortOf(pm), cd.PortWindow, cd.PortSignals
		}
		if c.peerWindow[r], err = imp(wh); err != nil {
			return nil, fmt.Errorf("channels: connect device: import window of rank %d (%v): %w", r, c.Modes[r], err)
		}
		if c.peerSignals[r], err = imp(sh); err != nil {
			return nil, fmt.Errorf("channels: connect device: import signals of rank %d (%v): %w", r, c.Modes[r], err)
		}
		if c.Modes[r] == GinPort {
			if c.engines == nil {
				c.engines = make([]hal.Engine, n)
			}
			if c.engines[r], err = pm.NewEngine(cd.Endpoint); err != nil {
				return nil, fmt.Errorf("channels: connect device: engine to rank %d: %w", r, err)
			}
		}
	}
	if ports {
		if c.fifoBuf, err = alloc(plan.FifoBytes, true, "port-channel FIFO"); err != nil {
			return nil, err
		}
		if c.fifoHead, err = alloc(plan.FifoHeadBytes, false, "port-channel FIFO head"); err != nil {
			return nil, err
		}
		if proxy == nil {
			proxy, c.sharedProxy = acquireProxy(dev, rank), true
		}
		c.proxy = proxy
		peers := make([]int, n)
		for r := range peers {
			peers[r] = r // the FIFO channel of a peer is its rank
		}
		f, err := newFifo(fmt.Sprintf("device comm of rank %d", rank), c.fifoBuf.Host(), c.engines, peers, rank, c.control.Host(), c.timeout, proxy.log)
		if err != nil {
			return nil, fmt.Errorf("channels: connect device: %w", err)
		}
		if err := proxy.add(f); err != nil {
			return nil, fmt.Errorf("channels: connect device: %w", err)
		}
		c.fifo = f
	}
	// Nobody leaves (and may free what it exported) before every rank has
	// imported its peers' buffers.
	if _, err := ex.AllGather(ctx, nil); err != nil {
		return nil, fmt.Errorf("channels: connect device: %w", err)
	}
	return c, nil
}

// Window is the local window.
func (c *DeviceComm) Window() hal.Buffer { return c.window }

// WindowBytes is rank r's window size.
func (c *DeviceComm) WindowBytes(r int) int64 { return c.sizes[r] }

// Timeout is the deadline of device-side waits.
func (c *DeviceComm) Timeout() time.Duration { return c.timeout }

// peerAddrs returns rank r's window and signals as this device addresses
// them.
func (c *DeviceComm) peerAddrs(r int) (window, signals uint64) {
	if r == c.Rank {
		return c.window.Addr(), c.signals.Addr()
	}
	return c.peerWindow[r].Addr(), c.peerSignals[r].Addr()
}

// Params packs weft_gin_params (layout at GinParamsBytes). A kernel takes
// it as the first member of its parameter struct; its own arguments follow
// (GinParamsBytes is a multiple of 8).
func (c *DeviceComm) Params() []byte {
	out := make([]byte, GinParamsBytes)
	le := binary.LittleEndian
	w := 0
	u64 := func(v uint64) { le.PutUint64(out[w:], v); w += 8 }
	i32 := func(v int) { le.PutUint32(out[w:], uint32(int32(v))); w += 4 }
	addr := func(b hal.Buffer) uint64 {
		if b == nil {
			return 0
		}
		return b.Addr()
	}
	u64(c.window.Addr())
	u64(uint64(c.window.Size()))
	u64(c.signals.Addr())
	u64(c.bases.Addr())
	u64(c.counters.Addr())
	u64(addr(c.fifoBuf))
	u64(addr(c.fifoHead))
	u64(c.control.Addr())
	u64(uint64(c.timeout / time.Nanosecond))
	var win, sig [GinMaxRanks]uint64
	for r := 0; r < c.NRanks; r++ {
		win[r], sig[r] = c.peerAddrs(r)
	}
	for _, v := range win {
		u64(v)
	}
	for _, v := range sig {
		u64(v)
	}
	i32(c.Rank)
	i32(c.NRanks)
	i32(c.NSignals)
	i32(GinCounters)
	for r := 0; r < GinMaxRanks; r++ {
		m := GinSelf
		if r < c.NRanks {
			m = c.Modes[r]
		}
		out[w] = byte(m)
		w++
	}
	return out
}

// Err returns the first failure the proxy met on the FIFO, or nil.
func (c *DeviceComm) Err() error {
	if c.fifo == nil {
		return nil
	}
	return c.fifo.Err()
}

// Check returns the failure that kernels (or the proxy) recorded, once
// the launches using the communicator were synchronised: a
// *hal.TimeoutError naming rank, peer, signal (Semaphore) or counter,
// expected and observed values for a wait that passed its deadline, the
// proxy's error, or nil.
func (c *DeviceComm) Check() error {
	if err := c.Err(); err != nil {
		return fmt.Errorf("channels: device comm: %w", err)
	}
	f, failed := plan.DecodeControl(c.control.Host())
	if !failed {
		return nil
	}
	if f.Status == plan.StatusAborted {
		return fmt.Errorf("channels: device comm: %s: %w", f, hal.ErrRemote)
	}
	what := "GIN signal"
	switch f.What {
	case GinWhatCounter:
		what = "GIN counter"
	case plan.WhatFifo:
		what = "port-channel FIFO space"
	case plan.WhatFlush:
		what = "port-channel flush"
	case plan.WhatProxy:
		return fmt.Errorf("channels: device comm: %s: %w", f, hal.ErrSystem)
	}
	return fmt.Errorf("channels: device comm: %w", &hal.TimeoutError{
		Rank: f.Rank, Peer: f.Peer, Channel: f.Channel, Semaphore: f.Semaphore, Block: f.Block,
		What: what, Expected: f.Expected, Observed: f.Observed,
	})
}

// Abort makes every wait of running and later kernels give up at once.
func (c *DeviceComm) Abort() {
	c.control.Host()[plan.CtlAbort] = 1
}

// Close unregisters the FIFO, closes the engines (waiting for their
// requests), unmaps the peers' buffers and frees what the communicator
// allocated (the window stays the caller's). Peers may still write this
// rank's window and signals until they close too: close after a barrier.
func (c *DeviceComm) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	if c.fifo != nil {
		c.proxy.remove(c.fifo)
		c.fifo = nil
	}
	if c.engines != nil {
		errs = append(errs, closeEngines(c.engines))
	}
	if c.sharedProxy {
		errs = append(errs, releaseProxy(c.dev))
	}
	for _, bs := range [][]hal.Buffer{c.peerWindow, c.peerSignals} {
		for _, b := range bs {
			if b != nil {
				errs = append(errs, b.Free())
			}
		}
	}
	for _, b := range []hal.Buffer{c.signals, c.bases, c.counters, c.control, c.fifoBuf, c.fifoHead} {
		if b != nil {
			errs = append(errs, b.Free())
		}
	}
	return errors.Join(errs...)
}

// GinBlock is the device API for one thread block of a kernel that runs as
// Go code (hal/host, whose buffers are host memory): the operations of
// weft_gin.h, with the same memory effects. Puts to memory peers copy
// into the peer's mapped window and then add to its signal word
// atomically; puts to port peers push the same 32-byte triggers into the
// same FIFO as the CUDA library, for the proxy and the engines. So one
// algorithm written in Go runs on hal/host with the semantics it has on a
// GPU.
//
// A GinBlock is one block: its methods must not be called concurrently;
// blocks of one communicator (Block(0), Block(1), …) may run in different
// goroutines, as blocks of a kernel run on different SMs. A method that
// returns false has recorded a failure (deadline, abort) in the control
// block; the kernel should return, and the host learns it from Check.
type GinBlock struct {
	c     *DeviceComm
	block int
	win   []byte
	sigs  []byte
	bases []byte
	ctrs  []byte
	ctl   []byte
	fifo  []byte
	head  []byte
	// peerWin[r] and peerSig[r]: the bytes of memory and self peers.
	peerWin, peerSig [][]byte
}

// Block returns the device API of thread block block. It needs a backend
// whose buffers are host memory (hal/host): ErrNotSupported otherwise.
func (c *DeviceComm) Block(block int) (*GinBlock, error) {
	b := &GinBlock{c: c, block: block, win: c.window.Host(), sigs: c.signals.Host(), bases: c.bases.Host(),
		ctrs: c.counters.Host(), ctl: c.control.Host(), peerWin: make([][]byte, c.NRanks), peerSig: make([][]byte, c.NRanks)}
	ok := b.win != nil && b.sigs != nil && b.bases != nil && b.ctrs != nil
	if c.fifoBuf != nil {
		b.fifo, b.head = c.fifoBuf.Host(), c.fifoHead.Host()
		ok = ok && b.fifo != nil && b.head != nil
	}
	for r, m := range c.Modes {
		switch m {
		case GinSelf:
			b.peerWin[r], b.peerSig[r] = b.win, b.sigs
		case GinMemory:
			b.peerWin[r], b.peerSig[r] = c.peerWindow[r].Host(), c.peerSignals[r].Host()
			ok = ok && b.peerWin[r] != nil && b.peerSig[r] != nil
		}
	}
	if !ok {
		return nil, fmt.Errorf("channels: device comm: Go blocks need host-accessible buffers, backend %s has device memory (use Params and weft_gin.h): %w", c.dev.Info().Backend, hal.ErrNotSupported)
	}
	return b, nil
}

// Window is the local window's bytes.
func (b *GinBlock) Window() []byte { return b.win }

func word(mem []byte, off int64) *uint64 { return (*uint64)(unsafe.Pointer(&mem[off])) }

func word32(mem []byte, off int64) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }

// sigIndex is the word of signal id from rank src (checked: a bad index is
// a programming error, as an out-of-range store is).
func (b *GinBlock) sigIndex(id, src int) int64 {
	if id < 0 || id >= b.c.NSignals || src < 0 || src >= b.c.NRanks {
		panic(fmt.Sprintf("channels: GinBlock: signal %d of rank %d out of range (%d signals, %d ranks)", id, src, b.c.NSignals, b.c.NRanks))
	}
	return int64(id*b.c.NRanks + src)
}

func (b *GinBlock) checkCounter(i int) {
	if i < 0 || i >= GinCounters {
		panic(fmt.Sprintf("channels: GinBlock: counter %d out of range (%d counters)", i, GinCounters))
	}
}

// fail records the first failure in the control block, as weft_gin.h's
// fail does, and makes every wait give up.
func (b *GinBlock) fail(what uint32, peer, sem int, expected, observed uint64) {
	if atomic.CompareAndSwapUint32(word32(b.ctl, plan.CtlStatus), plan.StatusOK, plan.StatusTimeout) {
		st := func(off int64, v int) { atomic.StoreUint32(word32(b.ctl, off), uint32(int32(v))) }
		st(plan.CtlRank, b.c.Rank)
		st(plan.CtlPeer, peer)
		st(plan.CtlChannel, peer)
		st(plan.CtlSemaphore, sem)
		st(plan.CtlBlock, b.block)
		atomic.StoreUint32(word32(b.ctl, plan.CtlWhat), what)
		atomic.StoreUint64(word(b.ctl, plan.CtlExpected), expected)
		atomic.StoreUint64(word(b.ctl, plan.CtlObserved), observed)
	}
	atomic.StoreUint32(word32(b.ctl, plan.CtlAbort), 1)
}

// spin polls ready until it holds, the deadline passes or the
// communicator is aborted; it reports whether ready held.
func (b *GinBlock) spin(ready func() bool) bool {
	deadline := time.Now().Add(b.c.timeout)
	for polls := 0; ; polls++ {
		if ready() {
			return true
		}
		if polls&63 == 63 {
			if atomic.LoadUint32(word32(b.ctl, plan.CtlAbort)) != 0 || time.Now().After(deadline) {
				return ready()
			}
		}
		if polls > 4096 {
			time.Sleep(2 * time.Microsecond)
		} else {
			runtime.Gosched()
		}
	}
}

func (b *GinBlock) failed() bool {
	return atomic.LoadUint32(word32(b.ctl, plan.CtlStatus)) != plan.StatusOK
}

// push pushes one trigger the way a GPU block does (weft_gin.h's push):
// a position from the head counter, a wait for room (plan.FifoRoom),
// words A–C, then the tag. It returns the position + 1, or 0 after
// recording a failure.
func (b *GinBlock) push(k plan.TriggerKind, peer int, a, bw, cw uint64) uint64 {
	pos := atomic.AddUint64(word(b.head, 0), 1) - 1
	if ok, tail := plan.FifoRoom(b.head, b.fifo, pos, b.spin); !ok {
		if !b.failed() {
			b.fail(plan.WhatFifo, peer, -1, pos+1, tail)
		}
		return 0
	}
	off := plan.SlotOffset(pos)
	atomic.StoreUint64(word(b.fifo, off), a)
	atomic.StoreUint64(word(b.fifo, off+8), bw)
	atomic.StoreUint64(word(b.fifo, off+16), cw)
	atomic.StoreUint64(word(b.fifo, off+24), plan.TriggerTag(pos, k, peer))
	return pos + 1
}

func byteAddr(s []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(s)))) }

// Put writes src into peer's window at dstOff and then, when signal ≥ 0,
// adds one to the peer's word of that signal from this rank (ordered
// after the data: a peer that sees the increment sees the bytes). For a
// port peer src must be memory of this device (a hal.Buffer's Host
// bytes), which the engine reads after Put returns: Flush or a counter
// says when it may be reused. For memory and self peers the copy is done
// when Put returns.
func (b *GinBlock) Put(peer int, dstOff int64, src []byte, signal int) bool {
	if signal >= 0 {
		b.sigIndex(signal, b.c.Rank)
	}
	switch b.c.Modes[peer] {
	case GinPort:
		win, sigs := b.c.peerAddrs(peer)
		if len(src) > 0 && b.push(plan.TriggerPut, peer, byteAddr(src), win+uint64(dstOff), uint64(len(src))) == 0 {
			return false
		}
		if signal < 0 {
			return true
		}
		return b.push(plan.TriggerSignal, peer, 0, sigs+8*uint64(b.sigIndex(signal, b.c.Rank)), 0) != 0
	default:
		copy(b.peerWin[peer][dstOff:dstOff+int64(len(src))], src)
		if signal >= 0 {
			atomic.AddUint64(word(b.peerSig[peer], 8*b.sigIndex(signal, b.c.Rank)), 1)
		}
		return true
	}
}

// Signal adds one to peer's word of signal id from this rank, after this
// block's earlier puts to peer.
func (b *GinBlock) Signal(peer, id int) bool {
	i := b.sigIndex(id, b.c.Rank)
	if b.c.Modes[peer] == GinPort {
		_, sigs := b.c.peerAddrs(peer)
		return b.push(plan.TriggerSignal, peer, 0, sigs+8*uint64(i), 0) != 0
	}
	atomic.AddUint64(word(b.peerSig[peer], 8*i), 1)
	return true
}

// ReadSignal returns the value of signal id from peer since its last
// reset (acquire: data put before those signals is visible).
func (b *GinBlock) ReadSignal(peer, id int) uint64 {
	i := b.sigIndex(id, peer)
	return atomic.LoadUint64(word(b.sigs, 8*i)) - atomic.LoadUint64(word(b.bases, 8*i))
}

// WaitSignal waits until ReadSignal(peer, id) ≥ value. On the deadline
// (or an abort) it records rank, peer, signal, expected and observed
// values and returns false.
func (b *GinBlock) WaitSignal(peer, id int, value uint64) bool {
	i := b.sigIndex(id, peer)
	w, base := word(b.sigs, 8*i), atomic.LoadUint64(word(b.bases, 8*i))
	if b.spin(func() bool { return atomic.LoadUint64(w)-base >= value }) {
		return true
	}
	if !b.failed() {
		b.fail(plan.WhatSemaphore, peer, id, value, atomic.LoadUint64(w)-base)
	}
	return false
}

// ResetSignal makes ReadSignal(peer, id) 0: it records the current value
// as the base (the word itself belongs to peer and is never written
// here). Valid only while peer does not signal id concurrently: an
// increment that races with the reset may or may not count.
func (b *GinBlock) ResetSignal(peer, id int) {
	i := b.sigIndex(id, peer)
	atomic.StoreUint64(word(b.bases, 8*i), atomic.LoadUint64(word(b.sigs, 8*i)))
}

// CounterPut adds one to local counter counter once this block's earlier
// puts to peer are complete at the source (their source may be reused):
// through the engine for a port peer, at once for memory and self peers,
// whose puts are complete when issued.
func (b *GinBlock) CounterPut(peer, counter int) bool {
	b.checkCounter(counter)
	if b.c.Modes[peer] == GinPort {
		return b.push(plan.TriggerCounter, peer, 0, 0, uint64(counter)) != 0
	}
	atomic.AddUint64(word(b.ctrs, 8*int64(counter)), 1)
	return true
}

func (b *GinBlock) counterRaw(i int) uint64 {
	v := atomic.LoadUint64(word(b.ctrs, 8*int64(i)))
	if b.fifo != nil {
		v += atomic.LoadUint64(word(b.fifo, plan.CounterOffset(i)))
	}
	return v
}

func (b *GinBlock) counterBase(i int) *uint64 {
	return word(b.bases, 8*(int64(b.c.NSignals*b.c.NRanks)+int64(i)))
}

// ReadCounter returns local counter i since its last reset.
func (b *GinBlock) ReadCounter(i int) uint64 {
	b.checkCounter(i)
	return b.counterRaw(i) - atomic.LoadUint64(b.counterBase(i))
}

// WaitCounter waits until ReadCounter(i) ≥ value; false after recording
// a timeout (What GinWhatCounter, Semaphore i).
func (b *GinBlock) WaitCounter(i int, value uint64) bool {
	b.checkCounter(i)
	base := atomic.LoadUint64(b.counterBase(i))
	if b.spin(func() bool { return b.counterRaw(i)-base >= value }) {
		return true
	}
	if !b.failed() {
		b.fail(GinWhatCounter, -1, i, value, b.counterRaw(i)-base)
	}
	return false
}

// ResetCounter makes ReadCounter(i) 0. Valid only while no counter_put on
// i is outstanding.
func (b *GinBlock) ResetCounter(i int) {
	b.checkCounter(i)
	atomic.StoreUint64(b.counterBase(i), b.counterRaw(i))
}

// Flush returns once every earlier request to peer is complete at the
// source (a no-op for memory and self peers). It says nothing about
// remote visibility: a signal does.
func (b *GinBlock) Flush(peer int) bool {
	if b.c.Modes[peer] != GinPort {
		return true
	}
	me := b.push(plan.TriggerFlush, peer, 0, 0, 0)
	if me == 0 {
		return false
	}
	flushed := word(b.fifo, plan.FifoFlushed)
	if b.spin(func() bool { return atomic.LoadUint64(flushed) >= me }) {
		return true
	}
	if !b.failed() {
		b.fail(plan.WhatFlush, peer, -1, me, atomic.LoadUint64(flushed))
	}
	return false
}
