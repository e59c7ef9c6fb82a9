package ratelimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slidelog/ratelimit"
)

type userKey struct{}

func withUser(r *http.Request, id string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), userKey{}, id))
}

func userID(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(userKey{}).(string)
	return id, ok
}

// fixedKey returns a KeyFunc that always returns key, or err.
func fixedKey(key string, err error) ratelimit.KeyFunc {
	return func(*http.Request) (string, error) { return key, err }
}

// req returns a request from 192.0.2.1 with the given header lines.
func req(hdr ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

func TestKeyExtractors(t *testing.T) {
	long := strings.Repeat("k", ratelimit.MaxKeyLen)
	apiKey := ratelimit.KeyByHeader("x-api-key")
	user := ratelimit.KeyByContext(userID)
	tests := []struct {
		name       string
		k          ratelimit.KeyFunc
		r          *http.Request
		want       string
		wantStatus int  // when want is ""
		wantNoKey  bool // the error matches ErrNoKey
	}{
		{"header", apiKey, req("X-Api-Key", "abc"), "apikey:abc", 0, false},
		{"header at the cap", apiKey, req("X-Api-Key", long), "apikey:" + long, 0, false},
		{"header first line", apiKey, req("X-Api-Key", "abc", "X-Api-Key", "def"), "apikey:abc", 0, false},
		{"header missing", apiKey, req(), "", 400, true},
		{"header empty", apiKey, req("X-Api-Key", ""), "", 400, true},
		{"header too long", apiKey, req("X-Api-Key", long+"k"), "", 431, false},
		{"header an IP", apiKey, req("X-Api-Key", "192.0.2.1"), "apikey:192.0.2.1", 0, false},
		// HTTP/2 servers do not strip optional whitespace; one key is one
		// quota however it is padded.
		{"header leading space", apiKey, req("X-Api-Key", " abc"), "apikey:abc", 0, false},
		{"header trailing space", apiKey, req("X-Api-Key", "abc "), "apikey:abc", 0, false},
		{"header leading tab", apiKey, req("X-Api-Key", "\tabc"), "apikey:abc", 0, false},
		{"header inner space kept", apiKey, req("X-Api-Key", "a bc"), "apikey:a bc", 0, false},
		{"header blank", apiKey, req("X-Api-Key", " \t "), "", 400, true},
		{"header padded to the cap", apiKey, req("X-Api-Key", " "+long+" "), "apikey:" + long, 0, false},

		{"context", user, withUser(req(), "u-42"), "id:u-42", 0, false},
		{"context missing", user, req(), "", 401, true},
		{"context empty", user, withUser(req(), ""), "", 401, true},

		{"method GET", ratelimit.KeyByMethod(), req(), "method:GET", 0, false},
		{"method made up", ratelimit.KeyByMethod(), httptest.NewRequest("BREW", "/", nil), "method:other", 0, false},
		{"method DELETE", ratelimit.KeyByMethod(), httptest.NewRequest("DELETE", "/", nil), "method:DELETE", 0, false},
		{"route outside a mux", ratelimit.KeyByRoute(), req(), "", 500, false},

		{"first: JWT absent, API key", ratelimit.KeyFirst(ratelimit.KeyByJWTSubject(keys().hmac), apiKey, ratelimit.KeyByIP()), req("X-Api-Key", "abc"), "apikey:abc", 0, false},
		{"first: both absent, IP", ratelimit.KeyFirst(ratelimit.KeyByJWTSubject(keys().hmac), apiKey, ratelimit.KeyByIP()), req(), "ip:192.0.2.1", 0, false},
		{"first: bad token does not fall back", ratelimit.KeyFirst(ratelimit.KeyByJWTSubject(keys().hmac), ratelimit.KeyByIP()), req("Authorization", "Bearer forged"), "", 401, false},
		{"first: long API key does not fall back", ratelimit.KeyFirst(apiKey, ratelimit.KeyByIP()), req("X-Api-Key", long+"k"), "", 431, false},
		{"first: all absent, the first error", ratelimit.KeyFirst(ratelimit.KeyByJWTSubject(keys().hmac), apiKey), req(), "", 401, true},
		{"first: context then IP", ratelimit.KeyFirst(user, ratelimit.KeyByIP()), withUser(req(), "u-42"), "id:u-42", 0, false},
		{"first: anonymous to IP", ratelimit.KeyFirst(user, ratelimit.KeyByIP()), req(), "ip:192.0.2.1", 0, false},
		{"first: plain error stops", ratelimit.KeyFirst(fixedKey("", errors.New("boom")), ratelimit.KeyByIP()), req(), "", 400, false},
		{"first: wrapped ErrNoKey passes", ratelimit.KeyFirst(fixedKey("", errors.Join(ratelimit.ErrNoKey, errors.New("mine"))), ratelimit.KeyByIP()), req(), "ip:192.0.2.1", 0, false},

		{"join", ratelimit.KeyJoin(ratelimit.KeyByIP(), ratelimit.KeyByMethod()), req(), "ip:192.0.2.1|method:GET", 0, false},
		{"join one", ratelimit.KeyJoin(ratelimit.KeyByIP()), req(), "ip:192.0.2.1", 0, false},
		{"join escapes", ratelimit.KeyJoin(apiKey, ratelimit.KeyByMethod()), req("X-Api-Key", "a|b%c"), "apikey:a%7Cb%25c|method:GET", 0, false},
		{"join error", ratelimit.KeyJoin(apiKey, ratelimit.KeyByMethod()), req(), "", 400, true},

		{"hashed", ratelimit.KeyHashed(apiKey), req("X-Api-Key", "abc"), hashOf("apikey:abc"), 0, false},
		{"hashed passes errors", ratelimit.KeyHashed(apiKey), req(), "", 400, true},
		// Hashing first, the cap applies to the digest.
		{"hashed long", ratelimit.KeyHashed(apiKey), req("X-Api-Key", long+"k"), hashOf("apikey:" + long + "k"), 0, false},
		{"hashed long joined", ratelimit.KeyHashed(ratelimit.KeyJoin(apiKey, ratelimit.KeyByMethod())), req("X-Api-Key", long+"|"),
			hashOf("apikey:" + long + "%7C|method:GET"), 0, false},
		{"hashed long first", ratelimit.KeyHashed(ratelimit.KeyFirst(apiKey, ratelimit.KeyByIP())), req("X-Api-Key", long+"k"), hashOf("apikey:" + long + "k"), 0, false},
		{"join long", ratelimit.KeyJoin(apiKey, ratelimit.KeyByMethod()), req("X-Api-Key", long+"k"), "", 431, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.k(tt.r)
			if tt.want != "" {
				if err != nil || got != tt.want {
					t.Fatalf("key (%q, %v), want %q", got, err, tt.want)
				}
				return
			}
			if got != "" || err == nil {
				t.Fatalf("key (%q, %v), want an error", got, err)
			}
			status := http.StatusBadRequest // what the middleware answers to a plain error
			var ke *ratelimit.KeyError
			if errors.As(err, &ke) {
				status = ke.Status
			}
			if status != tt.wantStatus {
				t.Errorf("error %v: status %d, want %d", err, status, tt.wantStatus)
			}
			if got := errors.Is(err, ratelimit.ErrNoKey); got != tt.wantNoKey {
				t.Errorf("error %v: matches ErrNoKey %v, want %v", err, got, tt.wantNoKey)
			}
		})
	}
}

