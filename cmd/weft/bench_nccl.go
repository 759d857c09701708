package main

import (
	"context"
	"fmt"

	"github.com/weftccl/weft/bootstrap"
	"github.com/weftccl/weft/hal"
)

func newNCCLBaseline(ctx context.Context, boot bootstrap.Bootstrap, dev hal.Device) (collective, error) {
	return nil, fmt.Errorf("NCCL baseline: internal/nccl is not wired yet: %w", hal.ErrNotSupported)
}
