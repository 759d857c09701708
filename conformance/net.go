package conformance

import (
	"fmt"

	"github.com/weftccl/weft/hal"
)

// Runs over a network (Options.Net): the port-mapped tests take their
// engines and registrations from the network's hal.NetDevice, opened for
// each rank's device at the start of every test, instead of the device's
// own hal.PortMapped. The ranks are treated as devices of different
// nodes: the links between the devices are not used, and the tests of the
// other sections are NotSupported.

// openNet opens the run's network for this rank's device and exchanges
// the ranks' addresses; the NetDevice is closed after everything else the
// test set up. Collective.
func (t *T) openNet() error {
	n, err := hal.LookupNetwork(t.cfg.net)
	if err != nil {
		return t.Errorf("%w", err)
	}
	nd, err := n.Open(t.Dev, hal.NetConfig{Rank: t.Rank, NRanks: t.Size, JobID: t.netJob})
	if err != nil {
		return t.Errorf("open network %s: %w", t.cfg.net, err)
	}
	t.Cleanup(nd.Close)
	t.nd = nd
	t.ep = t.Dev.Endpoint()
	t.ep.Net = map[string][]byte{n.Name(): nd.Address()}
	// Every rank has opened (and listens) before any rank connects.
	return t.Barrier()
}

// Network is the name of the network the test runs over; "" when it runs
// over the links between the devices.
func (t *T) Network() string { return t.cfg.net }

// Port is the port-mapped capability the test uses: the network's
// NetDevice when the run is over a network, else the device's own
// hal.PortMapped.
func (t *T) Port() (hal.PortMapped, error) {
	if t.nd != nil {
		return t.nd, nil
	}
	pm, ok := t.Dev.(hal.PortMapped)
	if !ok {
		return nil, t.Errorf("links offer %s but the device does not implement hal.PortMapped", hal.CapPortMapped)
	}
	return pm, nil
}

// Endpoint is this rank's endpoint as peers must see it: the device's,
// carrying this rank's network address when the run is over a network.
func (t *T) Endpoint() hal.Endpoint {
	if t.nd != nil {
		return t.ep
	}
	return t.Dev.Endpoint()
}

// PortDevice is the device to give package channels for port channels:
// over a network, the device whose port-mapped capability, endpoint and
// links are the NetDevice's (channels.ConnectPorts takes a hal.Device).
func (t *T) PortDevice() hal.Device {
	if t.nd == nil {
		return t.Dev
	}
	return &netDevice{Device: t.Dev, nd: t.nd, ep: t.ep, name: t.cfg.net}
}

// netDevice is a device whose port-mapped side is a NetDevice.
type netDevice struct {
	hal.Device
	nd   hal.NetDevice
	ep   hal.Endpoint
	name string
}

func (d *netDevice) Endpoint() hal.Endpoint { return d.ep }

func (d *netDevice) Link(peer hal.Endpoint) hal.Link {
	if _, ok := peer.Net[d.name]; ok {
		return hal.Link{Caps: hal.CapPortMapped}
	}
	return hal.Link{Reason: fmt.Sprintf("the peer's endpoint carries no %s address", d.name)}
}

func (d *netDevice) ExportPort(b hal.Buffer) (hal.Handle, error) { return d.nd.ExportPort(b) }

func (d *netDevice) ImportPort(h hal.Handle) (hal.Buffer, error) { return d.nd.ImportPort(h) }

func (d *netDevice) NewEngine(peer hal.Endpoint) (hal.Engine, error) { return d.nd.NewEngine(peer) }
