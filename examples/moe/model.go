package main

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Config is one MoE layer's shape: Tokens per rank, rows of Hidden
// bfloat16 values, each routed to TopK of Experts experts, Experts/NRanks
// per rank. Seed makes routing, gate weights and tokens deterministic.
type Config struct {
	NRanks, Tokens, Hidden, TopK, Experts int
	Seed                                  uint64
	// Capacity is the number of rows a rank may send to one rank (and
	// receive from one): 0 means Tokens×TopK, the worst case.
	Capacity int
	// BlocksPerPeer is the number of thread blocks (Go: goroutines) that
	// dispatch to, and return rows to, each rank.
	BlocksPerPeer int
}

func (c Config) validate() error {
	switch {
	case c.NRanks < 1 || c.Tokens < 1 || c.TopK < 1 || c.Experts < 1:
		return fmt.Errorf("moe: ranks, tokens, top-k and experts must be positive: %+v", c)
	case c.Experts%c.NRanks != 0:
		return fmt.Errorf("moe: %d experts do not split over %d ranks", c.Experts, c.NRanks)
	case c.TopK > c.Experts:
		return fmt.Errorf("moe: top-%d of %d experts", c.TopK, c.Experts)
	case c.Hidden < 8 || c.Hidden%8 != 0:
		return fmt.Errorf("moe: hidden size %d must be a positive multiple of 8 (16-byte rows)", c.Hidden)
	case c.BlocksPerPeer < 1:
		return fmt.Errorf("moe: %d blocks per peer", c.BlocksPerPeer)
	}
	return nil
}

func (c Config) capacity() int {
	if c.Capacity > 0 {
		return c.Capacity
	}
	return c.Tokens * c.TopK
}

func (c Config) rowBytes() int64 { return int64(c.Hidden) * 2 }

// Layout of a rank's window (byte offsets), the same in moe.cu:
//
//	meta_send[d]  d×MB            rows for rank d: count (u64) at +0, local expert of row p (i32) at +16+4p
//	meta_recv[s]  (n+s)×MB        the same, received from rank s
//	stage[d]      2n×MB + d×C×R   rows packed for rank d, in dispatch order
//	recv[s]       … + (n+s)×C×R   rows received from rank s; the experts transform them in place
//	ret[d]        … + (2n+d)×C×R  rows returned by rank d, in this rank's dispatch order
//
// with MB = 16 + 4C rounded up to 16, C the capacity and R the row bytes.
type Layout struct {
	N, C       int
	R, MB      int64
	Meta, Rows int64 // starts of the metadata and row regions
	Bytes      int64
}

func (c Config) layout() Layout {
	n, C := c.NRanks, c.capacity()
	l := Layout{N: n, C: C, R: c.rowBytes(), MB: (16 + 4*int64(C) + 15) / 16 * 16}
	l.Rows = 2 * int64(n) * l.MB
	l.Bytes = l.Rows + 3*int64(n)*int64(C)*l.R
	return l
}

func (l Layout) MetaSend(d int) int64 { return int64(d) * l.MB }
func (l Layout) MetaRecv(s int) int64 { return int64(l.N+s) * l.MB }
func (l Layout) Stage(d int) int64    { return l.Rows + int64(d)*int64(l.C)*l.R }
func (l Layout) Recv(s int) int64     { return l.Rows + int64(l.N+s)*int64(l.C)*l.R }
func (l Layout) Ret(d int) int64      { return l.Rows + int64(2*l.N+d)*int64(l.C)*l.R }

