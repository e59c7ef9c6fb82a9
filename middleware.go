package ratelimit

import (
	"context"
	"errors"
	"net/http"
)

// Handler returns next wrapped in the limiter, so l.Handler is a
// func(http.Handler) http.Handler (an alice.Constructor, a chi or
// gorilla/mux middleware) as it stands.
//
// For each request the middleware, before next runs:
//   - passes requests exempted by WithSkip straight to next;
//   - answers a request whose key cannot be extracted with the key error
//     handler (a 4xx by default) without calling next;
//   - answers a request the store cannot decide with the error handler
//     (503 by default), or passes it to next under WithFailOpen;
//   - sets the rate-limit headers (see WithHeaders), and on a rejection
//     Retry-After, then answers with the denied handler (429 by default),
//     or, allowed or in dry-run mode, calls next (with the decision in the
//     request's context under WithResultInContext).
//
// The ResponseWriter is passed on unwrapped, so http.Flusher,
// http.Hijacker and http.ResponseController keep working.
func (l *Limiter) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.skip != nil && l.skip(r) {
			next.ServeHTTP(w, r)
			return
		}
		key, err := l.key(r)
		if err != nil {
			if l.hooks.OnError != nil {
				l.hooks.OnError(r, err)
			}
			l.keyErr(w, r, err)
			return
		}
		p, fresh := l.def, l.freshKeys
		if l.choose != nil {
			if named := l.plans[l.choose(r, key)]; named != nil {
				p, key, fresh = named, named.prefix+key, true
			}
		}
		cost := 1
		if l.cost != nil {
			cost = l.cost(r)
		}
		var res Result
		if l.ms != nil {
			res, err = l.ms.take(key, fresh, p.policies, cost)
		} else {
			res, err = l.store.Take(r.Context(), key, p.policies, cost)
		}
		if err != nil {
			if l.hooks.OnError != nil {
				l.hooks.OnError(r, err)
			}
			if l.failOpen {
				next.ServeHTTP(w, r)
			} else {
				l.storeErr(w, r, err)
			}
			return
		}

		// One allocation per request holds the header values, and the
		// decision only when the context needs it: the smaller object
		// keeps the allowed path in a 128-byte size class, which matters
		// most to the garbage collector when new keys arrive fast.
		var hv *headerValues
		if l.inContext {
			d := &decision{Context: r.Context(), res: res}
			r = r.WithContext(d)
			hv = &d.hv
		} else {
			hv = new(headerValues)
		}
		var pk []byte
		var pkBuf [9]byte
		if l.pkSecret != nil {
			pk = partitionKey(&pkBuf, l.pkSecret, key)
		}
		hv.set(w.Header(), p, res, l.headers, l.resetFmt, l.mem.clock, pk)
		if !res.Allowed {
			if l.hooks.OnLimit != nil {
				l.hooks.OnLimit(r, res)
			}
			if !l.dryRun {
				l.denied(w, r, res)
				return
			}
		} else if l.hooks.OnAllow != nil {
			l.hooks.OnAllow(r, res)
		}
		next.ServeHTTP(w, r)
	})
}

// decision is, under WithResultInContext, the request's context carrying
// the Result. It is its own context type, holding the header values too,
// so that all of it is one allocation.
type decision struct {
	context.Context
	res Result
	hv  headerValues
}

type contextKey struct{ name string }

var resultKey = &contextKey{"ratelimit.Result"}

func (d *decision) Value(key any) any {
	if key == resultKey {
		return &d.res
	}
	return d.Context.Value(key)
}

// FromContext returns the decision the middleware made for the request
// whose context ctx is, for handlers that want to show a caller its
// standing. The middleware puts it there under WithResultInContext; ok is
// false for any other context.
func FromContext(ctx context.Context) (res Result, ok bool) {
	if p, ok := ctx.Value(resultKey).(*Result); ok {
		return *p, true
	}
	return Result{}, false
}

// deniedBody is the body of the default 429. ResponseWriters neither keep
// nor modify what they are given to write, so one copy serves all.
var deniedBody = []byte("429 Too Many Requests: rate limit exceeded, see Retry-After\n")

// defaultDenied answers a rejected request: 429 with a short body. It
// writes what http.Error would, in one allocation instead of four, since
// a client over its limit may send requests as fast as it can.
func defaultDenied(w http.ResponseWriter, _ *http.Request, _ Result) {
	h := w.Header()
	delete(h, "Content-Length")
	v := &[2]string{"text/plain; charset=utf-8", "nosniff"}
	h[hdrContentType] = v[0:1:1]
	h["X-Content-Type-Options"] = v[1:2:2]
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(deniedBody)
}

// defaultKeyError answers a request without a usable key. The body is
// fixed text from the KeyError, never the client's input.
func defaultKeyError(w http.ResponseWriter, _ *http.Request, err error) {
	var ke *KeyError
	if errors.As(err, &ke) {
		if ke.Challenge != "" {
			w.Header().Set("WWW-Authenticate", ke.Challenge)
		}
		http.Error(w, ke.Message, ke.Status)
		return
	}
	http.Error(w, "400 Bad Request: the request carries no rate-limit key", http.StatusBadRequest)
}

// defaultStoreError answers a request the store could not decide, without
// the error's text, which may describe internals.
func defaultStoreError(w http.ResponseWriter, _ *http.Request, _ error) {
	w.Header()[hdrRetryAfter] = []string{"1"}
	http.Error(w, "503 Service Unavailable: rate limiter unavailable", http.StatusServiceUnavailable)
}
