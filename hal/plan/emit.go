package plan

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"
)

// MaxPeers is the number of channels a GPU plan may have (WEFT_MAX_PEERS
// in the channel device library). It bounds the peers of one rank, not
// the ranks of a communicator: all-pairs plans of up to 8 ranks use 7, and
// the bounded-peer plans of package algorithms use at most 2·⌈log2 n⌉
// (Bruck AllGather and ReduceScatter: 12 for 64 ranks, 16 for 256).
const MaxPeers = 16

// ParamsBytes is the size of the kernel parameter struct weft_params.
const ParamsBytes = (9+2*MaxPeers+3+2*MaxPeers+1+2+2+4*MaxGroupArgs+1+4)*8 + (4+MaxPeers)*4

// SkipCount as a group's count in the kernel parameters leaves the group
// out of the launch.
const SkipCount = ^uint64(0)

// PackParams writes the kernel parameters of one launch: the plan's
// bindings and the launch arguments, in the layout of struct weft_params
// (channels/device/weft_channels.h).
func PackParams(p *Plan, b *Bindings, a *Args) ([]byte, error) {
	return PackParamsInto(make([]byte, ParamsBytes), p, b, a)
}

// PackParamsInto is PackParams writing into dst, which must hold
// ParamsBytes bytes; every byte of it is written (no field relies on
// zeroed memory), so a launch path may reuse one buffer. It returns
// dst[:ParamsBytes].
func PackParamsInto(dst []byte, p *Plan, b *Bindings, a *Args) ([]byte, error) {
	if len(dst) < ParamsBytes {
		return nil, fmt.Errorf("plan %s: a parameter buffer of %d bytes, want %d: %w", p.Name, len(dst), ParamsBytes, ErrInvalidPlan)
	}
	if len(p.Channels) > MaxPeers {
		return nil, fmt.Errorf("plan %s has %d channels, GPU plans support %d: %w", p.Name, len(p.Channels), MaxPeers, ErrInvalidPlan)
	}
	if len(a.Groups) > MaxGroupArgs {
		return nil, fmt.Errorf("plan %s: %d group arguments, at most %d: %w", p.Name, len(a.Groups), MaxGroupArgs, ErrInvalidPlan)
	}
	// Straight-line stores through an inlined writer: this runs at every
	// launch (it took 1.7 µs with a closure per field on the development
	// VM, a sixth of a call's host time).
	w := paramWriter{b: dst[:ParamsBytes]}
	w.u64(b.Scratch)
	w.u64(uint64(b.ScratchBytes))
	w.u64(b.Semaphores)
	w.u64(b.Expected)
	w.u64(b.State)
	w.u64(b.Control)
	ns, nm := b.NetRegions()
	w.u64(ns)
	w.u64(nm)
	w.u64(p.NetChannels())
	n := len(p.Channels)
	for i := 0; i < MaxPeers; i++ {
		if i < n {
			w.u64(b.Peers[i].Scratch)
		} else {
			w.u64(0)
		}
	}
	for i := 0; i < MaxPeers; i++ {
		if i < n {
			w.u64(b.Peers[i].Semaphores)
		} else {
			w.u64(0)
		}
	}
	w.u64(uint64(a.Count))
	w.u64(a.Input)
	w.u64(a.Output)
	for i := 0; i < MaxPeers; i++ {
		if i < n && i < len(a.PeerInput) {
			w.u64(a.PeerInput[i])
		} else {
			w.u64(0)
		}
	}
	for i := 0; i < MaxPeers; i++ {
		if i < n && i < len(a.PeerOutput) {
			w.u64(a.PeerOutput[i])
		} else {
			w.u64(0)
		}
	}
	t := a.Timeout
	if t <= 0 {
		t = DefaultTimeout
	}
	w.u64(uint64(t / time.Nanosecond))
	w.u64(a.Scalar)
	w.u64(a.ScalarPtr)
	w.u64(b.Fifo)
	w.u64(b.FifoHead)
	// Group arguments, four arrays of MaxGroupArgs: counts (SkipCount
	// leaves a group out), inputs, outputs, posts. Slots past a.Groups
	// are skipped.
	ng := len(a.Groups)
	for i := 0; i < MaxGroupArgs; i++ {
		if i < ng && !a.Groups[i].Skip {
			w.u64(uint64(a.Groups[i].Count))
		} else {
			w.u64(SkipCount)
		}
	}
	for i := 0; i < MaxGroupArgs; i++ {
		if i < ng {
			w.u64(a.Groups[i].Input)
		} else {
			w.u64(0)
		}
	}
	for i := 0; i < MaxGroupArgs; i++ {
		if i < ng {
			w.u64(a.Groups[i].Output)
		} else {
			w.u64(0)
		}
	}
	for i := 0; i < MaxGroupArgs; i++ {
		if i < ng && !a.Groups[i].Skip {
			w.u64(a.Groups[i].Post)
		} else {
			w.u64(0)
		}
	}
	w.u64(a.PostTable)
	w.u64(b.Switch)
	w.u64(b.Multicast)
	w.u64(uint64(b.SwitchBytes))
	w.u64(uint64(p.SwitchSlots))
	w.i32(p.Rank)
	w.i32(p.NRanks)
	w.i32(p.Semaphores)
	w.i32(p.ScratchSlots)
	for i := 0; i < MaxPeers; i++ {
		if i < n {
			w.i32(p.Channels[i].Peer)
		} else {
			w.i32(-1)
		}
	}
	if w.n != ParamsBytes {
		panic(fmt.Sprintf("plan: PackParams wrote %d bytes of %d (the layout and ParamsBytes disagree)", w.n, ParamsBytes))
	}
	return w.b, nil
}

