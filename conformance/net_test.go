package conformance_test

import (
	"context"
	"strings"
	"testing"

	"github.com/weftccl/weft/conformance"
	"github.com/weftccl/weft/hal"
	_ "github.com/weftccl/weft/hal/socket"
)

// downNetwork is a registered network whose Probe says it cannot run.
type downNetwork struct{}

func (downNetwork) Name() string { return "conftest-down" }
func (downNetwork) Probe() hal.Availability {
	return hal.Availability{Reason: "no such wire on this machine"}
}
func (downNetwork) Open(hal.Device, hal.NetConfig) (hal.NetDevice, error) {
	panic("conftest-down: opened although unavailable")
}

func init() { hal.RegisterNetwork(downNetwork{}) }

// The port-mapped tests pass over hal/socket between hal/host devices
// treated as different nodes, with engines and registrations of the
// socket NetDevice; the other sections are NotSupported.
func TestNetSocket(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, ranks := range []int{2, 3} {
		rep, err := conformance.Run(context.Background(), conformance.Options{Backend: "host", Net: "socket", Ranks: ranks, Quick: true,
			Run: []string{"port-mapped/", "memory-mapped/get", "device/info"}, Require: []string{}})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Platforms) != 1 {
			t.Fatalf("%d ranks: %d platforms", ranks, len(rep.Platforms))
		}
		p := rep.Platforms[0]
		if p.Network != "socket" || rep.Options.Net != "socket" {
			t.Errorf("%d ranks: report names network %q (options %q), want socket", ranks, p.Network, rep.Options.Net)
		}
		if !p.Available || p.Ranks != ranks {
			t.Fatalf("%d ranks: platform %+v", ranks, p)
		}
		pass := 0
		for _, r := range p.Results {
			switch {
			case r.Section == "port-mapped" && r.Status != conformance.Pass:
				t.Errorf("%d ranks: %s: %s: %s", ranks, r.ID, r.Status, r.Message)
			case r.Section == "port-mapped":
				pass++
			case r.Status != conformance.NotSupported || !strings.Contains(r.Message, "not over a network"):
				t.Errorf("%d ranks: %s: %s: %q, want NotSupported, not over a network", ranks, r.ID, r.Status, r.Message)
			}
		}
		if pass == 0 {
			t.Errorf("%d ranks: no port-mapped test ran:\n%s", ranks, summary(rep))
		}
		var md strings.Builder
		if err := rep.WriteMarkdown(&md); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(md.String(), "over network `socket`") {
			t.Errorf("%d ranks: the Markdown report does not name the network", ranks)
		}
	}
}

// An unavailable network makes every test NotSupported with the probe's
// reason, and a failure when WEFT_REQUIRE names it.
func TestNetUnavailable(t *testing.T) {
	for _, require := range [][]string{{}, {"conftest-down"}} {
		rep, err := conformance.Run(context.Background(), conformance.Options{Backend: "host", Net: "conftest-down", Ranks: 2,
			Run: []string{"port-mapped/", "device/info"}, Require: require})
		if err != nil {
			t.Fatal(err)
		}
		want := conformance.NotSupported
		if len(require) > 0 {
			want = conformance.Fail
		}
		p := rep.Platforms[0]
		if p.Network != "conftest-down" || p.NetworkReason != "no such wire on this machine" {
			t.Errorf("require %v: network %q, reason %q", require, p.Network, p.NetworkReason)
		}
		if len(p.Results) == 0 {
			t.Fatalf("require %v: no results", require)
		}
		for _, r := range p.Results {
			if r.Status != want || !strings.Contains(r.Message, "no such wire on this machine") {
				t.Errorf("require %v: %s: %s: %q, want %s with the probe's reason", require, r.ID, r.Status, r.Message, want)
			}
		}
		if got := rep.Failed(); got != (len(require) > 0) {
			t.Errorf("require %v: Failed() = %v", require, got)
		}
	}
	if _, err := conformance.Run(context.Background(), conformance.Options{Backend: "host", Net: "no-such-net"}); err == nil {
		t.Error("an unknown network was accepted")
	}
}
