package algorithms

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/hal/plan"
)

// TestP2PLLPlan: for 1 to 8 ranks, every rank's LL point-to-point plan
// validates, has a send and a receive group per peer in P2PPlan's argument
// slots and a self-copy group, takes its credit at the start of each send
// (an Ack wait 2 launches behind) and releases the half after each
// receive, splits its send and receive groups over the span of
// P2PLLMaxBytes (so a block's packets are the same whatever the count,
// and a per-block credit covers them), and sizes its scratch for
// P2PLLMaxBytes of LL16 packets.
func TestP2PLLPlan(t *testing.T) {
	for n := 1; n <= 8; n++ {
		for r := 0; r < n; r++ {
			c := DefaultConfig(r, n, 132, true)
			p, err := P2PLLPlan(c)
			if err != nil {
				t.Fatalf("%d ranks, rank %d: %v", n, r, err)
			}
			if got, want := len(p.Groups), 2*(n-1)+1; got != want {
				t.Fatalf("%s: %d groups, want %d", p.Name, got, want)
			}
			type shape struct {
				Arg, Blocks int
				Span        int64
				Ops         string
			}
			var got, want []shape
			for _, g := range p.Groups {
				var ops []string
				for _, o := range g.Before {
					ops = append(ops, "before: "+p.OpString(o))
				}
				for _, o := range g.Ops {
					ops = append(ops, p.OpString(o))
				}
				got = append(got, shape{g.Arg, g.Blocks, g.Span, strings.Join(ops, "; ")})
			}
			b := c.P2PLL.Blocks
			for ci, ch := range c.channels() {
				want = append(want,
					shape{SendArg(r, ch.Peer), b, c.P2PLLMaxBytes, fmt.Sprintf("wait(ch%d, sem 0, 2 credits); putPackets[all] ch%d.scratch[%d] <- local.in", ci, ci, slotOf(r, ch.Peer))},
					shape{RecvArg(r, ch.Peer), b, c.P2PLLMaxBytes, fmt.Sprintf("before: signal(ch%d, sem 0, of the previous run); unpackPackets[all] local.out <- local.scratch[%d]", ci, ci)})
			}
			want = append(want, shape{SelfArg(n), b, 0, "copy[all] local.out <- local.in"})
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("%s, rank %d of %d: groups differ (-want +got):\n%s", p.Name, r, n, d)
			}
			if n > 1 {
				if p.Scratch != plan.LL16 || p.ScratchSlots != n-1 || p.MaxBytes != c.P2PLLMaxBytes {
					t.Errorf("%s: scratch %v × %d slots, up to %d bytes; want LL16 × %d, %d", p.Name, p.Scratch, p.ScratchSlots, p.MaxBytes, n-1, c.P2PLLMaxBytes)
				}
				// Two halves of (n−1) slots, each a header and one 16-byte
				// packet per 8 bytes.
				if got, want := p.ScratchBytes(c.P2PLLMaxBytes, 1), 2*int64(n-1)*(16+c.P2PLLMaxBytes*2); got != want {
					t.Errorf("%s: scratch %d bytes for %d-byte operations, want %d", p.Name, got, c.P2PLLMaxBytes, want)
				}
			}
		}
	}
	c := DefaultConfig(0, 2, 132, true)
	c.P2PLL.Blocks = 0
	if _, err := P2PLLPlan(c); err == nil {
		t.Error("P2PLLPlan with 0 blocks: no error")
	}
}