// paramWriter appends little-endian fields to a kernel parameter block.
type paramWriter struct {
	b []byte
	n int
}

func (w *paramWriter) u64(v uint64) {
	binary.LittleEndian.PutUint64(w.b[w.n:w.n+8], v)
	w.n += 8
}

func (w *paramWriter) i32(v int) {
	binary.LittleEndian.PutUint32(w.b[w.n:w.n+4], uint32(int32(v)))
	w.n += 4
}

// KernelName is the entry point EmitCUDA defines.
const KernelName = "weft_plan"

// EmitCUDA generates the device source of a plan for one data type and
// operator: one kernel whose thread blocks run their group's operations as
// straight-line calls into the channel device library (weft_channels.h),
// which it includes along with the backend's weft_hal.h; a plan with a
// switch buffer also includes weft_switch.h (the switch transfers, over the
// backend's multimem primitives in weft_switch_hal.h). The source depends
// on the plan's structure, not on addresses or sizes, so it is compiled
// once and cached. A plan that reads the multicast view is refused for the
// types and operators the switch cannot reduce (SwitchSupports).
func EmitCUDA(p *Plan, t DataType, op RedOp) (string, error) {
	if err := p.Validate(); err != nil {
		return "", err
	}
	if len(p.Channels) > MaxPeers {
		return "", fmt.Errorf("plan %s has %d channels, GPU plans support %d: %w", p.Name, len(p.Channels), MaxPeers, ErrInvalidPlan)
	}
	if !t.Valid() || !op.Valid() {
		return "", fmt.Errorf("plan %s: data type %v, op %v: %w", p.Name, t, op, ErrInvalidPlan)
	}
	if p.SwitchReduces() && !SwitchSupports(t, op) {
		return "", fmt.Errorf("plan %s: the switch cannot reduce %v with %v: %w", p.Name, t, op, ErrInvalidPlan)
	}
	if op == PreMulSum {
		if err := p.ServesPreMulSum(); err != nil {
			return "", err
		}
	}
	var b strings.Builder
	e := &emitter{b: &b, p: p, redop: op, postDiv: op == Avg && !t.Float()}
	e.f("// Generated by weft from plan %s (rank %d of %d) for %v %v. Do not edit.\n", p.Name, p.Rank, p.NRanks, t, op)
	e.f("#define WEFT_MAX_PEERS %d\n#define WEFT_MAX_GROUP_ARGS %d\n#include \"weft_hal.h\"\n#include \"weft_channels.h\"\n", MaxPeers, MaxGroupArgs)
	if p.HasSwitch() {
		e.f("#include \"weft_switch.h\"\n")
	}
	e.f("using namespace weft;\nstatic_assert(sizeof(weft_params) == %d, \"weft_params differs from hal/plan ParamsBytes (PackParams)\");\n\n", ParamsBytes)
	scale, div := CombineMode(t, op)
	cmb := 0
	switch {
	case scale:
		cmb = 1
	case div:
		cmb = 2
	}
	e.scale = scale || op == PreMulSum
	e.f("constexpr int DT = %d, OP = %d, ES = %d, PROTO = %d, CMB = %d, PART_ALIGN = %d;\n\n", t, op.Base(), t.Size(), p.Scratch, cmb, p.Scratch.PartAlignBytes())
	for gi := range p.Groups {
		g := &p.Groups[gi]
		e.f("// group %d: %d blocks\n", gi, g.Blocks)
		e.f("__device__ __forceinline__ void group%d(const weft_params& P, int part) {\n", gi)
		e.f("  Ctx c = begin(P, part, %d, %d);\n", g.Blocks, g.Arg)
		if e.scale {
			e.f("  if (P.scalar_ptr) c.scalar = ld_elem<ES>((const char*)P.scalar_ptr);\n")
		}
		e.g = g
		e.post(g)
		if g.Rolling {
			// The windows of earlier launches (Group.Rolling), read
			// before any thread's first wait advances the count.
			e.f("  const weft_u64 wbase = ((const weft_u64*)P.expected)[(weft_u64)P.peers[%d] * P.semaphores + %d + c.part];\n  __syncthreads();\n  c.rollbits = %d;\n", g.RollChan, g.RollSem, p.RollBits())
		}
		e.ops(g.Before)
		if g.Window > 0 {
			e.f("  const weft_u64 nwin = windows<ES>(c, %d, %d, %d, %d);\n", g.Window, g.NChunks, g.Pipeline, g.PipelineFrom)
			e.f("  const weft_u64 wlen = window_elems<ES>(c, %d, nwin);\n", g.NChunks)
			e.f("  for (weft_u64 w = 0; w < nwin; ++w) {\n")
			if g.Rolling {
				e.f("  c.tag = (c.count << %d) | ((wbase + w) & %d);\n", p.RollBits(), p.Depth()-1)
			}
			e.win = true
			e.ops(g.Ops)
			e.win = false
			e.f("  }\n")
		} else {
			e.ops(g.Ops)
		}
		e.ops(g.After)
		e.f("}\n\n")
	}
	e.f("extern \"C\" __global__ void __launch_bounds__(%d) %s(const __grid_constant__ weft_params P) {\n", p.Threads, KernelName)
	first := 0
	for gi, g := range p.Groups {
		kw := "} else if"
		if gi == 0 {
			kw = "if"
		}
		e.f("  %s (blockIdx.x < %d) {\n", kw, first+g.Blocks)
		if g.Arg > 0 {
			// A group left out of the launch leaves its blocks' launch
			// counters alone (Plan.StateBytes).
			e.f("    if (P.gcount[%d] == WEFT_SKIP_COUNT) return;\n", g.Arg-1)
		}
		e.f("    group%d(P, blockIdx.x - %d);\n", gi, first)
		first += g.Blocks
	}
	e.f("  }\n  finish(P);\n}\n")
	return b.String(), nil
}

