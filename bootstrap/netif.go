package bootstrap

import (
	"fmt"
	"net"
	"strings"

	"github.com/weftccl/weft/hal"
	"github.com/weftccl/weft/internal/env"
)

// socketIfname returns WEFT_SOCKET_IFNAME.
func socketIfname() string { return env.String("WEFT_SOCKET_IFNAME") }

// interfaceIP returns the address to bind on the interface selected by
// spec, a comma-separated list of interface names or name prefixes (as
// NCCL_SOCKET_IFNAME: "eth0", "ib,eth"). The first interface, in the order
// of the list, that is up and has an address wins; IPv4 is preferred over
// IPv6, and link-local addresses are skipped. The error wraps
// hal.ErrInvalidArgument and lists the interfaces that exist.
func interfaceIP(spec string) (net.IP, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("bootstrap: list network interfaces: %w: %w", err, hal.ErrSystem)
	}
	var names []string
	for _, want := range strings.Split(spec, ",") {
		want = strings.TrimSpace(want)
		if want == "" {
			continue
		}
		for _, ifc := range ifs {
			if !strings.HasPrefix(ifc.Name, want) || ifc.Flags&net.FlagUp == 0 {
				continue
			}
			if ip := pickIP(ifc); ip != nil {
				return ip, nil
			}
		}
	}
	for _, ifc := range ifs {
		names = append(names, ifc.Name)
	}
	return nil, fmt.Errorf("bootstrap: WEFT_SOCKET_IFNAME=%q matches no interface that is up with an address (have %s): %w",
		spec, strings.Join(names, ", "), hal.ErrInvalidArgument)
}

func pickIP(ifc net.Interface) net.IP {
	addrs, err := ifc.Addrs()
	if err != nil {
		return nil
	}
	var v6 net.IP
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		if ip4 := ipn.IP.To4(); ip4 != nil {
			return ip4
		}
		if v6 == nil {
			v6 = ipn.IP
		}
	}
	return v6
}
