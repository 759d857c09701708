package sim

import "fmt"

// Params are the calibrated constants of the model: what a launch, an
// operation and a hop cost on the GPU and how much of a link a group of
// thread blocks can drive. Times in µs, fractions of 1. Values and sources:
// DefaultParams and the table in docs/scale.md.
type Params struct {
	// LaunchUs is the fixed cost of one graph-launched kernel: launch,
	// block start, the launch counter, the teardown.
	LaunchUs float64 `yaml:"launch_us" json:"launch_us"`
	// BlockUs is the extra launch cost per thread block of the plan.
	BlockUs float64 `yaml:"block_us" json:"block_us"`
	// OpUs is the cost of issuing one transfer (per window).
	OpUs float64 `yaml:"op_us" json:"op_us"`
	// OperandUs is the cost of each remote or packet operand of a transfer
	// (address set-up, a packet slot's polling loop).
	OperandUs float64 `yaml:"operand_us" json:"operand_us"`
	// LLHopUs is the one-way latency of an LL packet over NVLink: the
	// store, and the poller seeing its flag.
	LLHopUs float64 `yaml:"ll_hop_us" json:"ll_hop_us"`
	// SignalHopUs is the one-way latency of a semaphore signal over NVLink
	// (release store to the wait's acquire), the HB protocol's hop.
	SignalHopUs float64 `yaml:"signal_hop_us" json:"signal_hop_us"`
	// LinkEfficiency is the fraction of a GPU's NVLink bandwidth that
	// stores from thread blocks reach (store-only copy with every SM).
	LinkEfficiency float64 `yaml:"link_efficiency" json:"link_efficiency"`
	// HalfBlocks is the block count at which a group reaches half of that
	// rate: a group of B blocks drives at most
	// LinkEfficiency × NVLink × B / (B + HalfBlocks).
	HalfBlocks float64 `yaml:"half_blocks" json:"half_blocks"`
	// ReadFactor scales that rate for transfers that read peers' memory
	// (a request per response).
	ReadFactor float64 `yaml:"read_factor" json:"read_factor"`
	// LLFactor scales it for LL packet transfers (flags in every store,
	// the receiver polling); on top, packets move their flags too (2× the
	// bytes for LL16 and LL8, 128/120 for LL128 lines).
	LLFactor float64 `yaml:"ll_factor" json:"ll_factor"`
	// ProxyUs is the latency a port-channel request adds (FIFO, proxy
	// thread, engine start).
	ProxyUs float64 `yaml:"proxy_us" json:"proxy_us"`
	// EngineGBps bounds one port channel's engine (copy engine or NIC
	// queue).
	EngineGBps float64 `yaml:"engine_gbps" json:"engine_gbps"`
}

// DefaultParams are the constants fitted to weft's measurements
// (calibrate.go, docs/scale.md "Calibration"):
//
//   - LinkEfficiency 0.783 and HalfBlocks 2.26: thread-copy into a peer on
//     H200 reached 328, 359 and 368 GB/s with 16, 64 and 132 blocks of
//     478 GB/s (docs/bench/notes.md, gpu-host-facts.md); the curve
//     374·B/(B+2.26) fits all three within 0.7%.
//   - ReadFactor 0.913: 2PA's read-reduce at ≥ 128 MB, busbw 341 (2×H100),
//     342 (2×H200), 323 (4×H200) GB/s, against 367 GB/s of stores with 128
//     blocks; the mean of the three ratios.
//   - LLHopUs 1.0, SignalHopUs 1.7: an NVLink write-then-poll round of
//     1–1.5 µs (docs/bench/notes.md, v1) and the signal round trip of
//     3.4 µs on 4×H200 (v4), halved.
//   - OperandUs 0.44: 1PA at 8 B takes 5.3 µs on 4×H200 (6 operands) and
//     3.55 on 2×H200 / 3.56 on 2×H100 (2 operands): 1.75 µs / 4.
//   - LaunchUs 1.74: the rest of 1PA's 3.56 µs at 8 B on 2×H100 (with
//     8 blocks: BlockUs × 8).
//   - BlockUs 0.035: 2PA at 512 KB and 2 MB on 2×H100 (9.55, 13.97 µs)
//     after the transfer and the two handshakes.
//   - LLFactor 0.55: 1PA at 32 KB and 128 KB on 2×H100 (3.77, 5.41 µs).
//   - ProxyUs 28, EngineGBps 124: the port path's put-with-signal one-way
//     32.6 µs (2×H100, 2026-11-25 §2) less a signal hop and a launch; the
//     one-engine copy-engine AllGather at 256–512 MB, 123–124 GB/s.
//   - OpUs 0.1: one issue of a straight-line call; below what any
//     measurement here resolves.
func DefaultParams() Params {
	return Params{LaunchUs: 1.74, BlockUs: 0.035, OpUs: 0.1, OperandUs: 0.44, LLHopUs: 1.0, SignalHopUs: 1.7,
		LinkEfficiency: 0.783, HalfBlocks: 2.26, ReadFactor: 0.913, LLFactor: 0.55, ProxyUs: 28, EngineGBps: 124}
}

// Socket network of the emulated-node runs (2026-11-25 §4, 2 × 1 H100 over
// a VM's TCP interface): the flat AllGather moves 16 MB in 3385 µs and
// 64 B in 480 µs; a put with its signal through the socket proxy is
// SocketLatencyUs one way and the interface carries SocketGbps.
const (
	SocketLatencyUs = 420
	SocketGbps      = 45
)

// fill sets zero fields from DefaultParams and checks the rest.
func (p *Params) fill() error {
	d := DefaultParams()
	for _, f := range []struct {
		v   *float64
		def float64
	}{{&p.LaunchUs, d.LaunchUs}, {&p.BlockUs, d.BlockUs}, {&p.OpUs, d.OpUs}, {&p.OperandUs, d.OperandUs},
		{&p.LLHopUs, d.LLHopUs}, {&p.SignalHopUs, d.SignalHopUs}, {&p.LinkEfficiency, d.LinkEfficiency},
		{&p.HalfBlocks, d.HalfBlocks}, {&p.ReadFactor, d.ReadFactor}, {&p.LLFactor, d.LLFactor},
		{&p.ProxyUs, d.ProxyUs}, {&p.EngineGBps, d.EngineGBps}} {
		if *f.v == 0 {
			*f.v = f.def
		}
		if *f.v < 0 {
			return fmt.Errorf("sim: negative model constant %g: %w", *f.v, ErrInvalid)
		}
	}
	if p.LinkEfficiency > 1 || p.ReadFactor > 1 || p.LLFactor > 1 {
		return fmt.Errorf("sim: efficiencies %g, %g, %g above 1: %w", p.LinkEfficiency, p.ReadFactor, p.LLFactor, ErrInvalid)
	}
	return nil
}

// GroupRate is the rate (GB/s) at which a group of blocks thread blocks
// stores over a link of linkGBps.
func (p *Params) GroupRate(linkGBps float64, blocks int) float64 {
	b := float64(blocks)
	return p.LinkEfficiency * linkGBps * b / (b + p.HalfBlocks)
}
