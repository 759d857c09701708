package socket

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/weftccl/weft/hal"
)

func TestParseIfSpec(t *testing.T) {
	cases := []struct {
		in   string
		want ifSpec
	}{
		{"", ifSpec{}},
		{"eth", ifSpec{names: []string{"eth"}}},
		{"eth, ib ,", ifSpec{names: []string{"eth", "ib"}}},
		{"=eth0", ifSpec{exact: true, names: []string{"eth0"}}},
		{"^docker", ifSpec{exclude: true, names: []string{"docker"}}},
		{"^=docker0,lo", ifSpec{exclude: true, exact: true, names: []string{"docker0", "lo"}}},
		{" ^eth", ifSpec{exclude: true, names: []string{"eth"}}},
	}
	for _, c := range cases {
		if diff := cmp.Diff(c.want, parseIfSpec(c.in), cmp.AllowUnexported(ifSpec{})); diff != "" {
			t.Errorf("parseIfSpec(%q) (-want +got):\n%s", c.in, diff)
		}
	}
}

// TestChooseInterface is the WEFT_SOCKET_IFNAME table: which interface
// each spec picks from one machine's list, and what a failure says.
func TestChooseInterface(t *testing.T) {
	ip := net.ParseIP
	machine := []iface{
		{name: "lo", up: true, loopback: true, addrs: []net.IP{ip("127.0.0.1"), ip("::1")}},
		{name: "docker0", up: true, addrs: []net.IP{ip("172.17.0.1")}},
		{name: "eth0", up: true, addrs: []net.IP{ip("fe80::1"), ip("10.0.0.2")}},
		{name: "eth1", up: true, addrs: []net.IP{ip("fe80::2"), ip("fd00::3")}},
		{name: "eth2", up: false, addrs: []net.IP{ip("10.0.2.2")}},
		{name: "ib0", up: true, addrs: []net.IP{ip("192.168.1.5")}},
		{name: "ifb0", up: true},
	}
	cases := []struct {
		spec    string
		ifs     []iface
		want    string // interface, or "" for none
		wantIP  string
		reason  string // part of the reason
		oneHost bool   // every rank on this host
	}{
		{"", machine, "eth0", "10.0.0.2", "first interface that is up", false},
		{"", machine, "lo", "127.0.0.1", "every rank is on this host", true},
		{"", machine[1:], "eth0", "10.0.0.2", "first interface that is up", true}, // no loopback: as without oneHost
		{"ib", machine, "ib0", "192.168.1.5", "WEFT_SOCKET_IFNAME=ib", true},
		{"", machine[:2], "lo", "127.0.0.1", "loopback reaches this host only", false},
		{"", nil, "", "", "no interface is up", false},
		{"eth", machine, "eth0", "10.0.0.2", "WEFT_SOCKET_IFNAME=eth", false},
		{"ib,eth", machine, "ib0", "192.168.1.5", "", false},
		{"eth,ib", machine, "eth0", "10.0.0.2", "", false},
		{"=eth1", machine, "eth1", "fd00::3", "", false},
		{"=eth", machine, "", "", "matches WEFT_SOCKET_IFNAME==eth", false},
		{"eth2", machine, "", "", "eth2 (down, 10.0.2.2)", false},
		{"ifb", machine, "", "", "ifb0 (up, no usable address)", false},
		{"^eth,docker,lo", machine, "ib0", "192.168.1.5", "", false},
		{"^=eth0", machine, "docker0", "172.17.0.1", "", false},
		{"^docker,eth,ib", machine, "lo", "127.0.0.1", "", false},
		{"^docker,eth,ib,lo", machine, "", "", "interfaces: lo (up, 127.0.0.1), docker0", false},
		{"lo", machine, "lo", "127.0.0.1", "", false},
		{"eth9", machine, "", "", "matches WEFT_SOCKET_IFNAME=eth9", false},
	}
	for _, c := range cases {
		ifc, gotIP, reason, ok := chooseInterface(c.spec, c.ifs, c.oneHost)
		if ok != (c.want != "") || ifc.name != c.want || (ok && gotIP.String() != c.wantIP) {
			t.Errorf("spec %q (one host %v): chose %q %v (ok %v, %s), want %q %s", c.spec, c.oneHost, ifc.name, gotIP, ok, reason, c.want, c.wantIP)
		}
		if !strings.Contains(reason, c.reason) {
			t.Errorf("spec %q: reason %q, want it to mention %q", c.spec, reason, c.reason)
		}
	}
}

func FuzzChooseInterface(f *testing.F) {
	f.Add("^=eth0,,ib")
	f.Fuzz(func(t *testing.T, spec string) {
		ifs := []iface{{name: "lo", up: true, loopback: true, addrs: []net.IP{net.ParseIP("127.0.0.1")}}, {name: "eth0", up: true}}
		if x, ip, _, ok := chooseInterface(spec, ifs, false); ok && (x.name != "lo" || ip == nil) {
			t.Fatalf("spec %q chose %q %v", spec, x.name, ip)
		}
	})
}

func TestParseBytes(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"512KiB", 512 << 10, true}, {"512K", 512 << 10, true}, {"1MiB", 1 << 20, true}, {"4m", 4 << 20, true},
		{"65536", 65536, true}, {"64 KB", 64 << 10, true}, {"1G", 1 << 30, true}, {"7B", 7, true},
		{"", 0, false}, {"KiB", 0, false}, {"1.5M", 0, false}, {"12XB", 0, false}, {"-4K", 0, false},
		{"99999999999999999999", 0, false}, {"9999999999999G", 0, false},
	}
	for _, c := range cases {
		got, err := parseBytes(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

func FuzzParseBytes(f *testing.F) {
	f.Add("512KiB")
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := parseBytes(s); err == nil && n < 0 {
			t.Fatalf("parseBytes(%q) = %d", s, n)
		}
	})
}

