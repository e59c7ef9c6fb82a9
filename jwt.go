package ratelimit

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// A JWTOption configures KeyByJWTSubject: see JWTAlgorithms, JWTIssuer,
// JWTAudience, JWTLeeway and JWTMaxLength. A nil JWTOption is a
// configuration error.
type JWTOption func(*jwtConfig)

type jwtConfig struct {
	algs   []string
	iss    string
	aud    []string
	leeway time.Duration
	maxLen int
	errs   []error
}

// DefaultJWTMaxLength is the longest bearer token KeyByJWTSubject parses
// unless JWTMaxLength says otherwise: 8 KiB, several times a token with a
// generous set of claims.
const DefaultJWTMaxLength = 8 << 10

// hmacMinKey is the shortest secret each HMAC algorithm accepts: the size
// of its hash, as RFC 7518 section 3.2 requires.
var hmacMinKey = map[string]int{"HS256": 32, "HS384": 48, "HS512": 64}

// JWTAlgorithms pins the signature algorithms a token may use (by their
// JOSE names: "HS256", "RS256", "PS256", "ES256", "EdDSA", ...). By
// default the one algorithm that fits the key is accepted: HS256 for a
// []byte secret, RS256 for an RSA key, ES256, ES384 or ES512 by the curve
// of an ECDSA key, EdDSA for an Ed25519 key. "none" is never accepted, nor
// a mix of HMAC and public-key algorithms (the confusion that lets a
// public key be used as an HMAC secret), nor an algorithm that does not
// fit the key.
func JWTAlgorithms(algs ...string) JWTOption {
	return func(c *jwtConfig) {
		if len(algs) == 0 {
			c.errs = append(c.errs, errors.New("ratelimit: JWTAlgorithms: no algorithms"))
		}
		c.algs = append([]string(nil), algs...)
	}
}

// JWTIssuer requires the token's iss claim to be iss.
func JWTIssuer(iss string) JWTOption {
	return func(c *jwtConfig) {
		if iss == "" {
			c.errs = append(c.errs, errors.New("ratelimit: JWTIssuer: empty issuer"))
		}
		c.iss = iss
	}
}

// JWTAudience requires the token's aud claim to name at least one of aud.
func JWTAudience(aud ...string) JWTOption {
	return func(c *jwtConfig) {
		if len(aud) == 0 || slices.Contains(aud, "") {
			c.errs = append(c.errs, errors.New("ratelimit: JWTAudience: empty audience"))
		}
		c.aud = append([]string(nil), aud...)
	}
}

// JWTLeeway tolerates clock skew between the token's issuer and this
// server when checking exp and nbf: 0 to 5 minutes (default 0).
func JWTLeeway(d time.Duration) JWTOption {
	return func(c *jwtConfig) {
		if d < 0 || d > 5*time.Minute {
			c.errs = append(c.errs, fmt.Errorf("ratelimit: JWTLeeway: %v, want 0 to 5m", d))
		}
		c.leeway = d
	}
}

// JWTMaxLength sets the longest bearer token parsed, in bytes (default
// DefaultJWTMaxLength; 256 to 1 MiB). A longer one is refused before any
// parsing, so an oversized token costs no more than a comparison.
func JWTMaxLength(n int) JWTOption {
	return func(c *jwtConfig) {
		if n < 256 || n > 1<<20 {
			c.errs = append(c.errs, fmt.Errorf("ratelimit: JWTMaxLength: %d, want 256 to 1048576", n))
		}
		c.maxLen = n
	}
}

// KeyByJWTSubject keys requests by the subject (sub claim) of the JSON
// Web Token in their "Authorization: Bearer" header, as "sub:" followed by
// the subject, once the token is verified: its signature checked with key
// by an algorithm pinned in advance (see JWTAlgorithms), an exp claim
// present and not passed, nbf if present passed, and iss and aud as
// JWTIssuer and JWTAudience require. The claimed subject of a token that
// fails any check is never used.
//
// key is what verifies signatures: a []byte HMAC secret (at least as long
// as the hash: 32 bytes for HS256), an *rsa.PublicKey (2048 bits or more),
// an *ecdsa.PublicKey or an ed25519.PublicKey; or a jwt.Keyfunc that picks
// the key for a token (from its "kid", for key rotation), in which case
// JWTAlgorithms is required. A private key is refused: give the verifier
// only the public half.
//
// A request without an Authorization header, or with another scheme
// (Basic), is answered 401 with "WWW-Authenticate: Bearer"; the error
// matches ErrNoKey, so KeyFirst can fall back, to KeyByIP say. A token
// that is present but fails (bad signature, "alg":"none", expired, no
// exp, wrong issuer or audience, no subject, malformed, longer than
// JWTMaxLength, or several Authorization headers) is answered 401 with
// `WWW-Authenticate: Bearer error="invalid_token"`, and does not fall
// back: the client learns its token is refused.
//
// If authentication middleware before the limiter already verifies the
// token, prefer KeyByContext with the identity it stored: one
// verification per request is enough. Invalid arguments or options are
// reported by New. The KeyFunc is safe for simultaneous use.
func KeyByJWTSubject(key any, opts ...JWTOption) KeyFunc {
	c := jwtConfig{maxLen: DefaultJWTMaxLength}
	for _, o := range opts {
		if o == nil {
			c.errs = append(c.errs, errors.New("ratelimit: KeyByJWTSubject: nil JWTOption"))
			continue
		}
		o(&c)
	}
	keyfunc, err := c.verifier(key)
	if err != nil {
		c.errs = append(c.errs, err)
	}
	if err := errors.Join(c.errs...); err != nil {
		return brokenKeyFunc(err)
	}

	popts := []jwt.ParserOption{
		jwt.WithValidMethods(c.algs),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(c.leeway),
	}
	if c.iss != "" {
		popts = append(popts, jwt.WithIssuer(c.iss))
	}
	if len(c.aud) > 0 {
		popts = append(popts, jwt.WithAudience(c.aud...))
	}
	parser := jwt.NewParser(popts...)
	missing := noKey(&KeyError{
		Status:    http.StatusUnauthorized,
		Message:   "401 Unauthorized: bearer token required",
		Challenge: "Bearer",
	})
	invalid := &KeyError{
		Status:    http.StatusUnauthorized,
		Message:   "401 Unauthorized: invalid or expired bearer token",
		Challenge: `Bearer error="invalid_token"`,
	}
	maxLen := c.maxLen
	return func(r *http.Request) (string, error) {
		lines := r.Header["Authorization"]
		if len(lines) == 0 {
			return "", missing
		}
		if len(lines) > 1 {
			return "", invalid
		}
		tok, ok := bearerToken(lines[0])
		if !ok {
			return "", missing
		}
		if len(tok) > maxLen {
			return "", invalid
		}
		var claims jwt.RegisteredClaims
		if _, err := parser.ParseWithClaims(tok, &claims, keyfunc); err != nil || claims.Subject == "" {
			return "", invalid
		}
		return "sub:" + claims.Subject, nil
	}
}

