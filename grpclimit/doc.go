// Package grpclimit rate-limits gRPC servers with a ratelimit.Limiter:
// the Limiter that limits HTTP requests limits gRPC calls too, with the
// same Keyer, policies, options and store (Redis included), so that one
// client's HTTP requests and gRPC calls can share one count.
//
//	l, err := ratelimit.New(100, time.Minute, ratelimit.KeyByHeader("X-API-Key"))
//	...
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(auth, grpclimit.UnaryServerInterceptor(l)),
//		grpc.ChainStreamInterceptor(grpclimit.StreamServerInterceptor(l)),
//	)
//
// # How a call is seen
//
// Each call is described to the limiter as the HTTP/2 request that
// carries it, and decided with Limiter.Decide, so the extractors of
// package ratelimit key gRPC calls as they are:
//
//   - KeyByIP reads the peer's address (peer.FromContext) as RemoteAddr,
//     with the same rules: forwarding metadata such as x-forwarded-for is
//     ignored unless the IPConfig's TrustProxies or TrustedHops says the
//     peer is a proxy,
//     and IPv6 clients are grouped by /64. Key "ip:192.0.2.7". A peer that
//     is not an IP address (a Unix socket, bufconn) has no key.
//   - KeyByHeader("X-API-Key") reads the metadata "x-api-key": metadata
//     keys are the headers' names in lower case. Key "apikey:" + value.
//   - KeyByContext reads the call's context, where an authentication
//     interceptor chained before this one put the verified identity. Key
//     "id:" + identity.
//   - KeyByJWTSubject reads the "authorization" metadata ("Bearer ...").
//   - KeyByRoute reads the full method ("route:/pkg.Service/Method"), the
//     request's Pattern. Under grpc.UnknownServiceHandler the stream
//     interceptor also sees methods no service registered, which the
//     client names freely: do not key by route there.
//
// The keys carry the same kind prefixes as over HTTP, so an HTTP request
// and a gRPC call with the same API key count against one quota when one
// Limiter serves both. WithSkip, WithCost and the hooks receive the
// request too: its URL's path is the full method, its Header the
// metadata, and its context the call's, in which grpc.Method names the
// method. For a limit per method, key by the route too (ratelimit.KeyJoin
// with ratelimit.KeyByRoute) and give each method's keys their policies
// with ratelimit.WithLimits.
//
// # What the client sees
//
// A call the limiter serves reaches the handler, and the rate-limit headers
// the limiter sends over HTTP (see ratelimit.WithHeaders) go back as
// metadata under their names in lower case, with the same values:
//
//	ratelimit-policy: "default";q=100;w=60
//	ratelimit: "default";r=99;t=60
//	x-ratelimit-limit: 100
//	x-ratelimit-remaining: 99
//	x-ratelimit-reset: 60
//
// They go in the response's header metadata when the handler answers with
// a message, and in the trailer when it answers with an error only: a
// response with headers is one that grpc-go clients never retry.
//
// A call the limiter does not serve never reaches the handler, and ends
// with a status whose message never repeats what the client sent nor what
// failed inside:
//
//   - over the limit (Refuse): RESOURCE_EXHAUSTED with a google.rpc.RetryInfo
//     of the exact wait rounded up to the millisecond, a google.rpc.QuotaFailure
//     naming the violated policy (its subject and quota_id) with its limit
//     (quota_value) and window, and in the trailer the rate-limit metadata,
//     retry-after, and grpc-retry-pushback-ms: the same wait in milliseconds,
//     so that a grpc-go client with a retry policy for RESOURCE_EXHAUSTED
//     waits exactly as long as it must, then succeeds;
//   - no usable key, or an invalid cost (Reject): by the KeyError's HTTP
//     status, 401 as UNAUTHENTICATED (its challenge as www-authenticate
//     metadata), 403 as PERMISSION_DENIED, 400, 413, 431 and any other
//     4xx as INVALID_ARGUMENT, 502, 503 and 504 (a Keyer whose own backend
//     failed: a retry may succeed) as UNAVAILABLE, 500 (a misconfigured
//     Keyer, a KeyError of 429 included) and any other 5xx as INTERNAL; a
//     cost above a policy's limit is INVALID_ARGUMENT, not
//     RESOURCE_EXHAUSTED, since no wait can make it fit and clients retry
//     RESOURCE_EXHAUSTED;
//   - the store could not decide (Fail): UNAVAILABLE with a RetryInfo and
//     pushback of one second, as HTTP's 503 with Retry-After: 1.
//
// WithDryRun serves every call over the limit, with the metadata, and a
// call costing more than a policy's limit, uncounted and without it; a
// call without a usable key, or whose store failed, ends as above.
// WithFailOpen serves calls whose store failed, without the metadata.
// Four options of the Limiter do not apply to gRPC calls: WithCountIf (a
// served call stays counted, whatever its status), WithResultInContext
// (ratelimit.FromContext finds nothing in a handler's context; read the
// rate-limit metadata instead), and WithDeniedHandler and
// WithErrorHandler, which answer HTTP requests: a call ends with the
// status above whatever they would write.
//
// # Streams
//
// A stream counts once, when it opens, by default. With CountMessages
// each message the client sends counts when it is received, and a refused
// message ends the stream with the same RESOURCE_EXHAUSTED status.
package grpclimit
