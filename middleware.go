package ratelimit

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
)

// Outcome says how a request is to be answered.
type Outcome int

const (
	// Serve passes the request on. It was allowed and counted, or exempted
	// by WithSkip, or let through by WithDryRun though over the limit, or
	// by WithFailOpen though the store failed.
	Serve Outcome = iota
	// Refuse answers that the request is over the limit: 429 Too Many
	// Requests over HTTP, with Result.RetryAfter rounded up as Retry-After.
	Refuse
	// Reject answers that the request cannot be counted as sent: it carries
	// no usable key, or WithCost gave it a cost below 1 or above a policy's
	// limit. Decision.Err is a *KeyError (errors.As) with the status.
	Reject
	// Fail answers that the store could not decide: it failed, or is full.
	// Decision.Err says why; 503 Service Unavailable by default.
	Fail
)

func (o Outcome) String() string {
	switch o {
	case Serve:
		return "Serve"
	case Refuse:
		return "Refuse"
	case Reject:
		return "Reject"
	case Fail:
		return "Fail"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// A Decision is what the limiter decided for one request, before anything
// is written: how to answer it and, when the store decided it, the
// Result. Handler is Decide followed by the answer; a server speaking
// another protocol (package grpclimit) answers a Decision in its own
// terms.
type Decision struct {
	Outcome Outcome
	// Result is the store's decision, valid when Decided reports true.
	Result Result
	// Err is, for Reject, the key or cost error; for Fail, and for a
	// request WithFailOpen served, the store's error; otherwise nil.
	Err error

	plan    *plan
	key     string // the store's key
	cost    int
	decided bool
}

// Decided reports whether the store decided the request, so that Result
// and the rate-limit headers describe the client's standing. It is false
// for requests exempted by WithSkip, rejected for their key or cost, or
// whose store failed.
func (d Decision) Decided() bool { return d.decided }

// PolicySet returns the policies the store decided the request under
// (its plan's), or the zero PolicySet when it did not decide it.
func (d Decision) PolicySet() PolicySet {
	if d.plan == nil {
		return PolicySet{}
	}
	return d.plan.set
}

// Decide decides r as Handler does, without answering it: it extracts the
// key, picks the plan, weighs the cost, asks the store, and calls the
// hooks. Handler answers the Decision over HTTP; other protocols build a
// request describing their call (its peer as RemoteAddr, its metadata as
// headers, its context) and answer the Decision their own way, so that the
// KeyFunc, plans, costs, hooks, dry run and failure mode of one limiter
// apply to every protocol alike.
func (l *Limiter) Decide(r *http.Request) Decision {
	if l.skip != nil && l.skip(r) {
		return Decision{}
	}
	key, p, err := l.client(r)
	if err != nil {
		l.reportError(r, err)
		return Decision{Outcome: Reject, Err: err}
	}
	cost := 1
	if l.cost != nil {
		cost = l.cost(r)
		if err := p.checkCost(cost); err != nil {
			// Whatever the failure mode: a cost is the request's, not the
			// store's, and serving it uncounted would be a bypass.
			l.reportError(r, err)
			return Decision{Outcome: Reject, Err: err}
		}
	}
	res, err := l.store.Take(r.Context(), key, p.set, cost)
	if err != nil {
		l.reportError(r, err)
		if l.failOpen {
			return Decision{Outcome: Serve, Err: err}
		}
		return Decision{Outcome: Fail, Err: err}
	}
	d := Decision{Result: res, plan: p, key: key, cost: cost, decided: true}
	if !res.Allowed {
		if l.hooks.OnLimit != nil {
			l.hooks.OnLimit(r, res)
		}
		if !l.dryRun {
			d.Outcome = Refuse
		}
	} else if l.hooks.OnAllow != nil {
		l.hooks.OnAllow(r, res)
	}
	return d
}

// client returns the store's key for r's client and the plan l chooses
// for r.
func (l *Limiter) client(r *http.Request) (string, *plan, error) {
	key, err := l.key(r)
	if err != nil {
		return "", nil, err
	}
	if l.choose != nil {
		if named := l.plans[l.choose(r, key)]; named != nil {
			return named.prefix + key, named, nil
		}
	}
	return key, l.def, nil
}

func (l *Limiter) reportError(r *http.Request, err error) {
	if l.hooks.OnError != nil {
		l.hooks.OnError(r, err)
	}
}

// Handler returns next wrapped in the limiter, so l.Handler is a
// func(http.Handler) http.Handler (an alice.Constructor, a chi or
// gorilla/mux middleware) as it stands. A nil next panics here, as
// http.Handle does, rather than on the first request after counting it.
//
// Each request is decided by Decide before next runs, and answered:
//   - Serve: with the rate-limit headers (see WithHeaders) when the store
//     decided it, by next (with the Result in the request's context under
//     WithResultInContext);
//   - Refuse: with the rate-limit headers, Retry-After, and the denied
//     handler (429 by default);
//   - Reject: with the key error handler (a 4xx by default);
//   - Fail: with the error handler (503 by default).
//
// The ResponseWriter is passed on unwrapped, so http.Flusher,
// http.Hijacker and http.ResponseController keep working; under
// WithCountIf it is wrapped in one that implements Flush, Hijack and
// Unwrap, so they keep working too.
func (l *Limiter) Handler(next http.Handler) http.Handler {
	if next == nil {
		panic("ratelimit: Handler: nil handler")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := l.Decide(r)
		switch d.Outcome {
		case Reject:
			l.keyErr(w, r, d.Err)
			return
		case Fail:
			l.storeErr(w, r, d.Err)
			return
		}
		if d.decided {
			// One allocation holds the header values, and the Result only
			// when the context needs it: the smaller object keeps the
			// allowed path in a smaller size class.
			var hv *headerValues
			if l.inContext {
				c := &resultContext{Context: r.Context(), res: d.Result}
				r = r.WithContext(c)
				hv = &c.hv
			} else {
				hv = new(headerValues)
			}
			l.writeHeaders(w.Header(), &d, hv)
		}
		if d.Outcome == Refuse {
			l.denied(w, r, d.Result)
			return
		}
		if l.countIf == nil || !d.Result.Allowed {
			next.ServeHTTP(w, r)
			return
		}
		cw := &countingWriter{ResponseWriter: w}
		next.ServeHTTP(cw, r)
		if !cw.hijacked && !l.countIf(r, cmp.Or(cw.status, http.StatusOK)) {
			// The client may be gone; the refund is the server's.
			rf := l.store.(Refunder) // New checked
			if err := rf.Refund(context.WithoutCancel(r.Context()), d.key, d.plan.set, d.cost, d.Result.At); err != nil {
				l.reportError(r, err)
			}
		}
	})
}

// countingWriter notes the status of a response, for WithCountIf. Unwrap
// lets http.ResponseController reach what it does not itself implement;
// Flush and Hijack it implements, so that their use is seen.
type countingWriter struct {
	http.ResponseWriter
	status   int // the final status sent, 0 until one is
	hijacked bool
}

func (w *countingWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 { // 1xx are not final
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *countingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher, sending a 200 if nothing was sent yet.
func (w *countingWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack implements http.Hijacker. A hijacked request stays counted: what
// the handler answers on the connection is its own.
func (w *countingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.hijacked = true
	}
	return c, rw, err
}

// Unwrap returns the ResponseWriter the handler's response goes to.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// SetHeaders writes into h the headers Handler sends for d: the rate-limit
// headers WithHeaders and WithResetFormat select, when the store decided
// the request, and Retry-After when d refuses it. It is for servers that
// answer a Decision themselves.
func (l *Limiter) SetHeaders(h http.Header, d Decision) {
	if d.decided {
		l.writeHeaders(h, &d, new(headerValues))
	}
}

// resultContext is, under WithResultInContext, the request's context
// carrying the Result. It is its own context type, holding the header
// values too, so that all of it is one allocation.
type resultContext struct {
	context.Context
	res Result
	hv  headerValues
}

type contextKey struct{ name string }

var resultKey = &contextKey{"ratelimit.Result"}

func (c *resultContext) Value(key any) any {
	if key == resultKey {
		return &c.res
	}
	return c.Context.Value(key)
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

// defaultDenied answers a rejected request: 429 with a short text body,
// or RFC 9457 problem details to a client whose Accept asks for
// application/problem+json. The text is what http.Error would write, in
// one allocation instead of four, since a client over its limit may send
// requests as fast as it can.
func defaultDenied(w http.ResponseWriter, r *http.Request, res Result) {
	if accept := r.Header["Accept"]; len(accept) > 0 && acceptsProblem(accept) {
		writeProblem(w, res)
		return
	}
	h := w.Header()
	delete(h, "Content-Length")
	v := &[2]string{"text/plain; charset=utf-8", "nosniff"}
	h[hdrContentType] = v[0:1:1]
	h["X-Content-Type-Options"] = v[1:2:2]
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(deniedBody)
}

// defaultKeyError answers a request without a usable key or cost. The body
// is fixed text from the KeyError, never the client's input.
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
