package ratelimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/ratelimit"
)

// keysMaxKeyLen is the package's unexported maxKeyLen: the longest
// header value KeyByHeader keeps as a key.
const keysMaxKeyLen = 256

// keysSecret is an HMAC secret for extractors whose tokens are never
// genuine.
var keysSecret = []byte("an HS256 secret of 32 bytes, min")

type keysUserKey struct{}

func keysWithUser(r *http.Request, id string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), keysUserKey{}, id))
}

func keysUserID(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(keysUserKey{}).(string)
	return id, ok
}

// keysFixed returns a Keyer that always returns key, or err.
func keysFixed(key string, err error) ratelimit.KeyFunc {
	return func(*http.Request) (string, error) { return key, err }
}

// keysReq returns a request from 192.0.2.1 with the given header lines,
// name then value.
func keysReq(hdr ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

// keysRouted returns r as a ServeMux that matched pattern would pass it on.
func keysRouted(r *http.Request, pattern string) *http.Request {
	r.Pattern = pattern
	return r
}

// keysKeyError returns err's *KeyError, if it has one.
func keysKeyError(err error) (*ratelimit.KeyError, bool) {
	var ke *ratelimit.KeyError
	return ke, errors.As(err, &ke)
}

// keysStatus returns the status the default error handler answers
// err with: a *KeyError's, or 400 for any other error.
func keysStatus(err error) int {
	if ke, ok := keysKeyError(err); ok {
		return ke.Status
	}
	return http.StatusBadRequest
}

// keysHashOf is KeyHashed's digest of key, as KeyHashed makes it of a
// Keyer that returns key.
func keysHashOf(key string) string {
	k, err := ratelimit.KeyHashed(keysFixed(key, nil)).Key(nil)
	if err != nil {
		panic(err)
	}
	return k
}

func TestKeyFunc(t *testing.T) {
	var got *http.Request
	f := ratelimit.KeyFunc(func(r *http.Request) (string, error) {
		got = r
		return "id:x", errors.New("boom")
	})
	r := keysReq()
	var k ratelimit.Keyer = f
	key, err := k.Key(r)
	assert.Equal(t, "id:x", key)
	assert.EqualError(t, err, "boom")
	assert.Same(t, r, got, "the KeyFunc was not passed the request")
}

func TestKeyExtractors(t *testing.T) {
	long := strings.Repeat("k", keysMaxKeyLen)
	apiKey := ratelimit.KeyByHeader("x-api-key")
	user := ratelimit.KeyByContext(keysUserID)
	jwtKey := ratelimit.KeyByJWTSubject(keysSecret)
	route := func(r *http.Request) *http.Request { return keysRouted(r, "GET /items/{id}") }
	tests := []struct {
		name       string
		k          ratelimit.Keyer
		r          *http.Request
		want       string
		wantStatus int  // when want is ""
		wantNoKey  bool // the error matches ErrNoKey
	}{
		{"header", apiKey, keysReq("X-Api-Key", "abc"), "apikey:abc", 0, false},
		{"header at the cap", apiKey, keysReq("X-Api-Key", long), "apikey:" + long, 0, false},
		{"header first line", apiKey, keysReq("X-Api-Key", "abc", "X-Api-Key", "def"), "apikey:abc", 0, false},
		{"header missing", apiKey, keysReq(), "", 400, true},
		{"header empty", apiKey, keysReq("X-Api-Key", ""), "", 400, true},
		{"header too long", apiKey, keysReq("X-Api-Key", long+"k"), "", 431, false},
		{"header an IP", apiKey, keysReq("X-Api-Key", "192.0.2.1"), "apikey:192.0.2.1", 0, false},
		// HTTP/2 servers do not strip optional whitespace; one key is one
		// quota however it is padded.
		{"header leading space", apiKey, keysReq("X-Api-Key", " abc"), "apikey:abc", 0, false},
		{"header trailing space", apiKey, keysReq("X-Api-Key", "abc "), "apikey:abc", 0, false},
		{"header leading tab", apiKey, keysReq("X-Api-Key", "\tabc"), "apikey:abc", 0, false},
		{"header inner space kept", apiKey, keysReq("X-Api-Key", "a bc"), "apikey:a bc", 0, false},
		{"header blank", apiKey, keysReq("X-Api-Key", " \t "), "", 400, true},
		{"header padded to the cap", apiKey, keysReq("X-Api-Key", " "+long+" "), "apikey:" + long, 0, false},

		{"context", user, keysWithUser(keysReq(), "u-42"), "id:u-42", 0, false},
		{"context missing", user, keysReq(), "", 401, true},
		{"context empty", user, keysWithUser(keysReq(), ""), "", 401, true},

		{"route", ratelimit.KeyByRoute(), route(keysReq()), "route:GET /items/{id}", 0, false},
		{"route outside a mux", ratelimit.KeyByRoute(), keysReq(), "", 500, false},

		{"first: JWT absent, API key", ratelimit.KeyFirst(jwtKey, apiKey, ratelimit.KeyByIP()), keysReq("X-Api-Key", "abc"), "apikey:abc", 0, false},
		{"first: both absent, IP", ratelimit.KeyFirst(jwtKey, apiKey, ratelimit.KeyByIP()), keysReq(), "ip:192.0.2.1", 0, false},
		{"first: bad token does not fall back", ratelimit.KeyFirst(jwtKey, ratelimit.KeyByIP()), keysReq("Authorization", "Bearer forged"), "", 401, false},
		{"first: long API key does not fall back", ratelimit.KeyFirst(apiKey, ratelimit.KeyByIP()), keysReq("X-Api-Key", long+"k"), "", 431, false},
		{"first: all absent, the first error", ratelimit.KeyFirst(jwtKey, apiKey), keysReq(), "", 401, true},
		{"first: context then IP", ratelimit.KeyFirst(user, ratelimit.KeyByIP()), keysWithUser(keysReq(), "u-42"), "id:u-42", 0, false},
		{"first: anonymous to IP", ratelimit.KeyFirst(user, ratelimit.KeyByIP()), keysReq(), "ip:192.0.2.1", 0, false},
		{"first: plain error stops", ratelimit.KeyFirst(keysFixed("", errors.New("boom")), ratelimit.KeyByIP()), keysReq(), "", 400, false},
		{"first: wrapped ErrNoKey passes", ratelimit.KeyFirst(keysFixed("", errors.Join(ratelimit.ErrNoKey, errors.New("mine"))), ratelimit.KeyByIP()), keysReq(), "ip:192.0.2.1", 0, false},
		{"first: route outside a mux stops", ratelimit.KeyFirst(ratelimit.KeyByRoute(), ratelimit.KeyByIP()), keysReq(), "", 500, false},

		{"join", ratelimit.KeyJoin(ratelimit.KeyByIP(), ratelimit.KeyByRoute()), route(keysReq()), "ip:192.0.2.1|route:GET /items/{id}", 0, false},
		{"join one", ratelimit.KeyJoin(ratelimit.KeyByIP()), keysReq(), "ip:192.0.2.1", 0, false},
		{"join one escapes", ratelimit.KeyJoin(apiKey), keysReq("X-Api-Key", "a|b"), "apikey:a%7Cb", 0, false},
		{"join escapes", ratelimit.KeyJoin(apiKey, ratelimit.KeyByRoute()), route(keysReq("X-Api-Key", "a|b%c")), "apikey:a%7Cb%25c|route:GET /items/{id}", 0, false},
		{"join error", ratelimit.KeyJoin(apiKey, ratelimit.KeyByRoute()), route(keysReq()), "", 400, true},
		{"join error of the second", ratelimit.KeyJoin(ratelimit.KeyByIP(), ratelimit.KeyByRoute()), keysReq(), "", 500, false},
		{"join long", ratelimit.KeyJoin(apiKey, ratelimit.KeyByRoute()), route(keysReq("X-Api-Key", long+"k")), "", 431, false},

		{"hashed", ratelimit.KeyHashed(apiKey), keysReq("X-Api-Key", "abc"), keysHashOf("apikey:abc"), 0, false},
		{"hashed passes errors", ratelimit.KeyHashed(apiKey), keysReq(), "", 400, true},
		// Hashing first, the cap applies to the digest.
		{"hashed long", ratelimit.KeyHashed(apiKey), keysReq("X-Api-Key", long+"k"), keysHashOf("apikey:" + long + "k"), 0, false},
		{"hashed long joined", ratelimit.KeyHashed(ratelimit.KeyJoin(apiKey, ratelimit.KeyByRoute())), route(keysReq("X-Api-Key", long+"|")),
			keysHashOf("apikey:" + long + "%7C|route:GET /items/{id}"), 0, false},
		// Two parts too long to keep: the digest is of the whole join, so
		// that clients differing in either part never share a count.
		{"hashed two long parts joined", ratelimit.KeyHashed(ratelimit.KeyJoin(apiKey, ratelimit.KeyByHeader("X-Other"))),
			keysReq("X-Api-Key", "1"+long, "X-Other", long+"2"), keysHashOf("apikey:1" + long + "|apikey:" + long + "2"), 0, false},
		{"hashed long first", ratelimit.KeyHashed(ratelimit.KeyFirst(apiKey, ratelimit.KeyByIP())), keysReq("X-Api-Key", long+"k"), keysHashOf("apikey:" + long + "k"), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.k.Key(tt.r)
			if tt.want != "" {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				return
			}
			require.Error(t, err, "key %q, want an error", got)
			assert.Empty(t, got, "key alongside the error")
			assert.Equal(t, tt.wantStatus, keysStatus(err), "status of error %v", err)
			assert.Equal(t, tt.wantNoKey, errors.Is(err, ratelimit.ErrNoKey), "error %v matches ErrNoKey", err)
		})
	}
}

