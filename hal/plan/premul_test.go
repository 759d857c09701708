package plan_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/weftccl/weft/hal/plan"
)

// premulPlan is a 2-rank plan: an LL put of the input, a reduce of the
// input with the received packets, and (zeroCopy) a read of the peer's
// input instead of the packets.
func premulPlan(zeroCopy bool) *plan.Plan {
	p := &plan.Plan{Name: "premul", Rank: 0, NRanks: 2, Channels: []plan.Channel{{Peer: 1}}, Threads: 64,
		Scratch: plan.LL16, ScratchSlots: 1}
	put := plan.Transfer(plan.All, 0, []plan.Ref{plan.RS(0, 0)}, plan.L(plan.Input))
	red := plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, plan.LS(0), plan.L(plan.Input))
	if zeroCopy {
		p.Scratch, p.ScratchSlots = plan.Simple, 0
		red = plan.Transfer(plan.All, 0, []plan.Ref{plan.L(plan.Output)}, plan.R(0, plan.Input), plan.L(plan.Input))
		p.Groups = []plan.Group{{Blocks: 1, Ops: []plan.Op{red}}}
		return p
	}
	p.Groups = []plan.Group{{Blocks: 1, Ops: []plan.Op{put, red}}}
	return p
}

// PreMulSum scales this rank's input where it is read: the generated
// kernel carries a compile-time mask with the bit of every local input
// source, and kernels of other operators carry none.
func TestEmitPreMulSumScalesOwnInput(t *testing.T) {
	p := premulPlan(false)
	src, err := plan.EmitCUDA(p, plan.Float16, plan.PreMulSum)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"xfer_ll<DT, OP, PROTO, 1, 0, 0, 1, 0, 0x1>", // the put: source 0 is the input
		"xfer_ll<DT, OP, PROTO, 1, 1, 1, 0, 0, 0x1>", // the reduce: the plain source is the input, the packets are not scaled
		"CMB = 0",
		"if (P.scalar_ptr) c.scalar",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("PreMulSum kernel lacks %q:\n%s", want, src)
		}
	}
	for _, op := range []plan.RedOp{plan.Sum, plan.Avg, plan.Max} {
		src, err := plan.EmitCUDA(p, plan.Float16, op)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(src, ", 0x1>") {
			t.Errorf("%v kernel scales its input:\n%s", op, src)
		}
	}
}

// A plan that reads a peer's input cannot serve per-rank scalars: it says
// so, and EmitCUDA refuses it for PreMulSum only.
func TestServesPreMulSum(t *testing.T) {
	if err := premulPlan(false).ServesPreMulSum(); err != nil {
		t.Errorf("LL plan: %v", err)
	}
	zc := premulPlan(true)
	err := zc.ServesPreMulSum()
	if !errors.Is(err, plan.ErrInvalidPlan) || !strings.Contains(err.Error(), "peer's input") {
		t.Errorf("zero-copy plan: ServesPreMulSum = %v, want an error naming the peer's input", err)
	}
	if _, err := plan.EmitCUDA(zc, plan.Float32, plan.PreMulSum); !errors.Is(err, plan.ErrInvalidPlan) {
		t.Errorf("EmitCUDA(zero-copy, PreMulSum) = %v, want ErrInvalidPlan", err)
	}
	if _, err := plan.EmitCUDA(zc, plan.Float32, plan.Sum); err != nil {
		t.Errorf("EmitCUDA(zero-copy, Sum) = %v", err)
	}
}

// portPremulPlan puts the input through port channel 0's engine in a
// windowed group, with staging slot stage (0: none).
func portPremulPlan(stage int) *plan.Plan {
	p := &plan.Plan{Name: "premul-port", Rank: 0, NRanks: 2, Channels: []plan.Channel{{Peer: 1, Port: true}}, Threads: 64,
		Scratch: plan.Simple, ScratchSlots: 2, Semaphores: 1}
	put := plan.PortPut(0, 0, 1, plan.RS(0, 0), plan.L(plan.Input))
	put.Stage = stage
	p.Groups = []plan.Group{{Blocks: 1, Window: 4096, NChunks: 1, Ops: []plan.Op{put, plan.Signal(0, 0)}}}
	return p
}

// An engine cannot scale: a port put of the input serves PreMulSum only
// with a staging slot, into which the kernel stores the scaled window.
func TestPreMulSumPortStaging(t *testing.T) {
	if err := portPremulPlan(0).ServesPreMulSum(); err == nil {
		t.Error("a port put of the input without a staging slot serves PreMulSum")
	}
	p := portPremulPlan(2)
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := p.ServesPreMulSum(); err != nil {
		t.Fatal(err)
	}
	src, err := plan.EmitCUDA(p, plan.BFloat16, plan.PreMulSum)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"wslot_at<ES>(c, P.scratch, 1, w, off - wstart)", "xfer_plain<DT, OP, 1, 1, 4, 0, 0x1>(c, s, st, len)", "(const char*)st[0]"} {
		if !strings.Contains(src, want) {
			t.Errorf("staged port put lacks %q:\n%s", want, src)
		}
	}
	if sum, _ := plan.EmitCUDA(p, plan.BFloat16, plan.Sum); strings.Contains(sum, "st[0]") {
		t.Errorf("Sum kernel stages the input:\n%s", sum)
	}
	for _, bad := range []int{3, -1} {
		if err := portPremulPlan(bad).Validate(); err == nil {
			t.Errorf("Stage %d validates (2 slots)", bad)
		}
	}
}

// Combine no longer scales for PreMulSum; floating Avg still does.
func TestCombineModePreMulSum(t *testing.T) {
	if scale, div := plan.CombineMode(plan.Float32, plan.PreMulSum); scale || div {
		t.Errorf("CombineMode(float, PreMulSum) = %v, %v; want false, false", scale, div)
	}
	if scale, _ := plan.CombineMode(plan.Float32, plan.Avg); !scale {
		t.Error("CombineMode(float, Avg) does not scale")
	}
	if !plan.ScalesSource(plan.PreMulSum, plan.L(plan.Input).At(2)) || plan.ScalesSource(plan.PreMulSum, plan.R(0, plan.Input)) ||
		plan.ScalesSource(plan.Sum, plan.L(plan.Input)) || plan.ScalesSource(plan.PreMulSum, plan.L(plan.Output)) {
		t.Error("ScalesSource: want exactly this rank's input, with PreMulSum")
	}
}

// A PostDiv transfer (the final step of a staged reduction) divides the
// sum by the number of ranks in kernels of the Avg of integer types only;
// a PostDiv that is also Combine is refused.
func TestEmitPostDiv(t *testing.T) {
	p := premulPlan(false)
	p.PostDiv = true
	p.Groups[0].Ops[1].PostDiv = true
	for _, k := range []struct {
		t    plan.DataType
		op   plan.RedOp
		want bool
	}{{plan.Int32, plan.Avg, true}, {plan.Uint8, plan.Avg, true}, {plan.Float32, plan.Avg, false}, {plan.Int32, plan.Sum, false}, {plan.Int64, plan.Max, false}} {
		src, err := plan.EmitCUDA(p, k.t, k.op)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(src, "CMB_DIV>"); got != map[bool]int{true: 1, false: 0}[k.want] {
			t.Errorf("%v %v: %d transfers divide, want the final one only (%v):\n%s", k.t, k.op, got, k.want, src)
		}
	}
	p.Groups[0].Ops[1].Combine = true
	if err := p.Validate(); !errors.Is(err, plan.ErrInvalidPlan) {
		t.Errorf("PostDiv with Combine: %v, want ErrInvalidPlan", err)
	}
}
