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
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/ratelimit"
)

// keysTestKeys are generated once per test binary; none is a fixture.
type keysTestKeys struct {
	hmac  []byte
	rsa   *rsa.PrivateKey
	rsa2  *rsa.PrivateKey // an impostor
	ec    *ecdsa.PrivateKey
	ec384 *ecdsa.PrivateKey
	ec521 *ecdsa.PrivateKey
	ed    ed25519.PrivateKey
	edPub ed25519.PublicKey
}

var keysJWT = sync.OnceValue(func() keysTestKeys {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	var k keysTestKeys
	k.hmac = make([]byte, 32)
	rand.Read(k.hmac)
	var err error
	k.rsa, err = rsa.GenerateKey(rand.Reader, 2048)
	must(err)
	k.rsa2, err = rsa.GenerateKey(rand.Reader, 2048)
	must(err)
	k.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	k.ec384, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	must(err)
	k.ec521, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	must(err)
	k.edPub, k.ed, err = ed25519.GenerateKey(rand.Reader)
	must(err)
	return k
})

// keysSign returns a token of claims signed by method with key.
func keysSign(t testing.TB, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	require.NoError(t, err, "signing")
	return s
}

// keysClaims returns valid claims for subject sub, with changes applied.
func keysClaims(sub string, changes ...func(jwt.MapClaims)) jwt.MapClaims {
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

// keysBearer returns a request with "Authorization: Bearer tok".
func keysBearer(tok string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}

// keysRSAPublicPEM is the PEM of an RSA public key, what an attacker
// would use as an HMAC secret in the algorithm-confusion attack.
func keysRSAPublicPEM(t testing.TB, k *rsa.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(k)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func TestKeyByJWTSubject(t *testing.T) {
	k := keysJWT()
	issAud := ratelimit.JWTConfig{Issuer: "https://issuer.example", Audience: []string{"api"}}
	hs := ratelimit.KeyByJWTSubject(k.hmac, issAud)
	rs := ratelimit.KeyByJWTSubject(&k.rsa.PublicKey, issAud)
	es := ratelimit.KeyByJWTSubject(&k.ec.PublicKey, issAud)
	es384 := ratelimit.KeyByJWTSubject(&k.ec384.PublicKey)
	es512 := ratelimit.KeyByJWTSubject(&k.ec521.PublicKey)
	ed := ratelimit.KeyByJWTSubject(k.edPub, issAud)
	rsPSS := ratelimit.KeyByJWTSubject(&k.rsa.PublicKey, ratelimit.JWTConfig{Algorithms: []string{"RS256", "PS256"}})
	hs512 := ratelimit.KeyByJWTSubject(append(k.hmac, k.hmac...), ratelimit.JWTConfig{Algorithms: []string{"HS512"}})
	lenient := ratelimit.KeyByJWTSubject(k.hmac, ratelimit.JWTConfig{Leeway: time.Minute})
	anyIssuer := ratelimit.KeyByJWTSubject(k.hmac)
	twoAudiences := ratelimit.KeyByJWTSubject(k.hmac, ratelimit.JWTConfig{Audience: []string{"api", "web"}})
	rotate := func(tok *jwt.Token) (any, error) {
		switch tok.Header["kid"] {
		case "old":
			return &k.rsa2.PublicKey, nil
		case "new":
			return &k.rsa.PublicKey, nil
		}
		return nil, errors.New("unknown kid")
	}
	rotating := ratelimit.KeyByJWTSubject(jwt.Keyfunc(rotate), ratelimit.JWTConfig{Algorithms: []string{"RS256"}})
	rotatingFunc := ratelimit.KeyByJWTSubject(rotate, ratelimit.JWTConfig{Algorithms: []string{"RS256"}})
	withKid := func(kid string, key any) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, keysClaims("carol"))
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		require.NoError(t, err)
		return s
	}
	hsWith := func(change func(jwt.MapClaims)) *http.Request {
		return keysBearer(keysSign(t, jwt.SigningMethodHS256, k.hmac, keysClaims("alice", change)))
	}

	good := keysSign(t, jwt.SigningMethodHS256, k.hmac, keysClaims("alice"))
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"mallory","exp":99999999999}`)) + "." + parts[2]
	none := keysSign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, keysClaims("mallory"))
	// "alg":"none" with an empty signature, written by hand as attackers do.
	noneHand := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	header := func(lines ...string) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header["Authorization"] = lines
		return r
	}

	tests := []struct {
		name string
		k    ratelimit.Keyer
		r    *http.Request
		want string // key, or "" for a 401 invalid_token
	}{
		{"HS256 good", hs, keysBearer(good), "sub:alice"},
		{"HS512 when pinned", hs512, keysBearer(keysSign(t, jwt.SigningMethodHS512, append(k.hmac, k.hmac...), keysClaims("bob"))), "sub:bob"},
		{"RS256 good", rs, keysBearer(keysSign(t, jwt.SigningMethodRS256, k.rsa, keysClaims("bob"))), "sub:bob"},
		{"ES256 good", es, keysBearer(keysSign(t, jwt.SigningMethodES256, k.ec, keysClaims("bob"))), "sub:bob"},
		{"ES384 by the curve", es384, keysBearer(keysSign(t, jwt.SigningMethodES384, k.ec384, keysClaims("bob"))), "sub:bob"},
		{"ES512 by the curve", es512, keysBearer(keysSign(t, jwt.SigningMethodES512, k.ec521, keysClaims("bob"))), "sub:bob"},
		{"EdDSA good", ed, keysBearer(keysSign(t, jwt.SigningMethodEdDSA, k.ed, keysClaims("bob"))), "sub:bob"},
		{"PS256 when pinned", rsPSS, keysBearer(keysSign(t, jwt.SigningMethodPS256, k.rsa, keysClaims("bob"))), "sub:bob"},
		{"RS256 beside PS256", rsPSS, keysBearer(keysSign(t, jwt.SigningMethodRS256, k.rsa, keysClaims("bob"))), "sub:bob"},
		{"scheme case-insensitive", hs, header("bearer  " + good), "sub:alice"},
		// HTTP/2 servers do not strip a field value's white space.
		{"surrounding white space", hs, header(" \tBearer " + good + " \t"), "sub:alice"},
		{"kid picks the key", rotating, keysBearer(withKid("new", k.rsa)), "sub:carol"},
		{"kid picks the old key", rotating, keysBearer(withKid("old", k.rsa2)), "sub:carol"},
		{"plain func picks the key", rotatingFunc, keysBearer(withKid("new", k.rsa)), "sub:carol"},
		{"leeway tolerates skew", lenient, hsWith(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-10 * time.Second).Unix() }), "sub:alice"},
		{"no issuer required", anyIssuer, hsWith(func(c jwt.MapClaims) { delete(c, "iss"); delete(c, "aud") }), "sub:alice"},
		{"any issuer accepted", anyIssuer, hsWith(func(c jwt.MapClaims) { c["iss"] = "https://other.example" }), "sub:alice"},
		{"one audience of two", twoAudiences, hsWith(func(c jwt.MapClaims) { c["aud"] = []string{"web", "other"} }), "sub:alice"},

		{"bad signature", hs, keysBearer(tampered), ""},
		{"signed by another key", rs, keysBearer(keysSign(t, jwt.SigningMethodRS256, k.rsa2, keysClaims("mallory"))), ""},
		{"kid with the wrong key", rotating, keysBearer(withKid("new", k.rsa2)), ""},
		{"unknown kid", rotating, keysBearer(withKid("nope", k.rsa)), ""},
		{"alg none", hs, keysBearer(none), ""},
		{"alg none by hand", hs, keysBearer(noneHand), ""},
		{"alg none on RSA", rs, keysBearer(noneHand), ""},
		{"alg none on a Keyfunc", rotating, keysBearer(noneHand), ""},
		{"HMAC signed with the RSA public key", rs, keysBearer(keysSign(t, jwt.SigningMethodHS256, keysRSAPublicPEM(t, &k.rsa.PublicKey), keysClaims("mallory"))), ""},
		{"HMAC on a Keyfunc pinned to RS256", rotating, keysBearer(keysSign(t, jwt.SigningMethodHS256, keysRSAPublicPEM(t, &k.rsa.PublicKey), keysClaims("mallory"))), ""},
		{"PS256 when RS256 pinned", rs, keysBearer(keysSign(t, jwt.SigningMethodPS256, k.rsa, keysClaims("mallory"))), ""},
		{"HS512 when HS256 pinned", hs, keysBearer(keysSign(t, jwt.SigningMethodHS512, k.hmac, keysClaims("mallory"))), ""},
		{"ES384 on a P-256 key", es, keysBearer(keysSign(t, jwt.SigningMethodES384, k.ec384, keysClaims("mallory"))), ""},
		{"expired", hs, hsWith(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Minute).Unix() }), ""},
		{"expired beyond leeway", lenient, hsWith(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-2 * time.Minute).Unix() }), ""},
		{"missing exp", hs, hsWith(func(c jwt.MapClaims) { delete(c, "exp") }), ""},
		{"missing exp, nothing else required", anyIssuer, hsWith(func(c jwt.MapClaims) { delete(c, "exp") }), ""},
		{"exp not a number", hs, hsWith(func(c jwt.MapClaims) { c["exp"] = "tomorrow" }), ""},
		{"not yet valid", hs, hsWith(func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(time.Hour).Unix() }), ""},
		{"wrong issuer", hs, hsWith(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }), ""},
		{"missing issuer", hs, hsWith(func(c jwt.MapClaims) { delete(c, "iss") }), ""},
		{"wrong audience", hs, hsWith(func(c jwt.MapClaims) { c["aud"] = []string{"other", "web"} }), ""},
		{"missing audience", hs, hsWith(func(c jwt.MapClaims) { delete(c, "aud") }), ""},
		{"none of two audiences", twoAudiences, hsWith(func(c jwt.MapClaims) { c["aud"] = "other" }), ""},
		{"missing subject", hs, hsWith(func(c jwt.MapClaims) { delete(c, "sub") }), ""},
		{"empty subject", hs, hsWith(func(c jwt.MapClaims) { c["sub"] = "" }), ""},
		{"garbage", hs, keysBearer("garbage"), ""},
		{"three dots of garbage", hs, keysBearer("a.b.c"), ""},
		{"many dots", hs, keysBearer(strings.Repeat(".", 5000)), ""},
		{"empty token", hs, keysBearer(""), ""},
		{"1 MiB token", hs, keysBearer(parts[0] + "." + strings.Repeat("A", 1<<20) + "." + parts[2]), ""},
		{"two Authorization headers", hs, header("Bearer "+good, "Bearer "+good), ""},
		{"Basic then Bearer", hs, header("Basic YWxpY2U6c2VjcmV0", "Bearer "+good), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.k.Key(tt.r)
			if tt.want != "" {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				return
			}
			keysWantInvalidToken(t, got, err)
			assert.NotErrorIs(t, err, ratelimit.ErrNoKey, "a refused token must not fall back")
		})
	}
}

func TestKeyByJWTSubjectMissing(t *testing.T) {
	k := ratelimit.KeyByJWTSubject(keysJWT().hmac)
	basic := httptest.NewRequest("GET", "/", nil)
	basic.SetBasicAuth("alice", "secret")
	noSpace := httptest.NewRequest("GET", "/", nil)
	noSpace.Header.Set("Authorization", "Bearer")
	for name, r := range map[string]*http.Request{
		"no header":    httptest.NewRequest("GET", "/", nil),
		"basic scheme": basic,
		"scheme alone": noSpace,
	} {
		key, err := k.Key(r)
		assert.Empty(t, key, name)
		ke, ok := keysKeyError(err)
		if assert.True(t, ok, "%s: error %v, want a *KeyError", name, err) {
			assert.Equal(t, http.StatusUnauthorized, ke.Status, name)
			assert.Equal(t, "Bearer", ke.Challenge, name)
		}
		assert.ErrorIs(t, err, ratelimit.ErrNoKey, name)
	}
}

// Through the middleware: the client gets 401 and a challenge, and the
// body does not repeat its token.
func TestKeyByJWTSubjectHandler(t *testing.T) {
	l, err := ratelimit.New(1, time.Minute, ratelimit.KeyByJWTSubject(keysJWT().hmac))
	require.NoError(t, err)
	defer l.Close()
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	w := httptest.NewRecorder()
	h.ServeHTTP(w, keysBearer("secret-looking-garbage"))
	assert.Equal(t, http.StatusUnauthorized, w.Code, "bad token")
	assert.Equal(t, `Bearer error="invalid_token"`, w.Header().Get("WWW-Authenticate"), "bad token")
	assert.NotContains(t, w.Body.String(), "secret-looking", "the body repeats the token")

	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	assert.Equal(t, http.StatusUnauthorized, w.Code, "no token")
	assert.Equal(t, "Bearer", w.Header().Get("WWW-Authenticate"), "no token")

	tok := keysSign(t, jwt.SigningMethodHS256, keysJWT().hmac, keysClaims("alice"))
	for i, want := range []int{200, 429} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, keysBearer(tok))
		assert.Equal(t, want, w.Code, "request %d with a good token", i+1)
	}
}

func TestKeyByJWTSubjectInvalid(t *testing.T) {
	k := keysJWT()
	keyfunc := jwt.Keyfunc(func(*jwt.Token) (any, error) { return nil, nil })
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	require.NoError(t, err)
	const prefix = "ratelimit: KeyByJWTSubject: "
	tests := []struct {
		name    string
		key     any
		configs []ratelimit.JWTConfig
		want    []string // the lines of New's error, after the prefix
	}{
		{"nil key", nil, nil, []string{"nil key"}},
		{"nil Keyfunc", jwt.Keyfunc(nil), []ratelimit.JWTConfig{{Algorithms: []string{"RS256"}}}, []string{"nil key"}},
		{"short secret", []byte("too short"), nil, []string{"9-byte secret, HS256 needs at least 32"}},
		{"short secret for HS512", k.hmac, []ratelimit.JWTConfig{{Algorithms: []string{"HS512"}}}, []string{"32-byte secret, HS512 needs at least 64"}},
		{"string key", "secret", nil, []string{"string key: pass an HMAC secret as []byte, a public key parsed (jwt.ParseRSAPublicKeyFromPEM, ...)"}},
		{"private RSA key", k.rsa, nil, []string{"*rsa.PrivateKey is a private key: give the verifier its public key"}},
		{"private ECDSA key", k.ec, nil, []string{"*ecdsa.PrivateKey is a private key: give the verifier its public key"}},
		{"private Ed25519 key", k.ed, nil, []string{"ed25519.PrivateKey is a private key: give the verifier its public key"}},
		{"small RSA key", &rsa.PublicKey{N: new(big.Int).Rsh(k.rsa.N, 1200), E: 65537}, nil, []string{"RSA key shorter than 2048 bits"}},
		{"ECDSA on P-224", &p224.PublicKey, nil, []string{"ECDSA key on an unsupported curve"}},
		{"malformed Ed25519 key", k.edPub[:16], nil, []string{"malformed Ed25519 key"}},
		{"unsupported type", 42, nil, []string{"unsupported key type int"}},
		{"alg none", k.hmac, []ratelimit.JWTConfig{{Algorithms: []string{"none"}}}, []string{`"none" is not an accepted algorithm`}},
		{"alg unknown", k.hmac, []ratelimit.JWTConfig{{Algorithms: []string{"HS257"}}}, []string{`"HS257" is not an accepted algorithm`}},
		{"alg not fitting the key", &k.rsa.PublicKey, []ratelimit.JWTConfig{{Algorithms: []string{"HS256"}}}, []string{"HS256 does not fit the key given"}},
		{"RSA alg on an HMAC secret", k.hmac, []ratelimit.JWTConfig{{Algorithms: []string{"RS256"}}}, []string{"RS256 does not fit the key given"}},
		{"ES384 on a P-256 key", &k.ec.PublicKey, []ratelimit.JWTConfig{{Algorithms: []string{"ES384"}}}, []string{"ES384 does not fit the key given"}},
		{"mixed families", keyfunc, []ratelimit.JWTConfig{{Algorithms: []string{"HS256", "RS256"}}}, []string{"Algorithms mixes HMAC and public-key algorithms"}},
		{"Keyfunc without algorithms", keyfunc, nil, []string{"a jwt.Keyfunc needs JWTConfig.Algorithms"}},
		{"plain func without algorithms", func(*jwt.Token) (any, error) { return nil, nil }, nil, []string{"a jwt.Keyfunc needs JWTConfig.Algorithms"}},
		{"empty audience", k.hmac, []ratelimit.JWTConfig{{Audience: []string{"api", ""}}}, []string{"empty audience"}},
		{"negative leeway", k.hmac, []ratelimit.JWTConfig{{Leeway: -time.Second}}, []string{"leeway -1s, want 0 to 5m"}},
		{"leeway over 5 minutes", k.hmac, []ratelimit.JWTConfig{{Leeway: 5*time.Minute + 1}}, []string{"leeway 5m0.000000001s, want 0 to 5m"}},
		{"tiny max length", k.hmac, []ratelimit.JWTConfig{{MaxLength: 255}}, []string{"MaxLength 255, want 256 to 1048576"}},
		{"negative max length", k.hmac, []ratelimit.JWTConfig{{MaxLength: -1}}, []string{"MaxLength -1, want 256 to 1048576"}},
		{"huge max length", k.hmac, []ratelimit.JWTConfig{{MaxLength: 1<<20 + 1}}, []string{"MaxLength 1048577, want 256 to 1048576"}},
		{"two configs", k.hmac, []ratelimit.JWTConfig{{}, {}}, []string{"more than one JWTConfig"}},
		{"all at once", []byte("too short"), []ratelimit.JWTConfig{{Audience: []string{""}, Leeway: time.Hour, MaxLength: 10}}, []string{
			"empty audience", "leeway 1h0m0s, want 0 to 5m", "MaxLength 10, want 256 to 1048576", "9-byte secret, HS256 needs at least 32",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := ratelimit.KeyByJWTSubject(tt.key, tt.configs...)
			l, err := ratelimit.New(1, time.Minute, k)
			if !assert.Error(t, err, "New accepted the configuration") {
				l.Close()
				return
			}
			want := make([]string, len(tt.want))
			for i, w := range tt.want {
				want[i] = prefix + w
			}
			assert.Equal(t, want, strings.Split(err.Error(), "\n"), "New's error")

			key, err := k.Key(keysBearer(keysSign(t, jwt.SigningMethodHS256, keysJWT().hmac, keysClaims("alice"))))
			assert.Empty(t, key)
			assert.Equal(t, http.StatusInternalServerError, keysStatus(err), "misconfigured Keyer's error %v", err)
		})
	}
}

// Configurations the old API refused, and the bounds of the new one, are
// accepted.
func TestKeyByJWTSubjectValidConfig(t *testing.T) {
	k := keysJWT()
	for name, c := range map[string]ratelimit.JWTConfig{
		"zero":                   {},
		"empty Algorithms":       {Algorithms: []string{}},
		"empty Audience":         {Audience: []string{}},
		"leeway 5 minutes":       {Leeway: 5 * time.Minute},
		"MaxLength 256":          {MaxLength: 256},
		"MaxLength 1 MiB":        {MaxLength: 1 << 20},
		"HS256 and HS384 pinned": {Algorithms: []string{"HS256", "HS384"}},
	} {
		l, err := ratelimit.New(1, time.Minute, ratelimit.KeyByJWTSubject(append(k.hmac, k.hmac...), c))
		if assert.NoError(t, err, name) {
			l.Close()
		}
	}
}

func TestKeyByJWTSubjectMaxLength(t *testing.T) {
	k := keysJWT()
	// A valid token with a long subject passes the default cap of 8 KiB
	// but not a tighter one.
	tok := keysSign(t, jwt.SigningMethodHS256, k.hmac, keysClaims(strings.Repeat("x", 600)))
	_, err := ratelimit.KeyByJWTSubject(k.hmac).Key(keysBearer(tok))
	assert.NoError(t, err, "default cap, %d-byte token", len(tok))
	_, err = ratelimit.KeyByJWTSubject(k.hmac, ratelimit.JWTConfig{MaxLength: 512}).Key(keysBearer(tok))
	assert.Equal(t, http.StatusUnauthorized, keysStatus(err), "MaxLength 512, %d-byte token: error %v", len(tok), err)

	// The cap is the token's length, in bytes: at it passes, one under
	// it does not.
	_, err = ratelimit.KeyByJWTSubject(k.hmac, ratelimit.JWTConfig{MaxLength: len(tok)}).Key(keysBearer(tok))
	assert.NoError(t, err, "MaxLength %d, the token's length", len(tok))
	_, err = ratelimit.KeyByJWTSubject(k.hmac, ratelimit.JWTConfig{MaxLength: len(tok) - 1}).Key(keysBearer(tok))
	assert.Error(t, err, "MaxLength %d, a byte short of the token", len(tok)-1)

	// The default is 8 KiB: a token just over it is refused.
	big := keysSign(t, jwt.SigningMethodHS256, k.hmac, keysClaims(strings.Repeat("x", 6<<10)))
	require.Greater(t, len(big), 8<<10)
	_, err = ratelimit.KeyByJWTSubject(k.hmac).Key(keysBearer(big))
	assert.Error(t, err, "default cap, %d-byte token", len(big))
	_, err = ratelimit.KeyByJWTSubject(k.hmac, ratelimit.JWTConfig{MaxLength: len(big)}).Key(keysBearer(big))
	assert.NoError(t, err, "MaxLength %d", len(big))
}

// The extractor keeps its own copies of the secret and of the config's
// slices: a caller reusing them cannot change what it verifies.
func TestKeyByJWTSubjectCopiesItsInputs(t *testing.T) {
	k := keysJWT()
	secret := append([]byte(nil), k.hmac...)
	c := ratelimit.JWTConfig{Algorithms: []string{"HS256"}, Audience: []string{"api"}}
	kr := ratelimit.KeyByJWTSubject(secret, c)
	tok := keysSign(t, jwt.SigningMethodHS256, k.hmac, keysClaims("alice"))

	copy(secret, "changed by the caller afterwards")
	c.Algorithms[0], c.Audience[0] = "HS512", "other"
	got, err := kr.Key(keysBearer(tok))
	require.NoError(t, err)
	assert.Equal(t, "sub:alice", got)

	// An Ed25519 public key is a slice too: a caller decoding keys into
	// one buffer must not swap the key of the extractors it made.
	buf := append(ed25519.PublicKey(nil), k.edPub...)
	edKr := ratelimit.KeyByJWTSubject(buf)
	edTok := keysSign(t, jwt.SigningMethodEdDSA, k.ed, keysClaims("alice"))
	_, impostor, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	copy(buf, impostor.Public().(ed25519.PublicKey))
	got, err = edKr.Key(keysBearer(edTok))
	require.NoError(t, err, "Ed25519 key overwritten by the caller afterwards")
	assert.Equal(t, "sub:alice", got)
}

func BenchmarkKeyByJWTSubject(b *testing.B) {
	k := keysJWT()
	benches := []struct {
		name string
		k    ratelimit.Keyer
		tok  string
	}{
		{"HS256", ratelimit.KeyByJWTSubject(k.hmac), keysSign(b, jwt.SigningMethodHS256, k.hmac, keysClaims("alice"))},
		{"ES256", ratelimit.KeyByJWTSubject(&k.ec.PublicKey), keysSign(b, jwt.SigningMethodES256, k.ec, keysClaims("alice"))},
		{"1MiB", ratelimit.KeyByJWTSubject(k.hmac), strings.Repeat("A", 1<<20)},
	}
	for _, bb := range benches {
		b.Run(bb.name, func(b *testing.B) {
			r := keysBearer(bb.tok)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					bb.k.Key(r)
				}
			})
		})
	}
}

// keysSignPayload returns an HS256 token of payload, written by hand so
// that its claims keep the order and case given, as any issuer's JSON
// encoder may write them.
func keysSignPayload(t testing.TB, key []byte, payload string) string {
	t.Helper()
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(payload))
	sig, err := jwt.SigningMethodHS256.Sign(signing, key)
	require.NoError(t, err, "signing")
	return signing + "." + enc.EncodeToString(sig)
}

// Claim names are case-sensitive (RFC 7519, section 10.1.1): "Exp" is
// not exp, nor "Sub" sub, and neither may stand in for the claim or
// override it.
func TestKeyByJWTSubjectClaimNamesAreCaseSensitive(t *testing.T) {
	k := keysJWT()
	kr := ratelimit.KeyByJWTSubject(k.hmac, ratelimit.JWTConfig{Issuer: "https://issuer.example"})
	past, future := time.Now().Add(-time.Hour).Unix(), time.Now().Add(time.Hour).Unix()
	tests := []struct {
		name    string
		payload string
		want    string // key, or "" for a 401 invalid_token
	}{
		{"exact names", fmt.Sprintf(`{"sub":"alice","iss":"https://issuer.example","exp":%d}`, future), "sub:alice"},
		{"Exp does not stand in for exp", fmt.Sprintf(`{"sub":"alice","iss":"https://issuer.example","EXP":%d}`, future), ""},
		{"Exp does not override a passed exp", fmt.Sprintf(`{"sub":"alice","iss":"https://issuer.example","exp":%d,"Exp":%d}`, past, future), ""},
		{"Nbf does not override a future nbf", fmt.Sprintf(`{"sub":"alice","iss":"https://issuer.example","exp":%d,"nbf":%d,"Nbf":%d}`, future, future, past), ""},
		{"Sub does not stand in for sub", fmt.Sprintf(`{"Sub":"mallory","iss":"https://issuer.example","exp":%d}`, future), ""},
		{"Sub does not override sub", fmt.Sprintf(`{"sub":"alice","Sub":"mallory","iss":"https://issuer.example","exp":%d}`, future), "sub:alice"},
		{"Iss does not stand in for iss", fmt.Sprintf(`{"sub":"alice","ISS":"https://issuer.example","exp":%d}`, future), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := kr.Key(keysBearer(keysSignPayload(t, k.hmac, tt.payload)))
			if tt.want != "" {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				return
			}
			keysWantInvalidToken(t, got, err)
		})
	}
}

// keysWantInvalidToken asserts that a Keyer refused a token: no key, and
// a 401 asking for a valid one.
func keysWantInvalidToken(t *testing.T, got string, err error) {
	t.Helper()
	assert.Empty(t, got, "key alongside the error")
	ke, ok := keysKeyError(err)
	require.True(t, ok, "key %q, error %v: want a 401 invalid_token", got, err)
	assert.Equal(t, http.StatusUnauthorized, ke.Status)
	assert.Equal(t, `Bearer error="invalid_token"`, ke.Challenge)
}