func TestKeyHashed(t *testing.T) {
	// echo -n apikey:abc | sha256sum, first 16 bytes, base64url.
	assert.Equal(t, "apikey.sha256:OMZnUCrAOrZreOienfTb-Q", keysHashOf("apikey:abc"))
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
		"method:GET":   "key.sha256:", // KeyByMethod is gone
		"id:u-42":      "id.sha256:",
		"apikey:x":     "apikey.sha256:",
		"route:GET /x": "route.sha256:",
	} {
		got := keysHashOf(in)
		assert.True(t, strings.HasPrefix(got, wantPrefix) && len(got) == len(wantPrefix)+22,
			"KeyHashed(%.40q) = %q, want %q and 22 characters", in, got, wantPrefix)
	}
	assert.NotEqual(t, keysHashOf("apikey:abc"), keysHashOf("apikey:abd"), "two keys hash alike")
}

// Per-route quotas: the limiter inside a ServeMux route keys by the
// pattern, not by the client's path.
func TestKeyByRoute(t *testing.T) {
	l, err := ratelimit.New(2, time.Minute, ratelimit.KeyJoin(ratelimit.KeyByIP(), ratelimit.KeyByRoute()))
	require.NoError(t, err)
	defer l.Close()
	mux := http.NewServeMux()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	mux.Handle("GET /items/{id}", l.Handler(ok))
	mux.Handle("POST /login", l.Handler(ok))
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
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		assert.Equal(t, tc.want, w.Code, "request %d, %s %s", i+1, tc.method, tc.path)
	}

	// Outside a mux the middleware is misplaced: 500, and the handler
	// does not run.
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("handler ran for a request without a pattern")
	}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/items/1", nil))
	assert.Equal(t, http.StatusInternalServerError, w.Code, "request outside a mux")
}

