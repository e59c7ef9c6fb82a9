package ginlimit

import (
	"bufio"
	"net"
	"net/http"

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
	return func(c *gin.Context) {
		x := &exchange{ResponseWriter: c.Writer, c: c}
		h.ServeHTTP(x, c.Request)
		if !x.served {
			c.Abort()
		}
	}
}

// exchange is the writer Middleware gives l.Handler: gin's, unchanged,
// carrying the gin context for next and whether next ran.
type exchange struct {
	gin.ResponseWriter
	c      *gin.Context
	served bool
}

// Unwrap returns gin's writer, for http.ResponseController.
func (x *exchange) Unwrap() http.ResponseWriter { return x.ResponseWriter }

// next is l.Handler's next handler: it resumes the gin chain with the
// request l.Handler passes on.
func next(w http.ResponseWriter, r *http.Request) {
	x := exchangeOf(w)
	x.served = true
	c := x.c
	c.Request = r
	if w == http.ResponseWriter(x) {
		c.Next()
		return
	}
	// WithCountIf wrapped x in a writer that notes the status for keep.
	// The handlers write to c.Writer, which bypasses it, and gin sends a
	// status only on the first write or when the whole chain is done:
	// so tell it the status gin holds once the chain returns. gin's
	// WriteHeader of the status it already holds changes nothing, and
	// sends nothing yet. A hijack goes through the wrapper, which keeps
	// a hijacked request counted.
	gw := c.Writer
	hw := &hijackWriter{ResponseWriter: gw, w: w}
	c.Writer = hw
	c.Next()
	c.Writer = gw
	if !hw.hijacked {
		w.WriteHeader(gw.Status())
	}
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

// hijackWriter is gin's writer whose Hijack goes through w, the writer
// WithCountIf watches.
type hijackWriter struct {
	gin.ResponseWriter
	w        http.ResponseWriter
	hijacked bool
}

// Hijack implements http.Hijacker.
func (h *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(h.w).Hijack()
	if err == nil {
		h.hijacked = true
	}
	return conn, rw, err
}

// Unwrap returns gin's writer, for http.ResponseController.
func (h *hijackWriter) Unwrap() http.ResponseWriter { return h.ResponseWriter }
