package ratelimit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
)

// Fuzz targets. Their seeds (f.Add and testdata/fuzz) run in every go
// test; .ci/fuzz.sh runs each one for a bounded time.

// FuzzKeyByIP checks the forwarding-header walk against a plain reference
// that splits every line and walks the entries from the right, for each
// header kind and trust mode. value is split into header lines at "\n".
func FuzzKeyByIP(f *testing.F) {
	f.Add("10.0.0.1:443", "6.6.6.6, 198.51.100.1, 10.0.0.2", uint8(0))
	f.Add("10.0.0.1:443", "6.6.6.6\n198.51.100.1, 10.0.0.2", uint8(0))
	f.Add("10.0.0.1:443", "bogus, 10.0.0.2", uint8(0))
	f.Add("[::ffff:10.0.0.1]:443", "::ffff:198.51.100.1, fe80::1%eth0", uint8(0))
	f.Add("203.0.113.7:1", "198.51.100.1", uint8(0))
	f.Add("10.0.0.1:443", `for=192.0.2.60;proto=http;by=203.0.113.43, for="[2001:db8:cafe::17]:4711"`, uint8(1))
	f.Add("10.0.0.1:443", "for=6.6.6.6, for=unknown", uint8(1))
	f.Add("10.0.0.1:443", "6.6.6.6\n198.51.100.1", uint8(2))
	f.Add("203.0.113.7:1", "6.6.6.6, 198.51.100.1, 192.0.2.200", uint8(4))
	f.Add("10.0.0.1:443", strings.Repeat("10.0.0.2,", 70)+"10.0.0.2", uint8(0))
	f.Add("10.0.0.1:443", "198.51.100.1,"+strings.Repeat(" ", 120), uint8(0))
	f.Fuzz(func(t *testing.T, remote, value string, mode uint8) {
		trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
		opts := []IPOption{TrustProxies(trusted...)}
		header := hdrXFF
		switch mode % 6 {
		case 1:
			header = hdrForwarded
			opts = append(opts, FromHeader(header))
		case 2:
			header = "X-Real-Ip"
			opts = append(opts, FromHeader(header))
		case 3, 4, 5:
			opts = []IPOption{TrustedHops(int(mode%6) - 2)}
		}
		opts = append(opts, GroupIPv6(int(mode>>3)%128+1))
		k := KeyByIP(opts...)
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		lines := strings.Split(value, "\n")
		r.Header[header] = lines

		got, err := k(r)
		c, cerr := newIPConfig(opts)
		if cerr != nil {
			t.Fatal(cerr)
		}
		peer, ok := peerAddr(remote)
		if !ok {
			if err == nil || !errors.Is(err, ErrNoKey) {
				t.Fatalf("RemoteAddr %q: (%q, %v), want an ErrNoKey error", remote, got, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("RemoteAddr %q: unexpected error %v", remote, err)
		}
		want := c.key(referenceClient(c, peer, lines))
		if got != want {
			t.Fatalf("KeyByIP = %q, reference %q (remote %q, %s %q)", got, want, remote, header, value)
		}
		if c.hops == 0 && !c.isTrusted(peer) && got != c.key(peer) {
			t.Fatalf("untrusted peer %v: key %q, want its own", peer, got)
		}
		rest, ok := strings.CutPrefix(got, "ip:")
		if !ok {
			t.Fatalf("key %q without the ip: prefix", got)
		}
		if _, err := netip.ParseAddr(rest); err != nil {
			if _, err := netip.ParsePrefix(rest); err != nil {
				t.Fatalf("key %q is neither an address nor a prefix", got)
			}
		}
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
// one, and that it reads back the same.
func FuzzParseNode(f *testing.F) {
	for _, s := range []string{"192.0.2.1", " 192.0.2.1:80 ", "[2001:db8::1]:443", "fe80::1%eth0", "::ffff:1.2.3.4", "[1.2.3.4]", "0.0.0.0", "1.2.3.4:", "[::1]x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := parseNode(s)
		if !ok {
			return
		}
		if !a.IsValid() || a.IsUnspecified() || a.Is4In6() || a.Zone() != "" {
			t.Fatalf("parseNode(%q) = %v: not a usable address", s, a)
		}
		if b, ok := parseNode(a.String()); !ok || b != a {
			t.Fatalf("parseNode(%q) = %v, which reads back as (%v, %v)", s, a, b, ok)
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
	} {
		f.Add(s)
	}
	f.Fuzz(checkForwardedElement)
}

// The grammar of RFC 7239 section 4 over RFC 9110's token and
// quoted-string, with the parser's one leniency (unquoted values may hold
// ':', '[' and ']') and OWS around the pairs.
var (
	fwdToken  = "[!#$%&'*+\\-.^_`|~0-9A-Za-z]+"
	fwdValue  = `(?:"(?:[\t \x21\x23-\x5b\x5d-\x7e\x{80}-\x{10ffff}]|\\[\t \x21-\x7e\x{80}-\x{10ffff}])*"|[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]+)`
	fwdPair   = regexp.MustCompile("(" + fwdToken + ")=(" + fwdValue + ")")
	fwdSyntax = regexp.MustCompile("^[ \t]*(?:" + fwdToken + "=" + fwdValue + ")?(?:[ \t]*;[ \t]*(?:" + fwdToken + "=" + fwdValue + ")?)*[ \t]*$")
)

// checkForwardedElement fails t unless parseForwardedElement(e) yields
// exactly what the reference grammar does: the address of the one for=
// pair, whose quoted value holds no escape and no space.
func checkForwardedElement(t *testing.T, e string) {
	got, ok := parseForwardedElement(e)
	var want netip.Addr
	wantOK := len(e) <= maxElementLen && fwdSyntax.MatchString(e)
	if wantOK {
		var fors []string
		for _, m := range fwdPair.FindAllStringSubmatch(e, -1) {
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
				want, wantOK = parseNode(v)
			}
		}
	}
	if ok != wantOK || got != want {
		t.Fatalf("parseForwardedElement(%q) = (%v, %v), the grammar says (%v, %v)", e, got, ok, want, wantOK)
	}
}

// fuzzSecret is the HMAC secret of the JWT fuzz targets.
var fuzzSecret = []byte("0123456789abcdef0123456789abcdef")

// FuzzKeyByJWTSubjectHeader feeds arbitrary Authorization values: a key
// may come back only for a token an independent verification accepts,
// and then it must be its subject.
func FuzzKeyByJWTSubjectHeader(f *testing.F) {
	good, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "exp": 4102444800}).SignedString(fuzzSecret)
	for _, s := range []string{"Bearer " + good, "bearer " + good + " ", "Bearer " + good[:len(good)-2], "Basic YWxpY2U6c2VjcmV0", "Bearer", "Bearer a.b.c", "Bearer ...."} {
		f.Add(s)
	}
	k := KeyByJWTSubject(fuzzSecret)
	f.Fuzz(func(t *testing.T, auth string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header["Authorization"] = []string{auth}
		got, err := k(r)
		if err != nil {
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Status != http.StatusUnauthorized || !strings.HasPrefix(ke.Challenge, "Bearer") {
				t.Fatalf("error %v, want a 401 KeyError with a Bearer challenge", err)
			}
			return
		}
		tok, _ := bearerToken(auth)
		claims := jwt.MapClaims{}
		_, verr := jwt.NewParser(jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired()).
			ParseWithClaims(tok, claims, func(*jwt.Token) (any, error) { return fuzzSecret, nil })
		if verr != nil {
			t.Fatalf("key %q for a token the reference refuses: %v", got, verr)
		}
		if sub, _ := claims.GetSubject(); got != "sub:"+sub || sub == "" {
			t.Fatalf("key %q, want sub:%s", got, sub)
		}
	})
}

// FuzzKeyByJWTSubjectClaims signs fuzzed claims and checks the decision
// against the rules: HS256 only, exp required and in the future, the
// issuer and audience required.
func FuzzKeyByJWTSubjectClaims(f *testing.F) {
	f.Add("alice", int64(3600), true, "iss-A", "aud-A", uint8(0))
	f.Add("alice", int64(-3600), true, "iss-A", "aud-A", uint8(0))
	f.Add("alice", int64(3600), false, "iss-A", "aud-A", uint8(0))
	f.Add("alice", int64(3600), true, "iss-B", "aud-A", uint8(0))
	f.Add("alice", int64(3600), true, "iss-A", "aud-B", uint8(0))
	f.Add("", int64(3600), true, "iss-A", "aud-A", uint8(0))
	f.Add("alice", int64(3600), true, "iss-A", "aud-A", uint8(1))
	f.Add("alice", int64(3600), true, "iss-A", "aud-A", uint8(2))
	k := KeyByJWTSubject(fuzzSecret, JWTIssuer("iss-A"), JWTAudience("aud-A"))
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
			tok, err = jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(fuzzSecret)
		case 1:
			tok, err = jwt.NewWithClaims(jwt.SigningMethodHS512, claims).SignedString(append(fuzzSecret, fuzzSecret...))
		case 2:
			tok, err = jwt.NewWithClaims(jwt.SigningMethodNone, claims).SignedString(jwt.UnsafeAllowNoneSignatureType)
		}
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		got, err := k(r)
		want := alg%3 == 0 && hasExp && expIn > 0 && iss == "iss-A" && aud == "aud-A" && sub != "" && len(tok) <= DefaultJWTMaxLength
		if want && (err != nil || got != "sub:"+sub) {
			t.Fatalf("claims %v (alg %d): (%q, %v), want sub:%s", claims, alg%3, got, err, sub)
		}
		if !want && err == nil {
			t.Fatalf("claims %v (alg %d): key %q, want a refusal", claims, alg%3, got)
		}
	})
}

