package weft

import (
	"fmt"

	"github.com/weftccl/weft/hal"
)

func (c *Comm) launchCall(call Call, s hal.Stream) error {
	return fmt.Errorf("weft: %v: %w", call.Coll, hal.ErrNotSupported)
}

func (c *Comm) launchP2P(ops []P2P, s hal.Stream) error {
	return fmt.Errorf("weft: p2p: %w", hal.ErrNotSupported)
}

func (c *Comm) planName(call Call) string { return "" }
