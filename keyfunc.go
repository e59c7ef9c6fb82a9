package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
)

// A Keyer names whom a request counts against: a client IP, an API key,
// a verified user. Key returns an error, best a *KeyError, when the
// request carries no usable key; the middleware then answers without
// calling the next handler and without counting anything.
//
// Keys from the extractors in this package carry a kind prefix ("ip:",
// "apikey:", "sub:", "id:", ...) so that keys of different kinds never
// collide: the client at 192.0.2.1 is "ip:192.0.2.1" and an API key
// "192.0.2.1" is "apikey:192.0.2.1". A Keyer of your own should do the
// same. An extractor given an invalid configuration returns a Keyer that
// New refuses with the configuration's error (and that answers 500 to any
// request it is still asked about).
type Keyer interface {
	Key(r *http.Request) (string, error)
}

// KeyFunc adapts a function to a Keyer, as http.HandlerFunc adapts one to
// an http.Handler.
type KeyFunc func(r *http.Request) (string, error)

// Key returns f(r).
func (f KeyFunc) Key(r *http.Request) (string, error) { return f(r) }

// KeyError is a key extraction failure and the response it calls for.
// Message is sent to the client as is, so it must not repeat anything the
// client sent.
//
// Status is a 4xx other than 429, or a 5xx. A 429 Too Many Requests is
// the limiter's refusal, which carries the Retry-After that says when to
// come back, and a Keyer has no wait to say: a KeyError of 429, as one of
// a status outside 400 to 599, is answered as a misconfigured Keyer, 500.
type KeyError struct {
	Status    int    // HTTP status: a 4xx but 429, or a 5xx (see above)
	Message   string // response body
	Challenge string // WWW-Authenticate value for a 401, or empty
}

// Error returns Message with the package prefix, for logs.
func (e *KeyError) Error() string { return "ratelimit: " + e.Message }

// ErrNoKey is matched (with errors.Is) by the errors of extractors that
// found no key of their kind in a request at all: no API-key header, no
// Authorization: Bearer credential, no identity in the context. KeyFirst
// then tries its next extractor. An extractor that finds a key it refuses
// (too long, forged, expired) returns an error that does not match it. A
// Keyer of your own can wrap ErrNoKey, or join it with a *KeyError, to
// take part in KeyFirst the same way.
var ErrNoKey = errors.New("ratelimit: the request carries no key of this kind")

// noKey marks a *KeyError as a missing key: it matches both the KeyError
// (errors.As) and ErrNoKey (errors.Is).
func noKey(e *KeyError) error { return withCause(e, ErrNoKey) }

// withCause returns an error that matches both e (errors.As) and cause
// (errors.Is), with e's text.
func withCause(e *KeyError, cause error) error { return &causedKeyError{e, []error{e, cause}} }

type causedKeyError struct {
	*KeyError
	wrapped []error // made once: Unwrap is on the path of every KeyFirst
}

func (e *causedKeyError) Unwrap() []error { return e.wrapped }

// maxKeyLen is the longest header value KeyByHeader keeps as a key, unless
// KeyHashed digests it.
const maxKeyLen = 256

// KeyByHeader keys requests by the value of header name, typically an API
// key ("X-API-Key"), as "apikey:" followed by the value without its
// leading and trailing spaces and tabs (HTTP/2 servers do not strip them,
// and " key" must not be a quota of its own). A request without the
// header, or with one that is empty or blank, is answered 400 (the error
// matches ErrNoKey); a value longer than 256 bytes is answered 431
// Request Header Fields Too Large rather than stored, unless KeyHashed
// digests it. When the header comes more than once, the first line
// counts, as with http.Header.Get, which is what most authentication
// middleware reads. Errors name the header as name spells it.
//
// The key reaches the store as sent. If it is a secret and the store is
// shared (Redis), wrap the extractor in KeyHashed so that the store only
// ever sees a digest. The limiter does not check the key is genuine: put
// it behind the middleware that authenticates it, or an attacker can mint
// keys to dodge the limit. An empty name is a configuration error,
// reported by New.
func KeyByHeader(name string) Keyer {
	if name == "" || strings.ContainsAny(name, " \t\r\n:") {
		return misconfigured{fmt.Errorf("ratelimit: KeyByHeader: invalid header name %q", name)}
	}
	canonical := textproto.CanonicalMIMEHeaderKey(name)
	missing := noKey(&KeyError{Status: http.StatusBadRequest, Message: "400 Bad Request: missing " + name + " header"})
	tooLong := &KeyError{Status: http.StatusRequestHeaderFieldsTooLarge, Message: "431 Request Header Fields Too Large: " + name + " is too long"}
	return KeyFunc(func(r *http.Request) (string, error) {
		v := r.Header[canonical]
		if len(v) == 0 {
			return "", missing
		}
		k := strings.Trim(v[0], " \t")
		switch {
		case k == "":
			return "", missing
		case len(k) > maxKeyLen:
			return "", &longKey{KeyError: tooLong, kind: "apikey:", value: k}
		}
		return "apikey:" + k, nil
	})
}

