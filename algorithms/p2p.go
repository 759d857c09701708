package algorithms

import (
	"fmt"

	"github.com/weftccl/weft/hal/plan"
)

// Point-to-point plans. A group of sends and receives (LaunchP2P in the
// root package) runs in rounds: the k-th send to a peer and the k-th
// receive from it form round k. Each operation of a round is served by one
// of two kinds of plan (each kind in one or more sizes: p2pPlans), chosen
// by the operation's own size so that a sender and its receiver, whose
// sizes are equal, always choose the same plan:
//
//   - P2PLLPlan, for operations up to Config.P2PLLMaxBytes: the sender
//     writes LL16 packets into its slot of the receiver's scratch, the
//     receiver unpacks them. The packets' flags are the only
//     synchronisation on the critical path, so an operation costs one
//     one-way trip. Flags and scratch halves follow the group's own launch
//     counter (plan.Plan.StateBytes: a group counts the launches in which
//     it runs), so they match the peer's receive group whatever else either
//     rank sent in between, and a CUDA graph replay uses fresh flags. Data
//     flows one way, so the receiver releases each half it has read, at
//     the start of its next run (llReleases: a release stored as a run's
//     last act would hold that run's end for its round trip over the
//     link), and the sender takes that credit at the start of the launch
//     that reuses the half (an Ack wait with 2 credits): normally long
//     there, it costs one load per receiver block. Operations up to
//     Config.P2PLLSmallMaxBytes take a one-block copy of the plan. The
//     send and receive groups also split the
//     span of P2PLLMaxBytes among their blocks, not the count
//     (plan.Group.Span): a block owns the same packets whatever the count,
//     so launches k and k+2 of different sizes never have one block write
//     what another still reads, even with a per-block credit.
//   - P2PPlan, the windowed plan, for larger operations: Config.P2P
//     blocks per group (Config.P2PMid's up to Config.P2PMidMaxBytes),
//     windows through scratch with data, free and done semaphores. Once the communicator has a registered buffer, its send
//     and receive groups first exchange a post, and a receive into a
//     registered buffer is stored by the sender directly, all blocks, no
//     windows (zero-copy, below).
//
// A round whose operations fall on both sides of the threshold takes two
// launches, the LL plan's first: every rank orders its launches LL₀, HB₀,
// LL₁, HB₁, …, and a launch waits only for peers' launches of the same
// plan and round or earlier ones, so no pattern deadlocks.

// p2pPlans returns the point-to-point plans, smallest operations first:
// a one-block LL plan up to Config.P2PLLSmallMaxBytes where that is below
// Config.P2PLLMaxBytes, the LL plan up to P2PLLMaxBytes (unless that is 0
// or Config.Algo is "hb"), a second LL plan up to Config.P2PLLWideMaxBytes
// where that is larger, the mid-size windowed plan (Config.P2PMid) up to
// Config.P2PMidMaxBytes where that is larger still, then the windowed
// plan.
func p2pPlans(c Config) ([]Choice, error) {
	hb, err := P2PPlan(c)
	if err != nil {
		return nil, err
	}
	windowed := []Choice{{Plan: hb}}
	llMax := c.P2PLLMaxBytes
	if c.P2PLLMaxBytes <= 0 || c.Algo == "hb" {
		llMax = 0
	}
	if c.P2PMidMaxBytes > max(llMax, c.P2PLLWideMaxBytes) && c.P2PMid.Blocks > 0 {
		m := c
		m.P2P = c.P2PMid
		mid, err := P2PPlan(m)
		if err != nil {
			return nil, err
		}
		mid.Name += "-to" + FormatSize(c.P2PMidMaxBytes)
		windowed = []Choice{{Plan: mid, MaxBytes: c.P2PMidMaxBytes}, {Plan: hb}}
	}
	if llMax <= 0 {
		return windowed, nil
	}
	ll, err := P2PLLPlan(c)
	if err != nil {
		return nil, err
	}
	var out []Choice
	if c.P2PLLSmallMaxBytes > 0 && c.P2PLLSmallMaxBytes < c.P2PLLMaxBytes {
		s := c
		s.P2PLLMaxBytes, s.P2PLLWideMaxBytes, s.P2PLL.Blocks = c.P2PLLSmallMaxBytes, 0, 1
		small, err := P2PLLPlan(s)
		if err != nil {
			return nil, err
		}
		small.Name += fmt.Sprintf("-to%dK", max(1, c.P2PLLSmallMaxBytes>>10))
		out = append(out, Choice{Plan: small, MaxBytes: c.P2PLLSmallMaxBytes})
	}
	out = append(out, Choice{Plan: ll, MaxBytes: c.P2PLLMaxBytes})
	if c.P2PLLWideMaxBytes > c.P2PLLMaxBytes {
		w := c
		w.P2PLLMaxBytes, w.P2PLLWideMaxBytes = c.P2PLLWideMaxBytes, 0
		wide, err := P2PLLPlan(w)
		if err != nil {
			return nil, err
		}
		wide.Name += fmt.Sprintf("-to%dK", c.P2PLLWideMaxBytes>>10)
		out = append(out, Choice{Plan: wide, MaxBytes: c.P2PLLWideMaxBytes})
	}
	return append(out, windowed...), nil
}

