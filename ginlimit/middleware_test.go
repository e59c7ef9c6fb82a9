package ginlimit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/ginlimit"
)

func init() { gin.SetMode(gin.TestMode) }

// frozen is a limiter option that stops time, so that the headers'
// seconds are exact whatever the test's speed.
func frozen() ratelimit.Option {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return ratelimit.WithClock(func() time.Time { return t })
}

// newLimiter returns a limit-per-minute limiter that the test closes, on
// a frozen clock unless opts give it a store.
func newLimiter(t *testing.T, limit int, key ratelimit.Keyer, opts ...ratelimit.Option) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(limit, time.Minute, key, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

// clientKey is the key KeyByIP gives httptest.NewRequest's requests.
const clientKey = "ip:192.0.2.1"

// remaining is what l has left for clientKey, counting nothing.
func remaining(t *testing.T, l *ratelimit.Limiter) int {
	t.Helper()
	res, err := l.Peek(context.Background(), clientKey)
	require.NoError(t, err)
	return res.Remaining
}

// request returns a GET of /hello with headers given as name, value.
func request(header ...string) *http.Request {
	req := httptest.NewRequest(http.MethodGet, "/hello", nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

func serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// downStore is a Store that cannot decide anything, as a Redis that is
// down.
type downStore struct{}

var errDown = errors.New("store down")

func (downStore) Take(context.Context, string, ratelimit.PolicySet, int) (ratelimit.Result, error) {
	return ratelimit.Result{}, errDown
}
func (downStore) Peek(context.Context, string, ratelimit.PolicySet) (ratelimit.Result, error) {
	return ratelimit.Result{}, errDown
}
func (downStore) Reset(context.Context, string, ratelimit.PolicySet) error { return errDown }
func (downStore) Refund(context.Context, string, ratelimit.PolicySet, int, time.Time) error {
	return errDown
}
func (downStore) Close() error { return nil }

var _ ratelimit.Store = downStore{}

const deniedBody = "429 Too Many Requests: rate limit exceeded, see Retry-After\n"

// TestAnswersAsHandler sends the same requests through gin and through
// l.Handler on net/http, each with a limiter of its own, and wants the
// same answers, headers and bodies, and the handler run for the same
// requests.
func TestAnswersAsHandler(t *testing.T) {
	for _, tc := range []struct {
		name   string
		key    ratelimit.Keyer
		opts   []ratelimit.Option
		header []string
		want   []int // the statuses of the requests sent, in order
	}{
		{name: "allowed then refused", key: ratelimit.KeyByIP(), opts: []ratelimit.Option{frozen()},
			want: []int{200, 200, 429, 429}},
		{name: "problem details", key: ratelimit.KeyByIP(), opts: []ratelimit.Option{frozen()},
			header: []string{"Accept", "application/problem+json"}, want: []int{200, 200, 429}},
		{name: "no key", key: ratelimit.KeyByHeader("X-API-Key"), opts: []ratelimit.Option{frozen()},
			want: []int{400}},
		{name: "key too long", key: ratelimit.KeyByHeader("X-API-Key"), opts: []ratelimit.Option{frozen()},
			header: []string{"X-API-Key", string(make([]byte, 300))}, want: []int{431}},
		{name: "bearer challenge", key: ratelimit.KeyByJWTSubject(make([]byte, 32)), opts: []ratelimit.Option{frozen()},
			want: []int{401}},
		{name: "store down", key: ratelimit.KeyByIP(), opts: []ratelimit.Option{ratelimit.WithStore(downStore{})},
			want: []int{503}},
		{name: "store down, fail open", key: ratelimit.KeyByIP(), opts: []ratelimit.Option{ratelimit.WithStore(downStore{}), ratelimit.WithFailOpen()},
			want: []int{200}},
		{name: "dry run", key: ratelimit.KeyByIP(), opts: []ratelimit.Option{frozen(), ratelimit.WithDryRun()},
			want: []int{200, 200, 200}},
		{name: "skipped", key: ratelimit.KeyByIP(), opts: []ratelimit.Option{frozen(), ratelimit.WithSkip(func(*http.Request) bool { return true })},
			want: []int{200, 200, 200}},
		{name: "count if", key: ratelimit.KeyByIP(), opts: []ratelimit.Option{frozen(), ratelimit.WithCountIf(func(*http.Request, int) bool { return true })},
			want: []int{200, 200, 429}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ginRuns, httpRuns int
			r := gin.New()
			r.Use(ginlimit.Middleware(newLimiter(t, 2, tc.key, tc.opts...)))
			r.GET("/hello", func(c *gin.Context) {
				ginRuns++
				c.String(http.StatusOK, "hello\n")
			})
			h := newLimiter(t, 2, tc.key, tc.opts...).Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				httpRuns++
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				io.WriteString(w, "hello\n")
			}))

			served := 0
			for i, status := range tc.want {
				viaGin := serve(r, request(tc.header...))
				viaHTTP := serve(h, request(tc.header...))
				assert.Equal(t, status, viaGin.Code, "request %d: status", i+1)
				assert.Equal(t, viaHTTP.Code, viaGin.Code, "request %d: status through gin and through net/http", i+1)
				assert.Equal(t, viaHTTP.Header(), viaGin.Header(), "request %d: headers through gin and through net/http", i+1)
				assert.Equal(t, viaHTTP.Body.String(), viaGin.Body.String(), "request %d: body through gin and through net/http", i+1)
				if status == http.StatusOK {
					served++
				}
			}
			assert.Equal(t, served, ginRuns, "gin handler runs")
			assert.Equal(t, served, httpRuns, "net/http handler runs")
		})
	}
}

