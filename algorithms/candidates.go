package algorithms

import "github.com/weftccl/weft/hal/plan"

// Candidate is one AllReduce plan a tuner measures (`weft bench
// all_reduce --tune`) and the message sizes it is measured at:
// MinBytes ≤ bytes ≤ MaxBytes (MaxBytes 0: unbounded). Tier.MaxBytes is 0;
// the tuner chooses the bounds.
type Candidate struct {
	Tier               Tier
	MinBytes, MaxBytes int64
}

// Size ranges of the candidate families on GPUs. 1PA moves 2(n−1) times
// the message as packets and holds as much scratch, so it is measured up
// to 1 MiB (the defaults switch to 2PA at 128 KiB); the 2PA plans from
// 16 KiB; the store-only 2PA, whose per-window handshakes pay off only on
// large chunks, from 1 MiB.
const (
	tune1PAMax  = 1 << 20
	tune2PAMin  = 16 << 10
	tunePushMin = 1 << 20
)

// TuneCandidates is the AllReduce search space for a device with sms
// multiprocessors: 1PA with LL16 and LL8 packets on 1–16 blocks of 512 or
// 1024 threads (one block is the small-message candidate: no block start
// and teardown beyond the first); 2PA with 16–128 blocks of 512 or 1024
// threads and 2 or 4 vectors in flight per thread (the shapes of the
// 4×H200 sweeps in docs/bench/notes.md lie inside); the store-only 2PA with
// 32–128 blocks and windows of 2 and 8 MiB per chunk. Blocks above sms are
// left out. hal/host (gpu false) gets a small space of the same families
// with 32-thread blocks and small windows, so that tests cross windows.
func TuneCandidates(sms int, gpu bool) []Candidate {
	var cs []Candidate
	add := func(t Tier, lo, hi int64) { cs = append(cs, Candidate{Tier: t, MinBytes: lo, MaxBytes: hi}) }
	llBlocks, llThreads := []int{1, 2, 4, 8, 16}, []int{512, 1024}
	blocks, threads, unrolls := []int{16, 32, 64, 128}, []int{512, 1024}, []int{2, 4}
	pushBlocks, windows := []int{32, 64, 128}, []int64{2 << 20, 8 << 20}
	max1PA, min2PA, minPush := int64(tune1PAMax), int64(tune2PAMin), int64(tunePushMin)
	if !gpu {
		llBlocks, llThreads = []int{1, 2}, []int{32}
		blocks, threads, unrolls = []int{1, 2, 4}, []int{32}, []int{0}
		pushBlocks, windows = []int{2}, []int64{16 << 10, 64 << 10}
		max1PA, min2PA, minPush = 64<<10, 1<<10, 64<<10
		sms = max(sms, 4)
	}
	for _, ll := range []plan.Protocol{plan.LL16, plan.LL8} {
		for _, b := range llBlocks {
			for _, t := range llThreads {
				add(Tier{Algo: Algo1PA, LL: ll, Shape: Shape{Blocks: b, Threads: t}}, 0, max1PA)
			}
		}
	}
	for _, b := range blocks {
		for _, t := range threads {
			for _, u := range unrolls {
				if b <= sms {
					add(Tier{Algo: Algo2PA, Shape: Shape{Blocks: b, Threads: t, Unroll: u}}, min2PA, 0)
				}
			}
		}
	}
	for _, b := range pushBlocks {
		for _, t := range threads {
			for _, w := range windows {
				if b <= sms {
					add(Tier{Algo: Algo2PAPush, Shape: Shape{Blocks: b, Threads: t, Unroll: unrolls[0], Push: true, Window: w}}, minPush, 0)
				}
			}
		}
	}
	return cs
}

// CandidateTiers is the tier list a tuner's communicator uses to measure
// c at sizes up to top: c alone when it is a 2PA plan; a 1PA plan bounded
// by the largest of sizes it is measured at, followed by last (a 1PA
// tier needs a bound and cannot be last). ok is false when c is measured
// at none of sizes.
func CandidateTiers(c Candidate, sizes []int64, last Tier) (tiers []Tier, ok bool) {
	var bound int64
	for _, b := range sizes {
		if b >= c.MinBytes && (c.MaxBytes == 0 || b <= c.MaxBytes) {
			bound = max(bound, b)
		}
	}
	if bound == 0 {
		return nil, false
	}
	t := c.Tier
	if t.Algo != Algo1PA {
		t.MaxBytes = 0
		return []Tier{t}, true
	}
	t.MaxBytes = bound
	last.MaxBytes = 0
	return []Tier{t, last}, true
}
