package weft

import (
	"fmt"
	"sync"

	"github.com/weftccl/weft/hal"
)

// streamOrder keeps a communicator's calls in the order they were issued
// when they come on different streams, as NCCL's calls on one
// communicator are (PyTorch's FSDP2 issues AllGathers on one stream and
// ReduceScatters on another, on the same communicator). Without it two
// calls could run at once, contend for SMs and links, and interleave
// their requests on the proxy and engines that port-channel plans share;
// a client may also rely on the order (a call reading what the previous
// one wrote).
//
// A call on the same stream as the communicator's previous call is ordered
// by the stream; one on another stream first makes its stream wait for
// the previous stream's work (hal.Stream.After), which costs driver calls
// only at a change of stream. Inside a graph capture the graph's own
// dependencies order the calls (After orders nothing there), and a
// previous stream closed since orders nothing either.
type streamOrder struct {
	mu   sync.Mutex
	last hal.Stream
}

// launched counts one call and orders s after the stream of the previous
// call; every launch path calls it before it queues the call's work.
func (c *Comm) launched(s hal.Stream) error {
	c.stall.calls.Add(1)
	o := &c.order
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.last != nil && o.last != s {
		if err := s.After(o.last); err != nil {
			return fmt.Errorf("weft: rank %d: ordering this call after the previous call's stream: %w", c.cfg.Rank, err)
		}
	}
	o.last = s
	return nil
}