type emitter struct {
	b     *strings.Builder
	p     *Plan
	g     *Group // the group being emitted
	win   bool   // emitting the body of a window loop
	scale bool   // some transfer scales by the scalar (Combine or PreMulSum's own input)
	redop RedOp  // the operator the kernel is emitted for
	// postDiv: the kernel is for the Avg of an integer type, so a PostDiv
	// transfer divides its sum by the number of ranks (CMB_DIV).
	postDiv bool
}

// ops emits a list of ops. Consecutive signals (or waits) of the same kind
// and window condition run in parallel, one thread per channel.
func (e *emitter) ops(ops []Op) {
	check := FirstWaits(ops)
	for oi := 0; oi < len(ops); {
		o := ops[oi]
		if oi > 0 && o.Kind == OpTransfer && ops[oi-1].Kind == OpTransfer {
			e.f("  __syncthreads();\n")
		}
		n := 1
		for oi+n < len(ops) && n < e.p.Threads && (o.Kind == OpSignal || o.Kind == OpWait) && ops[oi+n].Kind == o.Kind &&
			ops[oi+n].Relaxed == o.Relaxed && ops[oi+n].Ack == o.Ack && ops[oi+n].Deferred == o.Deferred && ops[oi+n].SkipFirst == o.SkipFirst && ops[oi+n].SkipLast == o.SkipLast &&
			e.port(ops[oi+n].Chan) == e.port(o.Chan) && ops[oi+n].Credits == o.Credits && (o.Credits == 0 || ops[oi+n].Sem == o.Sem) {
			n++
		}
		cond := ""
		if e.win && (o.SkipFirst > 0 || o.SkipLast > 0) {
			cond = fmt.Sprintf("if (w >= %d && w + %d < nwin) ", o.SkipFirst, o.SkipLast)
		}
		if o.Kind == OpSignal && o.Deferred {
			// The release of the block's previous run (Op.Deferred; on a
			// credit wait the flag only marks what it counts).
			cond = "if (c.launch >= 1) "
		}
		if cond != "" {
			e.f("  %s{\n", cond)
		}
		if o.Credits > 0 {
			e.credits(ops[oi : oi+n])
		} else if n > 1 {
			e.many(ops[oi:oi+n], check[oi:oi+n])
		} else {
			e.f("  // %s\n", e.p.OpString(o))
			e.op(o, check[oi])
		}
		if cond != "" {
			e.f("  }\n")
		}
		oi += n
	}
}