// hashOf is KeyHashed's digest, computed independently.
func hashOf(key string) string {
	k, err := ratelimit.KeyHashed(fixedKey(key, nil))(nil)
	if err != nil {
		panic(err)
	}
	return k
}

func TestKeyHashed(t *testing.T) {
	got := hashOf("apikey:abc")
	// echo -n apikey:abc | sha256sum, first 16 bytes, base64url.
	const want = "apikey.sha256:OMZnUCrAOrZreOienfTb-Q"
	if got != want {
		t.Errorf("KeyHashed(apikey:abc) = %q, want %q", got, want)
	}
	for in, wantPrefix := range map[string]string{
		"no-kind-here":                      "key.sha256:",
		"UPPER:x":                           "key.sha256:",
		strings.Repeat("k", 33) + ":x":      "key.sha256:",
		"sub:" + strings.Repeat("s", 10000): "sub.sha256:",
		"ip:192.0.2.1|route:GET /x":         "ip.sha256:",
		// Only the kinds of this package's extractors stay in clear: any
		// other prefix may be a secret.
		strings.Repeat("k", 32) + ":something":      "key.sha256:",
		"0123456789abcdef0123456789abcdef:client-7": "key.sha256:",
		"tenant:acme":  "key.sha256:",
		"id:u-42":      "id.sha256:",
		"method:GET":   "method.sha256:",
		"route:GET /x": "route.sha256:",
	} {
		got := hashOf(in)
		if !strings.HasPrefix(got, wantPrefix) || len(got) != len(wantPrefix)+22 {
			t.Errorf("KeyHashed(%.40q) = %q, want %q and 22 characters", in, got, wantPrefix)
		}
	}
	if hashOf("apikey:abc") == hashOf("apikey:abd") {
		t.Error("two keys hash alike")
	}
}

