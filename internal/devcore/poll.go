package devcore

import (
	"fmt"
	"time"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
)

// Poll calls query until it reports done, fails, or the deadline passes
// (a zero deadline is now + WEFT_TIMEOUT): it spins for 50 µs, then sleeps
// with a backoff of at most 100 µs. On failure it returns fail(err, waited)
// with the query's error, or fail(nil, waited) at the deadline, so that
// the caller words the error ([Failure] words it the usual way). No wait
// of weft on a GPU is unbounded.
func Poll(deadline time.Time, query func() (bool, error), fail func(err error, waited time.Duration) error) error {
	start := time.Now()
	if deadline.IsZero() {
		deadline = start.Add(env.Timeout())
	}
	const spin = 50 * time.Microsecond
	sleep := time.Microsecond
	for {
		done, err := query()
		if err != nil {
			return fail(err, time.Since(start))
		}
		if done {
			return nil
		}
		now := time.Now()
		if !now.Before(deadline) {
			return fail(nil, now.Sub(start))
		}
		if now.Sub(start) < spin {
			continue
		}
		time.Sleep(min(sleep, deadline.Sub(now)))
		sleep = min(2*sleep, 100*time.Microsecond)
	}
}

// Failure words the failure of a wait for Poll: "what: " and the query's
// error, or, at the deadline, an error wrapping hal.ErrTimeout that says
// how long the wait was ("synchronize stream of nvlink GPU 0 (rank 3): not
// done after 30s").
func Failure(what string) func(error, time.Duration) error {
	return func(err error, waited time.Duration) error {
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return fmt.Errorf("%s: not done after %v: %w", what, waited.Round(time.Millisecond), hal.ErrTimeout)
	}
}