// checkC is the C condition under which a wait checks the peer's count: its
// first run in a launch.
func (e *emitter) checkC(first bool) string {
	switch {
	case !first:
		return "false"
	case e.win:
		return "w == 0"
	}
	return "true"
}

func (e *emitter) f(format string, a ...any) { fmt.Fprintf(e.b, format, a...) }

func boolC(v bool) string {
	if v {
		return "true"
	}
	return "false"
}

// ptr is the C expression of operand r at the part's first element (off).
func (e *emitter) ptr(r Ref, constant bool) string {
	cast := "(char*)"
	if constant {
		cast = "(const char*)"
	}
	switch r.Buf {
	case Input, Output:
		name := "input"
		if r.Buf == Output {
			name = "output"
		}
		at := "off"
		if r.Seg != 0 {
			at = fmt.Sprintf("(off + %d * c.count)", r.Seg)
		}
		if r.Remote() {
			return fmt.Sprintf("%sP.peer_%s[%d] + %s * ES", cast, name, r.Chan, at)
		}
		return fmt.Sprintf("%sc.%s + %s * ES", cast, name, at)
	case Posted:
		return fmt.Sprintf("%sposted + off * ES", cast)
	case Switch:
		base := "P.switch_local"
		if r.IsMulticast() {
			base = "P.switch_mc"
		}
		if e.win {
			return fmt.Sprintf("%swswitch_at<ES>(c, %s, %d, w, off - wstart)", cast, base, r.Slot)
		}
		return fmt.Sprintf("%sswitch_at<ES>(c, %s, %d, off)", cast, base, r.Slot)
	}
	base := e.scratchBase(r)
	if e.win {
		w := "w"
		if e.g.Rolling {
			w = "wbase + w"
		}
		es := "ES"
		if d := e.p.Depth(); d != 2 {
			es = fmt.Sprintf("ES, %d", d)
		}
		return fmt.Sprintf("%swslot_at<%s>(c, %s, %d, %s, off - wstart%s)", cast, es, base, e.slotIn(r), w, e.partArg(r))
	}
	elem := "off"
	if e.p.SlotChunks > 0 {
		elem = "(off - coff)"
	}
	return fmt.Sprintf("%sslot_at<PROTO, ES%s>(c, %s, %d, %s%s)", cast, e.llDepth(), base, e.slotIn(r), elem, e.partArg(r))
}

