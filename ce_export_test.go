package weft

// CEActive reports whether c has set up the host-issued copy-engine
// AllGather (ce.go): the calls went through it. Tests only.
func CEActive(c *Comm) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ce != nil
}

// CEAllReduceActive reports whether c has set up the host-issued
// copy-engine AllReduce (cear.go). Tests only.
func CEAllReduceActive(c *Comm) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cear != nil
}

// CEReduceDirectCount is the number of Reduces c has queued as copy-engine
// pushes into the root's output (cereduce.go). Tests only.
func CEReduceDirectCount(c *Comm) int64 { return c.ceRedDirect.Load() }

// CEAllReduceExportedCount is the number of AllReduces c has queued on the
// copy-engine executor with its peer's output exported at the call
// (cear.go). Tests only.
func CEAllReduceExportedCount(c *Comm) int64 { return c.cearExported.Load() }