// FuzzKeyCompose checks that KeyJoin and KeyHashed never make one key of
// two different inputs, and that KeyFirst takes the first key found.
func FuzzKeyCompose(f *testing.F) {
	f.Add("ip:1.2.3.4", "apikey:x", "ip:1.2.3.4|apikey:x", "", uint8(0))
	f.Add("a|b", "c", "a", "b|c", uint8(1))
	f.Add("a%7Cb", "c", "a|b", "c", uint8(2))
	f.Add("%", "|", "%25", "%7C", uint8(3))
	f.Fuzz(func(t *testing.T, a1, b1, a2, b2 string, absent uint8) {
		fixed := func(s string) KeyFunc { return func(*http.Request) (string, error) { return s, nil } }
		join := func(a, b string) string {
			k, err := KeyJoin(fixed(a), fixed(b))(nil)
			if err != nil {
				t.Fatal(err)
			}
			return k
		}
		if same := a1 == a2 && b1 == b2; (join(a1, b1) == join(a2, b2)) != same {
			t.Fatalf("KeyJoin(%q, %q) = %q and KeyJoin(%q, %q) = %q", a1, b1, join(a1, b1), a2, b2, join(a2, b2))
		}
		if (hashKey("", a1) == hashKey("", a2)) != (a1 == a2) {
			t.Fatalf("hashKey(%q) = %q, hashKey(%q) = %q", a1, hashKey("", a1), a2, hashKey("", a2))
		}
		if h := hashKey("", a1); len(h) > 32+len(".sha256:")+22 || !strings.Contains(h, ".sha256:") {
			t.Fatalf("hashKey(%q) = %q: malformed", a1, h)
		}

		// KeyFirst over four extractors, those marked in absent finding
		// nothing.
		var fns []KeyFunc
		want, found := "", false
		for i, s := range []string{a1, b1, a2, b2} {
			if absent&(1<<i) != 0 {
				fns = append(fns, func(*http.Request) (string, error) { return "", noKey(&KeyError{Status: 400 + i}) })
				continue
			}
			fns = append(fns, fixed(s))
			if !found {
				want, found = s, true
			}
		}
		got, err := KeyFirst(fns...)(nil)
		if absent&15 == 15 {
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Status != 400 || !errors.Is(err, ErrNoKey) {
				t.Fatalf("KeyFirst, all absent: (%q, %v), want the first error", got, err)
			}
			return
		}
		if err != nil || got != want {
			t.Fatalf("KeyFirst (absent %04b): (%q, %v), want %q", absent&15, got, err, want)
		}
	})
}

