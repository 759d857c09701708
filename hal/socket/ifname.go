package socket

import (
	"fmt"
	"net"
	"strings"

	"github.com/weftccl/weft/hal"
)

// ifSpec is a parsed WEFT_SOCKET_IFNAME, with NCCL_SOCKET_IFNAME's syntax:
// a comma-separated list of interface-name prefixes; a leading "^" turns
// the whole list into exclusions, and a leading "=" (after the "^", if
// any) makes the names exact instead of prefixes. "eth,ib" uses interfaces
// whose names start with eth or ib; "=eth0" only eth0; "^docker" anything
// but docker*; "^=docker0" anything but docker0.
type ifSpec struct {
	exclude bool
	exact   bool
	names   []string
}

func parseIfSpec(s string) ifSpec {
	var sp ifSpec
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "^") {
		sp.exclude, s = true, s[1:]
	}
	if strings.HasPrefix(s, "=") {
		sp.exact, s = true, s[1:]
	}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			sp.names = append(sp.names, f)
		}
	}
	return sp
}

// matches reports whether the list names name (before exclusion is
// applied).
func (sp ifSpec) matches(name string) bool {
	for _, n := range sp.names {
		if sp.exact && name == n || !sp.exact && strings.HasPrefix(name, n) {
			return true
		}
	}
	return false
}

// iface is what interface selection looks at; tests build their own.
type iface struct {
	name     string
	up       bool
	loopback bool
	addrs    []net.IP
}

// systemInterfaces lists the machine's interfaces in the kernel's order.
func systemInterfaces() ([]iface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("socket: list network interfaces: %v: %w", err, hal.ErrSystem)
	}
	out := make([]iface, 0, len(ifs))
	for _, ifc := range ifs {
		x := iface{name: ifc.Name, up: ifc.Flags&net.FlagUp != 0, loopback: ifc.Flags&net.FlagLoopback != 0}
		if as, err := ifc.Addrs(); err == nil {
			for _, a := range as {
				if ipn, ok := a.(*net.IPNet); ok {
					x.addrs = append(x.addrs, ipn.IP)
				}
			}
		}
		out = append(out, x)
	}
	return out, nil
}

// usableIP is the address to listen on: the first IPv4 address, else the
// first IPv6 address that is not link-local (link-local addresses need a
// zone that peers cannot know).
func (x iface) usableIP() net.IP {
	var v6 net.IP
	for _, ip := range x.addrs {
		if ip.IsLinkLocalUnicast() || ip.IsUnspecified() {
			continue
		}
		if ip4 := ip.To4(); ip4 != nil {
			return ip4
		}
		if v6 == nil {
			v6 = ip
		}
	}
	return v6
}

func (x iface) describe() string {
	state := "down"
	if x.up {
		state = "up"
	}
	if ip := x.usableIP(); ip != nil {
		return fmt.Sprintf("%s (%s, %s)", x.name, state, ip)
	}
	return fmt.Sprintf("%s (%s, no usable address)", x.name, state)
}

// chooseInterface picks the interface to listen on for spec (the value of
// WEFT_SOCKET_IFNAME), among ifs in system order:
//
//   - empty, with oneHost (every rank of the job on this host: emulated
//     nodes): the loopback interface, so that nothing listens beyond the
//     host;
//   - empty: the first interface that is up, not loopback and not docker*
//     with a usable address, else the loopback interface;
//   - a list: the first interface, in the order of the list, that the list
//     names, is up and has a usable address;
//   - an exclusion list: the first interface that is up with a usable
//     address and not excluded, non-loopback ones before loopback.
//
// reason describes the choice, or why there is none: what the spec was,
// and every interface seen with its state.
func chooseInterface(spec string, ifs []iface, oneHost bool) (ifc iface, ip net.IP, reason string, ok bool) {
	usable := func(x iface) bool { return x.up && x.usableIP() != nil }
	sp := parseIfSpec(spec)
	pick := func(x iface, why string) (iface, net.IP, string, bool) {
		return x, x.usableIP(), fmt.Sprintf("%s %s (%s)", x.name, x.usableIP(), why), true
	}
	switch {
	case len(sp.names) == 0 && oneHost:
		for _, x := range ifs {
			if usable(x) && x.loopback {
				return pick(x, "every rank is on this host: loopback, nothing listens beyond it")
			}
		}
		fallthrough
	case len(sp.names) == 0:
		for _, x := range ifs {
			if usable(x) && !x.loopback && !strings.HasPrefix(x.name, "docker") {
				return pick(x, "first interface that is up, not loopback and not docker")
			}
		}
		for _, x := range ifs {
			if usable(x) && x.loopback {
				return pick(x, "no other interface is up; loopback reaches this host only")
			}
		}
	case sp.exclude:
		for _, loop := range []bool{false, true} {
			for _, x := range ifs {
				if usable(x) && x.loopback == loop && !sp.matches(x.name) {
					return pick(x, fmt.Sprintf("WEFT_SOCKET_IFNAME=%s", spec))
				}
			}
		}
	default:
		for _, n := range sp.names {
			one := ifSpec{exact: sp.exact, names: []string{n}}
			for _, x := range ifs {
				if usable(x) && one.matches(x.name) {
					return pick(x, fmt.Sprintf("WEFT_SOCKET_IFNAME=%s", spec))
				}
			}
		}
	}
	seen := make([]string, 0, len(ifs))
	for _, x := range ifs {
		seen = append(seen, x.describe())
	}
	have := strings.Join(seen, ", ")
	if have == "" {
		have = "none"
	}
	if len(sp.names) == 0 {
		return iface{}, nil, fmt.Sprintf("no interface is up with a usable address (interfaces: %s)", have), false
	}
	return iface{}, nil, fmt.Sprintf("no interface that is up with a usable address matches WEFT_SOCKET_IFNAME=%s (interfaces: %s)", spec, have), false
}