// Keys of different kinds never share a count, even when their values
// are alike.
func TestKeyKindsDoNotCollide(t *testing.T) {
	l, err := ratelimit.New(1, time.Minute, ratelimit.KeyFirst(ratelimit.KeyByHeader("X-Api-Key"), ratelimit.KeyByIP()))
	require.NoError(t, err)
	defer l.Close()
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, r := range []*http.Request{keysReq(), keysReq("X-Api-Key", "192.0.2.1"), keysReq("X-Api-Key", "ip:192.0.2.1")} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		assert.Equal(t, http.StatusOK, w.Code, "X-Api-Key %q: its own count", r.Header.Get("X-Api-Key"))
	}
}

// A misconfigured extractor is refused by New with its configuration
// error, however deep in combinators it sits; asked about a request
// anyway, it answers 500 with that error for the logs.
func TestKeyMisconfigured(t *testing.T) {
	badIP := ratelimit.KeyByIP(ratelimit.IPConfig{IPv6Bits: 129})
	const badIPErr = "ratelimit: KeyByIP: IPv6Bits 129, want 1 to 128"
	badJWT := ratelimit.KeyByJWTSubject([]byte("too short"))
	const badJWTErr = "ratelimit: KeyByJWTSubject: 9-byte secret, HS256 needs at least 32"
	var nilFunc ratelimit.KeyFunc
	tests := []struct {
		name string
		k    ratelimit.Keyer
		want []string // the lines of New's error
	}{
		{"header name empty", ratelimit.KeyByHeader(""), []string{`ratelimit: KeyByHeader: invalid header name ""`}},
		{"header name with colon", ratelimit.KeyByHeader("X-Key:"), []string{`ratelimit: KeyByHeader: invalid header name "X-Key:"`}},
		{"header name with space", ratelimit.KeyByHeader("X Key"), []string{`ratelimit: KeyByHeader: invalid header name "X Key"`}},
		{"header name with newline", ratelimit.KeyByHeader("X-Key\r\nX-Evil"), []string{`ratelimit: KeyByHeader: invalid header name "X-Key\r\nX-Evil"`}},
		{"context nil", ratelimit.KeyByContext(nil), []string{"ratelimit: KeyByContext: nil identity function"}},
		{"IP", badIP, []string{badIPErr}},
		{"JWT", badJWT, []string{badJWTErr}},
		{"first empty", ratelimit.KeyFirst(), []string{"ratelimit: KeyFirst: no Keyers"}},
		{"first nil", ratelimit.KeyFirst(ratelimit.KeyByIP(), nil), []string{"ratelimit: KeyFirst: Keyer 1 is nil"}},
		{"first nil KeyFunc", ratelimit.KeyFirst(nilFunc, ratelimit.KeyByIP()), []string{"ratelimit: KeyFirst: Keyer 0 is nil"}},
		{"first of a bad one", ratelimit.KeyFirst(ratelimit.KeyByHeader("X-Api-Key"), badIP), []string{badIPErr}},
		{"join empty", ratelimit.KeyJoin(), []string{"ratelimit: KeyJoin: no Keyers"}},
		{"join nil", ratelimit.KeyJoin(ratelimit.KeyByIP(), nil), []string{"ratelimit: KeyJoin: Keyer 1 is nil"}},
		{"join nil KeyFunc", ratelimit.KeyJoin(nilFunc), []string{"ratelimit: KeyJoin: Keyer 0 is nil"}},
		{"join of a bad one", ratelimit.KeyJoin(badIP, ratelimit.KeyByRoute()), []string{badIPErr}},
		{"hashed nil", ratelimit.KeyHashed(nil), []string{"ratelimit: KeyHashed: Keyer 0 is nil"}},
		{"hashed nil KeyFunc", ratelimit.KeyHashed(nilFunc), []string{"ratelimit: KeyHashed: Keyer 0 is nil"}},
		// A nil *T in a Keyer is not == nil, and its first call panics.
		{"first typed nil", ratelimit.KeyFirst(ratelimit.KeyByIP(), (*fieldKeyer)(nil)), []string{"ratelimit: KeyFirst: Keyer 1 is nil"}},
		{"hashed of a bad one", ratelimit.KeyHashed(badJWT), []string{badJWTErr}},
		{"all the errors, joined", ratelimit.KeyFirst(ratelimit.KeyByHeader(""), nil, ratelimit.KeyByIP(), ratelimit.KeyByContext(nil), badIP), []string{
			`ratelimit: KeyByHeader: invalid header name ""`,
			"ratelimit: KeyFirst: Keyer 1 is nil",
			"ratelimit: KeyByContext: nil identity function",
			badIPErr,
		}},
		{"nested two levels", ratelimit.KeyHashed(ratelimit.KeyFirst(ratelimit.KeyJoin(badIP, ratelimit.KeyByRoute()), ratelimit.KeyByIP())), []string{badIPErr}},
		{"nested two levels, nil", ratelimit.KeyFirst(ratelimit.KeyJoin(ratelimit.KeyHashed(nil)), ratelimit.KeyByIP()), []string{"ratelimit: KeyHashed: Keyer 0 is nil"}},
		{"nested, several", ratelimit.KeyJoin(ratelimit.KeyFirst(badJWT, ratelimit.KeyByIP()), ratelimit.KeyHashed(ratelimit.KeyFirst(ratelimit.KeyByHeader("X-Api-Key"), badIP))), []string{badJWTErr, badIPErr}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ratelimit.New(1, time.Minute, tt.k)
			if !assert.Error(t, err, "New accepted the Keyer") {
				l.Close()
				return
			}
			assert.Equal(t, tt.want, strings.Split(err.Error(), "\n"), "New's error")

			// Asked anyway, it answers 500 and never a key; its error's
			// text is the configuration's, and it does not let KeyFirst
			// fall back past it.
			key, kerr := tt.k.Key(keysReq("X-Api-Key", "abc"))
			assert.Empty(t, key)
			ke, ok := keysKeyError(kerr)
			if assert.True(t, ok, "error %v, want a *KeyError", kerr) {
				assert.Equal(t, http.StatusInternalServerError, ke.Status, "status of error %v", kerr)
			}
			assert.EqualError(t, kerr, err.Error(), "the Keyer's error for the logs")
			assert.NotErrorIs(t, kerr, ratelimit.ErrNoKey)
		})
	}
}