// Per-route quotas: the limiter inside a ServeMux route keys by the
// pattern, not by the client's path.
func TestKeyByRoute(t *testing.T) {
	l, err := ratelimit.New(2, time.Minute, ratelimit.KeyJoin(ratelimit.KeyByIP(), ratelimit.KeyByRoute()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	mux := http.NewServeMux()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	mux.Handle("GET /items/{id}", l.Handler(ok))
	mux.Handle("POST /login", l.Handler(ok))
	serve := func(method, path string) int {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(method, path, nil)
		mux.ServeHTTP(w, r)
		return w.Code
	}
	for i, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/items/1", 200},
		{"GET", "/items/2", 200},
		{"GET", "/items/3", 429}, // same route, another path
		{"POST", "/login", 200},
		{"POST", "/login", 200},
		{"POST", "/login", 429},
	} {
		if got := serve(tc.method, tc.path); got != tc.want {
			t.Errorf("request %d, %s %s: status %d, want %d", i+1, tc.method, tc.path, got, tc.want)
		}
	}
	k, err := ratelimit.KeyByRoute()(func() *http.Request {
		r := httptest.NewRequest("GET", "/items/9", nil)
		r.Pattern = "GET /items/{id}"
		return r
	}())
	if want := "route:GET /items/{id}"; err != nil || k != want {
		t.Errorf("KeyByRoute: (%q, %v), want %q", k, err, want)
	}
}

// Keys of different kinds never share a count, even when their values
// are alike.
func TestKeyKindsDoNotCollide(t *testing.T) {
	l, err := ratelimit.New(1, time.Minute, ratelimit.KeyFirst(ratelimit.KeyByHeader("X-Api-Key"), ratelimit.KeyByIP()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, r := range []*http.Request{req(), req("X-Api-Key", "192.0.2.1"), req("X-Api-Key", "ip:192.0.2.1")} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Errorf("X-Api-Key %q: status %d, want 200 (its own count)", r.Header.Get("X-Api-Key"), w.Code)
		}
	}
}

func TestKeyFuncInvalid(t *testing.T) {
	badIP := ratelimit.KeyByIP(ratelimit.GroupIPv6(0))
	tests := []struct {
		name string
		k    ratelimit.KeyFunc
		want string
	}{
		{"header name empty", ratelimit.KeyByHeader(""), "KeyByHeader: invalid header name"},
		{"header name with colon", ratelimit.KeyByHeader("X-Key:"), "KeyByHeader: invalid header name"},
		{"context nil", ratelimit.KeyByContext(nil), "KeyByContext: nil identity function"},
		{"first empty", ratelimit.KeyFirst(), "KeyFirst: no KeyFuncs"},
		{"first nil", ratelimit.KeyFirst(ratelimit.KeyByIP(), nil), "KeyFirst: KeyFunc 1 is nil"},
		{"first of a bad one", ratelimit.KeyFirst(ratelimit.KeyByHeader("X-Api-Key"), badIP), "GroupIPv6: 0 bits"},
		{"join empty", ratelimit.KeyJoin(), "KeyJoin: no KeyFuncs"},
		{"join of a bad one", ratelimit.KeyJoin(badIP, ratelimit.KeyByMethod()), "GroupIPv6: 0 bits"},
		{"hashed nil", ratelimit.KeyHashed(nil), "KeyHashed: KeyFunc 0 is nil"},
		{"nested", ratelimit.KeyHashed(ratelimit.KeyFirst(ratelimit.KeyJoin(badIP))), "GroupIPv6: 0 bits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ratelimit.New(1, time.Minute, tt.k)
			if err == nil {
				l.Close()
				t.Fatal("New accepted the KeyFunc")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: error %q, want it to mention %q", err, tt.want)
			}
		})
	}
	// Valid extractors made alongside are not mistaken for broken ones.
	for i := range 100 {
		ratelimit.KeyByIP(ratelimit.GroupIPv4(0))
		l, err := ratelimit.New(1, time.Minute, ratelimit.KeyByIP())
		if err != nil {
			t.Fatalf("round %d: New(KeyByIP()) = %v", i, err)
		}
		l.Close()
	}
}

func TestKeyFuncAllocs(t *testing.T) {
	tests := []struct {
		name string
		k    ratelimit.KeyFunc
		r    *http.Request
		max  float64
	}{
		{"header", ratelimit.KeyByHeader("X-Api-Key"), req("X-Api-Key", "abc"), 1},
		{"method", ratelimit.KeyByMethod(), req(), 0},
		{"hashed", ratelimit.KeyHashed(ratelimit.KeyByHeader("X-Api-Key")), req("X-Api-Key", "abc"), 2},
		{"first", ratelimit.KeyFirst(ratelimit.KeyByHeader("X-Api-Key"), ratelimit.KeyByIP()), req(), 1},
		{"join", ratelimit.KeyJoin(ratelimit.KeyByIP(), ratelimit.KeyByMethod()), req(), 2},
	}
	for _, tt := range tests {
		got := testing.AllocsPerRun(100, func() {
			if _, err := tt.k(tt.r); err != nil {
				t.Fatal(err)
			}
		})
		if got > tt.max {
			t.Errorf("%s: %.0f allocations, want at most %.0f", tt.name, got, tt.max)
		}
	}
}

// Key errors name the header as the operator spelled it.
func TestKeyByHeaderErrorsUseTheConfiguredName(t *testing.T) {
	k := ratelimit.KeyByHeader("X-API-Key")
	for _, r := range []*http.Request{req(), req("X-Api-Key", strings.Repeat("k", ratelimit.MaxKeyLen+1))} {
		_, err := k(r)
		var ke *ratelimit.KeyError
		if !errors.As(err, &ke) || !strings.Contains(ke.Message, "X-API-Key") {
			t.Errorf("error %v: want a KeyError naming X-API-Key", err)
		}
	}
}