// Semaphores of P2PLLPlan (per block: base + part).
const semP2PRelease = 0

// P2PLLPlan is the LL point-to-point plan of a rank, with the argument
// slots of P2PPlan (SendArg, RecvArg, SelfArg): for channel i a send group
// that puts its input as LL16 packets into this rank's slot of the peer's
// scratch, and a receive group that unpacks slot i into its output and
// releases the half at the start of its next run; a self-copy group.
// Every group has Config.P2PLL.Blocks blocks of Config.P2PLL.Threads
// threads. The data type is raw bytes
// (plan.Uint8); it serves operations up to Config.P2PLLMaxBytes (its
// scratch is 2 halves × (n−1) slots of that many bytes as packets). Errors:
// an invalid rank or shape.
func P2PLLPlan(c Config) (*plan.Plan, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	s := c.P2PLL
	if s.Blocks < 1 || c.P2PLLMaxBytes <= 0 {
		return nil, fmt.Errorf("algorithms: LL point-to-point plan: %d blocks, up to %d bytes: want at least 1 block and a positive bound", s.Blocks, c.P2PLLMaxBytes)
	}
	chs := c.channels()
	b := s.Blocks
	p := c.newPlan(fmt.Sprintf("sendrecv-%s-%dx%d", plan.LL16, b, s.Threads), s.Threads)
	p.Scratch, p.ScratchSlots, p.MaxBytes, p.Semaphores = plan.LL16, len(chs), c.P2PLLMaxBytes, b
	for ci, ch := range chs {
		credit := plan.Wait(ci, sem(semP2PRelease, b))
		credit.Ack, credit.Credits, credit.Deferred = true, 2, true // released at the receiver's next run (llReleases)
		put := plan.Transfer(plan.All, 0, []plan.Ref{plan.RS(ci, slotOf(c.Rank, ch.Peer))}, plan.L(plan.Input))
		get := plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, plan.LS(ci))
		p.Groups = append(p.Groups,
			plan.Group{Blocks: b, Arg: SendArg(c.Rank, ch.Peer), Ops: []plan.Op{credit, put}, Span: c.P2PLLMaxBytes},
			plan.Group{Blocks: b, Arg: RecvArg(c.Rank, ch.Peer), Before: llReleases([]int{ci}, sem(semP2PRelease, b)), Ops: []plan.Op{get}, Span: c.P2PLLMaxBytes})
	}
	p.Groups = append(p.Groups, plan.Group{Blocks: b, Arg: SelfArg(c.NRanks),
		Ops: []plan.Op{plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, plan.L(plan.Input))}})
	if len(chs) == 0 {
		p.Scratch, p.ScratchSlots, p.Semaphores = plan.Simple, 0, 0
	}
	return p, p.Validate()
}

