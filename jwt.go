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

// JWTConfig configures KeyByJWTSubject. The zero JWTConfig accepts the
// one algorithm that fits the key, any issuer and audience, no clock
// skew, and tokens of up to 8 KiB.
type JWTConfig struct {
	// Algorithms pins the signature algorithms a token may use (by their
	// JOSE names: "HS256", "RS256", "PS256", "ES256", "EdDSA", ...). If
	// empty, the one algorithm that fits the key is accepted: HS256 for a
	// []byte secret, RS256 for an RSA key, ES256, ES384 or ES512 by the
	// curve of an ECDSA key, EdDSA for an Ed25519 key. "none" is never
	// accepted, nor a mix of HMAC and public-key algorithms (the
	// confusion that lets a public key be used as an HMAC secret), nor an
	// algorithm that does not fit the key.
	Algorithms []string
	// Issuer, if set, is required in the token's iss claim.
	Issuer string
	// Audience, if set, requires the token's aud claim to name at least
	// one of its values.
	Audience []string
	// Leeway tolerates clock skew between the token's issuer and this
	// server when checking exp and nbf: 0 to 5 minutes.
	Leeway time.Duration
	// MaxLength is the longest bearer token parsed, in bytes: 256 to 1
	// MiB, or 0 for 8 KiB, several times a token with a generous set of
	// claims. A longer one is refused before any parsing, so that an
	// oversized token costs no more than a comparison.
	MaxLength int
}

// defaultJWTMaxLength is the MaxLength of the zero JWTConfig.
const defaultJWTMaxLength = 8 << 10

// check reports what is wrong with c, or nil.
func (c *JWTConfig) check() error {
	var errs []error
	if slices.Contains(c.Audience, "") {
		errs = append(errs, errors.New("ratelimit: KeyByJWTSubject: empty audience"))
	}
	if c.Leeway < 0 || c.Leeway > 5*time.Minute {
		errs = append(errs, fmt.Errorf("ratelimit: KeyByJWTSubject: leeway %v, want 0 to 5m", c.Leeway))
	}
	if c.MaxLength == 0 {
		c.MaxLength = defaultJWTMaxLength
	} else if c.MaxLength < 256 || c.MaxLength > 1<<20 {
		errs = append(errs, fmt.Errorf("ratelimit: KeyByJWTSubject: MaxLength %d, want 256 to 1048576", c.MaxLength))
	}
	return errors.Join(errs...)
}

// hmacMinKey returns the shortest secret an HMAC algorithm accepts: the
// size of its hash, as RFC 7518 section 3.2 requires.
func hmacMinKey(alg string) int {
	switch alg {
	case "HS384":
		return 48
	case "HS512":
		return 64
	}
	return 32
}

// KeyByJWTSubject keys requests by the subject (sub claim) of the JSON
// Web Token in their "Authorization: Bearer" header, as "sub:" followed by
// the subject, once the token is verified: its signature checked with key
// by an algorithm pinned in advance (see JWTConfig), an exp claim present
// and not passed, nbf if present passed, and iss and aud as the config
// requires. The claimed subject of a token that fails any check is never
// used. A request may pass at most one JWTConfig.
//
// key is what verifies signatures: a []byte HMAC secret (at least as long
// as the hash: 32 bytes for HS256), an *rsa.PublicKey (2048 bits or more),
// an *ecdsa.PublicKey or an ed25519.PublicKey; or a jwt.Keyfunc that picks
// the key for a token (from its "kid", for key rotation), in which case
// JWTConfig.Algorithms is required. A private key is refused: give the verifier
// only the public half.
//
// A request without an Authorization header, or with another scheme
// (Basic), is answered 401 with "WWW-Authenticate: Bearer"; the error
// matches ErrNoKey, so KeyFirst can fall back, to KeyByIP say. A token
// that is present but fails (bad signature, "alg":"none", expired, no
// exp, wrong issuer or audience, no subject, malformed, longer than
// MaxLength, or several Authorization headers) is answered 401 with
// `WWW-Authenticate: Bearer error="invalid_token"`, and does not fall
// back: the client learns its token is refused.
//
// If authentication middleware before the limiter already verifies the
// token, prefer KeyByContext with the identity it stored: one
// verification per request is enough. An invalid key or configuration is
// reported by New. The Keyer is safe for simultaneous use.
func KeyByJWTSubject(key any, config ...JWTConfig) Keyer {
	if len(config) > 1 {
		return misconfigured{errors.New("ratelimit: KeyByJWTSubject: more than one JWTConfig")}
	}
	var c JWTConfig
	if len(config) == 1 {
		c = config[0]
		c.Algorithms, c.Audience = slices.Clone(c.Algorithms), slices.Clone(c.Audience)
	}
	keyfunc, err := c.verifier(key)
	if err := errors.Join(c.check(), err); err != nil {
		return misconfigured{err}
	}
	parser := c.parser()
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
	maxLen := c.MaxLength
	return KeyFunc(func(r *http.Request) (string, error) {
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
		sub, ok := verifiedSubject(parser, tok, keyfunc)
		if !ok {
			return "", invalid
		}
		return "sub:" + sub, nil
	})
}

// verifiedSubject returns the subject of tok, or false if tok fails
// verification or has no subject. The claims are read into a map, not a
// jwt.RegisteredClaims, since encoding/json matches struct fields
// case-insensitively and claim names are case-sensitive (RFC 7519,
// section 10.1.1): "Exp" must not pass for exp, nor "Sub" override sub.
func verifiedSubject(parser *jwt.Parser, tok string, keyfunc jwt.Keyfunc) (string, bool) {
	claims := jwt.MapClaims{}
	if _, err := parser.ParseWithClaims(tok, claims, keyfunc); err != nil {
		return "", false
	}
	sub, err := claims.GetSubject()
	return sub, err == nil && sub != ""
}

