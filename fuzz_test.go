package ratelimit

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// Fuzz targets of the key extractors. Their seeds (f.Add and
// testdata/fuzz) run in every go test; .ci/fuzz.sh runs each one for a
// bounded time.

// FuzzKeyByIP checks the forwarding-header walk against a plain reference
// that splits every line and walks the entries from the right, for each
// header kind and trust mode, and the key against a plain grouping of the
// client's address. value is split into header lines at "\n"; mode picks
// the header or the number of hops (mod 6; with hops, Forwarded if mode
// is 0x80 or more) and the grouping (>> 3).
func FuzzKeyByIP(f *testing.F) {
	f.Add("10.0.0.1:443", "6.6.6.6, 198.51.100.1, 10.0.0.2", uint8(0))
	f.Add("10.0.0.1:443", "6.6.6.6\n198.51.100.1, 10.0.0.2", uint8(0))
	f.Add("10.0.0.1:443", "bogus, 10.0.0.2", uint8(0))
	f.Add("10.0.0.1:443", "198.51.100.1:4711, 10.0.0.2:443", uint8(0))
	f.Add("[::ffff:10.0.0.1]:443", "::ffff:198.51.100.1, fe80::1%eth0", uint8(0))
	f.Add("203.0.113.7:1", "198.51.100.1", uint8(0))
	f.Add("10.0.0.1:443", `for=192.0.2.60;proto=http;by=203.0.113.43, for="[2001:db8:cafe::17]:4711"`, uint8(1))
	f.Add("10.0.0.1:443", "for=6.6.6.6, for=unknown", uint8(1))
	f.Add("10.0.0.1:443", "6.6.6.6\n198.51.100.1", uint8(2))
	f.Add("203.0.113.7:1", "6.6.6.6, 198.51.100.1, 192.0.2.200", uint8(4))
	f.Add("10.0.0.1:443", strings.Repeat("10.0.0.2,", 70)+"10.0.0.2", uint8(0))
	f.Add("10.0.0.1:443", "198.51.100.1,"+strings.Repeat(" ", 120), uint8(0))
	f.Add("[2001:db8:ffff::1]:443", "2001:db8:1:2:3:4:5:6", uint8(0xf8))
	f.Add("203.0.113.7:1", "6.6.6.6\n"+strings.Repeat("x", 120), uint8(4))
	f.Add("203.0.113.7:1", `for=198.51.100.1;host="x,for=6.6.6.6,y", for=192.0.2.200;host="x,for=6.6.6.6,y"`, uint8(130)) // 2 hops (130 % 6 == 4), Forwarded
	f.Fuzz(func(t *testing.T, remote, value string, mode uint8) {
		config := IPConfig{TrustProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}}
		header := hdrXFF
		switch mode % 6 {
		case 1:
			header = hdrForwarded
			config.Header = header
		case 2:
			header = "X-Real-Ip"
			config.Header = header
		case 3, 4, 5:
			config = IPConfig{TrustedHops: int(mode%6) - 2}
			if mode >= 0x80 {
				header = hdrForwarded
				config.Header = header
			}
		}
		config.IPv6Bits = int(mode>>3)%128 + 1
		config.IPv4Bits = 32 - int(mode>>3)%32
		k := KeyByIP(config)
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		lines := strings.Split(value, "\n")
		r.Header[header] = lines

		got, err := k.Key(r)
		c, cerr := newIPConfig(config)
		require.NoError(t, cerr)
		peer, ok := peerAddr(remote)
		if !ok {
			require.ErrorIs(t, err, ErrNoKey, "RemoteAddr %q: key %q", remote, got)
			return
		}
		require.NoError(t, err, "RemoteAddr %q", remote)
		want := referenceClient(c, peer, lines)
		require.Equal(t, want, c.client(r, peer), "client (remote %q, %s %q)", remote, header, value)
		if c.hops == 0 && !c.isTrusted(peer) {
			require.Equal(t, peer, want, "untrusted peer: the client is the peer itself")
		}

		// The key: the client's address, or its network when grouped.
		bits := config.IPv4Bits
		if want.Is6() {
			bits = config.IPv6Bits
		}
		wantKey := "ip:" + want.String()
		if bits < want.BitLen() {
			wantKey = "ip:" + netip.PrefixFrom(want, bits).Masked().String()
		}
		require.Equal(t, wantKey, got, "key of client %v grouped by %d bits", want, bits)
	})
}