// Hidden from New behind a KeyFunc, a misconfigured Keyer makes the
// middleware answer 500, and OnError sees the configuration error.
func TestKeyMisconfiguredThroughTheMiddleware(t *testing.T) {
	bad := ratelimit.KeyByHeader("X Key")
	var logged []error
	l, err := ratelimit.New(1, time.Minute, ratelimit.KeyFunc(bad.Key),
		ratelimit.WithHooks(ratelimit.Hooks{OnError: func(_ *http.Request, err error) { logged = append(logged, err) }}))
	require.NoError(t, err, "New sees only a KeyFunc")
	defer l.Close()
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("handler ran with a misconfigured key")
	}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, keysReq())
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.Equal(t, "500 Internal Server Error: rate-limit key misconfigured\n", w.Body.String())
	if assert.Len(t, logged, 1, "OnError calls") {
		assert.EqualError(t, logged[0], `ratelimit: KeyByHeader: invalid header name "X Key"`)
	}
}

// Well-configured extractors and combinators of them are accepted, also
// when built alongside misconfigured ones.
func TestKeyConfigured(t *testing.T) {
	for i := range 10 {
		ratelimit.KeyByIP(ratelimit.IPConfig{IPv4Bits: 33})
		ratelimit.KeyFirst()
		for _, k := range []ratelimit.Keyer{
			ratelimit.KeyByIP(),
			ratelimit.KeyByHeader("X-Api-Key"),
			ratelimit.KeyByContext(keysUserID),
			ratelimit.KeyByRoute(),
			ratelimit.KeyByJWTSubject(keysSecret),
			keysFixed("id:x", nil),
			ratelimit.KeyHashed(ratelimit.KeyFirst(ratelimit.KeyJoin(ratelimit.KeyByIP(), ratelimit.KeyByRoute()), keysFixed("id:x", nil))),
		} {
			l, err := ratelimit.New(1, time.Minute, k)
			require.NoError(t, err, "round %d: New(%T)", i, k)
			l.Close()
		}
	}
}

