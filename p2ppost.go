package weft

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/weftccl/weft/channels"
	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/hal/plan"
)

// Zero-copy point-to-point (docs/collectives.md, "Zero-copy
// point-to-point"; hal/plan/posted.go). Every registration of the
// communicator (Register, or a zero-copy AllReduce's lazy one) is
// collective, so it gets the same id on every rank: the number of
// registrations before it, plus one. The post table, in device memory,
// holds for each id the addresses at which this rank mapped every rank's
// buffer of that registration and their sizes; the send groups of the
// windowed point-to-point plan read it when a receiver posts a registered
// buffer. Once the communicator has a registration, every point-to-point
// launch of that plan exchanges posts (posting): the ranks switch in the
// same collective call, so a send and its receive always agree.

// postRegistry is the communicator's registration ids and post table,
// guarded by Comm.mu.
type postRegistry struct {
	table hal.Buffer                        // plan.PostTableBytes; nil before the first registration
	ids   map[*channels.Registration]uint32 // id of each live registration
	next  uint32                            // ids handed out so far
	// held are registrations to which this rank offered nothing: the
	// peers' buffers they map, kept until Close.
	held []*channels.Registration
}

// Register maps buf on every rank for zero-copy access: a point-to-point
// receive into it (or into a range inside it) is written by the sender
// directly, and a zero-copy AllReduce finds it registered. It is
// collective: every rank calls it, in the same order as its other
// registrations; buf may be nil on a rank that has nothing to register in
// this call (its peers then have nothing of it to write into), and a
// buffer this rank has registered already takes part as nil (its
// registration stays). Errors: ErrNotSupported when a link is not
// memory-mapped; errors of the exchange (a rank that does not take part:
// the communicator's timeout) and of the device otherwise.
func (c *Comm) Register(buf hal.Buffer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	offer := buf
	if buf != nil {
		if r, ok := c.regs[buf.Addr()]; ok && r.Local == buf {
			offer = nil
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	r, err := channels.Register(ctx, c.boot, c.dev, offer)
	if err != nil {
		return fmt.Errorf("weft: register on rank %d: %w", c.cfg.Rank, err)
	}
	if offer == nil {
		// The peers' buffers of this call stay mapped until Close.
		c.posts.held = append(c.posts.held, r)
	} else {
		if old, ok := c.regs[buf.Addr()]; ok {
			c.postRemoveLocked(old)
			old.Close()
		}
		c.regs[buf.Addr()] = r
	}
	return c.postAddLocked(r)
}

// postAddLocked gives registration r the next id and writes its post
// table entry (allocating the table on the first registration). c.mu is
// held.
func (c *Comm) postAddLocked(r *channels.Registration) error {
	pr := &c.posts
	pr.next++
	id := pr.next
	if pr.ids == nil {
		pr.ids = map[*channels.Registration]uint32{}
	}
	if pr.table == nil {
		t, err := c.dev.Alloc(plan.PostTableBytes(c.cfg.NRanks))
		if err != nil {
			return fmt.Errorf("weft: rank %d: post table: %w", c.cfg.Rank, err)
		}
		if err := c.dev.Write(t, 0, make([]byte, t.Size())); err != nil {
			t.Free()
			return fmt.Errorf("weft: rank %d: clear post table: %w", c.cfg.Rank, err)
		}
		pr.table = t
	}
	if r.Local != nil {
		pr.ids[r] = id
	}
	e := make([]byte, plan.PostEntryBytes(c.cfg.NRanks))
	le := binary.LittleEndian
	le.PutUint64(e, uint64(id))
	for rk, b := range r.Peers {
		if b != nil {
			le.PutUint64(e[8*(1+2*rk):], b.Addr())
			le.PutUint64(e[8*(2+2*rk):], uint64(b.Size()))
		}
	}
	if err := c.dev.Write(pr.table, plan.PostEntryOffset(c.cfg.NRanks, id), e); err != nil {
		return fmt.Errorf("weft: rank %d: post table entry of registration %d: %w", c.cfg.Rank, id, err)
	}
	return nil
}

// postRemoveLocked clears registration r's post table entry, so that a
// peer's post of it is refused (the peer's send takes the windowed path).
// c.mu is held.
func (c *Comm) postRemoveLocked(r *channels.Registration) error {
	pr := &c.posts
	id, ok := pr.ids[r]
	if !ok {
		return nil
	}
	delete(pr.ids, r)
	if pr.table == nil {
		return nil
	}
	return c.dev.Write(pr.table, plan.PostEntryOffset(c.cfg.NRanks, id), make([]byte, plan.PostEntryBytes(c.cfg.NRanks)))
}

// postState is what a point-to-point launch needs of the registry: the
// post table's address (0 while the communicator has no registration:
// no posting), and a lookup of receive buffers.
func (c *Comm) postState() (table uint64, lookup func(addr uint64, bytes int64) uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.posts.table == nil {
		return 0, nil
	}
	type span struct {
		base uint64
		size int64
		id   uint32
	}
	var spans []span
	add := func(r *channels.Registration) {
		if id, ok := c.posts.ids[r]; ok {
			spans = append(spans, span{r.Local.Addr(), r.Local.Size(), id})
		}
	}
	for _, r := range c.regs {
		add(r)
	}
	for _, w := range c.windows { // window.go
		if w.reg != nil {
			add(w.reg)
		}
	}
	return c.posts.table.Addr(), func(addr uint64, bytes int64) uint64 {
		for _, s := range spans {
			if addr >= s.base && addr-s.base <= uint64(s.size) && uint64(bytes) <= uint64(s.size)-(addr-s.base) {
				if v, err := plan.PostArg(s.id, addr-s.base); err == nil {
					return v
				}
			}
		}
		return plan.PostNone
	}
}