// slotIn is scratch operand r's slot within its region (Plan.regionSlot),
// and partArg the slot templates' part argument for it: ", n" for a split
// plan's network slots (n of them per part), else "".
func (e *emitter) slotIn(r Ref) int {
	i, _ := e.p.regionSlot(r.Slot)
	return int(i)
}

func (e *emitter) partArg(r Ref) string {
	if !e.p.NetScratchSlot(r.Slot) {
		return ""
	}
	_, n := e.p.regionSlot(r.Slot)
	return fmt.Sprintf(", %d", n)
}

// llDepth is ", D" for the slot templates of an LL plan whose scratch has
// D ≠ 2 parts (Plan.WindowDepth), else "".
func (e *emitter) llDepth() string {
	if d := e.p.Depth(); d != 2 && e.p.Scratch != Simple {
		return fmt.Sprintf(", %d", d)
	}
	return ""
}

// scratchBase is the region of scratch operand r: the peer's scratch of
// its channel, or this rank's device or network windows (Plan.NetSlot).
func (e *emitter) scratchBase(r Ref) string {
	switch {
	case r.Remote():
		return fmt.Sprintf("P.peer_scratch[%d]", r.Chan)
	case e.p.NetScratchSlot(r.Slot):
		return "P.net_scratch"
	}
	return "P.scratch"
}

func (e *emitter) slotBase(r Ref, constant bool) string {
	base := e.scratchBase(r)
	cast := "(char*)"
	if constant {
		cast = "(const char*)"
	}
	return fmt.Sprintf("%sslot_base<PROTO%s>(c, %s, %d%s)", cast, e.llDepth(), base, e.slotIn(r), e.partArg(r))
}

func list(xs []string) string {
	if len(xs) == 0 {
		return "nullptr"
	}
	return strings.Join(xs, ", ")
}

func (e *emitter) many(ops []Op, check []bool) {
	var chs, sems, names, checks []string
	for i, o := range ops {
		checks = append(checks, e.checkC(check[i]))
		chs = append(chs, fmt.Sprint(o.Chan))
		sems = append(sems, fmt.Sprintf("%d + c.part", o.Sem))
		names = append(names, e.p.OpString(o))
	}
	e.f("  // %s\n", strings.Join(names, ", "))
	e.f("  {\n    const int chs[%d] = {%s};\n    const int sems[%d] = {%s};\n", len(ops), list(chs), len(ops), list(sems))
	if ops[0].Kind == OpSignal && e.port(ops[0].Chan) {
		e.f("    if (!port_signal_all<%d>(c, chs, sems, %s)) return;\n  }\n", len(ops), boolC(ops[0].Ack))
	} else if ops[0].Kind == OpSignal {
		e.f("    signal_all<%d>(c, chs, sems, %s);\n  }\n", len(ops), boolC(ops[0].Relaxed))
	} else {
		e.f("    const bool check[%d] = {%s};\n", len(ops), list(checks))
		e.f("    if (!wait_all<%d>(c, chs, sems, check, %s)) return;\n  }\n", len(ops), boolC(ops[0].Relaxed))
	}
}

// credits emits consecutive credit waits (Op.Credits; same semaphore base
// and credits): one wait_credits over their channels, each thread polling
// one (channel, peer block) pair.
func (e *emitter) credits(ops []Op) {
	var chs, names []string
	for _, o := range ops {
		chs = append(chs, fmt.Sprint(o.Chan))
		names = append(names, e.p.OpString(o))
	}
	e.f("  // %s\n", strings.Join(names, ", "))
	e.f("  {\n    const int chs[%d] = {%s};\n", len(ops), list(chs))
	e.f("    if (!wait_credits<%d>(c, chs, %d, %d)) return;\n  }\n", len(ops), ops[0].Sem, ops[0].Credits)
}