// referenceClient is the walk of KeyByIP written plainly: split all,
// reverse, walk.
func referenceClient(c *ipConfig, peer netip.Addr, lines []string) netip.Addr {
	if c.hops == 0 && !c.isTrusted(peer) {
		return peer
	}
	if c.kind == headerSingle {
		if a, ok := parseNode(lines[len(lines)-1]); ok {
			return a
		}
		return peer
	}
	var entries []string
	for _, l := range lines {
		entries = append(entries, strings.Split(l, ",")...)
	}
	maxLen := maxEntryLen
	if c.kind == headerForwarded {
		maxLen = maxElementLen
	}
	for n := 1; n <= min(len(entries), maxHops); n++ {
		e := entries[len(entries)-n]
		if len(e) > maxLen {
			return peer
		}
		a, ok := c.parseEntry(e)
		if c.hops > 0 {
			if n < c.hops && c.kind == headerForwarded && !keysFwdSyntax.MatchString(e) {
				return peer // a proxy's element cut inside a quoted string
			}
			if n == c.hops {
				if ok {
					return a
				}
				return peer
			}
			continue
		}
		if !ok {
			return peer
		}
		if !c.isTrusted(a) {
			return a
		}
	}
	return peer
}

// FuzzParseNode checks that whatever parses as an address is a usable
// one, that it reads back the same, and that a quoted Forwarded for= of
// it is read as the grammar says.
func FuzzParseNode(f *testing.F) {
	for _, s := range []string{"192.0.2.1", " 192.0.2.1:80 ", "[2001:db8::1]:443", "fe80::1%eth0", "::ffff:1.2.3.4", "[1.2.3.4]", "0.0.0.0", "1.2.3.4:", "[::1]x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := parseNode(s)
		if ok {
			require.True(t, a.IsValid() && !a.IsUnspecified() && !a.Is4In6() && a.Zone() == "", "parseNode(%q) = %v: not a usable address", s, a)
			b, ok := parseNode(a.String())
			require.True(t, ok && b == a, "parseNode(%q) = %v, which reads back as (%v, %v)", s, a, b, ok)
		}
		checkForwardedElement(t, "for=\""+s+"\"")
	})
}

// FuzzParseForwardedElement checks the RFC 7239 element parser against
// the reference grammar below.
func FuzzParseForwardedElement(f *testing.F) {
	for _, s := range []string{
		"for=192.0.2.60;proto=http;by=203.0.113.43", `for="[2001:db8:cafe::17]:4711"`, "For=198.51.100.1:80",
		`for="1::%0";="`, `for="1.2.3.4";a="b"`, `for="1.2.3.4";a="b;for=5.6.7.8"`, `for="1.2.3.4\"`,
		";;for=1.2.3.4;", "for = 1.2.3.4", "for=1.2.3.4;proto=h\"ttp", `proto="\\";for=[::1]`, "for=unknown",
		"for=1.2.3.4 by=5.6.7.8", `for="1.2.3.4:_p"`, `for="[::1]:_a.b-c_d"`, `for="::1:_p"`, `for="1.2.3.4:_"`,
	} {
		f.Add(s)
	}
	f.Fuzz(checkForwardedElement)
}

