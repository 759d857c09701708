package conformance

import (
	"errors"

	"github.com/weftccl/weft/hal"
)

// The switch-mapped section. No backend offers the capability yet, so its
// tests report NotSupported; they are written against the contract as it
// stands (hal.SwitchMapped, hal.Multicast) and this is where further tests
// of it are registered. The port-mapped section is in port.go.

func init() {
	Register(Case{ID: "switch-mapped/multicast-bind", Capability: hal.CapSwitchMapped, MinRanks: 2,
		Title: "a multicast group is created, exported and bound to device memory",
		Run:   testMulticast})
}

func testMulticast(t *T) error {
	sm, ok := t.Dev.(hal.SwitchMapped)
	if !ok {
		return t.Errorf("links offer %s but the device does not implement hal.SwitchMapped", hal.CapSwitchMapped)
	}
	if t.Rank != 0 {
		return nil
	}
	const n = 2 * mib
	mc, err := sm.NewMulticast(n, t.Size)
	if errors.Is(err, hal.ErrNotSupported) {
		return t.NotSupported("multicast: %v", err)
	}
	if err != nil {
		return t.Errorf("new multicast group: %w", err)
	}
	t.Cleanup(mc.Close)
	h, err := mc.Handle()
	if err != nil {
		return t.Errorf("multicast handle: %w", err)
	}
	if len(h) == 0 {
		return t.Errorf("multicast handle is empty")
	}
	b, err := t.Alloc(n)
	if err != nil {
		return err
	}
	if err := mc.Bind(b); err != nil {
		return t.Errorf("bind: %w", err)
	}
	if mc.Addr() == 0 {
		return t.Errorf("multicast address is 0 after Bind")
	}
	return nil
}
