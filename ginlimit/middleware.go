package ginlimit

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/gin-gonic/gin"

	"github.com/slidelog/ratelimit"
)

// Middleware returns l as gin middleware: l.Handler, with the rest of the
// gin chain as its next handler, aborting the chain for every request
// l.Handler answers itself (refused, rejected, or failed). See the package
// documentation for what clients and handlers see. A nil l panics here,
// as l.Handler does with a nil handler, rather than on the first request.
//
// The middleware is safe for simultaneous use by multiple goroutines.
func Middleware(l *ratelimit.Limiter) gin.HandlerFunc {
	if l == nil {
		panic("ginlimit: Middleware: nil Limiter")
	}
	// Built once: each request passes its gin context to next inside the
	// writer it is answered on, the only value l.Handler hands on as given.
	h := l.Handler(http.HandlerFunc(next))
	key := passedKey{l}
	return func(c *gin.Context) {
		// Engine.HandleContext runs the router again on c, with c.Request
		// as the handler left it: a request l passed on was decided, and
		// its headers written, when gin first ran this middleware for it.
		if x, ok := c.Request.Context().Value(key).(*exchange); ok && x.c == c && !x.done.Load() {
			x.run()
			return
		}
		req := c.Request
		x := &exchange{ResponseWriter: c.Writer, c: c, key: key}
		// Its response done, the request is no longer under way: served
		// again (a replay of a request a handler kept), on a gin context
		// the pool may give back as c, it is decided again. Deferred, for
		// a handler's panic that gin's Recovery answers ends it too.
		defer x.done.Store(true)
		h.ServeHTTP(x, req)
		if !x.served {
			c.Abort()
		}
		// The server removes the temporary files of a multipart form
		// parsed on the request it gave, not on a copy of it, as next's
		// c.Request is: hand it the form a handler parsed there.
		if req.MultipartForm == nil && c.Request != req {
			req.MultipartForm = c.Request.MultipartForm
		}
	}
}

// passedKey is the context key under which a request that a limiter
// passed on carries its exchange: one key per limiter, so that each
// limiter decides a request once, however many routes and groups gin
// dispatches it through.
type passedKey struct{ l *ratelimit.Limiter }

// exchange is the writer Middleware gives l.Handler: gin's, unchanged,
// carrying the gin context for next, whether next ran, and what a
// dispatch of the same request again needs to run the chain as next did.
type exchange struct {
	gin.ResponseWriter
	c   *gin.Context
	key passedKey
	// done is set once Middleware has returned. It is atomic because a
	// handler may serve a request of its own, with its request's context
	// and so this exchange, on another goroutine while this one finishes.
	done   atomic.Bool
	served bool
	// watched is the writer l.Handler gave next under WithCountIf, which
	// notes the status and any hijack for keep; nil otherwise.
	watched  http.ResponseWriter
	hijacked bool
}

// Unwrap returns gin's writer, for http.ResponseController.
func (x *exchange) Unwrap() http.ResponseWriter { return x.ResponseWriter }

// next is l.Handler's next handler: it resumes the gin chain with the
// request l.Handler passes on, marked as passed on by this limiter.
func next(w http.ResponseWriter, r *http.Request) {
	x := exchangeOf(w)
	x.served = true
	c := x.c
	c.Request = r.WithContext(context.WithValue(r.Context(), x.key, x))
	if w == http.ResponseWriter(x) {
		c.Next()
		return
	}
	// WithCountIf wrapped x in a writer that notes the status for keep.
	// The handlers write to c.Writer, which bypasses it, and gin sends a
	// status only on the first write or when the whole chain is done:
	// so tell it the status gin holds once the chain returns. gin's
	// WriteHeader of the status it already holds changes nothing, and
	// sends nothing yet.
	x.watched = w
	gw := c.Writer
	x.run()
	if !x.hijacked {
		w.WriteHeader(gw.Status())
	}
}

// run runs the rest of the gin chain. Under WithCountIf a hijack of
// c.Writer goes through the watched writer, which keeps a hijacked
// request counted, in a dispatch of the request again too (HandleContext
// gives the handlers gin's own writer afresh).
func (x *exchange) run() {
	c := x.c
	if x.watched == nil {
		c.Next()
		return
	}
	gw := c.Writer
	c.Writer = &hijackWriter{ResponseWriter: gw, x: x}
	c.Next()
	c.Writer = gw
}

// exchangeOf finds the exchange in w: w itself, or what WithCountIf's
// writer wraps, which l.Handler documents as reachable by Unwrap.
func exchangeOf(w http.ResponseWriter) *exchange {
	for {
		switch v := w.(type) {
		case *exchange:
			return v
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			panic("ginlimit: l.Handler passed on a writer that does not wrap the one it was given")
		}
	}
}

// hijackWriter is gin's writer whose Hijack goes through x.watched, the
// writer WithCountIf watches.
type hijackWriter struct {
	gin.ResponseWriter
	x *exchange
}

// Hijack implements http.Hijacker.
func (h *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(h.x.watched).Hijack()
	if err == nil {
		h.x.hijacked = true
	}
	return conn, rw, err
}

// Unwrap returns gin's writer, for http.ResponseController.
func (h *hijackWriter) Unwrap() http.ResponseWriter { return h.ResponseWriter }