// The grammar of RFC 7239 section 4 over RFC 9110's token and
// quoted-string, with the parser's one leniency (unquoted values may hold
// ':', '[' and ']') and OWS around the pairs.
var (
	keysFwdToken  = "[!#$%&'*+\\-.^_`|~0-9A-Za-z]+"
	keysFwdValue  = `(?:"(?:[\t \x21\x23-\x5b\x5d-\x7e\x{80}-\x{10ffff}]|\\[\t \x21-\x7e\x{80}-\x{10ffff}])*"|[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]+)`
	keysFwdPair   = regexp.MustCompile("(" + keysFwdToken + ")=(" + keysFwdValue + ")")
	keysFwdSyntax = regexp.MustCompile("^[ \t]*(?:" + keysFwdToken + "=" + keysFwdValue + ")?(?:[ \t]*;[ \t]*(?:" + keysFwdToken + "=" + keysFwdValue + ")?)*[ \t]*$")
	// A node with an obfuscated port (section 6.3), an IPv6 address
	// bracketed: group 1 is the node without it.
	keysFwdObfport = regexp.MustCompile(`^([^:]*|\[.*\]):_[A-Za-z0-9._-]+$`)
)

// checkForwardedElement fails t unless parseForwardedElement(e) yields
// exactly what the reference grammar does: the address of the one for=
// pair, whose quoted value holds no escape and no space, without an
// obfuscated port.
func checkForwardedElement(t *testing.T, e string) {
	got, ok := parseForwardedElement(e)
	var want netip.Addr
	wantOK := len(e) <= maxElementLen && keysFwdSyntax.MatchString(e)
	if wantOK {
		var fors []string
		for _, m := range keysFwdPair.FindAllStringSubmatch(e, -1) {
			if strings.EqualFold(m[1], "for") {
				fors = append(fors, m[2])
			}
		}
		wantOK = len(fors) == 1
		if wantOK {
			v := fors[0]
			if v[0] == '"' {
				v = v[1 : len(v)-1]
				wantOK = !strings.ContainsAny(v, "\\ \t")
			}
			if wantOK {
				if m := keysFwdObfport.FindStringSubmatch(v); m != nil {
					v = m[1]
				}
				want, wantOK = parseNode(v)
			}
		}
	}
	require.True(t, ok == wantOK && got == want, "parseForwardedElement(%q) = (%v, %v), the grammar says (%v, %v)", e, got, ok, want, wantOK)
}

// keysFuzzSecret is the HMAC secret of the JWT fuzz targets.
var keysFuzzSecret = []byte("0123456789abcdef0123456789abcdef")

// FuzzKeyByJWTSubjectHeader feeds arbitrary Authorization values: a key
// may come back only for a token an independent verification accepts,
// and then it must be its subject.
func FuzzKeyByJWTSubjectHeader(f *testing.F) {
	good, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "exp": 4102444800}).SignedString(keysFuzzSecret)
	for _, s := range []string{"Bearer " + good, "bearer " + good + " ", "Bearer " + good[:len(good)-2], "Basic YWxpY2U6c2VjcmV0", "Bearer", "Bearer a.b.c", "Bearer ...."} {
		f.Add(s)
	}
	k := KeyByJWTSubject(keysFuzzSecret)
	f.Fuzz(func(t *testing.T, auth string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header["Authorization"] = []string{auth}
		got, err := k.Key(r)
		if err != nil {
			var ke *KeyError
			require.True(t, errors.As(err, &ke) && ke.Status == http.StatusUnauthorized && strings.HasPrefix(ke.Challenge, "Bearer"),
				"error %v, want a 401 KeyError with a Bearer challenge", err)
			return
		}
		tok, _ := bearerToken(auth)
		claims := jwt.MapClaims{}
		_, verr := jwt.NewParser(jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired()).
			ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return keysFuzzSecret, nil })
		require.NoError(t, verr, "key %q for a token the reference refuses", got)
		sub, _ := claims.GetSubject()
		require.NotEmpty(t, sub, "key %q for a token without a subject", got)
		require.Equal(t, "sub:"+sub, got)
	})
}

