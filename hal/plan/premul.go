package plan

import "fmt"

// PreMulSum with a scalar per rank.
//
// ncclRedOpCreatePreMulSum lets every rank pass its own scalar s_r; the
// result is Σ_r s_r·x_r, where x_r is rank r's input. A rank knows only
// its own scalar, and in most plans the contributions that reach a
// reducing transfer are peers' data or partial sums of several ranks
// (hierarchical plans), which cannot be scaled after the fact. So weft
// applies the scalar where a rank's own contribution enters the
// reduction, at the source:
//
//   - With PreMulSum, every read of this rank's input buffer (a source
//     Ref{Buf: Input, Chan: Local}) by a transfer that the block's threads
//     run is multiplied by the launch's scalar (Args.Scalar or ScalarPtr)
//     before it is reduced, stored, or packed into LL packets
//     ([ScalesSource]). What leaves a rank is therefore already scaled,
//     and every later step only sums (PreMulSum's Base, Sum). Combine
//     transfers do not scale for PreMulSum ([CombineMode]).
//   - An engine cannot scale: a port transfer of local input names a
//     staging slot (Op.Stage), into which the threads store the scaled
//     window first; the engine moves the slot.
//   - A rank cannot scale a peer's input it reads directly (a remote Input
//     source: the zero-copy AllReduce2PA) without knowing the peer's
//     scalar, nor a local input moved by an engine without a staging slot,
//     nor one stored through the multicast view. [Plan.ServesPreMulSum]
//     reports such plans; selection skips them for PreMulSum, and the
//     executors refuse to prepare them for it (hal.ErrNotSupported).
//
// Only collectives that reduce run with PreMulSum (the others run with Sum
// whatever the call's operator), so every input read of such a plan is a
// contribution. For Sum, Prod, Max, Min and Avg nothing changes: the
// scaling is a compile-time mode of the generated kernel (the SCL mask of
// weft_channels.h) and a per-transfer decision of hal/host, never a
// per-element branch. Avg keeps scaling in its Combine transfer: its
// multiplier is the same on every rank.

// ScalesSource reports whether a transfer run by a block's threads
// multiplies its source r by the launch's scalar for operator op: with
// PreMulSum, every read of this rank's own input (any segment).
func ScalesSource(op RedOp, r Ref) bool {
	return op == PreMulSum && r.Buf == Input && r.Chan == Local
}

// ServesPreMulSum returns nil when the plan computes PreMulSum with a
// scalar per rank; otherwise an error (wrapping ErrInvalidPlan) naming the
// first operation that cannot scale this rank's contribution at its
// source: a read of a peer's input, a port transfer of local input
// without a staging slot (Op.Stage), or a transfer through the switch
// buffer's multicast view with local input as a source.
func (p *Plan) ServesPreMulSum() error {
	for gi, g := range p.Groups {
		for oi, o := range append(append([]Op{}, g.Ops...), g.After...) {
			if o.Kind != OpTransfer {
				continue
			}
			bad := func(why string) error {
				return fmt.Errorf("plan %s: group %d op %d (%s): %s, so a per-rank PreMulSum scalar cannot be applied: %w",
					p.Name, gi, oi, p.OpString(o), why, ErrInvalidPlan)
			}
			mc := hasMulticast(o.Dsts) || (len(o.Srcs) > 0 && o.Srcs[0].IsMulticast())
			for _, r := range o.Srcs {
				switch {
				case r.Buf == Input && r.Remote():
					return bad("it reads a peer's input, whose scalar this rank does not know")
				case o.Port && ScalesSource(PreMulSum, r) && o.Stage == 0:
					return bad("an engine moves this rank's input and the transfer has no staging slot")
				case mc && ScalesSource(PreMulSum, r):
					return bad("it stores this rank's input through the multicast view")
				}
			}
		}
	}
	return nil
}
