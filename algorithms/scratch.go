package algorithms

import "fmt"

// AllReduce through Launch serves buffers that nobody registered (the NCCL
// API: ncclAllReduce on whatever pointers the caller passes), so it cannot
// take the zero-copy 2PA plans of AllReducePlans, which read the peers'
// inputs in place. It takes the same 1PA tiers (they only write packets
// into scratch: the tier boundaries of the zero-copy path up to its last
// 1PA tier hold here too), then, where the zero-copy path switches to 2PA,
// a wide 1PA (Config.WideLL's blocks) up to Config.ScratchLLMaxBytes, then
// the windowed 2PA through scratch (AllReduceHB).
//
// Why LL and not registration on first use or a scratch 2PA for the mid
// sizes: docs/collectives.md, "AllReduce through the NCCL API".

// scratchAllReducePlans are the memory-channel AllReduce plans of Plans,
// smallest messages first (Config.Algo "ll" keeps the 1PA plans, "hb" the
// windowed one), then from Config.RingMinBytes the windowed ring. Errors
// name a malformed tier list.
func scratchAllReducePlans(c Config) ([]Choice, error) {
	var out []Choice
	if c.Algo != "hb" {
		ll, err := scratchAllReduceLL(c)
		if err != nil {
			return nil, err
		}
		out = ll
		if c.Algo == "ll" && len(out) > 0 {
			return out, nil
		}
	}
	p, err := AllReduceHB(c)
	if err != nil {
		return nil, err
	}
	return c.ringFrom(append(out, Choice{Plan: p}), RingAllReduceHB, c.RingMinBytes)
}

// scratchAllReduceLL are the 1PA choices of the scratch AllReduce: one per
// 1PA tier of c.AllReduceTiers(), and the WideLL-shaped 1PA up to
// c.ScratchLLMaxBytes when that is above the last tier's bound (the last
// tier itself is widened when it already has that shape), then from 3
// ranks the two-phase LL plan up to c.ScratchLL2PAMaxBytes and the one
// shaped c.LL2Large up to c.ScratchLL2PALargeMaxBytes.
func scratchAllReduceLL(c Config) ([]Choice, error) {
	tiers := c.AllReduceTiers()
	if len(c.AllReduce) == 0 && c.LLMaxBytes <= 0 {
		tiers = nil // no 1PA tier: LLMaxBytes 0 turns the narrow 1PA off
	} else if err := ValidateTiers(tiers); err != nil {
		return nil, err
	}
	var ll []Tier
	for _, t := range tiers {
		if t.Algo == Algo1PA {
			ll = append(ll, t)
		}
	}
	var top int64
	if len(ll) > 0 {
		top = ll[len(ll)-1].MaxBytes
	}
	if c.WideLL.Blocks > 0 && c.ScratchLLMaxBytes > top {
		wide := Tier{Algo: Algo1PA, LL: c.WideLLProto(), Shape: Shape{Blocks: c.WideLL.Blocks, Threads: c.WideLL.Threads}, MaxBytes: c.ScratchLLMaxBytes}
		if wide.Threads == 0 {
			wide.Threads = c.Threads
		}
		if err := wide.validate(); err != nil {
			return nil, fmt.Errorf("algorithms: wide LL AllReduce (%s): %v", wide, err)
		}
		if n := len(ll); n > 0 && ll[n-1].Name() == wide.Name() {
			ll[n-1].MaxBytes = wide.MaxBytes
		} else {
			ll = append(ll, wide)
		}
	}
	var out []Choice
	for _, t := range ll {
		p, err := allReduce1PA(c, t)
		if err != nil {
			return nil, err
		}
		out = append(out, Choice{Plan: p, MaxBytes: t.MaxBytes})
		top = max(top, t.MaxBytes)
	}
	if c.NRanks < 3 || c.WideLL.Blocks <= 0 {
		return out, nil
	}
	// The two-phase LL plans: WideLL's shape up to ScratchLL2PAMaxBytes,
	// then LL2Large's up to its own bound (one plan where the shapes are
	// the same, as under a block budget that clamps both alike).
	type ll2 struct {
		s   Shape
		max int64
	}
	var two []ll2
	if c.ScratchLL2PAMaxBytes > top {
		two = append(two, ll2{c.WideLL, c.ScratchLL2PAMaxBytes})
		top = c.ScratchLL2PAMaxBytes
	}
	if c.LL2Large.Blocks > 0 && c.ScratchLL2PALargeMaxBytes > top {
		if n := len(two); n > 0 && two[n-1].s == c.LL2Large {
			two[n-1].max = c.ScratchLL2PALargeMaxBytes
		} else {
			two = append(two, ll2{c.LL2Large, c.ScratchLL2PALargeMaxBytes})
		}
	}
	for _, t := range two {
		p, err := AllReduce2PALL(c, t.s, t.max)
		if err != nil {
			return nil, err
		}
		out = append(out, Choice{Plan: p, MaxBytes: t.max})
	}
	return out, nil
}