// Zero-copy point-to-point (hal/plan/posted.go). Every send and receive
// group of P2PPlan on a memory channel has a posted-buffer exchange: with
// GroupArgs.Post set (the communicator has a registration), the receive
// group posts its output's registration and offset into the sender's
// mailbox, and the send group, when the post names a buffer it has
// mapped, stores the whole message straight into it with all of the
// group's blocks (no windows, no scratch) and answers; otherwise both run
// the windowed path of the same launch. The LL plan has no exchange: at
// its sizes the post's one-way trip costs more than the copy it saves.

// p2pPostSems is the number of semaphore indices the mailbox of a group of
// b blocks takes (3 words per block: plan.PostMailbox).
func p2pPostSems(b int) int { return 3 * b }

// p2pSendPost is the exchange of the send group of channel ci (peer ch),
// whose mailbox starts at semaphore sem: the direct path stores the input
// into the posted buffer. nil for a port channel (the engine cannot reach
// a posted buffer this way).
func p2pSendPost(ch plan.Channel, ci, sem int) *plan.Post {
	if ch.Port {
		return nil
	}
	direct := plan.Transfer(plan.All, 0, []plan.Ref{{Buf: plan.Posted, Chan: ci}}, plan.L(plan.Input))
	return &plan.Post{Chan: ci, Send: true, Sem: sem, Direct: []plan.Op{direct}}
}

// p2pRecvPost is the exchange of the receive group of channel ci.
func p2pRecvPost(ch plan.Channel, ci, sem int) *plan.Post {
	if ch.Port {
		return nil
	}
	return &plan.Post{Chan: ci, Sem: sem}
}

// Point-to-point past PeerPlansMaxRanks: peer windows.
//
// A point-to-point plan has a channel and two argument slots per peer, so
// one plan serves at most plan.MaxPeers peers. A larger communicator
// splits each rank's peers into windows of at most plan.MaxPeers peers
// and gives every window plans of its own (P2PWindowPlans); a group of
// sends and receives runs, round by round, one launch per window and plan
// its operations need (LaunchP2P in the root package).
//
// Windows must pair up: the plans of window j are set up together on
// every rank (the setup is collective), and a channel of rank r to peer p
// in window j connects to p's channel to r in p's window j. The ranks are
// cut into nb = ⌈n / plan.MaxPeers⌉ blocks of consecutive ranks (sizes
// differ by at most one, so each holds at most plan.MaxPeers), and window
// j of rank r holds the ranks of block (j − block(r)) mod nb, itself left
// out: p is in r's window j exactly when block(r) + block(p) ≡ j, which is
// symmetric, and every rank has one block per window, so every rank takes
// part in the setup of every window. The window holding its own block also
// serves a rank's sends to itself. Up to PeerPlansMaxRanks ranks there is
// one window, of every peer: the plans are those of Plans.

// PeerWindow is one window of a rank's point-to-point peers.
type PeerWindow struct {
	// Index is the window's number, 0 to len(P2PWindows(…))−1, the same
	// on every rank for the windows that connect to each other.
	Index int
	// Peers are the window's peer ranks, ascending: channel i of the
	// window's plans goes to Peers[i].
	Peers []int
	// Slots[i] is this rank's channel index in Peers[i]'s window: the slot
	// of Peers[i]'s scratch that receives from this rank.
	Slots []int
	// Self: the window serves sends from this rank to itself.
	Self bool
	// Width is the scratch slots of the window's plans on every rank (the
	// most peers any rank has in the window), so that all ranks set up
	// plans of the same scratch size.
	Width int
}

// SendArg, RecvArg and SelfArg are the argument slots (plan.Args.Groups
// index + 1) of the window's plans for a send to, a receive from peer
// rank peer, and a copy to this rank itself; peer must be in the window.
func (w PeerWindow) SendArg(peer int) int { return 2*w.channel(peer) + 1 }
func (w PeerWindow) RecvArg(peer int) int { return 2*w.channel(peer) + 2 }
func (w PeerWindow) SelfArg() int         { return 2*len(w.Peers) + 1 }