// TestP2PPlans: selection by operation size (LL up to P2PLLMaxBytes, the
// wide LL plan up to P2PLLWideMaxBytes, the mid-size windowed plan up to
// P2PMidMaxBytes, the windowed plan beyond), WEFT_ALGO=hb and
// P2PLLMaxBytes 0 leave the LL plans out, and the GPU block counts follow
// the SMs and the rank count.
func TestP2PPlans(t *testing.T) {
	c := DefaultConfig(0, 2, 132, true)
	choices, err := Plans(c, SendRecv, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ch := range choices {
		names = append(names, fmt.Sprintf("%s ≤ %d", ch.Plan.Name, ch.MaxBytes))
	}
	if d := cmp.Diff([]string{"sendrecv-LL16-1x1024-to8K ≤ 8192", "sendrecv-LL16-16x1024 ≤ 131072", "sendrecv-LL16-16x1024-to512K ≤ 524288",
		"sendrecv-hb-32x512-w2097152-d8-p1-to16M ≤ 16777216", "sendrecv-hb-44x1024-w16777216 ≤ 0"}, names); d != "" {
		t.Errorf("2 ranks on 132 SMs: plans differ (-want +got):\n%s", d)
	}
	if small := choices[0].Plan; small.Groups[0].Blocks != 1 || small.Groups[0].Span != 8<<10 {
		t.Errorf("one-block plan: %d blocks spanning %d bytes per group, want 1 spanning 8192", small.Groups[0].Blocks, small.Groups[0].Span)
	}
	for _, tc := range []struct {
		bytes int64
		want  int
	}{{0, 0}, {8, 0}, {8 << 10, 0}, {8<<10 + 1, 1}, {128 << 10, 1}, {128<<10 + 1, 2}, {512 << 10, 2}, {512<<10 + 1, 3}, {16 << 20, 3}, {16<<20 + 1, 4}, {1 << 30, 4}} {
		if got := Select(choices, tc.bytes); got != tc.want {
			t.Errorf("Select(%d bytes) = %d, want %d", tc.bytes, got, tc.want)
		}
	}
	for _, edit := range []func(*Config){func(c *Config) { c.Algo = "hb" }, func(c *Config) { c.P2PLLMaxBytes = 0 }} {
		c := DefaultConfig(0, 2, 132, true)
		edit(&c)
		choices, err := Plans(c, SendRecv, 0)
		if err != nil || len(choices) != 2 || choices[0].Plan.Scratch != plan.Simple || choices[0].MaxBytes != 16<<20 || choices[1].Plan.Scratch != plan.Simple {
			t.Errorf("without LL: %v, %v; want the two windowed plans only", choices, err)
		}
	}
	for _, tc := range []struct{ n, sms, hb, ll int }{{2, 132, 44, 16}, {2, 200, 64, 16}, {4, 132, 18, 16}, {8, 132, 8, 8}, {8, 10, 1, 1}} {
		c := DefaultConfig(0, tc.n, tc.sms, true)
		if c.P2P.Blocks != tc.hb || c.P2PLL.Blocks != tc.ll {
			t.Errorf("%d ranks, %d SMs: %d windowed and %d LL blocks per group, want %d and %d", tc.n, tc.sms, c.P2P.Blocks, c.P2PLL.Blocks, tc.hb, tc.ll)
		}
		// Every group of both plans resident at once: 2n−1 groups.
		if total := (2*tc.n - 1) * c.P2P.Blocks; total > max(tc.sms, 2*tc.n-1) {
			t.Errorf("%d ranks, %d SMs: %d windowed blocks in all", tc.n, tc.sms, total)
		}
		if mid := c.P2PMid.Blocks; mid > c.P2P.Blocks || (tc.n == 2) != (c.P2PMidMaxBytes > 0 && mid > 0) {
			t.Errorf("%d ranks, %d SMs: mid-size plan of %d blocks up to %d bytes (windowed plan: %d blocks); want one on 2 ranks only, of no more blocks", tc.n, tc.sms, mid, c.P2PMidMaxBytes, c.P2P.Blocks)
		}
	}
}

// TestP2PLLKernel: the generated kernel takes the credit 2 launches behind
// (from every receiver block), splits the span among the blocks, and a
// group left out of a launch returns before finish(), so its launch
// counters stay (plan.Plan.StateBytes).
func TestP2PLLKernel(t *testing.T) {
	p, err := P2PLLPlan(DefaultConfig(0, 3, 132, true))
	if err != nil {
		t.Fatal(err)
	}
	src, err := plan.EmitCUDA(p, plan.Uint8, plan.Sum)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"if (!wait_credits<1>(c, chs, 0, 2)) return;",
		"if (P.gcount[0] == WEFT_SKIP_COUNT) return;\n    group0(P, blockIdx.x - 0);",
		"if (P.gcount[4] == WEFT_SKIP_COUNT) return;\n    group4(P, blockIdx.x - 64);",
		"range_span<ES>(c, 131072ull, off, len);",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("generated kernel lacks %q", want)
		}
	}
}
