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
