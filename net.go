package weft

import "fmt"

// lostPeer is the first loss of a peer that the bootstrap or the network
// saw (each names the peer's rank), or nil.
func (c *Comm) lostPeer() error {
	if err := c.boot.Err(); err != nil {
		return err
	}
	if c.net != nil {
		if err := c.net.Err(); err != nil {
			return fmt.Errorf("network %s: %w", c.net.Name, err)
		}
	}
	return nil
}