// longKey is the error of an extractor whose key, kind+value, is too long
// to keep as it is, but not to digest: KeyHashed digests it, KeyJoin joins
// it and passes the error on, and the middleware answers the *KeyError.
// The key is made only if one of them needs it, since a client can send
// a megabyte of header for nothing.
type longKey struct {
	*KeyError
	kind, value string
	join        func(d *keyDigest, depth int) // KeyJoin's: writes the whole key, in place of kind+value
}

// longPart is a part of a KeyJoin too long to keep, and its index.
type longPart struct {
	i int
	*longKey
}

// digest writes the key too long to keep to d, escaped depth times as a
// part of a join, so that a join need not be made whole.
func (e *longKey) digest(d *keyDigest, depth int) {
	if e.join != nil {
		e.join(d, depth)
		return
	}
	d.write(e.kind, depth)
	d.write(e.value, depth)
}

func (e *longKey) Unwrap() error { return e.KeyError }

// asLongKey returns err's *longKey, or nil.
func asLongKey(err error) *longKey {
	var long *longKey
	if errors.As(err, &long) {
		return long
	}
	return nil
}

// KeyByContext keys requests by an identity that earlier middleware has
// verified and put in the request's context (a user or tenant ID from a
// session, an mTLS client certificate, a JWT your auth layer already
// checked), as "id:" followed by the identity. It is the usual choice when
// authentication runs before the limiter: nothing is parsed twice, and
// nothing the client sent is trusted here. id reports the identity of a
// context, or false when it holds none; a request without one (or with an
// empty one) is answered 401 without a challenge, the error matching
// ErrNoKey so that KeyFirst can fall back, say, to KeyByIP for anonymous
// callers. A nil id is a configuration error, reported by New.
func KeyByContext(id func(ctx context.Context) (string, bool)) Keyer {
	if id == nil {
		return misconfigured{errors.New("ratelimit: KeyByContext: nil identity function")}
	}
	missing := noKey(&KeyError{Status: http.StatusUnauthorized, Message: "401 Unauthorized: authentication required"})
	return KeyFunc(func(r *http.Request) (string, error) {
		v, ok := id(r.Context())
		if !ok || v == "" {
			return "", missing
		}
		return "id:" + v, nil
	})
}

// KeyFirst returns the key of the first extractor in keys that finds one,
// for a chain such as a verified user, else an API key, else the client
// IP:
//
//	ratelimit.KeyFirst(ratelimit.KeyByJWTSubject(pub), ratelimit.KeyByHeader("X-API-Key"), ratelimit.KeyByIP())
//
// An extractor passes to the next only when the request carries no key of
// its kind (its error matches ErrNoKey). Any other error, such as a forged
// or expired token or an oversized key, is the answer: a client that
// presents a bad credential is told so rather than quietly counted as
// someone else. When no extractor finds a key, the first one's error is
// the answer, so a lone 401 challenge asks for the preferred credential.
// Keys keep their kind prefixes, so the kinds never share a count. No
// extractors, or a nil one, is a configuration error, reported by New.
func KeyFirst(keys ...Keyer) Keyer {
	if err := checkKeyers("KeyFirst", keys); err != nil {
		return misconfigured{err}
	}
	keys = slices.Clone(keys)
	return KeyFunc(func(r *http.Request) (string, error) {
		var first error
		for _, key := range keys {
			k, err := key.Key(r)
			if err == nil {
				return k, nil
			}
			if !errors.Is(err, ErrNoKey) {
				return "", err
			}
			if first == nil {
				first = err
			}
		}
		return "", first
	})
}

// KeyJoin returns a key made of the keys every one of keys finds, for quotas per
// client and endpoint:
//
//	ratelimit.KeyJoin(ratelimit.KeyByIP(), ratelimit.KeyByRoute())
//
// gives "ip:192.0.2.1|route:POST /login". Each part is escaped ("%" as
// "%25", "|" as "%7C") before the parts are joined with "|", so two
// different lists of parts never make the same key. The first error of an
// extractor is the answer (a part too long to keep makes the join too long
// to keep, unless KeyHashed digests it). No extractors, or a nil one, is a
// configuration error, reported by New.
func KeyJoin(keys ...Keyer) Keyer {
	if err := checkKeyers("KeyJoin", keys); err != nil {
		return misconfigured{err}
	}
	keys = slices.Clone(keys)
	return KeyFunc(func(r *http.Request) (string, error) {
		var parts [8]string
		ks := parts[:0]
		var longs []longPart // the parts too long to keep
		for i, key := range keys {
			k, err := key.Key(r)
			if err != nil {
				// A part too long to keep still makes a key KeyHashed
				// can digest: the whole join, not the part alone, and
				// made only if KeyHashed asks for it.
				if l := asLongKey(err); l != nil {
					longs = append(longs, longPart{i, l})
					ks = append(ks, "")
					continue
				}
				if longs != nil {
					// The first error is the answer, and no join is made.
					return "", longs[0].KeyError
				}
				return "", err
			}
			ks = append(ks, k)
		}
		if longs != nil {
			return "", longJoin(slices.Clone(ks), longs)
		}
		return joinKeys(ks), nil
	})
}

