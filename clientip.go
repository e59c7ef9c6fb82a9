package ratelimit

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
)

// IPConfig configures KeyByIP. The zero IPConfig trusts no proxy: the
// client is the direct peer, whatever headers it sends.
type IPConfig struct {
	// TrustProxies names the proxies in front of the server, as address
	// ranges (a single address is a /32 or /128 prefix). When the direct
	// peer is in one of them, KeyByIP reads the forwarding header (Header)
	// and takes as the client the rightmost address that is not. List
	// only addresses that belong to your proxies: an address in a trusted
	// range is skipped over, so a client inside one could name itself
	// anyone. Prefixes are matched against unmapped addresses, so an
	// IPv4-mapped IPv6 prefix such as ::ffff:10.0.0.0/104 is taken as
	// 10.0.0.0/8.
	TrustProxies []netip.Prefix
	// TrustedHops says that exactly this many proxies (1 to 64) stand
	// between clients and the server, whatever their addresses: the direct
	// peer is the nearest, and the client is the TrustedHops-th address
	// from the right of the forwarding header. Use it only when the
	// server cannot be reached except through those proxies (a platform
	// router whose addresses are not published), since a client that
	// reaches the server directly is then trusted as a proxy and may name
	// itself anyone. Prefer TrustProxies; the two cannot be combined.
	TrustedHops int
	// Header is the header trusted proxies write the client's address
	// into (default X-Forwarded-For). "X-Forwarded-For" and "Forwarded"
	// (RFC 7239, its for= parameters; an element that breaks the RFC's
	// grammar is garbage and ends the walk) are lists that each proxy
	// appends to; any other name, such as "X-Real-IP" or
	// "CF-Connecting-IP", is taken to hold one address that the nearest
	// proxy sets, replacing whatever the client sent, and only its last
	// line is read. It is read only when the direct peer is trusted, so a
	// Header without TrustProxies or TrustedHops is a configuration error.
	Header string
	// IPv6Bits groups IPv6 clients by the network of their first IPv6Bits
	// bits (1 to 128; 0 for 64). One subscriber usually holds a whole
	// /64, often a /56 or /48, and can rotate addresses within it freely:
	// grouping by less than that lets one client multiply its quota. 128
	// counts each address apart.
	IPv6Bits int
	// IPv4Bits groups IPv4 clients by the network of their first IPv4Bits
	// bits (1 to 32; 0 for 32, each address apart), for example 24 to
	// count a /24 as one client.
	IPv4Bits int
}

