package ratelimit_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/slidelog/ratelimit"
)

// testKeys are generated once per test binary; none is a fixture.
type testKeys struct {
	hmac  []byte
	rsa   *rsa.PrivateKey
	rsa2  *rsa.PrivateKey // an impostor
	ec    *ecdsa.PrivateKey
	ed    ed25519.PrivateKey
	edPub ed25519.PublicKey
}

var keys = sync.OnceValue(func() testKeys {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	var k testKeys
	k.hmac = make([]byte, 32)
	rand.Read(k.hmac)
	var err error
	k.rsa, err = rsa.GenerateKey(rand.Reader, 2048)
	must(err)
	k.rsa2, err = rsa.GenerateKey(rand.Reader, 2048)
	must(err)
	k.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	k.edPub, k.ed, err = ed25519.GenerateKey(rand.Reader)
	must(err)
	return k
})

// sign returns a token of claims signed by method with key.
func sign(t testing.TB, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatalf("signing: %v", err)
	}
	return s
}

// claims returns valid claims for subject sub, with changes applied.
func claims(sub string, changes ...func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{
		"sub": sub,
		"iss": "https://issuer.example",
		"aud": "api",
		"exp": time.Now().Add(time.Hour).Unix(),
		"iat": time.Now().Unix(),
	}
	for _, f := range changes {
		f(c)
	}
	return c
}

func bearer(tok string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}

