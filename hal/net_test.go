package hal

import (
	"strings"
	"testing"
)

// fakeNet is a registered network whose Probe says avail.
type fakeNet struct {
	name  string
	avail bool
}

func (n fakeNet) Name() string { return n.name }
func (n fakeNet) Probe() Availability {
	if n.avail {
		return Availability{Available: true, Reason: "fake"}
	}
	return Availability{Reason: n.name + " absent"}
}
func (n fakeNet) Open(Device, NetConfig) (NetDevice, error) { return nil, ErrNotSupported }

// AutoNetwork takes UCX first only where an RDMA port is active (the ib
// network is available), and otherwise keeps UCX over TCP behind socket.
func TestAutoNetworkOrder(t *testing.T) {
	registryMu.Lock()
	saved := netRegistry
	registryMu.Unlock()
	t.Cleanup(func() {
		registryMu.Lock()
		netRegistry = saved
		registryMu.Unlock()
	})
	for _, tc := range []struct {
		ib, socket, ucx bool
		want            string
		skipped         string
	}{
		{ib: false, socket: true, ucx: true, want: "socket", skipped: "ib: ib absent"},
		{ib: true, socket: true, ucx: true, want: "ucx"},
		{ib: true, socket: true, ucx: false, want: "ib", skipped: "ucx: ucx absent"},
		{ib: false, socket: false, ucx: true, want: "ucx", skipped: "ib: ib absent; socket: socket absent"},
	} {
		registryMu.Lock()
		netRegistry = map[string]Network{}
		registryMu.Unlock()
		RegisterNetwork(fakeNet{"ib", tc.ib})
		RegisterNetwork(fakeNet{"socket", tc.socket})
		RegisterNetwork(fakeNet{"ucx", tc.ucx})
		n, skipped, err := AutoNetwork()
		if err != nil {
			t.Fatalf("ib %v socket %v ucx %v: %v", tc.ib, tc.socket, tc.ucx, err)
		}
		if n.Name() != tc.want || strings.Join(skipped, "; ") != tc.skipped {
			t.Errorf("ib %v socket %v ucx %v: AutoNetwork = %s (skipped %q), want %s (skipped %q)",
				tc.ib, tc.socket, tc.ucx, n.Name(), strings.Join(skipped, "; "), tc.want, tc.skipped)
		}
	}
	registryMu.Lock()
	netRegistry = map[string]Network{}
	registryMu.Unlock()
	RegisterNetwork(fakeNet{"socket", false})
	if _, _, err := AutoNetwork(); err == nil || !strings.Contains(err.Error(), "socket: socket absent") {
		t.Errorf("no network available: err %v, want one naming socket's reason", err)
	}
}
