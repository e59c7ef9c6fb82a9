package ginlimit_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/ginlimit"
)

// Two requests a minute per client IP: the handler reads its standing
// from the request's context, and the third request is refused with 429
// before the handler runs.
func ExampleMiddleware() {
	l, err := ratelimit.New(2, time.Minute, ratelimit.KeyByIP(), ratelimit.WithResultInContext())
	if err != nil {
		panic(err)
	}
	defer l.Close()

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(ginlimit.Middleware(l))
	r.GET("/hello", func(c *gin.Context) {
		res, _ := ratelimit.FromContext(c.Request.Context())
		c.String(http.StatusOK, "hello, %d left\n", res.Remaining)
	})
	srv := httptest.NewServer(r)
	defer srv.Close()

	for range 3 {
		resp, err := http.Get(srv.URL + "/hello")
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s remaining %s, Retry-After set %t: %s", resp.StatusCode, resp.Header.Get("RateLimit-Policy"),
			resp.Header.Get("X-RateLimit-Remaining"), resp.Header.Get("Retry-After") != "", body)
	}
	// Output:
	// 200 "default";q=2;w=60 remaining 1, Retry-After set false: hello, 1 left
	// 200 "default";q=2;w=60 remaining 0, Retry-After set false: hello, 0 left
	// 429 "default";q=2;w=60 remaining 0, Retry-After set true: 429 Too Many Requests: rate limit exceeded, see Retry-After
}
