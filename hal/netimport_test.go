package hal_test

import (
	"errors"
	"testing"

	"github.com/weftccl/weft/hal"
)

func TestCheckImport(t *testing.T) {
	me := hal.HandleOwner{Job: 0xfeed, Rank: 1, Nonce: 7}
	for _, c := range []struct {
		name string
		h    hal.HandleOwner
		want error // nil: accepted
	}{
		{"peer of the job", hal.HandleOwner{Job: 0xfeed, Rank: 2, Nonce: 99}, nil},
		{"own registration", me, nil},
		{"rank 0", hal.HandleOwner{Job: 0xfeed, Rank: 0, Nonce: 7}, nil},
		{"another job", hal.HandleOwner{Job: 0xbeef, Rank: 2, Nonce: 99}, hal.ErrInvalidUsage},
		{"another job, own rank", hal.HandleOwner{Job: 0xbeef, Rank: 1, Nonce: 7}, hal.ErrInvalidUsage},
		{"negative rank", hal.HandleOwner{Job: 0xfeed, Rank: -1, Nonce: 99}, hal.ErrInvalidArgument},
		{"rank past the job", hal.HandleOwner{Job: 0xfeed, Rank: 4, Nonce: 99}, hal.ErrInvalidArgument},
		{"own rank, earlier incarnation", hal.HandleOwner{Job: 0xfeed, Rank: 1, Nonce: 6}, hal.ErrInvalidUsage},
	} {
		err := hal.CheckImport(c.h, me, 4)
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%s: %v, want nil", c.name, err)
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("%s: %v, want an error wrapping %v", c.name, err, c.want)
		}
	}
}

func TestCheckImportAs(t *testing.T) {
	me := hal.HandleOwner{Job: 0xfeed, Rank: 1, Nonce: 7}
	if err := hal.CheckImportAs("ib", hal.HandleOwner{Job: 0xfeed, Rank: 2, Nonce: 9}, me, 4); err != nil {
		t.Errorf("a peer's handle: %v", err)
	}
	err := hal.CheckImportAs("ib", hal.HandleOwner{Job: 0xbeef, Rank: 2, Nonce: 9}, me, 4)
	if !errors.Is(err, hal.ErrInvalidUsage) || err.Error() != "ib: rank 1: import: handle of another job: invalid usage" {
		t.Errorf("another job's handle: %v", err)
	}
}
