package ratelimit

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
)

// An IPOption configures KeyByIP: see TrustProxies, TrustedHops,
// FromHeader, GroupIPv6 and GroupIPv4. A nil IPOption is a configuration
// error.
type IPOption func(*ipConfig)

type ipConfig struct {
	trusted []netip.Prefix // peers and hops in these ranges are proxies
	hops    int            // or: this many proxies, whatever their address
	header  string         // canonical name of the forwarding header
	kind    headerKind
	fromSet bool // FromHeader was given
	v6Bits  int  // IPv6 clients are grouped by this prefix length
	v4Bits  int  // IPv4 clients are grouped by this prefix length
	errs    []error
}

// headerKind says how a forwarding header lists addresses.
type headerKind int

const (
	headerXFF       headerKind = iota // X-Forwarded-For: "client, proxy1, proxy2"
	headerForwarded                   // RFC 7239 Forwarded: "for=client, for=proxy1"
	headerSingle                      // one address, set (not appended) by the proxy
)

const (
	hdrXFF       = "X-Forwarded-For"
	hdrForwarded = "Forwarded"

	// maxHops is how many entries of a forwarding header KeyByIP looks
	// at, counted from the right. Real chains are a handful of proxies;
	// the cap bounds the work a hostile header can cause, whatever its
	// length or number of lines.
	maxHops = 64

	// maxEntryLen is the longest entry worth parsing: a bracketed IPv6
	// address with a zone and a port fits well within it.
	maxEntryLen = 100

	// maxElementLen is the longest RFC 7239 element worth parsing: room
	// for for=, by=, proto= and a host= name.
	maxElementLen = 512
)

// TrustProxies names the proxies in front of the server, as address
// ranges (a single address is a /32 or /128 prefix). When the direct peer
// is in one of them, KeyByIP reads the forwarding header (FromHeader,
// default X-Forwarded-For) and takes as the client the rightmost address
// that is not. List only addresses that belong to your proxies: an address
// in a trusted range is skipped over, so a client inside one could name
// itself anyone. Prefixes are matched against unmapped addresses, so an
// IPv4-mapped IPv6 prefix such as ::ffff:10.0.0.0/104 is taken as
// 10.0.0.0/8. An invalid prefix is a configuration error.
func TrustProxies(prefixes ...netip.Prefix) IPOption {
	return func(c *ipConfig) {
		for _, p := range prefixes {
			if !p.IsValid() {
				c.errs = append(c.errs, fmt.Errorf("ratelimit: TrustProxies: invalid prefix %q", p.String()))
				continue
			}
			if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
			}
			c.trusted = append(c.trusted, p.Masked())
		}
		if len(prefixes) == 0 {
			c.errs = append(c.errs, errors.New("ratelimit: TrustProxies: no prefixes"))
		}
	}
}

// TrustedHops says that exactly n proxies (1 to 64) stand between clients
// and the server, whatever their addresses: the direct peer is the
// nearest, and the client is the n-th address from the right of the
// forwarding header. Use it only when the server cannot be reached except
// through those proxies (a platform router whose addresses are not
// published), since a client that reaches the server directly is then
// trusted as a proxy and may name itself anyone. Prefer TrustProxies; the
// two cannot be combined.
func TrustedHops(n int) IPOption {
	return func(c *ipConfig) {
		if n < 1 || n > maxHops {
			c.errs = append(c.errs, fmt.Errorf("ratelimit: TrustedHops: %d, want 1 to %d", n, maxHops))
		}
		c.hops = n
	}
}

// FromHeader selects the header trusted proxies write the client's address
// into (default X-Forwarded-For). "X-Forwarded-For" and "Forwarded" (RFC
// 7239, its for= parameters; an element that breaks the RFC's grammar is
// garbage and ends the walk) are lists that each proxy appends to; any
// other name, such as "X-Real-IP" or "CF-Connecting-IP", is taken to hold
// one address that the nearest proxy sets, replacing whatever the client
// sent, and only its last line is read. The header is read only when the
// direct peer is trusted, so FromHeader without TrustProxies or
// TrustedHops is a configuration error, as is an empty name.
func FromHeader(name string) IPOption {
	return func(c *ipConfig) {
		c.fromSet = true
		if name == "" || strings.ContainsAny(name, " \t\r\n:") {
			c.errs = append(c.errs, fmt.Errorf("ratelimit: FromHeader: invalid header name %q", name))
			return
		}
		c.header = textproto.CanonicalMIMEHeaderKey(name)
		switch c.header {
		case hdrXFF:
			c.kind = headerXFF
		case hdrForwarded:
			c.kind = headerForwarded
		default:
			c.kind = headerSingle
		}
	}
}