// longJoin returns the error of a join too long to keep, whose parts are
// ks but for those of longs, which KeyHashed digests as joinKeys would
// join them, without making the join.
func longJoin(ks []string, longs []longPart) *longKey {
	return &longKey{KeyError: longs[0].KeyError, join: func(d *keyDigest, depth int) {
		next := 0 // the next of longs
		for i, k := range ks {
			if i > 0 {
				d.write("|", depth)
			}
			if next < len(longs) && longs[next].i == i {
				longs[next].digest(d, depth+1)
				next++
				continue
			}
			d.write(k, depth+1)
		}
	}}
}

// joinKeys escapes each key and joins them with "|".
func joinKeys(ks []string) string {
	if len(ks) == 1 {
		return escapeKeyPart(ks[0])
	}
	n := len(ks) - 1
	for _, k := range ks {
		n += len(k) + 2*strings.Count(k, "%") + 2*strings.Count(k, "|")
	}
	var b strings.Builder
	b.Grow(n)
	for i, k := range ks {
		if i > 0 {
			b.WriteByte('|')
		}
		for j := 0; j < len(k); j++ {
			switch k[j] {
			case '%':
				b.WriteString("%25")
			case '|':
				b.WriteString("%7C")
			default:
				b.WriteByte(k[j])
			}
		}
	}
	return b.String()
}

func escapeKeyPart(k string) string {
	if !strings.ContainsAny(k, "%|") {
		return k
	}
	return strings.NewReplacer("%", "%25", "|", "%7C").Replace(k)
}

// KeyByRoute keys requests by the http.ServeMux pattern that matched them
// (Request.Pattern), as "route:" followed by the pattern ("route:GET
// /items/{id}"), for per-endpoint quotas with KeyJoin. Patterns are the
// server's own, so a client cannot mint new keys by varying the path, as
// it could if the key were the raw path. The limiter must then sit inside
// the route (mux.Handle("POST /login", l.Handler(h))): a request that did
// not come through a ServeMux pattern is answered 500, since it reveals a
// misplaced middleware, not a bad request.
func KeyByRoute() Keyer {
	return KeyFunc(func(r *http.Request) (string, error) {
		if r.Pattern == "" {
			return "", errMisconfigured
		}
		return "route:" + r.Pattern, nil
	})
}

// KeyHashed returns k with each key replaced by a digest of it before it
// reaches the store: the key's kind, ".sha256:", and the first 128 bits of
// the SHA-256 of the whole key in unpadded base64url, as
// "apikey.sha256:3q2-7wAAAAAAAAAAAAAAAA". Only the kinds of this
// package's extractors ("ip", "apikey", "sub", "id", "route")
// stay in clear; any other prefix, which might be part of a secret,
// becomes "key". Use it for keys that are secrets (API keys), so that a
// store shared with other systems (Redis, its backups, its monitoring)
// never holds them, and for keys of unbounded length: a key k's
// extractors find too long to keep (KeyByHeader's beyond 256 bytes) is
// digested like any other, the digest being 22 bytes after the kind. 128
// bits keep accidental collisions out of reach (2^64 keys for an even
// chance), and the digest is unsalted so that every server of a fleet
// maps a key to the same count. It is not a password hash: a low-entropy
// secret could be found by guessing. Other errors of k pass through
// unchanged. A nil k is a configuration error, reported by New.
func KeyHashed(k Keyer) Keyer {
	if err := checkKeyers("KeyHashed", []Keyer{k}); err != nil {
		return misconfigured{err}
	}
	return KeyFunc(func(r *http.Request) (string, error) {
		key, err := k.Key(r)
		if err != nil {
			long := asLongKey(err)
			if long == nil {
				return "", err
			}
			return hashLong(long), nil
		}
		return hashKey("", key), nil
	})
}

// knownKind reports whether kind is the kind prefix of one of this
// package's extractors, the only ones KeyHashed keeps in clear.
func knownKind(kind string) bool {
	switch kind {
	case "ip", "apikey", "sub", "id", "route":
		return true
	}
	return false
}

