package ratelimit

import (
	"net"
	"net/http"
	"net/netip"
)

// An IPOption configures KeyByIP.
type IPOption func(*ipConfig)

type ipConfig struct {
	v6Bits int // IPv6 addresses are grouped by this prefix length
}

// KeyByIP keys requests by the client's IP address.
//
// With no options the client is the direct peer, r.RemoteAddr, and
// X-Forwarded-For, X-Real-IP and Forwarded are ignored: any client can
// write them, so trusting them by default would let anyone pick the
// address it is counted as, its own or a victim's.
//
// IPv4-mapped IPv6 addresses count as IPv4 and zones are dropped. IPv6
// addresses are grouped by their /64, the block one subscriber typically
// holds, so that one client cannot dodge the limit by rotating addresses.
func KeyByIP(opts ...IPOption) KeyFunc {
	c := ipConfig{v6Bits: 64}
	for _, o := range opts {
		o(&c)
	}
	bad := &KeyError{Status: http.StatusBadRequest, Message: "400 Bad Request: no client address"}
	return func(r *http.Request) (string, error) {
		addr, ok := peerAddr(r.RemoteAddr)
		if !ok {
			return "", bad
		}
		return c.key(addr), nil
	}
}

// peerAddr parses an "ip:port" or bare IP address as net/http sets
// RemoteAddr.
func peerAddr(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr(), true
	}
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		host = s
	}
	a, err := netip.ParseAddr(host)
	return a, err == nil
}

// key returns the namespaced key of addr, grouped by the configured prefix.
func (c *ipConfig) key(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if a.Is6() && c.v6Bits < 128 {
		p, _ := a.Prefix(c.v6Bits)
		var buf [64]byte
		b := append(buf[:0], "ip:"...)
		b = p.AppendTo(b)
		return string(b)
	}
	var buf [64]byte
	b := append(buf[:0], "ip:"...)
	b = a.AppendTo(b)
	return string(b)
}