func TestOptionsFromEnv(t *testing.T) {
	t.Setenv("WEFT_SOCKET_NSOCKS", "3")
	t.Setenv("WEFT_SOCKET_CHUNK", "64KiB")
	t.Setenv("WEFT_SOCKET_IFNAME", "=lo")
	t.Setenv("WEFT_TIMEOUT", "3s")
	t.Setenv("WEFT_SOCKET_SPIN_US", "0")
	t.Setenv("WEFT_SOCKET_PEEK", "0")
	o, err := OptionsFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Options{Conns: 3, Chunk: 64 << 10, IfName: "=lo", Timeout: 3 * time.Second, spinSet: true, NoPeek: true}, o, cmp.AllowUnexported(Options{})); diff != "" {
		t.Errorf("options (-want +got):\n%s", diff)
	}
	// A given spin stays (0: park at once); unset takes DefaultSpin.
	if d, err := o.withDefaults(); err != nil || d.Spin != 0 {
		t.Errorf("WEFT_SOCKET_SPIN_US=0: spin %v, %v; want 0", d.Spin, err)
	}
	if d, err := (Options{}).withDefaults(); err != nil || d.Spin != DefaultSpin {
		t.Errorf("no spin given: %v, %v; want %v", d.Spin, err, DefaultSpin)
	}
	if d, err := (Options{Spin: 30 * time.Microsecond, spinSet: true}).withDefaults(); err != nil || d.Spin != 30*time.Microsecond {
		t.Errorf("a spin of 30 µs: %v, %v", d.Spin, err)
	}
	t.Setenv("WEFT_SOCKET_SPIN_US", "20")
	t.Setenv("WEFT_SOCKET_PEEK", "")
	if o, err := OptionsFromEnv(); err != nil || o.Spin != 20*time.Microsecond || o.NoPeek {
		t.Errorf("WEFT_SOCKET_SPIN_US=20, WEFT_SOCKET_PEEK unset: spin %v, no peek %v, %v; want peeking", o.Spin, o.NoPeek, err)
	}
	for _, c := range []struct{ name, val string }{
		{"WEFT_SOCKET_NSOCKS", "0"}, {"WEFT_SOCKET_NSOCKS", "65"}, {"WEFT_SOCKET_NSOCKS", "two"},
		{"WEFT_SOCKET_CHUNK", "100"}, {"WEFT_SOCKET_CHUNK", "1GiB"}, {"WEFT_SOCKET_CHUNK", "big"},
		{"WEFT_SOCKET_SPIN_US", "-1"}, {"WEFT_SOCKET_SPIN_US", "2000000"}, {"WEFT_SOCKET_SPIN_US", "soon"},
		{"WEFT_SOCKET_PEEK", "maybe"},
	} {
		t.Run(c.name+"="+c.val, func(t *testing.T) {
			t.Setenv(c.name, c.val)
			_, err := OptionsFromEnv()
			errorMentions(t, err, hal.ErrInvalidArgument, c.name)
		})
	}
}

// TestRegisteredNetwork opens the transport through the registry, as
// package channels will, with the environment's options.
func TestRegisteredNetwork(t *testing.T) {
	n, err := hal.LookupNetwork("socket")
	if err != nil {
		t.Fatal(err)
	}
	if a := n.Probe(); !a.Available || a.Reason == "" {
		t.Fatalf("probe: %+v", a)
	} else {
		t.Logf("probe: %s", a.Reason)
	}
	t.Setenv("WEFT_SOCKET_IFNAME", "eth9,nosuch")
	if a := n.Probe(); a.Available || !strings.Contains(a.Reason, "WEFT_SOCKET_IFNAME=eth9,nosuch") {
		t.Errorf("probe with no matching interface: %+v", a)
	}
	job := newJob()
	dev, err := hal.Open("host", hal.Config{JobID: job})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	_, err = n.Open(dev, hal.NetConfig{Rank: 0, NRanks: 1, JobID: job})
	errorMentions(t, err, hal.ErrNotSupported, "eth9")
	t.Setenv("WEFT_SOCKET_IFNAME", "lo")
	t.Setenv("WEFT_SOCKET_NSOCKS", "3")
	nd, err := n.Open(dev, hal.NetConfig{Rank: 0, NRanks: 1, JobID: job})
	if err != nil {
		t.Fatal(err)
	}
	if got := nd.(*NetDevice); got.opts.Conns != 3 || got.opts.Chunk != DefaultChunk || !strings.HasPrefix(got.ListenAddr(), "127.0.0.1:") {
		t.Errorf("opened with %+v on %s", got.opts, got.ListenAddr())
	}
	if err := nd.Close(); err != nil {
		t.Fatal(err)
	}
	if err := nd.Close(); !errors.Is(err, hal.ErrInvalidUsage) {
		t.Errorf("second close: %v, want ErrInvalidUsage", err)
	}
	_, err = Open(dev, hal.NetConfig{Rank: 2, NRanks: 2, JobID: job}, Options{})
	errorMentions(t, err, hal.ErrInvalidArgument, "rank 2 of 2")
	_, err = Open(dev, hal.NetConfig{Rank: 0, NRanks: 1, JobID: job}, Options{Chunk: 10})
	errorMentions(t, err, hal.ErrInvalidArgument, "chunk of 10 bytes")
}