// FuzzKeyByJWTSubjectClaims signs fuzzed claims and checks the decision
// against the rules: HS256 only, exp required and in the future, and the
// issuer and audience required where the config names them.
func FuzzKeyByJWTSubjectClaims(f *testing.F) {
	f.Add("alice", int64(3600), true, "iss-A", "aud-A", uint8(0))
	f.Add("alice", int64(-3600), true, "iss-A", "aud-A", uint8(0))
	f.Add("alice", int64(3600), false, "iss-A", "aud-A", uint8(0))
	f.Add("alice", int64(3600), true, "iss-B", "aud-A", uint8(0))
	f.Add("alice", int64(3600), true, "iss-A", "aud-B", uint8(0))
	f.Add("", int64(3600), true, "iss-A", "aud-A", uint8(0))
	f.Add("alice", int64(3600), true, "iss-A", "aud-A", uint8(1))
	f.Add("alice", int64(3600), true, "iss-A", "aud-A", uint8(2))
	strict := KeyByJWTSubject(keysFuzzSecret, JWTConfig{Issuer: "iss-A", Audience: []string{"aud-A"}})
	lax := KeyByJWTSubject(keysFuzzSecret)
	f.Fuzz(func(t *testing.T, sub string, expIn int64, hasExp bool, iss, aud string, alg uint8) {
		if !utf8.ValidString(sub) || !utf8.ValidString(iss) || !utf8.ValidString(aud) {
			return // JSON would rewrite them
		}
		if expIn > -10 && expIn < 10 || expIn > 1<<32 || expIn < -(1<<32) {
			return // too close to now to call, or out of the range of dates
		}
		now := time.Now()
		claims := jwt.MapClaims{"sub": sub, "iss": iss, "aud": aud}
		if hasExp {
			claims["exp"] = now.Unix() + expIn
		}
		var tok string
		var err error
		switch alg % 3 {
		case 0:
			tok, err = jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(keysFuzzSecret)
		case 1:
			tok, err = jwt.NewWithClaims(jwt.SigningMethodHS512, claims).SignedString(append(keysFuzzSecret, keysFuzzSecret...))
		case 2:
			tok, err = jwt.NewWithClaims(jwt.SigningMethodNone, claims).SignedString(jwt.UnsafeAllowNoneSignatureType)
		}
		require.NoError(t, err)
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tok)

		valid := alg%3 == 0 && hasExp && expIn > 0 && sub != "" && len(tok) <= defaultJWTMaxLength
		for _, c := range []struct {
			name string
			k    Keyer
			want bool
		}{
			{"strict", strict, valid && iss == "iss-A" && aud == "aud-A"},
			{"lax", lax, valid},
		} {
			got, err := c.k.Key(r)
			if c.want {
				require.NoError(t, err, "%s: claims %v (alg %d)", c.name, claims, alg%3)
				require.Equal(t, "sub:"+sub, got, "%s: claims %v", c.name, claims)
			} else {
				require.Error(t, err, "%s: claims %v (alg %d): key %q, want a refusal", c.name, claims, alg%3, got)
			}
		}
	})
}