// Routing is one rank's routing and data: its tokens, the experts and gate
// weights of each, and the dispatch order per destination rank.
type Routing struct {
	Rank int
	// Expert[t×TopK+j] and Weight[...] are token t's j-th expert (global
	// id) and gate weight (a power of two).
	Expert []int32
	Weight []float32
	// Dest and Pos: the rank and row position (in the dispatch order to
	// that rank) of token t's j-th copy.
	Dest, Pos []int32
	// SrcTok[d] and LocalExpert[d]: token and expert (local to d) of each
	// row sent to d, in dispatch order; Counts[d] = len(SrcTok[d]).
	SrcTok, LocalExpert [][]int32
	Counts              []int
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// bf16 of a small integer (exact).
func bf16(v float32) uint16 { return roundBF16(v) }

// roundBF16 rounds to the nearest bfloat16, ties to even (moe.cu's
// f32_to_bf16; inputs here are finite).
func roundBF16(v float32) uint16 {
	u := math.Float32bits(v)
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

func bf16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// ExpertScale is expert e's transform: multiply by (e mod 4) + 1. Tokens
// are integers in [−8, 8], so the product is exact in bfloat16.
func ExpertScale(e int) float32 { return float32(e%4 + 1) }

// Tokens returns rank's tokens: Tokens × Hidden bfloat16 integers in
// [−8, 8].
func Tokens(c Config, rank int) []uint16 {
	x := make([]uint16, c.Tokens*c.Hidden)
	for t := 0; t < c.Tokens; t++ {
		h := splitmix(c.Seed ^ uint64(rank)<<40 ^ uint64(t))
		for i := 0; i < c.Hidden; i++ {
			x[t*c.Hidden+i] = bf16(float32(int((h>>8+uint64(i)*7)%17) - 8))
		}
	}
	return x
}

// Route builds rank's routing (without tokens: see Tokens). Experts are drawn so that ranks receive
// different numbers of rows: each token prefers the experts of a rank
// that depends on the token, so counts per peer vary.
func Route(c Config, rank int) (*Routing, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	rt := &Routing{Rank: rank, Expert: make([]int32, c.Tokens*c.TopK),
		Weight: make([]float32, c.Tokens*c.TopK), Dest: make([]int32, c.Tokens*c.TopK), Pos: make([]int32, c.Tokens*c.TopK),
		SrcTok: make([][]int32, c.NRanks), LocalExpert: make([][]int32, c.NRanks), Counts: make([]int, c.NRanks)}
	per := c.Experts / c.NRanks
	for t := 0; t < c.Tokens; t++ {
		h := splitmix(c.Seed ^ uint64(rank)<<40 ^ uint64(t))
		used := map[int32]bool{}
		for j := 0; j < c.TopK; j++ {
			var e int32
			for try := uint64(0); ; try++ {
				r := splitmix(h + uint64(j)*1000003 + try)
				if r%3 != 0 {
					// Two draws in three among the experts of the preferred rank.
					pref := int(h>>20) % c.NRanks
					e = int32(pref*per + int(r>>8)%per)
				} else {
					e = int32(int(r>>8) % c.Experts)
				}
				if !used[e] {
					break
				}
			}
			used[e] = true
			k := t*c.TopK + j
			d := int(e) / per
			rt.Expert[k] = e
			rt.Weight[k] = float32(math.Ldexp(1, -1-int(splitmix(h^uint64(j+7))%4)))
			rt.Dest[k], rt.Pos[k] = int32(d), int32(len(rt.SrcTok[d]))
			rt.SrcTok[d] = append(rt.SrcTok[d], int32(t))
			rt.LocalExpert[d] = append(rt.LocalExpert[d], e%int32(per))
		}
	}
	for d := range rt.Counts {
		rt.Counts[d] = len(rt.SrcTok[d])
		if rt.Counts[d] > c.capacity() {
			return nil, fmt.Errorf("moe: rank %d sends %d rows to rank %d, capacity %d", rank, rt.Counts[d], d, c.capacity())
		}
	}
	return rt, nil
}

// Reference is rank's expected output: for each token, the gate-weighted
// sum of its experts' transforms, accumulated in float32 (exactly: every
// term is a small integer times a power of two) and rounded once.
func Reference(c Config, rt *Routing, x []uint16) []uint16 {
	out := make([]uint16, c.Tokens*c.Hidden)
	for t := 0; t < c.Tokens; t++ {
		for i := 0; i < c.Hidden; i++ {
			var acc float32
			for j := 0; j < c.TopK; j++ {
				k := t*c.TopK + j
				y := roundBF16(bf16ToF32(x[t*c.Hidden+i]) * ExpertScale(int(rt.Expert[k])))
				acc += rt.Weight[k] * bf16ToF32(y)
			}
			out[t*c.Hidden+i] = roundBF16(acc)
		}
	}
	return out
}

// bytesOf and friends lay slices out little-endian for device buffers.
func u16Bytes(v []uint16) []byte {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], x)
	}
	return b
}

func i32Bytes(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func bytesU16(b []byte) []uint16 {
	v := make([]uint16, len(b)/2)
	for i := range v {
		v[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return v
}