// cmb is the combine mode of transfer o: CMB for a Combine transfer,
// CMB_DIV for a PostDiv transfer of an integer Avg kernel (its sum divided
// by the number of ranks), 0 otherwise.
func (e *emitter) cmb(o Op) string {
	switch {
	case o.Combine:
		return "CMB"
	case o.PostDiv && e.postDiv:
		return "CMB_DIV"
	}
	return "0"
}

// scl is the SCL template argument of a transfer whose plain sources are
// srcs (in order): ", mask" with bit i set where source i is scaled by the
// scalar (ScalesSource), or "" when none is (the template's default 0, so
// kernels of other operators are unchanged).
func (e *emitter) scl(srcs []Ref) string {
	mask := 0
	for i, r := range srcs {
		if ScalesSource(e.redop, r) {
			mask |= 1 << i
		}
	}
	if mask == 0 {
		return ""
	}
	return fmt.Sprintf(", %#x", mask)
}

// port reports whether channel ch is a port channel.
func (e *emitter) port(ch int) bool {
	return ch >= 0 && ch < len(e.p.Channels) && e.p.Channels[ch].Port
}

// rangeC opens a block that computes the part's element range (off, len)
// of transfer o.
func (e *emitter) rangeC(o Op) {
	if e.win {
		e.f("  {\n    weft_u64 wstart, off, len;\n    range_w<ES>(c, %d, %d, w, wlen, wstart, off, len);\n", o.Chunk, o.NChunks)
	} else if e.g.Span > 0 {
		e.f("  {\n    weft_u64 off, len;\n    range_span<ES>(c, %dull, off, len);\n", e.g.Span)
	} else if e.p.SlotChunks > 0 {
		// Scratch operands count from the chunk's start (coff).
		e.f("  {\n    weft_u64 off, len, coff;\n    range<ES, PART_ALIGN>(c, %d, %d, off, len, coff);\n", o.Chunk, max(o.NChunks, 1))
	} else {
		e.f("  {\n    weft_u64 off, len;\n    range<ES, PART_ALIGN>(c, %d, %d, off, len);\n", o.Chunk, max(o.NChunks, 1))
	}
}