// FuzzMemoryStore runs random operations against a memory store with a
// fake clock and checks every result against a plain reference of the
// sliding log: the same decisions and figures, Remaining in [0, limit],
// RetryAfter of at least 1 ms on every rejection (the clock moves in
// whole milliseconds), and a log never longer than the limit.
//
// Each operation is two bytes: the first picks the key (low two bits)
// and the cost (1 + the next two bits); the second advances the clock,
// by that many milliseconds, times 16 when the high bit of the first
// byte is set.
func FuzzMemoryStore(f *testing.F) {
	f.Add(uint8(3), uint16(1000), uint8(0), uint16(0), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 200, 0, 200, 0, 200, 0, 200, 0, 200})
	f.Add(uint8(2), uint16(100), uint8(5), uint16(3000), []byte{4, 10, 1, 10, 0, 50, 8, 1, 0x80, 255, 0, 0})
	f.Add(uint8(1), uint16(1), uint8(0), uint16(0), []byte{0, 0, 0, 1, 0, 0, 0, 2})
	f.Fuzz(func(t *testing.T, limit uint8, window uint16, limit2 uint8, window2 uint16, ops []byte) {
		policies := []Policy{{Name: "a", Limit: 1 + int(limit%8), Window: time.Duration(1+window%5000) * time.Millisecond}}
		if window2 != 0 {
			policies = append(policies, Policy{Name: "b", Limit: 1 + int(limit2%16), Window: time.Duration(1+window2%20000) * time.Millisecond})
		}
		set := mustSet(t, policies...) // in the order of names, as given
		base := time.Now()
		var off atomic.Int64
		s, err := NewMemoryStore(WithClock(func() time.Time { return base.Add(time.Duration(off.Load())) }))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ref := map[string][][]int64{} // key -> per policy: instants
		keys := []string{"k0", "k1", "k2", "k3"}
		for i := 0; i+1 < len(ops) && i < 2000; i += 2 {
			step := time.Duration(ops[i+1]) * time.Millisecond
			if ops[i]&0x80 != 0 {
				step *= 16
			}
			off.Add(int64(step))
			now := off.Load()
			key := keys[ops[i]&3]
			cost := 1 + int(ops[i]>>2&3)

			got, err := s.Take(context.Background(), key, set, cost)
			want, wantErr := referenceTake(ref, key, policies, now, cost)
			if wantErr != nil {
				if !errors.Is(err, wantErr) {
					t.Fatalf("op %d (%s cost %d): error %v, want %v", i/2, key, cost, err, wantErr)
				}
				continue
			}
			if err != nil {
				t.Fatalf("op %d (%s cost %d): error %v", i/2, key, cost, err)
			}
			if want.At = got.At; got != want {
				t.Fatalf("op %d (%s cost %d at %v): got %+v, reference %+v", i/2, key, cost, time.Duration(now), got, want)
			}
			if got.Remaining < 0 || got.Remaining > got.Limit {
				t.Fatalf("op %d: Remaining %d outside [0, %d]", i/2, got.Remaining, got.Limit)
			}
			if !got.Allowed && got.RetryAfter < time.Millisecond {
				t.Fatalf("op %d: rejected with RetryAfter %v, want at least 1ms", i/2, got.RetryAfter)
			}
			checkLogs(t, s, key, set)
		}
	})
}

