package ratelimit

import (
	"net/http"
	"net/textproto"
)

// A KeyFunc names whom a request counts against: a client IP, an API key,
// a verified user. It returns an error, best a *KeyError, when the request
// carries no usable key; the middleware then answers without calling the
// next handler and without counting anything.
//
// Keys from the extractors in this package carry a kind prefix ("ip:",
// "apikey:", ...) so that keys of different kinds never collide.
type KeyFunc func(r *http.Request) (string, error)

// KeyError is a key extraction failure and the response it calls for.
// Message is sent to the client as is, so it must not repeat anything the
// client sent.
type KeyError struct {
	Status    int    // HTTP status, a 4xx
	Message   string // response body
	Challenge string // WWW-Authenticate value for a 401, or empty
}

func (e *KeyError) Error() string { return "ratelimit: " + e.Message }

// MaxKeyLen is the longest header value KeyByHeader accepts as a key.
const MaxKeyLen = 256

// KeyByHeader keys requests by the value of header name, typically an API
// key ("X-API-Key"). A request without the header, or with an empty one,
// is answered 400; a value longer than MaxKeyLen bytes is answered 431
// Request Header Fields Too Large rather than stored. The limiter does not
// check the key is genuine: put it behind the middleware that
// authenticates it, or an attacker can mint keys to dodge the limit.
func KeyByHeader(name string) KeyFunc {
	name = textproto.CanonicalMIMEHeaderKey(name)
	missing := &KeyError{Status: http.StatusBadRequest, Message: "400 Bad Request: missing " + name + " header"}
	tooLong := &KeyError{Status: http.StatusRequestHeaderFieldsTooLarge, Message: "431 Request Header Fields Too Large: " + name + " is too long"}
	return func(r *http.Request) (string, error) {
		v := r.Header[name]
		switch {
		case len(v) == 0 || v[0] == "":
			return "", missing
		case len(v[0]) > MaxKeyLen:
			return "", tooLong
		}
		return "apikey:" + v[0], nil
	}
}
