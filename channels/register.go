package channels

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/weftccl/weft/hal"
)

// Registration is a user buffer mapped on every peer for zero-copy access:
// kernels read a peer's input or write its output directly, with no scratch
// copy (as ncclCommRegister enables in NCCL).
type Registration struct {
	Local hal.Buffer
	// Peers[r] is rank r's registered buffer mapped on this device; nil for
	// this rank.
	Peers []hal.Buffer
}

// Register maps buf on every rank. It is collective: every rank registers
// one buffer in the same call, or nil when it has none to offer in this
// call (its entry of Peers stays nil on every rank, and Local is nil).
// Errors: ErrNotSupported when a link is not
// memory-mapped, errors of Export and Import otherwise; nothing stays
// mapped on error.
func Register(ctx context.Context, ex Exchanger, dev hal.Device, buf hal.Buffer) (_ *Registration, err error) {
	mm, ok := dev.(hal.MemoryMapped)
	if !ok {
		return nil, fmt.Errorf("channels: register: backend %s offers no memory-mapped capability: %w", dev.Info().Backend, hal.ErrNotSupported)
	}
	card := regCard{Endpoint: dev.Endpoint()}
	if buf != nil {
		h, err := mm.Export(buf)
		if err != nil {
			return nil, fmt.Errorf("channels: register: %w", err)
		}
		card.Handle, card.Size = h, buf.Size()
	}
	blob, err := encodeJSON(card)
	if err != nil {
		return nil, err
	}
	all, err := ex.AllGather(ctx, blob)
	if err != nil {
		return nil, fmt.Errorf("channels: register: exchange handles: %w", err)
	}
	reg := &Registration{Local: buf, Peers: make([]hal.Buffer, len(all))}
	defer func() {
		if err != nil {
			reg.Close()
		}
	}()
	for rk, b := range all {
		if rk == ex.Rank() {
			continue
		}
		var c regCard
		if err := decodeJSON(bytes.NewReader(b), &c); err != nil {
			return nil, fmt.Errorf("channels: register: rank %d sent a malformed card: %v: %w", rk, err, hal.ErrRemote)
		}
		if len(c.Handle) == 0 {
			continue // the rank registered nothing in this call
		}
		if l := dev.Link(c.Endpoint); l.Caps&hal.CapMemoryMapped == 0 {
			return nil, fmt.Errorf("channels: register: link to rank %d is not memory-mapped (%s): %w", rk, l.Reason, hal.ErrNotSupported)
		}
		b, err := mm.Import(c.Handle)
		if err != nil {
			return nil, fmt.Errorf("channels: register: map buffer of rank %d: %w", rk, err)
		}
		reg.Peers[rk] = b
	}
	if _, err := ex.AllGather(ctx, nil); err != nil {
		return nil, fmt.Errorf("channels: register: %w", err)
	}
	return reg, nil
}

// Close unmaps the peers' buffers (the local buffer stays the caller's).
func (r *Registration) Close() error {
	var errs []error
	for i, b := range r.Peers {
		if b != nil {
			errs = append(errs, b.Free())
			r.Peers[i] = nil
		}
	}
	return errors.Join(errs...)
}

type regCard struct {
	Endpoint hal.Endpoint
	Handle   hal.Handle
	Size     int64
}