// ipConfig is an IPConfig as KeyByIP uses it.
type ipConfig struct {
	trusted []netip.Prefix // peers and hops in these ranges are proxies
	hops    int            // or: this many proxies, whatever their address
	header  string         // canonical name of the forwarding header
	kind    headerKind
	v6Bits  int // IPv6 clients are grouped by this prefix length
	v4Bits  int // IPv4 clients are grouped by this prefix length
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

// KeyByIP keys requests by the client's IP address, as "ip:" followed by
// the address or, when grouped, its network ("ip:192.0.2.7",
// "ip:2001:db8:1:2::/64"). A request may pass at most one IPConfig.
//
// # Trust model
//
// With no IPConfig the client is the direct peer, r.RemoteAddr, and
// X-Forwarded-For, Forwarded, X-Real-IP and the like are ignored: any
// client can write them, so trusting them by default would let anyone pick
// the address it is counted as, a fresh one per request to dodge the limit
// or a victim's to lock the victim out. There is no safe default header.
//
// Behind a load balancer or reverse proxy every request comes from the
// proxy, so configure it: TrustProxies with the proxies' address ranges
// (or TrustedHops with their number), and Header if they do not write
// X-Forwarded-For. Then, and only for a request whose direct peer is
// trusted, KeyByIP walks every line of the header from the right, skips
// addresses in trusted ranges, and takes the first one that is not as the
// client. The leftmost address, which the client wrote, is never believed
// for being leftmost. An entry that is not an address (garbage, "unknown",
// an obfuscated RFC 7239 node such as "_hidden") ends the walk, since what
// lies to its left was written by someone no trusted proxy vouches for;
// one whose port alone is obfuscated ("192.0.2.1:_p") is an address.
// When the walk finds no client (no header, only trusted addresses,
// garbage, or more than 64 entries of proxies), the key is the direct
// peer's address: the proxy's, shared by all such requests, never a value
// the client chose.
//
// IPv4-mapped IPv6 addresses count as IPv4 and zones are dropped. IPv6
// clients are grouped by /64 (IPv6Bits), so one subscriber cannot dodge
// the limit by rotating addresses within its block. A request that came
// over a Unix socket, or whose RemoteAddr is not an IP address, is
// answered 400 (a Unix socket's client names its own end, and may give it
// the name of any address); the error matches ErrNoKey, so KeyFirst moves
// on to its next extractor.
//
// An invalid IPConfig (a prefix that is not valid, bits out of range, a
// Header without a trusted proxy, ...) is reported by New; the Keyer
// itself then answers every request with 500.
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
// The Keyer is safe for simultaneous use. It reads at most 64 entries of
// a forwarding header and allocates only the key it returns.
func KeyByIP(config ...IPConfig) Keyer {
	if len(config) > 1 {
		return misconfigured{errors.New("ratelimit: KeyByIP: more than one IPConfig")}
	}
	var given IPConfig
	if len(config) == 1 {
		given = config[0]
	}
	c, err := newIPConfig(given)
	if err != nil {
		return misconfigured{err}
	}
	bad := noKey(&KeyError{Status: http.StatusBadRequest, Message: "400 Bad Request: no client address"})
	return KeyFunc(func(r *http.Request) (string, error) {
		peer, ok := peerAddr(r.RemoteAddr)
		if !ok || overUnixSocket(r) {
			return "", bad
		}
		return c.key(c.client(r, peer)), nil
	})
}

// overUnixSocket reports whether r came over a Unix socket, whose client
// names its own end as it likes, an "ip:port" included: net/http gives
// that name as RemoteAddr, and it is no address to count or to trust.
func overUnixSocket(r *http.Request) bool {
	a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && strings.HasPrefix(a.Network(), "unix")
}

// newIPConfig lays the defaults over g and validates the result.
func newIPConfig(g IPConfig) (*ipConfig, error) {
	c := &ipConfig{header: hdrXFF, kind: headerXFF, hops: g.TrustedHops, v6Bits: 64, v4Bits: 32}
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("ratelimit: KeyByIP: "+format, args...))
	}
	c.trusted = trustedRanges(g.TrustProxies, fail)
	if g.TrustedHops < 0 || g.TrustedHops > maxHops {
		fail("TrustedHops %d, want 1 to %d", g.TrustedHops, maxHops)
	}
	if len(g.TrustProxies) > 0 && g.TrustedHops != 0 {
		fail("TrustProxies and TrustedHops cannot be combined")
	}
	if g.Header != "" {
		if len(g.TrustProxies) == 0 && g.TrustedHops == 0 {
			fail("a Header without TrustProxies or TrustedHops would never be read")
		}
		c.header, c.kind = forwardingHeader(g.Header, fail)
	}
	c.v6Bits = groupBits("IPv6Bits", g.IPv6Bits, 128, c.v6Bits, fail)
	c.v4Bits = groupBits("IPv4Bits", g.IPv4Bits, 32, c.v4Bits, fail)
	return c, errors.Join(errs...)
}