// GroupIPv6 makes KeyByIP count IPv6 clients by the network of the first
// bits bits of their address (1 to 128; default 64). One subscriber
// usually holds a whole /64, often a /56 or /48, and can rotate addresses
// within it freely: grouping by less than that lets one client multiply
// its quota. 128 counts each address apart.
func GroupIPv6(bits int) IPOption {
	return func(c *ipConfig) {
		if bits < 1 || bits > 128 {
			c.errs = append(c.errs, fmt.Errorf("ratelimit: GroupIPv6: %d bits, want 1 to 128", bits))
		}
		c.v6Bits = bits
	}
}

// GroupIPv4 makes KeyByIP count IPv4 clients by the network of the first
// bits bits of their address (1 to 32; default 32, each address apart),
// for example 24 to count a /24 as one client.
func GroupIPv4(bits int) IPOption {
	return func(c *ipConfig) {
		if bits < 1 || bits > 32 {
			c.errs = append(c.errs, fmt.Errorf("ratelimit: GroupIPv4: %d bits, want 1 to 32", bits))
		}
		c.v4Bits = bits
	}
}

// KeyByIP keys requests by the client's IP address, as "ip:" followed by
// the address or, when grouped, its network ("ip:192.0.2.7",
// "ip:2001:db8:1:2::/64").
//
// # Trust model
//
// With no options the client is the direct peer, r.RemoteAddr, and
// X-Forwarded-For, Forwarded, X-Real-IP and the like are ignored: any
// client can write them, so trusting them by default would let anyone pick
// the address it is counted as, a fresh one per request to dodge the limit
// or a victim's to lock the victim out. There is no safe default header.
//
// Behind a load balancer or reverse proxy every request comes from the
// proxy, so configure it: TrustProxies with the proxies' address ranges
// (or TrustedHops with their number), and FromHeader if they do not write
// X-Forwarded-For. Then, and only for a request whose direct peer is
// trusted, KeyByIP walks every line of the header from the right, skips
// addresses in trusted ranges, and takes the first one that is not as the
// client. The leftmost address, which the client wrote, is never believed
// for being leftmost. An entry that is not an address (garbage, "unknown",
// an obfuscated RFC 7239 identifier) ends the walk, since what lies to its
// left was written by someone no trusted proxy vouches for. When the walk
// finds no client (no header, only trusted addresses, garbage, or more
// than 64 entries of proxies), the key is the direct peer's address: the
// proxy's, shared by all such requests, never a value the client chose.
//
// IPv4-mapped IPv6 addresses count as IPv4 and zones are dropped. IPv6
// clients are grouped by /64 (GroupIPv6), so one subscriber cannot dodge
// the limit by rotating addresses within its block. A RemoteAddr that is
// not an IP address (a Unix socket) is answered 400; the error matches
// ErrNoKey, so KeyFirst moves on to its next extractor.
//
// Invalid options (a prefix that is not valid, bits out of range,
// FromHeader without a trusted proxy, ...) are reported by New; the
// KeyFunc itself then answers every request with 500.
//
// # Before going live
//
//   - Find out which proxies really stand in front of the server, and which
//     header each one writes: one that appends (X-Forwarded-For, Forwarded)
//     or one that overwrites (X-Real-IP, CF-Connecting-IP).
//   - Trust exactly their ranges, published ones for a CDN, your subnet
//     for a load balancer; never 0.0.0.0/0 nor ranges your clients use.
//   - Make sure the server cannot be reached except through them (firewall
//     or security group), or drop TrustedHops for TrustProxies.
//   - From outside, send a request with "X-Forwarded-For: 192.0.2.1" (and
//     the header you chose) and check, with FromContext or your logs, that
//     the key is your real address and not 192.0.2.1.
//   - From outside, send requests without any header and check they are
//     not all counted as the proxy's address (which would mean the peer is
//     not trusted, or the proxy writes another header).
//
// The KeyFunc is safe for simultaneous use. It reads at most 64 entries
// of a forwarding header and allocates only the key it returns.
func KeyByIP(opts ...IPOption) KeyFunc {
	c, err := newIPConfig(opts)
	if err != nil {
		return brokenKeyFunc(err)
	}
	bad := noKey(&KeyError{Status: http.StatusBadRequest, Message: "400 Bad Request: no client address"})
	return func(r *http.Request) (string, error) {
		peer, ok := peerAddr(r.RemoteAddr)
		if !ok {
			return "", bad
		}
		return c.key(c.client(r, peer)), nil
	}
}

