package channels

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/weftccl/weft/hal"
)

// SwitchChannel joins this rank to a multicast group of every rank of the
// bootstrap over the switch-mapped capability (NVLink SHARP; MSCCL++'s
// SwitchChannel, NCCL's NVLS): each rank binds a buffer of local device
// memory to the group; a kernel stores to every rank's buffer at once
// through the group's multicast address, and a load through it returns the
// element-wise reduction of every rank's buffer, computed in the switch.
// Plans use it as their switch buffer (plan switch.go; Setup connects it);
// the device side is weft_switch.h.
type SwitchChannel struct {
	// Local is this rank's copy: device memory bound to the group, at
	// least the requested size (rounded up to the multicast granularity).
	Local hal.Buffer
	// Group is this rank's membership of the multicast group.
	Group hal.Multicast
}

// Addr is the group's multicast address on this device: what kernels pass
// to the multimem primitives (weft_switch.h) and hal/host's interpreter
// recognises.
func (s *SwitchChannel) Addr() uint64 { return s.Group.Addr() }

// ConnectSwitch sets up a multicast group of n bytes (rounded up to the
// device's multicast granularity) over every rank of ex; it is collective.
// The steps of the contract (hal.SwitchMapped) are separated by bootstrap
// exchanges, each bounded by ctx and the bootstrap's deadline: rank 0
// creates the group and sends its handle, the others import it; once every
// rank has joined, each allocates and binds its copy; once every rank has
// bound, the multicast address is valid everywhere.
//
// Every step ends with an exchange of the ranks' outcomes, so that a rank
// that fails makes every rank fail: the failing rank returns its own
// error, the others one wrapping ErrRemote that names it. Errors:
// ErrNotSupported when the device does not implement hal.SwitchMapped or a
// link to a rank is not switch-mapped (naming both ranks and the reason),
// ErrInvalidArgument for n ≤ 0, errors of the device otherwise; nothing
// stays allocated or joined on error.
func ConnectSwitch(ctx context.Context, ex Exchanger, dev hal.Device, n int64) (_ *SwitchChannel, err error) {
	rank := ex.Rank()
	fail := func(format string, a ...any) error {
		return fmt.Errorf("channels: switch channel on rank %d: %w", rank, fmt.Errorf(format, a...))
	}
	s := &SwitchChannel{}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	sm, ok := dev.(hal.SwitchMapped)
	var local error
	switch {
	case !ok:
		local = fail("backend %s offers no switch-mapped capability: %w", dev.Info().Backend, hal.ErrNotSupported)
	case n <= 0:
		local = fail("a group of %d bytes: %w", n, hal.ErrInvalidArgument)
	}
	// Step 0: endpoints, so that every rank checks its links first.
	ep, err := encodeJSON(dev.Endpoint())
	if err != nil {
		return nil, err
	}
	all, err := switchStep(ctx, ex, "endpoints", ep, local)
	if err != nil {
		return nil, err
	}
	for r, b := range all {
		if r == rank {
			continue
		}
		var peer hal.Endpoint
		if err := decodeJSON(bytes.NewReader(b), &peer); err != nil {
			local = fail("rank %d sent a malformed endpoint: %v: %w", r, err, hal.ErrRemote)
			break
		}
		if l := dev.Link(peer); l.Caps&hal.CapSwitchMapped == 0 {
			local = fail("link to rank %d is not switch-mapped (%s): %w", r, l.Reason, hal.ErrNotSupported)
			break
		}
	}
	// Step 1: rank 0 creates the group and sends its handle; the others
	// join it.
	var handle hal.Handle
	if local == nil && rank == 0 {
		size := n
		if gran, err := sm.MulticastGranularity(); err != nil {
			local = fail("multicast granularity: %w", err)
		} else {
			size = (n + gran - 1) / gran * gran
		}
		if local == nil {
			if s.Group, err = sm.NewMulticast(size, ex.Size()); err != nil {
				local = fail("create a multicast group of %d bytes for %d ranks: %w", size, ex.Size(), err)
			} else if handle, err = s.Group.Handle(); err != nil {
				local = fail("multicast handle: %w", err)
			}
		}
	}
	if all, err = switchStep(ctx, ex, "group handle", handle, local); err != nil {
		return nil, err
	}
	if rank != 0 {
		if s.Group, err = sm.ImportMulticast(all[0]); err != nil {
			local = fail("join the multicast group of rank 0: %w", err)
		}
	}
	// Step 2: everyone has joined; bind this rank's copy.
	if _, err = switchStep(ctx, ex, "join", nil, local); err != nil {
		return nil, err
	}
	if s.Local, err = dev.Alloc(s.Group.Size()); err != nil {
		local = fail("allocate the %d-byte copy: %w", s.Group.Size(), err)
	} else if err = s.Group.Bind(s.Local); err != nil {
		local = fail("bind the copy to the multicast group: %w", err)
	}
	// Step 3: everyone has bound; the multicast address is valid.
	if _, err = switchStep(ctx, ex, "bind", nil, local); err != nil {
		return nil, err
	}
	if s.Addr() == 0 {
		return nil, fail("multicast address is 0 after every rank bound: %w", hal.ErrInternal)
	}
	return s, nil
}

// switchStep all-gathers data with this rank's outcome of the step before
// it. It returns local when this rank failed, an error naming the first
// rank that failed (ErrRemote), or every rank's data.
func switchStep(ctx context.Context, ex Exchanger, step string, data []byte, local error) ([][]byte, error) {
	msg := append([]byte{0}, data...)
	if local != nil {
		msg = append([]byte{1}, local.Error()...)
	}
	all, err := ex.AllGather(ctx, msg)
	if err != nil {
		if local != nil {
			return nil, local
		}
		return nil, fmt.Errorf("channels: switch channel on rank %d: exchange before the %s step: %w", ex.Rank(), step, err)
	}
	if local != nil {
		return nil, local
	}
	out := make([][]byte, len(all))
	for r, b := range all {
		if len(b) == 0 {
			return nil, fmt.Errorf("channels: switch channel on rank %d: rank %d sent an empty %s message: %w", ex.Rank(), r, step, hal.ErrRemote)
		}
		if b[0] != 0 {
			return nil, fmt.Errorf("channels: switch channel on rank %d: rank %d failed: %s: %w", ex.Rank(), r, b[1:], hal.ErrRemote)
		}
		out[r] = b[1:]
	}
	return out, nil
}

// Close leaves the group and frees the local copy, in that order (the
// copy stays bound until the group lets it go). It is not collective; a
// caller frees a group only when no kernel of any rank uses it any more.
func (s *SwitchChannel) Close() error {
	var errs []error
	if s.Group != nil {
		errs = append(errs, s.Group.Close())
		s.Group = nil
	}
	if s.Local != nil {
		errs = append(errs, s.Local.Free())
		s.Local = nil
	}
	return errors.Join(errs...)
}
