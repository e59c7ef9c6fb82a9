package ratelimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/slidelog/ratelimit"
)

// keysShow prints the key k finds for r, or its error.
func keysShow(k ratelimit.Keyer, r *http.Request) {
	key, err := k.Key(r)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(key)
}

// With no IPConfig, KeyByIP counts the direct peer and ignores forwarding
// headers, which any client can write.
func ExampleKeyByIP() {
	k := ratelimit.KeyByIP()

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "203.0.113.7:51234"
	r.Header.Set("X-Forwarded-For", "198.51.100.9") // a lie
	keysShow(k, r)

	r.RemoteAddr = "[2001:db8:1:2:aaaa::1]:443" // IPv6: grouped by /64
	keysShow(k, r)
	// Output:
	// ip:203.0.113.7
	// ip:2001:db8:1:2::/64
}

// Behind a load balancer in 10.0.0.0/8 that appends to X-Forwarded-For:
// the client is the rightmost address that is not the balancer's, and
// whatever the client wrote to the left of it is ignored.
func ExampleKeyByIP_trustProxies() {
	k := ratelimit.KeyByIP(ratelimit.IPConfig{
		TrustProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	})

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.3.4:40000"                                        // the balancer
	r.Header.Set("X-Forwarded-For", "198.51.100.9, 203.0.113.7, 10.0.1.1") // spoof, client, inner proxy
	keysShow(k, r)

	r.RemoteAddr = "192.0.2.50:40000" // not the balancer: the header is not read
	keysShow(k, r)
	// Output:
	// ip:203.0.113.7
	// ip:192.0.2.50
}

// Behind a proxy on the same host that sets X-Real-IP, replacing what the
// client sent, with IPv6 clients counted by /56.
func ExampleKeyByIP_header() {
	k := ratelimit.KeyByIP(ratelimit.IPConfig{
		TrustProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Header:       "X-Real-IP",
		IPv6Bits:     56,
	})
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "127.0.0.1:40000"
	r.Header.Set("X-Real-IP", "203.0.113.7")
	keysShow(k, r)

	r.Header.Set("X-Real-IP", "2001:db8:1:2ff::1")
	keysShow(k, r)
	// Output:
	// ip:203.0.113.7
	// ip:2001:db8:1:200::/56
}

// An invalid IPConfig is an error from New, with every reason at once.
func ExampleKeyByIP_invalid() {
	_, err := ratelimit.New(100, time.Minute, ratelimit.KeyByIP(ratelimit.IPConfig{
		Header:   "X-Real-IP",
		IPv4Bits: 40,
	}))
	fmt.Println(err)
	// Output:
	// ratelimit: KeyByIP: a Header without TrustProxies or TrustedHops would never be read
	// ratelimit: KeyByIP: IPv4Bits 40, want 1 to 32
}

// Verified JWT subjects: a valid token counts against its subject; a
// forged one is answered 401 and never counted as the subject it claims.
func ExampleKeyByJWTSubject() {
	secret := []byte("an HS256 secret of 32 bytes or more")
	k := ratelimit.KeyByJWTSubject(secret, ratelimit.JWTConfig{Issuer: "https://auth.example"})

	tok, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "user-42",
		"iss": "https://auth.example",
		"exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString(secret)
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	keysShow(k, r)

	forged, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "admin",
		"iss": "https://auth.example",
		"exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte("somebody else's secret, 32 bytes.."))
	r.Header.Set("Authorization", "Bearer "+forged)
	keysShow(k, r)
	// Output:
	// sub:user-42
	// error: ratelimit: 401 Unauthorized: invalid or expired bearer token
}

// When authentication middleware runs first and stores the caller in the
// context, key by that: nothing is parsed twice.
func ExampleKeyByContext() {
	type userKey struct{}
	auth := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// A real one verifies a session or token here.
			user := r.Header.Get("X-Test-User")
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, user)))
		})
	}
	l, err := ratelimit.New(2, time.Minute, ratelimit.KeyByContext(func(ctx context.Context) (string, bool) {
		u, ok := ctx.Value(userKey{}).(string)
		return u, ok
	}))
	if err != nil {
		panic(err)
	}
	defer l.Close()
	h := auth(l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))

	for _, user := range []string{"ann", "ann", "ann", "bob", ""} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Test-User", user)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%q: %d\n", user, w.Code)
	}
	// Output:
	// "ann": 200
	// "ann": 200
	// "ann": 429
	// "bob": 200
	// "": 401
}

// A fallback chain: a verified user, else an API key, else the client IP.
// The kind prefixes keep the three apart.
func ExampleKeyFirst() {
	secret := []byte("an HS256 secret of 32 bytes or more")
	k := ratelimit.KeyFirst(
		ratelimit.KeyByJWTSubject(secret),
		ratelimit.KeyByHeader("X-API-Key"),
		ratelimit.KeyByIP(),
	)

	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	keysShow(k, r)

	r.Header.Set("X-API-Key", "192.0.2.1")
	keysShow(k, r)

	r.Header.Set("Authorization", "Bearer not-a-token") // refused, not skipped
	keysShow(k, r)
	// Output:
	// ip:192.0.2.1
	// apikey:192.0.2.1
	// error: ratelimit: 401 Unauthorized: invalid or expired bearer token
}

// Per-endpoint quotas: one limiter inside each route, keyed by client and
// route pattern.
func ExampleKeyJoin() {
	l, err := ratelimit.New(1, time.Minute, ratelimit.KeyJoin(ratelimit.KeyByIP(), ratelimit.KeyByRoute()))
	if err != nil {
		panic(err)
	}
	defer l.Close()
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	mux := http.NewServeMux()
	mux.Handle("POST /login", l.Handler(ok))
	mux.Handle("GET /items/{id}", l.Handler(ok))

	for _, target := range []string{"POST /login", "POST /login", "GET /items/1", "GET /items/2"} {
		var method, path string
		fmt.Sscan(target, &method, &path)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(method, path, nil))
		fmt.Println(target, w.Code)
	}
	// Output:
	// POST /login 200
	// POST /login 429
	// GET /items/1 200
	// GET /items/2 429
}

// API keys are secrets: hash them before a shared store sees them. Keys
// too long to keep are hashed too, to a digest of the same length.
func ExampleKeyHashed() {
	k := ratelimit.KeyHashed(ratelimit.KeyByHeader("X-API-Key"))
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-API-Key", "sk_live_abc123")
	keysShow(k, r)

	r.Header.Set("X-API-Key", strings.Repeat("k", 1000)) // over the 256 bytes kept in clear
	keysShow(k, r)
	// Output:
	// apikey.sha256:fFCFhfmuqPYS6_KDM9RQrA
	// apikey.sha256:E5_tGu6rHtS8N4lJTiaqgw
}
