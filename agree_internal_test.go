package weft

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/weftccl/weft/algorithms"
	"github.com/weftccl/weft/hal"
)

// peerBoot is a two-rank Bootstrap whose AllGather answers rank 1's part
// with what the test gives it, as a hostile or mistaken peer would.
type peerBoot struct {
	peer func(mine []byte) []byte
	fail chan struct{}
}

func (b *peerBoot) Rank() int               { return 0 }
func (b *peerBoot) Size() int               { return 2 }
func (b *peerBoot) Err() error              { return nil }
func (b *peerBoot) Failed() <-chan struct{} { return b.fail }
func (b *peerBoot) AllGather(_ context.Context, data []byte) ([][]byte, error) {
	return [][]byte{data, b.peer(data)}, nil
}

// TestAgreeOnPlansPeer: a peer's plan choice that does not parse, that
// carries another number of plan bounds than boundVars, or that differs in
// one bound is refused, the first two as the peer's fault (hal.ErrRemote),
// the last as a usage error naming the variable and both values; the same
// choice passes.
func TestAgreeOnPlansPeer(t *testing.T) {
	cfg := algorithms.DefaultConfig(0, 2, 132, true)
	edit := func(f func(m map[string]any)) func([]byte) []byte {
		return func(mine []byte) []byte {
			var m map[string]any
			if err := json.Unmarshal(mine, &m); err != nil {
				t.Fatal(err)
			}
			f(m)
			out, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	for _, tc := range []struct {
		name string
		peer func([]byte) []byte
		want error
		text []string
	}{
		{"same", func(mine []byte) []byte { return mine }, nil, nil},
		{"garbage", func([]byte) []byte { return []byte("\x00{not json") }, hal.ErrRemote, []string{"rank 1", "malformed"}},
		{"short bounds", edit(func(m map[string]any) { m["Bounds"] = []int64{1} }), hal.ErrRemote, []string{"rank 1", "1 plan bounds"}},
		{"no bounds", edit(func(m map[string]any) { delete(m, "Bounds") }), hal.ErrRemote, []string{"rank 1", "0 plan bounds"}},
		{"another bound", edit(func(m map[string]any) {
			b := m["Bounds"].([]any)
			b[1] = 12345
		}), hal.ErrInvalidUsage, []string{boundVars[1].name, "rank 1 12345 bytes"}},
	} {
		err := agreeOnPlans(context.Background(), &peerBoot{peer: tc.peer}, cfg, "test")
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s: %v, want agreement", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
			continue
		}
		for _, s := range tc.text {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %v, want it to name %q", tc.name, err, s)
			}
		}
	}
}
