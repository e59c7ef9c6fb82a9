package ginlimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/ginlimit"
)

// The cost of the middleware over gin alone and over l.Handler alone, on
// allowed requests of one client whose quota never runs out.

func benchLimiter(b *testing.B, opts ...ratelimit.Option) *ratelimit.Limiter {
	l, err := ratelimit.New(1<<30, time.Hour, ratelimit.KeyByIP(), opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

func benchServe(b *testing.B, h http.Handler) {
	req := httptest.NewRequest(http.MethodGet, "/hello", nil)
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		clear(w.Header())
		h.ServeHTTP(w, req)
	}
}

func BenchmarkGinAlone(b *testing.B) {
	r := gin.New()
	r.GET("/hello", func(c *gin.Context) { c.Status(http.StatusNoContent) })
	benchServe(b, r)
}

func BenchmarkHandler(b *testing.B) {
	benchServe(b, benchLimiter(b).Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})))
}

func BenchmarkMiddleware(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []ratelimit.Option
	}{
		{"plain", nil},
		{"count if", []ratelimit.Option{ratelimit.WithCountIf(func(*http.Request, int) bool { return true })}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := gin.New()
			r.Use(ginlimit.Middleware(benchLimiter(b, bc.opts...)))
			r.GET("/hello", func(c *gin.Context) { c.Status(http.StatusNoContent) })
			benchServe(b, r)
		})
	}
}
