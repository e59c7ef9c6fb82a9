package ratelimit

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
)

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
//   - Reject: with the error handler (the KeyError's 4xx by default);
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
		case Reject, Fail:
			l.onError(w, r, d.Err)
			return
		}
		if d.decided {
			l.writeHeaders(w.Header(), &d)
			if l.inContext {
				in := r
				r = r.WithContext(context.WithValue(r.Context(), resultKey{}, d.Result))
				defer handBack(in, r)
			}
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
			err := l.store.Refund(context.WithoutCancel(r.Context()), d.key, d.plan.set, d.cost, d.Result.At)
			if err != nil {
				l.reportError(r, err)
			}
		}
	})
}

// handBack gives in, the request the server gave, the multipart form a
// handler parsed on r, the copy of it that carries the Result: the server
// removes the temporary files of the form of the request it gave alone.
func handBack(in, r *http.Request) {
	if in.MultipartForm == nil {
		in.MultipartForm = r.MultipartForm
	}
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
	// 1xx are not final, but for 101, as net/http sends them.
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
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

// Flush implements http.Flusher (see FlushError).
func (w *countingWriter) Flush() { w.FlushError() }

// FlushError flushes the response, which sends a 200 if nothing was sent
// yet, or returns why it cannot (http.ErrNotSupported), having sent
// nothing, as http.ResponseController.Flush does.
func (w *countingWriter) FlushError() error {
	err := http.NewResponseController(w.ResponseWriter).Flush()
	if err == nil && w.status == 0 {
		w.status = http.StatusOK
	}
	return err
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

// resultKey is the context key of the Result under WithResultInContext.
type resultKey struct{}

// FromContext returns the decision the middleware made for the request
// whose context ctx is, for handlers that want to show a caller its
// standing. The middleware puts it there under WithResultInContext; ok is
// false for any other context.
func FromContext(ctx context.Context) (res Result, ok bool) {
	res, ok = ctx.Value(resultKey{}).(Result)
	return res, ok
}

// deniedBody is the body of the default 429.
const deniedBody = "429 Too Many Requests: rate limit exceeded, see Retry-After\n"

// defaultDenied answers a refused request: 429 with a short text body,
// or RFC 9457 problem details to a client whose Accept asks for
// application/problem+json. Either answer names Accept in Vary, since
// Accept chose it. The text is what http.Error would write, in one
// allocation instead of four, since a client over its limit may send
// requests as fast as it can; without http.Error's X-Content-Type-Options:
// nosniff, since the body is fixed text no client wrote, which no sniffing
// makes a script, and a ninth header costs the response's header map a
// table, and the copy net/http takes of it another: as much again as the
// rest of a refusal.
func defaultDenied(w http.ResponseWriter, r *http.Request, res Result) {
	h := w.Header()
	v := &[2]string{"text/plain; charset=utf-8", "Accept"}
	varyAccept(h, v[1:2:2])
	if accept := r.Header["Accept"]; len(accept) > 0 && acceptsProblem(accept) {
		writeProblem(w, res)
		return
	}
	delete(h, "Content-Length")
	h[hdrContentType] = v[0:1:1]
	w.WriteHeader(http.StatusTooManyRequests)
	io.WriteString(w, deniedBody)
}

// defaultError answers a request the limiter could not count: a
// *KeyError with its fixed text, never the client's input; a failure
// without the error's text, which may describe internals.
func defaultError(w http.ResponseWriter, _ *http.Request, err error) {
	var ke *KeyError
	if !errors.As(err, &ke) {
		w.Header()[hdrRetryAfter] = []string{"1"}
		http.Error(w, "503 Service Unavailable: rate limiter unavailable", http.StatusServiceUnavailable)
		return
	}
	if ke.Challenge != "" {
		w.Header().Set("WWW-Authenticate", ke.Challenge)
	}
	http.Error(w, ke.Message, ke.Status)
}