// Has reports whether peer is in the window.
func (w PeerWindow) Has(peer int) bool { return w.channel(peer) >= 0 }

func (w PeerWindow) channel(peer int) int {
	lo, hi := 0, len(w.Peers)
	for lo < hi {
		m := (lo + hi) / 2
		if w.Peers[m] < peer {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(w.Peers) && w.Peers[lo] == peer {
		return lo
	}
	return -1
}

// p2pBlocks is the number of rank blocks of the windows of n ranks.
func p2pBlocks(n int) int {
	if n <= PeerPlansMaxRanks {
		return 1
	}
	return (n + plan.MaxPeers - 1) / plan.MaxPeers
}

// P2PWindows returns the peer windows of rank of nranks (see above),
// ordered by Index. Errors: an invalid rank.
func P2PWindows(rank, nranks int) ([]PeerWindow, error) {
	if nranks < 1 || rank < 0 || rank >= nranks {
		return nil, fmt.Errorf("algorithms: point-to-point windows of rank %d of %d", rank, nranks)
	}
	nb := p2pBlocks(nranks)
	start := func(b int) int { return b * nranks / nb }
	block := func(r int) int { // the b with start(b) ≤ r < start(b+1)
		b := r * nb / nranks
		for start(b+1) <= r {
			b++
		}
		for start(b) > r {
			b--
		}
		return b
	}
	if nb == 1 {
		w := PeerWindow{Self: true, Width: nranks - 1}
		for p := 0; p < nranks; p++ {
			if p != rank {
				w.Peers, w.Slots = append(w.Peers, p), append(w.Slots, slotOf(rank, p))
			}
		}
		return []PeerWindow{w}, nil
	}
	me := block(rank)
	var width int
	for b := 0; b < nb; b++ {
		width = max(width, start(b+1)-start(b))
	}
	out := make([]PeerWindow, nb)
	for j := range out {
		q := ((j-me)%nb + nb) % nb
		w := PeerWindow{Index: j, Self: q == me, Width: width}
		for p := start(q); p < start(q+1); p++ {
			if p == rank {
				continue
			}
			// This rank's place in p's window j, which holds block(rank)
			// without p.
			s := rank - start(me)
			if q == me && p < rank {
				s--
			}
			w.Peers, w.Slots = append(w.Peers, p), append(w.Slots, s)
		}
		out[j] = w
	}
	return out, nil
}

// P2PWindowPlans returns the point-to-point plans of window w of rank
// c.Rank (P2PWindows), smallest operations first. With one window (up to
// PeerPlansMaxRanks ranks) they are Plans(c, SendRecv, 0). Otherwise they
// are the plans of a communicator of len(w.Peers)+1 ranks in which this
// rank is the last, placed in the whole communicator: channel i goes to
// w.Peers[i], a transfer into the scratch of channel i's peer writes slot
// w.Slots[i] (its scratch slot for this rank), every plan has w.Width
// scratch slots (the same scratch size on every rank of the window), and
// the name says the window ("…-win1"). Semaphores are per rank of the
// whole communicator (plan.Plan.SemaphoreRegionBytes), so nothing else
// changes. Under a block budget (Config.Budget) every group of every
// window holds at most max(1, Budget.Max/(2·Width+1)) blocks and, with
// Budget.Min and SMs, at least ⌈Min/(2·Width+1)⌉ (within Max and
// SMs/(2·Width+1)): the same on every rank, so that paired send and
// receive groups have equal blocks. Errors: those of Plans.
func P2PWindowPlans(c Config, w PeerWindow) ([]Choice, error) {
	if p2pBlocks(c.NRanks) == 1 {
		return Plans(c, SendRecv, 0)
	}
	k := len(w.Peers)
	if len(w.Slots) != k || k == 0 || k > plan.MaxPeers || w.Width < k {
		return nil, fmt.Errorf("algorithms: point-to-point window %d of rank %d: %d peers, %d slots, width %d", w.Index, c.Rank, k, len(w.Slots), w.Width)
	}
	vc := c
	vc.Rank, vc.NRanks = k, k+1
	if bb := c.Budget; bb.Set() {
		// Fitting the window as a communicator of k+1 ranks would give
		// each rank blocks per group by its own k, which differs between
		// the two sides of a window, so a send group and its receive
		// group would not pair up. Every rank instead clamps every group
		// to what a window of Width peers (the same on every rank) fits:
		// Width send and Width receive groups and the self copy, at most
		// Max blocks in all, at least one block per group; Min raises
		// them alike, within Max and the SMs (all blocks resident).
		groups := 2*w.Width + 1
		lo, hi := 0, 0
		if bb.Max > 0 {
			hi = max(1, bb.Max/groups)
		}
		if bb.Min > 0 && bb.SMs > 0 {
			lo = max(1, min((bb.Min+groups-1)/groups, bb.SMs/groups))
			if hi > 0 {
				lo = min(lo, hi)
			}
		}
		vc = vc.withBlocks(lo, hi) // clears the budget
	}
	if c.Nodes != nil {
		// The window's ranks' nodes, renumbered in order of appearance.
		ids := map[int]int{}
		vc.Nodes = make([]int, k+1)
		for i := 0; i <= k; i++ {
			r := c.Rank
			if i < k {
				r = w.Peers[i]
			}
			if _, ok := ids[c.Nodes[r]]; !ok {
				ids[c.Nodes[r]] = len(ids)
			}
			vc.Nodes[i] = ids[c.Nodes[r]]
		}
		if len(ids) == 1 && !c.stageSends() {
			// One node: the device's engines reach the window's peers.
			// With staged sends every channel goes over the network
			// (Config.stageSends), as in the communicator's other plans.
			vc.Nodes = nil
		}
	}
	choices, err := Plans(vc, SendRecv, 0)
	if err != nil {
		return nil, err
	}
	for _, ch := range choices {
		p := ch.Plan
		p.Name = fmt.Sprintf("%s-win%d", p.Name, w.Index)
		p.Rank, p.NRanks = c.Rank, c.NRanks
		for i := range p.Channels {
			p.Channels[i].Peer = w.Peers[i]
		}
		staged := false // receive slots 0…k−1, then staging slots k…2k−1 (plan.Op.Stage)
		for _, g := range p.Groups {
			for _, o := range g.Ops {
				staged = staged || o.Stage > 0
			}
		}
		if p.ScratchSlots > 0 {
			p.ScratchSlots = w.Width
			if staged {
				p.ScratchSlots = 2 * w.Width
			}
		}
		for gi := range p.Groups {
			g := &p.Groups[gi]
			remoteSlots(g.Ops, w.Slots)
			remoteSlots(g.After, w.Slots)
			stageSlots(g.Ops, k, w.Width)
		}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("algorithms: point-to-point window %d of rank %d: %w", w.Index, c.Rank, err)
		}
	}
	return choices, nil
}

// stageSlots moves the staging slots of a window plan's puts (plan.Op.Stage:
// slots k…2k−1 of a plan over k channels, after its receive slots) behind
// the window's width of receive slots, so that every rank of the window
// has the same slot layout whatever its k.
func stageSlots(ops []plan.Op, k, width int) {
	for i := range ops {
		if s := ops[i].Stage; s > 0 {
			ops[i].Stage = 1 + width + (s - 1 - k)
		}
	}
}

// remoteSlots points every reference to the scratch of a channel's peer
// at the peer's slot for this rank, slots[channel].
func remoteSlots(ops []plan.Op, slots []int) {
	for i := range ops {
		for _, refs := range [][]plan.Ref{ops[i].Srcs, ops[i].Dsts} {
			for j := range refs {
				if refs[j].Buf == plan.Scratch && refs[j].Chan >= 0 {
					refs[j].Slot = slots[refs[j].Chan]
				}
			}
		}
	}
}