// checkLogs checks that no log of key holds more than its policy's limit.
func checkLogs(t *testing.T, s *MemoryStore, key string, set PolicySet) {
	e, sts := findEntry(s, key, set)
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for j := range set.Len() {
		p, st := set.At(j), sts.at(j)
		if int(st.n) > p.Limit || int(st.size()) > p.Limit {
			t.Fatalf("key %s policy %s: %d instants in a ring of %d, limit %d", key, p.Name, st.n, st.size(), p.Limit)
		}
	}
}

// referenceTake is Store.Take written plainly over slices of instants.
func referenceTake(ref map[string][][]int64, key string, policies []Policy, now int64, cost int) (Result, error) {
	for _, p := range policies {
		if cost > p.Limit {
			return Result{}, ErrCostExceedsLimit
		}
	}
	logs := ref[key]
	if logs == nil {
		logs = make([][]int64, len(policies))
		ref[key] = logs
	}
	for i, p := range policies {
		var kept []int64
		for _, at := range logs[i] {
			if at > now-int64(p.Window) {
				kept = append(kept, at)
			}
		}
		logs[i] = kept
	}
	// Rejected: the violated policy with the longest wait (the first of
	// equals).
	var worst *Result
	for i, p := range policies {
		l := logs[i]
		if len(l)+cost <= p.Limit {
			continue
		}
		r := Result{
			Limit:      p.Limit,
			Remaining:  p.Limit - len(l),
			RetryAfter: time.Duration(l[len(l)+cost-p.Limit-1] + int64(p.Window) - now),
			Reset:      time.Duration(l[0] + int64(p.Window) - now),
			Policy:     p.Name,
		}
		if worst == nil || r.RetryAfter > worst.RetryAfter {
			worst = &r
		}
	}
	if worst != nil {
		return *worst, nil
	}
	// Allowed: the fewest remaining, then the longest reset, then the
	// first.
	for i, p := range policies {
		for range cost {
			logs[i] = append(logs[i], now)
		}
		l := logs[i]
		r := Result{
			Allowed:   true,
			Limit:     p.Limit,
			Remaining: p.Limit - len(l),
			Reset:     time.Duration(l[0] + int64(p.Window) - now),
			Policy:    p.Name,
		}
		if worst == nil || r.Remaining < worst.Remaining || r.Remaining == worst.Remaining && r.Reset > worst.Reset {
			worst = &r
		}
	}
	return *worst, nil
}

// FuzzAcceptsProblem checks that any Accept value is parsed without
// panicking, and that naming application/problem+json alone is read as
// asking for it.
func FuzzAcceptsProblem(f *testing.F) {
	for _, s := range []string{"application/problem+json", "a/b;q=0.5, application/problem+json;q=0", "*/*", ";;,,", "application/problem+json;q=NaN", `application/problem+json;x="a,b"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		acceptsProblem([]string{accept})
		if !acceptsProblem([]string{accept, "application/problem+json"}) {
			t.Fatalf("%q then application/problem+json: not read as asking for problem details", accept)
		}
	})
}
