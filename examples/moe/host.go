package main

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/weftccl/weft/channels"
)

// Signals of the exchange (weft_gin.h signal ids; moe.cu uses the same).
const (
	sigDispatch = 0 // rows (and count, metadata) from a rank have arrived
	sigCombine  = 1 // rows returned by a rank have arrived
	nSignals    = 2
)

// chunk is block b's share [lo, hi) of count rows split over blocks.
func chunk(count, b, blocks int) (lo, hi int) {
	per := (count + blocks - 1) / blocks
	lo, hi = min(b*per, count), min((b+1)*per, count)
	return lo, hi
}

// hostLayer runs the MoE layer's kernels as Go code on hal/host: the same
// three kernels as moe.cu, each block a goroutine calling the device API
// (channels.GinBlock) as a CUDA block calls weft_gin.h.
type hostLayer struct {
	c    Config
	l    Layout
	comm *channels.DeviceComm
	rt   *Routing
	x    []uint16
	out  []uint16
}

// launch runs kernel over blocks goroutines and waits for them, as a
// kernel on a stream completes before the next starts.
func (h *hostLayer) launch(name string, blocks int, kernel func(b *channels.GinBlock, block int) bool) error {
	var wg sync.WaitGroup
	ok := make([]bool, blocks)
	for i := 0; i < blocks; i++ {
		b, err := h.comm.Block(i)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok[i] = kernel(b, i)
		}()
	}
	wg.Wait()
	for i := range ok {
		if !ok[i] {
			return fmt.Errorf("moe: rank %d: %s block %d failed: %w", h.comm.Rank, name, i, h.comm.Check())
		}
	}
	return h.comm.Check()
}

// Step runs dispatch, expert and combine for iteration epoch (1, 2, …).
func (h *hostLayer) Step(epoch uint64) error {
	n, B := h.c.NRanks, h.c.BlocksPerPeer
	if err := h.launch("dispatch", n*B, func(b *channels.GinBlock, i int) bool { return h.dispatch(b, i/B, i%B) }); err != nil {
		return err
	}
	if err := h.launch("expert", n*B, func(b *channels.GinBlock, i int) bool { return h.expert(b, i/B, i%B, epoch) }); err != nil {
		return err
	}
	blocks := n * B
	return h.launch("combine", blocks, func(b *channels.GinBlock, i int) bool { return h.combine(b, i, blocks, epoch) })
}

// dispatch (block b of those for rank d): pack this block's rows for d
// into the stage, then put the count (block 0), the rows' experts and the
// rows into d's regions for this rank, the last put with a signal.
func (h *hostLayer) dispatch(g *channels.GinBlock, d, b int) bool {
	w, l, r := g.Window(), h.l, h.comm.Rank
	R := int(l.R)
	count := h.rt.Counts[d]
	lo, hi := chunk(count, b, h.c.BlocksPerPeer)
	stage, meta := w[l.Stage(d):], w[l.MetaSend(d):]
	for p := lo; p < hi; p++ {
		t := int(h.rt.SrcTok[d][p])
		row := stage[p*R : (p+1)*R]
		for i := 0; i < h.c.Hidden; i++ {
			binary.LittleEndian.PutUint16(row[2*i:], h.x[t*h.c.Hidden+i])
		}
		binary.LittleEndian.PutUint32(meta[16+4*p:], uint32(h.rt.LocalExpert[d][p]))
	}
	if b == 0 {
		binary.LittleEndian.PutUint64(meta, uint64(count))
		if !g.Put(d, l.MetaRecv(r), meta[:8], -1) {
			return false
		}
	}
	return g.Put(d, l.MetaRecv(r)+16+4*int64(lo), meta[16+4*lo:16+4*hi], -1) &&
		g.Put(d, l.Recv(r)+int64(lo*R), stage[lo*R:hi*R], sigDispatch)
}

// expert (block b of those serving rank s): wait for s's rows, apply each
// row's expert in place and return the rows to s, with a signal.
func (h *hostLayer) expert(g *channels.GinBlock, s, b int, epoch uint64) bool {
	if !g.WaitSignal(s, sigDispatch, epoch*uint64(h.c.BlocksPerPeer)) {
		return false
	}
	w, l, r := g.Window(), h.l, h.comm.Rank
	R := int(l.R)
	meta, rows := w[l.MetaRecv(s):], w[l.Recv(s):]
	count := int(binary.LittleEndian.Uint64(meta))
	lo, hi := chunk(count, b, h.c.BlocksPerPeer)
	per := h.c.Experts / h.c.NRanks
	for p := lo; p < hi; p++ {
		scale := ExpertScale(r*per + int(int32(binary.LittleEndian.Uint32(meta[16+4*p:]))))
		row := rows[p*R : (p+1)*R]
		for i := 0; i < h.c.Hidden; i++ {
			v := bf16ToF32(binary.LittleEndian.Uint16(row[2*i:]))
			binary.LittleEndian.PutUint16(row[2*i:], roundBF16(v*scale))
		}
	}
	return g.Put(s, l.Ret(r)+int64(lo*R), rows[lo*R:hi*R], sigCombine)
}

// combine (block i of blocks): wait for every rank's returned rows, then
// form each of the block's tokens as the gate-weighted sum of its rows.
func (h *hostLayer) combine(g *channels.GinBlock, i, blocks int, epoch uint64) bool {
	for d := 0; d < h.c.NRanks; d++ {
		if !g.WaitSignal(d, sigCombine, epoch*uint64(h.c.BlocksPerPeer)) {
			return false
		}
	}
	w, l := g.Window(), h.l
	H, K := h.c.Hidden, h.c.TopK
	lo, hi := chunk(h.c.Tokens, i, blocks)
	acc := make([]float32, H)
	for t := lo; t < hi; t++ {
		clear(acc)
		for j := 0; j < K; j++ {
			k := t*K + j
			row := w[l.Ret(int(h.rt.Dest[k]))+int64(h.rt.Pos[k])*l.R:]
			for e := 0; e < H; e++ {
				acc[e] += h.rt.Weight[k] * bf16ToF32(binary.LittleEndian.Uint16(row[2*e:]))
			}
		}
		for e := 0; e < H; e++ {
			h.out[t*H+e] = roundBF16(acc[e])
		}
	}
	return true
}
