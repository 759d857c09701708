package main

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/sysnccl"
)

//go:embed moe.cu
var kernelSource string

// paramsBytes is sizeof(moe_params): weft_gin_params, 11 u64, 8 i32.
const paramsBytes = channels.GinParamsBytes + 11*8 + 8*4

const threads = 512

// gpuLayer runs moe.cu on a GPU backend.
type gpuLayer struct {
	c      Config
	l      Layout
	dev    hal.Device
	comm   *channels.DeviceComm
	stream hal.Stream
	mod    hal.Module
	fn     [3]hal.Function // dispatch, expert, combine
	rt     *Routing
	// recvCounts[s]: rows rank s sends here (for NCCL, whose receives need
	// their sizes on the host).
	recvCounts                                             []int
	bufs                                                   []hal.Buffer
	x, srcTok, localExpert, counts, dest, pos, weight, out hal.Buffer
	combineBlocks                                          int
}

func newGPULayer(c Config, dev hal.Device, comm *channels.DeviceComm, rt *Routing, recvCounts []int, x []uint16) (_ *gpuLayer, err error) {
	kc, ok := dev.(hal.KernelCompiler)
	mm, _ := dev.(hal.MemoryMapped)
	if !ok || mm == nil {
		return nil, fmt.Errorf("moe: backend %s compiles no kernels: %w", dev.Info().Backend, hal.ErrNotSupported)
	}
	g := &gpuLayer{c: c, l: c.layout(), dev: dev, comm: comm, rt: rt, recvCounts: recvCounts,
		combineBlocks: max(1, dev.Info().Multiprocessors)}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	headers := channels.DeviceLibrary()
	headers["weft_hal.h"] = mm.DeviceHeader()
	if g.mod, err = kc.Compile(hal.KernelSource{Name: "moe", Source: kernelSource, Headers: headers}); err != nil {
		return nil, err
	}
	for i, name := range []string{"moe_dispatch", "moe_expert", "moe_combine"} {
		if g.fn[i], err = g.mod.Function(name); err != nil {
			return nil, err
		}
	}
	if g.stream, err = dev.NewStream(); err != nil {
		return nil, err
	}
	C := c.capacity()
	flat := func(rows [][]int32) []int32 {
		out := make([]int32, c.NRanks*C)
		for d, r := range rows {
			copy(out[d*C:], r)
		}
		return out
	}
	counts := make([]int32, c.NRanks)
	for d, n := range rt.Counts {
		counts[d] = int32(n)
	}
	for _, b := range []struct {
		dst  *hal.Buffer
		data []byte
	}{
		{&g.x, u16Bytes(x)}, {&g.srcTok, i32Bytes(flat(rt.SrcTok))}, {&g.localExpert, i32Bytes(flat(rt.LocalExpert))},
		{&g.counts, i32Bytes(counts)}, {&g.dest, i32Bytes(rt.Dest)}, {&g.pos, i32Bytes(rt.Pos)},
		{&g.weight, f32Bytes(rt.Weight)}, {&g.out, make([]byte, 2*c.Tokens*c.Hidden)},
	} {
		if *b.dst, err = dev.Alloc(int64(len(b.data))); err != nil {
			return nil, err
		}
		g.bufs = append(g.bufs, *b.dst)
		if err = dev.Write(*b.dst, 0, b.data); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func (g *gpuLayer) params(epoch uint64, useGin bool) []byte {
	out := append(g.comm.Params(), make([]byte, paramsBytes-channels.GinParamsBytes)...)
	le := binary.LittleEndian
	w := channels.GinParamsBytes
	u64 := func(v uint64) { le.PutUint64(out[w:], v); w += 8 }
	i32 := func(v int) { le.PutUint32(out[w:], uint32(int32(v))); w += 4 }
	for _, b := range []hal.Buffer{g.x, g.srcTok, g.localExpert, g.counts, g.dest, g.pos, g.weight, g.out} {
		u64(b.Addr())
	}
	u64(epoch)
	u64(uint64(g.l.MB))
	u64(uint64(g.l.Rows))
	gin := 0
	if useGin {
		gin = 1
	}
	for _, v := range []int{g.c.Tokens, g.c.Hidden, g.c.TopK, g.c.Experts / g.c.NRanks, g.c.capacity(), g.c.BlocksPerPeer, gin, 0} {
		i32(v)
	}
	return out
}

// step enqueues one dispatch + expert + combine. With nc, NCCL moves the
// rows (grouped ncclSend/ncclRecv) and the kernels only compute.
func (g *gpuLayer) step(epoch uint64, nc *sysnccl.Comm) error {
	p := g.params(epoch, nc == nil)
	grid := g.c.NRanks * g.c.BlocksPerPeer
	if err := g.fn[0].Launch(g.stream, grid, threads, 0, p); err != nil {
		return err
	}
	if nc != nil {
		if err := g.ncclExchange(nc, true); err != nil {
			return err
		}
	}
	if err := g.fn[1].Launch(g.stream, grid, threads, 0, p); err != nil {
		return err
	}
	if nc != nil {
		if err := g.ncclExchange(nc, false); err != nil {
			return err
		}
	}
	return g.fn[2].Launch(g.stream, g.combineBlocks, threads, 0, p)
}

// ncclExchange moves what the device API moves, as one NCCL group: for
// dispatch, the count and experts (16 + 4×rows bytes) and the rows to
// every rank; for combine, the transformed rows back.
func (g *gpuLayer) ncclExchange(nc *sysnccl.Comm, dispatch bool) error {
	st, ok := g.stream.(interface{ Native() uintptr })
	if !ok {
		return fmt.Errorf("moe: stream without a native CUDA stream: %w", hal.ErrNotSupported)
	}
	s, win, l, R := st.Native(), g.comm.Window().Addr(), g.l, g.l.R
	if err := sysnccl.GroupStart(); err != nil {
		return err
	}
	var err error
	do := func(e error) {
		if err == nil {
			err = e
		}
	}
	for peer := 0; peer < g.c.NRanks; peer++ {
		out, in := g.rt.Counts[peer], g.recvCounts[peer]
		if dispatch {
			do(nc.Send(win+uint64(l.MetaSend(peer)), 16+4*out, sysnccl.Uint8, peer, s))
			do(nc.Send(win+uint64(l.Stage(peer)), out*int(R), sysnccl.Uint8, peer, s))
			do(nc.Recv(win+uint64(l.MetaRecv(peer)), 16+4*in, sysnccl.Uint8, peer, s))
			do(nc.Recv(win+uint64(l.Recv(peer)), in*int(R), sysnccl.Uint8, peer, s))
		} else {
			do(nc.Send(win+uint64(l.Recv(peer)), in*int(R), sysnccl.Uint8, peer, s))
			do(nc.Recv(win+uint64(l.Ret(peer)), out*int(R), sysnccl.Uint8, peer, s))
		}
	}
	return errors.Join(err, sysnccl.GroupEnd())
}

// run runs warmup + iters steps (epochs from *epoch on) and returns the
// mean time of a timed step, after checking the first step's output.
func (g *gpuLayer) run(epoch *uint64, warmup, iters int, nc *sysnccl.Comm, want []uint16) (time.Duration, error) {
	sync := func() error {
		if err := g.stream.Synchronize(time.Now().Add(2 * g.comm.Timeout())); err != nil {
			return errors.Join(err, g.comm.Check())
		}
		if nc != nil {
			return nc.AsyncError()
		}
		return g.comm.Check()
	}
	if err := g.dev.Write(g.out, 0, make([]byte, g.out.Size())); err != nil {
		return 0, err
	}
	for i := 0; i < max(warmup, 1); i++ {
		*epoch++
		if err := g.step(*epoch, nc); err != nil {
			return 0, err
		}
		if i == 0 && want != nil {
			if err := sync(); err != nil {
				return 0, err
			}
			got := make([]byte, g.out.Size())
			if err := g.dev.Read(got, g.out, 0); err != nil {
				return 0, err
			}
			if wrong := countWrong(want, bytesU16(got)); wrong != 0 {
				return 0, fmt.Errorf("moe: rank %d: %d of %d output values differ from the reference", g.comm.Rank, wrong, len(want))
			}
		}
	}
	start, err := g.stream.Record()
	if err != nil {
		return 0, err
	}
	defer start.Close()
	for i := 0; i < iters; i++ {
		*epoch++
		if err := g.step(*epoch, nc); err != nil {
			return 0, err
		}
	}
	end, err := g.stream.Record()
	if err != nil {
		return 0, err
	}
	defer end.Close()
	if err := sync(); err != nil {
		return 0, err
	}
	d, err := end.Elapsed(start)
	return d / time.Duration(max(iters, 1)), err
}

func countWrong(want, got []uint16) int {
	n := 0
	for i := range want {
		if got[i] != want[i] {
			n++
		}
	}
	return n
}

func (g *gpuLayer) Close() error {
	var errs []error
	for _, b := range g.bufs {
		errs = append(errs, b.Free())
	}
	if g.stream != nil {
		errs = append(errs, g.stream.Close())
	}
	if g.mod != nil {
		errs = append(errs, g.mod.Close())
	}
	return errors.Join(errs...)
}