func (e *emitter) op(o Op, check bool) {
	switch {
	case o.Kind == OpSignal && e.port(o.Chan):
		e.f("  if (!port_signal(c, %d, %d + c.part, %s)) return;\n", o.Chan, o.Sem, boolC(o.Ack))
		return
	case o.Kind == OpFlush && e.port(o.Chan):
		e.f("  if (!port_flush(c, %d)) return;\n", o.Chan)
		return
	case o.Kind == OpTransfer && o.Port && e.p.Scratch != Simple:
		// An LL put (port.go): the block packs its part into the staging
		// slot (part 0 the header too), then puts the packet bytes.
		st, d := LS(o.Stage-1), o.Dsts[0]
		e.rangeC(o)
		e.f("    if (c.part == 0) put_header<PROTO>(c, %s, 0);\n", e.slotBase(st, false))
		e.f("    const char* const s[1] = {%s};\n    const char* const ks[1] = {nullptr};\n    const int kch[1] = {-1};\n", e.ptr(o.Srcs[0], true))
		e.f("    char* const d[1] = {nullptr};\n    char* const kd[1] = {%s};\n", e.ptr(st, false))
		e.f("    xfer_ll<DT, OP, PROTO, 1, 0, 0, 1, 0%s>(c, s, ks, kch, d, kd, len);\n", e.scl(o.Srcs))
		e.f("    if (!port_put_packets<PROTO, ES>(c, %d, %s, %s, %s, %s, len)) return;\n  }\n", o.Chan,
			e.slotBase(st, true), e.ptr(st, true), e.slotBase(d, false), e.ptr(d, false))
		return
	case o.Kind == OpTransfer && o.Port:
		kind := "TRIG_COPY"
		if o.Dsts[0].Remote() {
			kind = "TRIG_PUT"
		}
		e.rangeC(o)
		src := e.ptr(o.Srcs[0], true)
		if e.p.Staged(o, e.redop) {
			// The engine cannot scale (or should read host memory): the
			// threads store the (scaled) window into the staging slot,
			// the engine moves that.
			e.f("    char* const st[1] = {%s};\n", e.ptr(LS(o.Stage-1), false))
			e.f("    const char* const s[1] = {%s};\n", src)
			e.f("    xfer_plain<DT, OP, 1, 1, %d, 0%s>(c, s, st, len);\n", e.unroll(), e.scl(o.Srcs))
			src = "(const char*)st[0]"
		}
		e.f("    if (!port_xfer<ES>(c, %d, %s, %s, %s, len)) return;\n  }\n", o.Chan, kind, src, e.ptr(o.Dsts[0], false))
		return
	}
	switch o.Kind {
	case OpSignal:
		e.f("  signal(c, %d, %d + c.part, %s);\n", o.Chan, o.Sem, boolC(o.Relaxed))
		return
	case OpWait:
		e.f("  if (!wait(c, %d, %d + c.part, %s, %s)) return;\n", o.Chan, o.Sem, boolC(o.Relaxed), e.checkC(check))
		return
	case OpFlush:
		// Stores are complete at the source once issued; the barrier makes
		// every thread's earlier loads of the source happen before any
		// thread's later writes to it (put; flush; reuse the source).
		e.f("  __syncthreads();  // flush(ch%d)\n", o.Chan)
		return
	}
	if touchesSwitch(o) {
		// Accesses of the same memory through the multicast view and
		// through this rank's copy are ordered by proxy fences on both
		// sides of every transfer that touches the switch buffer.
		e.f("  switch_fence();\n")
		defer e.f("  switch_fence();\n")
	}
	if o.Srcs[0].IsMulticast() || hasMulticast(o.Dsts) {
		e.switchXfer(o)
		return
	}
	packets := e.p.Scratch != Simple
	var ps, ks, kch, pd, kd []string
	var plain []Ref // the plain sources, in the order of ps
	for _, r := range o.Srcs {
		if !(packets && r.Buf == Scratch) {
			plain = append(plain, r)
		}
		if packets && r.Buf == Scratch {
			ks = append(ks, e.ptr(r, true))
			kch = append(kch, fmt.Sprint(e.p.SlotChannel(r.Slot)))
		} else {
			ps = append(ps, e.ptr(r, true))
		}
	}
	for _, r := range o.Dsts {
		if packets && r.Buf == Scratch {
			kd = append(kd, e.ptr(r, false))
		} else {
			pd = append(pd, e.ptr(r, false))
		}
	}
	e.rangeC(o)
	if len(ks) == 0 && len(kd) == 0 {
		unroll := e.p.Unroll
		if unroll == 0 {
			unroll = 4
		}
		e.f("    const char* const s[%d] = {%s};\n", len(ps), list(ps))
		e.f("    char* const d[%d] = {%s};\n", len(pd), list(pd))
		e.f("    xfer_plain<DT, OP, %d, %d, %d, %s%s>(c, s, d, len);\n  }\n", len(ps), len(pd), unroll, e.cmb(o), e.scl(plain))
		return
	}
	e.f("    bool ok = true;\n    if (c.part == 0) {\n")
	hi := 0
	for _, r := range o.Dsts {
		if r.Buf == Scratch {
			e.f("      put_header<PROTO>(c, %s, %d);\n", e.slotBase(r, false), hi)
			hi++
		}
	}
	hi = 0
	for _, r := range o.Srcs {
		if r.Buf == Scratch {
			e.f("      ok = check_header<PROTO>(c, %s, %d, %d) && ok;\n", e.slotBase(r, true), e.p.SlotChannel(r.Slot), hi)
			hi++
		}
	}
	e.f("    }\n")
	n1 := func(n int) int { return max(n, 1) }
	e.f("    const char* const s[%d] = {%s};\n", n1(len(ps)), list(ps))
	e.f("    const char* const ks[%d] = {%s};\n", n1(len(ks)), list(ks))
	e.f("    const int kch[%d] = {%s};\n", n1(len(kch)), strings.ReplaceAll(list(kch), "nullptr", "-1"))
	e.f("    char* const d[%d] = {%s};\n", n1(len(pd)), list(pd))
	e.f("    char* const kd[%d] = {%s};\n", n1(len(kd)), list(kd))
	call := fmt.Sprintf("xfer_ll<DT, OP, PROTO, %d, %d, %d, %d, %s%s>(c, s, ks, kch, d, kd, len)", len(ps), len(ks), len(pd), len(kd), e.cmb(o), e.scl(plain))
	if e.p.Scratch == LL128 {
		// Every lane of a warp runs the LL128 lines in step (its votes
		// take the whole warp), a header thread whose check failed too.
		e.f("    ok = %s && ok;\n", call)
	} else {
		e.f("    if (ok) ok = %s;\n", call)
	}
	e.f("    if (!block_ok(ok)) return;\n  }\n")
}