// hashKey returns the digest form described at KeyHashed of the key
// prefix+rest, in two parts so that a long key need not be made whole.
func hashKey(prefix, rest string) string {
	h := sha256.New()
	// Through a buffer: []byte(rest) would copy the whole key, which a
	// client can make a megabyte long.
	var chunk [256]byte
	for _, s := range [...]string{prefix, rest} {
		for s != "" {
			n := copy(chunk[:], s)
			h.Write(chunk[:n])
			s = s[n:]
		}
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	key := prefix
	if key == "" {
		key = rest
	}
	return digestForm(&sum, key)
}

// hashLong returns the digest form of the key too long to keep of long,
// which a join writes in pieces, so that it is never made whole.
func hashLong(long *longKey) string {
	if long.join == nil {
		return hashKey(long.kind, long.value)
	}
	d := keyDigest{h: sha256.New()}
	long.digest(&d, 0)
	d.flush()
	var sum [sha256.Size]byte
	d.h.Sum(sum[:0])
	return digestForm(&sum, string(d.head[:d.n]))
}

// keyDigest digests a key written in pieces, through a buffer, and keeps
// its first bytes, which name its kind.
type keyDigest struct {
	h       hash.Hash
	buf     [256]byte
	used    int                  // bytes of buf not yet digested
	head    [len("apikey:")]byte // the key's first bytes, once flushed
	n       int                  // of head
	flushed bool
}

// write adds s to the key, escaped depth times as joinKeys escapes a part:
// '%' as "%25" and '|' as "%7C" once, "%2525" and "%257C" twice, ...
func (d *keyDigest) write(s string, depth int) {
	if depth == 0 {
		d.copy(s)
		return
	}
	pct := "%" + strings.Repeat("25", depth)
	pipe := pct[:len(pct)-2] + "7C"
	start := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '%' || c == '|' {
			d.copy(s[start:i])
			if c == '%' {
				d.copy(pct)
			} else {
				d.copy(pipe)
			}
			start = i + 1
		}
	}
	d.copy(s[start:])
}

// copy adds s to the key as it is.
func (d *keyDigest) copy(s string) {
	if d.used+len(s) <= len(d.buf) {
		d.used += copy(d.buf[d.used:], s)
		return
	}
	for s != "" {
		c := copy(d.buf[d.used:], s)
		d.used, s = d.used+c, s[c:]
		if d.used == len(d.buf) {
			d.flush()
		}
	}
}

// flush digests the buffer, having kept the key's first bytes from it.
func (d *keyDigest) flush() {
	if !d.flushed {
		d.n, d.flushed = copy(d.head[:], d.buf[:d.used]), true
	}
	d.h.Write(d.buf[:d.used])
	d.used = 0
}

// digestForm returns the digest form of a key, given its SHA-256 and its
// first bytes, at least up to its kind's ':' if it has a known kind.
func digestForm(sum *[sha256.Size]byte, head string) string {
	kind := "key"
	if i := strings.IndexByte(head, ':'); i > 0 && knownKind(head[:i]) {
		kind = head[:i]
	}
	const suffix = ".sha256:"
	var buf [len("apikey") + len(suffix) + 22]byte
	b := append(buf[:0], kind...)
	b = append(b, suffix...)
	b = base64.RawURLEncoding.AppendEncode(b, sum[:16])
	return string(b)
}

// checkKeyers reports a nil or misconfigured Keyer among keys, for the
// combinators, so that New sees through them.
func checkKeyers(who string, keys []Keyer) error {
	if len(keys) == 0 {
		return fmt.Errorf("ratelimit: %s: no Keyers", who)
	}
	var errs []error
	for i, k := range keys {
		if isNilValue(k) {
			errs = append(errs, fmt.Errorf("ratelimit: %s: Keyer %d is nil", who, i))
			continue
		}
		errs = append(errs, keyError(k))
	}
	return errors.Join(errs...)
}

// misconfigured is the Keyer an extractor returns for an invalid
// configuration: New refuses it with err, so that an invalid option
// neither passes unnoticed nor panics, and a request it is asked about
// anyway is answered 500.
type misconfigured struct{ err error }

func (m misconfigured) Key(*http.Request) (string, error) { return "", &configError{m.err} }

// keyError returns the configuration error of k, or nil.
func keyError(k Keyer) error {
	if m, ok := k.(misconfigured); ok {
		return m.err
	}
	return nil
}

// configError is what a misconfigured Keyer returns: its text is the
// configuration error, for logs and OnError; the response is a 500.
type configError struct{ cause error }

var errMisconfigured = &KeyError{Status: http.StatusInternalServerError, Message: "500 Internal Server Error: rate-limit key misconfigured"}

func (e *configError) Error() string   { return e.cause.Error() }
func (e *configError) Unwrap() []error { return []error{errMisconfigured, e.cause} }