// bearerToken returns the credentials of an "Authorization: Bearer ..."
// value (RFC 6750; the scheme is case-insensitive), or false for another
// scheme.
func bearerToken(v string) (string, bool) {
	const scheme = "Bearer "
	if len(v) < len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		return "", false
	}
	return strings.Trim(v[len(scheme):], " "), true
}

// verifier checks key against the configured algorithms, choosing them
// from the key when none are, and returns the jwt.Keyfunc that hands it to
// the parser.
func (c *jwtConfig) verifier(key any) (jwt.Keyfunc, error) {
	var family string // the one family of algorithms key fits
	var def string    // the default algorithm for key
	switch k := key.(type) {
	case nil:
		return nil, errors.New("ratelimit: KeyByJWTSubject: nil key")
	case jwt.Keyfunc:
		if k == nil {
			return nil, errors.New("ratelimit: KeyByJWTSubject: nil key")
		}
		return k, c.checkAlgs("")
	case func(*jwt.Token) (any, error):
		if k == nil {
			return nil, errors.New("ratelimit: KeyByJWTSubject: nil key")
		}
		return k, c.checkAlgs("")
	case []byte:
		family, def = "HS", "HS256"
	case *rsa.PublicKey:
		if k == nil || k.N == nil || k.N.BitLen() < 2048 {
			return nil, errors.New("ratelimit: KeyByJWTSubject: RSA key shorter than 2048 bits")
		}
		family, def = "RS", "RS256"
	case *ecdsa.PublicKey:
		if k == nil || k.Curve == nil {
			return nil, errors.New("ratelimit: KeyByJWTSubject: nil ECDSA key")
		}
		switch k.Curve {
		case elliptic.P256():
			def = "ES256"
		case elliptic.P384():
			def = "ES384"
		case elliptic.P521():
			def = "ES512"
		default:
			return nil, errors.New("ratelimit: KeyByJWTSubject: ECDSA key on an unsupported curve")
		}
		family = def
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return nil, errors.New("ratelimit: KeyByJWTSubject: malformed Ed25519 key")
		}
		family, def = "EdDSA", "EdDSA"
	case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
		return nil, fmt.Errorf("ratelimit: KeyByJWTSubject: %T is a private key: give the verifier its public key", key)
	case string:
		return nil, errors.New("ratelimit: KeyByJWTSubject: string key: pass an HMAC secret as []byte, a public key parsed (jwt.ParseRSAPublicKeyFromPEM, ...)")
	default:
		return nil, fmt.Errorf("ratelimit: KeyByJWTSubject: unsupported key type %T", key)
	}
	if c.algs == nil {
		c.algs = []string{def}
	}
	if err := c.checkAlgs(family); err != nil {
		return nil, err
	}
	if b, ok := key.([]byte); ok {
		for _, a := range c.algs {
			if len(b) < hmacMinKey[a] {
				return nil, fmt.Errorf("ratelimit: KeyByJWTSubject: %d-byte secret, %s needs at least %d", len(b), a, hmacMinKey[a])
			}
		}
		// Copy so that a caller reusing its slice cannot change the key.
		key = append([]byte(nil), b...)
	}
	return func(*jwt.Token) (any, error) { return key, nil }, nil
}

// checkAlgs validates the pinned algorithms: known, not "none", one family
// of keys, and, for a static key, the family of that key (family "RS"
// admits the RSA-PSS algorithms too; an ECDSA or EdDSA family is one
// exact algorithm).
func (c *jwtConfig) checkAlgs(family string) error {
	if len(c.algs) == 0 {
		return errors.New("ratelimit: KeyByJWTSubject: a jwt.Keyfunc needs JWTAlgorithms")
	}
	var errs []error
	hmac, public := false, false
	for _, a := range c.algs {
		var fam string
		switch a {
		case "HS256", "HS384", "HS512":
			fam, hmac = "HS", true
		case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
			fam, public = "RS", true
		case "ES256", "ES384", "ES512", "EdDSA":
			fam, public = a, true
		default:
			errs = append(errs, fmt.Errorf("ratelimit: JWTAlgorithms: %q is not an accepted algorithm", a))
			continue
		}
		if family != "" && fam != family {
			errs = append(errs, fmt.Errorf("ratelimit: JWTAlgorithms: %s does not fit the key given", a))
		}
	}
	if hmac && public {
		errs = append(errs, errors.New("ratelimit: JWTAlgorithms: mixes HMAC and public-key algorithms"))
	}
	return errors.Join(errs...)
}