// post emits group g's posted-buffer exchange (Group.Post, posted.go),
// which runs when the launch's GroupArgs.Post is not 0: the receive side
// posts and ends the group when the sender stored the data directly; the
// send side takes the post and, when it names a mapped buffer, runs the
// direct ops and answers instead of the windowed ops.
func (e *emitter) post(g *Group) {
	q := g.Post
	if q == nil {
		return
	}
	a := g.Arg - 1
	e.f("  // posted-buffer exchange on ch%d (%s side)\n", q.Chan, map[bool]string{true: "send", false: "receive"}[q.Send])
	if !q.Send {
		e.f("  if (P.gpost[%d] != 0 && post_recv(c, %d, %d, P.gpost[%d]) != 0) return;\n", a, q.Chan, q.Sem, a)
		return
	}
	e.f("  if (P.gpost[%d] != 0) {\n    weft_u64 posted = 0;\n    if (!post_take<ES>(c, %d, %d, posted)) return;\n    if (posted != 0) {\n", a, q.Chan, q.Sem)
	e.ops(q.Direct)
	e.f("      post_done(c, %d, %d);\n      return;\n    }\n  }\n", q.Chan, q.Sem)
}

// unroll is the plan's unroll of plain transfers (4 when unset).
func (e *emitter) unroll() int {
	if e.p.Unroll == 0 {
		return 4
	}
	return e.p.Unroll
}

func hasMulticast(refs []Ref) bool {
	for _, r := range refs {
		if r.IsMulticast() {
			return true
		}
	}
	return false
}

// switchXfer emits a transfer through the multicast view (weft_switch.h
// xfer_switch): a multicast source (load-reduce) or plain sources, plain
// destinations and at most one multicast destination (store).
func (e *emitter) switchXfer(o Op) {
	mcSrc, mcDst := "nullptr", "nullptr"
	var ps, pd []string
	if o.Srcs[0].IsMulticast() {
		mcSrc = e.ptr(o.Srcs[0], true)
	} else {
		for _, r := range o.Srcs {
			ps = append(ps, e.ptr(r, true))
		}
	}
	for _, r := range o.Dsts {
		if r.IsMulticast() {
			mcDst = e.ptr(r, false)
		} else {
			pd = append(pd, e.ptr(r, false))
		}
	}
	unroll := e.p.Unroll
	if unroll == 0 {
		unroll = 4
	}
	n1 := func(n int) int { return max(n, 1) }
	e.rangeC(o)
	e.f("    const char* const s[%d] = {%s};\n", n1(len(ps)), list(ps))
	e.f("    char* const d[%d] = {%s};\n", n1(len(pd)), list(pd))
	e.f("    xfer_switch<DT, OP, %d, %d, %d, %s, %s, %s>(c, %s, s, d, %s, len);\n  }\n",
		len(ps), len(pd), unroll, e.cmb(o), boolC(mcSrc != "nullptr"), boolC(mcDst != "nullptr"), mcSrc, mcDst)
}
