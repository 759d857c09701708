package main

import (
	"errors"
	"fmt"

	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/sysnccl"
)

// exitCode maps an error to the process exit status: 1 plus the
// ncclResult_t code (sysnccl.ResultOf), so scripts can tell a bad argument
// (5) from a lost peer (7). A job whose ranks all failed with one status
// (bootstrap.RunError) exits with that status: every rank rejecting the
// same bad argument is a bad argument, not a lost peer.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var re *bootstrap.RunError
	if errors.As(err, &re) && len(re.Failed) == re.Size && re.Size > 0 {
		code := re.Failed[0].Code
		for _, f := range re.Failed {
			if f.Signal != "" || f.Killed || f.Code != code {
				code = 0
				break
			}
		}
		if code > 0 {
			return code
		}
	}
	return 1 + int(sysnccl.ResultOf(err))
}

// usageError marks an error of command-line parsing (unknown command,
// wrong number of arguments) as ErrInvalidArgument, unless it already
// wraps a sentinel.
func usageError(err error) error {
	for _, s := range []error{hal.ErrInvalidArgument, hal.ErrInvalidUsage, hal.ErrNotSupported, hal.ErrSystem,
		hal.ErrInternal, hal.ErrRemote, hal.ErrDevice, hal.ErrTimeout} {
		if errors.Is(err, s) {
			return err
		}
	}
	return fmt.Errorf("%w (see weft --help): %w", err, hal.ErrInvalidArgument)
}