// newIPConfig lays the defaults, applies opts and validates the result.
func newIPConfig(opts []IPOption) (*ipConfig, error) {
	c := &ipConfig{header: hdrXFF, kind: headerXFF, v6Bits: 64, v4Bits: 32}
	for _, o := range opts {
		if o == nil {
			c.errs = append(c.errs, errors.New("ratelimit: KeyByIP: nil IPOption"))
			continue
		}
		o(c)
	}
	if len(c.trusted) > 0 && c.hops > 0 {
		c.errs = append(c.errs, errors.New("ratelimit: KeyByIP: TrustProxies and TrustedHops cannot be combined"))
	}
	if c.fromSet && len(c.trusted) == 0 && c.hops == 0 {
		c.errs = append(c.errs, errors.New("ratelimit: KeyByIP: FromHeader without TrustProxies or TrustedHops would never be read"))
	}
	return c, errors.Join(c.errs...)
}

// peerAddr parses an "ip:port" or bare IP address as net/http sets
// RemoteAddr, unmapped and without its zone.
func peerAddr(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	a, ok := parseNode(s)
	return a, ok
}

// client returns the client's address, given the direct peer's.
func (c *ipConfig) client(r *http.Request, peer netip.Addr) netip.Addr {
	if c.hops == 0 && !c.isTrusted(peer) {
		return peer
	}
	lines := r.Header[c.header]
	if len(lines) == 0 {
		return peer
	}
	if c.kind == headerSingle {
		if a, ok := parseNode(lines[len(lines)-1]); ok {
			return a
		}
		return peer
	}
	// Walk the entries from the right: the last line's last entry is the
	// one the nearest proxy added.
	maxLen := maxEntryLen
	if c.kind == headerForwarded {
		maxLen = maxElementLen
	}
	seen := 0
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		for {
			if seen == maxHops {
				return peer
			}
			seen++
			// Look for the comma only as far back as an entry may
			// reach, so a huge entry costs no more than a short one.
			tail := line
			if len(tail) > maxLen+1 {
				tail = tail[len(tail)-maxLen-1:]
			}
			j := strings.LastIndexByte(tail, ',')
			if j < 0 && len(tail) < len(line) {
				return peer // an entry longer than any address
			}
			if j >= 0 {
				j += len(line) - len(tail)
			}
			entry := line[j+1:]
			if c.hops > 0 {
				// Position alone says who wrote the entry: the n-1 to the
				// right of the client's are the proxies' own.
				if seen == c.hops {
					if a, ok := c.parseEntry(entry); ok {
						return a
					}
					return peer
				}
			} else {
				a, ok := c.parseEntry(entry)
				if !ok {
					return peer
				}
				if !c.isTrusted(a) {
					return a
				}
			}
			if j < 0 {
				break
			}
			line = line[:j]
		}
	}
	return peer
}