// TestRefusalAbortsTheChain checks a refusal's answer to the letter, and
// that neither the handler nor any middleware after the limiter runs
// for it, while middleware before it sees the chain aborted.
func TestRefusalAbortsTheChain(t *testing.T) {
	var handlerRuns, afterRuns int
	var aborted []bool
	r := gin.New()
	r.Use(func(c *gin.Context) {
		c.Next()
		aborted = append(aborted, c.IsAborted())
	})
	r.Use(ginlimit.Middleware(newLimiter(t, 2, ratelimit.KeyByIP(), frozen())))
	r.Use(func(c *gin.Context) { afterRuns++ })
	r.GET("/hello", func(c *gin.Context) {
		handlerRuns++
		c.String(http.StatusOK, "hello\n")
	})

	for i, want := range []struct {
		status    int
		remaining string
		retry     string
		body      string
	}{
		{200, "1", "", "hello\n"},
		{200, "0", "", "hello\n"},
		{429, "0", "60", deniedBody},
		{429, "0", "60", deniedBody},
	} {
		w := serve(r, request())
		assert.Equal(t, want.status, w.Code, "request %d: status", i+1)
		assert.Equal(t, want.body, w.Body.String(), "request %d: body", i+1)
		for name, value := range map[string]string{
			"X-Ratelimit-Limit":      "2",
			"X-Ratelimit-Remaining":  want.remaining,
			"X-Ratelimit-Reset":      "60",
			"Ratelimit-Policy":       `"default";q=2;w=60`,
			"Ratelimit":              `"default";r=` + want.remaining + ";t=60",
			"Retry-After":            want.retry,
			"Content-Type":           "text/plain; charset=utf-8",
			"X-Content-Type-Options": "",
		} {
			assert.Equal(t, value, w.Header().Get(name), "request %d: header %s", i+1, name)
		}
	}
	assert.Equal(t, 2, handlerRuns, "handler runs for 2 allowed and 2 refused requests")
	assert.Equal(t, 2, afterRuns, "runs of the middleware after the limiter")
	assert.Equal(t, []bool{false, false, true, true}, aborted, "the chain aborted, as middleware before the limiter sees it")
}

// TestRejectionAndFailureAbort: a request without a key and one the store
// cannot decide run no handler either.
func TestRejectionAndFailureAbort(t *testing.T) {
	for _, tc := range []struct {
		name   string
		l      func(t *testing.T) *ratelimit.Limiter
		status int
	}{
		{"no key", func(t *testing.T) *ratelimit.Limiter {
			return newLimiter(t, 2, ratelimit.KeyByHeader("X-API-Key"), frozen())
		}, 400},
		{"store down", func(t *testing.T) *ratelimit.Limiter {
			return newLimiter(t, 2, ratelimit.KeyByIP(), ratelimit.WithStore(downStore{}))
		}, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := 0
			r := gin.New()
			r.GET("/hello", ginlimit.Middleware(tc.l(t)), func(c *gin.Context) {
				runs++
				c.String(http.StatusOK, "hello\n")
			})
			w := serve(r, request())
			assert.Equal(t, tc.status, w.Code, "status")
			assert.NotContains(t, w.Body.String(), "hello", "body")
			assert.Equal(t, 0, runs, "handler runs")
		})
	}
}