// There is no registry of misconfigured extractors: once dropped, they
// are garbage like any value. Each of these holds errors that quote a
// 2 KiB header name, so that keeping 10,000 of them would hold over
// 20 MiB; the bound leaves room for whatever else the test binary
// allocates meanwhile.
func TestKeyMisconfiguredNotRetained(t *testing.T) {
	name := "X Key " + strings.Repeat("k", 2<<10)
	build := func(n int) {
		for range n {
			// A new string each time, so that nothing is shared.
			bad := ratelimit.KeyByHeader(string([]byte(name)))
			k := ratelimit.KeyHashed(ratelimit.KeyFirst(bad, ratelimit.KeyByIP()))
			if l, err := ratelimit.New(1, time.Minute, k); err == nil {
				l.Close()
				t.Fatal("New accepted a misconfigured Keyer")
			}
		}
	}
	build(100) // warm up whatever is made once
	const n = 10_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	build(n)
	runtime.GC()
	runtime.ReadMemStats(&after)

	const bound = 4 << 20
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	allocated := after.TotalAlloc - before.TotalAlloc
	require.Greater(t, allocated, uint64(n*len(name)), "the extractors did not allocate their errors: the test proves nothing")
	assert.Less(t, grown, int64(bound), "heap grew by %d bytes over %d misconfigured extractors (%d bytes allocated)", grown, n, allocated)
}