// rsaPublicPEM is the PEM of an RSA public key, what an attacker would use
// as an HMAC secret in the algorithm-confusion attack.
func rsaPublicPEM(t testing.TB, k *rsa.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func TestKeyByJWTSubject(t *testing.T) {
	k := keys()
	issAud := []ratelimit.JWTOption{ratelimit.JWTIssuer("https://issuer.example"), ratelimit.JWTAudience("api")}
	hs := ratelimit.KeyByJWTSubject(k.hmac, issAud...)
	rs := ratelimit.KeyByJWTSubject(&k.rsa.PublicKey, issAud...)
	es := ratelimit.KeyByJWTSubject(&k.ec.PublicKey, issAud...)
	ed := ratelimit.KeyByJWTSubject(k.edPub, issAud...)
	rsPSS := ratelimit.KeyByJWTSubject(&k.rsa.PublicKey, ratelimit.JWTAlgorithms("RS256", "PS256"))
	lenient := ratelimit.KeyByJWTSubject(k.hmac, ratelimit.JWTLeeway(time.Minute))
	rotating := ratelimit.KeyByJWTSubject(jwt.Keyfunc(func(tok *jwt.Token) (any, error) {
		switch tok.Header["kid"] {
		case "old":
			return &k.rsa2.PublicKey, nil
		case "new":
			return &k.rsa.PublicKey, nil
		}
		return nil, errors.New("unknown kid")
	}), ratelimit.JWTAlgorithms("RS256"))
	withKid := func(kid string, key any) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims("carol"))
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	good := sign(t, jwt.SigningMethodHS256, k.hmac, claims("alice"))
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"mallory","exp":99999999999}`)) + "." + parts[2]
	none := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims("mallory"))
	// "alg":"none" with an empty signature, written by hand as attackers do.
	noneHand := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."

	tests := []struct {
		name string
		k    ratelimit.KeyFunc
		r    *http.Request
		want string // key, or "" for a 401
	}{
		{"HS256 good", hs, bearer(good), "sub:alice"},
		{"RS256 good", rs, bearer(sign(t, jwt.SigningMethodRS256, k.rsa, claims("bob"))), "sub:bob"},
		{"ES256 good", es, bearer(sign(t, jwt.SigningMethodES256, k.ec, claims("bob"))), "sub:bob"},
		{"EdDSA good", ed, bearer(sign(t, jwt.SigningMethodEdDSA, k.ed, claims("bob"))), "sub:bob"},
		{"PS256 when pinned", rsPSS, bearer(sign(t, jwt.SigningMethodPS256, k.rsa, claims("bob"))), "sub:bob"},
		{"scheme case-insensitive", hs, func() *http.Request { r := bearer(""); r.Header.Set("Authorization", "bearer  "+good); return r }(), "sub:alice"},
		{"kid picks the key", rotating, bearer(withKid("new", k.rsa)), "sub:carol"},
		{"kid picks the old key", rotating, bearer(withKid("old", k.rsa2)), "sub:carol"},
		{"leeway tolerates skew", lenient, bearer(sign(t, jwt.SigningMethodHS256, k.hmac, claims("alice", func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-10 * time.Second).Unix() }))), "sub:alice"},

		{"bad signature", hs, bearer(tampered), ""},
		{"signed by another key", rs, bearer(sign(t, jwt.SigningMethodRS256, k.rsa2, claims("mallory"))), ""},
		{"kid with the wrong key", rotating, bearer(withKid("new", k.rsa2)), ""},
		{"alg none", hs, bearer(none), ""},
		{"alg none by hand", hs, bearer(noneHand), ""},
		{"alg none on RSA", rs, bearer(noneHand), ""},
		{"HMAC signed with the RSA public key", rs, bearer(sign(t, jwt.SigningMethodHS256, rsaPublicPEM(t, &k.rsa.PublicKey), claims("mallory"))), ""},
		{"PS256 when RS256 pinned", rs, bearer(sign(t, jwt.SigningMethodPS256, k.rsa, claims("mallory"))), ""},
		{"HS512 when HS256 pinned", hs, bearer(sign(t, jwt.SigningMethodHS512, k.hmac, claims("mallory"))), ""},
		{"expired", hs, bearer(sign(t, jwt.SigningMethodHS256, k.hmac, claims("alice", func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Minute).Unix() }))), ""},
		{"expired beyond leeway", lenient, bearer(sign(t, jwt.SigningMethodHS256, k.hmac, claims("alice", func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-2 * time.Minute).Unix() }))), ""},
		{"missing exp", hs, bearer(sign(t, jwt.SigningMethodHS256, k.hmac, claims("alice", func(c jwt.MapClaims) { delete(c, "exp") }))), ""},
		{"exp not a number", hs, bearer(sign(t, jwt.SigningMethodHS256, k.hmac, claims("alice", func(c jwt.MapClaims) { c["exp"] = "tomorrow" }))), ""},
		{"not yet valid", hs, bearer(sign(t, jwt.SigningMethodHS256, k.hmac, claims("alice", func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(time.Hour).Unix() }))), ""},
		{"wrong issuer", hs, bearer(sign(t, jwt.SigningMethodHS256, k.hmac, claims("alice", func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }))), ""},
		{"missing issuer", hs, bearer(sign(t, jwt.SigningMethodHS256, k.hmac, claims("alice", func(c jwt.MapClaims) { delete(c, "iss") }))), ""},
		{"wrong audience", hs, bearer(sign(t, jwt.SigningMethodHS256, k.hmac, claims("alice", func(c jwt.MapClaims) { c["aud"] = []string{"other", "web"} }))), ""},
		{"missing subject", hs, bearer(sign(t, jwt.SigningMethodHS256, k.hmac, claims("", func(c jwt.MapClaims) { delete(c, "sub") }))), ""},
		{"garbage", hs, bearer("garbage"), ""},
		{"three dots of garbage", hs, bearer("a.b.c"), ""},
		{"many dots", hs, bearer(strings.Repeat(".", 5000)), ""},
		{"empty token", hs, bearer(""), ""},
		{"1 MiB token", hs, bearer(parts[0] + "." + strings.Repeat("A", 1<<20) + "." + parts[2]), ""},
		{"two Authorization headers", hs, func() *http.Request { r := bearer(good); r.Header.Add("Authorization", "Bearer "+good); return r }(), ""},
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
			var ke *ratelimit.KeyError
			if got != "" || !errors.As(err, &ke) {
				t.Fatalf("key (%q, %v), want a 401 KeyError", got, err)
			}
			if ke.Status != http.StatusUnauthorized || ke.Challenge != `Bearer error="invalid_token"` {
				t.Errorf("KeyError{%d, %q}, want 401 with an invalid_token challenge", ke.Status, ke.Challenge)
			}
			if errors.Is(err, ratelimit.ErrNoKey) {
				t.Errorf("error matches ErrNoKey: a refused token must not fall back")
			}
		})
	}
}

func TestKeyByJWTSubjectMissing(t *testing.T) {
	k := ratelimit.KeyByJWTSubject(keys().hmac)
	basic := httptest.NewRequest("GET", "/", nil)
	basic.SetBasicAuth("alice", "secret")
	for name, r := range map[string]*http.Request{
		"no header":    httptest.NewRequest("GET", "/", nil),
		"basic scheme": basic,
	} {
		_, err := k(r)
		var ke *ratelimit.KeyError
		if !errors.As(err, &ke) || ke.Status != http.StatusUnauthorized || ke.Challenge != "Bearer" {
			t.Errorf("%s: error %v, want 401 with challenge Bearer", name, err)
		}
		if !errors.Is(err, ratelimit.ErrNoKey) {
			t.Errorf("%s: error %v does not match ErrNoKey", name, err)
		}
	}
}

// Through the middleware: the client gets 401 and a challenge, and the
// body does not repeat its token.
func TestKeyByJWTSubjectHandler(t *testing.T) {
	l, err := ratelimit.New(1, time.Minute, ratelimit.KeyByJWTSubject(keys().hmac))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	w := httptest.NewRecorder()
	h.ServeHTTP(w, bearer("secret-looking-garbage"))
	if w.Code != http.StatusUnauthorized {
		t.Errorf("bad token: status %d, want 401", w.Code)
	}
	if got := w.Header().Get("WWW-Authenticate"); got != `Bearer error="invalid_token"` {
		t.Errorf("bad token: WWW-Authenticate %q, want %q", got, `Bearer error="invalid_token"`)
	}
	if strings.Contains(w.Body.String(), "secret-looking") {
		t.Errorf("body %q repeats the token", w.Body)
	}

	tok := sign(t, jwt.SigningMethodHS256, keys().hmac, claims("alice"))
	for i, want := range []int{200, 429} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, bearer(tok))
		if w.Code != want {
			t.Errorf("request %d with a good token: status %d, want %d", i+1, w.Code, want)
		}
	}
}

func TestKeyByJWTSubjectInvalid(t *testing.T) {
	k := keys()
	tests := []struct {
		name string
		key  any
		opts []ratelimit.JWTOption
		want string
	}{
		{"nil key", nil, nil, "nil key"},
		{"short secret", []byte("too short"), nil, "9-byte secret, HS256 needs at least 32"},
		{"short secret for HS512", k.hmac, []ratelimit.JWTOption{ratelimit.JWTAlgorithms("HS512")}, "HS512 needs at least 64"},
		{"string key", "secret", nil, "string key"},
		{"private RSA key", k.rsa, nil, "private key"},
		{"private Ed25519 key", k.ed, nil, "private key"},
		{"small RSA key", &rsa.PublicKey{N: new(big.Int).Rsh(k.rsa.N, 1200), E: 65537}, nil, "shorter than 2048"},
		{"unsupported type", 42, nil, "unsupported key type int"},
		{"alg none", k.hmac, []ratelimit.JWTOption{ratelimit.JWTAlgorithms("none")}, `"none" is not an accepted algorithm`},
		{"alg not fitting the key", &k.rsa.PublicKey, []ratelimit.JWTOption{ratelimit.JWTAlgorithms("HS256")}, "HS256 does not fit the key"},
		{"ES384 on a P-256 key", &k.ec.PublicKey, []ratelimit.JWTOption{ratelimit.JWTAlgorithms("ES384")}, "ES384 does not fit the key"},
		{"mixed families", jwt.Keyfunc(func(*jwt.Token) (any, error) { return nil, nil }), []ratelimit.JWTOption{ratelimit.JWTAlgorithms("HS256", "RS256")}, "mixes HMAC and public-key"},
		{"Keyfunc without algorithms", jwt.Keyfunc(func(*jwt.Token) (any, error) { return nil, nil }), nil, "needs JWTAlgorithms"},
		{"no algorithms", k.hmac, []ratelimit.JWTOption{ratelimit.JWTAlgorithms()}, "no algorithms"},
		{"empty issuer", k.hmac, []ratelimit.JWTOption{ratelimit.JWTIssuer("")}, "empty issuer"},
		{"empty audience", k.hmac, []ratelimit.JWTOption{ratelimit.JWTAudience()}, "empty audience"},
		{"negative leeway", k.hmac, []ratelimit.JWTOption{ratelimit.JWTLeeway(-time.Second)}, "JWTLeeway"},
		{"tiny max length", k.hmac, []ratelimit.JWTOption{ratelimit.JWTMaxLength(10)}, "JWTMaxLength: 10"},
		{"nil option", k.hmac, []ratelimit.JWTOption{nil}, "nil JWTOption"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ratelimit.New(1, time.Minute, ratelimit.KeyByJWTSubject(tt.key, tt.opts...))
			if err == nil {
				l.Close()
				t.Fatal("New accepted the configuration")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: error %q, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestKeyByJWTSubjectMaxLength(t *testing.T) {
	k := keys()
	// A valid token with a long subject passes the default cap but not a
	// tighter one.
	tok := sign(t, jwt.SigningMethodHS256, k.hmac, claims(strings.Repeat("x", 600)))
	if _, err := ratelimit.KeyByJWTSubject(k.hmac)(bearer(tok)); err != nil {
		t.Errorf("default cap: %v, want the %d-byte token accepted", err, len(tok))
	}
	if _, err := ratelimit.KeyByJWTSubject(k.hmac, ratelimit.JWTMaxLength(512))(bearer(tok)); err == nil {
		t.Errorf("JWTMaxLength(512): %d-byte token accepted", len(tok))
	}
}

func BenchmarkKeyByJWTSubject(b *testing.B) {
	k := keys()
	benches := []struct {
		name string
		k    ratelimit.KeyFunc
		tok  string
	}{
		{"HS256", ratelimit.KeyByJWTSubject(k.hmac), sign(b, jwt.SigningMethodHS256, k.hmac, claims("alice"))},
		{"ES256", ratelimit.KeyByJWTSubject(&k.ec.PublicKey), sign(b, jwt.SigningMethodES256, k.ec, claims("alice"))},
		{"1MiB", ratelimit.KeyByJWTSubject(k.hmac), strings.Repeat("A", 1<<20)},
	}
	for _, bb := range benches {
		b.Run(bb.name, func(b *testing.B) {
			r := bearer(bb.tok)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					bb.k(r)
				}
			})
		})
	}
}
