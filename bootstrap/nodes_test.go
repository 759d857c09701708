package bootstrap

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/hal"
)

// RunNodes gives rank r WEFT_NODE_ID = r×nodes/nproc, replacing an
// inherited value.
func TestNodeEnv(t *testing.T) {
	var got []string
	for r := 0; r < 6; r++ {
		env := nodeEnv([]string{"A=1", "WEFT_NODE_ID=x"}, r, 6, 2)
		if diff := cmp.Diff("A=1", env[0]); diff != "" || len(env) != 2 {
			t.Fatalf("rank %d: environment %v", r, env)
		}
		got = append(got, env[1])
	}
	want := []string{"WEFT_NODE_ID=0", "WEFT_NODE_ID=0", "WEFT_NODE_ID=0", "WEFT_NODE_ID=1", "WEFT_NODE_ID=1", "WEFT_NODE_ID=1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node ids (-want +got):\n%s", diff)
	}
	if env := nodeEnv([]string{"WEFT_NODE_ID=x"}, 0, 2, 0); !cmp.Equal(env, []string{"WEFT_NODE_ID=x"}) {
		t.Errorf("without nodes the environment changed: %v", env)
	}
	for _, nodes := range []int{0, 3} {
		if err := RunNodes(context.Background(), 2, nodes, []string{"true"}, nil, nil, nil); !errors.Is(err, hal.ErrInvalidArgument) {
			t.Errorf("RunNodes with %d nodes for 2 processes: %v, want ErrInvalidArgument", nodes, err)
		}
	}
}
