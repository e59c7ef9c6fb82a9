// Package readme declares what the Go blocks of the repository's READMEs
// use without declaring: a README shows a fragment, and the handler, the
// limiter or the client it uses was made elsewhere. scripts/readme-check.sh
// compiles every block as a function in this package, with these names in
// scope, and states the rules at its top.
//
// Add a name here when a README block uses one it does not declare; give
// it the type a reader would expect. The package is never run.
package readme

//lint:file-ignore U1000 the README blocks use these names; nothing here does

import (
	"net/http"
	"net/netip"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/gorilla/mux"
	"github.com/justinas/alice"
	"github.com/labstack/echo/v4"
	"github.com/redis/go-redis/v9"

	"github.com/slidelog/ratelimit"
	"github.com/slidelog/ratelimit/redisstore"
)

// Handlers that the blocks route to.
var (
	hello, h http.HandlerFunc
	app      http.Handler
	logging  alice.Constructor
)

// Limiters that the blocks chain, made by ratelimit.New elsewhere.
var l, api, login, site, perIP, perKey *ratelimit.Limiter

// An echo v4 server; the blocks hold for v5 too.
var e *echo.Echo

// The Redis client that redisstore.New is given, and a store it made.
var (
	rdb redis.UniversalClient
	st  *redisstore.Store
)

// Proxy ranges that KeyByIP is told to trust.
var cloudflareRanges []netip.Prefix

// A KeyFunc of the reader's, and a customer's API key an operator knows.
var (
	keyByUser   ratelimit.KeyFunc
	customerKey string
)

// A store of the reader's, made from its clock.
func newMyStore(now func() time.Time) ratelimit.Store { return nil }

// Packages the blocks name without importing: goimports takes these paths
// from this file, and go mod tidy keeps them in examples' go.mod.
var (
	_ = chi.NewRouter
	_ = mux.NewRouter
	_ = redisstore.New
)
