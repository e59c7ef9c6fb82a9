// Package ginlimit rate-limits gin servers with a ratelimit.Limiter: one
// Limiter, its Keyer, policies, options and store (Redis included), for
// gin routes and net/http handlers alike.
//
//	l, err := ratelimit.New(100, time.Minute, ratelimit.KeyByIP())
//	...
//	r := gin.New()
//	r.Use(ginlimit.Middleware(l))
//
// # What the client sees
//
// Middleware answers every request as l.Handler does, since it is
// l.Handler: the rate-limit headers on every response the limiter
// decided, a refusal as 429 with Retry-After (RFC 9457 problem details to
// a client that asks for application/problem+json), a request without a
// usable key with the key error handler, a store failure with the error
// handler (see ratelimit.Limiter.Handler). A request the limiter does not
// pass on is aborted (gin.Context.Abort): no handler after Middleware
// runs for it, and nothing is added to the answer.
//
// # Redirects
//
// A limiter decides each request the client sends once. What gin answers
// before any middleware runs, its redirects of a trailing slash or a
// fixed path (RedirectTrailingSlash, RedirectFixedPath), is not counted
// and has no rate-limit headers; the request the client then sends to
// the redirect's target is counted. A request that a handler sends
// through the router again with Engine.HandleContext (an internal
// redirect, a legacy route forwarding to its successor) is the same
// request: a Middleware of a limiter that passed it on lets it through
// without deciding it again, with the headers and, under
// ratelimit.WithResultInContext, the Result of its one decision, and
// WithCountIf's keep sees the status its answer ends with. Middleware
// knows such a request by its context, so a handler that replaces
// c.Request before HandleContext derives the new request's context from
// c.Request's. A request that a handler serves through the engine's
// ServeHTTP is a request of its own, and decided.
//
// # What the handlers see
//
// A request the limiter passes on runs the rest of the chain with c.Next
// inside l.Handler, so that:
//
//   - c.Request is the request l.Handler passed on: under
//     ratelimit.WithResultInContext a handler reads the decision with
//     ratelimit.FromContext(c.Request.Context()), or with
//     ratelimit.FromContext(c) when the engine's ContextWithFallback is
//     set (gin.Context looks values up in the request's context only
//     then); a multipart form a handler parses on it (c.FormFile,
//     c.MultipartForm) is handed back to the request gin was given, so
//     that the server removes its temporary files as it does without
//     the limiter;
//   - c.Writer is gin's as before, with Status, Size, Written, Flush,
//     Hijack and the rest, and gin still sends the status of a response
//     that wrote no body only when the whole chain is done;
//   - under ratelimit.WithCountIf, keep is given the status gin holds,
//     c.Writer.Status(), once the handlers after Middleware have
//     returned, however they set it (c.JSON, c.String, c.Status,
//     c.AbortWithStatus): a status that middleware before Middleware
//     sets later is not seen. A connection hijacked through c.Writer
//     stays counted, as under l.Handler.
//
// # Keys
//
// The Keyer reads the *http.Request, never gin's view of it. KeyByIP
// reads the TCP peer (Request.RemoteAddr) with its own trusted-proxy
// rules, not c.ClientIP(), which believes X-Forwarded-For from any peer
// unless the engine's SetTrustedProxies says otherwise. KeyByRoute needs
// an http.ServeMux pattern, which gin routes do not set, and answers 500
// there: for a quota per endpoint give the route its own limiter
// (r.POST("/login", ginlimit.Middleware(login), handler)).
package ginlimit