// FuzzKeyCompose checks that KeyJoin and KeyHashed never make one key of
// two different inputs, that a key too long to keep is digested as the
// same key kept whole would be, and that KeyFirst takes the first key
// found.
func FuzzKeyCompose(f *testing.F) {
	f.Add("ip:1.2.3.4", "apikey:x", "ip:1.2.3.4|apikey:x", "", uint8(0))
	f.Add("a|b", "c", "a", "b|c", uint8(1))
	f.Add("a%7Cb", "c", "a|b", "c", uint8(2))
	f.Add("%", "|", "%25", "%7C", uint8(3))
	f.Add("k", "v", "k", "w", uint8(0x10))
	f.Add("k", "v", "k|v", "", uint8(0x30))
	f.Fuzz(func(t *testing.T, a1, b1, a2, b2 string, absent uint8) {
		fixed := func(s string) Keyer { return KeyFunc(func(*http.Request) (string, error) { return s, nil }) }
		join := func(a, b string) string {
			k, err := KeyJoin(fixed(a), fixed(b)).Key(nil)
			require.NoError(t, err)
			return k
		}
		same := a1 == a2 && b1 == b2
		require.Equal(t, same, join(a1, b1) == join(a2, b2), "KeyJoin(%q, %q) = %q and KeyJoin(%q, %q) = %q", a1, b1, join(a1, b1), a2, b2, join(a2, b2))
		require.Equal(t, a1 == a2, hashKey("", a1) == hashKey("", a2), "hashKey(%q) = %q, hashKey(%q) = %q", a1, hashKey("", a1), a2, hashKey("", a2))
		h := hashKey("", a1)
		require.True(t, len(h) <= len("apikey.sha256:")+22 && strings.Contains(h, ".sha256:"), "hashKey(%q) = %q: malformed", a1, h)
		require.Equal(t, hashKey("", "apikey:"+a1), hashKey("apikey:", a1), "key %q digested in two parts", "apikey:"+a1)

		// KeyHashed over KeyJoin digests the whole join, whether its
		// parts are short or too long to keep (bits 4 and 5 of absent),
		// and KeyJoin alone refuses a join with a part too long.
		part := func(s string, long bool) Keyer {
			if !long {
				return fixed("apikey:" + s)
			}
			return KeyFunc(func(*http.Request) (string, error) {
				return "", &longKey{KeyError: &KeyError{Status: http.StatusRequestHeaderFieldsTooLarge}, kind: "apikey:", value: s}
			})
		}
		long1, long2 := absent&16 != 0, absent&32 != 0
		parts := []Keyer{part(a1, long1), part(b1, long2)}
		hashed, err := KeyHashed(KeyJoin(parts...)).Key(nil)
		require.NoError(t, err)
		require.Equal(t, hashKey("", join("apikey:"+a1, "apikey:"+b1)), hashed, "KeyHashed(KeyJoin(%q, %q)), too long: %v, %v", a1, b1, long1, long2)
		// Nested, behind a part of any kind: escaped twice.
		nested, err := KeyHashed(KeyJoin(fixed(a2), KeyJoin(part(a1, long1), fixed(b2)))).Key(nil)
		require.NoError(t, err)
		require.Equal(t, hashKey("", join(a2, join("apikey:"+a1, b2))), nested, "KeyHashed(KeyJoin(%q, KeyJoin(%q, %q))), too long: %v", a2, a1, b2, long1)
		if _, err := KeyJoin(parts...).Key(nil); long1 || long2 {
			var ke *KeyError
			require.True(t, errors.As(err, &ke) && ke.Status == http.StatusRequestHeaderFieldsTooLarge, "KeyJoin with a part too long: error %v, want a 431", err)
		} else {
			require.NoError(t, err)
		}

		// KeyFirst over four extractors, those marked in absent finding
		// nothing.
		var keys []Keyer
		want, found := "", false
		for i, s := range []string{a1, b1, a2, b2} {
			if absent&(1<<i) != 0 {
				keys = append(keys, KeyFunc(func(*http.Request) (string, error) { return "", noKey(&KeyError{Status: 400 + i}) }))
				continue
			}
			keys = append(keys, fixed(s))
			if !found {
				want, found = s, true
			}
		}
		got, err := KeyFirst(keys...).Key(nil)
		if absent&15 == 15 {
			var ke *KeyError
			require.True(t, errors.As(err, &ke) && ke.Status == 400 && errors.Is(err, ErrNoKey), "KeyFirst, all absent: (%q, %v), want the first error", got, err)
			return
		}
		require.NoError(t, err, "KeyFirst (absent %04b)", absent&15)
		require.Equal(t, want, got, "KeyFirst (absent %04b)", absent&15)
	})
}
