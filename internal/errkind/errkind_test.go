package errkind_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/errkind"
)

// TestHALReexports: hal's sentinels are errkind's values, so errors.Is
// matches across the two names in both directions, and kinds stay apart.
func TestHALReexports(t *testing.T) {
	pairs := []struct {
		name     string
		hal, own error
	}{
		{"not supported", hal.ErrNotSupported, errkind.ErrNotSupported},
		{"invalid argument", hal.ErrInvalidArgument, errkind.ErrInvalidArgument},
		{"invalid usage", hal.ErrInvalidUsage, errkind.ErrInvalidUsage},
		{"system error", hal.ErrSystem, errkind.ErrSystem},
		{"internal error", hal.ErrInternal, errkind.ErrInternal},
		{"remote error", hal.ErrRemote, errkind.ErrRemote},
		{"device error", hal.ErrDevice, errkind.ErrDevice},
		{"timeout", hal.ErrTimeout, errkind.ErrTimeout},
	}
	for i, p := range pairs {
		if p.hal != p.own || p.own.Error() != p.name {
			t.Errorf("%s: hal %p %q, errkind %p %q: want the same value", p.name, p.hal, p.hal, p.own, p.own)
		}
		if !errors.Is(fmt.Errorf("bind: %w", p.own), p.hal) || !errors.Is(fmt.Errorf("backend: %w", p.hal), p.own) {
			t.Errorf("%s: errors.Is does not cross hal and errkind", p.name)
		}
		other := pairs[(i+1)%len(pairs)]
		if errors.Is(p.own, other.hal) {
			t.Errorf("%s matches %s", p.name, other.name)
		}
	}
	var te *hal.TimeoutError
	if err := fmt.Errorf("wait: %w", &errkind.TimeoutError{Rank: 1, Peer: 2}); !errors.As(err, &te) || te.Peer != 2 {
		t.Errorf("errors.As into *hal.TimeoutError: %v", te)
	}
}

// TestTimeoutError: the message names rank, peer, channel, semaphore and
// block where known, and the error wraps ErrTimeout.
func TestTimeoutError(t *testing.T) {
	tests := []struct {
		e    errkind.TimeoutError
		want string
	}{
		{errkind.TimeoutError{Rank: 0, Peer: 1, Channel: 2, Semaphore: 3, Block: 4, What: "semaphore", Expected: 5, Observed: 4},
			"rank 0: semaphore wait timed out on peer rank 1 (channel 2, semaphore 3, block 4): expected 5, observed 4"},
		{errkind.TimeoutError{Rank: 3, Peer: -1, Channel: -1, Semaphore: -1, Block: -1, What: "barrier", Expected: 1},
			"rank 3: barrier wait timed out: expected 1, observed 0"},
		{errkind.TimeoutError{Rank: 2, Peer: 0, Channel: 1, Semaphore: -1, Block: -1, What: "LL packet", Expected: 7, Observed: 6},
			"rank 2: LL packet wait timed out on peer rank 0 (channel 1): expected 7, observed 6"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
		if !errors.Is(&tt.e, errkind.ErrTimeout) {
			t.Errorf("%q does not wrap ErrTimeout", tt.want)
		}
	}
}
