package weft

import (
	"github.com/weftccl/weft/hal/plan"
)

// ChooseForBench runs the host-side choice of Launch for call (checks,
// plan selection, operator, arguments) without launching, for
// BenchmarkLaunchChoice.
func ChooseForBench(c *Comm, call Call) (*plan.Args, error) {
	if err := c.checkCall(call); err != nil {
		return nil, err
	}
	if err := c.boot.Err(); err != nil {
		return nil, err
	}
	_ = c.allToAllByP2P(call)
	_ = c.ceServes(call)
	a, err := c.selectAlgo(call, false)
	if err != nil {
		return nil, err
	}
	op := programKey(a, call).op
	_ = a.choice.Serves(call.Type, op)
	return c.callArgs(call), nil
}

// HostWindowPlans counts the communicator's plans set up so far and, of
// them, those whose scratch and semaphores are in host memory mapped into
// the device (channels.Resources.HostWindows), for the tests across
// emulated nodes.
func HostWindowPlans(c *Comm) (host, all int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	visit := func(algos []*algo) {
		for _, a := range algos {
			if a.res == nil {
				continue
			}
			all++
			if a.res.HostWindows() {
				host++
			}
		}
	}
	visit(c.allreduce)
	visit(c.p2p)
	for _, algos := range c.colls {
		visit(algos)
	}
	return host, all
}
