// Command gin rate-limits a gin-gonic/gin server with ginlimit: a
// site-wide per-IP limit with r.Use, a per-key limit on an API group, and
// on one route a limit that counts failed logins only.
//
//	go -C examples run ./gin
package main

import (
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/examples/internal/serve"
	"github.com/slidelog/ratelimit/ginlimit"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()

	// Each limiter names its policy: a request can pass through two, and
	// the name in the RateLimit headers tells the client whose quota they
	// describe.
	site, err := ratelimit.New(300, time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("site"), ratelimit.WithResultInContext())
	if err != nil {
		log.Fatal(err)
	}
	defer site.Close()
	// KeyByHeader does not check keys: in production, put the limiter
	// behind the middleware that authenticates them.
	api, err := ratelimit.New(100, time.Minute, ratelimit.KeyByHeader("X-API-Key"), ratelimit.WithName("api"), ratelimit.WithResultInContext())
	if err != nil {
		log.Fatal(err)
	}
	defer api.Close()
	login, err := ratelimit.New(5, time.Minute, ratelimit.KeyByIP(), ratelimit.WithName("login"), ratelimit.WithCountIf(failedLogin))
	if err != nil {
		log.Fatal(err)
	}
	defer login.Close()

	gin.SetMode(gin.ReleaseMode)
	if err := serve.Run(*addr, newRouter(site, api, login)); err != nil {
		log.Fatal(err)
	}
}

// failedLogin keeps a login attempt counted only if it failed, so that
// a user who logs in is never locked out by their own successes.
func failedLogin(_ *http.Request, status int) bool {
	return status == http.StatusUnauthorized
}

// newRouter wires the limiters in. A request through two limiters counts
// in both, and its response shows the headers of the inner one.
//
// KeyByIP reads the TCP peer, not c.ClientIP(), which believes
// X-Forwarded-For from any peer unless SetTrustedProxies says otherwise.
func newRouter(site, api, login *ratelimit.Limiter) *gin.Engine {
	r := gin.New()
	r.Use(gin.Recovery(), ginlimit.Middleware(site)) // every route, per client IP

	r.GET("/", func(c *gin.Context) {
		c.String(http.StatusOK, "hello\n")
	})
	// A route of its own limiter: KeyByRoute needs a ServeMux pattern.
	r.POST("/login", ginlimit.Middleware(login), func(c *gin.Context) {
		if c.PostForm("password") != "open sesame" {
			c.AbortWithStatusJSON(http.StatusUnauthorized, gin.H{"error": "wrong password"})
			return
		}
		c.String(http.StatusOK, "welcome\n")
	})
	g := r.Group("/api", ginlimit.Middleware(api)) // the API routes, per API key
	g.GET("/hello", func(c *gin.Context) {
		res, _ := ratelimit.FromContext(c.Request.Context())
		c.JSON(http.StatusOK, gin.H{"remaining": res.Remaining, "limit": res.Limit})
	})
	return r
}