// trustedRanges returns the valid prefixes of ps masked, with IPv4-mapped
// ones unmapped, since KeyByIP matches them against unmapped addresses,
// and calls fail for each invalid one.
func trustedRanges(ps []netip.Prefix, fail func(format string, args ...any)) []netip.Prefix {
	var trusted []netip.Prefix
	for _, p := range ps {
		if !p.IsValid() {
			fail("invalid trusted prefix %q", p.String())
			continue
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		trusted = append(trusted, p.Masked())
	}
	return trusted
}

// forwardingHeader returns the canonical form of the header name and how
// that header lists addresses, and calls fail if name is not a valid
// header name.
func forwardingHeader(name string, fail func(format string, args ...any)) (string, headerKind) {
	if strings.ContainsAny(name, " \t\r\n:") {
		fail("invalid header name %q", name)
	}
	name = textproto.CanonicalMIMEHeaderKey(name)
	switch name {
	case hdrXFF:
		return name, headerXFF
	case hdrForwarded:
		return name, headerForwarded
	}
	return name, headerSingle
}

// groupBits returns bits, the prefix length set in the named field, or
// def if it is 0, and calls fail if it is outside 1 to maxBits.
func groupBits(field string, bits, maxBits, def int, fail func(format string, args ...any)) int {
	if bits == 0 {
		return def
	}
	if bits < 1 || bits > maxBits {
		fail("%s %d, want 1 to %d", field, bits, maxBits)
	}
	return bits
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
	if a, ok := c.walk(lines); ok {
		return a
	}
	return peer
}

// walk returns the client named in the lines of a list header, or false
// when the walk ends without one (garbage, too many entries, or only
// proxies): the caller then keys by the peer, never by what the client
// wrote.
func (c *ipConfig) walk(lines []string) (netip.Addr, bool) {
	w := entryWalk{lines: lines, maxLen: maxEntryLen}
	if c.kind == headerForwarded {
		w.maxLen = maxElementLen
	}
	for {
		entry, ok := w.next()
		if !ok {
			return netip.Addr{}, false
		}
		if c.hops > 0 {
			// Position alone says who wrote the entry: the hops-1 to
			// the right of the client's are the proxies' own. A
			// Forwarded element must still keep to the grammar: one
			// that does not was cut at a comma inside a quoted string
			// (a host= echoing the client's Host), which shifts every
			// position to its left.
			if w.seen < c.hops {
				if c.kind == headerForwarded && !wellFormed(entry) {
					return netip.Addr{}, false
				}
				continue
			}
			return c.parseEntry(entry)
		}
		// An address in a trusted range is a proxy's: the client is
		// further left.
		a, ok := c.parseEntry(entry)
		if !ok || !c.isTrusted(a) {
			return a, ok
		}
	}
}

// entryWalk yields the entries of a list header from the right: the last
// line's last entry is the one the nearest proxy added. Its zero value
// with lines and maxLen set is ready to use.
type entryWalk struct {
	lines  []string // lines not yet started; the last one is next
	rest   string   // what is left of the current line
	inLine bool     // rest holds at least one more entry, if only ""
	maxLen int      // the longest entry worth reading
	seen   int      // entries yielded so far
}

// next returns the next entry to the left, or false when there is none
// or the walk must stop: after maxHops entries, which bounds the work of
// a hostile header whatever its length or number of lines, or at an entry
// longer than maxLen.
func (w *entryWalk) next() (string, bool) {
	if !w.inLine {
		if len(w.lines) == 0 {
			return "", false
		}
		last := len(w.lines) - 1
		w.rest, w.lines, w.inLine = w.lines[last], w.lines[:last], true
	}
	if w.seen == maxHops {
		return "", false
	}
	w.seen++
	j, ok := lastComma(w.rest, w.maxLen)
	if !ok {
		return "", false
	}
	entry := w.rest[j+1:]
	if j < 0 {
		w.inLine = false
	} else {
		w.rest = w.rest[:j]
	}
	return entry, true
}

// lastComma returns the index of the last comma of line, or -1 if it has
// none. It looks for the comma only among the last maxLen+1 bytes, so that
// a huge entry costs no more than a short one, and reports false when the
// last entry is longer than maxLen: longer than any the header may hold.
func lastComma(line string, maxLen int) (int, bool) {
	tail := line
	if len(tail) > maxLen+1 {
		tail = tail[len(tail)-maxLen-1:]
	}
	j := strings.LastIndexByte(tail, ',')
	if j < 0 {
		return -1, len(line) <= maxLen
	}
	return j + len(line) - len(tail), true
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
	var ok bool
	switch {
	case s[0] == '[':
		end := strings.IndexByte(s, ']')
		if end < 0 || !optionalPort(s[end+1:]) || !addrBytes(s[1:end]) {
			return netip.Addr{}, false
		}
		if a, ok = parseAddr(s[1:end]); !ok || !a.Is6() {
			return netip.Addr{}, false
		}
	default:
		// A failed netip.ParseAddr allocates its error: parse only what
		// may be an address, and split an IPv4 address from its port
		// (exactly one colon; an IPv6 address has two or more) first.
		if !addrBytes(s) {
			return netip.Addr{}, false
		}
		if i := strings.IndexByte(s, ':'); i >= 0 && strings.IndexByte(s[i+1:], ':') < 0 {
			if !optionalPort(s[i:]) {
				return netip.Addr{}, false
			}
			if a, ok = parseAddr(s[:i]); !ok || !a.Is4() {
				return netip.Addr{}, false
			}
		} else if a, ok = parseAddr(s); !ok {
			return netip.Addr{}, false
		}
	}
	a = a.Unmap()
	if a.IsUnspecified() {
		return netip.Addr{}, false
	}
	return a, true
}

// parseAddr parses an IP address and an optional zone, which it drops
// unread, as netip.ParseAddr would: a zone only after an IPv6 address, and
// not empty. netip.ParseAddr would intern the zone, which allocates for
// each one it has not seen, and a client can name a fresh one per entry.
func parseAddr(s string) (netip.Addr, bool) {
	s, zone, zoned := strings.Cut(s, "%")
	if zoned && zone == "" {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s)
	if err != nil || zoned && !a.Is6() {
		return netip.Addr{}, false
	}
	return a, true
}

// addrBytes reports whether s, up to a zone's "%", holds only the bytes
// of IP addresses and ports: hex digits, '.' and ':'.
func addrBytes(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '%':
			return true
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
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
// the proxy did not write is never read as an address. An obfuscated port
// is dropped.
func parseForwardedElement(s string) (netip.Addr, bool) {
	if len(s) > maxElementLen {
		return netip.Addr{}, false
	}
	val, fors, ok := forwardedFor(s)
	if !ok || fors != 1 {
		return netip.Addr{}, false
	}
	if val[0] == '"' {
		val = val[1 : len(val)-1]
		if strings.ContainsAny(val, "\\ \t") {
			return netip.Addr{}, false
		}
	}
	return parseNode(withoutObfport(val))
}

// withoutObfport returns the node v without its port if that is an
// obfuscated one (RFC 7239, section 6.3: "_" and letters, digits, ".",
// "_" or "-"), which hides the port but not the address: such a node
// names its client as well as one with a port number.
func withoutObfport(v string) string {
	i := strings.LastIndexByte(v, ':')
	if i < 0 || !obfuscated(v[i+1:]) {
		return v
	}
	if node := v[:i]; strings.HasSuffix(node, "]") || !strings.Contains(node, ":") {
		return node
	}
	return v // an unbracketed IPv6 address has no port
}

// obfuscated reports whether s is an obfuscated identifier of RFC 7239.
func obfuscated(s string) bool {
	if len(s) < 2 || s[0] != '_' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// forwardedFor returns the value of the last for= pair of an element as
// written, quotes included, and the number of its for= pairs, or false if
// the element breaks the grammar. Every pair is checked, not just up to
// for=, so that an element is read only if all of it is well formed.
func forwardedFor(s string) (val string, fors int, ok bool) {
	for {
		s = trimOWS(s)
		if s == "" {
			return val, fors, true
		}
		if s[0] == ';' {
			s = s[1:]
			continue
		}
		name, v, rest, ok := cutPair(s)
		if !ok {
			return "", 0, false
		}
		if strings.EqualFold(name, "for") {
			val, fors = v, fors+1
		}
		s = rest
	}
}

// wellFormed reports whether s is an RFC 7239 element, whatever its
// for= pairs.
func wellFormed(s string) bool {
	_, _, ok := forwardedFor(s)
	return ok
}

// cutPair cuts the name=value pair that starts s from the rest of the
// element, which is empty or starts with the ';' before the next pair. A
// value is never empty, and starts with a quote only if it is a
// quoted-string.
func cutPair(s string) (name, value, rest string, ok bool) {
	n := tokenLen(s)
	if n == 0 || n == len(s) || s[n] != '=' {
		return "", "", "", false
	}
	name, s = s[:n], s[n+1:]
	if s != "" && s[0] == '"' {
		n = quotedLen(s)
	} else {
		n = bareValueLen(s)
	}
	if n == 0 {
		return "", "", "", false
	}
	value, rest = s[:n], trimOWS(s[n:])
	if rest != "" && rest[0] != ';' {
		return "", "", "", false
	}
	return name, value, rest, true
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