// isTrusted reports whether a is in a trusted range.
func (c *ipConfig) isTrusted(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseEntry parses one entry of the forwarding header.
func (c *ipConfig) parseEntry(s string) (netip.Addr, bool) {
	if c.kind == headerForwarded {
		return parseForwardedElement(s)
	}
	return parseNode(s)
}

// parseNode parses an address as proxies write it: "192.0.2.1",
// "192.0.2.1:8080", "2001:db8::1", "[2001:db8::1]" or "[2001:db8::1]:8080",
// with optional surrounding spaces. The address comes back unmapped and
// without its zone; the unspecified address is refused.
func parseNode(s string) (netip.Addr, bool) {
	s = trimOWS(s)
	if len(s) == 0 || len(s) > maxEntryLen {
		return netip.Addr{}, false
	}
	var a netip.Addr
	var err error
	switch {
	case s[0] == '[':
		end := strings.IndexByte(s, ']')
		if end < 0 || !optionalPort(s[end+1:]) {
			return netip.Addr{}, false
		}
		if a, err = netip.ParseAddr(s[1:end]); err != nil || !a.Is6() {
			return netip.Addr{}, false
		}
	default:
		if a, err = netip.ParseAddr(s); err != nil {
			// An IPv4 address with a port: exactly one colon.
			i := strings.IndexByte(s, ':')
			if i < 0 || !optionalPort(s[i:]) {
				return netip.Addr{}, false
			}
			if a, err = netip.ParseAddr(s[:i]); err != nil || !a.Is4() {
				return netip.Addr{}, false
			}
		}
	}
	a = a.Unmap().WithZone("")
	if a.IsUnspecified() {
		return netip.Addr{}, false
	}
	return a, true
}

// optionalPort reports whether s is empty or ":" and a port number.
func optionalPort(s string) bool {
	if s == "" {
		return true
	}
	if s[0] != ':' || len(s) < 2 || len(s) > 6 {
		return false
	}
	n := 0
	for _, ch := range []byte(s[1:]) {
		if ch < '0' || ch > '9' {
			return false
		}
		n = n*10 + int(ch-'0')
	}
	return n <= 65535
}

// parseForwardedElement returns the address of the for= parameter of one
// RFC 7239 element ("for=192.0.2.60;proto=http;by=203.0.113.43"). The
// element must follow the RFC's grammar: pairs of a token, "=" and a value,
// separated by ";" (empty pairs allowed). A value is a quoted-string or,
// leniently, since proxies write unquoted IPv6 addresses and ports, a run
// of visible characters other than a quote, a backslash, ';' and ','. An
// element that breaks the grammar, that has no for= pair or two, or whose
// quoted for= value holds an escape or a space, yields nothing: a header
// the proxy did not write is never read as an address.
func parseForwardedElement(s string) (netip.Addr, bool) {
	if len(s) > maxElementLen {
		return netip.Addr{}, false
	}
	var val string
	found, quoted := false, false
	for {
		s = trimOWS(s)
		if s == "" {
			break
		}
		if s[0] == ';' {
			s = s[1:]
			continue
		}
		n := tokenLen(s)
		if n == 0 || n == len(s) || s[n] != '=' {
			return netip.Addr{}, false
		}
		name := s[:n]
		s = s[n+1:]
		q := s != "" && s[0] == '"'
		if q {
			n = quotedLen(s)
		} else {
			n = bareValueLen(s)
		}
		if n == 0 {
			return netip.Addr{}, false
		}
		v := s[:n]
		s = trimOWS(s[n:])
		if s != "" && s[0] != ';' {
			return netip.Addr{}, false
		}
		if strings.EqualFold(name, "for") {
			if found {
				return netip.Addr{}, false
			}
			val, found, quoted = v, true, q
		}
	}
	if !found {
		return netip.Addr{}, false
	}
	if quoted {
		val = val[1 : len(val)-1]
		if strings.ContainsAny(val, "\\ \t") {
			return netip.Addr{}, false
		}
	}
	return parseNode(val)
}

// tokenLen returns the length of the RFC 9110 token that starts s.
func tokenLen(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return i
		}
	}
	return len(s)
}

// quotedLen returns the length of the RFC 9110 quoted-string that starts
// s, quotes included, or 0 if s does not start with a whole one.
func quotedLen(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '"':
			return i + 1
		case '\\': // a quoted-pair: any text byte may follow
			i++
			if i == len(s) || !isText(s[i]) {
				return 0
			}
		default:
			if !isText(s[i]) {
				return 0
			}
		}
	}
	return 0
}

// isText reports whether c is a tab, a space, a visible ASCII character
// or obs-text: what may stand in a quoted-string, quotes and backslashes
// aside.
func isText(c byte) bool { return c == '\t' || c >= ' ' && c != 0x7f }

// bareValueLen returns the length of the unquoted value that starts s.
func bareValueLen(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' || c == ';' || c == ',' {
			return i
		}
	}
	return len(s)
}

// trimOWS trims the optional white space of HTTP (spaces and tabs).
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// key returns the namespaced key of a, grouped by the configured prefix.
// It makes one allocation, the key.
func (c *ipConfig) key(a netip.Addr) string {
	bits := c.v4Bits
	if a.Is6() {
		bits = c.v6Bits
	}
	var buf [64]byte
	b := append(buf[:0], "ip:"...)
	if bits < a.BitLen() {
		p, _ := a.Prefix(bits)
		b = p.AppendTo(b)
	} else {
		b = a.AppendTo(b)
	}
	return string(b)
}