func TestProblemDetails(t *testing.T) {
	r := gin.New()
	r.Use(ginlimit.Middleware(newLimiter(t, 1, ratelimit.KeyByIP(), frozen(), ratelimit.WithName("per-ip"))))
	r.GET("/hello", func(c *gin.Context) { c.String(http.StatusOK, "hello\n") })

	accept := []string{"Accept", "application/json, application/problem+json"}
	require.Equal(t, http.StatusOK, serve(r, request(accept...)).Code, "request 1: status")
	w := serve(r, request(accept...))
	require.Equal(t, http.StatusTooManyRequests, w.Code, "request 2: status")
	assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	assert.Equal(t, "60", w.Header().Get("Retry-After"))
	assert.Equal(t, `"per-ip";r=0;t=60`, w.Header().Get("Ratelimit"))
	var p struct {
		Type     string   `json:"type"`
		Status   int      `json:"status"`
		Detail   string   `json:"detail"`
		Violated []string `json:"violated-policies"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p), "body %q", w.Body)
	assert.Equal(t, "https://iana.org/assignments/http-problem-types#quota-exceeded", p.Type)
	assert.Equal(t, 429, p.Status)
	assert.Equal(t, "Too many requests: retry after 60 s.", p.Detail)
	assert.Equal(t, []string{"per-ip"}, p.Violated)
}

// TestHandlerReadsResult: under WithResultInContext a gin handler reads
// the decision from c.Request's context, and from c itself when the
// engine falls back to the request's context.
func TestHandlerReadsResult(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inCtx    bool
		fallback bool
		from     func(c *gin.Context) context.Context
		wantOK   bool
	}{
		{"c.Request.Context()", true, false, func(c *gin.Context) context.Context { return c.Request.Context() }, true},
		{"c with ContextWithFallback", true, true, func(c *gin.Context) context.Context { return c }, true},
		{"c without ContextWithFallback", true, false, func(c *gin.Context) context.Context { return c }, false},
		{"without WithResultInContext", false, false, func(c *gin.Context) context.Context { return c.Request.Context() }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []ratelimit.Option{frozen(), ratelimit.WithName("per-ip")}
			if tc.inCtx {
				opts = append(opts, ratelimit.WithResultInContext())
			}
			r := gin.New()
			r.ContextWithFallback = tc.fallback
			r.Use(ginlimit.Middleware(newLimiter(t, 3, ratelimit.KeyByIP(), opts...)))
			r.GET("/hello", func(c *gin.Context) {
				res, ok := ratelimit.FromContext(tc.from(c))
				c.String(http.StatusOK, "%t %s %d/%d", ok, res.Policy, res.Remaining, res.Limit)
			})
			for i, want := range []string{"true per-ip 2/3", "true per-ip 1/3"} {
				if !tc.wantOK {
					want = "false  0/0"
				}
				w := serve(r, request())
				assert.Equal(t, http.StatusOK, w.Code, "request %d: status", i+1)
				assert.Equal(t, want, w.Body.String(), "request %d: what the handler read", i+1)
			}
		})
	}
}

// TestCountIfSeesGinStatus: with only 401s kept, every way a gin handler
// sets its status reaches WithCountIf: the status gin sends, even one
// it sends only after the chain.
func TestCountIfSeesGinStatus(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler gin.HandlerFunc
		status  int
	}{
		{"c.String 401", func(c *gin.Context) { c.String(http.StatusUnauthorized, "no") }, 401},
		{"c.JSON 200", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"ok": true}) }, 200},
		{"c.Status 401 alone", func(c *gin.Context) { c.Status(http.StatusUnauthorized) }, 401},
		{"c.AbortWithStatus 401", func(c *gin.Context) { c.AbortWithStatus(http.StatusUnauthorized) }, 401},
		{"c.Status 200 then c.String 401", func(c *gin.Context) {
			c.Status(http.StatusOK)
			c.String(http.StatusUnauthorized, "no")
		}, 401},
		{"c.Status 401 then c.JSON 200", func(c *gin.Context) {
			c.Status(http.StatusUnauthorized)
			c.JSON(http.StatusOK, gin.H{"ok": true})
		}, 200},
		{"c.Writer.WriteHeader and WriteHeaderNow", func(c *gin.Context) {
			c.Writer.WriteHeader(http.StatusUnauthorized)
			c.Writer.WriteHeaderNow()
		}, 401},
		{"c.Writer.Flush first", func(c *gin.Context) {
			c.Writer.Flush()
			c.Status(http.StatusUnauthorized) // too late: 200 is sent
		}, 200},
		{"nothing written", func(*gin.Context) {}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimiter(t, 3, ratelimit.KeyByIP(), frozen(), ratelimit.WithCountIf(func(_ *http.Request, status int) bool {
				return status == http.StatusUnauthorized
			}))
			r := gin.New()
			r.Use(ginlimit.Middleware(l))
			r.GET("/hello", tc.handler)

			w := serve(r, request())
			assert.Equal(t, tc.status, w.Code, "status")
			want := 3
			if tc.status == http.StatusUnauthorized {
				want = 2
			}
			assert.Equal(t, want, remaining(t, l), "remaining after one %d", tc.status)
		})
	}
}

// TestCountIfSetByLaterMiddleware: a status that middleware after the
// limiter sets once the handler returned is the one counted.
func TestCountIfSetByLaterMiddleware(t *testing.T) {
	l := newLimiter(t, 3, ratelimit.KeyByIP(), frozen(), ratelimit.WithCountIf(func(_ *http.Request, status int) bool {
		return status == http.StatusUnauthorized
	}))
	r := gin.New()
	r.Use(ginlimit.Middleware(l), func(c *gin.Context) {
		c.Next()
		if c.GetBool("denied") {
			c.Status(http.StatusUnauthorized)
		}
	})
	r.GET("/hello", func(c *gin.Context) { c.Set("denied", c.Query("pw") != "right") })

	for i, tc := range []struct {
		pw        string
		status    int
		remaining int
	}{
		{"right", 200, 3},
		{"wrong", 401, 2},
		{"right", 200, 2},
	} {
		w := serve(r, httptest.NewRequest(http.MethodGet, "/hello?pw="+tc.pw, nil))
		assert.Equal(t, tc.status, w.Code, "request %d: status", i+1)
		assert.Equal(t, tc.remaining, remaining(t, l), "request %d: remaining", i+1)
	}
}

// TestCountIfOnlyFailures: a login that counts failed attempts only,
// through gin: successes never use up the quota, and the third failure
// is refused.
func TestCountIfOnlyFailures(t *testing.T) {
	l := newLimiter(t, 2, ratelimit.KeyByIP(), frozen(), ratelimit.WithCountIf(func(_ *http.Request, status int) bool {
		return status == http.StatusUnauthorized || status == http.StatusForbidden
	}))
	runs := 0
	r := gin.New()
	r.POST("/login", ginlimit.Middleware(l), func(c *gin.Context) {
		runs++
		if c.Query("pw") != "right" {
			c.AbortWithStatusJSON(http.StatusUnauthorized, gin.H{"error": "wrong password"})
			return
		}
		c.JSON(http.StatusOK, gin.H{"welcome": true})
	})

	for i, tc := range []struct {
		pw     string
		status int
	}{
		{"right", 200}, {"wrong", 401}, {"right", 200}, {"right", 200}, {"wrong", 401},
		{"right", 429}, {"wrong", 429},
	} {
		w := serve(r, httptest.NewRequest(http.MethodPost, "/login?pw="+tc.pw, nil))
		assert.Equal(t, tc.status, w.Code, "request %d (%s password): status", i+1, tc.pw)
	}
	assert.Equal(t, 5, runs, "handler runs")
	assert.Equal(t, 0, remaining(t, l), "remaining after 2 failures")
}

// TestCountIfHijackStaysCounted: a handler that takes over the
// connection through c.Writer stays counted, whatever it answers, as
// under l.Handler, in a request forwarded with HandleContext too.
func TestCountIfHijackStaysCounted(t *testing.T) {
	for _, path := range []string{"/hello", "/old"} {
		t.Run(path, func(t *testing.T) { testCountIfHijack(t, path) })
	}
}

func testCountIfHijack(t *testing.T, path string) {
	l := newLimiter(t, 3, ratelimit.KeyByIP(), frozen(), ratelimit.WithCountIf(func(_ *http.Request, status int) bool {
		return status == http.StatusUnauthorized
	}))
	r := gin.New()
	r.Use(ginlimit.Middleware(l))
	r.GET("/old", forward(r, "/hello"))
	r.GET("/hello", func(c *gin.Context) {
		conn, rw, err := c.Writer.Hijack()
		if err != nil {
			c.String(http.StatusInternalServerError, "hijack: %v", err)
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		rw.Flush()
	})
	srv := httptest.NewServer(r)
	defer srv.Close()

	resp, err := http.Get(srv.URL + path)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "status")
	assert.Equal(t, "ok", string(body), "body")
	srv.Close() // waits for the handler, and so for the limiter after it
	res, err := l.Peek(context.Background(), "ip:127.0.0.1")
	require.NoError(t, err)
	assert.Equal(t, 2, res.Remaining, "remaining after a hijacked 200")
}

// TestGinWriterFeatures: c.Writer keeps gin's methods, with and without
// WithCountIf.
func TestGinWriterFeatures(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []ratelimit.Option
	}{
		{"plain", nil},
		{"count if", []ratelimit.Option{ratelimit.WithCountIf(func(*http.Request, int) bool { return true })}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var writtenBefore, writtenAfter bool
			var status, size int
			var hijacker, pusher bool
			r := gin.New()
			r.Use(ginlimit.Middleware(newLimiter(t, 3, ratelimit.KeyByIP(), append(tc.opts, frozen())...)))
			r.GET("/hello", func(c *gin.Context) {
				c.Writer.WriteHeader(http.StatusAccepted)
				writtenBefore = c.Writer.Written()
				c.Writer.WriteString("abc")
				c.Writer.Flush()
				writtenAfter, status, size = c.Writer.Written(), c.Writer.Status(), c.Writer.Size()
				_, hijacker = c.Writer.(http.Hijacker)
				pusher = c.Writer.Pusher() == nil // a recorder is no pusher
			})
			w := serve(r, request())
			assert.Equal(t, http.StatusAccepted, w.Code, "status")
			assert.Equal(t, "abc", w.Body.String(), "body")
			assert.True(t, w.Flushed, "flushed")
			assert.Equal(t, "2", w.Header().Get("X-Ratelimit-Remaining"), "X-RateLimit-Remaining")
			assert.False(t, writtenBefore, "Written before the first write")
			assert.True(t, writtenAfter, "Written after it")
			assert.Equal(t, http.StatusAccepted, status, "Status")
			assert.Equal(t, 3, size, "Size")
			assert.True(t, hijacker, "c.Writer is an http.Hijacker")
			assert.True(t, pusher, "Pusher answers")
		})
	}
}

// TestConcurrentExactCounts: of many simultaneous requests, exactly the
// limit run the handler, and the rest are refused.
func TestConcurrentExactCounts(t *testing.T) {
	const limit, clients, each = 20, 8, 10
	for _, tc := range []struct {
		name string
		opts []ratelimit.Option
	}{
		{"plain", []ratelimit.Option{ratelimit.WithResultInContext()}},
		{"count if", []ratelimit.Option{ratelimit.WithResultInContext(), ratelimit.WithCountIf(func(*http.Request, int) bool { return true })}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs, ok, refused atomic.Int64
			r := gin.New()
			r.Use(ginlimit.Middleware(newLimiter(t, limit, ratelimit.KeyByIP(), append(tc.opts, frozen())...)))
			r.GET("/hello", func(c *gin.Context) {
				runs.Add(1)
				res, _ := ratelimit.FromContext(c.Request.Context())
				c.String(http.StatusOK, strconv.Itoa(res.Remaining))
			})
			var wg sync.WaitGroup
			for range clients {
				wg.Go(func() {
					for range each {
						switch serve(r, request()).Code {
						case http.StatusOK:
							ok.Add(1)
						case http.StatusTooManyRequests:
							refused.Add(1)
						}
					}
				})
			}
			wg.Wait()
			assert.Equal(t, int64(limit), runs.Load(), "handler runs")
			assert.Equal(t, int64(limit), ok.Load(), "200s")
			assert.Equal(t, int64(clients*each-limit), refused.Load(), "429s")
		})
	}
}

func TestNilLimiterPanics(t *testing.T) {
	assert.PanicsWithValue(t, "ginlimit: Middleware: nil Limiter", func() { ginlimit.Middleware(nil) })
}

// forward is a handler that re-dispatches its request to path, as gin
// documents for an internal redirect.
func forward(r *gin.Engine, path string) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Request.URL.Path = path
		r.HandleContext(c)
	}
}

// TestHandleContextDecidesOnce: a request that a handler re-dispatches
// with HandleContext is decided once, whichever routes the limiter
// guards, and its answer has the headers of that one decision.
func TestHandleContextDecidesOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		path   string
		opts   []ratelimit.Option
		routes func(r *gin.Engine, l *ratelimit.Limiter, h gin.HandlerFunc)
	}{
		{"site-wide", "/old", nil, func(r *gin.Engine, l *ratelimit.Limiter, h gin.HandlerFunc) {
			r.Use(ginlimit.Middleware(l))
			r.GET("/old", forward(r, "/new"))
			r.GET("/new", h)
		}},
		{"site-wide, count if", "/old", []ratelimit.Option{ratelimit.WithCountIf(func(*http.Request, int) bool { return true })},
			func(r *gin.Engine, l *ratelimit.Limiter, h gin.HandlerFunc) {
				r.Use(ginlimit.Middleware(l))
				r.GET("/old", forward(r, "/new"))
				r.GET("/new", h)
			}},
		{"site-wide, result in context", "/old", []ratelimit.Option{ratelimit.WithResultInContext()},
			func(r *gin.Engine, l *ratelimit.Limiter, h gin.HandlerFunc) {
				r.Use(ginlimit.Middleware(l))
				r.GET("/old", forward(r, "/new"))
				r.GET("/new", h)
			}},
		{"site-wide, from no route", "/missing", nil, func(r *gin.Engine, l *ratelimit.Limiter, h gin.HandlerFunc) {
			r.Use(ginlimit.Middleware(l))
			r.NoRoute(forward(r, "/new"))
			r.GET("/new", h)
		}},
		{"forwarded twice", "/v1", nil, func(r *gin.Engine, l *ratelimit.Limiter, h gin.HandlerFunc) {
			r.Use(ginlimit.Middleware(l))
			r.GET("/v1", forward(r, "/v2"))
			r.GET("/v2", forward(r, "/v3"))
			r.GET("/v3", h)
		}},
		{"one Middleware on both routes", "/old", nil, func(r *gin.Engine, l *ratelimit.Limiter, h gin.HandlerFunc) {
			mw := ginlimit.Middleware(l)
			r.GET("/old", mw, forward(r, "/new"))
			r.GET("/new", mw, h)
		}},
		{"a Middleware of the limiter per group", "/v1/items", nil, func(r *gin.Engine, l *ratelimit.Limiter, h gin.HandlerFunc) {
			r.Group("/v1", ginlimit.Middleware(l)).GET("/items", forward(r, "/v2/items"))
			r.Group("/v2", ginlimit.Middleware(l)).GET("/items", h)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimiter(t, 3, ratelimit.KeyByIP(), append(tc.opts, frozen())...)
			runs := 0
			r := gin.New()
			tc.routes(r, l, func(c *gin.Context) {
				runs++
				c.String(http.StatusOK, "hello\n")
			})
			for i, want := range []struct {
				status    int
				remaining string
				retry     string
				body      string
			}{
				{200, "2", "", "hello\n"},
				{200, "1", "", "hello\n"},
				{200, "0", "", "hello\n"},
				{429, "0", "60", deniedBody},
			} {
				w := serve(r, httptest.NewRequest(http.MethodGet, tc.path, nil))
				assert.Equal(t, want.status, w.Code, "request %d: status", i+1)
				assert.Equal(t, want.body, w.Body.String(), "request %d: body", i+1)
				assert.Equal(t, want.remaining, w.Header().Get("X-Ratelimit-Remaining"), "request %d: X-RateLimit-Remaining", i+1)
				assert.Equal(t, `"default";r=`+want.remaining+";t=60", w.Header().Get("Ratelimit"), "request %d: RateLimit", i+1)
				assert.Equal(t, want.retry, w.Header().Get("Retry-After"), "request %d: Retry-After", i+1)
			}
			assert.Equal(t, 3, runs, "handler runs for 3 allowed and 1 refused requests")
			assert.Equal(t, 0, remaining(t, l), "remaining after 3 allowed requests")
		})
	}
}

// TestReplayedRequestIsDecidedAgain: a request the limiter passed on
// carries the mark of its exchange in its context. Served again once its
// response is done (a replay of a request a handler kept), on the gin
// context the pool gives back, it is another request, decided and counted
// again, not passed as already decided.
func TestReplayedRequestIsDecidedAgain(t *testing.T) {
	l := newLimiter(t, 1, ratelimit.KeyByIP(), frozen())
	r := gin.New()
	r.Use(ginlimit.Middleware(l))
	var kept *http.Request
	r.GET("/", func(c *gin.Context) {
		kept = c.Request
		c.String(http.StatusOK, "hello\n")
	})
	require.Equal(t, http.StatusOK, serve(r, httptest.NewRequest(http.MethodGet, "/", nil)).Code, "the first request")
	require.NotNil(t, kept)
	for i := range 3 {
		assert.Equal(t, http.StatusTooManyRequests, serve(r, kept).Code, "replay %d of the first request, over the limit of 1", i+1)
	}
}

// TestReplayAfterPanicIsDecidedAgain: a handler that panics, recovered
// by gin's Recovery before the limiter, still ends its request's
// exchange: a replay of the request it kept, on the gin context the pool
// gives back, is decided again, not passed uncounted.
func TestReplayAfterPanicIsDecidedAgain(t *testing.T) {
	l := newLimiter(t, 1, ratelimit.KeyByIP(), frozen())
	r := gin.New()
	r.Use(gin.CustomRecoveryWithWriter(io.Discard, func(c *gin.Context, _ any) {
		c.AbortWithStatus(http.StatusInternalServerError)
	}), ginlimit.Middleware(l))
	var kept *http.Request
	r.GET("/", func(c *gin.Context) {
		if kept == nil {
			kept = c.Request
			panic("the first request")
		}
		c.String(http.StatusOK, "hello\n")
	})
	require.Equal(t, http.StatusInternalServerError, serve(r, httptest.NewRequest(http.MethodGet, "/", nil)).Code, "the first request")
	require.NotNil(t, kept)
	for i := range 3 {
		assert.Equal(t, http.StatusTooManyRequests, serve(r, kept).Code, "replay %d of the first request, over the limit of 1", i+1)
	}
}

// TestHandleContextKeepsTheDecision: the handler a request is forwarded
// to reads the one decision, and WithCountIf keeps the request counted by
// the status that handler answers.
func TestHandleContextKeepsTheDecision(t *testing.T) {
	l := newLimiter(t, 3, ratelimit.KeyByIP(), frozen(), ratelimit.WithResultInContext(),
		ratelimit.WithCountIf(func(_ *http.Request, status int) bool { return status == http.StatusUnauthorized }))
	r := gin.New()
	r.Use(ginlimit.Middleware(l))
	r.GET("/old", forward(r, "/new"))
	r.GET("/new", func(c *gin.Context) {
		res, _ := ratelimit.FromContext(c.Request.Context())
		status := http.StatusOK
		if c.Query("pw") != "right" {
			status = http.StatusUnauthorized
		}
		c.String(status, "%d", res.Remaining)
	})
	for i, tc := range []struct {
		pw        string
		status    int
		body      string
		remaining int
	}{
		{"wrong", 401, "2", 2},
		{"right", 200, "1", 2},
		{"wrong", 401, "1", 1},
	} {
		w := serve(r, httptest.NewRequest(http.MethodGet, "/old?pw="+tc.pw, nil))
		assert.Equal(t, tc.status, w.Code, "request %d: status", i+1)
		assert.Equal(t, tc.body, w.Body.String(), "request %d: the remaining the handler read", i+1)
		assert.Equal(t, tc.body, w.Header().Get("X-Ratelimit-Remaining"), "request %d: X-RateLimit-Remaining", i+1)
		assert.Equal(t, tc.remaining, remaining(t, l), "request %d: remaining", i+1)
	}
}

// TestHandleContextTwoLimiters: a forwarded request is decided once by
// each limiter it passes, a site-wide one and the target route's own,
// and carries the inner one's headers, as any request that passes two
// limiters.
func TestHandleContextTwoLimiters(t *testing.T) {
	site := newLimiter(t, 5, ratelimit.KeyByIP(), frozen(), ratelimit.WithName("site"))
	route := newLimiter(t, 2, ratelimit.KeyByIP(), frozen(), ratelimit.WithName("route"))
	runs := 0
	r := gin.New()
	r.Use(ginlimit.Middleware(site))
	r.GET("/old", forward(r, "/new"))
	r.GET("/new", ginlimit.Middleware(route), func(c *gin.Context) {
		runs++
		c.String(http.StatusOK, "hello\n")
	})
	for i, want := range []struct {
		status    int
		ratelimit string
	}{
		{200, `"route";r=1;t=60`},
		{200, `"route";r=0;t=60`},
		{429, `"route";r=0;t=60`},
	} {
		w := serve(r, httptest.NewRequest(http.MethodGet, "/old", nil))
		assert.Equal(t, want.status, w.Code, "request %d: status", i+1)
		assert.Equal(t, want.ratelimit, w.Header().Get("Ratelimit"), "request %d: RateLimit", i+1)
	}
	assert.Equal(t, 2, runs, "handler runs")
	assert.Equal(t, 2, remaining(t, site), "site-wide remaining after 3 requests")
	assert.Equal(t, 0, remaining(t, route), "the route's remaining after 3 requests")
}

// TestEngineServedAgainDecidesAgain: a handler that serves a request of
// its own through the engine (a batch of requests in one) has it
// decided, even with the context of the request it serves: only gin's
// dispatch of the same gin.Context again is decided once.
func TestEngineServedAgainDecidesAgain(t *testing.T) {
	l := newLimiter(t, 3, ratelimit.KeyByIP(), frozen())
	var inner []int
	r := gin.New()
	r.Use(ginlimit.Middleware(l))
	r.GET("/batch", func(c *gin.Context) {
		for range 2 {
			req := httptest.NewRequestWithContext(c.Request.Context(), http.MethodGet, "/hello", nil)
			inner = append(inner, serve(r, req).Code)
		}
		c.String(http.StatusOK, "done\n")
	})
	r.GET("/hello", func(c *gin.Context) { c.String(http.StatusOK, "hello\n") })

	w := serve(r, httptest.NewRequest(http.MethodGet, "/batch", nil))
	assert.Equal(t, http.StatusOK, w.Code, "status")
	assert.Equal(t, []int{200, 200}, inner, "the statuses of the requests of the batch")
	assert.Equal(t, 0, remaining(t, l), "remaining after a batch of two")
}

// TestServedInBackgroundDecides: a handler that has an engine serve a
// request of its own on another goroutine, with the values of its
// request's context (context.WithoutCancel), has it decided while its own
// response finishes, without a data race on the mark of the exchange.
// The request goes to a second engine under the same limiter, so that no
// gin context from the first one's pool orders the two goroutines and
// the race detector sees the race whichever runs first.
func TestServedInBackgroundDecides(t *testing.T) {
	l := newLimiter(t, 3, ratelimit.KeyByIP(), frozen())
	internal := gin.New()
	internal.Use(ginlimit.Middleware(l))
	internal.GET("/hello", func(c *gin.Context) { c.String(http.StatusOK, "hello\n") })
	inner := make(chan int, 1)
	r := gin.New()
	r.Use(ginlimit.Middleware(l))
	r.GET("/warm", func(c *gin.Context) {
		ctx := context.WithoutCancel(c.Request.Context())
		go func() {
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/hello", nil)
			inner <- serve(internal, req).Code
		}()
		c.String(http.StatusAccepted, "warming\n")
	})

	w := serve(r, httptest.NewRequest(http.MethodGet, "/warm", nil))
	assert.Equal(t, http.StatusAccepted, w.Code, "status")
	assert.Equal(t, http.StatusOK, <-inner, "the status of the request served in the background")
	assert.Equal(t, 1, remaining(t, l), "remaining after a request and the one it served")
}

// TestUploadTempFilesRemoved: the server removes the temporary files of
// a multipart form a handler parsed, after the answer, as it does
// without the limiter: it removes those of the request it gave the
// engine, so the form must reach that request, not stay on a copy.
func TestUploadTempFilesRemoved(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []ratelimit.Option
	}{
		{"plain", nil},
		{"result in context", []ratelimit.Option{ratelimit.WithResultInContext()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp) // where multipart keeps what it cannot in memory
			l := newLimiter(t, 3, ratelimit.KeyByIP(), append(tc.opts, frozen())...)
			r := gin.New()
			r.MaxMultipartMemory = 1 // every file to disk
			r.Use(ginlimit.Middleware(l))
			var kept []string
			r.POST("/upload", func(c *gin.Context) {
				form, err := c.MultipartForm()
				if err != nil {
					c.String(http.StatusBadRequest, "%v", err)
					return
				}
				entries, _ := os.ReadDir(tmp)
				for _, e := range entries {
					kept = append(kept, e.Name())
				}
				c.String(http.StatusOK, "%d bytes\n", form.File["f"][0].Size)
			})
			srv := httptest.NewServer(r)

			var body bytes.Buffer
			mw := multipart.NewWriter(&body)
			fw, err := mw.CreateFormFile("f", "f.bin")
			require.NoError(t, err)
			fw.Write(bytes.Repeat([]byte("x"), 64<<10))
			require.NoError(t, mw.Close())
			resp, err := http.Post(srv.URL+"/upload", mw.FormDataContentType(), &body)
			require.NoError(t, err)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, "status: %s", got)
			srv.Close() // waits for the server to finish the request

			require.NotEmpty(t, kept, "temporary files while the handler ran")
			entries, err := os.ReadDir(tmp)
			require.NoError(t, err)
			assert.Empty(t, entries, "temporary files left once the request is done")
		})
	}
}
