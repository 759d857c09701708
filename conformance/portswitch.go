package conformance

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"time"

	"github.com/weftccl/weft/hal"
)

// The port-mapped and switch-mapped sections. No backend offers these
// capabilities yet, so their tests report NotSupported; they are written
// against the contract as it stands (hal.PortMapped, hal.Engine,
// hal.SwitchMapped, hal.Multicast) and are the place where further tests of
// these capabilities are registered.

func init() {
	Register(Case{ID: "port-mapped/engine-put-signal-flush", Capability: hal.CapPortMapped, MinRanks: 2,
		Title: "an engine's put, then signal, makes the data visible at the peer; flush returns",
		Run:   testEngine})
	Register(Case{ID: "switch-mapped/multicast-bind", Capability: hal.CapSwitchMapped, MinRanks: 2,
		Title: "a multicast group is created, exported and bound to device memory",
		Run:   testMulticast})
}

func testEngine(t *T) error {
	pm, ok := t.Dev.(hal.PortMapped)
	if !ok {
		return t.Errorf("links offer %s but the device does not implement hal.PortMapped", hal.CapPortMapped)
	}
	const n = 4*kib + 3
	rg := newRing(t.Rank, t.Size)
	src, err := t.Alloc(n)
	if err != nil {
		return err
	}
	dst, err := t.Alloc(n)
	if err != nil {
		return err
	}
	sem, err := t.Alloc(8)
	if err != nil {
		return err
	}
	if err := t.Write(src, 0, pattern(seed(t.Rank, 0), n)); err != nil {
		return err
	}
	type card struct {
		Endpoint hal.Endpoint
		Dst, Sem hal.Handle
	}
	var me card
	me.Endpoint = t.Dev.Endpoint()
	if me.Dst, err = pm.ExportPort(dst); err != nil {
		return t.Errorf("export: %w", err)
	}
	if me.Sem, err = pm.ExportPort(sem); err != nil {
		return t.Errorf("export: %w", err)
	}
	blob, _ := json.Marshal(me)
	all, err := t.AllGather(blob)
	if err != nil {
		return err
	}
	var next card
	if err := json.Unmarshal(all[rg.next], &next); err != nil {
		return t.Errorf("card of rank %d: %v", rg.next, err)
	}
	rdst, err := pm.ImportPort(next.Dst)
	if err != nil {
		return t.Errorf("import: %w", err)
	}
	t.Cleanup(rdst.Free)
	rsem, err := pm.ImportPort(next.Sem)
	if err != nil {
		return t.Errorf("import: %w", err)
	}
	t.Cleanup(rsem.Free)
	e, err := pm.NewEngine(next.Endpoint)
	if err != nil {
		return t.Errorf("new engine to rank %d: %w", rg.next, err)
	}
	t.Cleanup(e.Close)
	if err := e.Put(rdst.Addr(), src.Addr(), n); err != nil {
		return t.Errorf("put: %w", err)
	}
	if err := e.Signal(rsem.Addr(), 0, 0); err != nil {
		return t.Errorf("signal: %w", err)
	}
	tk, err := e.Mark()
	if err != nil {
		return t.Errorf("mark: %w", err)
	}
	for fd := time.Now().Add(t.Timeout()); ; {
		done, err := e.Completed()
		if err != nil {
			return t.Errorf("completed: %w", err)
		}
		if done >= tk {
			break
		}
		if time.Now().After(fd) {
			return t.Errorf("flush: puts not complete within %v", t.Timeout())
		}
		time.Sleep(10 * time.Microsecond)
	}
	deadline := time.Now().Add(t.Timeout())
	for {
		v, err := t.Read(sem, 0, 8)
		if err != nil {
			return err
		}
		if binary.LittleEndian.Uint64(v) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			return t.Errorf("the signal of rank %d did not arrive within %v", rg.prev, t.Timeout())
		}
		time.Sleep(100 * time.Microsecond)
	}
	got, err := t.Read(dst, 0, n)
	if err != nil {
		return err
	}
	if d := diff("data put by the engine, read after its signal", got, pattern(seed(rg.prev, 0), n)); d != "" {
		return t.Errorf("from rank %d: %s", rg.prev, d)
	}
	return nil
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