// parser returns the parser of tokens that c accepts.
func (c *JWTConfig) parser() *jwt.Parser {
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(c.Algorithms),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(c.Leeway),
	}
	if c.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(c.Issuer))
	}
	if len(c.Audience) > 0 {
		opts = append(opts, jwt.WithAudience(c.Audience...))
	}
	return jwt.NewParser(opts...)
}

// bearerToken returns the credentials of an "Authorization: Bearer ..."
// value (RFC 6750; the scheme is case-insensitive), or false for another
// scheme. The value's surrounding spaces and tabs are not part of it, and
// HTTP/2 servers do not strip them.
func bearerToken(v string) (string, bool) {
	const scheme = "Bearer "
	v = strings.TrimLeft(v, " \t")
	if len(v) < len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		return "", false
	}
	return trimOWS(v[len(scheme):]), true
}

// verifier checks key against the configured algorithms, choosing them
// from the key when none are, and returns the jwt.Keyfunc that hands it to
// the parser.
func (c *JWTConfig) verifier(key any) (jwt.Keyfunc, error) {
	switch k := key.(type) {
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
	}
	family, def, err := keyAlgorithms(key)
	if err != nil {
		return nil, err
	}
	if len(c.Algorithms) == 0 {
		c.Algorithms = []string{def}
	}
	if err := c.checkAlgs(family); err != nil {
		return nil, err
	}
	// Copy a slice so that a caller reusing it cannot change the key.
	switch b := key.(type) {
	case []byte:
		if err := c.checkSecret(b); err != nil {
			return nil, err
		}
		key = append([]byte(nil), b...)
	case ed25519.PublicKey:
		key = append(ed25519.PublicKey(nil), b...)
	}
	return func(*jwt.Token) (any, error) { return key, nil }, nil
}

// keyAlgorithms returns the one family of algorithms a static key fits
// (see checkAlgs) and the algorithm to pin when none is configured, or
// why the key cannot verify tokens.
func keyAlgorithms(key any) (family, def string, err error) {
	switch k := key.(type) {
	case nil:
		return "", "", errors.New("ratelimit: KeyByJWTSubject: nil key")
	case []byte:
		return "HS", "HS256", nil
	case *rsa.PublicKey:
		if k == nil || k.N == nil || k.N.BitLen() < 2048 {
			return "", "", errors.New("ratelimit: KeyByJWTSubject: RSA key shorter than 2048 bits")
		}
		return "RS", "RS256", nil
	case *ecdsa.PublicKey:
		// Each curve has one algorithm, its own family.
		alg, err := ecdsaAlgorithm(k)
		return alg, alg, err
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return "", "", errors.New("ratelimit: KeyByJWTSubject: malformed Ed25519 key")
		}
		return "EdDSA", "EdDSA", nil
	case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
		return "", "", fmt.Errorf("ratelimit: KeyByJWTSubject: %T is a private key: give the verifier its public key", key)
	case string:
		return "", "", errors.New("ratelimit: KeyByJWTSubject: string key: pass an HMAC secret as []byte, a public key parsed (jwt.ParseRSAPublicKeyFromPEM, ...)")
	}
	return "", "", fmt.Errorf("ratelimit: KeyByJWTSubject: unsupported key type %T", key)
}

// ecdsaAlgorithm returns the algorithm of k's curve.
func ecdsaAlgorithm(k *ecdsa.PublicKey) (string, error) {
	if k == nil || k.Curve == nil {
		return "", errors.New("ratelimit: KeyByJWTSubject: nil ECDSA key")
	}
	switch k.Curve {
	case elliptic.P256():
		return "ES256", nil
	case elliptic.P384():
		return "ES384", nil
	case elliptic.P521():
		return "ES512", nil
	}
	return "", errors.New("ratelimit: KeyByJWTSubject: ECDSA key on an unsupported curve")
}

// checkSecret checks that an HMAC secret is as long as each pinned
// algorithm requires (hmacMinKey).
func (c *JWTConfig) checkSecret(b []byte) error {
	for _, a := range c.Algorithms {
		if len(b) < hmacMinKey(a) {
			return fmt.Errorf("ratelimit: KeyByJWTSubject: %d-byte secret, %s needs at least %d", len(b), a, hmacMinKey(a))
		}
	}
	return nil
}

// checkAlgs validates the pinned algorithms: known, not "none", one family
// of keys, and, for a static key, the family of that key (family "RS"
// admits the RSA-PSS algorithms too; an ECDSA or EdDSA family is one
// exact algorithm).
func (c *JWTConfig) checkAlgs(family string) error {
	if len(c.Algorithms) == 0 {
		return errors.New("ratelimit: KeyByJWTSubject: a jwt.Keyfunc needs JWTConfig.Algorithms")
	}
	var errs []error
	hmac, public := false, false
	for _, a := range c.Algorithms {
		var fam string
		switch a {
		case "HS256", "HS384", "HS512":
			fam, hmac = "HS", true
		case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
			fam, public = "RS", true
		case "ES256", "ES384", "ES512", "EdDSA":
			fam, public = a, true
		default:
			errs = append(errs, fmt.Errorf("ratelimit: KeyByJWTSubject: %q is not an accepted algorithm", a))
			continue
		}
		if family != "" && fam != family {
			errs = append(errs, fmt.Errorf("ratelimit: KeyByJWTSubject: %s does not fit the key given", a))
		}
	}
	if hmac && public {
		errs = append(errs, errors.New("ratelimit: KeyByJWTSubject: Algorithms mixes HMAC and public-key algorithms"))
	}
	return errors.Join(errs...)
}