func TestKeyFuncAllocs(t *testing.T) {
	tests := []struct {
		name string
		k    ratelimit.Keyer
		r    *http.Request
		max  float64
	}{
		{"header", ratelimit.KeyByHeader("X-Api-Key"), keysReq("X-Api-Key", "abc"), 1},
		{"route", ratelimit.KeyByRoute(), keysRouted(keysReq(), "GET /x"), 1},
		{"context", ratelimit.KeyByContext(keysUserID), keysWithUser(keysReq(), "u-42"), 1},
		{"hashed", ratelimit.KeyHashed(ratelimit.KeyByHeader("X-Api-Key")), keysReq("X-Api-Key", "abc"), 2},
		// The error of the key too long to keep, errors.As's target and
		// the digest: the key is never copied whole.
		{"hashed, too long to keep", ratelimit.KeyHashed(ratelimit.KeyByHeader("X-Api-Key")), keysReq("X-Api-Key", strings.Repeat("k", 64<<10)), 3},
		{"first", ratelimit.KeyFirst(ratelimit.KeyByHeader("X-Api-Key"), ratelimit.KeyByIP()), keysReq(), 1},
		{"join", ratelimit.KeyJoin(ratelimit.KeyByIP(), ratelimit.KeyByRoute()), keysRouted(keysReq(), "GET /x"), 3},
	}
	for _, tt := range tests {
		got := testing.AllocsPerRun(100, func() {
			if _, err := tt.k.Key(tt.r); err != nil {
				t.Fatal(err)
			}
		})
		assert.LessOrEqual(t, got, tt.max, "%s: allocations per key", tt.name)
	}
}

// Key errors name the header as the operator spelled it.
func TestKeyByHeaderErrorsUseTheConfiguredName(t *testing.T) {
	k := ratelimit.KeyByHeader("X-API-Key")
	for _, r := range []*http.Request{keysReq(), keysReq("X-Api-Key", strings.Repeat("k", keysMaxKeyLen+1))} {
		_, err := k.Key(r)
		ke, ok := keysKeyError(err)
		if assert.True(t, ok, "error %v, want a *KeyError", err) {
			assert.Contains(t, ke.Message, "X-API-Key")
		}
	}
}

// A join's first error is its answer: a part too long to keep, then a
// part missing, is the 431 of the first, so that KeyFirst does not fall
// back past an oversized credential as if it were missing.
func TestKeyJoinAnswersItsFirstError(t *testing.T) {
	join := ratelimit.KeyJoin(ratelimit.KeyByHeader("X-A"), ratelimit.KeyByHeader("X-B"))
	r := keysReq("X-A", strings.Repeat("a", keysMaxKeyLen+1))
	_, err := join.Key(r)
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, keysStatus(err), "the first part's error, got %v", err)
	assert.NotErrorIs(t, err, ratelimit.ErrNoKey)
	key, err := ratelimit.KeyFirst(join, ratelimit.KeyByIP()).Key(r)
	assert.Error(t, err, "KeyFirst fell back to %q", key)
	_, err = ratelimit.KeyHashed(join).Key(r)
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, keysStatus(err), "KeyHashed of a join missing a part, got %v", err)
}

// fieldKeyer keys requests by a header it names, through a pointer: a
// nil one panics when asked for a key.
type fieldKeyer struct{ header string }

func (k *fieldKeyer) Key(r *http.Request) (string, error) { return r.Header.Get(k.header), nil }
